#!/usr/bin/env bash
# The README's first command: build gradc, then the main job end to end on the seed
# example: its derived backward graph, the program built into an executable that
# runs on 2 ranks (threads, then processes under mpirun), and the same program built
# for CUDA where nvcc is present (run it on a machine with 2 GPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
mkdir -p build/demo
set -x
build/gradc ir examples/first.dg --stage=grad
build/gradc build examples/first.dg --target=cpu -o build/demo/first
build/demo/first --ranks=2
mpirun --allow-run-as-root --oversubscribe -np 2 build/demo/first
set +x
if build/gradc --version | grep -q "cuda: yes"; then
  set -x
  build/gradc build examples/first.dg --target=cuda -o build/demo/first_cuda
  set +x
  echo "built build/demo/first_cuda for 2 GPUs (this machine has none to run it on)"
else
  echo "no CUDA toolkit here (gradc --version): the CUDA build is skipped"
fi
