#include "backends/cuda/runtime/cuda_status.h"

#include <spdlog/spdlog.h>

#include <string>

namespace etc::cuda {

Status status_from_cuda(cudaError_t err, const char* call, const char* file, int line) {
  std::string where = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  // The error is reported now: clear it from the runtime's last-error slot, so that a later
  // cudaGetLastError() after a kernel launch does not report it again (a failed, handled
  // cudaMalloc would otherwise fail the next launch).
  (void)cudaGetLastError();
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return Status(ErrorCode::kDeviceUnavailable, where);
    case cudaErrorMemoryAllocation:
      return Status(ErrorCode::kDeviceUnavailable, "out of device memory: " + where);
    default:
      return internal_error(where);
  }
}

bool teardown_ok(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return true;
  spdlog::warn("{} failed during teardown: {} ({})", call, cudaGetErrorName(err),
               cudaGetErrorString(err));
  (void)cudaGetLastError();
  return false;
}

Result<bool> device_memory_from_query(cudaError_t err, cudaMemoryType type, const char* file,
                                      int line) {
  if (err != cudaSuccess) {
    return std::move(status_from_cuda(err, "cudaPointerGetAttributes", file, line))
        .add_context("while checking whether a pointer is device memory");
  }
  return type == cudaMemoryTypeDevice || type == cudaMemoryTypeManaged;
}

Result<int> memory_device_from_query(cudaError_t err, cudaMemoryType type, int device,
                                     const char* file, int line) {
  ETC_ASSIGN_OR_RETURN(bool on_device, device_memory_from_query(err, type, file, line));
  return on_device ? device : -1;
}

}  // namespace etc::cuda
