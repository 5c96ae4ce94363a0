#!/usr/bin/env bash
# ExecuTorch's own runtime (from PyPI, program verification on) against etc, both ways:
#  1. etc -> ExecuTorch: the CPU-only export of every example, every golden model and a
#     program without constants loads and runs in ExecuTorch's runtime, with the same
#     outputs as `etc run` on the same inputs; the cuda:0 exports load as programs.
#  2. ExecuTorch -> etc: programs ExecuTorch exports (convolutions, views, permutes, pads,
#     norms: IntLists, DoubleLists, Int/Double scalars) run in etc and match PyTorch eager.
# Usage: executorch_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 passes=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; passes=$((passes + 1)); }

py=$("$src/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
ref=("$py" "$src/test/executorch/et_ref.py")
# Floats: ExecuTorch's portable kernels and etc's sum in different orders.
rtol=1e-4 atol=1e-5

# A program without constants: ExecuTorch's loader needs the (empty) constant segment.
cat >"$tmp/add.json" <<'EOF'
{"format": "etc.graph", "version": 1, "name": "add",
 "inputs": [{"name": "a", "dtype": "float32", "shape": [2, 2]},
            {"name": "b", "dtype": "float32", "shape": [2, 2]}],
 "nodes": [{"name": "sum", "op": "aten.add.Tensor", "args": {"self": "a", "other": "b"}, "outputs": ["y"]}],
 "outputs": ["y"]}
EOF

# 1. etc -> ExecuTorch.
models=("$src"/examples/*.json "$src"/test/golden/models/*.json "$tmp/add.json")
seed=0
for model in "${models[@]}"; do
  name=$(basename "$model" .json)
  seed=$((seed + 1))
  d="$tmp/etc_$name"
  mkdir -p "$d"
  if ! "$etc" export "$model" --target cpu -o "$d/cpu.pte" 2>"$d/export.err"; then
    fail "$name: etc export --target cpu failed: $(cat "$d/export.err")"
    continue
  fi
  "$etc" inspect "$d/cpu.pte" --format json >"$d/inspect.json"
  n=$("${ref[@]}" inputs "$d/inspect.json" "$d/in" "$seed" 2>"$d/inputs.err") ||
    { fail "$name: cannot make inputs: $(tail -3 "$d/inputs.err")"; continue; }
  etc_args=() in_files=()
  for ((i = 0; i < n; i++)); do
    etc_args+=(--input "$i=$d/in/in$i.npy")
    in_files+=("$d/in/in$i.npy")
  done
  if ! "$etc" run "$d/cpu.pte" --device cpu "${etc_args[@]}" --output-dir "$d/etc_out" >"$d/run.log" 2>&1; then
    fail "$name: etc run failed: $(tail -3 "$d/run.log")"
    continue
  fi
  if ! "${ref[@]}" run "$d/cpu.pte" "$d/et_out" "${in_files[@]}" >"$d/et.log" 2>&1; then
    fail "$name: ExecuTorch's runtime refused or failed etc's CPU export: $(grep -v -i warn "$d/et.log" | tail -5)"
    continue
  fi
  if msg=$("${ref[@]}" compare "$d/etc_out" "$d/et_out" "$rtol" "$atol" 2>&1); then
    pass "$name (cpu): ExecuTorch's runtime gives etc run's outputs: $msg"
  else
    fail "$name (cpu): ExecuTorch's outputs differ from etc run's: $msg"
  fi
done

# The cuda:0 exports carry etc's CUDA delegate, which ExecuTorch does not have: its program
# loader (verification on) must still accept the file.
for model in "$src/examples/mlp.json" "$tmp/add.json"; do
  name=$(basename "$model" .json)
  "$etc" export "$model" --target cuda:0 -o "$tmp/${name}_cuda0.pte" 2>/dev/null || { fail "$name: cuda:0 export"; continue; }
  if msg=$("${ref[@]}" load "$tmp/${name}_cuda0.pte" 2>&1); then
    pass "$name (cuda:0): ExecuTorch's program loader accepts it"
  else
    fail "$name (cuda:0): ExecuTorch's program loader refused it: $(grep -v -i warn <<<"$msg" | tail -5)"
  fi
done

# 2. ExecuTorch -> etc.
fx=$("$src/test/executorch/fixtures.sh") || { fail "ExecuTorch could not make its programs"; fx=""; }
if [[ -n "$fx" ]]; then
  while IFS= read -r name; do
    [[ -z "$name" ]] && continue
    args=()
    for f in "$fx/$name".in*.npy; do
      i=${f##*.in}
      args+=(--input "${i%.npy}=$f")
    done
    if ! "$etc" run "$fx/$name.pte" --device cpu "${args[@]}" --output-dir "$tmp/fx_$name" >"$tmp/fx_$name.log" 2>&1; then
      fail "ExecuTorch's $name.pte: etc run failed: $(tail -3 "$tmp/fx_$name.log")"
    elif msg=$("${ref[@]}" compare "$fx/$name" "$tmp/fx_$name" "$rtol" "$atol" 2>&1); then
      pass "ExecuTorch's $name.pte runs in etc and matches PyTorch: $msg"
    else
      fail "ExecuTorch's $name.pte in etc differs from PyTorch: $msg"
    fi
  done <"$fx/cases.txt"
fi

echo "$passes passed, $failures failed"
exit $((failures > 0))
