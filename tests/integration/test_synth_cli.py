"""`epq synth` and `epq inspect`: deterministic files, correct content, clear errors."""
import filecmp
import os
import re
import sys
import unittest

import harness
from harness import run, path, synth

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from gguf_reader import GGUFFile  # noqa: E402
import numpy as np  # noqa: E402

# A qwen35moe file that llama.cpp's tools wrote, for its key set.
QWEN35_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llamacpp", "qwen35moe", "model.gguf")

F32_ID = 0
# The keys llama.cpp's qwen35moe loader reads (and the converter writes), with the type
# `epq inspect` prints for each.
QWEN35_KEYS = {
    "block_count": "uint32", "context_length": "uint32", "embedding_length": "uint32",
    "attention.head_count": "uint32", "attention.head_count_kv": "uint32",
    "attention.key_length": "uint32", "attention.value_length": "uint32",
    "attention.layer_norm_rms_epsilon": "float32", "rope.dimension_count": "uint32",
    "rope.dimension_sections": "int32[4]", "rope.freq_base": "float32", "expert_count": "uint32",
    "expert_used_count": "uint32", "expert_feed_forward_length": "uint32",
    "expert_shared_feed_forward_length": "uint32", "full_attention_interval": "uint32",
    "ssm.conv_kernel": "uint32", "ssm.state_size": "uint32", "ssm.group_count": "uint32",
    "ssm.time_step_rank": "uint32", "ssm.inner_size": "uint32",
}


def metadata_types(model):
    """key -> type as `epq inspect` prints it (e.g. uint32, int32[4], string[661])."""
    out = run("inspect", model).stdout
    section = out.split("\nMetadata", 1)[1].split("\nTensors", 1)[0]
    return dict(re.findall(r"(?m)^  (\S+)\s+(\S+)", section))


def qwen35moe_tensors(m):
    """name -> (dims, must be F32) of a qwen35moe file, from its metadata (spec section 2)."""
    a = "qwen35moe."
    E, L = m[a + "embedding_length"], m[a + "block_count"]
    H, HKV, D = m[a + "attention.head_count"], m[a + "attention.head_count_kv"], m[a + "attention.key_length"]
    S, HK, HV, K = m[a + "ssm.state_size"], m[a + "ssm.group_count"], m[a + "ssm.time_step_rank"], m[a + "ssm.conv_kernel"]
    NE, FF, FS = m[a + "expert_count"], m[a + "expert_feed_forward_length"], m[a + "expert_shared_feed_forward_length"]
    interval, V = m[a + "full_attention_interval"], len(m["tokenizer.ggml.tokens"])
    t = {"token_embd.weight": ((E, V), False), "output_norm.weight": ((E,), True), "output.weight": ((E, V), False)}
    for il in range(L):
        b = f"blk.{il}."
        t[b + "attn_norm.weight"] = ((E,), True)
        t[b + "post_attention_norm.weight"] = ((E,), True)
        if (il + 1) % interval != 0:
            conv = 2 * HK * S + HV * S
            t[b + "attn_qkv.weight"] = ((E, conv), False)
            t[b + "attn_gate.weight"] = ((E, HV * S), False)
            t[b + "ssm_conv1d.weight"] = ((K, conv), True)
            t[b + "ssm_dt.bias"] = ((HV,), True)
            t[b + "ssm_a"] = ((HV,), True)
            t[b + "ssm_beta.weight"] = ((E, HV), False)
            t[b + "ssm_alpha.weight"] = ((E, HV), False)
            t[b + "ssm_norm.weight"] = ((S,), True)
            t[b + "ssm_out.weight"] = ((HV * S, E), False)
        else:
            t[b + "attn_q.weight"] = ((E, 2 * H * D), False)
            t[b + "attn_k.weight"] = ((E, HKV * D), False)
            t[b + "attn_v.weight"] = ((E, HKV * D), False)
            t[b + "attn_output.weight"] = ((H * D, E), False)
            t[b + "attn_q_norm.weight"] = ((D,), True)
            t[b + "attn_k_norm.weight"] = ((D,), True)
        t[b + "ffn_gate_inp.weight"] = ((E, NE), True)
        t[b + "ffn_gate_exps.weight"] = ((E, FF, NE), False)
        t[b + "ffn_up_exps.weight"] = ((E, FF, NE), False)
        t[b + "ffn_down_exps.weight"] = ((FF, E, NE), False)
        t[b + "ffn_gate_inp_shexp.weight"] = ((E,), True)
        t[b + "ffn_gate_shexp.weight"] = ((E, FS), False)
        t[b + "ffn_up_shexp.weight"] = ((E, FS), False)
        t[b + "ffn_down_shexp.weight"] = ((FS, E), False)
    return t


def f32_values(f, name):
    return np.frombuffer(f.tensor_bytes(name).tobytes(), dtype="<f4")


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

    def test_inspect_counts_the_weights_a_decoded_token_reads(self):
        # Every tensor but the routed experts (top-k of them count, as the working set) and
        # the token embeddings, which count only where the output layer is tied to them.
        def printed_bytes(text):
            number, unit = text.split()
            return float(number) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]

        for tied in (False, True):
            model = path(f"read-per-token-{tied}.gguf")
            run("synth", "-q", "--preset", "tiny", *(["--tied-output"] if tied else []), "-o", model)
            out = run("inspect", model).stdout
            sizes = dict(re.findall(r"^  (\S+\.weight)\s+\S+\s+\[[^]]*\]\s+\d+\s+(\d+)$", out, re.M))
            other = sum(int(b) for name, b in sizes.items() if "_exps" not in name and (tied or name != "token_embd.weight"))
            working_set = printed_bytes(re.search(r"working set per token: ([\d.]+ \w+)", out).group(1))
            total, rest = re.search(r"weights read per decoded token: ([\d.]+ \w+) \(the working set and ([\d.]+ \w+)", out).groups()
            self.assertAlmostEqual(printed_bytes(rest) / other, 1, delta=0.01)
            self.assertAlmostEqual(printed_bytes(total) / (other + working_set), 1, delta=0.01)
            self.assertEqual("output.weight" in sizes, not tied)

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


class SynthQwen35MoeTest(unittest.TestCase):
    def tiny(self):
        return synth("q35-tiny.gguf", "--arch", "qwen35moe", "--preset", "tiny")

    def test_tiny_has_the_keys_types_and_tensors_of_the_spec(self):
        model = self.tiny()
        f = GGUFFile(model)
        m = f.metadata
        self.assertEqual(m["general.architecture"], "qwen35moe")
        self.assertEqual(m["tokenizer.ggml.model"], "gpt2")
        self.assertEqual(m["tokenizer.ggml.pre"], "qwen35")
        types = metadata_types(model)
        for key, kind in QWEN35_KEYS.items():
            self.assertEqual(types.get("qwen35moe." + key), kind, key)
        a = "qwen35moe."
        self.assertEqual(m[a + "rope.dimension_sections"], [3, 3, 2, 0])
        self.assertEqual(sum(m[a + "rope.dimension_sections"]), m[a + "rope.dimension_count"] // 2)
        self.assertEqual(m[a + "ssm.inner_size"], m[a + "ssm.time_step_rank"] * m[a + "ssm.state_size"])
        self.assertEqual(m[a + "block_count"], 8)
        self.assertEqual(m[a + "full_attention_interval"], 4)

        want = qwen35moe_tensors(m)
        self.assertEqual({n: t.dims for n, t in f.tensors.items()}, {n: d for n, (d, _) in want.items()})
        for name, (_, f32) in want.items():
            if f32:
                self.assertEqual(f.tensors[name].type, F32_ID, name)
        # Both layer kinds: Gated DeltaNet at 0-2 and 4-6, full attention at 3 and 7.
        self.assertIn("blk.2.ssm_a", f.tensors)
        self.assertIn("blk.3.attn_q.weight", f.tensors)
        self.assertNotIn("blk.3.ssm_a", f.tensors)
        self.assertIn("blk.7.attn_k_norm.weight", f.tensors)

    def test_tiny_values_follow_the_converter_conventions(self):
        f = GGUFFile(self.tiny())
        for il in [0, 1, 2, 4, 5, 6]:
            a = f32_values(f, f"blk.{il}.ssm_a")  # A = -exp(A_log)
            self.assertTrue(np.all(a < 0), a)
            dt = f32_values(f, f"blk.{il}.ssm_dt.bias")
            self.assertTrue(np.all(np.abs(dt) < 4), dt)
            conv = f32_values(f, f"blk.{il}.ssm_conv1d.weight")
            self.assertLess(float(np.abs(conv).max()), 4)
        for name in ["output_norm.weight", "blk.0.attn_norm.weight", "blk.0.post_attention_norm.weight",
                     "blk.0.ssm_norm.weight", "blk.3.attn_q_norm.weight", "blk.3.attn_k_norm.weight"]:
            w = f32_values(f, name)  # stored with the +1 already added
            self.assertAlmostEqual(float(w.mean()), 1.0, delta=0.1, msg=name)

    def test_key_set_and_types_match_a_file_llama_cpp_wrote(self):
        def without_token_counts(types):  # vocabularies differ in size; all else must match
            return {k: re.sub(r"\[\d+\]$", "[]", v) if k.startswith("tokenizer.") else v for k, v in types.items()}
        ours, theirs = metadata_types(self.tiny()), metadata_types(QWEN35_REFERENCE)
        self.assertEqual(len(ours), 37)
        self.assertEqual(without_token_counts(ours), without_token_counts(theirs))
        ref = GGUFFile(QWEN35_REFERENCE)
        f = GGUFFile(self.tiny())
        self.assertEqual(list(f.tensors), list(ref.tensors))  # same names, same order
        for name, t in ref.tensors.items():
            self.assertEqual(f.tensors[name].type == F32_ID, t.type == F32_ID, name)

    def test_same_seed_gives_identical_bytes_whatever_the_thread_count(self):
        a, b = path("q35-det-a.gguf"), path("q35-det-b.gguf")
        common = ["synth", "-q", "--arch", "qwen35moe", "--layers", "4", "--seed", "3", "--zipf", "1"]
        run(*common, "-t", "1", "-o", a)
        run(*common, "-t", "2", "-o", b)
        self.assertTrue(filecmp.cmp(a, b, shallow=False))

    def test_shape_flags_and_types(self):
        model = path("q35-custom.gguf")
        run("synth", "-q", "--arch", "qwen35moe", "--layers", "6", "--full-attention-interval", "2", "--experts", "4",
            "--expert-used", "2", "--ssm-state", "32", "--ssm-groups", "1", "--ssm-heads", "3", "--ssm-conv-kernel", "3",
            "--shared-expert-ffn", "512", "--rope-dims", "32", "--heads", "2", "--heads-kv", "1", "--vocab", "1000",
            "--type-shexp", "BF16", "--type-attn", "F16", "--type-router", "F16", "--tied-output", "-o", model)
        f = GGUFFile(model)
        m = f.metadata
        a = "qwen35moe."
        self.assertEqual(m[a + "ssm.time_step_rank"], 3)
        self.assertEqual(m[a + "ssm.inner_size"], 96)
        self.assertEqual(m[a + "rope.dimension_sections"], [6, 5, 5, 0])
        want = qwen35moe_tensors(m)
        del want["output.weight"]
        self.assertEqual({n: t.dims for n, t in f.tensors.items()}, {n: d for n, (d, _) in want.items()})
        self.assertIn("blk.1.attn_q.weight", f.tensors)  # interval 2: layers 1, 3, 5 are full attention
        self.assertIn("blk.4.ssm_out.weight", f.tensors)
        self.assertEqual(f.tensors["blk.1.attn_q.weight"].dims, (256, 2 * 2 * 64))
        out = run("inspect", model).stdout
        self.assertRegex(out, r"blk\.0\.ffn_down_shexp\.weight\s+BF16\s+\[512, 256\]")
        self.assertRegex(out, r"blk\.0\.ssm_alpha\.weight\s+F16")
        self.assertRegex(out, r"blk\.0\.ffn_gate_inp\.weight\s+F16")
        self.assertRegex(out, r"blk\.0\.ffn_gate_inp_shexp\.weight\s+F32")
        # The vocabulary is padded with unused tokens after the special ones.
        tokens, kinds = m["tokenizer.ggml.tokens"], m["tokenizer.ggml.token_type"]
        self.assertEqual(len(tokens), 1000)
        self.assertEqual(tokens[m["tokenizer.ggml.eos_token_id"]], "<|im_end|>")
        self.assertEqual(tokens[-1], "[PAD999]")
        self.assertEqual(kinds[-1], 5)

    def test_presets_have_the_real_proportions(self):
        # One layer of each preset (a Gated DeltaNet layer), with few experts, to stay small.
        for name, embd, state, groups, heads, head_dim, rope in [("small", 1024, 128, 8, 16, 128, 32),
                                                                 ("qwen3.6-35b-a3b", 2048, 128, 16, 32, 256, 64)]:
            model = path(f"q35-{name}-1.gguf")
            run("synth", "-q", "--arch", "qwen35moe", "--preset", name, "--layers", "1", "--experts", "8", "--vocab", "0",
                "-o", model)
            f = GGUFFile(model)
            m = f.metadata
            a = "qwen35moe."
            self.assertEqual((m[a + "embedding_length"], m[a + "ssm.state_size"], m[a + "ssm.group_count"],
                              m[a + "ssm.time_step_rank"], m[a + "attention.key_length"], m[a + "rope.dimension_count"]),
                             (embd, state, groups, heads, head_dim, rope), name)
            self.assertEqual({n: t.dims for n, t in f.tensors.items()},
                             {n: d for n, (d, _) in qwen35moe_tensors(m).items()})
            if name == "qwen3.6-35b-a3b":
                self.assertEqual(m[a + "rope.dimension_sections"], [11, 11, 10, 0])
                self.assertEqual(m[a + "context_length"], 262144)
                self.assertEqual(m[a + "rope.freq_base"], 1e7)
                self.assertEqual((m[a + "expert_feed_forward_length"], m[a + "expert_shared_feed_forward_length"]), (512, 512))
                self.assertEqual(f.tensors["blk.0.attn_qkv.weight"].dims, (2048, 8192))
            os.remove(model)

    def test_bad_input_gets_one_clear_line(self):
        q35 = ["synth", "--arch", "qwen35moe", "-o", path("y.gguf")]
        cases = [
            (["synth", "--arch", "mamba", "-o", path("y.gguf")], "unknown architecture 'mamba'"),
            (q35 + ["--preset", "qwen3-30b-a3b"], "'qwen3-30b-a3b' is a qwen3moe preset"),
            (["synth", "--preset", "qwen3.6-35b-a3b", "-o", path("y.gguf")], "add --arch qwen35moe"),
            (q35 + ["--preset", "huge"], "unknown preset 'huge' for --arch qwen35moe"),
            (["synth", "--ssm-state", "64", "-o", path("y.gguf")], "--ssm-state applies to --arch qwen35moe only"),
            (["synth", "--type-shexp", "Q8_0", "-o", path("y.gguf")], "--type-shexp does not apply to --arch qwen3moe"),
            (q35 + ["--yarn-factor", "4"], "--yarn-factor does not apply to --arch qwen35moe"),
            (q35 + ["--sliding-window", "8"], "--sliding-window applies to --arch laguna only"),
            (q35 + ["--kv-lora", "64"], "--kv-lora applies to --arch deepseek2 or xing4_0 only"),
            (["synth", "--arch", "laguna", "--heads-swa", "5", "-o", path("y.gguf")], "--heads-swa 5 is not a multiple of --heads-kv 2"),
            (["synth", "--arch", "laguna", "--dense-layers", "6", "-o", path("y.gguf")], "--dense-layers must be 0..5"),
            (["synth", "--arch", "deepseek2", "--heads-kv", "2", "-o", path("y.gguf")], "MLA files have one KV head"),
            (["synth", "--arch", "deepseek2", "--expert-groups", "3", "-o", path("y.gguf")], "--expert-groups 3 must divide --experts 8"),
            (["synth", "--arch", "xing4_0", "--preset", "deepseek-v3", "-o", path("y.gguf")], "'deepseek-v3' is a deepseek2 preset"),
            (q35 + ["--ssm-heads", "5"], "--ssm-heads 5 is not a multiple of --ssm-groups 2"),
            (q35 + ["--rope-dims", "80"], "--rope-dims must be even and at most --head-dim 64"),
            (q35 + ["--full-attention-interval", "0"], "--full-attention-interval must be positive"),
            (q35 + ["--shared-expert-ffn", "100"], "multiple of 32"),
            (q35 + ["--ssm-state", "20"], "multiple of 32"),
            (q35 + ["--vocab", "100"], "--vocab 100 is smaller than"),
        ]
        for args, message in cases:
            proc = run(*args, check=False)
            self.assertNotEqual(proc.returncode, 0, args)
            self.assertIn(message, proc.stderr, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertFalse(os.path.exists(path("y.gguf")))


if __name__ == "__main__":
    harness.main()
