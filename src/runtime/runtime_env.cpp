#include "runtime/runtime_env.h"

#include "format/backend_ids.h"
#include "runtime/copy_kernels.h"
#include "runtime/cpu_delegate.h"
#include "runtime/method.h"

namespace etc::rt {

Result<std::unique_ptr<OwnedRuntime>> make_cpu_runtime(int cuda_devices, size_t memory_limit) {
  auto rt = std::make_unique<OwnedRuntime>();
  ETC_RETURN_IF_ERROR(register_cpu_kernels(rt->operators));
  ETC_RETURN_IF_ERROR(register_copy_kernels(rt->operators));
  ETC_RETURN_IF_ERROR(rt->allocators.add(
      std::make_unique<HostBackedAllocator>(DeviceType::kCUDA, cuda_devices, memory_limit)));
  rt->allocators.set_host_allocation_limit(memory_limit);
  ETC_RETURN_IF_ERROR(rt->backends.add(kCudaBackendId, make_cpu_reference_delegate_backend()));
  return rt;
}

}  // namespace etc::rt
