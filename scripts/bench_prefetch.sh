#!/usr/bin/env bash
# Issue 19's benchmark (docs/CACHING.md, docs/results/prefetch.md), cold, under kernel
# memory limits, each row against the I/O bound and Belady's bound:
#  1. the 17 GB qwen3-30b-a3b synthetic driven by the trained demo model's routing
#     (--route-trace), 4 and 8 GiB, LRU and lrfu, history prefetch off and on;
#  2. the same model on its own (random) routing, lrfu, stale-gate prefetch off and on;
#  3. the qwen3.6-35b-a3b synthetic at 16 GiB (issue 14's row), lrfu, gate off and on.
# About 30 minutes on 2 cores.
#   scripts/bench_prefetch.sh [OUT_DIR]     (default docs/results)
# EPQ, MODEL, MODEL36, TRACE and RUNS override the binaries, models, trace and runs per row.
set -euo pipefail
cd "$(dirname "$0")/.."
epq=${EPQ:-./build/epq}
model=${MODEL:-models/qwen3-30b-a3b.gguf}
model36=${MODEL36:-models/qwen3.6-35b-a3b.gguf}
trace=${TRACE:-build/traces/demo-decode.trace}
out=${1:-docs/results}
runs=${RUNS:-2}
[ -f "$model" ] || "$epq" synth --preset qwen3-30b-a3b -o "$model"
[ -f "$model36" ] || "$epq" synth --arch qwen35moe --preset qwen3.6-35b-a3b -o "$model36"
if [ ! -f "$trace" ]; then
  mkdir -p "$(dirname "$trace")"
  # demo/valid.txt scored one token per pass: 22016 passes of real decode routing.
  "$epq" perplexity -m demo/epq-demo-kjv-q4.gguf -f demo/valid.txt --ctx 256 --batch 1 -t 2 --trace-routing "$trace" >/dev/null
fi
"$epq" replay "$trace" --slots 96 --policy lru | grep predictor
"$epq" bench -m "$model" --budgets 4G,8G --evict lru,lrfu --prefetch off,history --runs "$runs" --cold -n 64 -t 2 \
  --route-trace "$trace" --json "$out/prefetch_replayed.json" | tee "$out/prefetch_replayed.md"
"$epq" bench -m "$model" --budgets 4G,8G --evict lrfu --prefetch off,gate --runs "$runs" --cold -n 64 -t 2 \
  --json "$out/prefetch_gate.json" | tee "$out/prefetch_gate.md"
"$epq" bench -m "$model36" --budgets 16G --evict lrfu --prefetch off,gate --runs "$runs" --cold -n 64 -t 2 \
  --json "$out/prefetch_qwen36_16g.json" | tee "$out/prefetch_qwen36_16g.md"
