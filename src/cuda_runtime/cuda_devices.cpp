#include "cuda_runtime/cuda_devices.h"

#include <cuda_runtime_api.h>

#include "cuda_runtime/cuda_status.h"

namespace etc::cuda {

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice) return std::vector<DeviceInfo>{};
  if (err != cudaSuccess) return status_from_cuda(err, "cudaGetDeviceCount", __FILE__, __LINE__);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    ETC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    out.push_back(DeviceInfo{i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
  }
  return out;
}

std::string runtime_version_string() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10);
}

}  // namespace etc::cuda
