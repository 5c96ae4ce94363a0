#!/usr/bin/env bash
# Generation on the GPU with the KV cache in device memory: each decoder program in DIR
# (NAME.pte, exported for cuda:0 by scripts/build-for-device.sh, with NAME.prompt.npy, any
# NAME.input_K.npy and NAME.expected: the step count, then PyTorch eager's generated ids) runs
# `etc run --device cuda --prompt --steps --verify`, which checks every call's logits against
# the CPU reference; the generated ids must be PyTorch's. Exit 77 when no GPU is visible.
#   test/torch/cuda_decoders_test.sh ETC DIR [cuda|cpu]   (cpu: the CPU reference runtime, to check
#   the programs and this script on machines without a GPU)
set -u
etc=$1 dir=$2 device=${3:-cuda}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 ran=0
for pte in "$dir"/*.pte; do
  [[ -e $pte ]] || continue
  name=$(basename "$pte" .pte)
  steps=$(sed -n 1p "$dir/$name.expected") want=$(sed -n 2p "$dir/$name.expected")
  args=()
  for f in "$dir/$name".input_*.npy; do
    [[ -e $f ]] || continue
    k=${f##*.input_}
    args+=(--input "${k%.npy}=$f")
  done
  out=$("$etc" run "$pte" --device "$device" --prompt "$dir/$name.prompt.npy" --steps "$steps" \
    "${args[@]}" --verify --output-dir "$tmp/$name" 2>&1)
  rc=$?
  if ((rc == 4)); then echo "no GPU: $out" | head -3; exit 77; fi
  ran=$((ran + 1))
  got=$(grep -Eo 'generated [0-9]+ tokens .*: [0-9 ]+$' <<<"$out" | sed 's/^.*: //')
  if ((rc != 0)); then
    echo "FAIL: $name: exit $rc"; echo "$out" | tail -15; failures=$((failures + 1))
  elif [[ "$got" != "$want" ]]; then
    echo "FAIL: $name: ids $got, PyTorch eager $want"; failures=$((failures + 1))
  else
    echo "ok: $name: PyTorch's ids; $(grep -E 'verify:|decode per token' <<<"$out" | tr '\n' ' ')"
  fi
done
((ran == 0)) && { echo "no decoder programs in $dir"; exit 1; }
echo "$((ran - failures)) of $ran decoders match on $device"
exit $((failures > 0))
