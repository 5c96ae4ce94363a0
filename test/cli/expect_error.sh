#!/usr/bin/env bash
# expect_error.sh ETC EXIT_CODE DIR INPUT EXPECTED_STDERR_FILE ARGS...
# Runs `ETC ARGS...` inside DIR and checks the exit code and the exact stderr. Running in
# DIR keeps the file names in messages relative, so expected files are location-free.
set -u
etc=$1 want_rc=$2 dir=$3 input=$4 expected=$5
shift 5
cd "$dir" || exit 1
actual=$("$etc" "$@" 2>&1 >/dev/null)
rc=$?
status=0
if [[ $rc -ne $want_rc ]]; then
  echo "FAIL: $input: exit code $rc, expected $want_rc"
  status=1
fi
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "FAIL: $input: stderr differs from $expected (diff above: - expected, + actual)"
  status=1
fi
[[ $status -eq 0 ]] && echo "ok: $input"
exit $status
