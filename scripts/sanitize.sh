#!/usr/bin/env bash
# The whole test suite (unit and lit) built with clang-19 under AddressSanitizer
# and UndefinedBehaviorSanitizer, every report fatal (clang's UBSan also checks
# float-to-int overflow, which GCC's does not). Build folder: build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
CC=clang-19 CXX=clang++-19 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGRADC_SANITIZE=ON >/dev/null
cmake --build build-asan
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure
