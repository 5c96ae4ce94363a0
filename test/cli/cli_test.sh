#!/usr/bin/env bash
# CLI contract checks: commands, output and exit codes (README.md, "CLI").
# Usage: cli_test.sh ETC SOURCE_DIR
set -u
etc=$1 src=$2
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME WANT_RC PATTERN CMD... : runs CMD, checks its exit code and that stdout+stderr
# match the extended regex PATTERN.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want ]]; then
    echo "FAIL: $name: exit code $rc, expected $want"; echo "$out" | head -20; failures=$((failures + 1)); return
  fi
  if ! grep -Eq -- "$pattern" <<<"$out"; then
    echo "FAIL: $name: output does not match /$pattern/"; echo "$out" | head -20; failures=$((failures + 1)); return
  fi
  echo "ok: $name"
}

expect "--version prints the version and CUDA status" 0 '^etc [0-9]+\.[0-9]+\.[0-9]+' "$etc" --version
expect "--version says whether CUDA is built in" 0 'CUDA support: (built in|not built)' "$etc" --version
expect "--version says whether oneDNN is built in" 0 'oneDNN: ([0-9]+\.[0-9]+\.[0-9]+ \(CPU convolutions|not built)' "$etc" --version
expect "no command is a usage error" 2 'Usage|validate' "$etc"
expect "an unknown command is a usage error" 2 'bogus' "$etc" bogus
expect "validate without a model is a usage error" 2 'MODEL is required' "$etc" validate
expect "an unknown flag is a usage error" 2 'no-such-flag' "$etc" validate --no-such-flag "$src/examples/mlp.json"
expect "validate prints a summary" 0 'valid etc.graph "mlp"' "$etc" validate "$src/examples/mlp.json"
expect "validate counts parameters" 0 'constants: +6 \(17,226 parameters, 68,904 bytes\)' "$etc" validate "$src/examples/mlp.json"
expect "validate lists ops with counts" 0 'aten\.linear\.default x2' "$etc" validate "$src/examples/mlp.json"
expect "a missing model file is exit 1 with the path" 1 "^etc: error: $tmp/none.json: cannot open file: No such file or directory$" \
  "$etc" validate "$tmp/none.json"
expect "a folder as model is exit 1" 1 "^etc: error: $tmp: not a regular file$" "$etc" validate "$tmp"
expect "ops lists every op with its schema" 0 '^aten\.convolution\.default\(Tensor input, Tensor weight, Tensor\? bias' "$etc" ops
# `etc ops` lists exactly the ATen entries of the op table (src/graph/ops.def), each once;
# compiler-inserted and importer-internal ops (namespaces other than aten) stay out.
"$etc" ops | sed 's/(.*//' | sort > "$tmp/ops-listed"
grep -o '^ETC_OP([A-Za-z0-9_]*, *"[^"(]*' "$src/src/graph/ops.def" | sed 's/.*"//' | grep -v '::' |
  sed 's/^/aten./; s/^\(aten\.[^.]*\)$/\1.default/' | sort > "$tmp/ops-declared"
if [[ -s "$tmp/ops-declared" ]] && cmp -s "$tmp/ops-listed" "$tmp/ops-declared" && [[ -z $(uniq -d "$tmp/ops-listed") ]]; then
  echo "ok: etc ops lists the $(wc -l < "$tmp/ops-listed") ATen ops of ops.def, each once"
else
  echo "FAIL: etc ops differs from the ATen entries of ops.def:"; diff "$tmp/ops-declared" "$tmp/ops-listed" | head
  failures=$((failures + 1))
fi

# export and inspect
ex="$src/examples"
expect "export writes a .pte" 0 "^wrote $tmp/mlp.pte \([0-9]+ bytes\)$" "$etc" export "$ex/mlp.json" -o "$tmp/mlp.pte" --report "$tmp/mlp.json"
expect "export summarises copies on stderr" 0 'copies per inference: 1 h2d, 1 d2h' "$etc" export "$ex/mlp.json" -o "$tmp/mlp2.pte"
if cmp -s "$tmp/mlp.pte" "$tmp/mlp2.pte"; then echo "ok: two exports are byte-identical"; else echo "FAIL: two exports differ"; failures=$((failures + 1)); fi
expect "inspect shows the CUDA delegate" 0 'EtcCudaBackend, segment [0-9]+ \([0-9]+ bytes\), target_device=cuda:0' "$etc" inspect "$tmp/mlp.pte"
expect "inspect shows buffers with devices" 0 '2: cuda:0, [0-9]+ bytes' "$etc" inspect "$tmp/mlp.pte"
expect "inspect --format json is JSON with devices" 0 '"device": "cuda:0"' "$etc" inspect --format json "$tmp/mlp.pte"
"$etc" inspect --format json "$tmp/mlp.pte" | python3 -m json.tool >/dev/null && echo "ok: inspect json parses" || { echo "FAIL: inspect json does not parse"; failures=$((failures + 1)); }
expect "inspect --format dot draws the delegate" 0 'digraph program' "$etc" inspect --format dot "$tmp/mlp.pte"
python3 - "$tmp/mlp.json" <<'PY' && echo "ok: the report has the documented keys" || { echo "FAIL: report keys"; failures=$((failures + 1)); }
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) >= {"partitions", "copies", "memory", "ops", "boundary"}, r.keys()
assert set(r["copies"]) >= {"h2d", "d2h", "bytes", "list"}
assert r["copies"]["h2d"] == 1 and r["copies"]["d2h"] == 1
for m in r["memory"]:
    assert set(m) >= {"device", "planned_bytes", "lower_bound_bytes"}
    assert m["planned_bytes"] >= m["lower_bound_bytes"]
PY
expect "--io-device device removes the IO copies" 0 'copies per inference: 0 h2d, 0 d2h, 0 bytes' "$etc" export "$ex/cnn.json" -o "$tmp/cnn.pte" --io-device device
expect "--target cpu delegates nothing" 0 'ops: 0 of 11 delegated in 0 partitions' "$etc" export "$ex/cnn.json" -o "$tmp/cnn_cpu.pte" --target cpu
if "$etc" inspect "$tmp/cnn_cpu.pte" | grep -q 'cuda'; then echo "FAIL: a CPU-only export mentions cuda"; failures=$((failures + 1)); else echo "ok: a CPU-only export has no device"; fi
expect "--target CUDA:1 is case-insensitive" 0 'target_device=cuda:1' sh -c "'$etc' export '$ex/mlp.json' -o '$tmp/c1.pte' --target CUDA:1 >/dev/null 2>&1 && '$etc' inspect '$tmp/c1.pte'"
expect "--print-ir-after all dumps the IR" 0 '// ----- IR after plan-memory -----' "$etc" export "$ex/mlp.json" -o "$tmp/x.pte" --print-ir-after all
expect "--time-passes prints a table" 0 'partition +[0-9.]+' "$etc" export "$ex/mlp.json" -o "$tmp/x.pte" --time-passes
expect "an unknown --target is a usage error" 2 "etc: error: --target: unknown device type 'tpu'" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --target tpu
expect "a device index over 127 is a usage error" 2 "out of range" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --target cuda:128
expect "a bad --io-device is a usage error" 2 "--io-device must be 'host' or 'device'" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --io-device gpu
expect "an unknown pass is a usage error" 2 "unknown pass 'nope'" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --passes dce,nope
# cse (in a --passes list): a program that computes exp(-x) twice and relu(x) twice runs
# each once, with the results of the program that runs all four (the same bits).
cat > "$tmp/repeat.json" <<'JSON'
{"format": "etc.graph", "version": 1, "name": "repeat",
 "inputs": [{"name": "x", "dtype": "float32", "shape": [4, 8]}], "constants": [],
 "nodes": [
  {"name": "n1", "op": "aten.neg.default", "args": {"self": "x"}, "outputs": ["n1"]},
  {"name": "e1", "op": "aten.exp.default", "args": {"self": "n1"}, "outputs": ["e1"]},
  {"name": "n2", "op": "aten.neg.default", "args": {"self": "x"}, "outputs": ["n2"]},
  {"name": "e2", "op": "aten.exp.default", "args": {"self": "n2"}, "outputs": ["e2"]},
  {"name": "r1", "op": "aten.relu.default", "args": {"self": "x"}, "outputs": ["r1"]},
  {"name": "r2", "op": "aten.relu.default", "args": {"self": "x"}, "outputs": ["r2"]},
  {"name": "a", "op": "aten.add.Tensor", "args": {"self": "e1", "other": "r1"}, "outputs": ["a"]},
  {"name": "b", "op": "aten.mul.Tensor", "args": {"self": "e2", "other": "r2"}, "outputs": ["b"]},
  {"name": "y", "op": "aten.sub.Tensor", "args": {"self": "a", "other": "b"}, "outputs": ["y"]}],
 "outputs": ["y"]}
JSON
"$etc" export "$tmp/repeat.json" -o "$tmp/nocse.pte" --target cpu >/dev/null 2>&1
"$etc" export "$tmp/repeat.json" -o "$tmp/cse.pte" --target cpu \
  --passes "dce,remove-noops,fold-constants,cse,fold-batch-norm,dce,partition,decompose-host-ops,fold-constants,dce,propagate-devices,plan-memory" >/dev/null 2>&1
"$etc" run "$tmp/cse.pte" --device cpu --seed 7 --output-dir "$tmp/cse_out" >/dev/null 2>&1
"$etc" run "$tmp/nocse.pte" --device cpu --seed 7 --output-dir "$tmp/nocse_out" >/dev/null 2>&1
kernels() { "$etc" inspect --format json "$1" | python3 -c 'import json, sys; print(sum(len(p["instructions"]) for p in json.load(sys.stdin)["plans"]))'; }
if [[ -s "$tmp/cse_out/output_0.npy" ]] && cmp -s "$tmp/cse_out/output_0.npy" "$tmp/nocse_out/output_0.npy" &&
   [[ $(kernels "$tmp/cse.pte") -eq $(( $(kernels "$tmp/nocse.pte") - 3 )) ]]; then
  echo "ok: cse runs a repeated computation once, with the same output"
else
  echo "FAIL: cse: instructions $(kernels "$tmp/cse.pte") against $(kernels "$tmp/nocse.pte"), outputs:"
  cmp "$tmp/cse_out/output_0.npy" "$tmp/nocse_out/output_0.npy"; failures=$((failures + 1))
fi
expect "an unknown excluded op is a usage error" 2 "--exclude-ops: unknown op 'aten.nope'" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --exclude-ops aten.nope
expect "--max-copies fails with the list of copies" 1 "needs 2 host<->device copies per inference, more than --max-copies 1" \
  "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --max-copies 1
expect "--max-copies lists each copy with its cause" 1 "h2d 'x' -> 'x@cuda:0' \(512 bytes\)" "$etc" export "$ex/mlp.json" -o "$tmp/t.pte" --max-copies 0
[[ -e "$tmp/t.pte" ]] && { echo "FAIL: a failed export left $tmp/t.pte"; failures=$((failures + 1)); } || echo "ok: failed exports leave no output file"
expect "export into a missing folder fails cleanly" 1 "cannot create output file" "$etc" export "$ex/mlp.json" -o "$tmp/no/such/dir/x.pte"
expect "a bad model does not export" 1 "unknown value 'z'" "$etc" export "$src/test/graph/bad/dangling_reference.json" -o "$tmp/bad.pte"
[[ -e "$tmp/bad.pte" ]] && { echo "FAIL: a bad model left an output"; failures=$((failures + 1)); } || echo "ok: no output for a bad model"
expect "inspect of a non-.pte file is exit 1" 1 "not a .pte file" "$etc" inspect "$ex/mlp.safetensors"
# Programs ExecuTorch wrote (made with ExecuTorch from PyPI, cached: test/executorch/fixtures.sh).
if fx=$("$src/test/executorch/fixtures.sh" 2>"$tmp/fx.err"); then
  expect "inspect reads ExecuTorch's add program" 0 'aten::add.out\(%0, %1, %3, %2, %2\)' "$etc" inspect "$fx/add.pte"
  expect "inspect resolves ExecuTorch's IntLists to their integers" 0 '%[0-9]+ IntList \[2,2\]' "$etc" inspect "$fx/conv.pte"
  expect "inspect reads ExecuTorch's inline-constant program" 0 'inline constant_buffer \(deprecated\): 3 entries' \
    "$etc" inspect "$fx/inline_constants.pte"
else
  echo "FAIL: ExecuTorch's programs could not be made: $(tail -3 "$tmp/fx.err")"
  failures=$((failures + 1))
fi

# etc run
expect "run on the CPU prints outputs with checksums" 0 'output 0 \(probs\): float32\[2, 10\] \[.*\] fnv1a64=[0-9a-f]{16}' \
  "$etc" run "$tmp/mlp.pte" --device cpu --seed 3
expect "run --verify passes on the CPU" 0 'verify: all outputs match the CPU reference' "$etc" run "$tmp/mlp.pte" --device cpu --verify
expect "run --device auto says what it chose" 0 'etc: --device auto: (.*running on the CPU|using cuda:0)' "$etc" run "$tmp/mlp.pte"
if ! "$etc" --version | grep -q '^CUDA device 0: '; then  # with a GPU: test/cuda/ covers it
  expect "run --device cuda without a usable GPU is exit 4" 4 'requested device cuda:0' "$etc" run "$tmp/mlp.pte" --device cuda
fi
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/prompt.npy', np.array([1, 2], np.int64))"
expect "generation on a program that is not a decoder is exit 1" 1 'need a decoder program: inputs \(token ids int64\[1, 1\]' \
  "$etc" run "$tmp/mlp.pte" --device cpu --prompt "$tmp/prompt.npy" --steps 2
expect "run --device cuda:9 is exit 4 too" 4 'requested device cuda:9' "$etc" run "$tmp/mlp.pte" --device cuda:9
expect "run --device tpu is a usage error" 2 "--device: unknown device type 'tpu'" "$etc" run "$tmp/mlp.pte" --device tpu
"$etc" run "$tmp/mlp.pte" --device cpu --seed 5 --output-dir "$tmp/run1" >/dev/null 2>&1
"$etc" run "$tmp/mlp.pte" --device cpu --seed 5 --output-dir "$tmp/run2" >/dev/null 2>&1
if [[ -f "$tmp/run1/output_0.npy" ]] && cmp -s "$tmp/run1/output_0.npy" "$tmp/run2/output_0.npy"; then
  echo "ok: seeded runs write identical output_0.npy"
else
  echo "FAIL: seeded runs differ or wrote nothing"; failures=$((failures + 1))
fi
/usr/bin/python3 -c "import numpy as np; np.save('$tmp/x.npy', np.zeros([2, 64], np.float32)); np.save('$tmp/bad.npy', np.zeros([3, 64], np.float32))"
expect "run --input by name" 0 'ran .* 1 input' "$etc" run "$tmp/mlp.pte" --device cpu --input "x=$tmp/x.npy"
expect "run --input by index" 0 'ran .* 1 input' "$etc" run "$tmp/mlp.pte" --device cpu --input "0=$tmp/x.npy"
expect "run --input with the wrong shape names the input and file" 1 "input 0 must be float32\[2, 64\], but .*bad.npy holds float32\[3, 64\]" \
  "$etc" run "$tmp/mlp.pte" --device cpu --input "0=$tmp/bad.npy"
expect "run --input with an unknown name lists the inputs" 2 "the program has no input named 'y' \(inputs: x\)" \
  "$etc" run "$tmp/mlp.pte" --device cpu --input "y=$tmp/x.npy"
expect "run --json is machine-readable" 0 '"compute_median"' "$etc" run "$tmp/mlp.pte" --device cpu --json --iterations 3
expect "run of a non-.pte is exit 1" 1 'not a .pte file' "$etc" run "$ex/mlp.safetensors" --device cpu
expect "run --device cpu runs a --io-device device program" 0 'output 0' "$etc" run "$tmp/cnn.pte" --device cpu --verify

# etc diff
expect "diff of a program with itself is equivalent" 0 '^equivalent$' "$etc" diff "$tmp/mlp.pte" "$tmp/mlp2.pte"
expect "diff names a device change" 1 'values\[1\]\.device: "cuda:0" -> "cuda:1"' "$etc" diff "$tmp/mlp.pte" "$tmp/c1.pte"
expect "diff of a non-.pte is exit 1 with the reason" 1 'not a .pte file' "$etc" diff "$tmp/mlp.pte" "$ex/mlp.json"

# ONNX models (a node test of Debian's libonnx-testdata; scripts/install-deps.sh installs it)
onnx=/usr/share/libonnx-testdata/data/node/test_conv_with_strides_padding/model.onnx
expect "validate reads an ONNX model" 0 'model.onnx: valid ONNX model' "$etc" validate "$onnx"
cp "$onnx" "$tmp/conv.model"
expect "validate names what the content is, whatever the extension" 0 'conv.model: valid ONNX model' "$etc" validate "$tmp/conv.model"
expect "validate reads a torch.export program" 0 'linear.pt2: valid torch.export program' "$etc" validate "$src/test/torch/programs/linear.pt2"
expect "validate of an ONNX model lists its IR ops" 0 'aten.convolution.default x1' "$etc" validate "$onnx"
expect "export of an ONNX model writes a .pte" 0 "^wrote $tmp/conv.pte" "$etc" export "$onnx" -o "$tmp/conv.pte"
expect "an exported ONNX model runs" 0 'output 0 \(y\): float32\[1, 1, 4, 3\]' "$etc" run "$tmp/conv.pte" --device cpu --verify
expect "--input-shape on an etc.graph model is a usage error" 2 'applies to ONNX and torch.export models' "$etc" validate "$ex/mlp.json" --input-shape x=1x2
expect "a malformed --input-shape is a usage error" 2 "must look like NAME=1x3x224x224" "$etc" export "$onnx" -o "$tmp/x.pte" --input-shape x1x2
expect "--input-shape naming no input is exit 1 with the inputs" 1 "names 'z', which is not an input of the model \(inputs: x, W\)" "$etc" validate "$onnx" --input-shape z=1x1x7x5
opt=/usr/share/libonnx-testdata/data/node/test_optional_has_element_empty/model.onnx
expect "--absent-input gives an ONNX optional input as absent" 0 "^wrote $tmp/opt.pte" "$etc" export "$opt" --target cpu --absent-input optional_input -o "$tmp/opt.pte"
expect "a program with the absent input runs without it" 0 '0 inputs, 1 output' "$etc" run "$tmp/opt.pte" --device cpu
expect "--absent-input naming a non-optional input is exit 1" 1 "names 'x', which is not an optional input of the model" "$etc" validate "$onnx" --absent-input x
expect "--absent-input on an etc.graph model is a usage error" 2 'applies to ONNX models' "$etc" validate "$ex/mlp.json" --absent-input x
head -c 100 "$onnx" >"$tmp/trunc.onnx"
expect "a truncated ONNX model is exit 1" 1 'not a valid ONNX model' "$etc" validate "$tmp/trunc.onnx"
expect "export of a truncated ONNX model is exit 1" 1 'not a valid ONNX model' "$etc" export "$tmp/trunc.onnx" -o "$tmp/onnx_fail.pte"
if [[ -e "$tmp/onnx_fail.pte" ]]; then echo "FAIL: a failed ONNX export wrote a file"; failures=$((failures + 1)); else echo "ok: a failed ONNX export writes no file"; fi
expect "ops --onnx lists the ONNX op types" 0 '^ConvTranspose$' "$etc" ops --onnx
expect "run --threads 1 runs single-threaded" 0 '"cpu_threads": 1' "$etc" run "$tmp/conv.pte" --device cpu --threads 1 --json
expect "run --threads -1 is a usage error" 2 'threads must be >= 1' "$etc" run "$tmp/conv.pte" --device cpu --threads -1
expect "ETC_MAX_ISA=portable runs the portable kernels" 0 '"cpu_gemm_kernel": "portable 4x8"' \
  env ETC_MAX_ISA=portable "$etc" run "$tmp/conv.pte" --device cpu --json
expect "ETC_MAX_ISA=avx2 caps the kernels at AVX2" 0 '"cpu_gemm_kernel": "(AVX2/FMA 6x16|portable 4x8)"' \
  env ETC_MAX_ISA=avx2 "$etc" run "$tmp/conv.pte" --device cpu --json
expect "--version names the GEMM kernel under the cap" 0 'CPU kernels: GEMM micro-kernel portable 4x8 \(\$ETC_MAX_ISA' \
  env ETC_MAX_ISA=portable "$etc" --version
expect "an unknown ETC_MAX_ISA is a usage error" 2 "^etc: error: \\\$ETC_MAX_ISA is 'avx1024': expected avx512, avx2 or portable$" \
  env ETC_MAX_ISA=avx1024 "$etc" run "$tmp/conv.pte" --device cpu
expect "run --profile prints the ops by time" 0 'profile \(one run, .* ms in instructions; ' "$etc" run "$tmp/conv.pte" --device cpu --profile
# conv.pte's convolution: [1, 1, 4, 3] out, weight [1, 1, 3, 3] (9 taps): 2 * 12 * 9 = 216 FLOP.
"$etc" export "$onnx" -o "$tmp/conv_cpu.pte" --target cpu >/dev/null 2>&1
expect "run --profile counts a convolution's FLOP and rate" 0 'matrix products: 2\.16e-07 GFLOP' "$etc" run "$tmp/conv_cpu.pte" --device cpu --profile
# --profile-runs: each row's time the median over the runs; its calls and FLOP those of one run.
expect "run --profile-runs takes medians of the runs" 0 'profile \(medians of 5 runs, [0-9.]+ ms in instructions; convolutions and matrix products: 2\.16e-07 GFLOP' \
  "$etc" run "$tmp/conv_cpu.pte" --device cpu --profile-shapes --profile-runs 5
expect "run --profile-runs rows count one run's calls" 0 '^ +[0-9.]+ ms +100\.0% +1 x  aten::convolution\.out \[1, 1, 7, 5\] \[1, 1, 3, 3\]' \
  "$etc" run "$tmp/conv_cpu.pte" --device cpu --profile-shapes --profile-runs 5
expect "run --profile-runs 0 is a usage error" 2 'profile-runs' "$etc" run "$tmp/conv_cpu.pte" --device cpu --profile --profile-runs 0

# An error never writes to stdout (stdout is for results, so scripts can rely on it).
out=$("$etc" validate "$tmp/none.json" 2>/dev/null)
if [[ -n "$out" ]]; then echo "FAIL: an error wrote to stdout: $out"; failures=$((failures + 1)); else echo "ok: errors go to stderr only"; fi


exit $((failures > 0))
