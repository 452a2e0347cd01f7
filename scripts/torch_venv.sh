#!/bin/bash
# Makes build/torch-venv: PyPI's PyTorch (2.4 or later: DeviceMesh, torch.library.custom_op)
# and NumPy in a virtual environment, for the torch target's tests (tests/lit/torch.test),
# examples/torch/ and the benchmarks against PyTorch 2. Debian's python3-torch (1.13)
# stays the CPU peer of bench/native.py. Idempotent; about 3 GB from PyPI the first time.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=build/torch-venv
PY=${PYTHON:-python3}
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  scripts/deps.sh python3-venv
  PY=/usr/bin/python3
fi
# Python.h, which torch.utils.cpp_extension compiles against (Debian's is in python3-dev)
"$PY" -c 'import os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' 2>/dev/null ||
  scripts/deps.sh python3-dev
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# setuptools and wheel: `pip install --no-build-isolation` of a package gradc emit --target=torch wrote
# A wheel that arrives damaged fails pip's hash check ("do not match the hashes"); the
# download is tried again, up to three times, without pip's cache.
if ! "$VENV/bin/python" -c 'import torch, numpy, setuptools, wheel' 2>/dev/null; then
  for try in 1 2 3; do
    cache=()
    [ "$try" = 1 ] || cache=(--no-cache-dir)
    "$VENV/bin/pip" install -q --retries 10 --timeout 60 "${cache[@]}" \
      'torch>=2.4,<2.6' numpy setuptools wheel && break
    [ "$try" = 3 ] && { echo "torch_venv.sh: pip could not install PyTorch (3 tries)" >&2; exit 1; }
    echo "torch_venv.sh: pip failed (try $try of 3); downloading again" >&2
    sleep 10
  done
fi
"$VENV/bin/python" -c 'import torch; print("torch", torch.__version__, "in", "'"$VENV"'")'
