#!/usr/bin/env bash
# gradc built with clang-19 under AddressSanitizer and UndefinedBehaviorSanitizer, every
# report fatal (clang's UBSan also checks float-to-int overflow, which GCC's does not),
# with libFuzzer's instrumentation: one build, build-san/, that scripts/fuzz.sh fuzzes
# with too. It runs the unit tests, the programs that must fail (tests/error), the lit
# tests but those that mostly wait for clang, nvcc or PyTorch (the generated code's
# compiler is not sanitized; scripts/test.sh runs them), and each fuzz target on its
# seed corpus.
#   scripts/sanitize.sh          the sample
#   scripts/sanitize.sh --all    every lit test
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
source scripts/san_build.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "sanitize: unit tests"
build-san/tests/gradc_unit
heavy='codegen|_cuda|examples\.test|difftest|mutations|embed|long_chains|torch|edges|add_op|executables|native\.test|call_sites|names\.dg|gemm_flag|verify\.test|shared_inputs|emit_main'
filter=(--filter-out "$heavy")
[ "${1:-}" = --all ] && filter=()
echo "sanitize: lit${filter:+ (all but: $heavy)}"
# the programs scripts/test.sh's run compiled for the native backend are not compiled again
export GRADC_TEST_CACHE=$PWD/build/tests/cache
python3 "$(command -v lit || echo /usr/lib/llvm-19/build/utils/lit/lit.py)" -sv --time-tests "${filter[@]}" build-san/tests
echo "sanitize: the fuzz targets on their seed corpora"
work=build-san/corpora
rm -rf "$work"
for target in frontend ir npy run; do
  mkdir -p "$work/$target"
  cp tests/fuzz/corpus/"${target/run/frontend}"/* "$work/$target/"
  case $target in
    frontend|run) cp examples/*.dg tests/error/*.dg "$work/$target/" ;;
    ir) cp tests/lit/*.ir "$work/$target/" ;;
  esac
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 build-san/tests/fuzz/${target}_fuzz "$work/$target" \
    -runs=0 -max_len=4096 -timeout=20 -rss_limit_mb=4096 2>&1 | tail -n 1
done
echo "sanitize: no reports"
