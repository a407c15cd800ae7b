#!/usr/bin/env bash
# One kernel file at several revisions, timed turn about in one process
# (bench/kernel_ab.cpp): each revision's file is built as a shared object with the
# project's kernel flags, then build/bench/epq_kernel_ab loads them all.
#   scripts/kernel_ab.sh [--file src/quant/dot_avx2.cpp] REV... [-- epq_kernel_ab OPTIONS]
# REV is a git revision, or `worktree` for the file as it is now. Each builds against its
# own revision's src/ headers (quant/kernel_common.h ...), so a header change can be timed
# too; the loader takes KernelSet (quant/dot.h) as the working tree declares it, so the
# revisions must agree with it. For an AVX-512 file
# (--file src/quant/dot_avx512.cpp) pass --set avx512 or --set avx512-full-width after --.
# Examples (docs/PERFORMANCE.md, stops 62 and 63):
#   scripts/kernel_ab.sh HEAD worktree                        # rows in L2, one column
#   scripts/kernel_ab.sh HEAD worktree -- --rows 65536 --cols 4096 --iters 1 --trials 30
#   scripts/kernel_ab.sh --file src/quant/dot_avx512.cpp HEAD worktree HEAD worktree \
#     -- --set avx512-full-width --types BF16 --columns 8
set -euo pipefail
cd "$(dirname "$0")/.."
file=src/quant/dot_avx2.cpp
revs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --file) file=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) revs+=("$1"); shift ;;
  esac
done
[ ${#revs[@]} -gt 0 ] || { echo "kernel_ab.sh: no revision given (see --help)" >&2; exit 2; }
[ -x build/bench/epq_kernel_ab ] || { echo "kernel_ab.sh: build/bench/epq_kernel_ab is missing: run make build" >&2; exit 2; }
simde=$(dirname "$(dirname "$(find /usr/include /usr/local/include -path '*/simde/x86/avx512.h' -print -quit 2>/dev/null)")")
# As CMakeLists.txt compiles the kernels (src/quant/dot_*: -O3).
flags=(-std=c++20 -O3 -march=x86-64-v3 -mtune=generic -ffp-contract=off -fPIC -shared -Wl,-Bsymbolic -isystem "$simde")
case "$file" in *_avx512.cpp) flags+=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni) ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
libs=()
for i in "${!revs[@]}"; do
  rev=${revs[$i]}
  if [ "$rev" = worktree ]; then
    tree=.
    label="the working tree (HEAD $(git rev-parse --short HEAD) with its changes)"
  else
    git rev-parse --verify --quiet "$rev^{commit}" > /dev/null || { echo "kernel_ab.sh: $rev is not a git revision" >&2; exit 2; }
    tree="$work/$i"
    mkdir -p "$tree"
    git archive "$rev" src | tar -x -C "$tree"
    label="$rev ($(git rev-parse --short "$rev"))"
  fi
  g++ "${flags[@]}" -I"$tree/src" "$tree/$file" -o "$work/$i.so"
  echo "# LIB $((i + 1)): $file at $label"
  libs+=("$work/$i.so")
done
build/bench/epq_kernel_ab "$@" "${libs[@]}"
