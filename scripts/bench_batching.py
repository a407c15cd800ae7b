#!/usr/bin/env python3
"""Continuous-batching benchmark (issue 20, docs/results/batching.md): `epq serve
--parallel N` on loopback, S concurrent streaming clients for S in --streams, each
generating --tokens tokens (ignore_eos) from a prompt of its own. For every budget and S,
a fresh server (a cold arena; with --cold, a cold page cache too) serves one round; the
table gives the aggregate rate (all tokens over the round's wall time, prompts included),
the aggregate decode rate (the tokens after each stream's first over the time from the
first stream's first token to the last stream's end), each stream's own decode rate (its
tokens after the first over the time from its first text to its end), time to first token, and the pager's MiB read per
generated token (from /metrics).

  scripts/bench_batching.py -m MODEL [--budgets 4G,8G,ram] [--streams 1,2,4,8] [--tokens 32]
      [--route-trace TRACE] [--cold] [--json FILE] [--epq build/epq] [-- EXTRA SERVE ARGS]
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time

WORDS = ("river mill stone bridge harvest lantern orchard meadow thunder candle harbor valley winter garden "
         "silver forest market letter voyage castle engine signal morning shadow").split()


def prompt_for(i):
    """A prompt of its own for stream i (no shared prefix, so no KV reuse between streams)."""
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)) + f" (story {i})"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_page_cache():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


class Serve:
    def __init__(self, epq, model, args):
        self.port = free_port()
        self.proc = subprocess.Popen([epq, "serve", "-m", model, "--port", str(self.port), *args],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 900
        while time.time() < deadline:
            if self.proc.poll() is not None:
                sys.exit(f"bench_batching: the server exited: {self.proc.stderr.read().strip()}")
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        sys.exit("bench_batching: the server did not start")

    def get(self, route):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", route)
        r = conn.getresponse()
        body = r.read().decode()
        conn.close()
        return r.status, body

    def metric(self, name):
        m = re.search(rf"^{name} (\S+)$", self.get("/metrics")[1], re.M)
        return float(m.group(1)) if m else 0.0

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def stream_once(port, prompt, tokens, out, stop=None):
    """One streaming completion; fills out with send/first/last times, the times of the
    events that carried text, and the token count. Setting the event `stop` hangs up."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    body = dict(prompt=prompt, max_tokens=tokens, ignore_eos=True, temperature=0, stream=True, stream_options={"include_usage": True})
    out["sent"] = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        out["error"] = f"HTTP {r.status}: {r.read()[:200]!r}"
        return
    for raw in r:
        if stop is not None and stop.is_set():
            break
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if event.get("usage"):
            out["tokens"] = event["usage"]["completion_tokens"]
        elif event.get("choices"):
            now = time.perf_counter()
            if event["choices"][0].get("text"):
                out.setdefault("first", now)  # the first token's text (tokens without text send nothing)
                out.setdefault("times", []).append(now)
            if event["choices"][0].get("finish_reason"):
                out["last"] = now  # sent right after the last token
    conn.close()


def round_of(server, streams, tokens, round_no):
    results = [{} for _ in range(streams)]
    threads = [threading.Thread(target=stream_once, args=(server.port, prompt_for(round_no * 100 + i), tokens, results[i]))
               for i in range(streams)]
    bytes_before = server.metric("epq_pager_bytes_read_total")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if "error" in r or "first" not in r:
            sys.exit(f"bench_batching: a stream failed: {r.get('error', 'no tokens')}")
    generated = sum(r["tokens"] for r in results)
    first, last = min(r["first"] for r in results), max(r["last"] for r in results)
    start = min(r["sent"] for r in results)
    per_stream = [(r["tokens"] - 1) / (r["last"] - r["first"]) for r in results if r["last"] > r["first"]]
    steps, passes = server.metric("epq_batch_steps_total"), server.metric("epq_batch_passes_total")
    return {
        "streams": streams,
        "generated_tokens": generated,
        "wall_seconds": last - start,
        "aggregate_tok_s": generated / (last - start),
        "aggregate_decode_tok_s": (generated - streams) / (last - first) if last > first else 0.0,
        "per_stream_decode_tok_s": per_stream,
        "ttft_s": [r["first"] - r["sent"] for r in results],
        "mib_per_token": (server.metric("epq_pager_bytes_read_total") - bytes_before) / generated / 2**20,
        "mean_batch": passes / steps if steps else 0.0,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--budgets", default="4G,8G,ram")
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--route-trace")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before every round (needs root)")
    ap.add_argument("--json")
    ap.add_argument("--epq", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "epq"))
    ap.add_argument("extra", nargs="*", help="more `epq serve` arguments (after --)")
    a = ap.parse_args()
    streams = [int(s) for s in a.streams.split(",")]
    rows = []
    print(f"model {a.model}, {a.tokens} tokens per stream, --ctx {a.ctx}, server --parallel {max(streams)}"
          f"{', routing replayed from ' + a.route_trace if a.route_trace else ''}{', cold page cache' if a.cold else ''}", flush=True)
    print("| budget | streams | aggregate tok/s | vs 1 stream | aggregate decode tok/s | per-stream decode tok/s (min-max) "
          "| TTFT s (median, max) | MiB / token | mean batch |")
    print("|---|---:|---:|---:|---:|---|---|---:|---:|", flush=True)
    for budget in a.budgets.split(","):
        base = None
        for round_no, s in enumerate(streams):
            args = ["--ctx", str(a.ctx), "--parallel", str(max(streams)), *a.extra]
            if budget != "ram":
                args += ["--ram-budget", budget]
            if a.route_trace:
                args += ["--route-trace", a.route_trace]
            if a.cold:
                drop_page_cache()
            server = Serve(a.epq, a.model, args)
            try:
                r = round_of(server, s, a.tokens, round_no)
            finally:
                server.stop()
            r["budget"] = budget
            base = base or r["aggregate_tok_s"]
            ps = r["per_stream_decode_tok_s"]
            print(f"| {budget} | {s} | {r['aggregate_tok_s']:.2f} | {r['aggregate_tok_s'] / base:.2f}x | {r['aggregate_decode_tok_s']:.2f} "
                  f"| {statistics.median(ps):.2f} ({min(ps):.2f}-{max(ps):.2f}) "
                  f"| {statistics.median(r['ttft_s']):.1f}, {max(r['ttft_s']):.1f} | {r['mib_per_token']:.1f} | {r['mean_batch']:.2f} |",
                  flush=True)
            rows.append(r)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "tokens": a.tokens, "ctx": a.ctx, "route_trace": a.route_trace, "cold": a.cold, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
