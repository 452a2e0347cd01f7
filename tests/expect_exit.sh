#!/usr/bin/env bash
# usage: expect_exit.sh CODE COMMAND...: runs COMMAND, passes its output through,
# and fails unless it exits with CODE (lit's `not` accepts any non-zero code).
want=$1
shift
"$@"
got=$?
if [ "$got" -ne "$want" ]; then
  echo "expect_exit.sh: '$*' exited $got, expected $want" >&2
  exit 1
fi
exit 0
