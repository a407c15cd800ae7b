#!/usr/bin/env bash
# Fuzzes the GGUF parser with libFuzzer for a fixed time budget (not part of CI).
#   scripts/fuzz.sh [SECONDS]   (default 300)
# Builds with clang into build-fuzz/, seeds the corpus with a synthesized tiny model's
# header, and stops at the first crash (the reproducer is saved as crash-*).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-300}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DEPQ_FUZZ=ON -DEPQ_SANITIZE=ON >/dev/null
ninja -C build-fuzz gguf_fuzz epq > build-fuzz/build.log || { cat build-fuzz/build.log; exit 1; }
corpus=build-fuzz/corpus
mkdir -p "$corpus"
if [ ! -f "$corpus/tiny-header" ]; then
  ./build-fuzz/epq synth --preset tiny --layers 1 --experts 2 --expert-used 1 -q -o build-fuzz/seed.gguf >/dev/null
  head -c 65536 build-fuzz/seed.gguf > "$corpus/tiny-header"
fi
echo "fuzzing the GGUF parser for ${seconds}s (corpus: $corpus)"
./build-fuzz/tests/fuzz/gguf_fuzz -max_total_time="$seconds" -max_len=131072 -rss_limit_mb=4096 \
  -print_final_stats=1 "$corpus"
