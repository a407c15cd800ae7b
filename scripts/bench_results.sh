#!/usr/bin/env bash
# Regenerates the measurements in docs/RESULTS.md and docs/PERFORMANCE.md on this machine.
# Needs the 17 GB model (made here if missing) and root for cold-cache runs. Takes about
# an hour; run it on an otherwise idle machine. Outputs go to docs/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/qwen3-30b-a3b.gguf
out=docs/results
mkdir -p "$out" models
[ -f "$model" ] || ./build/epq synth --preset qwen3-30b-a3b -o "$model"
epq=./build/epq
prompt="The river ran past the old mill and under the stone bridge, where the children of the village used to gather in the long summer evenings."
long_prompt=$(cat docs/results/prompt_691.txt)

# Kernels: matvec GB/s per type at 1 and all threads, next to the read-bandwidth probe.
./build/bench/epq_kernel_bench --benchmark_min_time=1 2>&1 | tee "$out/kernels.txt"

# The disk under the model.
$epq probe-io "$model" --seconds 1 | tee "$out/probe_io.md"

# All in RAM, warm page cache: decode after a short prompt, then a 691-token prompt.
cat "$model" > /dev/null
$epq bench -m "$model" --budgets ram --runs 5 -p "$prompt" -n 32 --ctx 2048 --no-probe -q --json "$out/ram_short.json" | tee "$out/ram_short.md"
$epq bench -m "$model" --budgets ram --runs 5 -p "$long_prompt" -n 32 --ctx 2048 --no-probe -q --json "$out/ram_long.json" | tee "$out/ram_long.md"

# A long prompt at 4 GiB, cold, with 64 and 256 tokens per forward pass (needs root).
for batch in 64 256; do
  sync && echo 3 > /proc/sys/vm/drop_caches
  echo "--batch $batch"
  $epq limit --memory 4G -- $epq run -m "$model" --ram-budget 4G --ctx 2048 --batch "$batch" -p "$long_prompt" -n 8 --temp 0 2>&1 >/dev/null
done | tee "$out/paged_prompt_batch.txt"

# The budget sweep, cold, 3 runs each.
$epq bench -m "$model" --budgets 2G,4G,8G,16G,all,ram --runs 3 --cold -p "$prompt" -n 32 --ctx 2048 -q \
  --json "$out/sweep.json" --svg "$out/sweep.svg" | tee "$out/sweep.md"

# All-fits against all-in-RAM alone (the sweep's last two rows, as quoted in docs/RESULTS.md).
$epq bench -m "$model" --budgets all,ram --runs 3 --cold -p "$prompt" -n 32 --ctx 2048 -q \
  --json "$out/sweep_all_ram.json" | tee "$out/sweep_all_ram.md"

# Eviction policies at 4 and 8 GiB.
$epq bench -m "$model" --budgets 4G,8G --evict lru,ls,ls-pos --runs 3 --cold -p "$prompt" -n 32 --ctx 2048 -q \
  --json "$out/policies.json" --svg "$out/policies.svg" | tee "$out/policies.md"

# Top-k 8 vs 4, with perplexity on the corpus paragraph.
$epq bench -m "$model" --budgets 8G --expert-used 8,4 --runs 3 --cold -p "$prompt" -n 32 --ctx 2048 -q \
  --perplexity docs/results/ppl_text.txt --json "$out/topk.json" | tee "$out/topk.md"
