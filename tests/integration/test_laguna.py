"""laguna (poolside Laguna: sliding-window and gated attention, BF16 tail layers) end to end.

Three independent checks of the graph's arithmetic:
  * llama.cpp: tests/data/llamacpp/laguna holds a tiny file llama.cpp's tools wrote (6
    layers: a dense first layer, sliding-window layers of window 16 and full layers with
    partial-rotary YaRN, per-layer head counts, softplus gates per head and per element,
    the last layer BF16), 64 token ids, and llama.cpp's logits in one batch and one token
    at a time. The band: rms difference <= 3% of the logit std and top-1 >= 0.9 (llama.cpp
    disagrees with itself by 1.3%; measured here 0.99% / 1.0 and 1.23% / 0.98).
  * the numpy reference (tests/reference/laguna.py) at every position, on an all-F32
    synthetic file, with batches small enough that the sliding-window ring wraps.
  * the engine against itself: paged against resident with both expert size classes
    evicting, a KV ring that does not grow with the context, conversation reuse.
"""
import filecmp
import os
import re
import sys
import unittest

import numpy as np

import harness
from harness import PLAN_MARGIN, path, plan, plan_bytes, plan_mib, run, synth
from logit_checks import band, engine_logits, llamacpp_logits, reference
from test_server import Server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from laguna import Laguna  # noqa: E402
from logits_file import read_logits  # noqa: E402

F32 = ["--type-expert", "F32", "--type-expert-down", "F32", "--tail-expert-type", "F32", "--type-attn", "F32",
       "--type-attn-v", "F32", "--type-embd", "F32", "--type-output", "F32", "--type-shexp", "F32"]
TEXT = ("The old lighthouse keeper climbed the stairs every evening with a lamp and wrote down the color of the sea, "
        "then the wind, then the names of the ships that passed before the light went out.")




class AgainstLlamaCpp(unittest.TestCase):
    MODEL = reference("laguna", "model.gguf")
    TOKENS = reference("laguna", "tokens.i32")

    def test_logits_in_band_in_one_batch_and_one_token_at_a_time(self):
        for args, name in [(["--batch", "64"], "logits.f32"), (["--batch", "1"], "logits-one-at-a-time.f32")]:
            with self.subTest(args=args):
                _, mine = read_logits(engine_logits(self.MODEL, path("llamacpp.logits"), *args, tokens=self.TOKENS))
                rms, top1 = band(mine, llamacpp_logits("laguna", name))
                self.assertLessEqual(rms, 0.03)
                self.assertGreaterEqual(top1, 0.9)

    def test_paged_is_bit_identical_to_resident_with_both_size_classes_evicting(self):
        resident = engine_logits(self.MODEL, path("resident.logits"), tokens=self.TOKENS)
        out = plan(self.MODEL, "--ram-budget", "64G")
        minimum = plan_bytes(out, "minimum budget:") + PLAN_MARGIN
        all_fit = plan_bytes(out, "budget that holds every expert:")
        for budget in (minimum, (minimum + all_fit) // 2):
            # Both classes (Q4_K/Q8_0 layers 1-4, BF16 layer 5) hold less than all their experts.
            coverage = re.findall(r"^\s*\d+\s+[\d.]+ [KM]iB\s+\d+\s+\d+\s+([\d.]+)%", plan(self.MODEL, "--ram-budget", str(budget)), re.M)
            self.assertEqual(len(coverage), 2)
            self.assertTrue(all(float(c) < 100 for c in coverage), coverage)
            for io in ("uring", "pread"):
                for batch in ("64", "1"):
                    with self.subTest(budget=budget, io=io, batch=batch):
                        paged = engine_logits(self.MODEL, path("paged.logits"), "--ram-budget", str(budget), "--io", io,
                                              "--batch", batch, tokens=self.TOKENS)
                        self.assertTrue(filecmp.cmp(resident, paged, shallow=False))


class AgainstNumpy(unittest.TestCase):
    """All-F32 weights: the engine and the float64 reference differ only by rounding."""

    @classmethod
    def setUpClass(cls):
        cls.model = synth("laguna-f32.gguf", "--arch", "laguna", "--preset", "tiny", *F32)
        ids = [int(x) for x in run("tokenize", "-m", cls.model, "-p", TEXT).stdout.split()]
        cls.n = len(ids)
        cls.expected = Laguna(cls.model).forward(ids)[:-1]

    def test_every_position_whatever_the_batch_and_ring(self):
        # Window 16: with --batch 5 the sliding-window ring has 20 rows and wraps over and
        # over; with --batch 64 and --ctx 128 it never wraps.
        self.assertGreater(self.n, 40)
        for args in (["--batch", "64", "--ctx", "128"], ["--batch", "5", "--ctx", "128"], ["--batch", "1", "--ctx", "128"]):
            with self.subTest(args=args):
                _, mine = read_logits(engine_logits(self.model, path("f32.logits"), *args, text=TEXT))
                self.assertEqual(mine.shape, self.expected.shape)
                self.assertLess(np.max(np.abs(mine - self.expected)), 1e-3)


class SlidingWindowCache(unittest.TestCase):
    def test_the_ring_does_not_grow_with_the_context(self):
        model = synth("laguna-tiny.gguf", "--arch", "laguna", "--preset", "tiny")
        # A full layer's cache grows by K and V of 2 heads x 64 dims in F16 per token, and
        # its attention scores by 8 floats per thread: 2 full layers and 2 threads make
        # 1088 bytes per token. The 4 sliding-window layers' rings stay at 16 + 63 + 256
        # rows; if they grew too, the state would grow by 2112 bytes per token more.
        state = [plan_mib(plan(model, "--ram-budget", "1G", "--ctx", str(ctx), "--batch", "64", "-t", "2"),
                          "KV cache and compute scratch") for ctx in (4096, 32768)]
        self.assertAlmostEqual(state[1] - state[0], 28672 * 1088 / 2**20, delta=0.2)


def chatml(turns):
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + "<|im_start|>assistant\n"


class Conversations(unittest.TestCase):
    """A sliding-window ring forgets what left the window: a conversation is reused only
    as far back as the ring still holds, and is exact either way."""

    @classmethod
    def setUpClass(cls):
        cls.model = synth("laguna-chat.gguf", "--arch", "laguna", "--preset", "tiny", "--seed", "3")

    def greedy_run(self, prompt, n=8):
        out = run("run", "-m", self.model, "-p", prompt, "--temp", "0", "-n", str(n), "-t", "2").stdout[:-1]
        return out.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    def test_serve_reuses_within_the_ring_and_starts_over_beyond_it(self):
        # The rings hold 16 + 7 + 256 rows with --batch 8: a rollback keeps the cache if it
        # goes back at most 257 positions.
        server = Server(self.model, "--ctx", "2048", "--batch", "8")
        try:
            def chat(turns):
                messages = [{"role": r, "content": c} for r, c in turns]
                status, body = server.post("/v1/chat/completions", {"messages": messages, "max_tokens": 8, "temperature": 0})
                self.assertEqual(status, 200, body)
                reply = body["choices"][0]["message"]["content"]
                self.assertEqual(reply, self.greedy_run(chatml(turns)))
                return reply, body["usage"]["prompt_tokens_details"]["cached_tokens"]

            story = " ".join(f"the ship number {i} sailed past the light at dusk" for i in range(40))
            turns = [("user", "hello there, " + story)]
            first, cached = chat(turns)
            self.assertEqual(cached, 0)
            n_first = len(run("tokenize", "-m", self.model, "-p", chatml(turns)).stdout.split())
            self.assertGreater(n_first, 300)
            # The next turn rolls back at most over the reply: reused.
            turns += [("assistant", first), ("user", "and the wind")]
            second, cached = chat(turns)
            self.assertGreaterEqual(cached, n_first - 1)
            # An edit far back (near the start, over 300 positions back): the rings no
            # longer hold that window, so evaluation starts over.
            edited = [("user", "hello there, " + story.replace("number 0", "number zero"))]
            _, cached = chat(edited)
            self.assertEqual(cached, 0)
        finally:
            server.stop()


class Files(unittest.TestCase):
    def test_synth_cuts_the_real_shape_keeping_the_bf16_share(self):
        # laguna-s-2.1 has BF16 experts in 8 of 48 layers; a 12-layer cut keeps 2.
        model = synth("laguna-cut.gguf", "--arch", "laguna", "--preset", "laguna-s-2.1", "--layers", "12", "--embd", "256",
                      "--experts", "16", "--heads", "4", "--heads-swa", "4", "--heads-kv", "2", "--dense-ffn", "512",
                      "--vocab", "0")
        out = run("inspect", model).stdout
        bf16 = {int(m) for m in re.findall(r"blk\.(\d+)\.ffn_gate_exps\.weight\s+BF16", out)}
        self.assertEqual(bf16, {10, 11})
        self.assertNotIn("blk.0.ffn_gate_exps", out)

    def test_bad_metadata_is_refused_in_one_line(self):
        model = synth("laguna-bad.gguf", "--arch", "laguna", "--preset", "tiny")
        with open(model, "rb") as f:
            data = bytearray(f.read())
        # The per-layer head counts are an array of 6; make the array claim 5 entries.
        key = b"laguna.attention.head_count"
        at = data.index(key + b"\x09\x00\x00\x00") + len(key) + 4  # value type ARRAY
        self.assertEqual(int.from_bytes(data[at + 4:at + 12], "little"), 6)
        data[at + 4:at + 12] = (5).to_bytes(8, "little")
        bad = path("laguna-bad-heads.gguf")
        with open(bad, "wb") as f:
            f.write(data)
        proc = run("run", "-m", bad, "-p", "hi", "-n", "1", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)


if __name__ == "__main__":
    harness.main()
