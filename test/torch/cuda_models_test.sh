#!/usr/bin/env bash
# PyTorch programs on the GPU: the committed archives (test/torch/programs) and, when a
# fixtures folder is given (test/torch/fixtures.sh), every model in both forms, exported for
# cuda:0 and run with `etc run --device cuda --verify` against the CPU reference (with the
# fixture's inputs where it has them). Exits 77 (CTest: skipped) without CUDA support or
# without a visible GPU.
# Usage: cuda_models_test.sh ETC SOURCE_DIR [FIXTURES]
set -u
etc=$1 src=$2 fix=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
version=$("$etc" --version 2>&1)
grep -q 'CUDA support: not built' <<<"$version" && { echo "SKIP: built without CUDA support"; exit 77; }
grep -q '^CUDA device 0: ' <<<"$version" || { echo "SKIP: no CUDA device visible"; exit 77; }

failures=0 checked=0
check() {  # NAME ARCHIVE [export flags...] -- [run flags...]
  local name=$1 archive=$2
  shift 2
  local export_flags=() run_flags=()
  while [[ $# -gt 0 && $1 != -- ]]; do export_flags+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  run_flags=("$@")
  checked=$((checked + 1))
  if ! "$etc" export "$archive" -o "$tmp/$name.pte" --target cuda:0 "${export_flags[@]}" >"$tmp/$name.export" 2>&1; then
    echo "FAIL: $name: export"; cat "$tmp/$name.export"; failures=$((failures + 1)); return
  fi
  if "$etc" run "$tmp/$name.pte" --device cuda --verify "${run_flags[@]}" >"$tmp/$name.run" 2>&1; then
    echo "ok: $name: $(grep -E '^verify:' "$tmp/$name.run")"
  else
    echo "FAIL: $name"; cat "$tmp/$name.run"; failures=$((failures + 1))
  fi
}
for archive in "$src"/test/torch/programs/*.pt2; do
  name=$(basename "$archive" .pt2)
  flags=()
  [[ $name == linear_dynamic ]] && flags=(--input-shape x=4x32)
  check "$name" "$archive" "${flags[@]}" -- --seed 7
done
if [[ -n "$fix" && -d "$fix" ]]; then
  for d in "$fix"/*/; do
    [[ -f "$d/meta.json" ]] || continue
    model=$(basename "$d")
    inputs=()
    for f in "$d"/input_*.npy; do
      i=${f##*input_}
      inputs+=(--input "${i%.npy}=$f")
    done
    shapes=()
    [[ $model == *_dynamic ]] && shapes=(--input-shape x=4x32)
    for form in model model.core; do
      check "$model.$form" "$d/$form.pt2" "${shapes[@]}" -- "${inputs[@]}"
    done
  done
fi
echo "torch programs on CUDA: $checked checked, $failures failures"
exit $((failures > 0))
