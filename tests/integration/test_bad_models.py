"""Models EPQ cannot run get one clear line and a non-zero exit: unsupported tensor types
(named with the tensor), unsupported architectures (with the supported list), missing
tensors, truncated files. Also: results do not depend on the thread count."""
import filecmp
import os
import shutil
import unittest

import harness
from harness import run, path, synth

TYPE_IDS = {"Q6_K": 14, "IQ2_XXS": 16}


def tensor_type_offset(model, name):
    """Byte offset of a tensor's type id in the GGUF header (found by its name)."""
    with open(model, "rb") as f:
        header = f.read(1 << 20)
    key = len(name).to_bytes(8, "little") + name.encode()
    at = header.index(key) + len(key)
    n_dims = int.from_bytes(header[at:at + 4], "little")
    return at + 4 + 8 * n_dims


def patched(name, model, offset, data):
    out = path(name)
    shutil.copy(model, out)
    with open(out, "r+b") as f:
        f.seek(offset)
        f.write(data)
    return out


def expect_error(test, model, fragment):
    proc = run("run", "-m", model, "-p", "hi", "-n", "1", check=False)
    test.assertNotEqual(proc.returncode, 0)
    test.assertIn(fragment, proc.stderr)
    test.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
    test.assertEqual(proc.stdout, "")


class BadModels(unittest.TestCase):
    def test_unsupported_tensor_type_is_named_with_its_tensor(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        name = "blk.1.ffn_down_exps.weight"  # Q6_K; IQ2_XXS blocks are smaller, so the file stays valid
        offset = tensor_type_offset(model, name)
        with open(model, "rb") as f:
            f.seek(offset)
            self.assertEqual(int.from_bytes(f.read(4), "little"), TYPE_IDS["Q6_K"])
        bad = patched("iq2.gguf", model, offset, TYPE_IDS["IQ2_XXS"].to_bytes(4, "little"))
        expect_error(self, bad, f"tensor '{name}' has type IQ2_XXS, which EPQ does not support")
        proc = run("inspect", bad, "--tensor", name, check=False)
        self.assertIn("IQ2_XXS", proc.stderr)

    def test_unsupported_architecture_lists_the_supported_ones(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        with open(model, "rb") as f:
            header = f.read(1 << 16)
        bad = patched("arch.gguf", model, header.index(b"qwen3moe"), b"qwen9moe")
        expect_error(self, bad, "unsupported architecture 'qwen9moe' (supported: qwen3moe, qwen35moe, laguna, deepseek2, xing4_0)")

    def test_missing_tensor(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        with open(model, "rb") as f:
            header = f.read(1 << 20)
        name = b"blk.2.attn_k_norm.weight"
        bad = patched("missing.gguf", model, header.index(name), b"blk.2.attn_x_norm.weight")
        expect_error(self, bad, "missing tensor 'blk.2.attn_k_norm.weight'")

    def test_truncated_file(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        bad = path("truncated.gguf")
        with open(model, "rb") as src, open(bad, "wb") as dst:
            dst.write(src.read(os.path.getsize(model) - 1000))
        expect_error(self, bad, "extends past the end of the file")
        proc = run("run", "-m", bad, "-p", "hi", "--ram-budget", "1G", check=False)
        self.assertIn("extends past the end of the file", proc.stderr)

    def test_not_a_model_and_bad_flags(self):
        proc = run("run", "-m", "/etc/hostname", "-p", "hi", check=False)
        self.assertIn("bad magic", proc.stderr)
        model = synth("tiny.gguf", "--preset", "tiny")
        for args, fragment in [(["--ram-budget", "lots"], "--ram-budget"), (["--evict", "random"], "--evict"),
                               (["--expert-used", "99"], "--expert-used 99 is out of range"), (["--ctx", "0"], "--ctx")]:
            proc = run("run", "-m", model, "-p", "hi", *args, check=False)
            self.assertNotEqual(proc.returncode, 0, args)
            self.assertIn(fragment, proc.stderr, args)


class Determinism(unittest.TestCase):
    def test_logits_identical_across_runs_and_thread_counts(self):
        model = synth("tiny.gguf", "--preset", "tiny")
        text = path("det.txt")
        with open(text, "w") as f:
            f.write("The river ran past the old mill and under the stone bridge, where the children gathered.")
        outs = []
        for threads in ("1", "2", "2"):
            out = path(f"det-{len(outs)}.logits")
            run("perplexity", "-m", model, "-f", text, "--all-positions", "-t", threads, "--logits-out", out)
            outs.append(out)
        self.assertTrue(filecmp.cmp(outs[1], outs[2], shallow=False), "two runs with 2 threads differ")
        self.assertTrue(filecmp.cmp(outs[0], outs[1], shallow=False), "1 and 2 threads differ")


if __name__ == "__main__":
    harness.main()
