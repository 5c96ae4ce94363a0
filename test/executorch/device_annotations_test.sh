#!/usr/bin/env bash
# ExecuTorch's device annotations against etc's (docs/executorch-compat.md). ExecuTorch
# (from PyPI) exports small programs with its test partitioner DeviceAwarePartitioner, whose
# compile specs carry target_device; etc exports the same torch.export programs with the same
# ops delegated. test/executorch/device_compare.py compares them field by field and accepts
# exactly the differences docs/executorch-compat.md explains. Then ExecuTorch's runtime
# (CPU-only wheel, verification on) loads both programs of every case and must get exactly
# as far with etc's as with its own.
# With RUNNER (etc_et_runner, src/executorch), ExecuTorch's own device-planned programs also
# get their CUDA buffers from etc's allocator registered with ExecuTorch's runtime, and stop
# only at their test backend, which no runtime registers.
# Usage: device_annotations_test.sh ETC SOURCE_DIR [RUNNER]
set -u
etc=$1 src=$2 runner=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 passes=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

py=$("$src/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
cmp=("$py" "$src/test/executorch/device_compare.py")
quiet() { grep -v -e '^W[0-9]\{4\} ' -e 'Warning' || true; }

if ! "${cmp[@]}" fixtures "$tmp/fx" >"$tmp/fixtures.log" 2>&1; then
  echo "FAIL: ExecuTorch could not export the device-annotated programs:"
  quiet <"$tmp/fixtures.log" | tail -20
  exit 1
fi

while IFS= read -r name; do
  [[ -z "$name" ]] && continue
  d="$tmp/fx"
  read -r -a flags <"$d/$name.etc-args"
  if ! "$etc" export "$d/$name.pt2" -o "$d/$name.etc.pte" "${flags[@]}" >"$d/$name.export.log" 2>&1; then
    fail "$name: etc export ${flags[*]} failed: $(tail -3 "$d/$name.export.log")"
    continue
  fi
  "$etc" inspect "$d/$name.et.pte" --format json >"$d/$name.et.json" || { fail "$name: etc inspect of ExecuTorch's program"; continue; }
  "$etc" inspect "$d/$name.etc.pte" --format json >"$d/$name.etc.json" || { fail "$name: etc inspect of etc's program"; continue; }
  if "${cmp[@]}" compare "$name" "$d/$name.et.json" "$d/$name.etc.json" >"$d/$name.cmp" 2>&1; then
    pass "$name (etc ${flags[*]}): $(tail -1 "$d/$name.cmp")"
  else
    quiet <"$d/$name.cmp"
    fail "$name: the device annotations differ from ExecuTorch's beyond the documented differences"
  fi
done <"$tmp/fx/cases.txt"

# ExecuTorch's runtime, every program in one process: the same stages accepted, the same
# refusal (its backend's name aside).
mapfile -t names < <(grep -v '^$' "$tmp/fx/cases.txt")
ptes=()
for name in "${names[@]}"; do
  ptes+=("$tmp/fx/$name.et.pte")
  [[ -f "$tmp/fx/$name.etc.pte" ]] && ptes+=("$tmp/fx/$name.etc.pte")
done
"${cmp[@]}" load "${ptes[@]}" >"$tmp/load.log" 2>&1 || { quiet <"$tmp/load.log" | tail -5; fail "ExecuTorch's runtime could not be driven"; }
for name in "${names[@]}"; do
  et="$tmp/fx/$name.et.pte.load" ours="$tmp/fx/$name.etc.pte.load"
  [[ -f "$ours" && -f "$et" ]] || continue
  if ! grep -q '^program load (verification on): accepted' "$ours"; then
    fail "$name: ExecuTorch's program loader refused etc's program: $(cat "$ours")"
  elif diff -q "$et" "$ours" >/dev/null; then
    pass "$name: ExecuTorch's runtime gets as far with etc's program as with its own: $(tr '\n' ';' <"$ours")"
  else
    fail "$name: ExecuTorch's runtime treats the programs differently: ExecuTorch's: $(tr '\n' ';' <"$et") etc's: $(tr '\n' ';' <"$ours")"
  fi
done

# ExecuTorch's own device-planned programs in ExecuTorch's runtime with etc's plugin: the
# planned CUDA buffers come from etc's allocator (the wheel alone has none), then the method
# stops at ExecuTorch's test backend (BackendWithCompilerDemo), which nothing registers.
if [[ -n "$runner" ]]; then
  allocated=0
  for name in "${names[@]}"; do
    pte="$tmp/fx/$name.et.pte"
    [[ -f "$tmp/fx/$name.et.json" ]] || continue
    python3 - "$tmp/fx/$name.et.json" <<'PY' || continue  # only programs with a CUDA buffer
import json, sys
plan = json.load(open(sys.argv[1]))["plans"][0]
sys.exit(0 if any(b["device"] != "cpu" for b in plan["buffers"]) else 1)
PY
    ETC_EXECUTORCH_DEVICE=host "$runner" "$pte" "$tmp" >"$tmp/$name.runner.out" 2>&1
    if grep -q "from the registered allocator" "$tmp/$name.runner.out" &&
       grep -q "BackendWithCompilerDemo is not registered" "$tmp/$name.runner.out"; then
      pass "$name: ExecuTorch's program gets its CUDA buffers from etc's allocator ($(grep -c 'from the registered allocator' "$tmp/$name.runner.out") buffer(s)), then stops at its unregistered test backend"
      allocated=$((allocated + 1))
    else
      fail "$name: ExecuTorch's program with etc's plugin: $(grep -v ' I ' "$tmp/$name.runner.out" | tail -3)"
    fi
  done
  [[ $allocated -gt 0 ]] || fail "no ExecuTorch program with a CUDA buffer was run with etc's plugin"
fi

echo "$passes passed, $failures failed"
exit $((failures > 0))
