"""Shared plumbing for integration tests: the epq binary, a scratch directory, and
models synthesized once per test run.

Each test script is run by ctest as:  python3 test_x.py --epq PATH --workdir DIR
"""
import argparse
import os
import re
import subprocess
import sys
import unittest

EPQ = None
WORKDIR = None

# What to add to a budget `epq plan` printed before a run uses it: the plan counts its own
# process's measured size rounded up to a whole MiB, and a run measures itself again and can
# land one MiB higher, with a few KiB more of kernel page tables for that MiB.
PLAN_MARGIN = (1 << 20) + (1 << 16)



def _no_aslr_wrapper():
    """setarch -R (address-space randomisation off) where the kernel lets us; else nothing."""
    try:
        ok = subprocess.run(["setarch", "-R", "true"], capture_output=True).returncode == 0
    except OSError:
        ok = False
    return ("setarch", "-R") if ok else ()


# A wrapper for run() that turns address-space randomisation off for the command.
NO_ASLR = _no_aslr_wrapper()


def run(*args, check=True, timeout=600, env=None, input=None, wrapper=()):
    """Runs epq with args (under wrapper, e.g. NO_ASLR); returns the CompletedProcess (text mode)."""
    proc = subprocess.run([*wrapper, EPQ, *map(str, args)], capture_output=True, text=True, errors="surrogateescape",
                          timeout=timeout, env=env, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"epq {' '.join(map(str, args))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def path(name):
    return os.path.join(WORKDIR, name)


def plan(model, *args):
    """`epq plan`'s output."""
    return run("plan", "-m", model, *args).stdout


def plan_bytes(out, label):
    """A byte count of `epq plan`'s output, from the line that starts with label."""
    return int(re.search(re.escape(label) + r".*?\((\d+) bytes", out).group(1))


def plan_mib(out, label):
    """A ledger line of `epq plan`'s output, in MiB."""
    value, unit = re.search(re.escape(label) + r"\s+([\d.]+) (KiB|MiB|GiB)", out).groups()
    return float(value) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


def synth(name, *args):
    """Synthesizes a model once into the work directory and returns its path."""
    out = path(name)
    if not os.path.exists(out):
        run("synth", "-q", "-o", out, *args)
    return out


def main():
    global EPQ, WORKDIR
    parser = argparse.ArgumentParser()
    parser.add_argument("--epq", required=True)
    parser.add_argument("--workdir", required=True)
    args, rest = parser.parse_known_args()
    EPQ = os.path.abspath(args.epq)
    WORKDIR = os.path.abspath(args.workdir)
    os.makedirs(WORKDIR, exist_ok=True)
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
