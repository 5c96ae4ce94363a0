#!/usr/bin/env bash
# compute-sanitizer memcheck over one op case per CUDA kernel family (op_cases.py): each
# case is exported for CUDA and run once under `compute-sanitizer --tool memcheck`. Exit 0
# clean, 1 memcheck found errors (or a run failed), 77 no GPU or no usable compute-sanitizer.
# Usage: memcheck.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -q '^CUDA device 0: ' <<<"$("$etc" --version 2>&1)" || { echo "SKIP: no CUDA device visible"; exit 77; }
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
[[ -n $sanitizer ]] || { echo "SKIP: compute-sanitizer not found"; exit 77; }
cases=(add_tensor_float16 where_int64 mul_scalar_bfloat16 gelu_tanh_float32 pow_3_float32
  mm_float32 linear_bfloat16 bmm_float16 addmm_full_bias_float32 conv3x3_float32
  conv_grouped_float32 conv_depthwise_float32 conv_strided_float16 conv_pointwise_float32
  max_pool2d_ceil_dilated_float32 avg_pool2d_nopad_count_bfloat16 adaptive_avg_pool2d_float32
  amax_float32 sum_dim_float16 mean_dim_float32 softmax_mid_float32 log_softmax_last_bfloat16
  layer_norm_float32 batch_norm_float16 cat_bool constant_pad_nd_int32 permute_float32
  slice_int64 select_float16 expand_bool to_copy_float32_to_bool embedding_float32_int32
  full_bool view_float32 var_dim_float32 max_dim_int64 sort_long_float32 topk_bfloat16
  weight_only_linear_int4_odd_k_bfloat16 weight_only_linear_int8_tail_float16
  weight_only_linear_int4_prompt_float32)
python3 "$src/test/cuda/op_cases.py" "$tmp/cases" >/dev/null || exit 1
passes="dce,partition,decompose-host-ops,dce,propagate-devices,plan-memory"
export_case() {  # NAME PTE
  "$etc" export "$tmp/cases/$1.json" -o "$2" --min-partition-size 1 --passes "$passes" >/dev/null 2>&1
}
# A first run tells whether the sanitizer works here at all (it refuses some virtualised GPUs).
export_case add_tensor_float32 "$tmp/probe.pte"
if ! "$sanitizer" --tool memcheck --error-exitcode 99 "$etc" run "$tmp/probe.pte" --device cuda \
    >"$tmp/probe.out" 2>&1 && ! grep -q 'ERROR SUMMARY: [1-9]' "$tmp/probe.out"; then
  echo "SKIP: compute-sanitizer does not work here:"; tail -5 "$tmp/probe.out"; exit 77
fi
# Cases run in parallel (JOBS, default 4): the sanitizer makes each run slow.
jobs=${JOBS:-4}
check_case() {  # NAME: writes $tmp/NAME.result
  local name=$1 pte="$tmp/$1.pte" result
  if ! export_case "$name" "$pte"; then
    result="FAIL: $name: export"
  elif "$sanitizer" --tool memcheck --error-exitcode 99 "$etc" run "$pte" --device cuda >"$tmp/$name.out" 2>&1; then
    result="ok: $name ($(grep -Eo 'ERROR SUMMARY: [0-9]+ errors?' "$tmp/$name.out"))"
  else
    result="FAIL: $name"$'\n'"$(grep -E 'Invalid|ERROR SUMMARY|rror|at 0x' "$tmp/$name.out" | head -12)"
  fi
  echo "$result" >"$tmp/$name.result"
}
for name in "${cases[@]}"; do
  check_case "$name" &
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n; done
done
wait
failures=0
for name in "${cases[@]}"; do
  cat "$tmp/$name.result" 2>/dev/null || echo "FAIL: $name: no result"
  grep -q '^ok: ' "$tmp/$name.result" 2>/dev/null || failures=$((failures + 1))
done
echo "memcheck: $((${#cases[@]} - failures)) of ${#cases[@]} cases clean"
((failures == 0))
