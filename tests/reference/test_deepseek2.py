#!/usr/bin/python3
"""Self-checks of the deepseek2 reference (no engine needed):

    /usr/bin/python3 tests/reference/test_deepseek2.py [-v]

- NORM rope: adjacent pairs rotate, magnitude 1 under YaRN with yarn_log_multiplier, a
  score depends on the position difference only; group-limited selection keeps the groups
  of highest top-2 sum (not of highest maximum);
- on llama.cpp's reference folder (tests/data/llamacpp/deepseek2, or DEEPSEEK2_REFERENCE):
  the file's plan is read as the spec says (sizes, YaRN mscale and kq_scale, groups), the
  absorbed MLA form equals the expanded one (per layer and for the whole model, to
  ~1e-10), a legacy attn_kv_b layout gives the same model, a resumed pass and
  token-by-token decoding agree with a full pass, and the
  logits match llama.cpp's (F32 cache, flash attention off), one batch and one token at a
  time, at the folder README's bar for F32 files and at a tight bar; with a float16 cache
  still within the README's bar; structural errors (NEOX pairing, no group limit) fail.
"""
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import deepseek2  # noqa: E402
from blocks import (apply_rope, apply_rope_norm, limit_to_groups, rms_norm,  # noqa: E402
                    rope_cos_sin)
from compare_llamacpp import assert_matches, load, metrics  # noqa: E402
from deepseek2 import DeepSeek2, decode_token_by_token  # noqa: E402

REFERENCE = os.environ.get("DEEPSEEK2_REFERENCE", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "data", "llamacpp", "deepseek2"))
# The folder README's bar for the F32 files: rms difference <= 0.5% of the logit std, top-1
# agreement >= 0.98. Measured (float64, F32 cache): 8.3e-5% / 1.000 (one batch), 8.2e-5% /
# 1.000 (one token at a time); float32 1.5e-4%; a float16 cache 0.079% / 1.000 (llama.cpp's
# own F16-cache logits lie 0.08% from these). TIGHT is 100x the measured F32 difference:
# structural errors land at 36-68% (NEOX pairing 68%, kq without mscale^2 53%, rope
# magnitude 1+0.1 ln F 55%, no YaRN 45%, no group limit 43%, group score = max 36%).
MAX_RMS, MIN_TOP1, TIGHT = 0.005, 0.98, 1e-4


class ExpandedDeepSeek2(DeepSeek2):
    """The whole model with the expanded MLA form (full passes only: no cache)."""

    def attention(self, layer, h, pos, cos, sin, past):
        out, k, _ = self.attention_expanded(layer, h, pos, cos, sin)
        return out, k


class RopeAndGroupsTest(unittest.TestCase):
    def test_norm_rope_pairs_and_magnitude(self):
        rng = np.random.default_rng(5)
        n_rot, base, factor = 16, 10000.0, 16.0
        pos = np.arange(40)
        cos, sin = rope_cos_sin(pos, n_rot, base, (factor, 256),
                                1.0 / (1.0 + 0.1 * math.log(factor)))
        np.testing.assert_allclose(cos * cos + sin * sin, 1.0, rtol=0, atol=1e-12)
        x = rng.standard_normal((40, 3, n_rot + 4))
        y = apply_rope_norm(x, cos, sin, n_rot)
        # Pair (2i, 2i+1) rotates by angle i: its norm is kept, the rest passes through.
        pairs = lambda a: a[..., :n_rot].reshape(40, 3, n_rot // 2, 2)   # noqa: E731
        np.testing.assert_allclose(np.linalg.norm(pairs(y), axis=3),
                                   np.linalg.norm(pairs(x), axis=3), rtol=1e-12)
        np.testing.assert_array_equal(y[..., n_rot:], x[..., n_rot:])
        angle = np.arctan2(sin, cos)
        got = np.arctan2(pairs(y)[..., 1], pairs(y)[..., 0]) - np.arctan2(pairs(x)[..., 1],
                                                                          pairs(x)[..., 0])
        np.testing.assert_allclose(np.angle(np.exp(1j * (got - angle[:, None, :]))), 0, atol=1e-9)
        # A score depends on the position difference only.
        q, k = rng.standard_normal((1, 1, n_rot)), rng.standard_normal((1, 1, n_rot))

        def score(i, j):
            return float(apply_rope_norm(q, cos[i:i + 1], sin[i:i + 1], n_rot).ravel()
                         @ apply_rope_norm(k, cos[j:j + 1], sin[j:j + 1], n_rot).ravel())
        self.assertAlmostEqual(score(7, 3), score(30, 26), places=10)
        # And it is not the NEOX pairing.
        self.assertGreater(np.max(np.abs(apply_rope(x, cos, sin, n_rot) - y)), 0.1)

    def test_groups_by_top2_sum(self):
        # Group 0 has the highest single score, group 1 the highest top-2 sum.
        scores = np.array([[0.9, 0.1, 0.1, 0.1, 0.6, 0.6, 0.0, 0.0]])
        kept = limit_to_groups(scores, 2, 1, 2)
        np.testing.assert_array_equal(np.isfinite(kept[0]), [0, 0, 0, 0, 1, 1, 1, 1])
        np.testing.assert_array_equal(kept[0, 4:], scores[0, 4:])
        rng = np.random.default_rng(2)
        scores = rng.random((50, 16))
        kept = limit_to_groups(scores, 4, 2, 4)
        top2 = np.sort(scores.reshape(50, 4, 4), axis=2)[:, :, 2:].sum(axis=2)
        for row in range(50):
            best = set(np.argsort(-top2[row])[:2])
            self.assertEqual({e // 4 for e in np.nonzero(np.isfinite(kept[row]))[0]}, best)


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path, cls.tokens, cls.llama = load(REFERENCE)
        cls.model = DeepSeek2(cls.path, kv_f16=False)
        cls.logits = cls.model.forward(cls.tokens)
        cls.trace = cls.model.trace   # (a resumed pass replaces model.trace)

    def check_match(self, logits, bar=MAX_RMS):
        assert_matches(self, logits, self.llama, bar, MIN_TOP1)

    def test_plan(self):
        m = self.model
        self.assertEqual((m.n_layer, m.n_embd, m.n_head, m.q_lora, m.kv_lora),
                         (3, 256, 4, 64, 64))
        self.assertEqual((m.n_nope, m.n_rot, m.head_k, m.head_v), (32, 16, 48, 32))
        self.assertEqual((m.n_dense, m.n_expert, m.n_expert_used, m.groups),
                         (1, 8, 2, (2, 1)))
        self.assertEqual((m.gating, m.weights_norm, m.weights_scale), ("sigmoid", True, 2.0))
        self.assertEqual(m.yarn, (16.0, 256))
        mscale = 1 + 0.1 * math.log(16.0)
        self.assertAlmostEqual(m.mscale, mscale, places=6)
        self.assertAlmostEqual(m.kq_scale, mscale ** 2 / math.sqrt(48), places=6)

    def test_absorbed_equals_expanded(self):
        pos = np.arange(len(self.tokens))
        cos, sin = self.model.rope_tables(pos)
        for layer in range(self.model.n_layer):
            with self.subTest(layer=layer):
                x = self.trace["x"][layer]
                h = rms_norm(x, self.model.eps) * self.model.weight(f"blk.{layer}.attn_norm.weight")
                empty = np.zeros((0, 1, self.model.kv_lora + self.model.n_rot))
                absorbed, _ = self.model.attention(layer, h, pos, cos, sin, empty)
                expanded, _, _ = self.model.attention_expanded(layer, h, pos, cos, sin)
                self.assertLess(np.max(np.abs(absorbed - expanded)),
                                1e-10 * np.max(np.abs(absorbed)))
        expanded = ExpandedDeepSeek2(self.path, kv_f16=False).forward(self.tokens)
        self.assertLess(np.max(np.abs(expanded - self.logits)), 1e-9)

    def test_legacy_kv_b_file(self):
        # A file with attn_kv_b (head h: its NOPE k rows, then its VD v rows; the k rows
        # are k_b[h] transposed) in place of attn_k_b/attn_v_b gives the same model.
        model = DeepSeek2(self.path, kv_f16=False)
        tensors = dict(model.gguf.tensors)
        for layer in range(model.n_layer):
            pre = f"blk.{layer}."
            k_b, v_b = model.weight(pre + "attn_k_b.weight"), model.weight(pre + "attn_v_b.weight")
            kv_b = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)   # (H, NOPE+VD, KVL)
            model._weights[pre + "attn_kv_b.weight"] = kv_b.reshape(-1, model.kv_lora)
            tensors[pre + "attn_kv_b.weight"] = tensors.pop(pre + "attn_k_b.weight")
            del tensors[pre + "attn_v_b.weight"]
        model.gguf.tensors = tensors
        self.assertLess(np.max(np.abs(model.forward(self.tokens) - self.logits)), 1e-10)

    def test_resume_and_token_by_token_agree_with_a_full_pass(self):
        model = DeepSeek2(self.path, kv_f16=False)
        for layer, start in ((0, 10), (1, 30), (2, 50), (3, 40)):
            with self.subTest(layer=layer, start=start):
                part = model.forward(self.tokens[:55], resume=(self.trace, layer, start))
                self.assertLess(np.max(np.abs(part - self.logits[start:55])), 1e-9)
        rows = decode_token_by_token(model, self.tokens)
        self.assertLess(np.max(np.abs(rows - self.logits)), 1e-9)
        rms, top1, _ = metrics(rows, self.llama["logits-one-at-a-time.f32"])
        self.assertLessEqual(rms, TIGHT)
        self.assertGreaterEqual(top1, MIN_TOP1)

    def test_matches_llamacpp(self):
        self.check_match(self.logits, TIGHT)
        self.check_match(DeepSeek2(self.path, dtype=np.float32, kv_f16=False).forward(self.tokens),
                         TIGHT)
        # A float16 cache moves the logits about as much as it moves llama.cpp's (0.08%).
        self.check_match(DeepSeek2(self.path).forward(self.tokens))

    def test_structural_errors_fail(self):
        class Neox(DeepSeek2):
            def projections(self, *args):
                saved = deepseek2.apply_rope_norm
                deepseek2.apply_rope_norm = apply_rope
                try:
                    return super().projections(*args)
                finally:
                    deepseek2.apply_rope_norm = saved

        class NoGroups(DeepSeek2):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.groups = (1, 1)

        for cls in (Neox, NoGroups):
            with self.subTest(model=cls.__name__):
                logits = cls(self.path, kv_f16=False).forward(self.tokens)
                rms, _, _ = metrics(logits, self.llama["logits.f32"])
                self.assertGreater(rms, 0.1)


if __name__ == "__main__":
    unittest.main()
