// The CUDA delegate backend ("EtcCudaBackend"): reads the processed blob the exporter wrote
// (src/format/schema/etc_delegate.fbs: the subgraph as an execution plan, constants by
// named-data key, the planned workspace), uploads its constants to the target device once,
// and loads the plan with the CUDA kernels (cuda_ops.h) at init. Execute binds the call's
// tensors, which must already be device memory (a host pointer is rejected, never copied),
// and queues the kernels on the device's stream; it does not synchronise (copies to the host
// through the CUDA allocator do).
#pragma once

#include <memory>

#include "backends/cuda/runtime/cuda_context.h"
#include "runtime/backend.h"

namespace etc::cuda {

// `contexts` must outlive the backend and every handle it creates. With `graphs`, each
// handle runs plainly once for a set of tensor pointers and input sizes, then captures its
// kernels as a CUDA graph and replays it whenever the call's tensors are there again (a few
// such graphs stay cached, cuda_graph_cache.h); if a capture fails, the handle logs why and
// keeps running plainly. Captures and replays are counted per device (GraphCounts).
std::unique_ptr<rt::Backend> make_cuda_delegate_backend(DeviceContexts* contexts,
                                                        bool graphs = false);

}  // namespace etc::cuda
