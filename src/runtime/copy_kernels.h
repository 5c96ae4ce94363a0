// The et_copy kernels: the host<->device copies the export inserts where a tensor crosses
// between the host program and a device delegate (et_copy::_h2d_copy.out / _d2h_copy.out),
// through the allocator of the device's type (KernelContext::allocators).
#pragma once

#include "runtime/kernel.h"

namespace etc::rt {

// Registers both copy kernels.
Status register_copy_kernels(OperatorRegistry& registry);

}  // namespace etc::rt
