#!/usr/bin/env bash
# The main job on the project's own model: synthesize the `small` preset (~1 GB of
# qwen3moe with random weights, made once and kept in models/), show what is in it and
# what a 512 MiB budget buys, then generate text with the experts paged from disk inside
# that budget -- and once more with everything in RAM, to show the output is identical.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/small.gguf
prompt="The river ran past the old mill and under the stone bridge, where the children of the village used to gather \
in the long summer evenings. They counted the rings that the fish left on the water, told stories about the miller's \
daughter, and argued about whether the bridge was older than the church."
mkdir -p models
if [ ! -f "$model" ]; then
  ./build/epq synth --preset small --zipf 1.0 -o "$model"
fi
echo "== epq inspect $model"
./build/epq inspect "$model" --no-metadata --no-tensors
echo
echo "== epq plan -m $model --ram-budget 512M --ctx 2048"
./build/epq plan -m "$model" --ram-budget 512M --ctx 2048
echo
echo "== epq run (paged, 512 MiB budget enforced by the kernel)"
./build/epq limit --memory 512M -- ./build/epq run -m "$model" --ram-budget 512M --ctx 2048 -p "$prompt" -n 48 --temp 0 \
  --ignore-eos | tee /tmp/epq-demo-paged.txt
echo
echo "== epq run (all in RAM)"
./build/epq run -m "$model" --ctx 2048 -p "$prompt" -n 48 --temp 0 --ignore-eos | tee /tmp/epq-demo-resident.txt
echo
if cmp -s /tmp/epq-demo-paged.txt /tmp/epq-demo-resident.txt; then
  echo "demo: paged and all-in-RAM runs produced identical text"
else
  echo "demo: paged and all-in-RAM runs differ" >&2
  exit 1
fi
echo "(the model has random weights, so the text itself is gibberish; see docs/ for real measurements)"
