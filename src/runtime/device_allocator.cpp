#include "runtime/device_allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

namespace etc::rt {

Status DeviceAllocator::zero(void* dst, size_t bytes, int8_t index) {
  static const std::vector<uint8_t> kZeros(size_t{1} << 20);
  for (size_t done = 0; done < bytes; done += kZeros.size()) {
    ETC_RETURN_IF_ERROR(copy_host_to_device(static_cast<char*>(dst) + done, kZeros.data(),
                                            std::min(kZeros.size(), bytes - done), index));
  }
  return Status();
}

Status DeviceAllocatorRegistry::add(std::unique_ptr<DeviceAllocator> allocator) {
  if (allocator == nullptr) return internal_error("registering a null device allocator");
  DeviceType type = allocator->type();
  if (allocators_.count(type)) {
    return internal_error("a device allocator for " + std::string(device_type_name(type)) +
                          " is already registered");
  }
  allocators_.emplace(type, std::move(allocator));
  return Status();
}

DeviceAllocator* DeviceAllocatorRegistry::find(DeviceType type) const {
  auto it = allocators_.find(type);
  return it == allocators_.end() ? nullptr : it->second.get();
}

Result<DeviceAllocator*> DeviceAllocatorRegistry::for_device(Device device) const {
  DeviceAllocator* a = find(device.type);
  if (a == nullptr) {
    return Status(
        ErrorCode::kDeviceUnavailable,
        "the program needs " + to_string(device) + " memory, but no " +
            std::string(device_type_name(device.type)) +
            " allocator is available (etc built without CUDA, or no GPU); run with --device cpu");
  }
  if (device.index < 0 || device.index >= a->device_count()) {
    return Status(ErrorCode::kDeviceUnavailable,
                  "the program needs " + to_string(device) + ", but only " +
                      std::to_string(a->device_count()) + " " +
                      std::string(device_type_name(device.type)) + " device(s) exist");
  }
  return a;
}

Result<DeviceBuffer> DeviceBuffer::allocate(const DeviceAllocatorRegistry& registry, Device device,
                                            size_t bytes, size_t alignment) {
  DeviceBuffer b;
  b.device_ = device;
  b.size_ = bytes;
  b.alignment_ = alignment;
  if (bytes == 0) return b;
  if (device.is_cpu()) {
    if (registry.host_allocation_limit() != 0 && bytes > registry.host_allocation_limit()) {
      return Status(ErrorCode::kDeviceUnavailable,
                    "out of host memory allocating " + std::to_string(bytes) +
                        " bytes (the runtime's budget is " +
                        std::to_string(registry.host_allocation_limit()) +
                        " bytes per allocation)");
    }
    if (bytes >= kMappedHostBytes && alignment <= static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p != MAP_FAILED) {
        b.data_ = p;
        b.mapped_ = true;
        return b;
      }
    }
    b.data_ = ::operator new(bytes, std::align_val_t(alignment), std::nothrow);
    if (b.data_ == nullptr) {
      return Status(ErrorCode::kDeviceUnavailable,
                    "out of host memory allocating " + std::to_string(bytes) + " bytes");
    }
    std::memset(b.data_, 0, bytes);
    return b;
  }
  ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, registry.for_device(device));
  ETC_ASSIGN_OR_RETURN(b.data_, a->allocate(bytes, alignment, device.index));
  b.allocator_ = a;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : allocator_(o.allocator_),
      mapped_(o.mapped_),
      data_(o.data_),
      size_(o.size_),
      alignment_(o.alignment_),
      device_(o.device_) {
  o.allocator_ = nullptr;
  o.data_ = nullptr;
  o.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    allocator_ = o.allocator_;
    mapped_ = o.mapped_;
    data_ = o.data_;
    size_ = o.size_;
    alignment_ = o.alignment_;
    device_ = o.device_;
    o.allocator_ = nullptr;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

void DeviceBuffer::release() {
  if (data_ == nullptr) return;
  if (allocator_ != nullptr) {
    allocator_->deallocate(data_, device_.index);
  } else if (mapped_) {
    munmap(data_, size_);
  } else {
    ::operator delete(data_, std::align_val_t(alignment_));
  }
  data_ = nullptr;
  mapped_ = false;
}

HostBackedAllocator::~HostBackedAllocator() {
  for (auto& [ptr, block] : blocks_)
    ::operator delete(const_cast<char*>(ptr), std::align_val_t(block.alignment));
}

Result<void*> HostBackedAllocator::allocate(size_t bytes, size_t alignment, int8_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (fail_next_) {
    fail_next_ = false;
    return Status(ErrorCode::kDeviceUnavailable, "out of device memory allocating " +
                                                     std::to_string(bytes) + " bytes on " +
                                                     to_string(Device{type_, index}));
  }
  if (index < 0 || index >= count_) {
    return Status(ErrorCode::kDeviceUnavailable,
                  "device " + to_string(Device{type_, index}) + " does not exist");
  }
  if (capacity_ != 0 && bytes > capacity_ - std::min(capacity_, live_bytes_[index])) {
    return Status(ErrorCode::kDeviceUnavailable,
                  "out of device memory allocating " + std::to_string(bytes) + " bytes on " +
                      to_string(Device{type_, index}) + " (" + std::to_string(live_bytes_[index]) +
                      " of " + std::to_string(capacity_) + " bytes in use)");
  }
  alignment = std::max<size_t>(alignment, 256);
  void* p = ::operator new(std::max<size_t>(bytes, 1), std::align_val_t(alignment), std::nothrow);
  if (p == nullptr) return Status(ErrorCode::kDeviceUnavailable, "out of memory");
  std::memset(p, 0, bytes);
  blocks_[static_cast<const char*>(p)] = Block{bytes, alignment, index};
  live_bytes_[index] += bytes;
  ++counters_.allocations;
  counters_.bytes_allocated += bytes;
  return p;
}

void HostBackedAllocator::deallocate(void* ptr, int8_t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(static_cast<const char*>(ptr));
  if (it == blocks_.end()) return;  // not ours: refuse to free it (counted as a bug by tests)
  ::operator delete(ptr, std::align_val_t(it->second.alignment));
  live_bytes_[it->second.index] -= it->second.size;
  blocks_.erase(it);
  ++counters_.deallocations;
}

Result<bool> HostBackedAllocator::owns(const void* ptr) const {
  return owns_block(ptr);
}

Result<int> HostBackedAllocator::device_of(const void* ptr) const {
  return block_device(ptr);
}

int HostBackedAllocator::block_device(const void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  const char* p = static_cast<const char*>(ptr);
  auto it = blocks_.upper_bound(p);
  if (it == blocks_.begin()) return -1;
  --it;
  return p >= it->first && p <= it->first + it->second.size ? it->second.index : -1;
}

Status HostBackedAllocator::copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t) {
  if (bytes == 0) return Status();
  if (!owns_block(dst))
    return invalid_input("host-to-device copy: the destination is not device memory");
  if (owns_block(src))
    return invalid_input("host-to-device copy: the source is device memory, not host memory");
  std::memcpy(dst, src, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.h2d_copies;
  counters_.h2d_bytes += bytes;
  return Status();
}

Status HostBackedAllocator::copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t) {
  if (bytes == 0) return Status();
  if (!owns_block(src))
    return invalid_input("device-to-host copy: the source is not device memory");
  if (owns_block(dst))
    return invalid_input("device-to-host copy: the destination is device memory, not host memory");
  std::memcpy(dst, src, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.d2h_copies;
  counters_.d2h_bytes += bytes;
  return Status();
}

HostBackedAllocator::Counters HostBackedAllocator::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

size_t HostBackedAllocator::live_allocations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocks_.size();
}

}  // namespace etc::rt
