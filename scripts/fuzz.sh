#!/usr/bin/env bash
# Builds etc's libFuzzer targets with clang-14 (ASan + UBSan + coverage) and runs each for a
# bounded number of executions on seed corpora made from the repository's test files.
# Usage: scripts/fuzz.sh [RUNS]   (default 20000 per target; CI uses the default)
# The seed is fixed (FUZZ_SEED, default 1) so that CI runs are reproducible; set another
# FUZZ_SEED to explore.
# To fuzz longer: scripts/fuzz.sh 1000000, or run build-fuzz/fuzz/fuzz_pte build-fuzz/corpus/pte
# directly with -max_total_time=3600. A crash leaves crash-* files in build-fuzz/; turn each
# into a regression test (test/serialize, test/graph or test/runtime) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20000}
build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DETC_CUDA=OFF \
  -DETC_BUILD_TESTS=OFF -DETC_FUZZ=ON -DETC_SANITIZE=address,undefined,fuzzer-no-link >/dev/null
cmake --build "$build" --target etc fuzz_pte fuzz_graph_json fuzz_safetensors fuzz_npy fuzz_onnx -j "$(nproc)"

corpus="$build/corpus"
rm -rf "$corpus"
mkdir -p "$corpus"/{pte,graph_json,safetensors,npy,onnx}
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
cp test/serialize/regressions/*.pte "$corpus/pte/"
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
for t in pte graph_json safetensors npy onnx; do
  echo "fuzz_$t: $runs runs"
  if ! (cd "$build" && ASAN_OPTIONS=detect_leaks=1 "./fuzz/fuzz_$t" -runs="$runs" -seed="${FUZZ_SEED:-1}" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 "corpus/$t" >"fuzz_$t.log" 2>&1); then
    echo "FAIL: fuzz_$t found a problem; see $build/fuzz_$t.log and $build/crash-*"
    tail -30 "$build/fuzz_$t.log"
    status=1
  else
    grep -E "^Done [0-9]+ runs" "$build/fuzz_$t.log" || tail -1 "$build/fuzz_$t.log"
  fi
done
exit $status
