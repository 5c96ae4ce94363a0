#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, the binaries the GPU check needs, into build-device/
# (git-ignored; carry it to the device machine). Release, CUDA on, sm_90 (H100/H200), libstdc++
# and libgcc linked statically so the binaries need only glibc and the NVIDIA driver there.
#   build-device/bin/etc                the CLI (CUDA runtime, cuBLAS loaded at run time)
#   build-device/bin/cuda_runtime_test  allocator / delegate plumbing ([gpu], [nogpu])
#   build-device/bin/cuda_kernels       the GPU kernel benchmark
#   build-device/bin/etc_et_runner_etc_kernels, build-device/lib/libexecutorch.so
#                                       etc inside ExecuTorch's runtime (when the wheel is found)
#   build-device/onnx/*.pte             the ONNX models of test/onnx/models.txt, for cuda:0
#   build-device/BUILD_INFO             commit, date, flags
# The object tree stays in build-device-tree/. Fails if build-device/ exceeds 50 MiB.
# Usage: scripts/build-for-device.sh   (env JOBS, default 1; ARCHS, default 90)
set -euo pipefail
cd "$(dirname "$0")/.."
tree=build-device-tree out=build-device
nice cmake -S . -B "$tree" -G Ninja -DCMAKE_BUILD_TYPE=Release -DETC_CUDA=ON -DETC_ONEDNN=OFF \
  -DCMAKE_CUDA_ARCHITECTURES="${ARCHS:-90}" \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
nice cmake --build "$tree" -j"${JOBS:-1}" --target etc cuda_runtime_test cuda_kernels
rm -rf "$out"
mkdir -p "$out/bin"
cp "$tree/apps/etc/etc" "$tree/test/cuda/cuda_runtime_test" "$tree/bench/cuda_kernels" "$out/bin/"
# etc inside ExecuTorch's runtime, when the wheel was found: the runner with etc's kernels
# and the wheel's libexecutorch.so it needs (the device machine has no ExecuTorch).
if grep -q '^etc_et_runner_etc_kernels:' <(nice cmake --build "$tree" --target help 2>/dev/null); then
  nice cmake --build "$tree" -j"${JOBS:-1}" --target etc_et_runner_etc_kernels
  cp "$tree/src/executorch/etc_et_runner_etc_kernels" "$out/bin/"
  mkdir -p "$out/lib"
  lib=$(ldd "$out/bin/etc_et_runner_etc_kernels" | awk '/libexecutorch.so/ {print $3}')
  [[ -f $lib ]] && cp "$lib" "$out/lib/"
fi
strip "$out"/bin/*
# The real ONNX models (test/onnx/models.txt), exported here for cuda:0 so the GPU check can run
# them with --verify (the device machine reaches no registry).
if cache=$(scripts/fetch-models.sh 2>/dev/null); then
  mkdir -p "$out/onnx"
  while read -r id _pkg _path _sha shapes; do
    [[ -z "$id" || "$id" == \#* ]] && continue
    args=()
    for s in $shapes; do args+=(--input-shape "$s"); done
    "$out/bin/etc" export "$cache/$id.onnx" "${args[@]}" -o "$out/onnx/$id.pte" >/dev/null 2>&1 ||
      echo "build-for-device: exporting $id failed" >&2
  done <test/onnx/models.txt
else
  echo "build-for-device: the models could not be fetched (scripts/fetch-models.sh); ONNX models not carried" >&2
fi
# The decoders (scripts/export-decoders.sh), for test/torch/cuda_decoders_test.sh: KV caches
# on the GPU, a dynamic-bound prompt, int4 weight-only layers, PyTorch's ids. The static
# Llama-style decoder (8 MB, the dynamic one's static twin) is left out to keep the carry small.
if ! scripts/export-decoders.sh "$out/bin/etc" "$out/decoders" llama_decoder_dynamic whisper_step \
    llama_decoder_int4 \
    2>/dev/null; then
  rm -rf "$out/decoders"
  echo "build-for-device: the decoders could not be exported (scripts/export-decoders.sh); not carried" >&2
fi
{
  echo "commit: $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m), CUDA architectures ${ARCHS:-90}"
  echo "glibc needed: $(objdump -T "$out"/bin/* | grep -Eo 'GLIBC_[0-9.]+' | sort -Vu | tail -1)"
} >"$out/BUILD_INFO"
cat "$out/BUILD_INFO"
size_kib=$(du -sk "$out" | cut -f1)
if ((size_kib > 50 * 1024)) && [[ -f $out/bin/etc_et_runner_etc_kernels ]]; then
  # The ExecuTorch runner is the first thing to go when the carry is full.
  rm -rf "$out/bin/etc_et_runner_etc_kernels" "$out/lib"
  echo "build-for-device: over 50 MiB with etc_et_runner_etc_kernels; left out (its GPU check reports not run)" >&2
  size_kib=$(du -sk "$out" | cut -f1)
fi
echo "build-device: $((size_kib / 1024)) MiB"
if ((size_kib > 50 * 1024)); then
  echo "build-for-device: $out is over 50 MiB; it cannot be carried" >&2
  exit 1
fi
