#include "backends/cuda/runtime/cuda_context.h"

#include <dlfcn.h>

#include <string>

#include "backends/cuda/runtime/cuda_devices.h"
#include "backends/cuda/runtime/cuda_status.h"

namespace etc::cuda {
namespace {

// The result of loading cuBLAS, computed once (the library stays loaded for the process).
struct CublasLoad {
  CublasApi api;
  Status status;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

CublasLoad load_cublas() {
  CublasLoad r;
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libcublas.so.13", "libcublas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    const char* err = dlerror();
    tried += std::string(tried.empty() ? "" : "; ") + (err != nullptr ? err : name);
  }
  if (lib == nullptr) {
    r.status = Status(ErrorCode::kDeviceUnavailable,
                      "cuBLAS not found: " + tried +
                          " (install the CUDA 13 cuBLAS library or add it to LD_LIBRARY_PATH)");
    return r;
  }
  std::string missing;
  resolve(lib, "cublasCreate_v2", &r.api.create, &missing);
  resolve(lib, "cublasDestroy_v2", &r.api.destroy, &missing);
  resolve(lib, "cublasSetStream_v2", &r.api.set_stream, &missing);
  resolve(lib, "cublasSetMathMode", &r.api.set_math_mode, &missing);
  resolve(lib, "cublasSgemm_v2", &r.api.sgemm, &missing);
  resolve(lib, "cublasSgemmStridedBatched", &r.api.sgemm_strided_batched, &missing);
  std::string ignored;
  resolve(lib, "cublasGemmEx", &r.api.gemm_ex, &ignored);
  resolve(lib, "cublasGemmStridedBatchedEx", &r.api.gemm_strided_batched_ex, &ignored);
  resolve(lib, "cublasGetStatusName", &r.api.status_name, &ignored);
  resolve(lib, "cublasGetStatusString", &r.api.status_text, &ignored);
  if (!missing.empty()) {
    r.status = Status(ErrorCode::kDeviceUnavailable,
                      "cuBLAS not found: the loaded libcublas lacks " + missing);
  }
  return r;
}

}  // namespace

Result<const CublasApi*> cublas_api() {
  static const CublasLoad loaded = load_cublas();  // thread-safe, once per process
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.api;
}

Status status_from_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  std::string name = "CUBLAS_STATUS_" + std::to_string(static_cast<int>(status));
  std::string text;
  if (Result<const CublasApi*> api = cublas_api(); api.ok()) {
    if ((*api)->status_name != nullptr) name = (*api)->status_name(status);
    if ((*api)->status_text != nullptr) text = (*api)->status_text(status);
  }
  std::string where = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                      name + (text.empty() ? "" : " (" + text + ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    return Status(ErrorCode::kDeviceUnavailable, "out of device memory: " + where);
  if (status == CUBLAS_STATUS_NOT_INITIALIZED || status == CUBLAS_STATUS_ARCH_MISMATCH)
    return Status(ErrorCode::kDeviceUnavailable, where);
  return internal_error(where);
}

Result<int> visible_device_count() {
  return count_devices();
}

Result<std::unique_ptr<DeviceContext>> DeviceContext::create(int index) {
  ETC_ASSIGN_OR_RETURN(int count, visible_device_count());
  if (index < 0 || index >= count) {
    return Status(ErrorCode::kDeviceUnavailable, "cuda:" + std::to_string(index) +
                                                     " does not exist (" + std::to_string(count) +
                                                     " CUDA device(s) visible)");
  }
  cudaDeviceProp prop{};
  ETC_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, index));
  const DeviceInfo info{index, prop.name, prop.major, prop.minor, 0};
  ETC_RETURN_IF_ERROR(check_supported(info, built_architectures()));
  std::unique_ptr<DeviceContext> c(new DeviceContext(index));
  ETC_CUDA_RETURN_IF_ERROR(cudaSetDevice(index));
  // The recorded architectures can be wrong or unknown; the driver knows whether the device
  // code loads.
  ETC_RETURN_IF_ERROR(check_kernel_image(info));
  // Non-blocking: etc's stream does not synchronise with the legacy default stream, so an
  // application thread using that stream neither waits on etc's kernels nor breaks a CUDA
  // graph capture in progress on etc's stream.
  ETC_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
  return c;
}

DeviceContext::~DeviceContext() {
  // Never throws: a failure while tearing down cannot be acted on; it is logged, and the
  // runtime's error slot is cleared so that a later, unrelated call is not blamed for it.
  if (!teardown_ok(cudaSetDevice(index_), "cudaSetDevice")) return;
  if (stream_ != nullptr) teardown_ok(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  if (cublas_ != nullptr) {
    if (Result<const CublasApi*> api = cublas_api(); api.ok()) (void)(*api)->destroy(cublas_);
  }
  scratch_.release(scratch_ops());
  if (error_flag_ != nullptr) teardown_ok(cudaFreeHost(error_flag_), "cudaFreeHost");
  if (stream_ != nullptr) teardown_ok(cudaStreamDestroy(stream_), "cudaStreamDestroy");
}

Status DeviceContext::activate() const {
  ETC_CUDA_RETURN_IF_ERROR(cudaSetDevice(index_));
  return Status();
}

Result<cublasHandle_t> DeviceContext::cublas() {
  if (cublas_ != nullptr) return cublas_;
  ETC_ASSIGN_OR_RETURN(const CublasApi* api, cublas_api());
  ETC_RETURN_IF_ERROR(activate());
  cublasHandle_t h = nullptr;
  ETC_CUBLAS_RETURN_IF_ERROR(api->create(&h));
  cublasStatus_t st = api->set_stream(h, stream_);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)api->destroy(h);
    return status_from_cublas(st, "cublasSetStream_v2", __FILE__, __LINE__);
  }
  // One rounding per output: cuBLAS's default math mode lets 16-bit GEMMs reduce split-K
  // partial sums in reduced precision, rounding more than once on large K.
  st = api->set_math_mode(h, kCublasMathMode);
  if (st != CUBLAS_STATUS_SUCCESS) {
    (void)api->destroy(h);
    return status_from_cublas(st, "cublasSetMathMode", __FILE__, __LINE__);
  }
  cublas_ = h;
  return cublas_;
}

Result<void*> ScratchBuffer::get(size_t bytes, const Ops& ops) {
  if (bytes <= bytes_) return data_;  // bytes_ is 0 while there is no buffer
  if (data_ != nullptr) {
    // Kernels queued on the stream may still read the old buffer.
    ETC_RETURN_IF_ERROR(ops.wait());
    release(ops);
  }
  ETC_ASSIGN_OR_RETURN(void* p, ops.allocate(bytes));
  data_ = p;
  bytes_ = bytes;
  ++generation_;
  return data_;
}

void ScratchBuffer::release(const Ops& ops) {
  if (data_ == nullptr) return;
  ops.free(data_);
  data_ = nullptr;
  bytes_ = 0;
  // Whatever happens next (the new allocation may fail), graphs that captured the freed
  // buffer's address are stale from now on.
  ++generation_;
}

ScratchBuffer::Ops DeviceContext::scratch_ops() const {
  return ScratchBuffer::Ops{
      [this]() -> Status {
        ETC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
        return Status();
      },
      [this](size_t bytes) -> Result<void*> {
        void* p = nullptr;
        cudaError_t err = cudaMalloc(&p, bytes);
        if (err != cudaSuccess) {
          return std::move(status_from_cuda(err, "cudaMalloc", __FILE__, __LINE__))
              .add_context("while allocating " + std::to_string(bytes) +
                           " bytes of scratch memory on cuda:" + std::to_string(index_));
        }
        return p;
      },
      [](void* p) { teardown_ok(cudaFree(p), "cudaFree"); }};
}

Result<void*> DeviceContext::scratch(size_t bytes) {
  if (bytes <= scratch_.bytes()) return scratch_.data();
  ETC_RETURN_IF_ERROR(activate());
  return scratch_.get(bytes, scratch_ops());
}

Result<int32_t*> DeviceContext::error_flag() {
  if (error_flag_ != nullptr) return error_flag_device_;
  ETC_RETURN_IF_ERROR(activate());
  // Pinned host memory mapped into the device: kernels write it (only on an error) and the
  // host reads it after a synchronisation without a copy.
  void* host = nullptr;
  ETC_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&host, sizeof(int32_t), cudaHostAllocMapped));
  *static_cast<volatile int32_t*>(host) = 0;
  void* device = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&device, host, 0); e != cudaSuccess) {
    teardown_ok(cudaFreeHost(host), "cudaFreeHost");
    ETC_CUDA_RETURN_IF_ERROR(e);
  }
  error_flag_ = static_cast<int32_t*>(host);
  error_flag_device_ = static_cast<int32_t*>(device);
  return error_flag_device_;
}

Status DeviceContext::synchronize() const {
  ETC_RETURN_IF_ERROR(activate());
  ETC_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return take_error_flag();
}

Status DeviceContext::take_error_flag() const {
  if (error_flag_ == nullptr) return Status();
  volatile int32_t* flag = error_flag_;
  if (*flag == 0) return Status();
  *flag = 0;
  return invalid_input("cuda:" + std::to_string(index_) +
                       ": an index was out of range in embedding, index.Tensor or index_put (the "
                       "CUDA kernels gave zeros for those elements or left them unwritten)");
}

Result<DeviceContext*> DeviceContexts::get(int index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < 0) return Status(ErrorCode::kDeviceUnavailable, "negative CUDA device index");
  if (static_cast<size_t>(index) >= contexts_.size()) contexts_.resize(index + 1);
  if (contexts_[index] == nullptr) {
    ETC_ASSIGN_OR_RETURN(contexts_[index], DeviceContext::create(index));
  }
  return contexts_[index].get();
}

GraphCounts DeviceContexts::graph_counts() {
  std::lock_guard<std::mutex> lock(mu_);
  GraphCounts sum;
  for (const auto& c : contexts_)
    if (c != nullptr) sum += c->graph_counts();
  return sum;
}

Status DeviceContexts::synchronize_all() {
  std::lock_guard<std::mutex> lock(mu_);
  Status first;  // every device is waited for (and its flag read) even after an error
  for (const auto& c : contexts_) {
    if (c == nullptr) continue;
    Status s = c->synchronize();
    if (first.ok() && !s.ok()) first = std::move(s);
  }
  return first;
}

}  // namespace etc::cuda
