#!/usr/bin/env python3
"""The kernel set: which one runs, EPQ_KERNELS to force one, and the whole model on the
scalar reference kernels against the SIMD ones."""
import os
import re
import unittest

import harness
from harness import run, path, synth

TEXT = ("The river ran past the old mill and under the stone bridge, where the children of the "
        "village used to gather in the long summer evenings to tell stories and watch the boats. ") * 2


def with_kernels(name):
    env = dict(os.environ)
    env["EPQ_KERNELS"] = name
    return env


def default_env():
    env = dict(os.environ)
    env.pop("EPQ_KERNELS", None)
    return env


class KernelSets(unittest.TestCase):
    def test_version_names_the_kernel_set(self):
        out = run("--version", env=default_env()).stdout
        self.assertRegex(out, r"dot kernels: (avx2|avx512|avx512-full-width);")
        # With AVX-512: `avx512` on AMD family 19h (Zen 4, split 512-bit units),
        # `avx512-full-width` on the rest (Zen 5 and later, Intel).
        with open("/proc/cpuinfo") as f:
            info = f.read()
        family = re.search(r"^cpu family\s*:\s*(\d+)", info, re.M)
        amd_family = int(family.group(1)) if "AuthenticAMD" in info and family is not None else 0
        expected = "avx512" if amd_family == 0x19 else "avx512-full-width"
        if "VNNI: yes" in out:
            self.assertIn(f"dot kernels: {expected};", out)
        else:
            self.assertIn("dot kernels: avx2;", out)
        self.assertIn("dot kernels: scalar;", run("--version", env=with_kernels("scalar")).stdout)

    def test_unknown_or_unavailable_set_gets_one_clear_line(self):
        proc = run("--version", check=False, env=with_kernels("neon"))
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stderr.strip().splitlines(),
                         ["epq: error: EPQ_KERNELS=neon: not available on this CPU (choose scalar, avx2, avx512 or avx512-full-width)"])
        # Commands that load a model refuse before loading it; serve before it listens.
        model = synth("tiny.gguf", "--preset", "tiny", "--layers", "2")
        for args in (["run", "-m", model, "-p", "hi", "-n", "1"], ["serve", "-m", model, "--port", "18997"]):
            proc = run(*args, check=False, timeout=60, env=with_kernels("neon"))
            self.assertEqual(proc.returncode, 1, args)
            self.assertEqual(proc.stderr.strip().splitlines()[-1],
                             "epq: error: EPQ_KERNELS=neon: not available on this CPU (choose scalar, avx2, avx512 or avx512-full-width)")
        has_avx512 = "VNNI: yes" in run("--version", env=default_env()).stdout
        for name in ("avx512", "avx512-full-width"):  # any AVX-512 set, whichever this CPU would take
            proc = run("--version", check=False, env=with_kernels(name))
            if has_avx512:
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn(f"dot kernels: {name};", proc.stdout)
            else:
                self.assertEqual(proc.returncode, 1)
                self.assertIn(f"EPQ_KERNELS={name}: not available on this CPU", proc.stderr)

    def test_scalar_kernels_give_the_same_model(self):
        # The scalar kernels dequantize and sum in double; the SIMD ones sum int8 products
        # in int32 and floats in another order. Through 2 layers of a random-weight model
        # that moves logits slightly (and flips near-ties), never more.
        model = synth("tiny.gguf", "--preset", "tiny", "--layers", "2")
        text = path("text.txt")
        with open(text, "w") as f:
            f.write(TEXT)
        logits = path("simd.logits")
        run("perplexity", "-m", model, "-f", text, "--all-positions", "--logits-out", logits, env=default_env())
        out = run("perplexity", "-m", model, "-f", text, "--all-positions", "--compare", logits,
                  env=with_kernels("scalar")).stdout
        m = re.search(r"mean KL ([0-9.e+-]+), max KL ([0-9.e+-]+), top-1 agreement ([0-9.]+)%", out)
        self.assertIsNotNone(m, out)
        mean_kl, max_kl, top1 = float(m.group(1)), float(m.group(2)), float(m.group(3))
        self.assertLess(mean_kl, 1e-3, out)
        self.assertLess(max_kl, 1e-2, out)
        self.assertGreater(top1, 90, out)


if __name__ == "__main__":
    harness.main()
