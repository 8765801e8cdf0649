#!/bin/bash
# `make test`: the unit tests and the real Docker tests side by side. The Docker half runs
# one test at a time and waits mostly on the network, the daemon and compression; the unit
# half is pure CPU work, so it runs beside it in one process instead of after it (on a
# 2-core machine that takes the unit tests' 4 minutes off the wall time). The unit output
# is printed whole when both are done; the exit status is the worse of the two.
# Usage: tools/test.sh [MARK]   (MARK: the Docker half's marker expression)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
docker_marks=${1:-"docker and not gpu and not slow"}

work=$(mktemp -d)
trap 'kill "$unit_pid" 2>/dev/null; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

start=$(date +%s)
( "$PY" -m pytest -q -p no:cacheprovider --basetemp "$work/tmp" --durations=15 \
    -m "not docker and not gpu and not slow" >"$work/unit.log" 2>&1
  rc=$?; date +%s >"$work/unit.end"; exit $rc ) &
unit_pid=$!

"$PY" -m pytest -q --durations=25 -m "$docker_marks"
docker_rc=$?

wait "$unit_pid"
unit_rc=$?
unit_pid=
echo
echo "==== unit tests, run beside the Docker tests: done $(( $(cat "$work/unit.end") - start )) s after the start"
cat "$work/unit.log"
echo "==== unit tests: exit $unit_rc; Docker tests: exit $docker_rc"
[ "$unit_rc" -eq 0 ] && [ "$docker_rc" -eq 0 ]
