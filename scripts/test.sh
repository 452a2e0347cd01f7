#!/usr/bin/env bash
# The README's second command: build, then run every test (unit and lit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build --output-on-failure
