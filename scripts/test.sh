#!/usr/bin/env bash
# The README's second command: build, check the C++ files' format, make the PyTorch
# virtual environment the torch target's tests run in (scripts/torch_venv.sh: PyPI's
# wheel, about 3 GB the first time), then run every test (unit and lit).
#   scripts/test.sh          the suite CI runs
#   scripts/test.sh --long   and the long runs: every example built for every world
#                            size and for CUDA (GRADC_LONG_TESTS=1, lit's `long` feature)
set -euo pipefail
[ "${1:-}" = --long ] && export GRADC_LONG_TESTS=1
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/format.sh --check
scripts/torch_venv.sh
ctest --test-dir build --output-on-failure
# lit's slowest tests, for the log (ctest shows a passing test's output only on failure).
# lit starts the longest tests first, by the times of the last run in this build tree, or
# in a fresh one by tests/.lit_test_times.txt (refresh it by copying the build tree's).
echo "lit: the slowest tests, in seconds"
sort -g -r build/tests/lit-out/.lit_test_times.txt | awk 'NR <= 12 {printf "  %7.1f  %s\n", $1, $2}'
