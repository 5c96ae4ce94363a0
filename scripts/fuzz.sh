#!/usr/bin/env bash
# Builds etc's libFuzzer targets with clang-14 (ASan + UBSan + coverage) and runs each target
# twice:
#  1. regression: RUNS executions (default 20000) with a fixed seed (FUZZ_SEED, default 1) on
#     seed corpora made from the repository's test files — reproducible;
#  2. exploration: FUZZ_SECONDS (default 60; 0 skips it) with a fresh seed, on a corpus kept
#     in the cache (${ETC_CACHE_DIR:-~/.cache/etc}/fuzz-corpus/TARGET) so coverage grows from
#     run to run. A finding fails, and its input is printed (base64) in the log.
# Usage: scripts/fuzz.sh [RUNS]   (CI: make fuzz, the defaults; campaigns: make fuzz-long)
# To fuzz longer: scripts/fuzz.sh 1000000, or run build-fuzz/fuzz/fuzz_pte build-fuzz/corpus/pte
# directly with -max_total_time=3600. A crash leaves crash-* files in build-fuzz/; turn each
# into a regression test (test/format, test/graph or test/runtime) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20000}
build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETC_CUDA=OFF \
  -DETC_BUILD_TESTS=OFF -DETC_FUZZ=ON -DETC_SANITIZE=address,undefined,fuzzer-no-link >/dev/null
cmake --build "$build" --target etc fuzz_pte fuzz_graph_json fuzz_safetensors fuzz_npy fuzz_onnx fuzz_pt2 fuzz_torch_pickle -j "$(nproc)"

corpus="$build/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"/{pte,graph_json,safetensors,npy,onnx,pt2,torch_pickle}
# ONNX: a spread of ONNX's node tests (libonnx-testdata) with static shapes.
for t in conv_with_strides_padding gemm_all_attributes reshape_reordered_all_dims slice resize_upsample_scales_nearest \
         batchnorm_example maxpool_2d_pads softmax_axis_1 matmul_3d concat_2d_axis_0 gather_0 split_equal_parts_1d; do
  f=/usr/share/libonnx-testdata/data/node/test_$t/model.onnx
  [[ -f "$f" ]] && cp "$f" "$corpus/onnx/$t.onnx"
done
cp examples/*.json test/graph/bad/*.json test/golden/models/*.json "$corpus/graph_json/"
cp examples/*.safetensors test/graph/bad/*.safetensors "$corpus/safetensors/"
# Programs ExecuTorch wrote (with ExecuTorch from PyPI, cached): IntLists, inline constants.
fx=$(test/executorch/fixtures.sh) || { echo "fuzz: ExecuTorch's programs could not be made" >&2; exit 1; }
cp "$fx"/*.pte "$corpus/pte/"
cp test/format/regressions/*.pte "$corpus/pte/"
cp test/onnx/regressions/*.onnx "$corpus/onnx/"
# torch.export archives PyTorch wrote (test/torch/programs), one also deflated.
cp test/torch/programs/*.pt2 "$corpus/pt2/"
ls test/torch/regressions/*.pt2 >/dev/null 2>&1 && cp test/torch/regressions/*.pt2 "$corpus/pt2/"
/usr/bin/python3 - test/torch/programs/linear.pt2 "$corpus/pt2/linear_deflated.pt2" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as dst:
    for info in src.infolist():
        dst.writestr(info.filename, src.read(info.filename))
PY
# The pickles of torchao's Int8Tensor weights (the torch.save archive inside the .pt2):
# weight-only, and with the records describing dynamic activation quantization.
for name in int8wo w8a8; do
/usr/bin/python3 - "test/torch/programs/linear_$name.pt2" "$corpus/torch_pickle/$name.pkl" "linear_$name" <<'PY'
import io, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as outer:
    inner = zipfile.ZipFile(io.BytesIO(outer.read(sys.argv[3] + "/data/weights/weight_0")))
    open(sys.argv[2], "wb").write(inner.read("archive/data.pkl"))
PY
done
for m in mlp cnn; do
  "$build/apps/etc/etc" export "examples/$m.json" -o "$corpus/pte/$m.pte" >/dev/null 2>&1
  "$build/apps/etc/etc" export "examples/$m.json" -o "$corpus/pte/${m}_cpu.pte" --target cpu >/dev/null 2>&1
done
/usr/bin/python3 - "$corpus/npy" <<'PY'
import sys
import numpy as np
for i, (dt, shape) in enumerate([(np.float32, (2, 3)), (np.int64, (4,)), (np.float16, ()), (np.bool_, (2, 2))]):
    np.save(f"{sys.argv[1]}/seed{i}.npy", np.zeros(shape, dt))
PY

status=0
report_finding() {  # report_finding TARGET LOG: the log's tail and each crash input in base64
  echo "FAIL: fuzz_$1 found a problem; see $build/fuzz_$1*.log"
  # The sanitizer's report (its first lines and frames), then how libFuzzer ended.
  grep -E -A24 '^==[0-9]+==ERROR|runtime error:' "$2" | head -40
  tail -4 "$2"
  for f in $(grep -o "Test unit written to [^ ]*" "$2" | awk '{print $NF}'); do
    [[ -f "$f" ]] && echo "input $f (base64): $(base64 -w0 "$f")"
  done
}
targets=(pte graph_json safetensors npy onnx pt2 torch_pickle)
for t in "${targets[@]}"; do
  echo "fuzz_$t: $runs runs, seed ${FUZZ_SEED:-1}"
  if ! (cd "$build" && ASAN_OPTIONS=detect_leaks=1 "./fuzz/fuzz_$t" -runs="$runs" -seed="${FUZZ_SEED:-1}" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$PWD/fuzz_$t-" "corpus/$t" >"fuzz_$t.log" 2>&1); then
    report_finding "$t" "$build/fuzz_$t.log"
    status=1
  else
    grep -E "^Done [0-9]+ runs" "$build/fuzz_$t.log" || tail -1 "$build/fuzz_$t.log"
  fi
done

seconds=${FUZZ_SECONDS:-60}
if [[ "$seconds" -gt 0 ]]; then
  kept="${ETC_CACHE_DIR:-$HOME/.cache/etc}/fuzz-corpus"
  for t in "${targets[@]}"; do
    mkdir -p "$kept/$t"
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
    before=$(find "$kept/$t" -type f | wc -l)
    echo "fuzz_$t: ${seconds} s, fresh seed $seed, kept corpus $kept/$t ($before inputs)"
    # New inputs go to the first folder (the kept corpus); the seed corpus is read too.
    if ! (cd "$build" && ASAN_OPTIONS=detect_leaks=1 "./fuzz/fuzz_$t" -max_total_time="$seconds" -seed="$seed" \
          -max_len=65536 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$PWD/fuzz_$t-" \
          "$kept/$t" "corpus/$t" >"fuzz_$t.explore.log" 2>&1); then
      report_finding "$t" "$build/fuzz_$t.explore.log"
      status=1
    else
      echo "  $(grep -E "^Done [0-9]+ runs" "$build/fuzz_$t.explore.log" || tail -1 "$build/fuzz_$t.explore.log");" \
           "$(grep -oE "cov: [0-9]+ ft: [0-9]+" "$build/fuzz_$t.explore.log" | tail -1);" \
           "corpus now $(find "$kept/$t" -type f | wc -l) inputs"
    fi
  done
fi
exit $status
