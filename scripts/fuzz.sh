#!/usr/bin/env bash
# Fuzzes EPQ's parsers with libFuzzer (clang, ASan + UBSan), one target after another, one
# process each. Stops at the first crash, leak, timeout or out-of-memory; the reproducer is
# saved as BUILD/artifacts/TARGET-crash-* (run it: BUILD/tests/fuzz/TARGET_fuzz FILE).
#   scripts/fuzz.sh [--runs N] [SECONDS] [TARGET...]
#     SECONDS   time per target (default 300); --runs N: N executions per target instead
#               (both: whichever comes first)
#     TARGET    gguf, tokenizer, jinja, openai (default: all, in that order)
# Environment:
#   EPQ_FUZZ_BUILD  build directory (default build-fuzz); its corpus/TARGET keeps what the
#                   runs found, and later runs start from it
#   EPQ             an epq binary to synthesize the GGUF seeds with (default build/epq, else
#                   one is built in EPQ_FUZZ_BUILD)
#   EPQ_FUZZ_TIMEOUT  seconds one input may run before it counts as a hang (default 10;
#                   raise it for a campaign run at low priority beside other work, where
#                   a slow input can wait that long for the CPU)
# Seeds: tests/fuzz/corpus/TARGET (committed, including regression inputs), plus generated
# ones: headers and a whole tiny file from `epq synth`, and the chat templates in
# tests/unit/chat_templates with a request body each. Exits 77 when clang or libFuzzer is
# missing (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD

runs=() seconds=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=(-runs="${2:?--runs needs a number}"); shift 2 ;;
    [0-9]*) seconds=(-max_total_time="$1"); shift ;;
    gguf|tokenizer|jinja|openai) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (usage: scripts/fuzz.sh [--runs N] [SECONDS] [gguf|tokenizer|jinja|openai]...)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(gguf tokenizer jinja openai)
budget=("${runs[@]}" "${seconds[@]}")
[ ${#budget[@]} -gt 0 ] || budget=(-max_total_time=300)

build=${EPQ_FUZZ_BUILD:-build-fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/setup.sh installs clang and libclang-rt-14-dev)" >&2
  exit 77
fi
probe=$build/libfuzzer-probe
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer,address,undefined -o "$probe" - 2>/dev/null; then
  echo "fuzz.sh: clang++ cannot link libFuzzer (scripts/setup.sh installs libclang-rt-14-dev)" >&2
  exit 77
fi
rm -f "$probe"

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
  -DEPQ_FUZZ=ON -DEPQ_SANITIZE=ON >/dev/null
ninja -C "$build" -j "$(nproc)" fuzz_targets > "$build/build.log" || { cat "$build/build.log"; exit 1; }

# Generated seeds.
seeds=$build/seeds
if [[ " ${targets[*]} " == *" gguf "* ]] && [ ! -f "$seeds/gguf/complete-tiny.gguf" ]; then
  epq=${EPQ:-$source_dir/build/epq}
  if [ ! -x "$epq" ]; then
    ninja -C "$build" -j "$(nproc)" epq >> "$build/build.log" || { cat "$build/build.log"; exit 1; }
    epq=$build/epq
  fi
  mkdir -p "$seeds/gguf"
  for arch in qwen3moe qwen35moe laguna deepseek2; do
    model=$seeds/gguf/$arch.model
    shape=(--layers 1)
    [[ $arch == laguna || $arch == deepseek2 ]] && shape+=(--dense-layers 0)
    "$epq" synth --arch "$arch" --preset tiny "${shape[@]}" -q -o "$model" >/dev/null
    data_offset=$("$epq" inspect "$model" | sed -n 's/.*data at offset \([0-9]*\).*/\1/p' | head -1)
    head -c "$data_offset" "$model" > "$seeds/gguf/$arch-header.gguf"
    rm -f "$model"
  done
  f16=(--type-expert F16 --type-expert-down F16 --type-attn F16 --type-attn-v F16 --type-embd F16 --type-router F16 --type-output F16)
  "$epq" synth --preset tiny --layers 1 --experts 2 --expert-used 1 --embd 32 --heads 2 --heads-kv 1 --head-dim 16 \
    --expert-ffn 32 --merges 50 --tied-output "${f16[@]}" -q -o "$seeds/gguf/complete-tiny.gguf" >/dev/null
fi
if [[ " ${targets[*]} " == *" jinja "* ]]; then
  mkdir -p "$seeds/jinja"
  for template in tests/unit/chat_templates/*.jinja; do
    for request in chat_simple chat_tools; do
      { cat "$template"; printf '\0'; cat "tests/fuzz/corpus/openai/$request.json"; } \
        > "$seeds/jinja/$(basename "$template" .jinja)-$request"
    done
  done
fi

declare -A max_len=([gguf]=65536 [tokenizer]=1024 [jinja]=32768 [openai]=8192)
declare -A dict=([gguf]=gguf [tokenizer]= [jinja]=jinja [openai]=openai)
mkdir -p "$build/artifacts"
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target
  mkdir -p "$corpus"
  inputs=("$corpus")
  for dir in "tests/fuzz/corpus/$target" "$seeds/$target"; do
    [ -d "$dir" ] && inputs+=("$dir")
  done
  options=("${budget[@]}" -max_len="${max_len[$target]}" -timeout="${EPQ_FUZZ_TIMEOUT:-10}" -rss_limit_mb=2048 -print_final_stats=1
           -artifact_prefix="$build/artifacts/$target-")
  [ -n "${dict[$target]}" ] && options+=(-dict="tests/fuzz/${dict[$target]}.dict")
  log=$build/$target.log
  echo "fuzz.sh: ${target}_fuzz ${options[*]} (log: $log)"
  if ! "$build/tests/fuzz/${target}_fuzz" "${options[@]}" "${inputs[@]}" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz.sh: $target: FAILED; reproducer: $(ls -t "$build"/artifacts/"$target"-* 2>/dev/null | head -1)" >&2
    exit 1
  fi
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 || true)
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "fuzz.sh: $target: $executed runs at $rate/s, no crash; final: $done_line"
done
