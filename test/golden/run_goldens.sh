#!/usr/bin/env bash
# Golden-file tests: each case in test/golden/cases.txt is exported with etc; the canonical
# dumps (inspect --format json and text, the final IR, the report) and the .pte's SHA-256
# must equal the files in test/golden/expected/. Error cases compare exact stderr.
# Usage: run_goldens.sh ETC SOURCE_DIR [--update] [CASE]
set -u
etc=$1 src=$2
update=0
only=""
shift 2
for a in "$@"; do
  if [[ $a == --update ]]; then update=1; else only=$a; fi
done
expected="$src/test/golden/expected"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
passed=0 failed=0
check() {  # check NAME SUFFIX FILE: compare or update one expected file
  local name=$1 suffix=$2 actual=$3
  local want="$expected/$name.$suffix"
  if ((update)); then
    cp "$actual" "$want"
    return 0
  fi
  if ! diff -u "$want" "$actual" >"$tmp/diff" 2>&1; then
    echo "FAIL: $name.$suffix differs from the golden (- expected, + actual); run 'make update-goldens' if intended:"
    head -40 "$tmp/diff"
    return 1
  fi
  return 0
}
while IFS= read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  name=$(echo "${line%%|*}" | xargs)
  rest=${line#*|}
  [[ -n "$only" && "$name" != "$only" ]] && continue
  want_rc=0
  if [[ "$rest" == *"| exit "* ]]; then
    want_rc=${rest##*| exit }
    rest=${rest%|*}
  fi
  read -r -a args <<<"$rest"
  ok=1
  extra=()
  [[ $want_rc -eq 0 ]] && extra=(--report "$tmp/$name.report.json" --print-ir-after plan-memory)
  "$etc" export "${args[@]}" -o "$tmp/$name.pte" "${extra[@]}" >"$tmp/$name.stdout" 2>"$tmp/$name.stderr"
  rc=$?
  if [[ $rc -ne $want_rc ]]; then
    echo "FAIL: $name: etc export exited $rc, expected $want_rc"
    cat "$tmp/$name.stderr"
    ok=0
  elif [[ $want_rc -ne 0 ]]; then
    check "$name" err "$tmp/$name.stderr" || ok=0
  else
    # The IR dump after the last pass, without the summary lines that follow it.
    sed -n '/^\/\/ ----- IR after plan-memory/,/^}$/p' "$tmp/$name.stderr" >"$tmp/$name.ir"
    "$etc" inspect "$tmp/$name.pte" --format json | sed "s|$tmp/||g" >"$tmp/$name.json"
    "$etc" inspect "$tmp/$name.pte" >"$tmp/$name.txt"
    (cd "$tmp" && sha256sum "$name.pte") >"$tmp/$name.sha256"
    for suffix in json txt ir sha256; do check "$name" "$suffix" "$tmp/$name.$suffix" || ok=0; done
    check "$name" report.json "$tmp/$name.report.json" || ok=0
    # Determinism: a second export is byte-identical.
    "$etc" export "${args[@]}" -o "$tmp/$name.again.pte" >/dev/null 2>&1
    if ! cmp -s "$tmp/$name.pte" "$tmp/$name.again.pte"; then
      echo "FAIL: $name: two exports differ"
      ok=0
    fi
  fi
  if ((ok)); then passed=$((passed + 1)); [[ $update -eq 1 ]] || echo "ok: $name"; else failed=$((failed + 1)); fi
done <"$src/test/golden/cases.txt"
if ((update)); then
  echo "updated the goldens of $passed cases in test/golden/expected/ ($failed could not be run); review with git diff"
  exit $((failed > 0))
fi
echo "$passed passed, $failed failed"
exit $((failed > 0))
