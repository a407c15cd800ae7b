"""Continuous batching (`epq serve --parallel N`): requests of different lengths, greedy and
seeded, streaming and not, arriving staggered, decode together in shared steps and get
exactly the tokens they get alone (`--parallel 1`, one after another), and the requests not
streamed the same logprobs to the bit, paged and all in RAM, on the trained demo model's real routing; a client that disconnects mid-stream
leaves the others' tokens unchanged; the memory plan counts every sequence's state."""
import concurrent.futures
import http.client
import json
import os
import re
import time
import unittest

import harness
from harness import run
from test_server import Server

DEMO_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "demo", "epq-demo-kjv-q4.gguf")
PROMPTS = [
    "And God said unto Moses,",
    "In the beginning God created the heaven and the earth. And the earth was without form,",
    "The LORD is my shepherd;",
    "And it came to pass in those days, that there went out a decree",
    "Blessed are the poor in spirit:",
    "Now the serpent was more subtil than any beast of the field",
]
# Each request: prompt, max_tokens, sampling, streamed.
REQUESTS = [(PROMPTS[i], 48 + 16 * i, {"temperature": 0} if i % 2 == 0 else {"temperature": 0.9, "seed": 11 + i}, i % 3 == 1)
            for i in range(len(PROMPTS))]


def ask(server, prompt, max_tokens, sampling, streamed):
    """The text, and for a request not streamed each token's logprob and its 3 likeliest
    alternatives': a function of the token's logits, compared exactly."""
    body = dict(prompt=prompt, max_tokens=max_tokens, **sampling)
    if streamed:
        events = server.stream("/v1/completions", body)
        return "".join(e["choices"][0]["text"] for e in events if e["choices"]), None
    status, reply = server.post("/v1/completions", dict(body, logprobs=3))
    assert status == 200, reply
    logprobs = reply["choices"][0]["logprobs"]
    assert len(logprobs["token_logprobs"]) == reply["usage"]["completion_tokens"], reply
    return reply["choices"][0]["text"], logprobs


def abandon_stream(server, prompt):
    """Starts a long streaming request and hangs up after its first few events."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("POST", "/v1/completions", body=json.dumps(dict(prompt=prompt, max_tokens=400, stream=True, temperature=0)),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    for _ in range(3):
        r.readline()
    conn.close()


SERVER_RESERVE = 96 << 20  # what serve reserves beside the plan's lines (64 connections, a 1 MiB body)


def budget_at(model, fraction, parallel):
    out = harness.plan(model, "--ram-budget", "64G", "--ctx", "512", "--parallel", str(parallel))
    minimum = harness.plan_bytes(out, "minimum budget:")
    all_fit = harness.plan_bytes(out, "holds every expert:")
    return int(SERVER_RESERVE + minimum + (all_fit - minimum) * fraction)


# The other architectures, synthesized (tiny): their text is noise, but noise decided by
# every bit of the logits. Longer, so that the requests overlap on these fast models.
ARCHITECTURES = ["qwen35moe", "laguna", "deepseek2", "xing4_0"]
SYNTH_REQUESTS = [(p, 256 + 32 * i, dict(sampling, ignore_eos=True), streamed) for i, (p, _, sampling, streamed) in enumerate(REQUESTS)]


class Batching(unittest.TestCase):
    def replies(self, *args, parallel, model=DEMO_MODEL, requests=REQUESTS, stagger=0.03):
        server = Server(model, "--ctx", "512", "--parallel", str(parallel), *args)
        try:
            def shared():
                return tuple(server.metric(f"epq_batch_{name}_total") for name in ("shared_steps", "shared_products", "deferred_passes"))
            if parallel == 1:
                return [ask(server, *r) for r in requests], shared()
            with concurrent.futures.ThreadPoolExecutor(len(requests) + 1) as pool:
                futures = []
                for i, r in enumerate(requests):
                    futures.append(pool.submit(ask, server, *r))
                    if i == 1:
                        pool.submit(abandon_stream, server, PROMPTS[3])
                    # Staggered: each joins the steps of those before it. Every request
                    # takes longer alone than the gap (48 tokens at 1000 tok/s on the demo
                    # model, 256 at 4000 on the fastest tiny one), so they overlap even on
                    # an idle machine.
                    time.sleep(stagger)
                texts = [f.result(timeout=300) for f in futures]
            return texts, shared()
        finally:
            server.stop()

    def check(self, *args, deferred=False, stagger=0.03, **model_and_requests):
        alone, (steps_alone, products_alone, _) = self.replies(*args, parallel=1, **model_and_requests)
        together, (steps, products, deferrals) = self.replies(*args, parallel=4, stagger=stagger, **model_and_requests)
        print(f"{os.path.basename(model_and_requests.get('model', DEMO_MODEL))}, {' '.join(args) or 'all in RAM'}: "
              f"{int(steps)} steps shared by several sequences, {int(products)} weight products run once for several, "
              f"{int(deferrals)} prompt chunks left for a later step")
        self.assertEqual((steps_alone, products_alone), (0, 0))
        self.assertGreater(steps, 0, "the requests never decoded together")
        self.assertGreater(products, 0, "the sequences' products never ran together")
        if deferred:
            self.assertGreater(deferrals, 0, "no prompt chunk waited for a later step")
        for i, ((a, a_logprobs), (b, b_logprobs)) in enumerate(zip(alone, together)):
            self.assertTrue(a, f"request {i} generated nothing")
            self.assertEqual(a, b, f"request {i} ({REQUESTS[i][2]})")
            self.assertEqual(a_logprobs, b_logprobs, f"request {i}: logprobs differ")

    def test_batched_sequences_get_their_tokens_alone_all_in_ram(self):
        self.check()

    def test_batched_sequences_get_their_tokens_alone_paged(self):
        # An arena of about a third of the experts: every step reads experts, shared by all.
        self.check("--ram-budget", str(budget_at(DEMO_MODEL, 0.3, 4)))

    def test_prompts_left_for_later_steps_keep_their_tokens(self):
        # Chunks of 4 prompt tokens, and at most 4 prompt tokens a step: the prompts that
        # arrive together take turns, between the decoding sequences' steps. They are sent
        # at once: a prompt of a few chunks takes milliseconds, so staggered ones need not
        # meet in a step.
        self.check("--batch", "4", deferred=True, stagger=0)

    def test_every_architecture_keeps_its_numbers_batched(self):
        for arch in ARCHITECTURES:
            with self.subTest(arch=arch):
                model = harness.synth(f"batching-{arch}.gguf", "--arch", arch, "--preset", "tiny")
                self.check(model=model, requests=SYNTH_REQUESTS)

    def test_plan_counts_every_sequence(self):
        one = harness.plan(DEMO_MODEL, "--ram-budget", "64G", "--ctx", "512")
        three = harness.plan(DEMO_MODEL, "--ram-budget", "64G", "--ctx", "512", "--parallel", "3")
        self.assertIn("--parallel 3", three)
        kv1 = harness.plan_mib(one, "KV cache and compute scratch")
        kv3 = harness.plan_mib(three, "KV cache and compute scratch (3 sequences)")
        self.assertAlmostEqual(kv3, 3 * kv1, delta=0.02 * kv3)
        self.assertLess(harness.plan_bytes(three, "minimum budget:") - harness.plan_bytes(one, "minimum budget:"),
                        3 * kv1 * 2**20)
        self.assertGreater(harness.plan_bytes(three, "minimum budget:") - harness.plan_bytes(one, "minimum budget:"),
                           1.9 * kv1 * 2**20)
        bad = run("serve", "-m", DEMO_MODEL, "--parallel", "0", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertEqual(len(bad.stderr.strip().splitlines()), 1, bad.stderr)
        self.assertIn("--parallel", bad.stderr)


if __name__ == "__main__":
    harness.main()
