"""`epq synth` and `epq inspect`: deterministic files, correct content, clear errors."""
import filecmp
import os
import unittest

import harness
from harness import run, path, synth


class SynthTest(unittest.TestCase):
    def test_same_seed_gives_identical_bytes_whatever_the_thread_count(self):
        a = path("det-a.gguf")
        b = path("det-b.gguf")
        run("synth", "-q", "--preset", "tiny", "--seed", "7", "--zipf", "1", "-t", "1", "-o", a)
        run("synth", "-q", "--preset", "tiny", "--seed", "7", "--zipf", "1", "-t", "2", "-o", b)
        self.assertTrue(filecmp.cmp(a, b, shallow=False))
        c = path("det-c.gguf")
        run("synth", "-q", "--preset", "tiny", "--seed", "8", "-o", c)
        self.assertFalse(filecmp.cmp(a, c, shallow=False))

    def test_inspect_reports_composition_experts_and_kv(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        out = run("inspect", model).stdout
        for needle in ["qwen3moe.expert_used_count", "tokenizer.ggml.pre", "blk.3.ffn_down_exps.weight",
                       "routed experts", "Routed experts per layer", "working set per token",
                       "KV cache (F16): 2.00 KiB per token", "<|im_start|>"]:
            self.assertIn(needle, out)
        # 4 layers x 2 used x (2 x 256x256 Q4_K + 256x256 Q6_K) bytes
        expert = 2 * 256 * 256 // 256 * 144 + 256 * 256 // 256 * 210
        self.assertIn(f"({2} experts x {4} layers)", out)
        self.assertEqual(expert, 127488)

    def test_dequant_prints_values(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        out = run("inspect", model, "--tensor", "blk.0.attn_norm.weight", "--dequant", "4").stdout
        values = [float(v) for v in out.splitlines()[1].split()]
        self.assertEqual(len(values), 4)
        for v in values:  # norm gains are drawn around 1
            self.assertTrue(0.5 < v < 1.5, v)

    def test_types_and_shapes_follow_options(self):
        model = path("custom.gguf")
        run("synth", "-q", "--layers", "2", "--experts", "4", "--expert-used", "2", "--type-expert", "Q8_0",
            "--type-expert-down", "Q5_K", "--type-attn", "BF16", "--tail-expert-type", "BF16", "--tail-layers", "1",
            "--tied-output", "-o", model)
        out = run("inspect", model).stdout
        self.assertRegex(out, r"blk\.0\.ffn_gate_exps\.weight\s+Q8_0\s+\[256, 256, 4\]")
        self.assertRegex(out, r"blk\.0\.ffn_down_exps\.weight\s+Q5_K")
        self.assertRegex(out, r"blk\.1\.ffn_down_exps\.weight\s+BF16")
        self.assertRegex(out, r"blk\.1\.attn_q\.weight\s+BF16")
        self.assertNotRegex(out, r"(?m)^\s+output\.weight")
        self.assertRegex(out, r"(?m)^\s+output_norm\.weight")

    def test_bad_input_gets_one_clear_line(self):
        cases = [
            (["synth", "--preset", "huge", "-o", path("x.gguf")], "unknown preset 'huge'"),
            (["synth", "--type-expert", "Q9_Z", "-o", path("x.gguf")], "unknown tensor type 'Q9_Z'"),
            (["synth", "--type-expert", "IQ2_XXS", "-o", path("x.gguf")], "IQ2_XXS is not supported"),
            (["synth", "--embd", "100", "-o", path("x.gguf")], "multiple of 256"),
            (["synth", "--expert-used", "9", "-o", path("x.gguf")], "exceeds --experts 8"),
            (["synth", "-o", "/nonexistent-dir/x.gguf"], "cannot create"),
            (["inspect", path("missing.gguf")], "cannot open"),
        ]
        for args, message in cases:
            proc = run(*args, check=False)
            self.assertNotEqual(proc.returncode, 0, args)
            self.assertIn(message, proc.stderr, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(path("x.gguf")))

    def test_inspect_rejects_garbage_and_truncation(self):
        garbage = path("garbage.gguf")
        with open(garbage, "wb") as f:
            f.write(b"not a model at all" * 10)
        proc = run("inspect", garbage, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("bad magic", proc.stderr)
        model = synth("tiny.gguf", "--preset", "tiny")
        truncated = path("truncated.gguf")
        with open(model, "rb") as src, open(truncated, "wb") as dst:
            dst.write(src.read(os.path.getsize(model) // 2))
        proc = run("inspect", truncated, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("extends past the end of the file", proc.stderr)


if __name__ == "__main__":
    harness.main()
