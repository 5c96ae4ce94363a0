// make_cuda_runtime: the runtime environment of `etc run --device cuda`: the CPU kernels (host
// parts of a program), the et_copy kernels, the CUDA allocator and the CUDA delegate backend
// under "EtcCudaBackend", all sharing one set of per-device contexts (streams, cuBLAS).
#pragma once

#include <memory>

#include "runtime/runtime_env.h"

namespace etc::cuda {

struct CudaRuntimeOptions {
  // Capture each CUDA delegate's kernels as a CUDA graph (after one plain run, and again
  // whenever its tensors move) and replay it; a capture that fails falls back to plain runs.
  bool graphs = false;
};

// Fails with kDeviceUnavailable, saying what was found, when no CUDA device is visible (no
// driver, no GPU).
Result<std::unique_ptr<rt::OwnedRuntime>> make_cuda_runtime(CudaRuntimeOptions options = {});

// Waits for all work etc queued on the runtime's devices (for timing).
Status synchronize_devices(const rt::OwnedRuntime& runtime);

// How the runtime's CUDA delegates ran with graphs on (captures, replays, plain runs).
struct GraphCountsSummary {
  uint64_t captures = 0, replays = 0, plain = 0, failed = 0;
};
GraphCountsSummary graph_counts(const rt::OwnedRuntime& runtime);

}  // namespace etc::cuda
