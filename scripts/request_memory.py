#!/usr/bin/env python3
"""How much memory `epq serve` needs to prepare a request (read, parse, render through
the chat template, tokenize), as a multiple of the body: the basis of the server's
reserve (src/server/http_server.h, kRequestBytesPerBodyByte; docs/SERVER.md "Limits").

    python3 scripts/request_memory.py build/epq models/tiny.gguf

Each body gets a fresh server (with --max-body 8M, so none is refused for size); the
growth of the server's peak RSS (VmHWM) over the request, divided by the body's size, is
the figure. Loopback only; each server is stopped after its request."""
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


def trial(epq, model, name, body, route, ctx):
    port = free_port()
    server = subprocess.Popen([epq, "serve", "-m", model, "--port", str(port), "-t", "2", "--max-body", "8M", "--ctx", ctx],
                              stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                time.sleep(0.1)
        before = peak_rss(server.pid)
        data = body.encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}{route}", data=data, headers={"Content-Type": "application/json"})
        try:
            status = urllib.request.urlopen(request, timeout=600).status
        except urllib.error.HTTPError as e:
            status = e.code
        grown = peak_rss(server.pid) - before
    finally:
        server.terminate()
        server.wait(timeout=60)
    print(f"| {name} | {len(data)} | {status} | {grown / 2**20:.1f} | {grown / len(data):.1f} |")


def main():
    epq, model = sys.argv[1], sys.argv[2]
    n = 2_000_000
    hi = {"role": "user", "content": "hi"}
    chat, plain = "/v1/chat/completions", "/v1/completions"
    print("| body | bytes | status | peak grew MiB | x body |\n|---|---:|---:|---:|---:|")
    # --ctx 1000000 lets the prompts past the early length check, so that they are tokenized.
    trial(epq, model, "prompt: one long word", json.dumps({"prompt": "a" * n, "max_tokens": 1}), plain, "1000000")
    trial(epq, model, "prompt: many short words", json.dumps({"prompt": "a " * (n // 2), "max_tokens": 1}), plain, "1000000")
    trial(epq, model, "many messages", json.dumps({"messages": [hi] * (n // 31), "max_tokens": 1}), chat, "4096")
    trial(epq, model, "[[], ...] in a message's extra key", json.dumps({"messages": [dict(hi, x=[[]] * (n // 5))], "max_tokens": 1}), chat, "4096")
    trial(epq, model, "[0, ...] as tools", json.dumps({"messages": [hi], "tools": [0] * (n // 2), "max_tokens": 1}), chat, "4096")
    trial(epq, model, "[{}, ...] in chat_template_kwargs", json.dumps({"messages": [hi], "chat_template_kwargs": {"a": [{}] * (n // 3)}, "max_tokens": 1}), chat, "4096")
    trial(epq, model, '["a", ...] in chat_template_kwargs', json.dumps({"messages": [hi], "chat_template_kwargs": {"a": ["a"] * (n // 5)}, "max_tokens": 1}), chat, "4096")
    trial(epq, model, "many keys in chat_template_kwargs", json.dumps({"messages": [hi], "chat_template_kwargs": {"a": {str(i): 0 for i in range(n // 12)}}, "max_tokens": 1}), chat, "4096")


if __name__ == "__main__":
    main()
