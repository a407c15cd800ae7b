"""Prefetch (--prefetch gate|history|off; gate by default, off with --route-trace) and routing replay (--route-trace, for benchmarks): a replayed
trace drives the routers exactly as docs/CACHING.md maps it; prefetch and paging leave
every token and logit bit-identical to all in RAM, on the trained demo model's own
routing and on a replayed one; prefetched experts are then asked for; `epq bench
--route-trace --prefetch off,history` says that the routing was replayed and puts each run
against Belady's bound; bad combinations are one error line."""
import json
import math
import os
import re
import unittest

import gguf_edit
import harness
from harness import run, path, synth
from trace_file import read_trace

DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "demo")
DEMO_MODEL = os.path.join(DEMO, "epq-demo-kjv-q4.gguf")
VALID = os.path.join(DEMO, "valid.txt")
PROMPT = "And God said unto Moses, Go in unto Pharaoh, and tell him, Thus saith the LORD God of the Hebrews,"


def budget_at(model, fraction, *args):
    """A budget whose arena holds about `fraction` of the model's experts."""
    out = run("plan", "-m", model, "--ram-budget", "64G", *args).stdout
    minimum = int(re.search(r"minimum budget: .*?\((\d+) bytes", out).group(1))
    all_fit = int(re.search(r"holds every expert: .*?\((\d+) bytes", out).group(1))
    return int(minimum + (all_fit - minimum) * fraction)


def mapped(choice, weights, ratio, copies, k):
    """docs/CACHING.md's mapping of one traced token's choice onto a model's top-k."""
    experts = [e * ratio + c for e in choice for c in range(copies)][:k]
    return experts, [w / copies for w in weights for _ in range(copies)][:k]


class Prefetch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The demo model's routing: 6 layers of 64 experts, top-4.
        cls.trace = path("demo.trace")
        run("run", "-m", DEMO_MODEL, "-p", PROMPT, "-n", "80", "--ignore-eos", "--seed", "5", "-t", "2", "--trace-routing", cls.trace)
        # A model with more routed layers than the trace (8 > 6: layers 6 and 7 reuse
        # trace layers 0 and 1 at an offset) and twice its experts and top-k.
        cls.model = synth("replay-target.gguf", "--preset", "tiny", "--layers", "8", "--experts", "128", "--expert-used", "8")

    def test_route_trace_follows_the_documented_mapping(self):
        replayed = path("replayed.trace")
        proc = run("run", "-m", self.model, "-p", "one two three four five", "-n", "30", "--temp", "0", "--ignore-eos",
                   "--route-trace", self.trace, "--trace-routing", replayed, "-t", "2")
        self.assertIn("routing replayed from demo.trace", proc.stderr)
        self.assertIn("the outputs are not the model's", proc.stderr)
        source, got = read_trace(self.trace), read_trace(replayed)
        stream = [[] for _ in range(6)]  # per trace layer: every token's (choice, weights)
        for _, _, layers in source["passes"]:
            for layer, experts, weights in layers:
                stream[layer] += [(experts[t * 4:t * 4 + 4], weights[t * 4:t * 4 + 4]) for t in range(len(experts) // 4)]
        n = len(stream[0])
        token0 = 0
        for n_tokens, _, layers in got["passes"]:
            self.assertEqual([l for l, _, _ in layers], list(range(8)))
            for layer, experts, weights in layers:
                offset = (layer // 6) * n // 2  # R = ceil(8 / 6) = 2 model layers per trace layer
                for t in range(n_tokens):
                    choice, w = stream[layer % 6][(token0 + t + offset) % n]
                    want_e, want_w = mapped(choice, w, 2, 2, 8)
                    self.assertEqual(experts[t * 8:t * 8 + 8], want_e, (layer, token0 + t))
                    for a, b in zip(weights[t * 8:t * 8 + 8], want_w):
                        self.assertTrue(math.isclose(a, b, rel_tol=1e-6), (a, b))
            token0 += n_tokens

    def generate(self, model, *args, report=None):
        extra = ["--report-json", report] if report else []
        return run("run", "-m", model, "-p", PROMPT, "-n", "48", "--temp", "0", "--ignore-eos", "-t", "2", *extra, *args).stdout

    def test_prefetch_and_paging_keep_the_numbers(self):
        cases = [("demo model", DEMO_MODEL, [], ("off", "gate", "history")),
                 ("replayed routing", self.model, ["--route-trace", self.trace], ("off", "history"))]
        for name, model, extra, modes in cases:
            with self.subTest(name):
                resident = self.generate(model, *extra)
                budget = budget_at(model, 0.3)
                for mode in modes:
                    for io in ("uring", "pread"):
                        report = path("prefetch-report.json")
                        out = self.generate(model, "--ram-budget", str(budget), "--io", io, "--prefetch", mode, *extra, report=report)
                        self.assertEqual(out, resident, (mode, io))
                        with open(report) as f:
                            r = json.load(f)
                        self.assertEqual(r["prefetch"], mode)
                        if mode != "off":
                            print(f"{name}, {mode}, {io}: {r['decode_prefetched']} prefetched in decode, {r['decode_prefetch_used']} "
                                  f"used; predictor {r['decode_predicted_right']} of {r['decode_predicted']} named experts right")
                            self.assertGreater(r["decode_prefetched"], 0)
                            self.assertGreater(r["decode_prefetch_used"], 0)
                            self.assertGreater(r["decode_predicted_right"], 0)
                            self.assertLessEqual(r["decode_predicted_right"], r["decode_predicted"])
                        else:
                            self.assertEqual(r["decode_prefetched"], 0)
        # Logits at every position, paged with prefetch against all in RAM.
        a, b, text = path("resident.logits"), path("prefetch.logits"), path("text.txt")
        with open(VALID, "rb") as f, open(text, "wb") as t:
            t.write(f.read(1200))
        run("perplexity", "-m", DEMO_MODEL, "-f", text, "--batch", "16", "--all-positions", "--logits-out", a, "-t", "2")
        for mode in ("gate", "history"):
            run("perplexity", "-m", DEMO_MODEL, "-f", text, "--batch", "16", "--all-positions", "--logits-out", b, "-t", "2",
                "--ram-budget", str(budget_at(DEMO_MODEL, 0.3)), "--prefetch", mode)
            with open(a, "rb") as x, open(b, "rb") as y:
                self.assertEqual(x.read(), y.read(), mode)

    def test_gate_is_the_default_and_off_with_a_route_trace(self):
        budget = str(budget_at(DEMO_MODEL, 0.3))
        for extra, want in (([], "gate"), (["--route-trace", self.trace], "off"), (["--prefetch", "off"], "off")):
            with self.subTest(extra=extra):
                report = path("default-report.json")
                self.generate(DEMO_MODEL, "--ram-budget", budget, *extra, report=report)
                with open(report) as f:
                    r = json.load(f)
                self.assertEqual(r["prefetch"], want)
                if want == "gate":
                    self.assertGreater(r["decode_prefetched"], 0)
                else:
                    self.assertEqual(r["decode_prefetched"], 0)

    def test_stale_gate_ignores_a_skipped_mtp_block(self):
        # The last of qwen35moe's 8 blocks made a NextN block: layer 6's stale gate sees a
        # router in layer 7, which the model does not run and the pager does not page.
        base = synth("q35-base.gguf", "--arch", "qwen35moe", "--preset", "tiny")
        mtp = path("q35-mtp.gguf")
        gguf_edit.set_metadata(base, mtp, "qwen35moe.nextn_predict_layers", gguf_edit.UINT32, 1)
        resident = self.generate(mtp)
        report = path("mtp-report.json")
        out = self.generate(mtp, "--ram-budget", str(budget_at(mtp, 0.3)), "--prefetch", "gate", report=report)
        self.assertEqual(out, resident)
        with open(report) as f:
            self.assertGreater(json.load(f)["decode_prefetched"], 0)

    def test_replay_measures_the_predictor_and_ideal_prefetch(self):
        out = path("replay.json")
        proc = run("replay", self.trace, "--slots", "96", "--policy", "lru,lrfu", "--prefetch", "--json", out)
        self.assertIn("| lru | lrfu | lru + prefetch | lrfu + prefetch | min |", proc.stdout)
        with open(out) as f:
            j = json.load(f)
        p = j["predictor"]
        self.assertGreater(p["named"], 0)
        self.assertLessEqual(p["named"], min(p["requested"], p["predicted"]))
        cells = j["rows"][0]["policies"]
        for name in ("lru", "lrfu"):
            plain, ahead = cells[name], cells[name + " + prefetch"]
            self.assertEqual(plain["prefetched"], 0)
            self.assertEqual(ahead["requests"], plain["requests"])
            self.assertGreater(ahead["prefetched"], 0)
            self.assertLessEqual(ahead["prefetch_used"], ahead["prefetched"])
            # Every prefetch that is used saves a miss; each one is also read.
            self.assertEqual(ahead["hits"] + ahead["misses"], ahead["requests"])
            self.assertGreaterEqual(ahead["hits"], plain["hits"], name)

    def test_plan_counts_the_predictor(self):
        out = run("plan", "-m", self.model, "--ram-budget", "1G", "--prefetch", "history").stdout
        # 7 pairs of consecutive routed layers x 128 x 128 counts of 4 bytes, 64 bytes per layer.
        self.assertAlmostEqual(harness.plan_mib(out, "prefetch predictor"), (7 * 128 * 128 * 4 + 8 * 64) / 2**20, delta=0.01)
        for mode in ("off", "gate"):  # the stale gate keeps no tables
            self.assertNotIn("prefetch predictor", run("plan", "-m", self.model, "--ram-budget", "1G", "--prefetch", mode).stdout)

    def test_bench_replays_routing_and_shows_the_belady_bound(self):
        js = path("bench.json")
        budget = budget_at(self.model, 0.3)
        proc = run("bench", "-m", self.model, "--budgets", f"{budget},ram", "--evict", "lru", "--prefetch", "off,history", "--runs", "1",
                   "-n", "12", "-t", "2", "--route-trace", self.trace, "--json", js, "-q")
        self.assertIn("- routing: routing replayed from demo.trace", proc.stdout)
        self.assertIn("| lru + history prefetch |", proc.stdout)
        self.assertIn("Belady bound tok/s", proc.stdout)
        with open(js) as f:
            configs = json.load(f)["configs"]
        self.assertEqual([(c["budget"], c["prefetch"]) for c in configs], [(str(budget), "off"), (str(budget), "history"), ("ram", "off")])
        plain = configs[0]
        report = plain["runs"][0]["report"]
        self.assertTrue(report["route_trace"].startswith("routing replayed from demo.trace"))
        # Belady's MIN on the run's own routing never reads more than LRU did.
        mib = report["decode_bytes_read"] / (report["generated_tokens"] - 1) / 2**20
        self.assertLessEqual(plain["belady_mib_per_decode_token"], mib + 1e-9)

    def test_bad_combinations_are_one_error_line(self):
        cases = [
            (["run", "-m", DEMO_MODEL, "-p", "x", "-n", "1", "--route-trace", self.trace, "--expert-used", "8"],
             "cannot drive 64 experts top-8"),
            (["run", "-m", self.model, "-p", "x", "-n", "1", "--route-trace", path("missing.trace")], "missing.trace"),
            (["run", "-m", self.model, "-p", "x", "-n", "1", "--route-trace", DEMO_MODEL], "not a routing trace"),
            (["bench", "-m", self.model, "--budgets", "ram", "--prefetch", "maybe"], "--prefetch"),
            (["run", "-m", self.model, "-p", "x", "-n", "1", "--prefetch", "on"], "--prefetch"),
            (["run", "-m", self.model, "-p", "x", "-n", "1", "--prefetch", "gate", "--route-trace", self.trace, "--ram-budget", "1G"],
             "use --prefetch history"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                proc = run(*args, check=False)
                self.assertNotEqual(proc.returncode, 0)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn(message, lines[0])


if __name__ == "__main__":
    harness.main()
