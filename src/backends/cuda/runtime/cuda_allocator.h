// The DeviceAllocator for CUDA memory: cudaMalloc on the requested device (alignment of 256
// bytes or more honoured by over-allocating), copies ordered on the device's etc stream and
// complete when they return (a host source may be reused, a host destination read at once).
// Registered explicitly by make_cuda_runtime (cuda_runtime_env.h).
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "backends/cuda/runtime/cuda_context.h"
#include "runtime/device_allocator.h"

namespace etc::cuda {

class CudaAllocator final : public rt::DeviceAllocator {
 public:
  // `contexts` (streams per device) must outlive the allocator.
  CudaAllocator(DeviceContexts* contexts, int device_count)
      : contexts_(contexts), count_(device_count) {}
  ~CudaAllocator() override;

  DeviceType type() const override { return DeviceType::kCUDA; }
  int device_count() const override { return count_; }
  Result<void*> allocate(size_t bytes, size_t alignment, int8_t index) override;
  void deallocate(void* ptr, int8_t index) override;
  Status copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t index) override;
  Status copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t index) override;
  // cudaMemsetAsync on the device's stream, synchronised.
  Status zero(void* dst, size_t bytes, int8_t index) override;
  // True for device (or managed) memory of any CUDA device, whoever allocated it; a failed
  // query (a sticky error after a kernel fault) is that CUDA error, not "host memory".
  Result<bool> owns(const void* ptr) const override;
  // The device cudaPointerGetAttributes names for device or managed memory, -1 for host
  // memory; a failed query is that CUDA error.
  Result<int> device_of(const void* ptr) const override;

  size_t live_allocations() const;

 private:
  struct Block {
    void* base;  // what cudaMalloc returned (the aligned pointer may be above it)
    int8_t index;
  };
  Status copy(void* dst, const void* src, size_t bytes, int8_t index, cudaMemcpyKind kind);

  DeviceContexts* contexts_;
  int count_;
  mutable std::mutex mu_;
  std::map<void*, Block> blocks_;  // aligned pointer -> block
};

}  // namespace etc::cuda
