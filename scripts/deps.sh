#!/usr/bin/env bash
# Installs what gradc needs from Debian's packages, only where it is missing.
set -euo pipefail
# clang-19 with its sanitizer and libFuzzer runtimes: the sanitizer build and the fuzzers (scripts/sanitize.sh, scripts/fuzz.sh).
# python3-torch and python3-numpy: the checks against PyTorch (tests/edges.py, tests/difftest/dgsmith.py).
# clang-format-19: the C++ files' format (scripts/format.sh).
# With arguments, those packages instead.
pkgs=(cmake g++ ninja-build python3 python3-numpy python3-torch libfmt-dev libcli11-dev libmimalloc-dev doctest-dev libopenblas-dev llvm-19-dev llvm-19-tools
      clang-19 libclang-rt-19-dev libfuzzer-19-dev clang-format-19 openmpi-bin libopenmpi-dev)
[ $# -gt 0 ] && pkgs=("$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "scripts/deps.sh: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
