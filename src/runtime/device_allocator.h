// Device memory: the DeviceAllocator interface, a registry keyed by device type (explicit
// registration, one per type, a fresh registry per test if wanted), an owning buffer, and a
// host-backed allocator that stands in for a device — used by tests (it counts everything
// and can tell its "device" pointers from host ones) and by `etc run --device cpu`, which
// runs device parts of a program in host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "graph/device.h"
#include "support/status.h"

namespace etc::rt {

class DeviceAllocator {
 public:
  virtual ~DeviceAllocator() = default;
  virtual DeviceType type() const = 0;
  // How many devices of this type exist (valid indices are 0..count-1).
  virtual int device_count() const = 0;
  virtual Result<void*> allocate(size_t bytes, size_t alignment, int8_t index) = 0;
  virtual void deallocate(void* ptr, int8_t index) = 0;
  // Copies complete before returning: a host source may be reused at once, a host
  // destination may be read at once.
  virtual Status copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t index) = 0;
  virtual Status copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t index) = 0;
  // Sets `bytes` bytes of device memory at `dst` to zero, complete before returning (state
  // that starts as zeros). The default copies zeros from host memory; an allocator with a
  // device memset overrides it.
  virtual Status zero(void* dst, size_t bytes, int8_t index);
  // Whether `ptr` points into memory this allocator gave out (for binding checks); an error
  // when the device cannot answer (it is broken), which callers report as it is.
  virtual Result<bool> owns(const void* ptr) const = 0;
  // Which device of this type `ptr`'s memory is on (its index), or -1 when it is not memory
  // of this type; an error when the device cannot answer. Binding checks compare it with the
  // tensor's device index: memory of another device of the same type is refused too.
  virtual Result<int> device_of(const void* ptr) const = 0;
};

class DeviceAllocatorRegistry {
 public:
  // Fails (never aborts) when an allocator for the same device type is registered already.
  Status add(std::unique_ptr<DeviceAllocator> allocator);
  DeviceAllocator* find(DeviceType type) const;
  // The allocator for `device`, or a kDeviceUnavailable error that says what to do.
  Result<DeviceAllocator*> for_device(Device device) const;
  // A budget for one host (CPU) allocation of DeviceBuffer::allocate: larger requests fail
  // as out of host memory without asking the system (0: no budget). For embedders and the
  // fuzz harness, where a program's claims must not exhaust the machine.
  void set_host_allocation_limit(size_t bytes) { host_limit_ = bytes; }
  size_t host_allocation_limit() const { return host_limit_; }

 private:
  std::map<DeviceType, std::unique_ptr<DeviceAllocator>> allocators_;
  size_t host_limit_ = 0;
};

// An owning block of memory on one device: host memory for the CPU (zeroed: aligned new,
// or from kMappedHostBytes on, pages mapped from the system, which are zero until written
// and take no memory before: a planned tensor no step writes, such as the weight copy etc's
// load planner skips, costs nothing), the registered allocator otherwise. Freed exactly once,
// by its destructor.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  static Result<DeviceBuffer> allocate(const DeviceAllocatorRegistry& registry, Device device,
                                       size_t bytes, size_t alignment);
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }

 private:
  void release();
  static constexpr size_t kMappedHostBytes = size_t{1} << 20;
  DeviceAllocator* allocator_ = nullptr;  // null for host memory
  bool mapped_ = false;                   // host memory from mmap
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t alignment_ = 0;
  Device device_;
};

// Host memory posing as device memory of `type` with `count` devices. Counts allocations,
// frees and copies, and knows which pointers it handed out.
class HostBackedAllocator final : public DeviceAllocator {
 public:
  // `capacity`: bytes each emulated device holds (live allocations together); 0: unlimited.
  explicit HostBackedAllocator(DeviceType type, int count = 1, size_t capacity = 0)
      : type_(type), count_(count), capacity_(capacity) {}
  ~HostBackedAllocator() override;

  DeviceType type() const override { return type_; }
  int device_count() const override { return count_; }
  Result<void*> allocate(size_t bytes, size_t alignment, int8_t index) override;
  void deallocate(void* ptr, int8_t index) override;
  Status copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t index) override;
  Status copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t index) override;
  Result<bool> owns(const void* ptr) const override;
  Result<int> device_of(const void* ptr) const override;

  struct Counters {
    size_t allocations = 0;
    size_t deallocations = 0;
    size_t bytes_allocated = 0;
    size_t h2d_copies = 0;
    size_t d2h_copies = 0;
    size_t h2d_bytes = 0;
    size_t d2h_bytes = 0;
  };
  Counters counters() const;
  size_t live_allocations() const;
  // Makes the next allocation fail (to test error paths).
  void fail_next_allocation() { fail_next_ = true; }

 private:
  // Whether ptr lies in one of the blocks given out (the answer of owns(), never an error).
  bool owns_block(const void* ptr) const { return block_device(ptr) >= 0; }
  // The device index of the block ptr lies in, -1 if none.
  int block_device(const void* ptr) const;
  struct Block {
    size_t size;
    size_t alignment;
    int8_t index;
  };
  DeviceType type_;
  int count_;
  size_t capacity_;
  bool fail_next_ = false;
  std::map<int8_t, size_t> live_bytes_;  // per device index
  mutable std::mutex mu_;
  std::map<const char*, Block> blocks_;  // start -> block
  Counters counters_;
};

}  // namespace etc::rt
