#!/usr/bin/env bash
# Regenerates docs/results/caching_demo_*: routing traces of the trained demo model,
# replayed through every eviction policy and Belady's MIN at arenas of 8..384 expert
# slots (docs/CACHING.md). Takes about a minute; needs only build/epq (or EPQ=path).
set -euo pipefail
cd "$(dirname "$0")/.."
epq=${EPQ:-./build/epq}
model=demo/epq-demo-kjv-q4.gguf
out=docs/results
traces=${TRACES:-$(mktemp -d)}
slots=8,16,32,48,64,77,96,115,128,144,160,192,224,256,288,320,352,384

# Decode-like: the validation text scored one token per forward pass.
$epq perplexity -m "$model" -f demo/valid.txt --ctx 256 --batch 1 -t 2 --trace-routing "$traces/decode.trace" >/dev/null
# Generation: the first 600 bytes of the validation text as the prompt, 1000 sampled tokens.
head -c 600 demo/valid.txt > "$traces/prompt.txt"
$epq run -m "$model" -f "$traces/prompt.txt" -n 1000 --ignore-eos --seed 7 -t 2 --trace-routing "$traces/generate.trace" >/dev/null
# Prompt batches: the validation text in forward passes of 256 tokens (every request is
# nearly a whole layer).
$epq perplexity -m "$model" -f demo/valid.txt --ctx 256 -t 2 --trace-routing "$traces/prompt.trace" >/dev/null

for t in decode generate prompt; do
  $epq replay "$traces/$t.trace" --slots "$slots" -m "$model" --json "$out/caching_demo_$t.json" --svg "$out/caching_demo_$t.svg" \
    | tee "$out/caching_demo_$t.md"
done
