#!/usr/bin/env python3
"""How long prompts that arrive together stall a decoding stream (issue 20,
docs/results/batching.md): a fresh `epq serve --parallel K+1` on loopback; one stream
decodes; once it has streamed --warm tokens, K requests whose prompts are the text of
--prompt-file (each made distinct by a first line of its own) arrive at once, for
--late-tokens tokens each. Reported per round: the decoding stream's longest gap between
two tokens while those prompts were processed (from their arrival to the last one's
end), how many tokens it streamed then, and each late request's time to first token.
With several --epq binaries the rounds alternate between them (A B A B ...).

  scripts/bench_prompt_stall.py -m MODEL [--prompts 3] [--prompt-file FILE] [--runs 2]
      [--epq BIN ...] [--json FILE] [-- EXTRA SERVE ARGS]
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_batching import Serve, stream_once  # noqa: E402


def round_of(epq, model, a):
    server = Serve(epq, model, ["--ctx", str(a.ctx), "--parallel", str(a.prompts + 1), *a.extra])
    try:
        with open(a.prompt_file) as f:
            text = f.read()
        stop = threading.Event()
        decoding = {}
        decoder = threading.Thread(target=stream_once, args=(server.port, "Once upon a time", a.ctx - 64, decoding, stop))
        decoder.start()
        while len(decoding.get("times", [])) < a.warm:
            if not decoder.is_alive():
                sys.exit(f"bench_prompt_stall: the decoding stream ended early: {decoding.get('error', 'no tokens')}")
            time.sleep(0.01)
        late = [{} for _ in range(a.prompts)]
        threads = [threading.Thread(target=stream_once, args=(server.port, f"Request {i}.\n{text}", a.late_tokens, late[i]))
                   for i in range(a.prompts)]
        arrival = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        done = time.perf_counter()
        still_decoding = decoder.is_alive()
        stop.set()
        decoder.join()
        for r in late:
            if "error" in r or "first" not in r:
                sys.exit(f"bench_prompt_stall: a late request failed: {r.get('error', 'no tokens')}")
        if not still_decoding:
            sys.exit("bench_prompt_stall: the decoding stream ended before the late requests: raise --ctx")
        times = decoding["times"]
        before = [b - a_ for a_, b in zip(times, times[1:]) if b <= arrival]
        during = [t for t in times if arrival <= t <= done]
        marks = [arrival, *during, done]
        return {
            "epq": epq,
            "longest_gap_s": max(b - a_ for a_, b in zip(marks, marks[1:])),
            "decode_tokens_during": len(during),
            "window_s": done - arrival,
            "gap_before_s": statistics.median(before) if before else None,
            "ttft_s": sorted(r["first"] - r["sent"] for r in late),
        }
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompts", type=int, default=3, help="late requests arriving together (default 3)")
    ap.add_argument("--prompt-file", default=os.path.join(HERE, "..", "docs", "results", "prompt_691.txt"))
    ap.add_argument("--late-tokens", type=int, default=4)
    ap.add_argument("--warm", type=int, default=4, help="tokens the decoding stream streams before the prompts arrive")
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1, help="rounds per binary")
    ap.add_argument("--epq", action="append", help="binary to run (repeat to alternate several; default build/epq)")
    ap.add_argument("--json")
    ap.add_argument("extra", nargs="*", help="more `epq serve` arguments (after --)")
    a = ap.parse_args()
    binaries = a.epq or [os.path.join(HERE, "..", "build", "epq")]
    print(f"model {a.model}, {a.prompts} prompts of {os.path.basename(a.prompt_file)} arriving together, "
          f"server --parallel {a.prompts + 1} --ctx {a.ctx} {' '.join(a.extra)}", flush=True)
    print("| binary | decode gap before (median s) | longest gap while prompts ran (s) | decode tokens then | "
          "prompts' window (s) | TTFT of the late requests (s) |")
    print("|---|---:|---:|---:|---:|---|", flush=True)
    rows = []
    for _ in range(a.runs):
        for epq in binaries:
            r = round_of(epq, a.model, a)
            rows.append(r)
            before = f"{r['gap_before_s']:.3f}" if r["gap_before_s"] is not None else "-"
            print(f"| {epq} | {before} | {r['longest_gap_s']:.1f} | {r['decode_tokens_during']} | {r['window_s']:.1f} "
                  f"| {', '.join(f'{t:.1f}' for t in r['ttft_s'])} |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "prompts": a.prompts, "prompt_file": a.prompt_file, "ctx": a.ctx, "extra": a.extra,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
