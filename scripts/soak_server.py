#!/usr/bin/env python3
"""A soak test of `epq serve`: many clients at once, each sending a mix of good and bad
requests, against a tiny synthesized model. Loopback only, bounded in time and count.

    python3 scripts/soak_server.py --epq build/epq --workdir /tmp/soak            # 8 clients x 100 requests
    python3 scripts/soak_server.py --epq build/epq --workdir /tmp/soak --clients 2 --requests 10

Each client has its own prompt and sampling seed and sends, each kind once and then in an
order drawn from its own random generator: completions and chat completions, plain and streaming (the
streamed text reassembled); streams it leaves after the first chunk; malformed JSON;
bodies over --max-body, sized and chunked; bodies sent slowly in pieces (within the
server's --timeout); and requests it never finishes (the server must close them after
--timeout). Before the clients start, every client's two good requests are sent alone,
one at a time; during the soak each good reply must equal its reply alone (a reply meant
for another client, or one changed by another client's request, fails).

It checks: the server never crashes and exits 0 on SIGTERM; no reply differs from its
reply alone; every bad request gets its status (400, 413) and the server closes stalled
connections; /metrics counts no 5xx; and the server's RSS (VmRSS, sampled every 0.1 s
from /proc) is flat: the second half's peak is at most the first half's plus
max(2 MiB, 2%). Prints a summary, writes it as JSON with --json, exits 1 on any failure."""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = "127.0.0.1"
MAX_BODY = 64 << 10
TIMEOUT_S = 2  # the server's --timeout
KINDS = ["completion", "chat", "completion_stream", "chat_stream", "disconnect", "malformed", "oversized", "oversized_chunked",
         "slow", "stalled"]
WEIGHTS = [20, 20, 15, 15, 8, 6, 4, 4, 6, 2]


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def vm_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class Soak:
    def __init__(self, args):
        self.args = args
        self.port = free_port()
        self.lock = threading.Lock()
        self.counts = {k: 0 for k in KINDS}
        self.seconds_by_kind = {k: [] for k in KINDS}
        self.failures = []
        self.rss = []  # (seconds since the soak started, bytes)
        self.deadline = time.time() + args.time_limit

    # --- the server -------------------------------------------------------------------
    def start(self, model):
        cmd = [self.args.epq, "serve", "-m", model, "--host", HOST, "--port", str(self.port), "-t", "2", "--ctx", "2048",
               "--max-body", str(MAX_BODY), "--timeout", str(TIMEOUT_S), *self.args.serve_args]
        self.log = open(os.path.join(self.args.workdir, "server.log"), "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            if self.proc.poll() is not None:
                break
            try:
                if self.exchange("GET", "/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise SystemExit("the server did not start; see " + self.log.name)

    def exchange(self, method, route, body=None, timeout=60, chunked=False):
        conn = http.client.HTTPConnection(HOST, self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"}
            if chunked:
                data = body.encode()
                conn.request(method, route, body=iter([data[i:i + 8192] for i in range(0, len(data), 8192)]), headers=headers,
                             encode_chunked=True)
            else:
                conn.request(method, route, body=body, headers=headers)
            r = conn.getresponse()
            return r.status, r.read().decode("utf-8", "replace")
        finally:
            conn.close()

    # --- one client's requests ---------------------------------------------------------
    @staticmethod
    def body(client, chat, stream=False, max_tokens=12):
        b = {"max_tokens": max_tokens, "temperature": 0.9, "seed": 1000 + client, "stream": stream}
        text = f"Client {client} asks about the river number {client * 7} and the mill"
        if chat:
            b["messages"] = [{"role": "user", "content": text}]
        else:
            b["prompt"] = text
        return b

    @staticmethod
    def reply_text(status, payload, chat, stream):
        if status != 200:
            return None
        if not stream:
            choice = json.loads(payload)["choices"][0]
            return choice["message"]["content"] if chat else choice["text"]
        if not payload.rstrip().endswith("data: [DONE]"):
            return None
        events = [json.loads(e[6:]) for e in payload.split("\n\n") if e.startswith("data: {")]
        if any("error" in e for e in events):
            return None
        if chat:
            return "".join(e["choices"][0]["delta"].get("content", "") for e in events if e["choices"])
        return "".join(e["choices"][0]["text"] for e in events if e["choices"])

    def good(self, client, chat, stream):
        status, payload = self.exchange("POST", "/v1/chat/completions" if chat else "/v1/completions",
                                        json.dumps(self.body(client, chat, stream)))
        return self.reply_text(status, payload, chat, stream), status, payload

    def raw(self, data, timeout=60):
        s = socket.create_connection((HOST, self.port), timeout=timeout)
        s.sendall(data)
        return s

    @staticmethod
    def head(route, length):
        return (f"POST {route} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {length}\r\n\r\n").encode()

    def one(self, client, kind, expected):
        """Sends one request of `kind`; returns None, or what went wrong."""
        if kind in ("completion", "chat", "completion_stream", "chat_stream"):
            chat, stream = kind.startswith("chat"), kind.endswith("stream")
            text, status, payload = self.good(client, chat, stream)
            if text != expected[client][chat]:
                return f"{kind}: status {status}, got {text!r} instead of {expected[client][chat]!r} ({payload[:200]!r})"
        elif kind == "disconnect":
            body = json.dumps(dict(self.body(client, False, True, 2000), ignore_eos=True)).encode()
            s = self.raw(self.head("/v1/completions", len(body)) + body)
            got = b""
            while b"data: {" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    return "disconnect: the stream ended before its first chunk"
                got += chunk
            s.close()
        elif kind == "malformed":
            status, payload = self.exchange("POST", "/v1/completions", '{"prompt": "x", "max_tokens": ')
            if status != 400:
                return f"malformed: status {status} ({payload[:200]!r})"
        elif kind in ("oversized", "oversized_chunked"):
            body = json.dumps({"prompt": "word " * (MAX_BODY // 4), "max_tokens": 1})
            status, payload = self.exchange("POST", "/v1/completions", body, chunked=kind == "oversized_chunked")
            if status != 413:
                return f"{kind}: status {status} ({payload[:200]!r})"
        elif kind == "slow":
            body = json.dumps(self.body(client, False)).encode()
            s = self.raw(self.head("/v1/completions", len(body)))
            for i in range(0, len(body), 40):  # a piece every 0.15 s, well within --timeout
                time.sleep(0.15)
                s.sendall(body[i:i + 40])
            s.settimeout(60)
            reply = b""
            while True:  # one reply; the connection stays open for the next request
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
                head, _, rest = reply.partition(b"\r\n\r\n")
                m = re.search(rb"Content-Length: (\d+)", head, re.I)
                if m and len(rest) >= int(m.group(1)):
                    break
            s.close()
            head, _, rest = reply.partition(b"\r\n\r\n")
            status = int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0
            text = self.reply_text(status, rest.decode("utf-8", "replace"), False, False)
            if text != expected[client][False]:
                return f"slow: status {status}, got {text!r}"
        elif kind == "stalled":
            start = time.time()
            s = self.raw(self.head("/v1/completions", 100) + b'{"prompt": ', timeout=TIMEOUT_S + 20)
            try:
                while s.recv(4096):  # until the server closes it
                    pass
            except ConnectionResetError:
                pass
            except socket.timeout:
                return "stalled: the server kept a silent connection open past --timeout"
            finally:
                s.close()
            if time.time() - start > TIMEOUT_S + 10:
                return f"stalled: closed after {time.time() - start:.1f} s"
        return None

    def client(self, client, expected):
        rng = random.Random(client)
        for n in range(self.args.requests):
            if time.time() > self.deadline:
                with self.lock:
                    self.failures.append(f"client {client}: the time limit ended the run after {n} requests")
                return
            # Every kind once first (so that even a short run sends each), then a random mix.
            kind = KINDS[(n + client) % len(KINDS)] if n < len(KINDS) else rng.choices(KINDS, WEIGHTS)[0]
            began = time.time()
            try:
                problem = self.one(client, kind, expected)
            except OSError as e:
                problem = f"{kind}: {type(e).__name__}: {e}"
            with self.lock:
                self.counts[kind] += 1
                self.seconds_by_kind[kind].append(time.time() - began)
                if problem:
                    self.failures.append(f"client {client}: {problem}")

    def sample_rss(self, start, stop):
        while not stop.is_set():
            try:
                self.rss.append((time.time() - start, vm_rss(self.proc.pid)))
            except (OSError, RuntimeError):
                return
            stop.wait(0.1)

    # --- the run ---------------------------------------------------------------------
    def run(self):
        os.makedirs(self.args.workdir, exist_ok=True)
        model = os.path.join(self.args.workdir, "soak.gguf")
        if not os.path.exists(model):
            subprocess.run([self.args.epq, "synth", "-q", "-o", model, "--preset", "tiny"], check=True)
        self.start(model)
        try:
            # Every client's replies alone, one request at a time.
            expected = []
            for c in range(self.args.clients):
                expected.append({chat: self.good(c, chat, False)[0] for chat in (False, True)})
                if None in expected[-1].values():
                    raise SystemExit(f"client {c}'s request alone failed")
            if len({e[False] for e in expected}) < min(2, self.args.clients):
                raise SystemExit("the clients' prompts lead to the same reply: mixing could not be seen")
            start = time.time()
            stop = threading.Event()
            sampler = threading.Thread(target=self.sample_rss, args=(start, stop))
            sampler.start()
            threads = [threading.Thread(target=self.client, args=(c, expected)) for c in range(self.args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.seconds = time.time() - start
            stop.set()
            sampler.join()
            self.crashed = self.proc.poll() is not None
            self.health = self.exchange("GET", "/health")[0] if not self.crashed else None
            metrics = self.exchange("GET", "/metrics")[1] if not self.crashed else ""
            m = re.search(r'^epq_request_errors_total\{class="5xx"\} (\S+)$', metrics, re.M)
            self.server_errors = float(m.group(1)) if m else None
        finally:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_status = self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.exit_status = "hung on SIGTERM"
            self.log.close()
        return self.report()

    def report(self):
        half = self.seconds / 2
        first = max((b for t, b in self.rss if t < half), default=0)
        second = max((b for t, b in self.rss if t >= half), default=0)
        tolerance = max(2 << 20, first // 50)
        checks = {
            "no crash (alive after the soak, exit status 0 on SIGTERM)": not self.crashed and self.health == 200 and self.exit_status == 0,
            "no reply differs from its reply alone; every bad request got its status": not self.failures,
            "no 5xx counted by /metrics": self.server_errors == 0,
            "RSS flat (second half's peak <= first half's + max(2 MiB, 2%))": first > 0 and second <= first + tolerance,
        }
        result = {
            "clients": self.args.clients, "requests_per_client": self.args.requests, "seconds": round(self.seconds, 1),
            "requests": sum(self.counts.values()), "by_kind": self.counts, "failures": self.failures[:50],
            "median_seconds": {k: round(sorted(v)[len(v) // 2], 2) if v else None for k, v in self.seconds_by_kind.items()},
            "max_seconds": {k: round(max(v), 2) if v else None for k, v in self.seconds_by_kind.items()},
            "rss_samples": len(self.rss), "rss_first_half_peak_mib": round(first / 2**20, 2),
            "rss_second_half_peak_mib": round(second / 2**20, 2), "exit_status": self.exit_status,
            "server_5xx": self.server_errors, "load_average": [round(x, 2) for x in os.getloadavg()],
            "checks": checks, "passed": all(checks.values()),
        }
        print(f"epq serve soak: {self.args.clients} clients x {self.args.requests} requests, {result['requests']} sent in "
              f"{result['seconds']} s")
        print("  by kind (count, median and max seconds): " + ", ".join(
            f"{k} {v} ({result['median_seconds'][k]}, {result['max_seconds'][k]})" for k, v in self.counts.items()))
        print(f"  load average at the end (1, 5, 15 min): {result['load_average']}")
        print(f"  RSS peak: first half {result['rss_first_half_peak_mib']} MiB, second half {result['rss_second_half_peak_mib']} MiB "
              f"({len(self.rss)} samples)")
        for name, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {name}")
        for f in self.failures[:20]:
            print("    " + f)
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(result, f, indent=1)
        return result["passed"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epq", default="build/epq")
    p.add_argument("--workdir", default="/tmp/epq-soak")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=100, help="requests per client")
    p.add_argument("--time-limit", type=float, default=900, help="seconds after which clients stop (and the run fails)")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("serve_args", nargs="*", help="more flags for epq serve, after --")
    args = p.parse_args()
    args.epq = os.path.abspath(args.epq)
    sys.exit(0 if Soak(args).run() else 1)


if __name__ == "__main__":
    main()
