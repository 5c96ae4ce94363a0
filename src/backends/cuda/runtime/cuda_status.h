// The one wrapper every CUDA runtime call goes through: a failure becomes a Status that
// names the call, the source file and line, and CUDA's error name and text.
#pragma once

#include <cuda_runtime_api.h>

#include "support/status.h"

namespace etc::cuda {

// Maps a CUDA error to a Status. Errors that mean "there is no usable GPU" (no driver, no
// device, driver too old, a device index that does not exist) become kDeviceUnavailable;
// out of memory becomes kDeviceUnavailable too, with the message saying so; anything else
// is an internal error. Clears the error from cudaGetLastError()'s slot (sticky errors, which
// break the context, stay).
Status status_from_cuda(cudaError_t err, const char* call, const char* file, int line);

// For teardown calls whose failure can only be logged (cudaFree, cudaStreamDestroy,
// cudaGraphExecDestroy...): logs a failure and clears the runtime's last-error slot, so that
// a later, unrelated launch is not blamed for it. Returns err == cudaSuccess.
bool teardown_ok(cudaError_t err, const char* call);

// The answer to "is `ptr` device memory?" from cudaPointerGetAttributes' result: only a
// clean answer counts. Success with device or managed memory: true; success with host or
// unregistered memory: false; any error (a sticky cudaErrorIllegalAddress after a kernel
// fault, say) is that error, named, never "not device memory".
Result<bool> device_memory_from_query(cudaError_t err, cudaMemoryType type, const char* file,
                                      int line);
// The same query's answer to "which device is `ptr` on?": the device index the query gave
// for device or managed memory (managed: the device it was allocated from), -1 for host or
// unregistered memory. An error as above.
Result<int> memory_device_from_query(cudaError_t err, cudaMemoryType type, int device,
                                     const char* file, int line);

}  // namespace etc::cuda

// ETC_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, n)): returns a located Status on failure.
#define ETC_CUDA_RETURN_IF_ERROR(call)                                                \
  do {                                                                                \
    cudaError_t etc_cuda_err_ = (call);                                               \
    if (etc_cuda_err_ != cudaSuccess)                                                 \
      return ::etc::cuda::status_from_cuda(etc_cuda_err_, #call, __FILE__, __LINE__); \
  } while (0)
