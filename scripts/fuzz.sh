#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-19, ASan + UBSan) into build-san/ (the build
# scripts/sanitize.sh tests) and runs each for SECONDS (default 60) on a copy of its
# seed corpus, with its dictionary;
# then the differential tester (random programs on every backend, against PyTorch)
# for SECONDS with a new seed, on build/gradc (scripts/build.sh).
#   scripts/fuzz.sh [SECONDS]
# Seeds: tests/fuzz/corpus/<target>/, plus the examples and the programs of
# tests/error for the .dg targets. A crash leaves its input in build-san/findings/
# and fails the script; each one found becomes a test in tests/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
scripts/deps.sh
source scripts/san_build.sh
work=build-san/work
rm -rf "$work" && mkdir -p build-san/findings
for target in frontend ir npy run; do
  mkdir -p "$work/$target"
  cp tests/fuzz/corpus/"${target/run/frontend}"/* "$work/$target/"
  case $target in
    frontend|run) cp examples/*.dg tests/error/*.dg "$work/$target/"; dict=dg ;;
    ir) cp tests/lit/*.ir "$work/$target/"; dict=ir ;;
    npy) dict=npy ;;
  esac
  echo "fuzz: $target for ${secs}s"
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    build-san/tests/fuzz/${target}_fuzz "$work/$target" -dict=tests/fuzz/$dict.dict -max_total_time="$secs" \
    -max_len=4096 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix=build-san/findings/${target}- 2>&1 | tail -n 12
done
# The differential tester on random programs (tests/difftest/dgsmith.py): a new seed
# each run (DGSMITH_SEED to repeat one), every second program over a 2-D or 3-D mesh,
# every 6th in bf16 or f16, every 3rd with rows of 16 to 24 (map_rows), the executables
# too, for SECONDS.
scripts/build.sh
seed=${DGSMITH_SEED:-$(date +%s)}
echo "fuzz: dgsmith for ${secs}s, seed $seed"
# With the PyTorch venv (scripts/torch_venv.sh), every 20th program also as the torch
# target's op, and the f16 programs checked against its PyTorch eager too (Debian's
# 1.13 lacks most f16 CPU kernels).
torch_check=()
python=/usr/bin/python3
[ -x build/torch-venv/bin/python ] && torch_check=(--torch --torch-every 20) && python=build/torch-venv/bin/python
# Where gradc can compile the cuda target (nvcc), every 25th program's CUDA executables
# are compiled and linked too (not run).
cuda_check=()
build/gradc --version | grep -q "cuda: yes" && cuda_check=(--cuda-every 25)
"$python" tests/difftest/dgsmith.py build/gradc build-san/findings/dgsmith --seed "$seed" --seconds "$secs" \
  --mesh-every 2 --low-every 6 --special-every 4 --wide-every 3 --long-every 7 --exe --exe-every 5 "${torch_check[@]}" "${cuda_check[@]}"
echo "fuzz: no crashes, no disagreements"
