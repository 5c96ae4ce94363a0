#include "backends/cuda/runtime/cuda_runtime_env.h"

#include "backends/cuda/runtime/cuda_allocator.h"
#include "backends/cuda/runtime/cuda_context.h"
#include "backends/cuda/runtime/cuda_delegate.h"
#include "format/backend_ids.h"
#include "runtime/copy_kernels.h"
#include "runtime/method.h"

namespace etc::cuda {

Result<std::unique_ptr<rt::OwnedRuntime>> make_cuda_runtime(CudaRuntimeOptions options) {
  Result<int> count = visible_device_count();
  if (!count.ok()) {
    return Status(ErrorCode::kDeviceUnavailable,
                  "no CUDA device visible: " + count.status().message());
  }
  if (*count == 0)
    return Status(ErrorCode::kDeviceUnavailable, "no CUDA device visible: the driver reports 0");
  auto rt = std::make_unique<rt::OwnedRuntime>();
  auto contexts = std::make_shared<DeviceContexts>();
  rt->shared_state = contexts;
  ETC_RETURN_IF_ERROR(rt::register_cpu_kernels(rt->operators));
  ETC_RETURN_IF_ERROR(rt::register_copy_kernels(rt->operators));
  ETC_RETURN_IF_ERROR(rt->allocators.add(std::make_unique<CudaAllocator>(contexts.get(), *count)));
  ETC_RETURN_IF_ERROR(
      rt->backends.add(kCudaBackendId, make_cuda_delegate_backend(contexts.get(), options.graphs)));
  return rt;
}

Status synchronize_devices(const rt::OwnedRuntime& runtime) {
  auto* contexts = static_cast<DeviceContexts*>(runtime.shared_state.get());
  return contexts == nullptr ? Status() : contexts->synchronize_all();
}

GraphCountsSummary graph_counts(const rt::OwnedRuntime& runtime) {
  auto* contexts = static_cast<DeviceContexts*>(runtime.shared_state.get());
  if (contexts == nullptr) return {};
  const GraphCounts c = contexts->graph_counts();
  return GraphCountsSummary{c.captures, c.replays, c.plain, c.failed};
}

}  // namespace etc::cuda
