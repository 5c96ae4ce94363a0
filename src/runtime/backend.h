// Delegate backends: a registry keyed by backend id ("EtcCudaBackend"), explicit
// registration. A backend turns a delegate's processed blob into a handle once, at load;
// the handle runs the delegate for each DelegateCall with the call's values (inputs, then
// outputs) — tensors already on the delegate's device, as the export planned them.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>

#include "format/pte_model.h"
#include "runtime/tensor.h"
#include "support/status.h"

namespace etc::rt {

class OperatorRegistry;
class DeviceAllocatorRegistry;
class BackendRegistry;

// What a program runs with. All registries must outlive the methods loaded with them.
struct RuntimeEnv {
  const OperatorRegistry* operators = nullptr;
  const DeviceAllocatorRegistry* allocators = nullptr;
  const BackendRegistry* backends = nullptr;
  // Handed to every kernel as KernelContext::backend_state (device kernels find their stream
  // there); null for host programs.
  void* kernel_state = nullptr;
  // The kernels' load planner may apply in-place activations and residual adds as the
  // epilogue of the kernel before them (same bits; fewer passes over memory). Off: every
  // instruction runs as written (comparisons, etc run --no-fusion).
  bool fuse_epilogues = true;
};

class DelegateHandle {
 public:
  virtual ~DelegateHandle() = default;
  // args: the DelegateCall's values, inputs then outputs.
  virtual Status execute(std::span<Value*> args) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // `file` gives access to named data (the delegate's weights); it outlives the handle.
  virtual Result<std::unique_ptr<DelegateHandle>> init(
      std::span<const uint8_t> processed, const std::vector<pte::CompileSpec>& compile_specs,
      const pte::File& file, const RuntimeEnv& env) = 0;
};

class BackendRegistry {
 public:
  Status add(const std::string& id, std::unique_ptr<Backend> backend);
  Backend* find(const std::string& id) const;

 private:
  std::map<std::string, std::unique_ptr<Backend>> backends_;
};

}  // namespace etc::rt
