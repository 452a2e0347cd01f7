#!/usr/bin/env bash
# The README's second command: build, check the C++ files' format, make the PyTorch
# virtual environment the torch target's tests run in (scripts/torch_venv.sh: PyPI's
# wheel, about 3 GB the first time), then run every test (unit and lit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/format.sh --check
scripts/torch_venv.sh
ctest --test-dir build --output-on-failure
