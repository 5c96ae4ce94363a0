#include "backends/cuda/runtime/cuda_devices.h"

#include <cuda_runtime_api.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>

#include "backends/cuda/runtime/cuda_kernels.h"
#include "backends/cuda/runtime/cuda_status.h"

namespace etc::cuda {

std::string no_device_message(cudaError_t err) {
  const std::string name = std::string(" (") + cudaGetErrorName(err) + ")";
  switch (err) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver, or one too old for this etc's CUDA " + runtime_version_string() +
             " runtime" + name + ": install or update the NVIDIA driver to run on a GPU";
    case cudaErrorNoDevice:
      return "the NVIDIA driver reports no CUDA GPU" + name +
             ": check nvidia-smi and CUDA_VISIBLE_DEVICES";
    case cudaErrorSystemDriverMismatch:
      return "the NVIDIA kernel driver and its user-space library differ in version" + name +
             ": reinstall the driver or reboot";
    case cudaErrorDevicesUnavailable:
      return "every CUDA GPU is busy or in exclusive use by another process" + name +
             ": check nvidia-smi";
    case cudaErrorCompatNotSupportedOnDevice:
      return "the installed CUDA forward-compatibility package does not support this GPU" + name +
             ": update the NVIDIA driver";
    default:
      return std::string("CUDA could not be initialised: ") + cudaGetErrorString(err) + name +
             "; check the NVIDIA driver with nvidia-smi";
  }
}

namespace {

// A failed cudaGetDeviceCount as the user sees it. Where it failed matters to a developer,
// not to a user: the debug log has it (etc -vv).
Status device_count_error(cudaError_t err, const char* file, int line) {
  spdlog::debug("cudaGetDeviceCount failed at {}:{}: {} ({})", file, line, cudaGetErrorName(err),
                cudaGetErrorString(err));
  (void)cudaGetLastError();
  return Status(ErrorCode::kDeviceUnavailable, no_device_message(err));
}

}  // namespace

Result<int> count_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return device_count_error(err, __FILE__, __LINE__);
  return count;
}

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaErrorNoDevice) {
    (void)cudaGetLastError();
    return std::vector<DeviceInfo>{};
  }
  if (err != cudaSuccess) return device_count_error(err, __FILE__, __LINE__);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    ETC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, i));
    out.push_back(DeviceInfo{i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
  }
  return out;
}

std::vector<int> parse_architectures(const std::string& list) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(",;", start);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(start, end - start);
    // "sm_90", "compute_90": the number after the prefix; "90a-real": the leading number.
    size_t at = item.find('_');
    at = at == std::string::npos ? 0 : at + 1;
    int value = 0;
    size_t digits = 0;
    while (at + digits < item.size() &&
           std::isdigit(static_cast<unsigned char>(item[at + digits])) && digits < 4)
      value = value * 10 + (item[at + digits++] - '0');
    if (digits > 0 && std::find(out.begin(), out.end(), value) == out.end()) out.push_back(value);
    start = end + 1;
  }
  return out;
}

std::vector<int> built_architectures() {
  // CMAKE_CUDA_ARCHITECTURES as CMake resolved it (src/backends/cuda/runtime/CMakeLists.txt).
  return parse_architectures(ETC_CUDA_ARCHITECTURES);
}

Status check_kernel_image(const DeviceInfo& device) {
  cudaError_t err = kernels::kernel_image_status();
  if (err == cudaSuccess) return Status();
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
      err == cudaErrorUnsupportedPtxVersion) {
    (void)cudaGetLastError();
    return Status(ErrorCode::kDeviceUnavailable,
                  "cuda:" + std::to_string(device.index) + " (" + device.name +
                      ", compute capability " + std::to_string(device.major) + "." +
                      std::to_string(device.minor) +
                      "): this etc carries no kernels that load on it (" + cudaGetErrorName(err) +
                      "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" +
                      std::to_string(device.major * 10 + device.minor) + ")");
  }
  return status_from_cuda(err, "cudaFuncGetAttributes", __FILE__, __LINE__);
}

Status check_supported(const DeviceInfo& device, const std::vector<int>& architectures) {
  const int cc = device.major * 10 + device.minor;
  std::string built;
  int lowest = 0;
  for (int a : architectures) {
    built += (built.empty() ? "sm_" : ", sm_") + std::to_string(a);
    lowest = lowest == 0 ? a : std::min(lowest, a);
  }
  if (architectures.empty()) return Status();  // not known: the driver decides at load
  if (cc >= lowest) return Status();
  return Status(ErrorCode::kDeviceUnavailable,
                "cuda:" + std::to_string(device.index) + " (" + device.name +
                    ") has compute capability " + std::to_string(device.major) + "." +
                    std::to_string(device.minor) + "; this etc was built for " +
                    (built.empty() ? std::string("no architecture") : built) + " and needs " +
                    std::to_string(lowest / 10) + "." + std::to_string(lowest % 10) +
                    " or newer (rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(cc) +
                    " to run on it)");
}

std::string driver_version_string() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess || v == 0) {
    (void)cudaGetLastError();
    return "none (no NVIDIA driver found)";
  }
  auto text = [](int x) {
    return std::to_string(x / 1000) + "." + std::to_string((x % 1000) / 10);
  };
  std::string s = text(v);
  if (v < CUDART_VERSION) {
    s += " (too old: this etc's CUDA " + text(CUDART_VERSION) +
         " runtime needs a driver for CUDA " + text(CUDART_VERSION) + " or newer)";
  }
  return s;
}

std::string runtime_version_string() {
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string((CUDART_VERSION % 1000) / 10);
}

}  // namespace etc::cuda
