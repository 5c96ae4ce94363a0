#!/usr/bin/env bash
# Every op of the CUDA capability table on the CUDA delegate against the CPU reference: the
# models from op_cases.py are exported for CUDA (each op must be delegated), then run with
# `etc run --device cuda --verify` on fresh random inputs (a new seed per run), which compares
# every output with the CPU reference under a dtype-aware tolerance.
#
# Usage: cuda_ops_test.sh ETC SOURCE_DIR [cuda|cpu] [FILTER]
#   cuda (default): needs a GPU; exits 77 (CTest: skipped) when etc has no CUDA support or
#                   no GPU is visible.
#   cpu:            the same cases on the CPU reference runtime (--device cpu), to check the
#                   cases themselves on machines without a GPU.
#   FILTER:         only cases whose name contains it.
set -u
etc=$1 src=$2 mode=${3:-cuda} filter=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [[ $mode == cuda ]]; then
  version=$("$etc" --version 2>&1)
  if grep -q 'CUDA support: not built' <<<"$version"; then
    echo "SKIP: this etc was built without CUDA support"; exit 77
  fi
  if ! grep -q '^CUDA device 0: ' <<<"$version"; then
    echo "SKIP: no CUDA device visible:"; grep 'CUDA devices' <<<"$version"; exit 77
  fi
fi
python3 "$src/test/cuda/op_cases.py" "$tmp/cases" >/dev/null || { echo "FAIL: op_cases.py"; exit 1; }

# No constant folding (it would fold creation ops) and no no-op removal (it would drop
# clone/view): the op under test must reach the delegate.
passes="dce,partition,decompose-host-ops,dce,propagate-devices,plan-memory"
failures=0 total=0 seed=$((RANDOM * 32768 + RANDOM))
while IFS='|' read -r name op run_args; do
  [[ -z $name || ( -n $filter && $name != *"$filter"* ) ]] && continue
  total=$((total + 1))
  model="$tmp/cases/$name.json" pte="$tmp/$name.pte"
  if ! "$etc" export "$model" -o "$pte" --target cuda:0 --min-partition-size 1 --passes "$passes" \
      >"$tmp/$name.export" 2>&1; then
    echo "FAIL: $name: export failed"; cat "$tmp/$name.export"; failures=$((failures + 1)); continue
  fi
  if ! grep -Eq 'ops: ([0-9]+) of \1 delegated' "$tmp/$name.export"; then
    echo "FAIL: $name: $op is not fully delegated to CUDA:"; grep 'ops:' "$tmp/$name.export"
    failures=$((failures + 1)); continue
  fi
  seed=$((seed + 1))
  # shellcheck disable=SC2086  # run_args holds several flags
  if ! "$etc" run "$pte" --device "$mode" --verify --seed "$seed" $run_args >"$tmp/$name.run" 2>&1; then
    echo "FAIL: $name ($op, seed $seed):"; cat "$tmp/$name.run"; failures=$((failures + 1)); continue
  fi
  echo "ok: $name ($(grep -Eo 'max abs error [^,]+' "$tmp/$name.run" | sort -t' ' -k4 -g | tail -1))"
done <"$tmp/cases/cases.txt"

echo "$((total - failures)) of $total op cases pass on $mode"
((total > 0 && failures == 0))
