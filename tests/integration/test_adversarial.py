"""What an adversarial user (or a web page, or a bad file) can throw at epq gets one clear
line and a non-zero exit, or the right HTTP status: never a signal, a hang, a budget
overrun or wrong output. Each test here failed before its fix."""
import json
import os
import re
import signal
import sys
import socket
import threading
import time
import unittest

import harness
from harness import NO_ASLR, path, run, synth
import gguf_edit
from test_server import Server, free_port

ERROR_LINE = re.compile(r"^epq: error: [^\n]+\n$")


def expect_one_error_line(test, proc, fragment):
    test.assertEqual(proc.returncode, 1, proc.stderr)
    test.assertRegex(proc.stderr, ERROR_LINE)
    test.assertIn(fragment, proc.stderr)


def tiny():
    return synth("tiny.gguf", "--preset", "tiny")


def edited(name, key, vtype, value):
    out = path(name)
    if not os.path.exists(out):
        gguf_edit.set_metadata(tiny(), out, key, vtype, value)
    return out


class CommandLine(unittest.TestCase):
    def test_values_the_server_refuses_are_refused_here_too(self):
        model = tiny()
        for args, fragment in [(["--temp", "nan"], "--temp: nan is not between 0 and 2"),
                               (["--temp", "inf"], "--temp"),
                               (["--top-p", "2"], "--top-p: 2 is not between 0 and 1"),
                               (["--min-p", "-0.5"], "--min-p"),
                               (["--repeat-penalty", "nan"], "--repeat-penalty"),
                               (["-n", "-1"], "--n-predict"),
                               (["--top-k", "-3"], "--top-k"),
                               (["--threads", "4096"], "CPUs this process may run on"),
                               (["--bogus"], "--bogus"),
                               (["--ctx", "abc"], "--ctx")]:
            with self.subTest(args=args):
                expect_one_error_line(self, run("run", "-m", model, "-p", "hi", *args, check=False), fragment)

    def test_budget_from_the_environment_is_checked(self):
        model = tiny()
        for value in ["-1", "1e3", "99999999999999999999", "0", "12M"]:
            with self.subTest(value=value):
                env = dict(os.environ, EPQ_RAM_BUDGET_MB=value)
                expect_one_error_line(self, run("plan", "-m", model, env=env, check=False), "EPQ_RAM_BUDGET_MB")
        expect_one_error_line(self, run("plan", "-m", model, "--ram-budget", "99999T", check=False), "larger than the limit")

    def test_batch_larger_than_the_context_is_clamped(self):
        model = tiny()
        a = run("run", "-m", model, "-p", "hello there", "-n", "4", "--temp", "0", "--ctx", "64", "--batch", "100000")
        b = run("run", "-m", model, "-p", "hello there", "-n", "4", "--temp", "0", "--ctx", "64", "--batch", "64")
        self.assertEqual(a.stdout, b.stdout)

    def test_help_and_version_still_exit_0(self):
        self.assertEqual(run("run", "--help").returncode, 0)
        self.assertIn("epq 0.1.0", run("--version").stdout)

    def test_limit_passes_its_commands_status_on_without_a_message(self):
        proc = run("limit", "--memory", "1G", "--", "sh", "-c", "exit 3", check=False)
        self.assertEqual(proc.returncode, 3)
        self.assertNotIn("epq: error", proc.stderr)

    def test_the_minimum_budget_is_exact(self):
        # The plan counts the process's measured peak, which address-space randomisation
        # moves by a few hundred KiB from run to run (and so, near a MiB, by a MiB): with
        # it off (setarch -R) the measurement repeats exactly, and so must the minimum.
        model = tiny()
        plan = run("plan", "-m", model, "--ram-budget", "1G", "--ctx", "256", wrapper=NO_ASLR).stdout
        minimum = int(re.search(r"minimum budget: .* \((\d+) bytes", plan).group(1))
        ok = run("run", "-m", model, "-p", "hi", "-n", "1", "--ctx", "256", "--ram-budget", str(minimum), check=False, wrapper=NO_ASLR)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        low = run("run", "-m", model, "-p", "hi", "-n", "1", "--ctx", "256", "--ram-budget", str(minimum - 1), check=False,
                  wrapper=NO_ASLR)
        expect_one_error_line(self, low, f"below the minimum of")
        self.assertIn(f"({minimum} bytes)", low.stderr)

    def test_bench_fails_when_every_configuration_failed(self):
        proc = run("bench", "-m", tiny(), "--budgets", "1M,2M", "--runs", "1", "-n", "2", "--no-probe", "-q", check=False)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("all 2 configurations failed", proc.stderr)


class OtherCommands(unittest.TestCase):
    def test_a_corrupt_logits_file_is_one_line(self):
        bad = path("corrupt.logits")
        with open(bad, "wb") as f:  # 2^30 positions of 2^32-1 logits claimed in a 16-byte file
            f.write(b"EPQL" + (1).to_bytes(4, "little") + (2**32 - 1).to_bytes(4, "little") + (2**30).to_bytes(4, "little"))
        text = path("corrupt.txt")
        with open(text, "w") as f:
            f.write("The river ran past the old mill and under the stone bridge.")
        proc = run("perplexity", "-m", tiny(), "-f", text, "--all-positions", "--compare", bad, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertRegex(proc.stderr, ERROR_LINE)

    def test_probe_and_synth_values_are_checked(self):
        for args, fragment in [(["probe-io", tiny(), "--size", "4G"], "--size"),
                               (["probe-io", tiny(), "--seconds", "nan"], "--seconds"),
                               (["probe-io", tiny(), "--size", "64M", "--depths", "64"], "within 1G"),
                               (["synth", "-o", path("x.gguf"), "--head-dim", "4"], "multiple of 8"),
                               (["synth", "-o", path("x.gguf"), "--zipf", "nan"], "--zipf"),
                               (["synth", "-o", path("x.gguf"), "--heads", "65536", "--head-dim", "65536"], "too large")]:
            with self.subTest(args=args[:3]):
                expect_one_error_line(self, run(*args, check=False, timeout=60), fragment)

    def test_chat_skips_an_overlong_line_and_goes_on(self):
        proc = run("chat", "-m", tiny(), "-n", "3", input="x" * (3 << 20) + "\nhello\n", check=False, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("a message is longer than 1048576 bytes; it was not sent", proc.stderr)
        self.assertNotEqual(proc.stdout.strip(), "")  # the next message got its reply


class NotRegularFiles(unittest.TestCase):
    def test_a_fifo_or_directory_is_refused_without_waiting_for_a_writer(self):
        fifo = path("model.fifo")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        model = tiny()
        for args in [["inspect", fifo], ["run", "-m", fifo, "-p", "hi"], ["plan", "-m", fifo, "--ram-budget", "1G"],
                     ["tokenize", "-m", fifo, "-p", "hi"], ["run", "-m", fifo, "-p", "hi", "--ram-budget", "1G"],
                     ["run", "-m", model, "-f", fifo], ["perplexity", "-m", model, "-f", fifo],
                     ["serve", "-m", model, "--chat-template", fifo, "--port", str(free_port())],
                     ["run", "-m", harness.WORKDIR, "-p", "hi"]]:
            with self.subTest(args=args[:2]):
                expect_one_error_line(self, run(*args, check=False, timeout=30), "not a regular file")


class ModelMetadata(unittest.TestCase):
    """Every hyperparameter that sizes a buffer is checked against the tensors it sizes."""

    def test_expert_ffn_length_must_match_the_tensors(self):
        key = "qwen3moe.expert_feed_forward_length"
        for name, vtype, value, fragment in [("ff0.gguf", gguf_edit.UINT32, 0, "= 0 is out of range"),
                                             ("ff40.gguf", gguf_edit.UINT64, 1 << 40, "= 1099511627776 is out of range"),
                                             ("ff128.gguf", gguf_edit.UINT32, 128, "256 feed-forward rows, but metadata"),
                                             ("ff512.gguf", gguf_edit.UINT32, 512, "256 feed-forward rows, but metadata")]:
            model = edited(name, key, vtype, value)
            for budget in ([], ["--ram-budget", "1G"]):
                with self.subTest(value=value, budget=budget):
                    expect_one_error_line(self, run("run", "-m", model, "-p", "hi", "-n", "1", *budget, check=False), fragment)
            expect_one_error_line(self, run("plan", "-m", model, "--ram-budget", "1G", check=False), fragment)

    def test_non_finite_or_absurd_floats_are_refused(self):
        for key, value in [("qwen3moe.attention.layer_norm_rms_epsilon", float("nan")),
                           ("qwen3moe.attention.layer_norm_rms_epsilon", 0.0),
                           ("qwen3moe.attention.layer_norm_rms_epsilon", float("inf")),
                           ("qwen3moe.rope.freq_base", float("nan")),
                           ("qwen3moe.rope.freq_base", -5.0),
                           ("qwen3moe.rope.scaling.factor", float("nan"))]:
            with self.subTest(key=key, value=value):
                model = edited(f"{key.split('.')[-1]}-{value}.gguf", key, gguf_edit.FLOAT32, value)
                expect_one_error_line(self, run("run", "-m", model, "-p", "hi", "-n", "1", check=False), key)

    def test_a_zero_expert_tensor_is_refused(self):
        model = tiny()
        with open(model, "rb") as f:
            header = f.read(1 << 20)
        name = b"blk.0.ffn_gate_exps.weight"
        at = header.index(len(name).to_bytes(8, "little") + name) + 8 + len(name) + 4 + 16  # its third dimension
        bad = path("zero-experts.gguf")
        with open(model, "rb") as src, open(bad, "wb") as dst:
            dst.write(src.read())
        with open(bad, "r+b") as f:
            f.seek(at)
            f.write((0).to_bytes(8, "little"))
        for args in (["run", "-m", bad, "-p", "hi"], ["plan", "-m", bad, "--ram-budget", "1G"], ["inspect", bad]):
            with self.subTest(args=args[0]):
                proc = run(*args, check=False, timeout=60)
                self.assertNotIn(proc.returncode, (-8, -11, 136, 139), proc.stderr)  # no SIGFPE, no SIGSEGV
                if args[0] != "inspect":
                    expect_one_error_line(self, proc, "expected 3 non-zero dimensions")

    def test_head_counts_are_checked_before_the_memory_plan(self):
        model = edited("heads.gguf", "qwen3moe.attention.head_count", gguf_edit.UINT32, (1 << 21) - 8)
        twice = path("heads-kv.gguf")
        if not os.path.exists(twice):
            gguf_edit.set_metadata(model, twice, "qwen3moe.attention.head_count_kv", gguf_edit.UINT32, (1 << 21) - 8)
        for args in (["plan", "-m", twice, "--ram-budget", "1G"], ["run", "-m", twice, "-p", "hi", "--ram-budget", "1G"]):
            with self.subTest(args=args[0]):
                expect_one_error_line(self, run(*args, check=False, timeout=60), "tensor 'blk.0.attn_q.weight' has shape")

    def test_metadata_that_would_take_too_much_memory_is_refused(self):
        n = 40 << 20  # 40 MiB of uint8 in the file, 320 MiB as parsed values
        model = edited("big-metadata.gguf", "general.padding", gguf_edit.ARRAY, (0, n, bytes(n)))
        expect_one_error_line(self, run("inspect", model, check=False), "would take more than 256 MiB of memory")

    def test_file_text_in_errors_is_made_printable(self):
        model = edited("arch-bytes.gguf", "general.architecture", gguf_edit.STRING, b"qw\x00en\nmoe\xff")
        proc = run("run", "-m", model, "-p", "hi", check=False)
        expect_one_error_line(self, proc, "unsupported architecture 'qw\\x00en\\x0amoe\\xff'")

    def test_the_file_shrinking_under_the_all_in_ram_mapping_is_one_line(self):
        # With --mmap the weights are read from the file's mapping as the model runs.
        model = path("shrinks.gguf")
        with open(tiny(), "rb") as src, open(model, "wb") as dst:
            dst.write(src.read())
        server = Server(model, "--mmap")
        os.truncate(model, 30000)
        try:
            server.post("/v1/completions", {"prompt": "hello", "max_tokens": 2})
        except OSError:
            pass  # the server is gone mid-request: that is the point
        server.proc.wait(timeout=30)
        self.assertEqual(server.proc.returncode, 1)
        err = server.proc.stderr.read()
        self.assertIn("epq: error: " + model + ": the file shrank or was replaced while its mapping was in use", err)


class ChatTemplates(unittest.TestCase):
    def test_long_operator_and_filter_chains_are_refused_not_a_crash(self):
        for name, source in [("plus", "{{ " + "+".join(["1"] * 100000) + " }}"),
                             ("filters", "{{ 'x'" + "|string" * 100000 + " }}"),
                             ("concat", "{{ 'a'" + " ~ 'a'" * 100000 + " }}"),
                             ("attributes", "{{ x" + ".y" * 100000 + " }}"),
                             ("and", "{{ 1" + " and 1" * 100000 + " }}")]:
            with self.subTest(name):
                model = edited(f"chain-{name}.gguf", "tokenizer.chat_template", gguf_edit.STRING, source)
                proc = run("chat", "-m", model, input="hello\n", check=False, timeout=120)
                expect_one_error_line(self, proc, "expression nested more than 1024 levels deep")
                port = free_port()
                proc = run("serve", "-m", model, "--port", str(port), check=False, timeout=120)
                expect_one_error_line(self, proc, "expression nested more than 1024 levels deep")


class ServerInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(tiny(), "--max-body", "256K")

    @classmethod
    def tearDownClass(cls):
        cls.server.proc.send_signal(signal.SIGTERM)
        cls.server.proc.wait(timeout=60)

    def post_raw(self, route, body, content_type="application/json", chunked=False):
        data = body if isinstance(body, bytes) else body.encode()
        if not chunked:
            return self.server.request("POST", route, data, {"Content-Type": content_type})
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=60) as s:
            s.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\n"
                      "Connection: close\r\n\r\n".encode())
            for i in range(0, len(data), 65536):
                piece = data[i:i + 65536]
                try:
                    s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                except OSError:
                    break  # the server stopped reading: its answer follows
            else:
                s.sendall(b"0\r\n\r\n")
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        head, _, payload = reply.partition(b"\r\n\r\n")
        return int(head.split()[1]), payload.decode("utf-8", "replace")

    def assert_error(self, reply, status, fragment):
        code, payload = reply
        self.assertEqual(code, status, payload)
        self.assertIn(fragment, json.loads(payload)["error"]["message"])

    def assert_healthy(self):
        self.assertEqual(self.server.get("/health")[0], 200)
        self.assertIsNone(self.server.proc.poll())

    def test_deeply_nested_json_is_a_400_in_every_place(self):
        deep = "[" * 60000 + "]" * 60000
        for body in ['{"messages":[{"role":"user","content":"hi","extra":' + deep + '}]}',
                     '{"messages":[{"role":"user","content":"hi"}],"tools":' + deep + '}',
                     '{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"a":' + deep + '}}']:
            self.assert_error(self.post_raw("/v1/chat/completions", body, "application/json"), 400, "deeper than 64 levels")
            # Other content types are refused before the body is parsed (CORS: see test_server_access).
            self.assert_error(self.post_raw("/v1/chat/completions", body, "text/plain"), 415, "application/json")
        self.assert_healthy()

    def test_numbers_out_of_range_and_bad_utf8_are_400(self):
        self.assert_error(self.post_raw("/v1/completions", '{"prompt":"hi","temperature":1e400}'), 400, "out of range")
        self.assert_error(self.post_raw("/v1/completions", b'{"prompt":"hi\xff\xfe"}'), 400, "not valid JSON")
        self.assert_error(self.post_raw("/v1/completions", b'{"prompt":"hi", "\xc0\xaf":1}'), 400, "not valid JSON")
        self.assert_healthy()

    def test_chunked_bodies_obey_max_body(self):
        big = json.dumps({"prompt": "a" * 400000, "max_tokens": 1})
        self.assert_error(self.post_raw("/v1/completions", big, chunked=True), 413, "larger than 262144 bytes")
        self.assert_error(self.post_raw("/v1/completions", big), 413, "larger than 262144 bytes")
        small = json.dumps({"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0})
        code, payload = self.post_raw("/v1/completions", small, chunked=True)
        self.assertEqual(code, 200, payload)
        self.assertEqual(json.loads(payload)["choices"][0]["text"], json.loads(self.post_raw("/v1/completions", small)[1])["choices"][0]["text"])

    def test_a_prompt_longer_than_the_context_is_refused_before_tokenizing(self):
        body = json.dumps({"prompt": "a" * 250000, "max_tokens": 1})
        code, payload = self.post_raw("/v1/completions", body)
        self.assertEqual(code, 400, payload)
        self.assertEqual(json.loads(payload)["error"]["code"], "context_length_exceeded")
        self.assertIn("more than 4096 tokens", json.loads(payload)["error"]["message"])

    def test_48_parallel_requests_match_sequential_ones(self):
        bodies = [{"prompt": f"Request {i} about the mill and the river {i * 3}", "max_tokens": 6, "temperature": 0} for i in range(48)]
        expected = [self.server.post("/v1/completions", b)[1]["choices"][0]["text"] for b in bodies]
        results = [None] * len(bodies)

        def send(i):
            results[i] = self.server.post("/v1/completions", bodies[i])[1]["choices"][0]["text"]

        threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, expected)

    def test_slow_clients_do_not_starve_health(self):
        clients = []
        try:
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # headers never end
                clients.append(s)
            time.sleep(0.5)
            start = time.time()
            self.assertEqual(self.server.get("/health")[0], 200)
            self.assertLess(time.time() - start, 5, "health waited for the slow clients")
        finally:
            for s in clients:
                s.close()


class ServerBudget(unittest.TestCase):
    def test_requests_never_break_the_budget(self):
        """Under --ram-budget 160M and a kernel limit of the same size, the worst bodies the
        server accepts (and some it refuses) leave it running (one sequence: four would
        not fit 160M)."""
        server = Server(tiny(), "--ram-budget", "160M", "--parallel", "1", wrapper=[harness.EPQ, "limit", "--memory", "160M", "--"])
        proc = server.proc
        try:
            limit = 1 << 20
            hi = {"role": "user", "content": "hi"}
            bodies = [json.dumps({"prompt": "a" * 3_000_000}),  # over --max-body: 413
                      json.dumps({"prompt": "a" * (limit - 100), "max_tokens": 1}),
                      json.dumps({"prompt": "a " * (limit // 2 - 100), "max_tokens": 1}),
                      json.dumps({"messages": [hi] * (limit // 36), "max_tokens": 1}),
                      json.dumps({"messages": [hi], "chat_template_kwargs": {"a": [{}] * (limit // 4 - 100)}, "max_tokens": 1}),
                      json.dumps({"messages": [hi], "chat_template_kwargs": {"a": ["a"] * (limit // 5 - 100)}, "max_tokens": 1}),
                      json.dumps({"messages": [dict(hi, x=[[]] * (limit // 4 - 100))], "max_tokens": 1})]
            statuses = []

            def send(body):
                route = "/v1/chat/completions" if "messages" in body else "/v1/completions"
                try:
                    statuses.append(server.request("POST", route, body, timeout=300)[0])
                except ConnectionResetError:
                    statuses.append("reset")  # refused before the client finished sending (oversized bodies)
                except OSError as e:
                    statuses.append(repr(e))

            threads = [threading.Thread(target=send, args=(b,)) for b in bodies * 2]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            alive = proc.poll() is None
        finally:
            if proc.poll() is None:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                    for child in f.read().split():  # the server: `epq limit` then reports its peak
                        os.kill(int(child), signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        self.assertTrue(alive, f"the server died: {statuses}\n{err}")
        self.assertEqual(statuses.count(413) + statuses.count("reset"), 2, f"{statuses}\n{err[-3000:]}")
        self.assertTrue(all(s in (200, 400, 413, 503, "reset") for s in statuses), statuses)
        self.assertGreaterEqual(statuses.count(200), 1, statuses)  # the rest may wait, then get 503 (busy)
        self.assertNotIn("killed by the memory limit", err)
        peak = int(re.search(r"peak RSS .* \((\d+) bytes\)", err).group(1))
        self.assertLessEqual(peak, 160 << 20, err)
        print(f"\nstatuses {sorted(map(str, statuses))}; {err.strip().splitlines()[-1]}", file=sys.stderr)


if __name__ == "__main__":
    harness.main()
