#!/usr/bin/env bash
# Real ONNX models (test/onnx/models.txt, from PyPI packages that ship them) through etc
# against ONNX Runtime (the onnxruntime package from PyPI): each model is exported for the CPU
# and for cuda:0, run with `etc run --device cpu` on the inputs ONNX Runtime ran, and every
# output is compared. Prints max abs / rel errors. The models and the reference environment
# are installed on first use and cached; if they cannot be had, the test fails.
#
#   test/onnx/models_test.sh ETC SOURCE_DIR
set -uo pipefail
etc=$1
src=$2
py=$("$src/scripts/python-env.sh") || { echo "FAIL: the Python reference environment could not be installed"; exit 1; }
cache=$("$src/scripts/fetch-models.sh") || { echo "FAIL: the models of test/onnx/models.txt could not be fetched"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# A text-like image for the detector (random noise holds no text: its output would be ~0):
# dark glyph-sized blocks on white, normalised with ImageNet mean/std.
make_det_input() {
  "$py" - "$1" "$2" <<'PY'
import sys, numpy as np
out, shape = sys.argv[1], [int(d) for d in sys.argv[2].split("x")]
n, c, h, w = shape
rng = np.random.default_rng(7)
img = np.ones((h, w, 3), np.float32)
for row in range(12, h - 24, 32):
    x = 8
    while x < w - 24:
        gw = int(rng.integers(6, 14))
        img[row:row + 18, x:x + gw] = rng.uniform(0.0, 0.2)
        x += gw + int(rng.integers(3, 8))
mean = np.array([0.485, 0.456, 0.406], np.float32)
std = np.array([0.229, 0.224, 0.225], np.float32)
x = ((img - mean) / std).transpose(2, 0, 1)[None].repeat(n, 0).astype(np.float32)
np.save(out, x)
PY
}

compare() {  # ref got label -> prints errors; fails beyond tolerance
  "$py" - "$1" "$2" "$3" <<'PY'
import sys, numpy as np
ref, got, label = np.load(sys.argv[1]), np.load(sys.argv[2]), sys.argv[3]
if ref.shape != got.shape or ref.dtype != got.dtype:
    print(f"FAIL: {label}: etc gives {got.dtype}{list(got.shape)}, ONNX Runtime {ref.dtype}{list(ref.shape)}")
    sys.exit(1)
err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
rel = (err / np.maximum(np.abs(ref.astype(np.float64)), 1e-3)).max()
ok = np.all(err <= 1e-4 + 1e-3 * np.abs(ref))
print(f"{'ok' if ok else 'FAIL'}: {label}: max abs error {err.max():.3g}, max rel error (|ref| >= 1e-3) {rel:.3g}, "
      f"max |ref| {np.abs(ref).max():.3g}")
sys.exit(0 if ok else 1)
PY
}

while read -r id pkg path sha shapes; do
  [[ -z "$id" || "$id" == \#* ]] && continue
  model="$cache/$id.onnx"
  args=()
  ort_args=()
  run_inputs=()
  ort_inputs=()
  for s in $shapes; do
    name=${s%=*}
    args+=(--input-shape "$s")
    ort_args+=(--input-shape "$s")
    if [[ "$id" == ppocr_det ]]; then
      make_det_input "$tmp/$id.det_input.npy" "${s##*=}"
      ort_inputs+=(--input "$name=$tmp/$id.det_input.npy")
      ort_args=()
      run_inputs+=(--input "$name=$tmp/$id.det_input.npy")
    else
      safe=$(printf '%s' "$name" | tr -c 'A-Za-z0-9._-' '_')
      run_inputs+=(--input "$name=$tmp/ort_$id/input_$safe.npy")
    fi
  done
  if ! "$py" "$src/test/onnx/ort_run.py" "$model" "${ort_args[@]}" "${ort_inputs[@]}" --output-dir "$tmp/ort_$id" \
    --iterations 1 >/dev/null; then
    echo "FAIL: $id: ONNX Runtime did not run the model"; failures=$((failures + 1)); continue
  fi
  for target in cpu cuda:0; do
    pte="$tmp/$id.${target%%:*}.pte"
    if ! "$etc" export "$model" "${args[@]}" --target "$target" -o "$pte" >"$tmp/export.log" 2>&1; then
      echo "FAIL: $id: etc export --target $target:"; cat "$tmp/export.log"; failures=$((failures + 1)); continue
    fi
    out="$tmp/etc_${id}_${target%%:*}"
    if ! "$etc" run "$pte" --device cpu "${run_inputs[@]}" --output-dir "$out" >"$tmp/run.log" 2>&1; then
      echo "FAIL: $id: etc run ($target export):"; cat "$tmp/run.log"; failures=$((failures + 1)); continue
    fi
    for ref in "$tmp/ort_$id"/output_*.npy; do
      compare "$ref" "$out/$(basename "$ref")" "$id ($target export) $(basename "$ref" .npy)" || failures=$((failures + 1))
    done
  done
done <"$src/test/onnx/models.txt"

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all models match ONNX Runtime"
