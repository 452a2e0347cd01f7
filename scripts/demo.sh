#!/usr/bin/env bash
# The README's first command: build, then show an example end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
set -x
build/gradc ir examples/first.dg
build/gradc run examples/first.dg --ranks=2
