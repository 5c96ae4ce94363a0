#!/usr/bin/env bash
# Follows docs/golden-files.md step by step on an example model: create goldens, check an
# unchanged export (equivalent), then a changed one (etc diff exits 1 naming the change) and
# an over-budget one (--max-copies fails).
# Usage: golden_doc_test.sh ETC SOURCE_DIR
set -u
etc=$(realpath "$1") src=$(realpath "$2")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/examples/mlp.json" "$src/examples/mlp.safetensors" "$work/"
cd "$work" || exit 1
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# 1. goldens
mkdir -p goldens out
"$etc" export mlp.json -o goldens/model.pte --report goldens/model.report.json >/dev/null 2>&1 || fail "export goldens"
"$etc" inspect goldens/model.pte --format json >goldens/model.inspect.json || fail "inspect goldens"
# 2. an unchanged export is equivalent and byte-identical
"$etc" export mlp.json -o out/model.pte --report out/model.report.json --max-copies 2 >/dev/null 2>&1 || fail "check export"
"$etc" diff goldens/model.pte out/model.pte >diff.txt || fail "unchanged export reported as different: $(cat diff.txt)"
grep -q '^equivalent$' diff.txt || fail "etc diff did not say equivalent"
cmp -s goldens/model.pte out/model.pte || fail "unchanged export is not byte-identical"
# a changed placement is caught with its path
"$etc" export mlp.json -o out/cpu.pte --target cpu >/dev/null 2>&1
"$etc" diff goldens/model.pte out/cpu.pte >diff.txt
rc=$?
[[ $rc -eq 1 ]] || fail "etc diff exit $rc for a changed program, expected 1"
grep -q 'delegates' diff.txt || fail "the diff does not mention the lost delegate: $(head -5 diff.txt)"
"$etc" diff --json goldens/model.pte out/cpu.pte | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); assert d['equivalent'] is False and d['differences']" ||
  fail "etc diff --json"
# the copy budget guard
"$etc" export mlp.json -o out/tight.pte --max-copies 1 >/dev/null 2>err.txt
rc=$?
[[ $rc -eq 1 ]] || fail "--max-copies 1 exit $rc, expected 1"
grep -q 'more than --max-copies 1' err.txt || fail "--max-copies message: $(cat err.txt)"
# 3. update = re-export; the inspect JSON is stable text
"$etc" inspect goldens/model.pte --format json | cmp -s - goldens/model.inspect.json || fail "inspect json is not stable"
if ((failures == 0)); then echo "golden-files doc: every step works"; fi
exit $((failures > 0))
