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
# The cases include stress inputs (op_cases.py) and three cases above the elementwise kernels'
# grid cap and above 2^31 bytes (cuda mode; cpu mode with ETC_OP_CASES_BIG=1: ~24 GB of RAM).
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
# The cases above the grid cap and 2^31 bytes need about 24 GB of host memory each on the CPU
# reference: they run on a GPU (cuda mode), and in cpu mode only with ETC_OP_CASES_BIG=1.
big=()
[[ ${ETC_OP_CASES_BIG:-$([[ $mode == cuda ]] && echo 1 || echo 0)} == 0 ]] && big=(--no-big)
python3 "$src/test/cuda/op_cases.py" "$tmp/cases" "${big[@]}" >/dev/null || { echo "FAIL: op_cases.py"; exit 1; }

# No constant folding (it would fold creation ops) and no no-op removal (it would drop
# clone/view): the op under test must reach the delegate.
passes="dce,partition,decompose-host-ops,dce,propagate-devices,plan-memory"
# Cases run in parallel (JOBS, default min(nproc, 8)): each is its own etc process.
jobs=${JOBS:-$(($(nproc) < 8 ? $(nproc) : 8))}
seed0=$((RANDOM * 32768 + RANDOM))
run_case() {  # INDEX NAME OP RUN_ARGS: writes $tmp/NAME.result ("ok: ..." or "FAIL: ...")
  local index=$1 name=$2 op=$3 run_args=$4
  local model="$tmp/cases/$name.json" pte="$tmp/$name.pte" seed=$((seed0 + index)) result
  if ! "$etc" export "$model" -o "$pte" --target cuda:0 --min-partition-size 1 --passes "$passes" \
      >"$tmp/$name.export" 2>&1; then
    result="FAIL: $name: export failed"$'\n'"$(cat "$tmp/$name.export")"
  elif ! grep -Eq 'ops: ([0-9]+) of \1 delegated' "$tmp/$name.export"; then
    result="FAIL: $name: $op is not fully delegated to CUDA: $(grep 'ops:' "$tmp/$name.export")"
  # shellcheck disable=SC2086  # run_args holds several flags
  elif ! "$etc" run "$pte" --device "$mode" --verify --seed "$seed" $run_args >"$tmp/$name.run" 2>&1; then
    result="FAIL: $name ($op, seed $seed):"$'\n'"$(cat "$tmp/$name.run")"
  else
    result="ok: $name ($(grep -Eo 'max abs error [^,]+' "$tmp/$name.run" | sort -t' ' -k4 -g | tail -1))"
  fi
  echo "$result" >"$tmp/$name.result"
}
names=()
index=0
while IFS='|' read -r name op run_args; do
  [[ -z $name || ( -n $filter && $name != *"$filter"* ) ]] && continue
  names+=("$name")
  index=$((index + 1))
  run_case "$index" "$name" "$op" "$run_args" &
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
done <"$tmp/cases/cases.txt"
wait
failures=0
for name in "${names[@]}"; do
  cat "$tmp/$name.result" 2>/dev/null || echo "FAIL: $name: no result"
  grep -q '^ok: ' "$tmp/$name.result" 2>/dev/null || failures=$((failures + 1))
done
total=${#names[@]}
echo "$((total - failures)) of $total op cases pass on $mode"
((total > 0 && failures == 0))
