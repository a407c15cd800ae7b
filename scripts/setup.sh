#!/usr/bin/env bash
# Installs every Debian (bookworm) package EPQ needs to build, test and benchmark.
# Idempotent: packages already present are left alone; prints what it installs.
#   scripts/setup.sh           build, test, benchmark and demo
#   scripts/setup.sh --train   also what scripts/train_demo_model.py needs (PyTorch with
#                              OpenBLAS, and the King James Bible with its `bible` reader)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev          # libFuzzer and sanitizer runtimes
  liburing-dev libpcre2-dev nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libfmt-dev
  libsimde-dev                      # AVX-512 kernels: intrinsics, and their emulation for tests
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy
  util-linux procps                 # prlimit, ps
  chromium                          # the web chat page test (headless)
)
if [ "${1:-}" = "--train" ]; then
  packages+=(python3-torch libopenblas0-pthread bible-kjv bible-kjv-text)
elif [ $# -gt 0 ]; then
  echo "setup: unknown option '$1' (the only one is --train)" >&2
  exit 1
fi
# Node.js and npm run the OpenAI client and Playwright in the server tests; machines that
# already have a Node.js (e.g. from NodeSource) keep it, since Debian's npm conflicts with it.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
