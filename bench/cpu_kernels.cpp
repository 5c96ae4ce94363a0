// cpu_kernels: the CPU kernels' throughput against what this machine can do, measured side by
// side in one run. References: memcpy bandwidth (256 MiB buffers, best of several; bytes read +
// written) and the single-threaded peak FLOP rate of a register-resident FMA loop (AVX2/FMA when
// the CPU has it, else SSE2 mul+add); for information, a streaming-store AVX2 copy and the
// AVX-512 FMA peak. Kernels are called by name through the registry that register_cpu_kernels
// fills, with arguments built as the runtime passes them (inputs, outs, then the return value):
// GEMM (aten::mm.out) and convolution (aten::convolution.out) in GFLOP/s against the peak;
// elementwise ops, softmax and layer norm in GB/s (each tensor's bytes read + written once)
// against memcpy, both the headline figure and a 64 MiB memcpy timed alternately with the kernel
// (so that both see the same background load). Each figure is the median of several timed
// repetitions after a warm-up; 16 outputs of every GEMM and convolution are checked against a
// double-precision reference. Inputs use a fixed seed. Prints figures and ratios; never fails on
// them. Runs in about 25 s.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/parallel.h"
#include "runtime/tensor.h"

namespace etc::bench {
namespace {

using Clock = std::chrono::steady_clock;
using rt::Value;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median seconds of one call of `fn`: warm-up calls first, then timed repetitions, as many as
// fit in about `budget_s` (at least `min_reps`, at most `max_reps`).
double time_median(const std::function<void()>& fn, double budget_s = 1.5, int min_reps = 11,
                   int max_reps = 2000) {
  auto t0 = Clock::now();
  fn();  // warm-up (touches packing buffers and caches)
  const double first = seconds_since(t0);
  if (first < budget_s / 20) fn();
  int reps = first > 0 ? static_cast<int>(budget_s / first) : max_reps;
  reps = std::clamp(reps, min_reps, max_reps);
  std::vector<double> t;
  t.reserve(static_cast<size_t>(reps));
  for (int i = 0; i < reps; ++i) {
    auto s = Clock::now();
    fn();
    t.push_back(seconds_since(s));
  }
  return median(std::move(t));
}

// Medians of `fn` and `ref` timed alternately (fn, ref, fn, ref, ...), so that both see the
// same background load: the ratio of the two stays meaningful on a busy machine.
std::pair<double, double> time_alternating(const std::function<void()>& fn,
                                           const std::function<void()>& ref, int reps = 41) {
  fn();
  ref();
  std::vector<double> tf, tr;
  for (int i = 0; i < reps; ++i) {
    auto s = Clock::now();
    fn();
    tf.push_back(seconds_since(s));
    s = Clock::now();
    ref();
    tr.push_back(seconds_since(s));
  }
  return {median(std::move(tf)), median(std::move(tr))};
}

// 64-byte aligned float storage, filled with uniform values in [lo, hi) from a fixed seed.
struct FloatBuffer {
  explicit FloatBuffer(int64_t n) : size(n) {
    const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    data = static_cast<float*>(std::aligned_alloc(64, std::max<size_t>(bytes, 64)));
    if (data == nullptr) {
      std::fprintf(stderr, "cpu_kernels: out of memory (%lld floats)\n", static_cast<long long>(n));
      std::exit(1);
    }
  }
  ~FloatBuffer() { std::free(data); }
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  void fill_random(uint32_t seed, float lo = -1, float hi = 1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < size; ++i)
      data[i] = dist(gen);
  }
  float* data = nullptr;
  int64_t size = 0;
};

// The arguments of one kernel call, in the runtime's order; pointers stay valid while it lives.
class Args {
 public:
  Value* tensor(float* data, std::vector<int64_t> sizes) {
    Value v;
    v.kind = Value::Kind::kTensor;
    v.tensor.data = data;
    v.tensor.dtype = DType::kFloat32;
    v.tensor.sizes = std::move(sizes);
    return add(std::move(v));
  }
  Value* i(int64_t x) {
    Value v;
    v.kind = Value::Kind::kInt;
    v.i = x;
    return add(std::move(v));
  }
  Value* d(double x) {
    Value v;
    v.kind = Value::Kind::kDouble;
    v.d = x;
    return add(std::move(v));
  }
  Value* b(bool x) {
    Value v;
    v.kind = Value::Kind::kBool;
    v.b = x;
    return add(std::move(v));
  }
  Value* ints(std::vector<int64_t> x) {
    Value v;
    v.kind = Value::Kind::kIntList;
    v.ints = std::move(x);
    return add(std::move(v));
  }
  Value* none() { return add(Value{}); }
  // The argument vector: inputs, outs, then the return value (the out, or a TensorList).
  std::vector<Value*> finish(std::vector<Value*> inputs, std::vector<Value*> outs) {
    std::vector<Value*> all = std::move(inputs);
    all.insert(all.end(), outs.begin(), outs.end());
    if (outs.size() == 1) {
      all.push_back(outs[0]);
    } else {
      Value ret;
      ret.kind = Value::Kind::kTensorList;
      for (Value* o : outs)
        ret.tensors.push_back(&o->tensor);
      all.push_back(add(std::move(ret)));
    }
    return all;
  }

 private:
  Value* add(Value v) {
    values_.push_back(std::move(v));
    return &values_.back();
  }
  std::deque<Value> values_;
};

const rt::OperatorRegistry& registry() {
  static const rt::OperatorRegistry r = [] {
    rt::OperatorRegistry reg;
    Status s = rt::register_cpu_kernels(reg);
    if (!s.ok()) {
      std::fprintf(stderr, "register_cpu_kernels: %s\n", s.to_string().c_str());
      std::exit(1);
    }
    return reg;
  }();
  return r;
}

// A callable that runs `op` with `args`; exits on a missing kernel or a failed call (a failed
// call would make every figure meaningless).
std::function<void()> kernel_call(const std::string& op, std::vector<Value*> args) {
  const rt::RegisteredKernel* kernel = registry().find(op);
  if (kernel == nullptr) {
    std::fprintf(stderr, "cpu_kernels: %s is not registered\n", op.c_str());
    std::exit(1);
  }
  auto run = [op, fn = kernel->fn, schema = kernel->call_schema(), args]() mutable {
    rt::KernelContext ctx{op};
    ctx.schema = schema;
    Status s = fn(ctx, std::span<Value*>(args));
    if (!s.ok()) {
      std::fprintf(stderr, "cpu_kernels: %s failed: %s\n", op.c_str(), s.to_string().c_str());
      std::exit(1);
    }
  };
  run();  // fail early, before any timing
  return run;
}

// ---- References ------------------------------------------------------------------------

// memcpy bandwidth in GB/s (1e9 bytes/s), counting bytes read + written (2x the copy size).
double memcpy_gbps(size_t bytes, int reps) {
  auto* src = static_cast<char*>(std::aligned_alloc(64, bytes));
  auto* dst = static_cast<char*>(std::aligned_alloc(64, bytes));
  std::memset(src, 1, bytes);
  std::memset(dst, 2, bytes);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    std::memcpy(dst, src, bytes);
    best = std::min(best, seconds_since(t0));
  }
  volatile char sink = dst[bytes / 2];
  (void)sink;
  std::free(src);
  std::free(dst);
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

// An AVX2 copy loop with non-temporal (streaming) stores, for information: what a copy can
// reach when it bypasses the caches, in GB/s counting bytes read + written.
__attribute__((target("avx2"))) void stream_copy(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i + 8 <= n; i += 8)
    _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
  _mm_sfence();
}

double stream_copy_gbps(size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  FloatBuffer src(static_cast<int64_t>(n)), dst(static_cast<int64_t>(n));
  std::memset(src.data, 1, bytes);
  std::memset(dst.data, 2, bytes);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    stream_copy(dst.data, src.data, n);
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

constexpr int kAcc = 12;  // independent accumulators: covers FMA latency x ports

// acc = acc * a + b in 12 independent 8-wide accumulators; 2 FLOP per lane per FMA.
__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 acc[kAcc];
  for (int j = 0; j < kAcc; ++j)
    acc[j] = _mm256_set1_ps(static_cast<float>(j) * 0.01f);
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int j = 0; j < kAcc; ++j)
      acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kAcc; ++j)
    s = _mm256_add_ps(s, acc[j]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

// The same with AVX-512 (24 accumulators of 16 lanes), for information only.
__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  constexpr int kAcc512 = 24;
  __m512 acc[kAcc512];
  for (int j = 0; j < kAcc512; ++j)
    acc[j] = _mm512_set1_ps(static_cast<float>(j) * 0.01f);
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int j = 0; j < kAcc512; ++j)
      acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kAcc512; ++j)
    s = _mm512_add_ps(s, acc[j]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

// SSE2: separate mul and add (2 FLOP per lane per pair).
double fma_loop_sse2(int64_t iters) {
  __m128 acc[kAcc];
  for (int j = 0; j < kAcc; ++j)
    acc[j] = _mm_set1_ps(static_cast<float>(j) * 0.01f);
  const __m128 a = _mm_set1_ps(0.999999f);
  const __m128 b = _mm_set1_ps(1e-6f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 32
    for (int j = 0; j < kAcc; ++j)
      acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], a), b);
  }
  __m128 s = acc[0];
  for (int j = 1; j < kAcc; ++j)
    s = _mm_add_ps(s, acc[j]);
  float out[4];
  _mm_storeu_ps(out, s);
  return out[0];
}

// Best GFLOP/s of `loop` over several runs of about 0.1 s each.
double peak_gflops(double (*loop)(int64_t), int lanes, int accumulators) {
  const int64_t iters = 2'000'000;
  volatile double sink = loop(iters / 10);  // warm-up (and frequency ramp)
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    auto t0 = Clock::now();
    sink = sink + loop(iters);
    best = std::min(best, seconds_since(t0));
  }
  const double flops = 2.0 * lanes * accumulators * static_cast<double>(iters);
  return flops / best / 1e9;
}

// ---- Table -----------------------------------------------------------------------------

struct Row {
  std::string group, name, shape;
  double ms, rate, ratio;
  std::string unit, note;
};

void print_rows(const std::vector<Row>& rows, const char* ref_name, const char* last) {
  std::printf("%-27s %-29s %10s %14s %8s  %s\n", "kernel", "shape", "median ms", "rate", ref_name,
              last);
  for (const Row& r : rows) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.1f %s", r.rate, r.unit.c_str());
    std::printf("%-27s %-29s %10.3f %14s %7.1f%%  %s\n", r.name.c_str(), r.shape.c_str(), r.ms,
                rate, 100.0 * r.ratio, r.note.c_str());
  }
}

// Max relative error of `samples` random entries of C = A @ B (row-major) against double.
std::string check_mm(const float* a, const float* b, const float* c, int64_t m, int64_t k,
                     int64_t n, std::mt19937& gen) {
  double worst = 0;
  for (int s = 0; s < 16; ++s) {
    const int64_t i = static_cast<int64_t>(gen() % static_cast<uint32_t>(m));
    const int64_t j = static_cast<int64_t>(gen() % static_cast<uint32_t>(n));
    double ref = 0, mag = 0;
    for (int64_t p = 0; p < k; ++p) {
      ref += static_cast<double>(a[i * k + p]) * b[p * n + j];
      mag += std::fabs(static_cast<double>(a[i * k + p]) * b[p * n + j]);
    }
    worst = std::max(worst, std::fabs(c[i * n + j] - ref) / std::max(mag, 1e-30));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s (err %.1e)", worst < 1e-5 ? "ok" : "WRONG", worst);
  return buf;
}

struct ConvCase {
  const char* name;
  int64_t c_in, h, w, c_out, kh, kw, stride, pad, groups;
};

std::string check_conv(const ConvCase& cc, const float* x, const float* wt, const float* bias,
                       const float* y, int64_t oh, int64_t ow, std::mt19937& gen) {
  const int64_t cin_g = cc.c_in / cc.groups, cout_g = cc.c_out / cc.groups;
  double worst = 0;
  for (int s = 0; s < 16; ++s) {
    const int64_t co = static_cast<int64_t>(gen() % static_cast<uint32_t>(cc.c_out));
    const int64_t i = static_cast<int64_t>(gen() % static_cast<uint32_t>(oh));
    const int64_t j = static_cast<int64_t>(gen() % static_cast<uint32_t>(ow));
    const int64_t g = co / cout_g;
    double ref = bias[co], mag = std::fabs(bias[co]);
    for (int64_t c = 0; c < cin_g; ++c) {
      for (int64_t p = 0; p < cc.kh; ++p) {
        for (int64_t q = 0; q < cc.kw; ++q) {
          const int64_t ih = i * cc.stride - cc.pad + p, iw = j * cc.stride - cc.pad + q;
          if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
          const double t = static_cast<double>(x[((g * cin_g + c) * cc.h + ih) * cc.w + iw]) *
                           wt[((co * cin_g + c) * cc.kh + p) * cc.kw + q];
          ref += t;
          mag += std::fabs(t);
        }
      }
    }
    worst = std::max(worst, std::fabs(y[(co * oh + i) * ow + j] - ref) / std::max(mag, 1e-30));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s (err %.1e)", worst < 1e-5 ? "ok" : "WRONG", worst);
  return buf;
}

int run() {
  const auto t_start = Clock::now();
  std::printf("cpu_kernels: etc's CPU kernels (single-threaded, float32) against this machine's\n");
  std::printf("memcpy bandwidth and peak FLOP rate, measured in the same run; median of timed\n");
  std::printf("repetitions after a warm-up, fixed seed\n\n");

  // ---- references
  const double memcpy_bw = memcpy_gbps(size_t{256} << 20, 20);
  const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool has_avx512 = __builtin_cpu_supports("avx512f");
  const double stream_bw = has_avx2 ? stream_copy_gbps(size_t{256} << 20, 20) : 0;
  const double peak_avx2 = has_avx2 ? peak_gflops(fma_loop_avx2, 8, kAcc) : 0;
  const double peak_sse2 = peak_gflops(fma_loop_sse2, 4, kAcc);
  const double peak_avx512 = has_avx512 ? peak_gflops(fma_loop_avx512, 16, 24) : 0;
  const double peak = has_avx2 ? peak_avx2 : peak_sse2;
  std::printf("references\n");
  std::printf("  memcpy 256 MiB, best of 20 (bytes read + written):%8.1f GB/s\n", memcpy_bw);
  if (has_avx2) {
    std::printf("  AVX2 streaming-store copy, 256 MiB (info only):   %8.1f GB/s\n", stream_bw);
    std::printf("  peak AVX2/FMA, 12 x 8-lane FMA chains, 1 thread:   %8.1f GFLOP/s  <- 100%%\n",
                peak_avx2);
  }
  std::printf("  peak SSE2 mul+add, 12 x 4-lane chains, 1 thread:   %8.1f GFLOP/s%s\n", peak_sse2,
              has_avx2 ? "" : "  <- 100%");
  if (has_avx512) {
    std::printf("  peak AVX-512 FMA, 24 x 16-lane chains (info only): %8.1f GFLOP/s\n",
                peak_avx512);
  }
  std::printf("  gemm micro-kernel in use: %s\n\n", rt::kernels::gemm_float_kernel_name());

  std::mt19937 check_gen(7);
  uint32_t seed = 42;

  // ---- GEMM
  std::vector<Row> gemm_rows;
  struct MmCase {
    int64_t m, k, n;
  };
  const std::vector<MmCase> mm_cases = {{64, 64, 64},
                                        {128, 128, 128},
                                        {256, 256, 256},
                                        {512, 512, 512},
                                        {1024, 1024, 1024},
                                        {1, 784, 128},
                                        {32, 512, 512},
                                        {128, 4096, 1024},
                                        // The GEMM inside the 3x3 64->64 56x56 convolution below
                                        // (weight [64, 576] @ im2col [576, 3136]).
                                        {64, 576, 3136},
                                        // The fused attention's two products for a block of 64
                                        // query rows over Whisper tiny's 1500 positions.
                                        {64, 64, 1500},
                                        {64, 1500, 64}};
  for (const MmCase& c : mm_cases) {
    FloatBuffer a(c.m * c.k), b(c.k * c.n), out(c.m * c.n);
    a.fill_random(seed++);
    b.fill_random(seed++);
    Args args;
    auto call =
        kernel_call("aten::mm.out",
                    args.finish({args.tensor(a.data, {c.m, c.k}), args.tensor(b.data, {c.k, c.n})},
                                {args.tensor(out.data, {c.m, c.n})}));
    const double s = time_median(call);
    const double gf = 2.0 * c.m * c.n * c.k / s / 1e9;
    char shape[64];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld (MxKxN)", static_cast<long long>(c.m),
                  static_cast<long long>(c.k), static_cast<long long>(c.n));
    gemm_rows.push_back({"gemm", "aten::mm.out", shape, s * 1e3, gf, gf / peak, "GFLOP/s",
                         check_mm(a.data, b.data, out.data, c.m, c.k, c.n, check_gen)});
  }

  // ---- convolution (batch 1, NCHW, with bias)
  const std::vector<ConvCase> conv_cases = {
      {"3x3 64->64 56x56 p1", 64, 56, 56, 64, 3, 3, 1, 1, 1},
      {"1x1 256->64 28x28", 256, 28, 28, 64, 1, 1, 1, 0, 1},
      {"dw 3x3 32ch 112x112 p1", 32, 112, 112, 32, 3, 3, 1, 1, 32},
      {"7x7/2 3->64 224x224 p3", 3, 224, 224, 64, 7, 7, 2, 3, 1},
  };
  for (const ConvCase& c : conv_cases) {
    const int64_t cin_g = c.c_in / c.groups;
    const int64_t oh = (c.h + 2 * c.pad - c.kh) / c.stride + 1;
    const int64_t ow = (c.w + 2 * c.pad - c.kw) / c.stride + 1;
    FloatBuffer x(c.c_in * c.h * c.w), w(c.c_out * cin_g * c.kh * c.kw), bias(c.c_out),
        y(c.c_out * oh * ow);
    x.fill_random(seed++);
    w.fill_random(seed++);
    bias.fill_random(seed++);
    Args args;
    auto call =
        kernel_call("aten::convolution.out",
                    args.finish({args.tensor(x.data, {1, c.c_in, c.h, c.w}),
                                 args.tensor(w.data, {c.c_out, cin_g, c.kh, c.kw}),
                                 args.tensor(bias.data, {c.c_out}), args.ints({c.stride, c.stride}),
                                 args.ints({c.pad, c.pad}), args.ints({1, 1}), args.b(false),
                                 args.ints({0, 0}), args.i(c.groups)},
                                {args.tensor(y.data, {1, c.c_out, oh, ow})}));
    const double s = time_median(call);
    const double gf = 2.0 * c.c_out * oh * ow * cin_g * c.kh * c.kw / s / 1e9;
    gemm_rows.push_back({"conv", "aten::convolution.out", c.name, s * 1e3, gf, gf / peak, "GFLOP/s",
                         check_conv(c, x.data, w.data, bias.data, y.data, oh, ow, check_gen)});
  }
  std::printf("GEMM and convolution: GFLOP/s (2 FLOP per multiply-add) and %% of the %s peak\n",
              has_avx2 ? "AVX2/FMA" : "SSE2");
  print_rows(gemm_rows, "of peak", "check (16 outputs against double)");
  std::printf("\n");

  // ---- elementwise: 16 Mi float32 elements
  constexpr int64_t kN = int64_t{16} << 20;
  constexpr int64_t kRows = 4096, kCols = 4096;
  std::vector<Row> bw_rows;
  {
    FloatBuffer a(kN), b(kN), out(kN), row(kCols), col(kRows);
    a.fill_random(seed++);
    b.fill_random(seed++);
    row.fill_random(seed++);
    col.fill_random(seed++);
    std::memset(out.data, 0, static_cast<size_t>(kN) * sizeof(float));
    const double n = static_cast<double>(kN);
    // The memcpy timed alternately with each kernel: 64 MiB, separate buffers.
    FloatBuffer mc_src(kN), mc_dst(kN);
    std::memset(mc_src.data, 1, static_cast<size_t>(kN) * sizeof(float));
    std::memset(mc_dst.data, 2, static_cast<size_t>(kN) * sizeof(float));
    auto mc = [&] {
      std::memcpy(mc_dst.data, mc_src.data, static_cast<size_t>(kN) * sizeof(float));
    };
    const double mc_bytes = 8.0 * static_cast<double>(kN);
    auto add_row = [&](const char* name, const char* shape, const std::function<void()>& call,
                       double bytes) {
      auto [s, s_ref] = time_alternating(call, mc);
      const double gbps = bytes / s / 1e9;
      const double ref_gbps = mc_bytes / s_ref / 1e9;
      char note[96];
      std::snprintf(note, sizeof note, "memcpy 64 MiB alongside: %5.1f GB/s, ratio %5.1f%%",
                    ref_gbps, 100.0 * gbps / ref_gbps);
      bw_rows.push_back(
          {"elementwise", name, shape, s * 1e3, gbps, gbps / memcpy_bw, "GB/s", note});
    };
    {
      Args args;
      add_row("aten::add.out", "[16Mi] + [16Mi]",
              kernel_call("aten::add.out", args.finish({args.tensor(a.data, {kN}),
                                                        args.tensor(b.data, {kN}), args.i(1)},
                                                       {args.tensor(out.data, {kN})})),
              12 * n);
    }
    {
      Args args;
      add_row("aten::add.out", "[4096,4096] + [4096] (row)",
              kernel_call("aten::add.out", args.finish({args.tensor(a.data, {kRows, kCols}),
                                                        args.tensor(row.data, {kCols}), args.i(1)},
                                                       {args.tensor(out.data, {kRows, kCols})})),
              8 * n + 4.0 * kCols);
    }
    {
      Args args;
      add_row(
          "aten::add.out", "[4096,4096] + [4096,1] (col)",
          kernel_call("aten::add.out", args.finish({args.tensor(a.data, {kRows, kCols}),
                                                    args.tensor(col.data, {kRows, 1}), args.i(1)},
                                                   {args.tensor(out.data, {kRows, kCols})})),
          8 * n + 4.0 * kRows);
    }
    {
      Args args;
      add_row("aten::relu.out", "[16Mi]",
              kernel_call("aten::relu.out",
                          args.finish({args.tensor(a.data, {kN})}, {args.tensor(out.data, {kN})})),
              8 * n);
    }
    {
      Args args;
      add_row("aten::sigmoid.out", "[16Mi]",
              kernel_call("aten::sigmoid.out",
                          args.finish({args.tensor(a.data, {kN})}, {args.tensor(out.data, {kN})})),
              8 * n);
    }
    {
      Args args;
      add_row(
          "aten::mul.Scalar_out", "[16Mi] * 1.5",
          kernel_call("aten::mul.Scalar_out", args.finish({args.tensor(a.data, {kN}), args.d(1.5)},
                                                          {args.tensor(out.data, {kN})})),
          8 * n);
    }
    add_row(
        "(plain C++ loop a+b)", "[16Mi] + [16Mi]",
        [&] {
          const float* x = a.data;
          const float* y = b.data;
          float* o = out.data;
          for (int64_t i = 0; i < kN; ++i)
            o[i] = x[i] + y[i];
        },
        12 * n);

    // ---- softmax and layer norm on [4096, 1024] (reuse the same buffers)
    constexpr int64_t kR = 4096, kC = 1024;
    const double m = static_cast<double>(kR * kC);
    {
      Args args;
      add_row("aten::_softmax.out", "[4096,1024] dim -1",
              kernel_call("aten::_softmax.out",
                          args.finish({args.tensor(a.data, {kR, kC}), args.i(-1), args.b(false)},
                                      {args.tensor(out.data, {kR, kC})})),
              8 * m);
    }
    {
      FloatBuffer weight(kC), bias(kC), mean(kR), rstd(kR);
      weight.fill_random(seed++, 0.5f, 1.5f);
      bias.fill_random(seed++);
      Args args;
      add_row(
          "aten::native_layer_norm.out", "[4096,1024] over 1024",
          kernel_call("aten::native_layer_norm.out",
                      args.finish({args.tensor(a.data, {kR, kC}), args.ints({kC}),
                                   args.tensor(weight.data, {kC}), args.tensor(bias.data, {kC}),
                                   args.d(1e-5)},
                                  {args.tensor(out.data, {kR, kC}), args.tensor(mean.data, {kR, 1}),
                                   args.tensor(rstd.data, {kR, 1})})),
          8 * m + 8.0 * kC + 8.0 * kR);
    }
  }
  std::printf(
      "Elementwise, softmax, layer norm: GB/s (each tensor's bytes read + written once) and %% "
      "of memcpy\n");
  print_rows(bw_rows, "of mcpy", "memcpy timed alternately with the kernel");
  std::printf(
      "(plain C++ loop a+b): the same add as a loop compiled into this benchmark, for reference\n");
  std::printf("\ntotal run time %.1f s\n", seconds_since(t_start));
  return 0;
}

}  // namespace
}  // namespace etc::bench

int main() {
  // The figures are per core: kernels would otherwise split work across every core.
  etc::rt::kernels::set_num_threads(1);
  return etc::bench::run();
}
