#include "backends/runtimes.h"

#include <cctype>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"

#ifdef ETC_WITH_CUDA
#include "backends/cuda/runtime/cuda_devices.h"
#include "backends/cuda/runtime/cuda_runtime_env.h"
#endif

namespace etc {

bool cuda_built() {
#ifdef ETC_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string describe_runtimes() {
  std::string v =
      std::string("CPU kernels: GEMM micro-kernel ") + rt::kernels::gemm_float_kernel_name() +
      (rt::kernels::env_max_isa().has_value() ? " ($ETC_MAX_ISA caps the vector builds)\n" : "\n");
  const std::string dnnl = rt::kernels::onednn_version();
  v += dnnl.empty() ? "oneDNN: not built (CPU convolutions on etc's own kernels)\n"
                    : "oneDNN: " + dnnl + " (CPU convolutions where it has a JIT kernel)\n";
#ifdef ETC_WITH_CUDA
  std::string archs;
  for (int a : cuda::built_architectures())
    archs += (archs.empty() ? "" : ",") + std::to_string(a);
  v += "CUDA support: built in (CUDA runtime " + cuda::runtime_version_string() +
       ", architectures " + archs + ")\n";
  v += "CUDA driver: " + cuda::driver_version_string() + "\n";
  auto devices = cuda::list_devices();
  if (!devices.ok()) {
    v += "CUDA devices: none usable (" + devices.status().message() + ")\n";
  } else if (devices->empty()) {
    v += "CUDA devices: none visible\n";
  } else {
    for (const auto& d : *devices) {
      v += "CUDA device " + std::to_string(d.index) + ": " + d.name + " (sm_" +
           std::to_string(d.major) + std::to_string(d.minor) + ", " +
           std::to_string(d.total_memory >> 20) + " MiB)";
      Status usable = cuda::check_supported(d, cuda::built_architectures());
      v += usable.ok() ? "\n" : " \u2014 not usable: " + usable.message() + "\n";
    }
  }
#else
  v += "CUDA support: not built (CPU-only build)\n";
#endif
  return v;
}

Result<Device> choose_device(const std::string& requested, const std::string& what,
                             std::string* note) {
  std::string lower = requested;
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "auto") {
#ifdef ETC_WITH_CUDA
    auto devices = cuda::list_devices();
    if (devices.ok() && !devices->empty()) {
      Status usable = cuda::check_supported((*devices)[0], cuda::built_architectures());
      if (usable.ok()) {
        *note = what + " auto: using cuda:0 (" + (*devices)[0].name + ")";
        return Device{DeviceType::kCUDA, 0};
      }
      *note = what + " auto: " + usable.message() + "; running on the CPU";
      return Device{};
    }
    *note =
        what + " auto: no GPU visible (" +
        (devices.ok() ? std::string("the driver reports 0 devices") : devices.status().message()) +
        "); running on the CPU";
#else
    *note = what + " auto: this etc was built without CUDA support; running on the CPU";
#endif
    return Device{};
  }
  Result<Device> d = parse_device(lower);
  if (!d.ok()) return Status(ErrorCode::kUsage, what + ": " + d.status().message() + " (or auto)");
  if (d->is_cpu()) return *d;
  const std::string instead =
      "; use " + what + (what.back() == '=' ? "" : " ") + "cpu to run on the CPU";
#ifdef ETC_WITH_CUDA
  auto devices = cuda::list_devices();
  if (!devices.ok()) {
    return Status(ErrorCode::kDeviceUnavailable, "requested device " + to_string(*d) +
                                                     " is not available: no CUDA device visible: " +
                                                     devices.status().message() + instead);
  }
  if (d->index >= static_cast<int>(devices->size())) {
    return Status(ErrorCode::kDeviceUnavailable,
                  "requested device " + to_string(*d) + " is not available: " +
                      std::to_string(devices->size()) + " CUDA device(s) visible" + instead);
  }
  Status usable =
      cuda::check_supported((*devices)[static_cast<size_t>(d->index)], cuda::built_architectures());
  if (!usable.ok()) {
    return Status(
        ErrorCode::kDeviceUnavailable,
        "requested device " + to_string(*d) + " is not usable: " + usable.message() + instead);
  }
  return *d;
#else
  return Status(ErrorCode::kDeviceUnavailable,
                "requested device " + to_string(*d) +
                    " is not available: this etc was built without CUDA support" + instead);
#endif
}

Result<std::unique_ptr<rt::OwnedRuntime>> make_runtime(Device device,
                                                       const RuntimeOptions& options) {
#ifdef ETC_WITH_CUDA
  if (device.type == DeviceType::kCUDA)
    return cuda::make_cuda_runtime(cuda::CudaRuntimeOptions{.graphs = options.cuda_graphs});
#endif
  (void)options;
  if (!device.is_cpu()) return internal_error("no runtime for " + to_string(device));
  return rt::make_cpu_runtime();
}

std::function<Status()> device_sync(Device device, rt::OwnedRuntime& runtime) {
#ifdef ETC_WITH_CUDA
  if (device.type == DeviceType::kCUDA)
    return [&runtime] { return cuda::synchronize_devices(runtime); };
#endif
  (void)device;
  (void)runtime;
  return nullptr;
}

}  // namespace etc
