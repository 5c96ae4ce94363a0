// Per-device CUDA state shared by the CUDA allocator, the CUDA delegate and its kernels: one
// stream per device (every copy and kernel of etc on that device is ordered on it), a cuBLAS
// handle created on first use, and a scratch buffer for kernels that need temporary memory
// (im2col). cuBLAS is not linked: it is loaded with dlopen when a GEMM first needs it, so the
// etc binary starts on machines without it.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cstdint>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "support/status.h"

namespace etc::cuda {

// The few cuBLAS entry points etc uses, resolved from libcublas.so.13 (or libcublas.so).
struct CublasApi {
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  decltype(&::cublasSetMathMode) set_math_mode = nullptr;
  decltype(&::cublasSgemm_v2) sgemm = nullptr;
  decltype(&::cublasSgemmStridedBatched) sgemm_strided_batched = nullptr;
  // 16-bit float GEMMs with float accumulation (optional: a tiled kernel stands in).
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void*, const void*, cudaDataType, int,
                                      const void*, cudaDataType, int, const void*, void*,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedExFn = cublasStatus_t (*)(
      cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
      cudaDataType, int, long long, const void*, cudaDataType, int, long long, const void*, void*,
      cudaDataType, int, long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  GemmExFn gemm_ex = nullptr;
  GemmStridedBatchedExFn gemm_strided_batched_ex = nullptr;
  decltype(&::cublasGetStatusName) status_name = nullptr;    // optional
  decltype(&::cublasGetStatusString) status_text = nullptr;  // optional
};

// Loads cuBLAS once per process. A missing library or symbol is kDeviceUnavailable
// ("cuBLAS not found: ..."), never a crash.
Result<const CublasApi*> cublas_api();

// The math mode every cuBLAS handle gets: default math, and no reduced-precision split-K
// reductions (16-bit GEMMs round once, from float accumulators).
inline constexpr cublasMath_t kCublasMathMode = static_cast<cublasMath_t>(
    CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);

// Maps a cuBLAS status to a Status naming the call, file and line.
Status status_from_cublas(cublasStatus_t status, const char* call, const char* file, int line);

// How many CUDA devices are visible; an error (no driver, no device) says what was found.
Result<int> visible_device_count();

// The bookkeeping of a device's scratch buffer, apart from the CUDA calls that wait, allocate
// and free (so that a host test can drive it with stand-ins). The generation changes whenever
// the buffer the pointer names stops being valid: a CUDA graph captured against the old
// buffer must not be replayed, even when allocating the new one fails.
class ScratchBuffer {
 public:
  struct Ops {
    std::function<Status()> wait;  // until queued kernels stop reading it
    std::function<Result<void*>(size_t)> allocate;
    std::function<void(void*)> free;
  };
  // At least `bytes`, valid until the next call that grows it. Growing waits, frees the old
  // buffer (bumping the generation at once), then allocates; if that fails, the buffer is
  // empty and the next call tries again.
  Result<void*> get(size_t bytes, const Ops& ops);
  // Frees the buffer (at teardown); the generation moves on.
  void release(const Ops& ops);
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  uint64_t generation() const { return generation_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  uint64_t generation_ = 0;
};

// How the CUDA delegates on a device ran with --cuda-graphs (etc run --json reports them).
struct GraphCounts {
  uint64_t captures = 0;  // graphs captured
  uint64_t replays = 0;   // calls that launched a cached graph
  uint64_t plain = 0;     // calls run without a graph (first calls for new pointers or sizes)
  uint64_t failed = 0;    // captures that failed (the delegate then runs without graphs)
  GraphCounts& operator+=(const GraphCounts& o) {
    captures += o.captures;
    replays += o.replays;
    plain += o.plain;
    failed += o.failed;
    return *this;
  }
};

// One device's stream, cuBLAS handle and scratch memory. Not thread-safe: a device context is
// used by one runtime (one thread) at a time, like the Method that runs on it.
class DeviceContext {
 public:
  static Result<std::unique_ptr<DeviceContext>> create(int index);
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;
  ~DeviceContext();

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }
  // Makes this device current for the calling thread.
  Status activate() const;
  // The cuBLAS handle bound to stream(), created (and cuBLAS loaded) on first use.
  Result<cublasHandle_t> cublas();
  // At least `bytes` of device memory, valid until the next call; grows, never shrinks.
  Result<void*> scratch(size_t bytes);
  // Changes whenever scratch() frees or moves the buffer: a captured CUDA graph that used
  // scratch memory is stale once this differs from its value at capture.
  uint64_t scratch_generation() const { return scratch_.generation(); }
  // A word (pinned host memory mapped into the device; the device address is returned) that
  // kernels set to 1 when they meet an index out of range (embedding, index.Tensor,
  // index_put): checking each launch would synchronise, so synchronize() and device-to-host
  // copies read it. Allocated (zeroed) on first use, which must not be inside a graph capture.
  Result<int32_t*> error_flag();
  // The graph counts of the delegates on this device.
  GraphCounts& graph_counts() { return graph_counts_; }

  // Waits for everything queued on the stream; an error when a kernel set error_flag() since
  // the flag was last read (the flag is cleared). Device-to-host copies read it too.
  Status synchronize() const;
  // After the stream is synchronised: the error error_flag() holds, if any, and clears it.
  Status take_error_flag() const;

 private:
  explicit DeviceContext(int index) : index_(index) {}
  // The CUDA calls behind scratch_: wait for the stream, cudaMalloc, cudaFree.
  ScratchBuffer::Ops scratch_ops() const;
  int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  ScratchBuffer scratch_;
  int32_t* error_flag_ = nullptr;         // host side (pinned, mapped)
  int32_t* error_flag_device_ = nullptr;  // its device address
  GraphCounts graph_counts_;
};

// The device contexts of one runtime, created on first use per device index.
class DeviceContexts {
 public:
  Result<DeviceContext*> get(int index);
  // Waits for the streams of every device context created so far.
  Status synchronize_all();
  // The graph counts of every device context created so far, added up.
  GraphCounts graph_counts();

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
};

}  // namespace etc::cuda

// ETC_CUBLAS_RETURN_IF_ERROR(api->sgemm(...)): returns a located Status on failure.
#define ETC_CUBLAS_RETURN_IF_ERROR(call)                                                 \
  do {                                                                                   \
    cublasStatus_t etc_cublas_st_ = (call);                                              \
    if (etc_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                         \
      return ::etc::cuda::status_from_cublas(etc_cublas_st_, #call, __FILE__, __LINE__); \
  } while (0)
