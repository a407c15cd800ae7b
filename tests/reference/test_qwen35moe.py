#!/usr/bin/python3
"""Self-checks of the qwen35moe reference (no engine needed):

    /usr/bin/python3 tests/reference/test_qwen35moe.py [-v]

- the gated delta rule's recurrent and chunked forms agree (random inputs, several chunk
  sizes, a non-zero starting state);
- on llama.cpp's reference folder (tests/data/llamacpp/qwen35moe, or QWEN35MOE_REFERENCE):
  the whole model agrees with
  itself across delta-rule forms and chunk sizes, a resumed pass (follow_ties.py) agrees
  with a full one, and the logits match llama.cpp's in the folder README's sense.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from blocks import l2_norm, sigmoid  # noqa: E402
from compare_llamacpp import LOGITS_FILES, load, metrics  # noqa: E402
from qwen35moe import Qwen35MoE, delta_rule_chunked, delta_rule_recurrent  # noqa: E402

REFERENCE = os.environ.get("QWEN35MOE_REFERENCE", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "llamacpp", "qwen35moe"))
# The folder README's bar for quantized files: rms difference <= 3% of the logit std and
# top-1 agreement >= 0.9. Measured (float64): 2.69% / 0.906 plain, 1.56% / 0.906 with
# every product's input rounded as the engine and llama.cpp do (emulate_q8);
# llama.cpp one batch against one token at a time: 1.33% / 0.969.
MAX_RMS, MIN_TOP1 = 0.03, 0.9


class DeltaRuleTest(unittest.TestCase):
    def test_chunked_matches_recurrent(self):
        rng = np.random.default_rng(1)
        n, H, S = 64, 4, 32
        q = l2_norm(rng.standard_normal((n, H, S)), 1e-6)
        k = l2_norm(rng.standard_normal((n, H, S)), 1e-6)
        v = rng.standard_normal((n, H, S))
        g = -rng.exponential(0.5, (n, H))
        beta = sigmoid(rng.standard_normal((n, H)))
        state = 0.1 * rng.standard_normal((H, S, S))
        o_r, s_r = delta_rule_recurrent(q, k, v, g, beta, state)
        for chunk in (1, 3, 4, 16, 64, 100):
            with self.subTest(chunk=chunk):
                o_c, s_c = delta_rule_chunked(q, k, v, g, beta, state, chunk)
                # Measured <= 1.6e-15 relative.
                np.testing.assert_allclose(o_c, o_r, rtol=0, atol=1e-12 * np.abs(o_r).max())
                np.testing.assert_allclose(s_c, s_r, rtol=0, atol=1e-12 * np.abs(s_r).max())


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.path, cls.tokens, cls.llama = load(REFERENCE)
        cls.recurrent = Qwen35MoE(cls.path).forward(cls.tokens)

    def test_forms_agree(self):
        for chunk in (4, 16, 64):
            with self.subTest(chunk=chunk):
                model = Qwen35MoE(self.path, delta_form="chunked", chunk=chunk)
                chunked = model.forward(self.tokens)
                # Measured 8e-14 on logits of std 3.
                self.assertLess(np.max(np.abs(chunked - self.recurrent)), 1e-9)

    def test_resume_agrees_with_a_full_pass(self):
        model = Qwen35MoE(self.path, emulate_q8=True, delta_form="chunked", chunk=8)
        full = model.forward(self.tokens)
        trace = model.trace
        for layer, start in ((0, 10), (2, 30), (3, 17), (8, 40)):
            with self.subTest(layer=layer, start=start):
                part = model.forward(self.tokens[:50], resume=(trace, layer, start))
                self.assertLess(np.max(np.abs(part - full[start:50])), 1e-9)

    def test_matches_llamacpp(self):
        emulated = Qwen35MoE(self.path, emulate_q8=True).forward(self.tokens)
        for label, logits in (("plain", self.recurrent), ("emulate_q8", emulated)):
            for name in LOGITS_FILES:
                with self.subTest(model=label, logits=name):
                    rms, top1, _ = metrics(logits, self.llama[name])
                    self.assertLessEqual(rms, MAX_RMS)
                    self.assertGreaterEqual(top1, MIN_TOP1)


if __name__ == "__main__":
    unittest.main()
