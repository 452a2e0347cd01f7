#!/usr/bin/env bash
# Formats every C++ file of the repository (.cpp, .h, .cu) with clang-format-19 and the
# project's .clang-format; with --check, changes nothing and fails, naming the files,
# when one differs (scripts/test.sh runs it so).
#   scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh clang-format-19
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format-19 --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    echo "scripts/format.sh: not formatted (run scripts/format.sh): ${bad[*]}" >&2
    exit 1
  fi
  echo "format: all ${#files[@]} C++ files as .clang-format says"
else
  clang-format-19 -i "${files[@]}"
fi
