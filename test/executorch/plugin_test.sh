#!/usr/bin/env bash
# etc inside ExecuTorch's runtime: etc_et_runner (ExecuTorch's Program::load and Method from
# the wheel's libexecutorch.so, etc's allocator and EtcCudaBackend registered through
# ExecuTorch's registries, ExecuTorch's kernels for the host ops) runs etc's --target cuda:0
# exports. Without a GPU the CUDA buffers are host memory and the delegate runs on etc's CPU
# reference, so every output must be byte-identical to `etc run --device cpu`; the PyTorch
# models are also checked against PyTorch eager, and two decoders (one with int4 weight-only
# layers) generate PyTorch's ids with their KV caches in the (host-backed) CUDA memory
# ExecuTorch planned. A corrupt delegate is a clean
# error.
# With ETC_KERNELS_RUNNER (etc_et_runner_etc_kernels: the same runner with etc's CPU kernels
# as its kernel library, the et_copy copies among them), each program runs there too, with
# the same outputs.
# Usage: plugin_test.sh ETC RUNNER SOURCE_DIR TORCH_FIXTURES_DIR DECODER_FIXTURES_DIR
#        [ETC_KERNELS_RUNNER]
set -uo pipefail
etc=$1
runner=$2
src=$3
fixtures=$4
decoders=$5
etc_kernels_runner=${6:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
py=$("$src/scripts/python-env.sh") || { echo "FAIL: no Python environment"; exit 1; }

# run_case NAME MODEL EXPORT_FLAGS INPUT_DIR [EXPECTED_DIR]: export, run both ways, compare.
run_case() {
  local name=$1 model=$2 flags=$3 in_dir=$4 expected=${5:-}
  local d="$tmp/$name"
  mkdir -p "$d/etc" "$d/et"
  # shellcheck disable=SC2086
  if ! "$etc" export "$model" -o "$d/p.pte" $flags > /dev/null 2> "$d/export.err"; then
    fail "$name: export: $(cat "$d/export.err")"; return
  fi
  if [[ -z $in_dir ]]; then
    in_dir="$d/in"; mkdir -p "$in_dir"
    "$etc" inspect "$d/p.pte" --format json | python3 "$src/test/architecture/write_inputs.py" "$in_dir" 11 ||
      { fail "$name: cannot write inputs"; return; }
  fi
  mapfile -t inputs < <(ls "$in_dir"/input_*.npy | sort -V)
  local args=() i
  for i in "${!inputs[@]}"; do args+=(--input "$i=${inputs[$i]}"); done
  if ! "$etc" run "$d/p.pte" --device cpu "${args[@]}" --output-dir "$d/etc" > /dev/null 2> "$d/run.err"; then
    fail "$name: etc run: $(cat "$d/run.err")"; return
  fi
  if ! "$runner" "$d/p.pte" "$d/et" "${inputs[@]}" 2> "$d/runner.err"; then
    fail "$name: etc_et_runner: $(grep -v ' I ' "$d/runner.err" | tail -3)"; return
  fi
  grep -q "etc registered (host)" "$d/runner.err" || fail "$name: the plugin did not register in host mode"
  local n=0 out
  for out in "$d"/etc/output_*.npy; do
    cmp -s "$out" "$d/et/$(basename "$out")" || fail "$name: $(basename "$out") differs from etc run"
    n=$((n + 1))
  done
  if [[ -n $etc_kernels_runner ]]; then
    mkdir -p "$d/etk"
    if ! "$etc_kernels_runner" "$d/p.pte" "$d/etk" "${inputs[@]}" 2> "$d/etk.err"; then
      fail "$name: on etc's kernels: $(grep -v ' I ' "$d/etk.err" | tail -3)"
    else
      for out in "$d"/etc/output_*.npy; do
        cmp -s "$out" "$d/etk/$(basename "$out")" ||
          fail "$name: on etc's kernels, $(basename "$out") differs from etc run"
      done
    fi
  fi
  [[ $n -gt 0 ]] || fail "$name: no outputs"
  if [[ -n $expected ]]; then
    "$py" - "$d/et" "$expected" <<'PY' || fail "$name: ExecuTorch's outputs differ from PyTorch eager"
import glob, os, sys
import numpy as np
got_dir, want_dir = sys.argv[1], sys.argv[2]
for want in sorted(glob.glob(os.path.join(want_dir, "expected_*.npy"))):
    i = os.path.basename(want)[len("expected_"):-len(".npy")]
    g, w = np.load(os.path.join(got_dir, "output_%s.npy" % i)), np.load(want)
    if g.shape != w.shape or not np.allclose(g, w, rtol=1e-3, atol=1e-4):
        sys.exit("output %s: max |diff| %s" % (i, np.max(np.abs(g - w)) if g.shape == w.shape else "shape"))
PY
  fi
  echo "ok: $name: ${#inputs[@]} input(s), $n output(s) byte-identical to etc run${etc_kernels_runner:+ (also with the etc kernel library)}${expected:+, and within 1e-3 of PyTorch eager}"
}

for m in mlp cnn transformer_block; do
  run_case "$m" "$src/examples/$m.json" "--target cuda:0" ""
  run_case "$m-device-io" "$src/examples/$m.json" "--target cuda:0 --io-device device" ""
done
for m in resnet18 minilm; do
  if [[ -f $fixtures/$m/model.pt2 ]]; then
    run_case "$m" "$fixtures/$m/model.pt2" "--target cuda:0" "$fixtures/$m" "$fixtures/$m"
  else
    fail "$m: fixture missing at $fixtures/$m"
  fi
done

# Dynamic shapes through the delegate: linear_dynamic's batch is a symbol (at most 64), and
# one method is called with 4, 64, 1 and 17 rows in turn; the delegate's dynamic-bound output
# shrinks and grows back within the bound the program planned. Each call's output must be
# byte-identical to `etc run` on the same input.
d="$tmp/dynamic"
mkdir -p "$d/et" "$d/etk"
if [[ ! -f $fixtures/linear_dynamic/model.pt2 ]]; then
  fail "linear_dynamic: fixture missing at $fixtures/linear_dynamic"
elif ! "$etc" export "$fixtures/linear_dynamic/model.pt2" -o "$d/p.pte" --target cuda:0 > /dev/null 2> "$d/export.err"; then
  fail "linear_dynamic: export: $(cat "$d/export.err")"
else
  "$py" - "$d" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
for n in (4, 64, 1, 17):
    np.save(f"{sys.argv[1]}/in{n}.npy", rng.standard_normal((n, 32)).astype(np.float32))
PY
  if ! "$runner" "$d/p.pte" "$d/et" "$d/in4.npy" -- "$d/in64.npy" -- "$d/in1.npy" -- "$d/in17.npy" 2> "$d/err"; then
    fail "linear_dynamic: etc_et_runner: $(grep -v ' I ' "$d/err" | tail -3)"
  else
    k=0 ok=1
    for n in 4 64 1 17; do
      k=$((k + 1))
      "$etc" run "$d/p.pte" --device cpu --input "0=$d/in$n.npy" --output-dir "$d/etc$k" > /dev/null 2>&1 ||
        { fail "linear_dynamic: etc run with $n rows"; ok=0; continue; }
      cmp -s "$d/etc$k/output_0.npy" "$d/et/call_$k/output_0.npy" ||
        { fail "linear_dynamic: call $k ($n rows) differs from etc run"; ok=0; }
    done
    if [[ -n $etc_kernels_runner ]]; then
      if ! "$etc_kernels_runner" "$d/p.pte" "$d/etk" "$d/in4.npy" -- "$d/in64.npy" -- "$d/in1.npy" -- "$d/in17.npy" 2> "$d/etk.err"; then
        fail "linear_dynamic: on etc's kernels: $(grep -v ' I ' "$d/etk.err" | tail -3)"; ok=0
      else
        for k in 1 2 3 4; do
          cmp -s "$d/etc$k/output_0.npy" "$d/etk/call_$k/output_0.npy" ||
            { fail "linear_dynamic: on etc's kernels, call $k differs from etc run"; ok=0; }
        done
      fi
    fi
    [[ $ok -eq 1 ]] && echo "ok: linear_dynamic: one method called with 4, 64, 1 and 17 rows, each byte-identical to etc run"
  fi
fi

# A decoder over several calls: its state (the KV cache) stays in the method's planned CUDA
# memory from call to call; the ids must be PyTorch eager's and etc run's. The int4 one
# (torchao's weight-only layers, scripts/make-quantized-decoder-fixtures.py) runs its linear
# layers as etc::weight_only_linear inside the delegate.
quantized=$(bash "$src/test/torch/fixtures.sh" "" make-quantized-decoder-fixtures.py) ||
  fail "the quantized decoder fixture could not be made"
for m in llama_decoder llama_decoder_int4; do
  f="$decoders/$m"
  [[ $m == llama_decoder_int4 ]] && f="$quantized/$m"
  d="$tmp/gen-$m"
  mkdir -p "$d/et"
  if [[ ! -f $f/model.pt2 ]]; then fail "$m: fixture missing at $f"; continue; fi
  steps=$("$py" -c "import json, sys; print(json.load(open(sys.argv[1]))['steps'])" "$f/meta.json")
  if ! "$etc" export "$f/model.pt2" -o "$d/p.pte" --target cuda:0 > /dev/null 2> "$d/export.err"; then
    fail "$m: export: $(cat "$d/export.err")"; continue
  fi
  if ! "$runner" "$d/p.pte" "$d/et" --generate "$f/prompt.npy" "$steps" > "$d/out" 2> "$d/err"; then
    fail "$m: etc_et_runner --generate: $(grep -v ' I ' "$d/err" | tail -3)"; continue
  fi
  if "$py" - "$d/et/ids.npy" "$f/expected_ids.npy" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(0 if got.shape == want.shape and (got == want).all() else "ids %s, PyTorch %s" % (got.tolist(), want.tolist()))
PY
  then
    echo "ok: $m: ExecuTorch's runtime generates PyTorch's $steps ids ($(cat "$d/out"))"
  else
    fail "$m: the generated ids differ from PyTorch eager's"
  fi
  if [[ -n $etc_kernels_runner ]]; then
    mkdir -p "$d/etk"
    if ! "$etc_kernels_runner" "$d/p.pte" "$d/etk" --generate "$f/prompt.npy" "$steps" > /dev/null 2> "$d/etk.err"; then
      fail "$m: generating with the etc kernel library: $(grep -v ' I ' "$d/etk.err" | tail -3)"
    elif ! cmp -s "$d/et/ids.npy" "$d/etk/ids.npy"; then
      fail "$m: the etc kernel library generates other ids"
    else
      echo "ok: $m: the same ids with the etc kernel library"
    fi
  fi
done

# A corrupt delegate: the bytes after etc's delegate identifier (ECD1) zeroed. ExecuTorch's
# runtime must report etc's error and stop, never crash.
d="$tmp/corrupt"
mkdir -p "$d"
"$etc" export "$src/examples/mlp.json" -o "$d/p.pte" --target cuda:0 > /dev/null 2>&1
"$py" - "$d/p.pte" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
at = data.find(b"ECD1")
assert at > 0, "no delegate identifier"
data[at + 4:at + 68] = bytes(64)
open(sys.argv[1], "wb").write(data)
PY
mkdir -p "$d/in"
"$etc" inspect "$tmp/mlp/p.pte" --format json | python3 "$src/test/architecture/write_inputs.py" "$d/in" 3
"$runner" "$d/p.pte" "$d" "$d/in/input_0.npy" > /dev/null 2> "$d/err"
rc=$?
if [[ $rc -ne 1 ]]; then
  fail "corrupt delegate: exit $rc, expected 1: $(tail -3 "$d/err")"
elif ! grep -q "etc: reading the delegate" "$d/err"; then
  fail "corrupt delegate: etc's error is not in ExecuTorch's log: $(tail -3 "$d/err")"
else
  echo "ok: a corrupt delegate is refused at load with etc's error: $(grep -o 'etc: reading the delegate.*' "$d/err" | head -1 | cut -c1-160)"
fi

if [[ $failures -ne 0 ]]; then echo "$failures failure(s)"; exit 1; fi
