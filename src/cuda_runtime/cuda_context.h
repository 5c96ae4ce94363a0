// Per-device CUDA state shared by the CUDA allocator, the CUDA delegate and its kernels: one
// stream per device (every copy and kernel of etc on that device is ordered on it), a cuBLAS
// handle created on first use, and a scratch buffer for kernels that need temporary memory
// (im2col). cuBLAS is not linked: it is loaded with dlopen when a GEMM first needs it, so the
// etc binary starts on machines without it.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cstdint>

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
  // Changes whenever scratch() moves the buffer: a captured CUDA graph that used scratch
  // memory is stale once this differs from its value at capture.
  uint64_t scratch_generation() const { return scratch_generation_; }
  // A word (pinned host memory mapped into the device; the device address is returned) that
  // kernels set to 1 when they meet an index out of range (embedding, index.Tensor,
  // index_put): checking each launch would synchronise, so synchronize() and device-to-host
  // copies read it. Allocated (zeroed) on first use, which must not be inside a graph capture.
  Result<int32_t*> error_flag();

  // Waits for everything queued on the stream; an error when a kernel set error_flag() since
  // the flag was last read (the flag is cleared). Device-to-host copies read it too.
  Status synchronize() const;
  // After the stream is synchronised: the error error_flag() holds, if any, and clears it.
  Status take_error_flag() const;

 private:
  explicit DeviceContext(int index) : index_(index) {}
  int index_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
  int32_t* error_flag_ = nullptr;         // host side (pinned, mapped)
  int32_t* error_flag_device_ = nullptr;  // its device address
  uint64_t scratch_generation_ = 0;
};

// The device contexts of one runtime, created on first use per device index.
class DeviceContexts {
 public:
  Result<DeviceContext*> get(int index);
  // Waits for the streams of every device context created so far.
  Status synchronize_all();

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
