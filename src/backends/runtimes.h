// The runtimes a program can run on, behind one call: which device a request names ("auto",
// "cpu", "cuda:N") and whether this machine and this build can use it, and the runtime for
// it (the CUDA runtime for a GPU; the CPU runtime, CUDA memory emulated in host memory and
// delegates on the CPU reference backend, otherwise). What `etc run` and the Python package
// ask before loading a program.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "graph/device.h"
#include "runtime/runtime_env.h"
#include "support/status.h"

namespace etc {

// Whether CUDA support was built in.
bool cuda_built();

// What this build runs on, one line each: the CPU kernels (GEMM micro-kernel, oneDNN), CUDA
// support (runtime version, architectures), the driver and every visible device and whether
// it is usable. `etc --version` prints it.
std::string describe_runtimes();

// The device `requested` names. "auto" is the first usable GPU, else the CPU, and `note`
// says which and why; a named GPU that is not there or not usable is kDeviceUnavailable;
// a malformed name is kUsage. `what` names the setting in messages ("--device", "device=").
Result<Device> choose_device(const std::string& requested, const std::string& what,
                             std::string* note);

struct RuntimeOptions {
  bool cuda_graphs = false;  // CUDA delegates capture and replay CUDA graphs
};

// The runtime for `device` (chosen by choose_device).
Result<std::unique_ptr<rt::OwnedRuntime>> make_runtime(Device device,
                                                       const RuntimeOptions& options = {});

// Waits for the work queued on `device` (nullptr for the CPU, which queues none).
std::function<Status()> device_sync(Device device, rt::OwnedRuntime& runtime);

}  // namespace etc
