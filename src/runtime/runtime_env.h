// A ready-to-use runtime environment: registries filled with the CPU kernels, the et_copy
// kernels, and for `--device cpu` a host-backed stand-in for CUDA memory plus the CPU
// reference delegate backend. Owns the registries the RuntimeEnv points at.
#pragma once

#include <memory>

#include "runtime/backend.h"
#include "runtime/device_allocator.h"
#include "runtime/kernel.h"

namespace etc::rt {

struct OwnedRuntime {
  // State the registries' members share (the CUDA runtime's device contexts). Declared first,
  // so it is destroyed after the allocators and backends that use it.
  std::shared_ptr<void> shared_state;
  OperatorRegistry operators;
  DeviceAllocatorRegistry allocators;
  BackendRegistry backends;
  RuntimeEnv env() const { return RuntimeEnv{&operators, &allocators, &backends}; }
};

// CPU kernels + copies, and CUDA memory emulated in host memory (cuda:0..cuda:`cuda_devices`-1)
// with delegates run by the CPU reference backend. `memory_limit` (0: none) bounds each host
// allocation and each emulated device's capacity: a program asking for more fails to load
// with an out-of-memory error (exit 4) instead of exhausting the machine.
Result<std::unique_ptr<OwnedRuntime>> make_cpu_runtime(int cuda_devices = 8,
                                                       size_t memory_limit = 0);

}  // namespace etc::rt
