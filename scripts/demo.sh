#!/usr/bin/env bash
# The main job on the project's own model: synthesize the `small` preset (~1 GB, made
# once and kept in models/) and show what is in it.
set -euo pipefail
cd "$(dirname "$0")/.."
model=models/small.gguf
mkdir -p models
if [ ! -f "$model" ]; then
  ./build/epq synth --preset small --zipf 1.0 -o "$model"
fi
./build/epq inspect "$model" --no-metadata --no-tensors
