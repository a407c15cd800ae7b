#!/usr/bin/python3
"""Self-checks of the xing4_0 reference (no engine needed):

    /usr/bin/python3 tests/reference/test_xing4_0.py [-v]

- Sinkhorn: on random clamped logits and on every hyper-connection of the model's pass,
  the result is nonnegative and approximately doubly stochastic (the last step
  normalises over destinations, so each source column sums to 1 up to eps);
- on llama.cpp's reference folder (tests/data/llamacpp/xing4_0, or XING4_0_REFERENCE):
  the file's plan (the trunk without the MTP block, 4 streams, 20 iterations), the
  streams kept in the model's dtype, the absorbed MLA form equal to the expanded one, a
  resumed pass and token-by-token decoding agree with a full pass, and the logits match
  llama.cpp's (F32 cache, flash attention off), one batch and one token at a time, at the
  folder README's bar for F32 files and at a tight bar; with a float16 cache still within
  the README's bar; the comb read transposed (src-major, DeepSeek-V4's layout) and other
  structural errors fail the match.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import xing4_0  # noqa: E402
from blocks import rms_norm  # noqa: E402
from compare_llamacpp import LOGITS_FILES, assert_matches, load, metrics  # noqa: E402
from deepseek2 import decode_token_by_token  # noqa: E402
from xing4_0 import Xing4_0, sinkhorn  # noqa: E402

REFERENCE = os.environ.get("XING4_0_REFERENCE", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "data", "llamacpp", "xing4_0"))
# The folder README's bar for the F32 files: rms difference <= 0.5% of the logit std, top-1
# agreement >= 0.98. Measured (float64, F32 cache): 1.0e-4% / 1.000 (one batch), 9.7e-5% /
# 1.000 (one token at a time); float32 streams 2.0e-4%; a float16 cache 0.084% / 1.000.
# TIGHT is 100x the measured F32 difference: it also catches the Sinkhorn steps swapped
# (destinations first: 0.11%, inside the README's bar). Structural errors: comb transposed
# 25% (top-1 0.73), stream 0 instead of the mean 23%, post = sigmoid 72%, a plain residual
# added 95%, NEOX rope 73%.
MAX_RMS, MIN_TOP1, TIGHT = 0.005, 0.98, 1e-4
# Sinkhorn converges slowly: after 20 iterations the destination rows of the model's combs
# sum to 1 within 0.018 (random logits of std 3: 0.035; 200 iterations: 1.2e-3; 1000:
# 1.2e-6), the source columns within 1.0e-6 (the eps of the last step).
ROW_TOL = 0.05


def assert_doubly_stochastic(test, c, eps, row_tol):
    """c (..., dst, src): nonnegative, each source column summing to 1 (the last step
    divides it by its sum + eps), each destination row to 1 within row_tol."""
    test.assertTrue(np.all(c >= 0))
    test.assertLess(np.max(np.abs(c.sum(axis=-2) - 1)), 4 * eps)
    test.assertLess(np.max(np.abs(c.sum(axis=-1) - 1)), row_tol)


class SinkhornTest(unittest.TestCase):
    def test_random_logits(self):
        rng = np.random.default_rng(11)
        logits = np.clip(rng.standard_normal((200, 4, 4)) * 3, -30, 30)
        c = sinkhorn(logits, 20, 1e-6)
        assert_doubly_stochastic(self, c, 1e-6, ROW_TOL)
        # More iterations converge further; a row-first and a column-first order differ.
        assert_doubly_stochastic(self, sinkhorn(logits, 1000, 1e-6), 1e-6, 1e-5)
        swapped = np.swapaxes(sinkhorn(np.swapaxes(logits, 1, 2), 20, 1e-6), 1, 2)
        self.assertGreater(np.max(np.abs(swapped - c)), 1e-6)
        # Each row of exp(L - max) is scaled, so adding a constant to a destination's
        # logits changes nothing.
        shifted = logits + rng.standard_normal((200, 4, 1))
        np.testing.assert_allclose(sinkhorn(shifted, 20, 1e-6), c, rtol=1e-9, atol=1e-12)


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path, cls.tokens, cls.llama = load(REFERENCE)
        cls.model = Xing4_0(cls.path, kv_f16=False)
        cls.logits = cls.model.forward(cls.tokens)
        cls.trace = cls.model.trace   # (a resumed pass replaces model.trace)

    def check_match(self, logits, bar=MAX_RMS):
        assert_matches(self, logits, self.llama, bar, MIN_TOP1)

    def test_plan(self):
        m = self.model
        self.assertEqual((m.n_layer, m.n_nextn, m.n_stream, m.sinkhorn_iterations),
                         (4, 1, 4, 20))
        self.assertAlmostEqual(m.hc_eps, 1e-6)
        self.assertEqual((m.n_dense, m.n_expert, m.n_expert_used, m.groups),
                         (2, 8, 2, (1, 1)))
        self.assertEqual((m.gating, m.weights_norm, m.weights_scale), ("sigmoid", True, 2.0))
        self.assertEqual(len(self.trace["k"]), 4)   # the MTP block (blk.4) is not run

    def test_streams_keep_the_dtype(self):
        self.assertEqual(self.trace["x"][4].shape, (len(self.tokens), 4, 256))
        self.assertEqual(self.trace["x"][4].dtype, np.float64)
        model = Xing4_0(self.path, dtype=np.float32, kv_f16=False)
        logits = model.forward(self.tokens)
        for x in model.trace["x"]:
            self.assertEqual(x.dtype, np.float32)
        self.check_match(logits, TIGHT)

    def test_model_combs_are_doubly_stochastic(self):
        seen = []

        class Recording(Xing4_0):
            def hyper_connection(self, layer, kind, X, pos):
                out = super().hyper_connection(layer, kind, X, pos)
                seen.append((layer, kind, X, out))
                return out

        Recording(self.path, kv_f16=False).forward(self.tokens)
        self.assertEqual([(layer, kind) for layer, kind, _, _ in seen],
                         [(il, kind) for il in range(4) for kind in ("attn", "ffn")])
        for layer, kind, X, (pre, post, comb) in seen:
            with self.subTest(layer=layer, kind=kind):
                self.assertEqual(comb.shape, (len(self.tokens), 4, 4))
                assert_doubly_stochastic(self, comb, self.model.hc_eps, ROW_TOL)
                self.assertTrue(np.all((pre > 0) & (pre < 1)))
                self.assertTrue(np.all((post > 0) & (post < 2)))
                if kind == "attn":
                    np.testing.assert_array_equal(X, self.trace["x"][layer])

    def test_absorbed_equals_expanded(self):
        pos = np.arange(len(self.tokens))
        cos, sin = self.model.rope_tables(pos)
        X = self.trace["x"]
        for layer in range(self.model.n_layer):
            with self.subTest(layer=layer):
                pre, _, _ = self.model.hyper_connection(layer, "attn", X[layer], pos)
                u = np.einsum("ns,nse->ne", pre, X[layer])
                h = rms_norm(u, self.model.eps) * self.model.weight(f"blk.{layer}.attn_norm.weight")
                empty = np.zeros((0, 1, self.model.kv_lora + self.model.n_rot))
                absorbed, _ = self.model.attention(layer, h, pos, cos, sin, empty)
                expanded, _, _ = self.model.attention_expanded(layer, h, pos, cos, sin)
                self.assertLess(np.max(np.abs(absorbed - expanded)),
                                1e-10 * np.max(np.abs(absorbed)))

    def test_resume_and_token_by_token_agree_with_a_full_pass(self):
        model = Xing4_0(self.path, kv_f16=False)
        for layer, start in ((0, 10), (1, 30), (3, 50), (4, 40)):
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
        # A float16 cache moves the logits about as much as it moves llama.cpp's (0.08%).
        self.check_match(Xing4_0(self.path).forward(self.tokens))

    def test_transposed_comb_fails(self):
        logits = Xing4_0(self.path, kv_f16=False, comb_transposed=True).forward(self.tokens)
        for name in LOGITS_FILES:
            with self.subTest(logits=name):
                rms, top1, _ = metrics(logits, self.llama[name])
                self.assertGreater(rms, 0.1)
                self.assertLess(top1, MIN_TOP1)

    def test_structural_errors_fail(self):
        class StreamZero(Xing4_0):
            def final_hidden(self, X):
                return X[:, 0]

        class PlainResidual(Xing4_0):
            def sublayer(self, layer, kind, X, pos, run):
                return super().sublayer(layer, kind, X, pos, run) + X

        class SwappedSinkhorn(Xing4_0):
            def hyper_connection(self, *args):
                saved = xing4_0.sinkhorn
                xing4_0.sinkhorn = lambda logits, n, eps: np.swapaxes(
                    saved(np.swapaxes(logits, 1, 2), n, eps), 1, 2)
                try:
                    return super().hyper_connection(*args)
                finally:
                    xing4_0.sinkhorn = saved

        for cls, bar in ((StreamZero, 0.1), (PlainResidual, 0.1), (SwappedSinkhorn, TIGHT)):
            with self.subTest(model=cls.__name__):
                logits = cls(self.path, kv_f16=False).forward(self.tokens)
                rms, _, _ = metrics(logits, self.llama["logits.f32"])
                self.assertGreater(rms, bar)


if __name__ == "__main__":
    unittest.main()
