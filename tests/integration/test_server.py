"""`epq serve` against a tiny model: the OpenAI API through the official `openai` npm
client and raw HTTP, streaming that reassembles to the non-streaming text, 8 concurrent
clients, bad input, client disconnects, SIGTERM, reasoning_content, and the web page in
headless Chromium."""
import concurrent.futures
import fcntl
import http.client
import json
import os
import re
import select
import signal
import socket
import subprocess
import threading
import time
import unittest

import harness
from harness import path, synth

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENTS = os.path.join(HERE, "..", "server")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """An `epq serve` process on a free port."""

    def __init__(self, model, *args, wrapper=(), env=None):
        """wrapper: a command the server runs under, such as `epq limit --memory 160M --`;
        env: its environment (default: this one)."""
        self.port = free_port()
        self.proc = subprocess.Popen([*wrapper, harness.EPQ, "serve", "-m", model, "--port", str(self.port), "-t", "2", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("the server did not start: " + self.proc.stderr.read())

    def exchange(self, method, route, body=None, headers=None, timeout=120):
        """One request: the status, the response's headers (a dict, lower-case names) and its body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        conn.request(method, route, body=data, headers={"Content-Type": "application/json"} if headers is None else headers)
        r = conn.getresponse()
        payload = r.read().decode("utf-8", "surrogateescape")
        conn.close()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, payload

    def request(self, method, route, body=None, headers=None, timeout=120):
        status, _, payload = self.exchange(method, route, body, headers, timeout)
        return status, payload

    def get(self, route):
        return self.request("GET", route)

    def post(self, route, body):
        status, payload = self.request("POST", route, body)
        return status, json.loads(payload) if payload.startswith("{") else payload

    def stream(self, route, body):
        """The concatenated deltas of a streaming request, and the parsed events."""
        status, payload = self.request("POST", route, dict(body, stream=True))
        assert status == 200, payload
        events = [json.loads(e[6:]) for e in payload.split("\n\n") if e.startswith("data: ") and e != "data: [DONE]"]
        assert payload.rstrip().endswith("data: [DONE]"), payload[-200:]
        return events

    def metric(self, name):
        _, text = self.get("/metrics")
        return float(re.search(rf"^{name} (\S+)$", text, re.M).group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


def chat_text(events):
    return "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])


def completion_text(events):
    return "".join(e["choices"][0]["text"] for e in events if e["choices"])


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = synth("server.gguf", "--preset", "tiny")
        cls.server = Server(cls.model, "--ctx", "4096")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_models_health_metrics(self):
        status, body = self.server.get("/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["data"][0]["id"], "server")
        self.assertEqual(self.server.get("/health")[0], 200)
        _, text = self.server.get("/metrics")
        for name in ["epq_requests_total", "epq_generated_tokens_total", "epq_generation_tokens_per_second", "epq_queue_depth"]:
            self.assertRegex(text, rf"# TYPE {name} (counter|gauge)")

    def test_stream_reassembles_to_the_same_text_with_the_same_seed(self):
        body = {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 60, "temperature": 0.8, "seed": 42}
        status, full = self.server.post("/v1/chat/completions", body)
        self.assertEqual(status, 200, full)
        events = self.server.stream("/v1/chat/completions", body)
        self.assertEqual(chat_text(events), full["choices"][0]["message"]["content"])
        self.assertEqual(events[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual(events[-1]["choices"][0]["finish_reason"], full["choices"][0]["finish_reason"])
        self.assertEqual(full["usage"]["completion_tokens"] + full["usage"]["prompt_tokens"], full["usage"]["total_tokens"])
        self.assertLessEqual(full["usage"]["completion_tokens"], 60)

        body = {"prompt": "The river ran", "max_tokens": 50, "temperature": 0.7, "seed": 7, "ignore_eos": True}
        status, full = self.server.post("/v1/completions", body)
        self.assertEqual(status, 200)
        self.assertEqual(full["usage"]["completion_tokens"], 50)
        self.assertEqual(full["choices"][0]["finish_reason"], "length")
        self.assertEqual(completion_text(self.server.stream("/v1/completions", body)), full["choices"][0]["text"])
        prompt_tokens = len(harness.run("tokenize", "-m", self.model, "-p", "The river ran").stdout.split())
        self.assertEqual(full["usage"]["prompt_tokens"], prompt_tokens)

    def test_stop_strings_cut_the_text(self):
        body = {"prompt": "The old mill", "max_tokens": 60, "temperature": 0, "ignore_eos": True}
        _, full = self.server.post("/v1/completions", body)
        text = full["choices"][0]["text"]
        stop = re.search(r"[a-z]{3}", text[10:]).group(0)  # plain ASCII: invalid UTF-8 shows as U+FFFD
        _, cut = self.server.post("/v1/completions", dict(body, stop=[stop]))
        self.assertEqual(cut["choices"][0]["text"], text[:text.index(stop)])
        self.assertEqual(cut["choices"][0]["finish_reason"], "stop")

    def test_logprobs_of_chat_and_completions(self):
        chat = {"messages": [{"role": "user", "content": "Tell me about the mill."}], "max_tokens": 12, "temperature": 0,
                "ignore_eos": True, "logprobs": True, "top_logprobs": 3}
        status, reply = self.server.post("/v1/chat/completions", chat)
        self.assertEqual(status, 200, reply)
        content = reply["choices"][0]["logprobs"]["content"]
        self.assertEqual(len(content), reply["usage"]["completion_tokens"])
        for entry in content:
            top = [t["logprob"] for t in entry["top_logprobs"]]
            self.assertEqual(len(top), 3)
            self.assertEqual(top, sorted(top, reverse=True))
            self.assertLessEqual(top[0], 0)
            # Greedy: the token is the likeliest one.
            self.assertEqual((entry["token"], entry["logprob"]), (entry["top_logprobs"][0]["token"], top[0]))
            self.assertEqual(bytes(entry["bytes"]).decode("utf-8", "replace"), entry["token"])
        _, plain = self.server.post("/v1/chat/completions", {k: v for k, v in chat.items() if "logprobs" not in k})
        self.assertNotIn("logprobs", plain["choices"][0])
        self.assertEqual(plain["choices"][0]["message"], reply["choices"][0]["message"])

        body = {"prompt": "The old mill", "max_tokens": 10, "temperature": 0, "ignore_eos": True, "logprobs": 2}
        _, reply = self.server.post("/v1/completions", body)
        lp = reply["choices"][0]["logprobs"]
        self.assertEqual(len(lp["tokens"]), 10)
        self.assertEqual(lp["text_offset"][0], 0)
        self.assertTrue(all(len(top) == 2 and max(top.values()) == chosen for top, chosen in zip(lp["top_logprobs"], lp["token_logprobs"])))
        _, plain = self.server.post("/v1/completions", dict(body, logprobs=None))
        self.assertIsNone(plain["choices"][0]["logprobs"])

        for bad, message in [(dict(chat, top_logprobs=21), "'top_logprobs' must be"),
                             (dict(chat, logprobs=False), "'top_logprobs' needs 'logprobs': true"),
                             (dict(chat, stream=True), "'logprobs' is not supported with 'stream'")]:
            status, error = self.server.post("/v1/chat/completions", bad)
            self.assertEqual(status, 400, bad)
            self.assertIn(message, error["error"]["message"])
        status, error = self.server.post("/v1/completions", dict(body, logprobs=6))
        self.assertEqual(status, 400)

    def test_eight_concurrent_clients_get_their_own_replies(self):
        prompts = [f"Client {i} asks about the river number {i * 7}" for i in range(8)]
        expected = {}
        for p in prompts:
            _, r = self.server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": p}], "max_tokens": 12, "temperature": 0})
            expected[p] = r["choices"][0]["message"]["content"]
        self.assertGreater(len(set(expected.values())), 1)  # the prompts lead to different replies

        def client(p):
            bad = 0
            for i in range(20):
                body = {"messages": [{"role": "user", "content": p}], "max_tokens": 12, "temperature": 0}
                if i % 2:
                    text = chat_text(self.server.stream("/v1/chat/completions", body))
                else:
                    status, r = self.server.post("/v1/chat/completions", body)
                    text = r["choices"][0]["message"]["content"] if status == 200 else None
                bad += text != expected[p]
            return bad

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            self.assertEqual(sum(pool.map(client, prompts)), 0)

    def test_bad_input_gets_an_openai_error_and_the_server_stays_up(self):
        cases = [
            ("/v1/chat/completions", "{not json", 400, None),
            ("/v1/chat/completions", {"model": "server"}, 400, "messages"),
            ("/v1/chat/completions", {"messages": "hello"}, 400, "messages"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}, 400, "messages[0].content"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}, 400, "temperature"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}, 400, "max_tokens"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2}, 400, "n"),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "model": "gpt-9"}, 404, "model"),
            ("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt"),
            ("/v1/completions", {"prompt": "word " * 5000}, 400, "prompt"),
        ]
        for route, body, status, param in cases:
            with self.subTest(body=str(body)[:60]):
                got, payload = self.server.post(route, body)
                self.assertEqual(got, status, payload)
                self.assertIn("message", payload["error"])
                self.assertIn(payload["error"]["type"], ("invalid_request_error",))
                if param:
                    self.assertEqual(payload["error"]["param"], param)
        status, payload = self.server.post("/v1/completions", {"prompt": "word " * 5000})
        self.assertEqual(payload["error"]["code"], "context_length_exceeded")
        status, payload = self.server.request("POST", "/v1/completions", "x" * (9 << 20))
        self.assertEqual(status, 413)
        self.assertIn("larger than", json.loads(payload)["error"]["message"])
        self.assertEqual(self.server.get("/nowhere")[0], 404)
        self.assertEqual(self.server.get("/health")[0], 200)

    def test_a_client_that_disconnects_stops_its_generation(self):
        before = self.server.metric("epq_generated_tokens_total")
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        body = {"prompt": "The river", "max_tokens": 4000, "ignore_eos": True, "stream": True, "temperature": 0}
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        r.read1(100)
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        deadline = time.time() + 30
        while self.server.metric("epq_generated_tokens_total") == before and time.time() < deadline:
            time.sleep(0.05)
        generated = self.server.metric("epq_generated_tokens_total") - before
        self.assertGreater(generated, 0)
        self.assertLess(generated, 2000, "generation went on after the client left")
        status, _ = self.server.post("/v1/completions", {"prompt": "hi", "max_tokens": 2})
        self.assertEqual(status, 200)

    def test_openai_npm_client(self):
        proc = subprocess.run(["node", os.path.join(CLIENTS, "openai_client.mjs"), f"http://127.0.0.1:{self.server.port}/v1", "server"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = json.loads(proc.stdout)
        self.assertEqual(r["chat"], r["chat_stream"])
        self.assertGreater(r["chat_stream_chunks"], 1)
        self.assertEqual(r["completion"], r["completion_stream"])
        # The same request twice: the same counts, except that the second reuses the first's prompt.
        self.assertEqual(r["stream_usage"]["prompt_tokens_details"]["cached_tokens"], r["stream_usage"]["prompt_tokens"] - 1)
        for usage in (r["stream_usage"], r["chat_usage"]):
            del usage["prompt_tokens_details"]
        self.assertEqual(r["stream_usage"], r["chat_usage"])
        self.assertEqual(r["not_found"], {"status": 404, "type": "invalid_request_error", "code": "model_not_found"})
        self.assertEqual(r["models"], ["server"])

    def test_web_page_streams_a_reply_in_headless_chromium(self):
        proc = subprocess.run(["node", os.path.join(CLIENTS, "web_page.mjs"), f"http://127.0.0.1:{self.server.port}/"],
                              capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        r = json.loads(proc.stdout)
        self.assertEqual(r["errors"], 0)
        self.assertEqual(r["user"], "Hello there, tell me a story.")
        self.assertGreater(len(r["text"]), 0)
        self.assertGreater(r["lengths"], 2, "the reply appeared at once instead of streaming")


class Limits(unittest.TestCase):
    """Each limit's flag, set low, holds (docs/SERVER.md "Limits")."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(synth("server.gguf", "--preset", "tiny"), "--max-body", "64K", "--max-tokens", "8",
                            "--max-connections", "2", "--timeout", "3", "--request-timeout", "4")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_max_body(self):
        status, payload = self.server.post("/v1/completions", {"prompt": "a " * 50000, "max_tokens": 1})
        self.assertEqual(status, 413, payload)
        self.assertIn("larger than 65536 bytes", payload["error"]["message"])
        status, payload = self.server.post("/v1/completions", {"prompt": "a " * 30000, "max_tokens": 1})
        self.assertNotEqual(status, 413, payload)

    def test_max_tokens(self):
        status, payload = self.server.post("/v1/completions", {"prompt": "The river", "max_tokens": 9})
        self.assertEqual(status, 400, payload)
        self.assertEqual(payload["error"]["param"], "max_tokens")
        self.assertIn("between 1 and 8", payload["error"]["message"])
        for body in ({"max_tokens": 8}, {}):  # a request that does not ask gets the most it may have
            status, payload = self.server.post("/v1/completions", dict(body, prompt="The river", ignore_eos=True))
            self.assertEqual(status, 200, payload)
            self.assertEqual(payload["usage"]["completion_tokens"], 8)

    def test_max_connections_and_timeout(self):
        """Two silent clients hold both connection threads: a third waits until --timeout
        (3 s) drops them, then is served."""
        slow = [socket.create_connection(("127.0.0.1", self.server.port), timeout=30) for _ in range(2)]
        start = time.time()
        for s in slow:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        with self.assertRaises(TimeoutError):
            self.server.request("GET", "/health", timeout=1)
        self.assertEqual(self.server.request("GET", "/health", timeout=30)[0], 200)
        for s in slow:
            while s.recv(4096):  # until the server closes it (a socket timeout of 30 s fails the test)
                pass
            s.close()
        waited = time.time() - start
        self.assertGreater(waited, 2.5)
        self.assertLess(waited, 8, "the server kept silent clients past --timeout")

    def test_a_client_that_never_finishes_its_body_times_out_while_others_are_served(self):
        slow = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        start = time.time()
        slow.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"prompt\": ")  # 11 of 100 bytes, then nothing
        time.sleep(0.3)  # the server is reading its body
        status, payload = self.server.post("/v1/completions", {"prompt": "The river", "max_tokens": 4})
        self.assertEqual(status, 200, payload)
        self.assertLess(time.time() - start, 2.5, "another client waited for the slow one")
        while slow.recv(4096):  # whatever the server says, it closes the connection
            pass
        slow.close()
        waited = time.time() - start
        self.assertGreater(waited, 2.5)
        self.assertLess(waited, 8, "the server kept a silent client past --timeout")

    def trickle(self, head, rest, every=0.5, limit=15):
        """Sends head, then rest a byte every `every` s (well within --timeout) until the
        server closes the connection or `limit` s pass: what the server sent, the seconds
        it took and the bytes of rest sent."""
        s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30)
        start = time.time()
        s.sendall(head)
        reply, sent = b"", 0
        try:
            while time.time() - start < limit:
                if select.select([s], [], [], every)[0]:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
                elif sent < len(rest):
                    s.sendall(rest[sent:sent + 1])
                    sent += 1
        except (ConnectionResetError, BrokenPipeError):
            pass
        finally:
            s.close()
        return reply, time.time() - start, sent

    def check_trickle_cut_off_while_others_are_served(self, head, rest):
        """A client that trickles its request holds its connection thread only until
        --request-timeout (4 s), though each byte comes well within --timeout (3 s); the
        other thread serves another client meanwhile. Returns the trickler's reply."""
        result = []
        trickler = threading.Thread(target=lambda: result.append(self.trickle(head, rest)))
        trickler.start()
        time.sleep(1.5)
        start = time.time()
        self.assertEqual(self.server.request("GET", "/health", timeout=10)[0], 200)
        status, payload = self.server.post("/v1/completions", {"prompt": "The river", "max_tokens": 2})
        self.assertEqual(status, 200, payload)
        self.assertLess(time.time() - start, 2.5, "another client waited for the trickling one")
        trickler.join()
        reply, waited, sent = result[0]
        self.assertGreaterEqual(sent, 6, "the client could not trickle steadily")
        self.assertGreater(waited, 3.5)
        self.assertLess(waited, 7, f"the server kept a trickling client past --request-timeout ({sent} bytes sent)")
        head_line, _, body = reply.partition(b"\r\n\r\n")
        self.assertTrue(head_line.startswith(b"HTTP/1.1 408 "), reply)
        self.assertIn(b"Connection: close", head_line)
        return json.loads(body)["error"]["message"]

    def test_a_client_trickling_its_headers_is_cut_off_at_the_request_timeout(self):
        message = self.check_trickle_cut_off_while_others_are_served(b"GET /health HTTP/1.1\r\n", b"Host: localhost\r\nX-Slow: " + b"a" * 100)
        self.assertIn("did not arrive within the request timeout (4 s)", message)

    def test_a_client_trickling_its_body_is_cut_off_at_the_request_timeout(self):
        head = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                b"Content-Length: 200\r\n\r\n")
        message = self.check_trickle_cut_off_while_others_are_served(head, b'{"prompt": "' + b"a" * 150)
        self.assertIn("did not arrive within 4 s (--request-timeout)", message)

    def test_trickling_clients_on_every_connection_hold_them_only_until_the_request_timeout(self):
        """A slowloris: two trickling clients take both connection threads; a third is
        served once --request-timeout (4 s) cuts them off."""
        tricklers = [threading.Thread(target=self.trickle, args=(b"GET /health HTTP/1.1\r\n", b"Host: localhost\r\nX-Slow: " + b"a" * 100))
                     for _ in range(2)]
        start = time.time()
        for t in tricklers:
            t.start()
        time.sleep(0.5)
        self.assertEqual(self.server.request("GET", "/health", timeout=10)[0], 200)
        waited = time.time() - start
        for t in tricklers:
            t.join()
        self.assertGreater(waited, 3.5, "the tricklers did not hold the connection threads")
        self.assertLess(waited, 7, "the tricklers held every connection thread past --request-timeout")

    def raw_reply(self, data):
        """Sends data on a connection of its own; the status line and JSON error message of the reply."""
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=10) as s:
            s.sendall(data)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        return head.split(b"\r\n")[0].decode(), json.loads(body)

    def test_request_headers_are_bounded_while_they_are_read(self):
        def request(headers, line=b"GET /health HTTP/1.1"):
            return line + b"\r\nConnection: close\r\n" + b"".join(headers) + b"\r\n"

        errors = re.escape('epq_request_errors_total{class="4xx"}')
        errors_before = self.server.metric(errors)
        status, body = self.raw_reply(request([b"X-%d: y\r\n" % i for i in range(127)]))  # 128 with Connection
        self.assertEqual(status, "HTTP/1.1 200 OK", body)
        status, body = self.raw_reply(request([b"X-%d: y\r\n" % i for i in range(128)]))
        self.assertEqual(status, "HTTP/1.1 431 Request Header Fields Too Large")
        self.assertEqual(body["error"]["message"], "the request has more than 128 header lines")
        status, body = self.raw_reply(request([b"X-Big: " + b"y" * 9000 + b"\r\n"]))
        self.assertEqual(status, "HTTP/1.1 431 Request Header Fields Too Large")
        self.assertEqual(body["error"]["message"], "a header line is longer than 8192 bytes")
        status, body = self.raw_reply(request([b"X-%d: %s\r\n" % (i, b"y" * 1000) for i in range(40)]))
        self.assertEqual(status, "HTTP/1.1 431 Request Header Fields Too Large")
        self.assertEqual(body["error"]["message"], "the request line and headers are larger than 32768 bytes")
        status, body = self.raw_reply(request([], b"GET /health?" + b"a" * 9000 + b" HTTP/1.1"))
        self.assertEqual(status, "HTTP/1.1 414 URI Too Long")
        # Headers sent after the limit were never read: the server is still up and answers.
        self.assertEqual(self.server.get("/health")[0], 200)
        # The connection loop's own refusals count as client errors: these four at least (the
        # tricklers of other tests in this class may be refused 408 meanwhile).
        self.assertGreaterEqual(self.server.metric(errors) - errors_before, 4)

    def test_an_idle_keep_alive_connection_is_closed_after_the_timeout(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        for _ in range(2):  # one connection, two requests
            conn.request("GET", "/health")
            self.assertEqual(conn.getresponse().read(), b'{"queue_depth":0,"status":"ok"}')
        start = time.time()
        self.assertEqual(conn.sock.recv(4096), b"")  # the server closed it
        waited = time.time() - start
        conn.close()
        self.assertGreater(waited, 2.5)
        self.assertLess(waited, 8, "the server kept an idle connection past --timeout")


class ReplyTimeout(unittest.TestCase):
    """--reply-timeout: a client that reads its reply slowly, but often enough that no write
    waits past --timeout, holds its connection (here the only connection thread) only until the
    reply has waited that long; then the connection is reset."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(synth("server.gguf", "--preset", "tiny"), "--timeout", "60", "--reply-timeout", "3",
                            "--max-connections", "1")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_a_client_reading_its_reply_slowly_is_cut_off_at_the_reply_timeout(self):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # before connecting: a small window
        # Generating the reply (4000 tokens) comes before its first byte and is not bounded
        # by --reply-timeout; it took over 30 s on a loaded 2-core Zen 1.
        s.settimeout(300)
        s.connect(("127.0.0.1", self.server.port))
        # About 5.6 MB of JSON, more than the server's socket buffers (4 MiB at most by
        # default, about half of it payload).
        body = json.dumps({"messages": [{"role": "user", "content": "The river"}], "max_tokens": 4000, "ignore_eos": True,
                           "logprobs": True, "top_logprobs": 20, "temperature": 0})
        s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        started = time.time()
        received = s.recv(64)
        print(f"the reply's first bytes came after {time.time() - started:.1f} s")
        self.assertTrue(received.startswith(b"HTTP/1.1 200 "), received)
        s.settimeout(30)
        # Another client waits for the only connection thread while this one reads slowly.
        other = []
        waiter = threading.Thread(target=lambda: other.append(self.server.request("GET", "/health", timeout=30)[0]))
        start = time.time()
        waiter.start()
        # About 200 KB/s: each wait for room in the server's socket ends within --timeout
        # (60 s), but the 5.6 MB would take about 30 s.
        while waiter.is_alive() and time.time() - start < 25:
            received += s.recv(1 << 16)
            time.sleep(0.2)
        waited = time.time() - start
        waiter.join()
        self.assertEqual(other, [200], f"the slow reader kept the connection thread ({len(received)} bytes read)")
        self.assertGreater(waited, 2.5)
        self.assertLess(waited, 15, "the slow reader kept the connection thread past --reply-timeout")
        # What the client had not read is dropped, not sent on: the connection was reset.
        with self.assertRaises(ConnectionResetError):
            while s.recv(1 << 16):
                pass
        s.close()


class AddressLimit(unittest.TestCase):
    """--max-connections-per-address: one address cannot take every connection thread."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server(synth("server.gguf", "--preset", "tiny"), "--max-connections", "4",
                            "--max-connections-per-address", "2", "--timeout", "3")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def health_from(self, address):
        """GET /health from a local address of the loopback network (all of 127/8 is local)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10, source_address=(address, 0))
        conn.request("GET", "/health")
        r = conn.getresponse()
        reply = r.status, r.getheader("Retry-After"), r.read()
        conn.close()
        return reply

    def test_a_third_connection_of_one_address_gets_429_while_others_are_served(self):
        errors = re.escape('epq_request_errors_total{class="4xx"}')
        errors_before = self.server.metric(errors)
        slow = []
        for _ in range(2):  # two silent connections from 127.0.0.3 hold its two slots
            s = socket.create_connection(("127.0.0.1", self.server.port), timeout=30, source_address=("127.0.0.3", 0))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and then nothing
            slow.append(s)
        time.sleep(0.3)  # both are taken up by connection threads
        start = time.time()
        status, retry_after, body = self.health_from("127.0.0.3")
        self.assertEqual(status, 429, body)
        self.assertEqual(retry_after, "1")
        self.assertIn("already holds 2 connections", json.loads(body)["error"]["message"])
        self.assertEqual(self.health_from("127.0.0.4")[0], 200)  # another address goes on
        self.assertLess(time.time() - start, 2.5, "a refusal or another address waited for the silent clients")
        for s in slow:
            while s.recv(4096):  # until --timeout drops them
                pass
            s.close()
        time.sleep(0.3)  # the slots are given back as the connections end
        self.assertEqual(self.health_from("127.0.0.3")[0], 200)
        self.assertGreaterEqual(self.server.metric(errors) - errors_before, 1)


class ReasoningTest(unittest.TestCase):
    def test_text_after_an_open_think_tag_is_reasoning_content(self):
        model = synth("server.gguf", "--preset", "tiny")
        template = path("think.jinja")
        with open(template, "w") as f:
            f.write("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")
        server = Server(model, "--chat-template", template)
        try:
            body = {"messages": [{"role": "user", "content": "Think first"}], "max_tokens": 20, "temperature": 0}
            _, r = server.post("/v1/chat/completions", body)
            message = r["choices"][0]["message"]
            _, raw = server.post("/v1/completions", {"prompt": "<|im_start|>user\nThink first<|im_end|>\n<|im_start|>assistant\n<think>\n",
                                                     "max_tokens": 20, "temperature": 0})
            text = raw["choices"][0]["text"]
            if "</think>" in text:
                reasoning, content = text.split("</think>", 1)
                self.assertEqual(message["reasoning_content"], reasoning)
                self.assertEqual(message["content"], content.lstrip("\n"))
            else:
                self.assertEqual(message.get("reasoning_content"), text)
                self.assertEqual(message["content"], "")
            events = server.stream("/v1/chat/completions", body)
            streamed = "".join(e["choices"][0]["delta"].get("reasoning_content", "") for e in events if e["choices"])
            self.assertEqual(streamed, message.get("reasoning_content", ""))
        finally:
            server.stop()


class Shutdown(unittest.TestCase):
    def test_sigterm_finishes_queued_requests_and_exits_cleanly(self):
        model = synth("server.gguf", "--preset", "tiny")
        server = Server(model, "--ctx", "4096")
        results = []
        body = {"prompt": "The river", "max_tokens": 1500, "ignore_eos": True, "temperature": 0}
        worker = threading.Thread(target=lambda: results.append(server.post("/v1/completions", body)))
        worker.start()
        deadline = time.time() + 30  # SIGTERM once the request is queued or running (or done)
        while not results and server.metric("epq_queue_depth") == 0 and time.time() < deadline:
            time.sleep(0.01)
        server.proc.send_signal(signal.SIGTERM)
        worker.join(timeout=120)
        self.assertEqual(server.proc.wait(timeout=60), 0)
        status, r = results[0]
        self.assertEqual(status, 200)
        self.assertEqual(r["usage"]["completion_tokens"], 1500)
        self.assertIn("SIGTERM received", server.proc.stderr.read())


def setUpModule():
    """Installs the npm clients once; test scripts that run at the same time wait for it
    (a lock), and a marker written after `npm ci` says the install is complete."""
    marker = os.path.join(CLIENTS, "node_modules", ".epq-installed")
    with open(os.path.join(CLIENTS, ".install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(marker):
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENTS, check=True, capture_output=True, timeout=600)
            open(marker, "w").close()


if __name__ == "__main__":
    harness.main()
