"""I/O faults on both I/O engines (io_uring and pread), injected with the test-only
EPQ_FAULT_INJECT (src/pager/fault_injection.h) or made on the file itself: a failed read
is one error line and never a wrong token; a read cut short is read again for the rest;
a file truncated while running is an error, and one replaced by rename keeps being read
from the file that was opened; io_uring refused by the kernel falls back to pread with a
note. `epq serve` answers the affected request with a 500 and a JSON error (or an error
event in a stream), and the next request reads the expert again and gets the reply of a
server that never failed."""
import json
import os
import re
import shutil
import subprocess
import time
import unittest

import harness
from harness import PLAN_MARGIN, path, run, synth
from test_server import Server

PROMPT = "The river ran past the old mill and under the stone bridge"
ENGINES = (["--io", "uring"], ["--io", "pread"])
EIO = re.compile(r"read of \d+ bytes at offset \d+ failed: Input/output error")


def model():
    """A tiny model with ~1 MiB experts (4 layers x 8, top-2): at its minimum budget every
    token evicts and reads experts."""
    return synth("faults.gguf", "--preset", "tiny", "--expert-ffn", "2048")


def minimum_budget(m):
    return harness.plan_bytes(harness.plan(m, "--ram-budget", "64G", "--ctx", "4096"), "minimum budget:") + PLAN_MARGIN


def serve_minimum_budget(m):
    """The smallest budget `epq serve` runs in, from its refusal of a smaller one."""
    proc = run("serve", "-m", m, "--ctx", "4096", "--ram-budget", "1M", check=False)
    return int(re.search(r"below the minimum of .*? \((\d+) bytes\)", proc.stderr).group(1)) + PLAN_MARGIN


def faults(spec):
    return dict(os.environ, EPQ_FAULT_INJECT=spec)


def error_lines(stderr):
    return [line for line in stderr.splitlines() if "error" in line]


class RunFaults(unittest.TestCase):
    """`epq run` at the minimum budget, where every token reads experts."""

    @classmethod
    def setUpClass(cls):
        cls.model = model()
        cls.budget = minimum_budget(cls.model)
        cls.expected = run(*cls.args(24), "-m", cls.model).stdout

    @staticmethod
    def args(n):
        return ["run", "-p", PROMPT, "-n", str(n), "--temp", "0", "--ignore-eos", "-t", "2", "--ctx", "4096"]

    def paged(self, io, env=None, check=True):
        return run(*self.args(24), "-m", self.model, "--ram-budget", self.budget, *io, env=env, check=check)

    def test_a_failed_read_is_one_error_line_and_no_wrong_token(self):
        for io in ENGINES:
            for at in (1, 300):  # in the prompt, and a few tokens into the generation
                with self.subTest(io=io, at=at):
                    proc = self.paged(io, faults(f"eio@{at}"), check=False)
                    self.assertEqual(proc.returncode, 1, proc.stderr)
                    self.assertEqual(len(error_lines(proc.stderr)), 1, proc.stderr)
                    self.assertRegex(proc.stderr.splitlines()[-1], r"^epq: error: .*faults\.gguf: " + EIO.pattern + "$")
                    self.assertTrue(self.expected.startswith(proc.stdout), "tokens before the error differ")
                    self.assertLess(len(proc.stdout), len(self.expected))
                    if at == 300:
                        self.assertGreater(len(proc.stdout), 0)

    def test_short_reads_are_read_again_for_the_rest(self):
        for io in (*ENGINES, ["--buffered-io"]):
            with self.subTest(io=io):
                proc = self.paged(io, faults("short@1,short@2,short@50,short@300,short@301"))
                self.assertEqual(proc.stdout, self.expected)

    def test_io_uring_refused_falls_back_to_pread_with_a_note(self):
        proc = self.paged(["--io", "uring"], faults("uring-refused"))
        self.assertEqual(proc.stdout, self.expected)
        self.assertIn("io_uring is unavailable: Operation not permitted; falling back to pread threads", proc.stderr)
        self.assertRegex(proc.stderr, r"paging experts: .*, pread\n")

    def test_a_malformed_fault_is_one_error_line(self):
        proc = self.paged(["--io", "uring"], faults("eio@soon"), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "")
        self.assertIn("EPQ_FAULT_INJECT: 'eio@soon' is not a fault", proc.stderr.strip().splitlines()[-1])

    def start_long_run(self, io, victim, n):
        return subprocess.Popen([harness.EPQ, *self.args(n), "-m", victim, "--ram-budget", str(self.budget), *io],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="surrogateescape")

    def test_a_file_truncated_while_running_is_an_error(self):
        # 600 tokens read about 5 GB at the minimum budget: seconds on any disk, so the
        # run is still going when the file is cut 0.5 s in (200 took 1.1 s at 1.5 GB/s).
        expected = run(*self.args(600), "-m", self.model).stdout
        for io in ENGINES:
            with self.subTest(io=io):
                victim = path("truncated.gguf")
                shutil.copy(self.model, victim)
                proc = self.start_long_run(io, victim, 600)
                time.sleep(0.5)
                os.truncate(victim, os.path.getsize(victim) // 2)
                out, err = proc.communicate(timeout=120)
                self.assertEqual(proc.returncode, 1, err)
                self.assertEqual(len(error_lines(err)), 1, err)
                self.assertIn("the model file changed on disk while running", err)
                self.assertTrue(expected.startswith(out))
                self.assertLess(len(out), len(expected))

    def test_a_file_replaced_by_rename_keeps_being_read_from_the_open_file(self):
        expected = run(*self.args(200), "-m", self.model).stdout
        for io in ENGINES:
            with self.subTest(io=io):
                victim, other = path("renamed.gguf"), path("renamed.new")
                shutil.copy(self.model, victim)
                proc = self.start_long_run(io, victim, 200)
                time.sleep(0.5)
                with open(other, "wb") as f:  # another file under the same name: same size, other bytes
                    f.write(os.urandom(os.path.getsize(victim)))
                os.replace(other, victim)
                out, err = proc.communicate(timeout=120)
                self.assertEqual(proc.returncode, 0, err)
                self.assertEqual(out, expected)


class ServeFaults(unittest.TestCase):
    """`epq serve` at the minimum budget: the failed request gets a 500, the next one the
    reply of a server that never failed."""

    BODY = {"prompt": PROMPT, "max_tokens": 24, "temperature": 0, "ignore_eos": True}

    @classmethod
    def setUpClass(cls):
        cls.model = model()
        cls.budget = serve_minimum_budget(cls.model)
        server = Server(cls.model, "--ctx", "4096", "--ram-budget", str(cls.budget))
        try:
            status, reply = server.post("/v1/completions", cls.BODY)
            assert status == 200, reply
            cls.expected = reply["choices"][0]["text"]
        finally:
            server.stop()

    def serve(self, io, spec=None, m=None):
        server = Server(m or self.model, "--ctx", "4096", "--ram-budget", str(self.budget), *io, env=faults(spec) if spec else None)
        self.addCleanup(server.stop)
        return server

    def assert_serves_the_expected_reply(self, server):
        status, reply = server.post("/v1/completions", self.BODY)
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply["choices"][0]["text"], self.expected)
        self.assertEqual(server.get("/health")[0], 200)

    def test_a_failed_read_is_a_500_and_the_next_request_reads_the_expert_again(self):
        for io in ENGINES:
            with self.subTest(io=io):
                server = self.serve(io, "eio@5")  # in the first request's prompt
                status, reply = server.post("/v1/completions", self.BODY)
                self.assertEqual(status, 500, reply)
                self.assertEqual(reply["error"]["type"], "server_error")
                self.assertRegex(reply["error"]["message"], EIO)
                self.assert_serves_the_expected_reply(server)
                self.assert_serves_the_expected_reply(server)
                self.assertEqual(server.metric(re.escape('epq_request_errors_total{class="5xx"}')), 1)
                server.stop()
                log = server.proc.stderr.read()
                self.assertEqual(len(re.findall(r"epq serve: a request failed: .*" + EIO.pattern, log)), 1, log)

    def test_a_failed_read_ends_a_stream_with_an_error_event(self):
        for io in ENGINES:
            with self.subTest(io=io):
                server = self.serve(io, "eio@150")  # a few tokens into the generation
                status, payload = server.request("POST", "/v1/completions", dict(self.BODY, stream=True))
                self.assertEqual(status, 200)
                events = [json.loads(e[6:]) for e in payload.split("\n\n") if e.startswith("data: {")]
                self.assertTrue(payload.rstrip().endswith("data: [DONE]"))
                self.assertIn("error", events[-1])
                self.assertRegex(events[-1]["error"]["message"], EIO)
                text = "".join(e["choices"][0]["text"] for e in events[:-1])
                self.assertTrue(self.expected.startswith(text), "text before the error differs")
                self.assertGreater(len(text), 0)
                self.assert_serves_the_expected_reply(server)

    def test_short_reads_change_nothing(self):
        for io in ENGINES:
            with self.subTest(io=io):
                self.assert_serves_the_expected_reply(self.serve(io, "short@3,short@4,short@100"))

    def test_a_file_truncated_while_serving_is_a_500_and_the_server_stays_up(self):
        for io in ENGINES:
            with self.subTest(io=io):
                victim = path("serve-truncated.gguf")
                shutil.copy(self.model, victim)
                server = self.serve(io, m=victim)
                self.assert_serves_the_expected_reply(server)
                os.truncate(victim, os.path.getsize(victim) // 2)
                for _ in range(2):
                    status, reply = server.post("/v1/completions", dict(self.BODY, prompt="Another prompt entirely"))
                    self.assertEqual(status, 500, reply)
                    self.assertIn("the model file changed on disk while running", reply["error"]["message"])
                    self.assertEqual(server.get("/health")[0], 200)

    def test_a_file_replaced_by_rename_keeps_being_served(self):
        for io in ENGINES:
            with self.subTest(io=io):
                victim, other = path("serve-renamed.gguf"), path("serve-renamed.new")
                shutil.copy(self.model, victim)
                server = self.serve(io, m=victim)
                self.assert_serves_the_expected_reply(server)
                with open(other, "wb") as f:
                    f.write(os.urandom(os.path.getsize(victim)))
                os.replace(other, victim)
                self.assert_serves_the_expected_reply(server)

    def test_recurrent_state_starts_over_after_a_failed_read(self):
        """qwen35moe: a read that fails halfway through the first prompt leaves the Gated
        DeltaNet state half updated; the next request must not start from it."""
        m = synth("faults-qwen35moe.gguf", "--arch", "qwen35moe", "--preset", "tiny")
        budget = serve_minimum_budget(m)
        body = dict(self.BODY, max_tokens=12)
        clean = Server(m, "--ctx", "4096", "--ram-budget", str(budget))
        try:
            expected = clean.post("/v1/completions", body)[1]["choices"][0]["text"]
        finally:
            clean.stop()
        server = Server(m, "--ctx", "4096", "--ram-budget", str(budget), env=faults("eio@30"))
        self.addCleanup(server.stop)
        self.assertEqual(server.post("/v1/completions", body)[0], 500)
        status, reply = server.post("/v1/completions", body)
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply["choices"][0]["text"], expected)


if __name__ == "__main__":
    harness.main()
