// The CPU reference implementation of etc's CUDA delegate ("EtcCudaBackend"): runs the
// delegate's subgraph (etc_delegate.fbs) with the CPU kernels, its weights read from the
// program's named data and its workspace allocated once at init. `etc run --device cpu`
// registers it, with host memory standing in for device memory, so every program etc writes
// runs — and can be checked — on any machine.
#pragma once

#include <memory>

#include "runtime/backend.h"

namespace etc::rt {

std::unique_ptr<Backend> make_cpu_reference_delegate_backend();

}  // namespace etc::rt
