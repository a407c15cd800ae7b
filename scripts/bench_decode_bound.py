#!/usr/bin/python3
"""Decode speed all in RAM against the memory-bandwidth bound, a read probe beside each run.

    scripts/bench_decode_bound.py MODEL [--runs 3] [--gen 128] [--epq build/epq]
                                  [--bench build/bench/epq_kernel_bench]

The bound is (read bandwidth) / (weights a decoded token reads), the second from `epq
inspect` ("weights read per decoded token"). Each round probes the read bandwidth with all
threads (the kernel bench's ReadBandwidth), decodes --gen tokens after a short prompt with
`epq run` (greedy, --ignore-eos, all threads), and probes again; the bound uses the mean
of the two probes. Where they differ by more than --steady (the machine's speed changed
around the run, as on shared VMs), the round is marked and left out of the summary.
Prints one line per round and the share of the bound the steady runs reached.
"""
import argparse
import re
import subprocess

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def checked(args):
    """The finished process of `args`; exits with its last line of errors if it failed or could not start."""
    try:
        proc = subprocess.run(args, capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise SystemExit(f"cannot run {args[0]}: {e.strerror}")
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise SystemExit(lines[-1] if lines else f"{args[0]} exited with status {proc.returncode}")
    return proc


def bytes_per_token(epq, model):
    out = checked([epq, "inspect", model]).stdout
    m = re.search(r"weights read per decoded token: ([\d.]+) (\w+)", out)
    if not m:
        raise SystemExit(f"{model}: `epq inspect` names no weights read per decoded token (not a Mixture-of-Experts model?)")
    return float(m.group(1)) * UNITS[m.group(2)]


def probe(bench):
    out = checked([bench, "--benchmark_filter=^ReadBandwidth/[0-9]+/", "--benchmark_format=console"]).stdout
    speeds = [float(v) for v in re.findall(r"GB/s=([\d.]+)", out)]
    if not speeds:
        raise SystemExit(f"no ReadBandwidth line from {bench}:\n{out}")
    return speeds[-1] * 1e9  # the last is the one with all threads


def decode(epq, model, gen):
    proc = checked([epq, "run", "-m", model, "-p", "Once upon a time", "-n", str(gen), "--ignore-eos", "--temp", "0"])
    m = re.search(r"generation: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)", proc.stderr)
    if not m:
        raise SystemExit(f"no timing line from {epq}:\n{proc.stderr}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--gen", type=int, default=128, help="tokens to decode per run (default 128)")
    p.add_argument("--steady", type=float, default=0.15, help="largest relative gap between the probes of a counted round (0.15)")
    p.add_argument("--epq", default="build/epq")
    p.add_argument("--bench", default="build/bench/epq_kernel_bench")
    a = p.parse_args()
    per_token = bytes_per_token(a.epq, a.model)
    print(f"{a.model}: {per_token / 1e9:.3f} GB read per decoded token; {a.gen} tokens per run")
    print(f"{'round':>5} {'probe before':>13} {'probe after':>12} {'bound tok/s':>12} {'decode tok/s':>13} {'share':>6}")
    shares = []
    for i in range(a.runs):
        before = probe(a.bench)
        speed = decode(a.epq, a.model, a.gen)
        after = probe(a.bench)
        bound = (before + after) / 2 / per_token
        steady = abs(before - after) <= a.steady * max(before, after)
        if steady:
            shares.append(speed / bound)
        print(f"{i + 1:>5} {before / 1e9:>8.1f} GB/s {after / 1e9:>7.1f} GB/s {bound:>12.1f} {speed:>13.2f} {speed / bound:>6.2f}"
              f"{'' if steady else '  (probes differ: not counted)'}")
    if shares:
        print(f"share of the bound, {len(shares)} steady runs of {a.runs}: {min(shares):.2f}-{max(shares):.2f}")
    else:
        print(f"no steady run of {a.runs}: the read bandwidth changed around every one")


if __name__ == "__main__":
    main()
