#!/usr/bin/env bash
# What bench/native.py compares against, from Debian's packages: PyTorch and NumPy
# (python3-torch, python3-numpy, run with /usr/bin/python3). Not needed to build or test.
set -euo pipefail
pkgs=(python3-torch python3-numpy)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "scripts/bench_deps.sh: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
