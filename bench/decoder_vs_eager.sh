#!/usr/bin/env bash
# decoder_vs_eager: greedy generation with the decoders of scripts/make-decoder-fixtures.py,
# etc (`etc run --prompt --steps`, --target cpu export) against PyTorch eager running the same
# module with the same KV-cache logic (bench/torch_decode.py), at 1 and 2 threads, in one run.
# Prints decode ms per token (median) and tokens/s for both and the ratio etc / eager (below
# 1: etc is faster), checks that both generate the same ids, and prints each program's
# planned bytes against the lower bound with the cache counted once. The decoder exported
# with a dynamic sequence also prefills a 100-token prompt in one call, timed against
# PyTorch doing the same.
#
# Usage: bench/decoder_vs_eager.sh [ETC_BINARY]   (default build/apps/etc/etc)
# Environment: STEPS (200: the Llama-style decoder fills most of its 256-row cache).
set -euo pipefail

ETC=${1:-build/apps/etc/etc}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ -x "$ETC" ]] || { echo "decoder_vs_eager: $ETC is not an executable" >&2; exit 2; }
PY=$("$ROOT/scripts/python-env.sh")
FIX=$(bash "$ROOT/test/torch/fixtures.sh" "" make-decoder-fixtures.py 2>/dev/null | tail -1)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

field() { "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); print(d$2)" "$1"; }

printf '%-14s %7s %12s %12s %9s %9s %7s %5s\n' model threads "etc ms/tok" "eager ms/tok" "etc tok/s" \
  "eager t/s" ratio ids
for model in llama_decoder whisper_step; do
  d="$FIX/$model"
  steps=${STEPS:-200}
  [[ $model == whisper_step ]] && steps=$(( ${STEPS:-200} < 60 ? ${STEPS:-200} : 60 ))  # 64-row cache
  extra=(); extra_etc=()
  for f in "$d"/input_*.npy; do
    [[ -e $f ]] || continue
    extra+=("$f"); i=${f##*/input_}; extra_etc+=(--input "${i%.npy}=$f")
  done
  "$ETC" export "$d/model.pt2" -o "$WORK/$model.pte" --target cpu --report "$WORK/$model.report.json" >/dev/null 2>&1
  for t in 1 2; do
    "$ETC" run "$WORK/$model.pte" --device cpu --threads "$t" --warmup 1 --iterations 3 --prompt "$d/prompt.npy" --steps "$steps" \
      "${extra_etc[@]}" --json >"$WORK/etc.json"
    "$PY" "$ROOT/bench/torch_decode.py" --repeat 3 "$model" "$d/prompt.npy" "$steps" "$t" "${extra[@]}" >"$WORK/eager.json"
    e=$(field "$WORK/etc.json" '["timing_ms"]["decode_median"]')
    p=$(field "$WORK/eager.json" '["decode_median_ms"]')
    same=$("$PY" -c "import json,sys; a=json.load(open(sys.argv[1]))['generated_ids']; b=json.load(open(sys.argv[2]))['generated_ids']; print('same' if a==b else 'DIFF')" "$WORK/etc.json" "$WORK/eager.json")
    "$PY" -c "import sys; e,p=map(float,sys.argv[3:5]); print('%-14s %7s %12.3f %12.3f %9.0f %9.0f %7.2f %5s' % (sys.argv[1], sys.argv[2], e, p, 1e3/e, 1e3/p, e/p, sys.argv[5]))" \
      "$model" "$t" "$e" "$p" "$same"
  done
done
echo
echo "prefill of a 100-token prompt in one call (llama_decoder_dynamic, sequence in [1, 128])"
printf '%-7s %12s %12s %7s %5s\n' threads "etc ms" "eager ms" ratio ids
d="$FIX/llama_decoder_dynamic"
"$PY" -c "import numpy as np; np.save('$WORK/prompt100.npy', (np.arange(100) * 37 % 1000).astype(np.int64))"
"$ETC" export "$d/model.pt2" -o "$WORK/dyn.pte" --target cpu >/dev/null 2>&1
for t in 1 2; do
  "$ETC" run "$WORK/dyn.pte" --device cpu --threads "$t" --warmup 2 --iterations 15 --prompt "$WORK/prompt100.npy" --steps 8 --json >"$WORK/etc.json"
  "$PY" "$ROOT/bench/torch_decode.py" --whole-prompt --repeat 15 llama_decoder_dynamic "$WORK/prompt100.npy" 8 "$t" >"$WORK/eager.json"
  e=$(field "$WORK/etc.json" '["timing_ms"]["prefill_total"]')
  p=$(field "$WORK/eager.json" '["prefill_ms"]')
  same=$("$PY" -c "import json,sys; a=json.load(open(sys.argv[1]))['generated_ids']; b=json.load(open(sys.argv[2]))['generated_ids']; print('same' if a==b else 'DIFF')" "$WORK/etc.json" "$WORK/eager.json")
  "$PY" -c "import sys; e,p=map(float,sys.argv[2:4]); print('%-7s %12.3f %12.3f %7.2f %5s' % (sys.argv[1], e, p, e/p, sys.argv[4]))" "$t" "$e" "$p" "$same"
done
echo
echo "memory (--target cpu): planned bytes, the lower bound (the cache counted once, live for the whole run), the state"
"$ETC" export "$FIX/llama_decoder_dynamic/model.pt2" -o "$WORK/llama_decoder_dynamic.pte" --target cpu \
  --report "$WORK/llama_decoder_dynamic.report.json" >/dev/null 2>&1
for model in llama_decoder llama_decoder_dynamic whisper_step; do
  "$PY" - "$WORK/$model.report.json" "$ETC" "$WORK/$model.pte" "$model" <<'PY'
import json, subprocess, sys
report, etc, pte, model = sys.argv[1:]
m = json.load(open(report))["memory"][0]
dump = json.loads(subprocess.run([etc, "inspect", pte, "--format", "json"], capture_output=True, text=True).stdout)
size = {"float32": 4, "int64": 8, "int32": 4, "float16": 2, "bfloat16": 2}
state = 0
for v in dump["plans"][0]["values"]:
    # State: a planned tensor with an initial value in the file, or a named one (zeros).
    if v.get("type") == "Tensor" and v.get("allocation") and (
            v.get("initial_state") or v.get("fully_qualified_name")):
        n = 1
        for s in v["sizes"]:
            n *= s
        state += n * size[v["dtype"]]
print(f"{model:<14} planned {m['planned_bytes']:>9} bytes, lower bound {m['lower_bound_bytes']:>9}, "
      f"state {state:>9} ({state / m['planned_bytes']:.0%} of the plan)")
PY
done
