#!/usr/bin/env bash
# decoder_gpu: greedy generation on a GPU, etc against PyTorch eager on the same GPU, for the
# decoders scripts/export-decoders.sh writes into DIR (carried to the device machine by
# scripts/build-for-device.sh): `etc run --device cuda --prompt --steps` without and with
# --cuda-graphs (the KV cache in GPU memory), and bench/torch_decode.py --device cuda (the
# same module, weights and cache logic, synchronised after each call) when torch and numpy
# import. Prints a markdown table: decode ms per token (median), tokens/s, the prompt's time,
# the ratio etc / eager (below 1: etc is faster) and whether both generated the same ids.
#
# Usage: bench/decoder_gpu.sh ETC DIR [DEVICE]   (DEVICE cpu: the CPU runtime, to rehearse)
# Environment: STEPS (100; the Whisper-style step stops at 60, its cache has 64 rows),
# ITERATIONS (3).
set -uo pipefail
etc=$1 dir=$2 device=${3:-cuda}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
py=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eager=1
"$py" -c 'import torch, numpy' 2>/dev/null || eager=0
echo "| decoder | etc ms/tok | etc + graphs ms/tok | eager ms/tok | etc tok/s | eager tok/s | etc prompt ms | eager prompt ms | etc/eager | ids |"
echo "|---|---|---|---|---|---|---|---|---|---|"
status=0
for pte in "$dir"/*.pte; do
  name=$(basename "$pte" .pte)
  steps=${STEPS:-100}
  [[ $name == whisper_step ]] && steps=$((steps < 60 ? steps : 60))
  extra=() extra_etc=() whole=()
  for f in "$dir/$name".input_*.npy; do
    [[ -e $f ]] || continue
    extra+=("$f"); k=${f##*.input_}; extra_etc+=(--input "${k%.npy}=$f")
  done
  [[ $name == *_dynamic ]] && whole=(--whole-prompt)
  for g in plain graphs; do
    flags=()
    [[ $g == graphs ]] && flags=(--cuda-graphs)
    if ! "$etc" run "$pte" --device "$device" --prompt "$dir/$name.prompt.npy" --steps "$steps" \
        "${extra_etc[@]}" --warmup 1 --iterations "${ITERATIONS:-3}" --json "${flags[@]}" \
        >"$tmp/$name.$g.json" 2>"$tmp/$name.$g.err"; then
      echo "decoder_gpu: etc run $name ($g) failed: $(tail -3 "$tmp/$name.$g.err")" >&2
      status=1
    fi
  done
  if ((eager)) && [[ $device == cuda || -n ${EAGER_ON_CPU:-} ]]; then
    "$py" "$root/bench/torch_decode.py" "${whole[@]}" --repeat "${ITERATIONS:-3}" --device "$device" \
      "$name" "$dir/$name.prompt.npy" "$steps" 1 "${extra[@]}" >"$tmp/$name.eager.json" 2>"$tmp/$name.eager.err" ||
      echo "decoder_gpu: PyTorch eager $name failed: $(tail -3 "$tmp/$name.eager.err")" >&2
  fi
  "$py" - "$tmp" "$name" <<'PY'
import json, os, sys
tmp, name = sys.argv[1:]
def load(kind):
    try:
        return json.load(open(os.path.join(tmp, f"{name}.{kind}.json")))
    except (OSError, ValueError):
        return None
plain, graphs, eager = load("plain"), load("graphs"), load("eager")
def cell(x, fmt="%.3f"):
    return fmt % x if x is not None else "—"
e = plain["timing_ms"]["decode_median"] if plain else None
eg = graphs["timing_ms"]["decode_median"] if graphs else None
ep = plain["timing_ms"]["prefill_total"] if plain else None
p = eager["decode_median_ms"] if eager else None
pp = eager["prefill_ms"] if eager else None
best = min(x for x in (e, eg) if x is not None) if (e or eg) else None
ratio = best / p if best and p else None
ids = "—"
if eager and plain:
    ids = "same" if plain["generated_ids"] == eager["generated_ids"] else "DIFF"
print(f"| {name} | {cell(e)} | {cell(eg)} | {cell(p)} | {cell(1e3 / best if best else None, '%.0f')} "
      f"| {cell(1e3 / p if p else None, '%.0f')} | {cell(ep)} | {cell(pp)} | {cell(ratio, '%.2f')} | {ids} |")
PY
done
((eager)) || echo "(PyTorch eager not run: torch or numpy does not import)"
exit $status
