#!/usr/bin/env bash
# The device check's run of etc inside ExecuTorch's runtime on a GPU: etc_et_runner_etc_kernels
# (the wheel's libexecutorch.so, carried beside it; etc's CUDA allocator, EtcCudaBackend and CPU
# kernels registered, ETC_EXECUTORCH_DEVICE=cuda so that nothing falls back to host memory)
# runs the examples' --target cuda:0 exports, host and device IO, and every output must match
# `etc run --device cpu` (the CPU reference) within rtol 1e-3, atol 1e-4.
# Usage: plugin_gpu_test.sh ETC RUNNER SOURCE_DIR   (exit 77: the runner was not carried)
set -uo pipefail
etc=$1
runner=$2
src=$3
[[ -x $runner ]] || { echo "not run: $runner was not carried (no ExecuTorch wheel where it was built)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
export ETC_EXECUTORCH_DEVICE=cuda
for m in mlp cnn transformer_block; do
  for io in host device; do
    d="$tmp/$m-$io"
    mkdir -p "$d/in" "$d/ref" "$d/et"
    if ! "$etc" export "$src/examples/$m.json" -o "$d/p.pte" --target cuda:0 --io-device "$io" > /dev/null 2> "$d/err"; then
      fail "$m ($io IO): export: $(tail -2 "$d/err")"; continue
    fi
    "$etc" inspect "$d/p.pte" --format json | python3 "$src/test/architecture/write_inputs.py" "$d/in" 5 ||
      { fail "$m ($io IO): cannot write inputs"; continue; }
    mapfile -t ins < <(ls "$d/in"/input_*.npy | sort -V)
    args=()
    for i in "${!ins[@]}"; do args+=(--input "$i=${ins[$i]}"); done
    "$etc" run "$d/p.pte" --device cpu "${args[@]}" --output-dir "$d/ref" > /dev/null 2> "$d/err" ||
      { fail "$m ($io IO): etc run --device cpu: $(tail -2 "$d/err")"; continue; }
    if ! "$runner" "$d/p.pte" "$d/et" "${ins[@]}" 2> "$d/err"; then
      fail "$m ($io IO): $(grep -v ' I ' "$d/err" | tail -3)"; continue
    fi
    grep -q "etc registered (cuda)" "$d/err" || { fail "$m ($io IO): the plugin did not register on the GPU"; continue; }
    if python3 - "$d/ref" "$d/et" <<'PY'
# Plain Python (the device machine may lack NumPy): .npy files of float32/64 or int32/64.
import array, ast, glob, os, sys
def load(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[8:10], "little")
    head = ast.literal_eval(data[10:10 + n].decode())
    values = array.array({"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q"}[head["descr"]])
    values.frombytes(data[10 + n:])
    return tuple(head["shape"]), values
ref, got = sys.argv[1], sys.argv[2]
outs = sorted(glob.glob(os.path.join(ref, "output_*.npy")))
if not outs:
    sys.exit("no outputs")
for r in outs:
    (sa, a), (sb, b) = load(r), load(os.path.join(got, os.path.basename(r)))
    if sa != sb or any(abs(x - y) > 1e-4 + 1e-3 * abs(x) for x, y in zip(a, b)):
        sys.exit(f"{os.path.basename(r)}: differs from the CPU reference")
PY
    then
      echo "ok: $m ($io IO): ExecuTorch's runtime on the GPU through etc's plugin matches the CPU reference"
    else
      fail "$m ($io IO): outputs differ from the CPU reference"
    fi
  done
done
if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
