#!/usr/bin/env bash
# The README's second command: build, check the C++ files' format, then run every
# test (unit and lit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/format.sh --check
ctest --test-dir build --output-on-failure
