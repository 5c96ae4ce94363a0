// The CUDA delegate's kernels under the IR op names of the CUDA capability table
// (src/backends/cuda/cuda_capability.cpp): "aten::add.Tensor", "aten::linear.default", ... Each
// checks its arguments on the host exactly as the CPU reference kernel does (the same
// check_args schema), then queues its work on the stream of the DeviceContext that the
// KernelContext carries (backend_state). Tensors are device pointers; nothing is copied to or
// from the host and nothing synchronises.
#pragma once

#include "runtime/kernel.h"

namespace etc::cuda {

// Registers every CUDA kernel.
Status register_cuda_kernels(rt::OperatorRegistry& registry);

}  // namespace etc::cuda
