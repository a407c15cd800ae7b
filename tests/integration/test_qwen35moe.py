"""qwen35moe (Qwen3.5 / Qwen3.6 MoE, Gated DeltaNet hybrid) end to end.

Three independent checks of the graph's arithmetic:
  * llama.cpp: tests/data/llamacpp/qwen35moe holds a tiny file llama.cpp's tools wrote,
    64 token ids, and llama.cpp's logits for them in one batch and one token at a time.
    Its README's band: rms difference <= 3% of the logit std and top-1 agreement >= 0.9
    on this quantized file (llama.cpp disagrees with itself by 1.3%, because it rounds
    activations differently per path; measured here: 2.3% / 0.92 and 2.2% / 0.94).
  * the numpy reference (tests/reference/qwen35moe.py) at every position, on an all-F32
    synthetic file where only float rounding separates the two (measured 1.1e-4 on logits
    of std 3; a wrong head mapping, norm or gate moves them by O(1)).
  * the engine against itself: chunked against recurrent delta rule, paged against
    resident, a reused conversation prefix against a fresh run.
"""
import filecmp
import os
import re
import sys
import unittest

import numpy as np

import harness
from harness import PLAN_MARGIN, path, run, synth
from logit_checks import LLAMACPP, band, engine_logits, llamacpp_logits, read_ids, reference
from test_server import Server

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

from logits_file import read_logits  # noqa: E402
from qwen35moe import Qwen35MoE  # noqa: E402

F32 = ["--type-expert", "F32", "--type-expert-down", "F32", "--type-attn", "F32", "--type-attn-v", "F32",
       "--type-embd", "F32", "--type-output", "F32", "--type-shexp", "F32"]
TEXT = "The old lighthouse keeper climbed the stairs every evening with a lamp and wrote down the color of the sea."


class AgainstLlamaCpp(unittest.TestCase):
    MODEL = reference("qwen35moe", "model.gguf")
    TOKENS = reference("qwen35moe", "tokens.i32")

    def test_tokenizer_matches_llamacpp(self):
        with open(os.path.join(LLAMACPP, "prompt.txt"), encoding="utf-8") as f:
            prompt = f.read()
        want = read_ids(self.TOKENS)
        got = [int(x) for x in run("tokenize", "-m", self.MODEL, "-p", prompt).stdout.split()]
        self.assertEqual(got[:64], want)

    def test_logits_in_band_on_every_path(self):
        for args, name in [(["--batch", "64"], "logits.f32"), (["--batch", "1"], "logits-one-at-a-time.f32"),
                           (["--batch", "64", "--delta-rule", "chunked"], "logits.f32")]:
            with self.subTest(args=args):
                _, mine = read_logits(engine_logits(self.MODEL, path("llamacpp.logits"), *args, tokens=self.TOKENS))
                rms, top1 = band(mine, llamacpp_logits("qwen35moe", name))
                self.assertLessEqual(rms, 0.03)
                self.assertGreaterEqual(top1, 0.9)

    def test_numpy_reference_in_band_too(self):
        logits = Qwen35MoE(self.MODEL, emulate_q8=True).forward(read_ids(self.TOKENS))
        for name in ("logits.f32", "logits-one-at-a-time.f32"):
            rms, top1 = band(logits, llamacpp_logits("qwen35moe", name))
            self.assertLessEqual(rms, 0.03, name)
            self.assertGreaterEqual(top1, 0.9, name)

    def test_paged_is_bit_identical_to_resident_at_every_budget(self):
        resident = engine_logits(self.MODEL, path("resident.logits"), "--ctx", "4096", tokens=self.TOKENS)
        out = run("plan", "-m", self.MODEL, "--ram-budget", "64G", "--ctx", "4096").stdout
        minimum = int(re.search(r"minimum budget: .*?\((\d+) bytes", out).group(1)) + PLAN_MARGIN
        all_fit = int(re.search(r"holds every expert: .*?\((\d+) bytes", out).group(1)) + PLAN_MARGIN
        for budget in (minimum, (minimum + all_fit) // 2, all_fit):
            for io in ("uring", "pread"):
                for batch in ("64", "1"):
                    with self.subTest(budget=budget, io=io, batch=batch):
                        paged = engine_logits(self.MODEL, path("paged.logits"), "--ctx", "4096", "--ram-budget", str(budget),
                                              "--io", io, "--batch", batch, tokens=self.TOKENS)
                        self.assertTrue(filecmp.cmp(resident, paged, shallow=False))

    def test_recurrent_prompts_give_the_same_bits_however_batched(self):
        whole = engine_logits(self.MODEL, path("b64.logits"), "--batch", "64", tokens=self.TOKENS)
        for batch in ("1", "7"):
            split = engine_logits(self.MODEL, path(f"b{batch}.logits"), "--batch", batch, tokens=self.TOKENS)
            self.assertTrue(filecmp.cmp(whole, split, shallow=False), f"--batch {batch}")


class AgainstNumpy(unittest.TestCase):
    """All-F32 weights: the engine and the float64 reference differ only by rounding."""

    @classmethod
    def setUpClass(cls):
        cls.model = synth("q35-f32.gguf", "--arch", "qwen35moe", "--preset", "tiny", *F32)
        ids = [int(x) for x in run("tokenize", "-m", cls.model, "-p", TEXT).stdout.split()]
        cls.recurrent = Qwen35MoE(cls.model).forward(ids)[:-1]
        cls.chunked = Qwen35MoE(cls.model, delta_form="chunked", chunk=16).forward(ids)[:-1]

    def test_every_position_on_every_path(self):
        # The numpy reference's two delta-rule forms agree to ~1e-13.
        self.assertLess(np.max(np.abs(self.recurrent - self.chunked)), 1e-9)
        for args in (["--batch", "64"], ["--batch", "1"], ["--batch", "64", "--delta-rule", "chunked"],
                     ["--batch", "5", "--delta-rule", "chunked"]):
            with self.subTest(args=args):
                _, mine = read_logits(engine_logits(self.model, path("f32.logits"), *args, text=TEXT))
                self.assertEqual(mine.shape, self.recurrent.shape)
                # Measured max 1.1e-4 (recurrent) and 4e-5 (chunked) over 56 positions.
                self.assertLess(np.max(np.abs(mine - self.recurrent)), 1e-3)
                self.assertLess(np.max(np.abs(mine - self.chunked)), 1e-3)


def chatml(turns):
    text = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return text + "<|im_start|>assistant\n"


class Conversations(unittest.TestCase):
    """Recurrent state cannot be rolled back; snapshots at checkpoints keep prefix reuse exact."""

    @classmethod
    def setUpClass(cls):
        cls.model = synth("q35-chat.gguf", "--arch", "qwen35moe", "--preset", "tiny", "--seed", "3")

    def greedy_run(self, prompt, n=8):
        """`epq run`'s reply as the server sends it (invalid UTF-8 bytes as U+FFFD)."""
        out = run("run", "-m", self.model, "-p", prompt, "--temp", "0", "-n", str(n), "-t", "2").stdout[:-1]
        return out.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    def prompt_tokens(self, text):
        return len(run("tokenize", "-m", self.model, "-p", text).stdout.split())

    def test_serve_reuses_the_conversation_and_matches_a_fresh_run(self):
        server = Server(self.model, "--ctx", "2048")
        try:
            def chat(messages):
                status, body = server.post("/v1/chat/completions", {"messages": messages, "max_tokens": 8, "temperature": 0})
                self.assertEqual(status, 200, body)
                return body["choices"][0]["message"]["content"], body["usage"]

            turns = [("user", "hello there")]
            first, usage = chat([{"role": r, "content": c} for r, c in turns])
            self.assertEqual(first, self.greedy_run(chatml(turns)))
            self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], 0)

            # Turn two: everything of turn one is reused, only the new tokens are evaluated.
            turns += [("assistant", first), ("user", "and what is two plus two")]
            second, usage = chat([{"role": r, "content": c} for r, c in turns])
            self.assertEqual(second, self.greedy_run(chatml(turns)))
            self.assertEqual(usage["prompt_tokens"], self.prompt_tokens(chatml(turns)))
            self.assertGreaterEqual(usage["prompt_tokens_details"]["cached_tokens"], self.prompt_tokens(chatml(turns[:1])))

            # A different reply in the history: the state goes back to the snapshot at the
            # end of turn two's prompt, not to the start.
            edited = turns[:3] + [("assistant", "no idea"), ("user", "then say something")]
            third, usage = chat([{"role": r, "content": c} for r, c in edited])
            self.assertEqual(third, self.greedy_run(chatml(edited)))
            self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], self.prompt_tokens(chatml(turns)))

            # A conversation that shares no checkpoint starts over, and is still exact.
            other = [("user", "a different opening")]
            fourth, usage = chat([{"role": r, "content": c} for r, c in other])
            self.assertEqual(fourth, self.greedy_run(chatml(other)))
            self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], 0)
        finally:
            server.stop()

    def test_a_template_that_rewrites_the_last_reply_resumes_before_the_generation_prompt(self):
        # Qwen3.6's template opens <think> in the generation prompt but renders earlier
        # replies without it: the next turn shares the conversation only up to the end of
        # the last user message, where a checkpoint was taken.
        template = os.path.join(HERE, "..", "unit", "chat_templates", "qwen3_6.jinja")
        messages = [{"role": "user", "content": "hello there"}]
        body = {"messages": messages, "max_tokens": 6, "temperature": 0}

        def ask(server, messages):
            status, reply = server.post("/v1/chat/completions", dict(body, messages=messages))
            self.assertEqual(status, 200, reply)
            return reply

        reused = Server(self.model, "--ctx", "2048", "--chat-template", template)
        try:
            first = ask(reused, messages)
            turn1_prompt = first["usage"]["prompt_tokens"]
            history = messages + [{"role": "assistant", "content": first["choices"][0]["message"]["content"] or "ok"},
                                  {"role": "user", "content": "and then"}]
            second = ask(reused, history)
        finally:
            reused.stop()
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        self.assertGreater(cached, 0)
        self.assertLess(cached, turn1_prompt)  # not past "<|im_start|>assistant\n<think>\n"
        fresh = Server(self.model, "--ctx", "2048", "--chat-template", template)
        try:
            alone = ask(fresh, history)
        finally:
            fresh.stop()
        self.assertEqual(alone["usage"]["prompt_tokens_details"]["cached_tokens"], 0)
        self.assertEqual(second["choices"][0]["message"], alone["choices"][0]["message"])

    def test_chat_turns_match_run(self):
        proc = run("chat", "-m", self.model, "--temp", "0", "-n", "8", "-t", "2", input="hello\n2+2\n")
        turns = [("user", "hello")]
        first = run("run", "-m", self.model, "-p", chatml(turns), "--temp", "0", "-n", "8", "-t", "2").stdout
        turns += [("assistant", first[:-1]), ("user", "2+2")]
        second = run("run", "-m", self.model, "-p", chatml(turns), "--temp", "0", "-n", "8", "-t", "2").stdout
        self.assertEqual(proc.stdout, first + second)


class Files(unittest.TestCase):
    def test_mtp_blocks_are_not_run(self):
        import gguf_edit
        model = synth("q35-mtp-base.gguf", "--arch", "qwen35moe", "--preset", "tiny")
        mtp = path("q35-mtp.gguf")
        # The last of the 8 blocks becomes a NextN block: 7 layers run, the file still loads.
        gguf_edit.set_metadata(model, mtp, "qwen35moe.nextn_predict_layers", gguf_edit.UINT32, 1)
        self.assertIn("7 layers (0..6)", run("plan", "-m", mtp, "--ram-budget", "64G").stdout)
        # Its tensors are not read into a budget's resident weights either, and a paged run
        # gives the all-in-RAM run's tokens.
        def resident(m):
            line = re.search(r"resident weights +([\d.]+) MiB", run("plan", "-m", m, "--ram-budget", "1G").stdout)
            return float(line.group(1))
        self.assertLess(resident(mtp), resident(model))
        greedy = ["-p", "hello", "-n", "8", "--temp", "0", "-t", "2"]
        self.assertEqual(run("run", "-m", mtp, "--ram-budget", "80M", *greedy).stdout, run("run", "-m", mtp, *greedy).stdout)
        _, seven = read_logits(engine_logits(mtp, path("mtp7.logits"), text=TEXT))
        _, eight = read_logits(engine_logits(model, path("mtp8.logits"), text=TEXT))
        self.assertTrue(np.all(np.isfinite(seven)))
        self.assertGreater(np.max(np.abs(seven - eight)), 1e-2)
        gguf_edit.set_metadata(model, path("q35-mtp-all.gguf"), "qwen35moe.nextn_predict_layers", gguf_edit.UINT32, 8)
        proc = run("run", "-m", path("q35-mtp-all.gguf"), "-p", "hello", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("NextN layers leave none", proc.stderr)

    def test_qwen3next_is_refused_in_one_line(self):
        import gguf_edit
        model = synth("q35-next.gguf", "--arch", "qwen35moe", "--preset", "tiny")
        gguf_edit.set_metadata(model, path("qwen3next.gguf"), "general.architecture", gguf_edit.STRING, "qwen3next")
        proc = run("run", "-m", path("qwen3next.gguf"), "-p", "hello", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1)
        self.assertIn("'qwen3next' (Qwen3-Next) is not supported yet", proc.stderr)


if __name__ == "__main__":
    harness.main()
