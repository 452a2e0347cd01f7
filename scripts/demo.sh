#!/usr/bin/env bash
# The README's first command: build, then show the seed example end to end: its
# derived backward graph, then its values and gradients on 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
set -x
build/gradc ir examples/first.dg --stage=grad
build/gradc run examples/first.dg --ranks=2
