// What CUDA devices this process can see. Safe to call on machines without a GPU or
// driver: the answer is then an error saying so, never a crash.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "support/status.h"

namespace etc::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int major = 0;  // compute capability
  int minor = 0;
  size_t total_memory = 0;
};

// Visible devices (empty when the driver reports none). When CUDA cannot even count them
// (no driver, a driver too old), kDeviceUnavailable with no_device_message()'s text.
Result<std::vector<DeviceInfo>> list_devices();

// What a user sees when cudaGetDeviceCount fails with `err`: what happened, in words, with
// CUDA's error name, and what to do; no source location (that goes to the debug log).
std::string no_device_message(cudaError_t err);

// cudaGetDeviceCount as a Result: the count, or kDeviceUnavailable with no_device_message()
// (the call's source location logged at debug level).
Result<int> count_devices();

// The CUDA runtime version etc was built against, e.g. "13.0".
std::string runtime_version_string();

// The CUDA version the installed driver supports ("13.0"), "none" without a driver, and a
// note when it is older than the runtime etc links (every CUDA call then fails with
// cudaErrorInsufficientDriver): "12.8 (too old: this etc's CUDA 13.0 runtime needs a driver
// for CUDA 13.0 or newer)".
std::string driver_version_string();

// Reads a CMAKE_CUDA_ARCHITECTURES value, items separated by ',' or ';': "80,90",
// "80-real;90-virtual", "90a", "sm_90". The numbers, in order; empty when the value names
// no number (a keyword CMake did not resolve: "native", "all", "all-major"), which means
// "not known", not "none".
std::vector<int> parse_architectures(const std::string& list);

// The architectures this binary carries kernels for, as recorded at build time (the
// CMAKE_CUDA_ARCHITECTURES list CMake generated device code for: {80, 90} by default); empty
// when not known.
std::vector<int> built_architectures();

// Whether etc's kernels can run on `device`: each built architecture XY carries SASS for
// sm_XY and PTX for compute_XY, which the driver compiles for any GPU of compute capability
// X.Y or newer; an older GPU would fail its first launch. Not supported: kDeviceUnavailable
// naming the device, its compute capability and what the build needs. With no known
// architectures, every device passes here and the driver decides (kernel_image_status).
Status check_supported(const DeviceInfo& device, const std::vector<int>& architectures);

// Asks the driver whether etc's device code loads on the current device (it has SASS or PTX
// it can use): kDeviceUnavailable naming `device` when it has none.
Status check_kernel_image(const DeviceInfo& device);

}  // namespace etc::cuda
