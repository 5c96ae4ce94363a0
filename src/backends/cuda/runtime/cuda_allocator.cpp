#include "backends/cuda/runtime/cuda_allocator.h"

#include <spdlog/spdlog.h>

#include <cstdint>

#include "backends/cuda/runtime/cuda_status.h"

namespace etc::cuda {

CudaAllocator::~CudaAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [ptr, block] : blocks_) {
    if (teardown_ok(cudaSetDevice(block.index), "cudaSetDevice"))
      teardown_ok(cudaFree(block.base), "cudaFree");
  }
  blocks_.clear();
}

Result<void*> CudaAllocator::allocate(size_t bytes, size_t alignment, int8_t index) {
  if (index < 0 || index >= count_) {
    return Status(ErrorCode::kDeviceUnavailable, "cuda:" + std::to_string(index) +
                                                     " does not exist (" + std::to_string(count_) +
                                                     " CUDA device(s) visible)");
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return internal_error("allocation alignment " + std::to_string(alignment) +
                          " is not a power of two");
  ETC_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  // cudaMalloc aligns to 256 bytes; a larger alignment over-allocates and rounds up.
  const size_t extra = alignment > 256 ? alignment : 0;
  void* base = nullptr;
  cudaError_t err = cudaMalloc(&base, std::max<size_t>(bytes, 1) + extra);
  if (err != cudaSuccess) {
    return std::move(status_from_cuda(err, "cudaMalloc", __FILE__, __LINE__))
        .add_context("while allocating " + std::to_string(bytes) +
                     " bytes on cuda:" + std::to_string(index));
  }
  auto addr = reinterpret_cast<uintptr_t>(base);
  void* aligned = reinterpret_cast<void*>((addr + alignment - 1) & ~(uintptr_t(alignment) - 1));
  std::lock_guard<std::mutex> lock(mu_);
  blocks_[aligned] = Block{base, index};
  return aligned;
}

void CudaAllocator::deallocate(void* ptr, int8_t) {
  Block block{};
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(ptr);
    if (it == blocks_.end()) {
      spdlog::error("CudaAllocator: refusing to free {} (not allocated here, or freed twice)", ptr);
      return;
    }
    block = it->second;
    blocks_.erase(it);
  }
  if (teardown_ok(cudaSetDevice(block.index), "cudaSetDevice"))
    teardown_ok(cudaFree(block.base), "cudaFree");
}

Status CudaAllocator::copy(void* dst, const void* src, size_t bytes, int8_t index,
                           cudaMemcpyKind kind) {
  if (bytes == 0) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * ctx, contexts_->get(index));
  ETC_RETURN_IF_ERROR(ctx->activate());
  ETC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, kind, ctx->stream()));
  // Complete before returning: the host side may be reused (H2D) or read (D2H) at once.
  ETC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx->stream()));
  // Results read back to the host: a kernel that met an index out of range says so here.
  if (kind == cudaMemcpyDeviceToHost) return ctx->take_error_flag();
  return Status();
}

Status CudaAllocator::copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t index) {
  if (bytes == 0) return Status();
  ETC_ASSIGN_OR_RETURN(bool dst_device, owns(dst));
  if (!dst_device)
    return invalid_input("host-to-device copy: the destination is not device memory");
  ETC_ASSIGN_OR_RETURN(bool src_device, owns(src));
  if (src_device)
    return invalid_input("host-to-device copy: the source is device memory, not host memory");
  return copy(dst, src, bytes, index, cudaMemcpyHostToDevice);
}

Status CudaAllocator::zero(void* dst, size_t bytes, int8_t index) {
  if (bytes == 0) return Status();
  ETC_ASSIGN_OR_RETURN(bool dst_device, owns(dst));
  if (!dst_device) return invalid_input("zeroing device memory: the pointer is not device memory");
  ETC_ASSIGN_OR_RETURN(DeviceContext * ctx, contexts_->get(index));
  ETC_RETURN_IF_ERROR(ctx->activate());
  ETC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dst, 0, bytes, ctx->stream()));
  ETC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(ctx->stream()));
  return Status();
}

Status CudaAllocator::copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t index) {
  if (bytes == 0) return Status();
  ETC_ASSIGN_OR_RETURN(bool src_device, owns(src));
  if (!src_device) return invalid_input("device-to-host copy: the source is not device memory");
  ETC_ASSIGN_OR_RETURN(bool dst_device, owns(dst));
  if (dst_device)
    return invalid_input("device-to-host copy: the destination is device memory, not host memory");
  return copy(dst, src, bytes, index, cudaMemcpyDeviceToHost);
}

Result<bool> CudaAllocator::owns(const void* ptr) const {
  if (ptr == nullptr) return false;
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  return device_memory_from_query(err, attr.type, __FILE__, __LINE__);
}

Result<int> CudaAllocator::device_of(const void* ptr) const {
  if (ptr == nullptr) return -1;
  cudaPointerAttributes attr{};
  cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  return memory_device_from_query(err, attr.type, attr.device, __FILE__, __LINE__);
}

size_t CudaAllocator::live_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.size();
}

}  // namespace etc::cuda
