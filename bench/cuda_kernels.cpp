// cuda_kernels: the CUDA delegate's kernels against the GPU's measured peaks. The peaks are
// a large device-to-device cudaMemcpy (bandwidth, bytes read + written) and a large cuBLAS
// SGEMM (float32 TFLOP/s, default math mode as the delegate uses it). Each op is then called
// through its registered kernel (argument checks included, as the delegate calls it) on
// device tensors and timed with CUDA events; the table gives the achieved GB/s or TFLOP/s
// and the ratio to the peak, next to the target (memory-bound >= 80% of the copy,
// GEMM-bound >= 85% of cuBLAS; a decode step's weight-only product reads its weight once, so
// it is memory-bound: its weight's bytes against the copy). Prints a markdown table; never
// fails on a figure.
//
// Usage: cuda_kernels [--quick]   (exit 77 when no GPU is visible)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/runtime/cuda_context.h"
#include "backends/cuda/runtime/cuda_ops.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace {

using namespace etc;
using rt::TensorView;
using rt::Value;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "cuda_kernels: %s\n", what.c_str());
  std::exit(1);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorName(e));
}

// Milliseconds per call of fn (median of `reps` event-timed calls after 3 warm-ups).
double time_ms(cudaStream_t s, const std::function<void()>& fn, int reps) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    fn();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    check(cudaEventRecord(a, s), "cudaEventRecord");
    fn();
    check(cudaEventRecord(b, s), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

struct Bench {
  cuda::DeviceContext* dev;
  rt::OperatorRegistry ops;
  std::vector<void*> allocations;
  int reps;
  double copy_gbps = 0, gemm_tflops = 0;

  ~Bench() {
    for (void* p : allocations)
      cudaFree(p);
  }

  Value* tensor(DType t, std::vector<int64_t> sizes, std::vector<std::unique_ptr<Value>>& keep) {
    auto v = std::make_unique<Value>();
    v->kind = Value::Kind::kTensor;
    v->tensor.dtype = t;
    v->tensor.sizes = std::move(sizes);
    v->tensor.device = Device{DeviceType::kCUDA, 0};
    void* p = nullptr;
    check(cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(v->tensor.nbytes(), 1))),
          "cudaMalloc");
    check(cudaMemset(p, 0, static_cast<size_t>(v->tensor.nbytes())), "cudaMemset");
    allocations.push_back(p);
    v->tensor.data = p;
    keep.push_back(std::move(v));
    return keep.back().get();
  }

  // Times op(args); `bytes` moved or `flops` done per call give the figure.
  void row(const std::string& op, const std::string& shape, const std::string& dtype,
           std::vector<Value*> args, double bytes, double flops) {
    const rt::RegisteredKernel* kernel = ops.find(op);
    if (kernel == nullptr) die(op + " is not registered");
    rt::KernelFn fn = kernel->fn;
    auto call = [&] {
      rt::KernelContext ctx{op, nullptr, dev};
      ctx.schema = kernel->call_schema();
      Status s = fn(ctx, std::span<Value*>(args));
      if (!s.ok()) die(op + ": " + s.to_string());
    };
    const double ms = time_ms(dev->stream(), call, reps);
    if (flops > 0) {
      const double tf = flops / (ms * 1e-3) / 1e12;
      std::printf("| %s | %s | %s | %.3f | %.1f TFLOP/s | %.0f%% of cuBLAS SGEMM | >= 85%% |\n",
                  op.c_str(), shape.c_str(), dtype.c_str(), ms, tf, 100 * tf / gemm_tflops);
    } else {
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      std::printf("| %s | %s | %s | %.3f | %.0f GB/s | %.0f%% of D2D copy | >= 80%% |\n",
                  op.c_str(), shape.c_str(), dtype.c_str(), ms, gbps, 100 * gbps / copy_gbps);
    }
    std::fflush(stdout);
  }
};

Value scalar_int(int64_t i) {
  Value v;
  v.kind = Value::Kind::kInt;
  v.i = i;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  Result<int> count = cuda::visible_device_count();
  if (!count.ok() || *count == 0) {
    std::printf("cuda_kernels: no GPU visible (%s)\n",
                count.ok() ? "0 devices" : count.status().message().c_str());
    return 77;
  }
  cuda::DeviceContexts contexts;
  Result<cuda::DeviceContext*> dev = contexts.get(0);
  if (!dev.ok()) die(dev.status().to_string());
  Bench b;
  b.dev = *dev;
  b.reps = quick ? 5 : 20;
  if (Status s = cuda::register_cuda_kernels(b.ops); !s.ok()) die(s.to_string());
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t s = b.dev->stream();

  // Peak bandwidth: a 1 GiB device-to-device copy (counted as read + write).
  const size_t copy_bytes = size_t{1} << 30;
  void *src = nullptr, *dst = nullptr;
  check(cudaMalloc(&src, copy_bytes), "cudaMalloc");
  check(cudaMalloc(&dst, copy_bytes), "cudaMalloc");
  const double copy_ms = time_ms(
      s,
      [&] {
        check(cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpy");
      },
      b.reps);
  b.copy_gbps = 2.0 * static_cast<double>(copy_bytes) / (copy_ms * 1e-3) / 1e9;
  cudaFree(src);
  cudaFree(dst);

  // Peak GEMM: an 8192^3 cuBLAS SGEMM.
  Result<const cuda::CublasApi*> api = cuda::cublas_api();
  if (!api.ok()) die(api.status().to_string());
  Result<cublasHandle_t> handle = b.dev->cublas();
  if (!handle.ok()) die(handle.status().to_string());
  const int n = 8192;
  float *ga = nullptr, *gb = nullptr, *gc = nullptr;
  const size_t gbytes = static_cast<size_t>(n) * n * sizeof(float);
  check(cudaMalloc(reinterpret_cast<void**>(&ga), gbytes), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&gb), gbytes), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&gc), gbytes), "cudaMalloc");
  check(cudaMemset(ga, 0, gbytes), "cudaMemset");
  check(cudaMemset(gb, 0, gbytes), "cudaMemset");
  const float f_one = 1, f_zero = 0;
  const double gemm_ms = time_ms(
      s,
      [&] {
        (*api)->sgemm(*handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &f_one, ga, n, gb, n, &f_zero, gc,
                      n);
      },
      quick ? 3 : 10);
  b.gemm_tflops = 2.0 * n * static_cast<double>(n) * n / (gemm_ms * 1e-3) / 1e12;
  cudaFree(ga);
  cudaFree(gb);
  cudaFree(gc);

  std::printf("GPU: %s (sm_%d%d, %zu MiB)\n", prop.name, prop.major, prop.minor,
              prop.totalGlobalMem >> 20);
  std::printf(
      "peaks: D2D cudaMemcpy %.0f GB/s (1 GiB, read + write); cuBLAS SGEMM %.1f TFLOP/s "
      "(%d^3, float32)\n\n",
      b.copy_gbps, b.gemm_tflops, n);
  std::printf("| op | shape | dtype | ms | achieved | ratio | target |\n");
  std::printf("|---|---|---|---|---|---|---|\n");

  std::vector<std::unique_ptr<Value>> keep;
  const int64_t big = quick ? (int64_t{1} << 24) : (int64_t{1} << 26);
  const std::string big_s = "[" + std::to_string(big) + "]";
  Value alpha = scalar_int(1);
  {
    Value* x = b.tensor(DType::kFloat32, {big}, keep);
    Value* y = b.tensor(DType::kFloat32, {big}, keep);
    Value* o = b.tensor(DType::kFloat32, {big}, keep);
    b.row("aten::add.Tensor", big_s, "float32", {x, y, &alpha, o, o}, 12.0 * big, 0);
    b.row("aten::relu.default", big_s, "float32", {x, o, o}, 8.0 * big, 0);
    Value approx;
    approx.kind = Value::Kind::kString;
    approx.s = "tanh";
    b.row("aten::gelu.default", big_s, "float32", {x, &approx, o, o}, 8.0 * big, 0);
    Value* h = b.tensor(DType::kFloat16, {big}, keep);
    Value dt = scalar_int(5);  // ScalarType Half
    Value none;
    Value nb;
    nb.kind = Value::Kind::kBool;
    b.row("aten::_to_copy.default", big_s, "float32->float16",
          {x, &dt, &none, &none, &none, &nb, &none, h, h}, 6.0 * big, 0);
    Value* hx = b.tensor(DType::kFloat16, {big}, keep);
    Value* hy = b.tensor(DType::kFloat16, {big}, keep);
    b.row("aten::add.Tensor", big_s, "float16", {hx, hy, &alpha, h, h}, 6.0 * big, 0);
  }
  {
    const int64_t rows = quick ? 2048 : 8192, cols = 4096;
    const std::string sh = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
    Value* x = b.tensor(DType::kFloat32, {rows, cols}, keep);
    Value* o = b.tensor(DType::kFloat32, {rows, cols}, keep);
    Value dim = scalar_int(-1);
    Value f;
    f.kind = Value::Kind::kBool;
    b.row("aten::_softmax.default", sh, "float32", {x, &dim, &f, o, o}, 8.0 * rows * cols, 0);
    Value ns;
    ns.kind = Value::Kind::kIntList;
    ns.ints = {cols};
    Value* w = b.tensor(DType::kFloat32, {cols}, keep);
    Value* bias = b.tensor(DType::kFloat32, {cols}, keep);
    Value* mean = b.tensor(DType::kFloat32, {rows, 1}, keep);
    Value* rstd = b.tensor(DType::kFloat32, {rows, 1}, keep);
    Value eps;
    eps.kind = Value::Kind::kDouble;
    eps.d = 1e-5;
    Value ret;
    ret.kind = Value::Kind::kTensorList;
    ret.tensors = {&o->tensor, &mean->tensor, &rstd->tensor};
    b.row("aten::native_layer_norm.default", sh, "float32",
          {x, &ns, w, bias, &eps, o, mean, rstd, &ret}, 8.0 * rows * cols, 0);
    Value dims;
    dims.kind = Value::Kind::kIntList;
    dims.ints = {-1};
    Value keepdim;
    keepdim.kind = Value::Kind::kBool;
    Value* red = b.tensor(DType::kFloat32, {rows}, keep);
    Value none;
    b.row("aten::sum.dim_IntList", sh, "float32", {x, &dims, &keepdim, &none, red, red},
          4.0 * rows * cols, 0);
    Value* t = b.tensor(DType::kFloat32, {cols, rows}, keep);
    Value d0 = scalar_int(0), d1 = scalar_int(1);
    b.row("aten::transpose.int", sh, "float32", {x, &d0, &d1, t, t}, 8.0 * rows * cols, 0);
  }
  {
    const int64_t m = quick ? 2048 : 8192, k = 4096, nn = 4096;
    const std::string sh = "[" + std::to_string(m) + ", " + std::to_string(k) + "] x [" +
                           std::to_string(nn) + ", " + std::to_string(k) + "]^T";
    for (DType t : {DType::kFloat32, DType::kFloat16}) {
      Value* x = b.tensor(t, {m, k}, keep);
      Value* w = b.tensor(t, {nn, k}, keep);
      Value* bias = b.tensor(t, {nn}, keep);
      Value* o = b.tensor(t, {m, nn}, keep);
      b.row("aten::linear.default", sh, std::string(dtype_name(t)), {x, w, bias, o, o}, 0,
            2.0 * m * nn * k);
    }
  }
  {
    // A decode step's products (one row): each weight read once, so the figure is the weight's
    // bytes per second against the copy's. bf16 through linear (cuBLAS), then the same layer
    // weight-only (etc::weight_only_linear, the kernel that reads the packed weight): int8 per
    // row, and 4-bit in groups of 128 and 32 with a bf16 zero point per group.
    const int64_t k = 4096;
    const DType bf = DType::kBFloat16;
    Value none;
    for (const int64_t nn : {int64_t{4096}, quick ? int64_t{4096} : int64_t{14336}}) {
      const std::string sh = "[1, " + std::to_string(k) + "] x [" + std::to_string(nn) + ", " +
                             std::to_string(k) + "]^T";
      Value* x = b.tensor(bf, {1, k}, keep);
      Value* o = b.tensor(bf, {1, nn}, keep);
      Value* w = b.tensor(bf, {nn, k}, keep);
      b.row("aten::linear.default", sh, "bfloat16", {x, w, &none, o, o}, 2.0 * nn * k, 0);
      struct Form {
        const char* name;
        bool int4;
        int64_t group;
        bool zero;
      };
      for (const Form f : {Form{"int8, per row", false, k, false},
                           Form{"int4 g128", true, 128, true}, Form{"int4 g32", true, 32, true}}) {
        const int64_t groups = k / f.group;
        Value* q = b.tensor(f.int4 ? DType::kUInt8 : DType::kInt8, {nn, f.int4 ? k / 2 : k}, keep);
        Value* scale = b.tensor(bf, {nn, groups}, keep);
        Value* zero = f.zero ? b.tensor(bf, {nn, groups}, keep) : &none;
        Value gs = scalar_int(f.group);
        const double bytes =
            static_cast<double>(nn) * (f.int4 ? k / 2 : k) + 2.0 * nn * groups * (f.zero ? 2 : 1);
        b.row("etc::weight_only_linear.default", sh, std::string("bfloat16, ") + f.name,
              {x, q, scale, &gs, zero, &none, o, o}, bytes, 0);
      }
    }
  }
  {
    const int64_t n_img = quick ? 8 : 32, c = 64, hw = 56;
    Value* x = b.tensor(DType::kFloat32, {n_img, c, hw, hw}, keep);
    Value stride, pad, dil, opad, tr, groups;
    stride.kind = pad.kind = dil.kind = opad.kind = Value::Kind::kIntList;
    stride.ints = {1, 1};
    pad.ints = {1, 1};
    dil.ints = {1, 1};
    opad.ints = {0, 0};
    tr.kind = Value::Kind::kBool;
    groups = scalar_int(1);
    Value* w = b.tensor(DType::kFloat32, {c, c, 3, 3}, keep);
    Value* bias = b.tensor(DType::kFloat32, {c}, keep);
    Value* o = b.tensor(DType::kFloat32, {n_img, c, hw, hw}, keep);
    const std::string sh = "[" + std::to_string(n_img) + ", 64, 56, 56] 3x3 -> 64";
    b.row("aten::convolution.default", sh, "float32",
          {x, w, bias, &stride, &pad, &dil, &tr, &opad, &groups, o, o}, 0,
          2.0 * n_img * c * hw * hw * c * 9);
    Value* dw = b.tensor(DType::kFloat32, {c, 1, 3, 3}, keep);
    Value dgroups = scalar_int(c);
    b.row("aten::convolution.default", sh + " depthwise", "float32",
          {x, dw, bias, &stride, &pad, &dil, &tr, &opad, &dgroups, o, o}, 8.0 * n_img * c * hw * hw,
          0);
    Value ks;
    ks.kind = Value::Kind::kIntList;
    ks.ints = {2, 2};
    Value empty, zero, one, ceil;
    empty.kind = zero.kind = one.kind = Value::Kind::kIntList;
    zero.ints = {0, 0};
    one.ints = {1, 1};
    ceil.kind = Value::Kind::kBool;
    Value* p = b.tensor(DType::kFloat32, {n_img, c, hw / 2, hw / 2}, keep);
    b.row("aten::max_pool2d.default", "[" + std::to_string(n_img) + ", 64, 56, 56] 2x2", "float32",
          {x, &ks, &empty, &zero, &one, &ceil, p, p}, 5.0 * n_img * c * hw * hw, 0);
  }
  Status sync = b.dev->synchronize();
  if (!sync.ok()) die(sync.to_string());
  return 0;
}
