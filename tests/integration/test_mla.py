"""MLA models end to end: deepseek2 (DeepSeek-V2/V3 class) and xing4_0 (Xing4.0: MLA with
hyper-connections).

Three independent checks of the graph's arithmetic:
  * llama.cpp: tests/data/llamacpp/{deepseek2,xing4_0} hold tiny all-F32 files llama.cpp's
    tools wrote (q_lora and kv_lora, YaRN with mscale, a leading dense layer, sigmoid
    routing with a selection bias and expert groups, a shared expert; xing4_0 also four
    hyper-connection streams and an MTP block), 64 token ids, and llama.cpp's logits with
    an F32 cache. The band for F32 files: rms difference <= 0.5% of the logit std, top-1
    >= 0.98. EPQ's cache is F16, which llama.cpp's README puts at 0.08% from these logits;
    measured here 0.079% (deepseek2) and 0.083% (xing4_0), top-1 1.0, both paths.
  * the numpy reference (tests/reference/deepseek2.py, xing4_0.py) at every position on
    all-F32 synthetic files, with and without the query LoRA.
  * the engine against itself: paged against resident, and a cache that grows by the
    latent (kv_lora + rope values per layer) per token.
"""
import filecmp
import os
import sys
import unittest

import numpy as np

import harness
from harness import PLAN_MARGIN, path, plan, plan_bytes, plan_mib, run, synth
from logit_checks import band, engine_logits, llamacpp_logits, reference

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from deepseek2 import DeepSeek2  # noqa: E402
from logits_file import read_logits  # noqa: E402
from xing4_0 import Xing4_0  # noqa: E402

ARCHS = ("deepseek2", "xing4_0")
F32 = ["--type-expert", "F32", "--type-expert-down", "F32", "--type-attn", "F32", "--type-attn-v", "F32",
       "--type-embd", "F32", "--type-output", "F32", "--type-shexp", "F32"]
TEXT = "The old lighthouse keeper climbed the stairs every evening with a lamp and wrote down the color of the sea."




class AgainstLlamaCpp(unittest.TestCase):
    def test_logits_in_the_f32_band_in_one_batch_and_one_token_at_a_time(self):
        for arch in ARCHS:
            for args, name in [(["--batch", "64"], "logits.f32"), (["--batch", "1"], "logits-one-at-a-time.f32")]:
                with self.subTest(arch=arch, args=args):
                    out = engine_logits(reference(arch, "model.gguf"), path("llamacpp.logits"), *args,
                                        tokens=reference(arch, "tokens.i32"))
                    rms, top1 = band(read_logits(out)[1], llamacpp_logits(arch, name))
                    self.assertLessEqual(rms, 0.005)
                    self.assertGreaterEqual(top1, 0.98)

    def test_paged_is_bit_identical_to_resident(self):
        for arch in ARCHS:
            model, tokens = reference(arch, "model.gguf"), reference(arch, "tokens.i32")
            resident = engine_logits(model, path(f"{arch}-resident.logits"), tokens=tokens)
            out = plan(model, "--ram-budget", "64G")
            minimum = plan_bytes(out, "minimum budget:") + PLAN_MARGIN
            all_fit = plan_bytes(out, "budget that holds every expert:")
            for budget in (minimum, (minimum + all_fit) // 2):
                for io in ("uring", "pread"):
                    for batch in ("64", "1"):
                        with self.subTest(arch=arch, budget=budget, io=io, batch=batch):
                            paged = engine_logits(model, path("paged.logits"), "--ram-budget", str(budget), "--io", io,
                                                  "--batch", batch, tokens=tokens)
                            self.assertTrue(filecmp.cmp(resident, paged, shallow=False))


class AgainstNumpy(unittest.TestCase):
    """All-F32 weights: the engine and the float64 reference differ only by rounding."""

    def check(self, model, reference_model):
        ids = [int(x) for x in run("tokenize", "-m", model, "-p", TEXT).stdout.split()]
        expected = reference_model.forward(ids)[:-1]
        for args in (["--batch", "64"], ["--batch", "1"], ["--batch", "5"]):
            with self.subTest(model=os.path.basename(model), args=args):
                _, mine = read_logits(engine_logits(model, path("f32.logits"), *args, text=TEXT))
                self.assertEqual(mine.shape, expected.shape)
                # Measured (F16 caches both): rms 5e-6 (deepseek2) and 4e-5 (xing4_0) of the
                # logit std of 3, max 2e-4 and 1.1e-3; a structural error moves them by 10% or more.
                diff = mine - expected
                self.assertLess(np.sqrt(np.mean(diff * diff)) / np.std(expected), 2e-4)
                self.assertLess(np.max(np.abs(diff)), 5e-3)

    def test_deepseek2_with_and_without_the_query_lora(self):
        for name, extra in (("ds2-f32.gguf", []), ("ds2-plain-q-f32.gguf", ["--q-lora", "0"])):
            model = synth(name, "--arch", "deepseek2", "--preset", "tiny", *F32, *extra)
            self.check(model, DeepSeek2(model))

    def test_xing4_0(self):
        model = synth("xing-f32.gguf", "--arch", "xing4_0", "--preset", "tiny", *F32)
        self.check(model, Xing4_0(model))


class Cache(unittest.TestCase):
    def test_the_cache_grows_by_the_latent_per_token(self):
        model = synth("ds2-tiny.gguf", "--arch", "deepseek2", "--preset", "tiny")
        # Per token: 3 layers x (kv_lora 64 + rope 16) F16 values, and the attention scores'
        # 8 floats per thread: 3 x 160 + 2 x 32 = 544 bytes. The expanded form would cache
        # 4 heads x (48 + 32) values per layer, 1920 bytes more.
        state = [plan_mib(plan(model, "--ram-budget", "1G", "--ctx", str(ctx), "-t", "2"), "KV cache and compute scratch")
                 for ctx in (4096, 65536)]
        self.assertAlmostEqual(state[1] - state[0], 61440 * 544 / 2**20, delta=0.2)


class Files(unittest.TestCase):
    def test_the_mtp_block_is_not_run(self):
        model = synth("xing-tiny.gguf", "--arch", "xing4_0", "--preset", "tiny")
        self.assertIn("blk.4.nextn.eh_proj.weight", run("inspect", model).stdout)
        # Experts of layers 2 and 3 are paged (0 and 1 are dense); block 4's are not.
        self.assertRegex(plan(model, "--ram-budget", "64G"), r"100.0%\s+2 layers \(2\.\.3\)\n")
        greedy = ["-p", "hello", "-n", "8", "--temp", "0", "-t", "2"]
        minimum = plan_bytes(plan(model, "--ram-budget", "64G"), "minimum budget:") + PLAN_MARGIN
        self.assertEqual(run("run", "-m", model, "--ram-budget", str(minimum), *greedy).stdout, run("run", "-m", model, *greedy).stdout)

    def test_a_file_of_the_older_mla_layout_is_refused_in_one_line(self):
        model = synth("ds2-old.gguf", "--arch", "deepseek2", "--preset", "tiny")
        with open(model, "rb") as f:
            data = f.read()
        old = path("ds2-old-layout.gguf")
        with open(old, "wb") as f:  # the same file without attention.key_length_mla
            f.write(data.replace(b"deepseek2.attention.key_length_mla", b"deepseek2.attention.key_length_mlx"))
        proc = run("run", "-m", old, "-p", "hi", "-n", "1", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("older layout", proc.stderr)


if __name__ == "__main__":
    harness.main()
