// Reductions (amax, amin, mean, sum, prod, var over dims), softmax / log_softmax, layer and
// group norm and inference batch norm.
//
// Sums and means accumulate in double (floats) or int64 (integers, as ATen sums them);
// softmax and the norms compute in float for the 16-bit floats and float32, double for
// float64, with per-row statistics in double.
#include <algorithm>
#include <cmath>
#include <functional>

#include <immintrin.h>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/safe_softmax.h"
#include "support/wrapping_math.h"

namespace etc::rt::kernels {
namespace {

// acc[o] = f(acc[o], x) for every element x of the input (shape `sizes`), o being x's
// index with the reduced dims dropped. acc (contiguous over the kept dims) must be
// initialised by the caller.
template <typename In, typename Acc, typename F>
void reduce_into(const In* x, std::span<const int64_t> sizes, const std::vector<bool>& reduced,
                 Acc* acc, F f) {
  std::vector<int64_t> in_strides = contiguous_strides(sizes);
  std::vector<int64_t> acc_strides(sizes.size(), 0);
  int64_t s = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (!reduced[d]) {
      acc_strides[d] = s;
      s *= sizes[d];
    }
  }
  StridedLoop<2> loop(sizes, {in_strides, acc_strides});
  loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
    const In* px = x + off[0];
    Acc* pa = acc + off[1];
    if (st[1] == 0) {  // the run is reduced into one value
      Acc a = pa[0];
      for (int64_t i = 0; i < n; ++i)
        a = f(a, convert<Acc>(px[i * st[0]]));
      pa[0] = a;
    } else if (st[0] == 1 && st[1] == 1) {
      for (int64_t i = 0; i < n; ++i)
        pa[i] = f(pa[i], convert<Acc>(px[i]));
    } else {
      for (int64_t i = 0; i < n; ++i)
        pa[i * st[1]] = f(pa[i * st[1]], convert<Acc>(px[i * st[0]]));
    }
  });
}

// amax.out / amin.out: the greatest (least) element over the dims; NaN wins, as in ATen.
template <bool kMax>
Status amax_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                       reduced_dims(ctx, &args[1]->ints, static_cast<int64_t>(self.rank())));
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), self.dtype));
  if (out.numel() == 0) return Status();
  if (self.numel() == 0) {
    return ctx.error(std::string("cannot compute ") + (kMax ? "amax" : "amin") +
                     " over a dim of size 0 of self " + shape_str(self.sizes));
  }
  visit_dtype(self.dtype, [&]<typename T>() {
    using C = ComputeT<T>;
    const int64_t n = out.numel();
    Buffer<C> acc(n);
    const C init = kMax ? (std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                                       : std::numeric_limits<C>::lowest())
                        : (std::is_floating_point_v<C> ? std::numeric_limits<C>::infinity()
                                                       : std::numeric_limits<C>::max());
    std::fill_n(acc.data(), n, init);
    // NaN wins, as in ATen: once acc is NaN, `v > acc` is false and it stays NaN.
    reduce_into(self.data_as<const T>(), self.sizes, reduced, acc.data(),
                [](C a, C v) { return ((kMax ? v > a : v < a) || v != v) ? v : a; });
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i)
      o[i] = convert<T>(acc[i]);
  });
  return Status();
}

// any.dim: whether any element along `dim` is non-zero (NaN counts as non-zero, as in
// ATen); over an empty dim, false. Bool out (uint8 for a uint8 input).
Status any_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  std::vector<int64_t> dims{args[1]->i};
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                       reduced_dims(ctx, &dims, static_cast<int64_t>(self.rank())));
  DType out_dtype = self.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool;
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), out_dtype));
  const int64_t n = out.numel();
  if (n == 0) return Status();
  auto* o = out.data_as<uint8_t>();
  std::fill_n(o, n, uint8_t{0});
  if (self.numel() == 0) return Status();
  visit_dtype(self.dtype, [&]<typename T>() {
    using C = ComputeT<T>;
    Buffer<C> acc(n);
    std::fill_n(acc.data(), n, C(0));
    reduce_into(self.data_as<const T>(), self.sizes, reduced, acc.data(),
                [](C a, C v) { return (a != C(0) || v != C(0)) ? C(1) : C(0); });
    for (int64_t i = 0; i < n; ++i)
      o[i] = acc[i] != C(0) ? 1 : 0;
  });
  return Status();
}

// The sum of f(x[i]) over n contiguous elements, each converted to Acc first, in eight
// interleaved partial sums (element i goes to sum i % 8) added pairwise at the end: the loop
// vectorises instead of waiting on one add's latency per element. The order is fixed, so the
// result does not depend on threads.
// sum8's end: its eight partial sums q[k * step] added pairwise in its fixed order.
template <typename Acc>
__attribute__((always_inline)) inline Acc sum8_finish(const Acc* q, int64_t step) {
  return ((q[0] + q[4 * step]) + (q[2 * step] + q[6 * step])) +
         ((q[step] + q[5 * step]) + (q[3 * step] + q[7 * step]));
}

template <typename Acc, typename T = float, typename F = std::identity>
__attribute__((always_inline)) inline Acc sum8(const T* x, int64_t n, F f = {}) {
  Acc part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k)
      part[k] += f(static_cast<Acc>(x[i + k]));
  }
  for (int k = 0; i < n; ++i, ++k)
    part[k] += f(static_cast<Acc>(x[i]));
  return sum8_finish(part, 1);
}

// The largest of x[0, n) (-inf when n is 0; NaNs skipped), by 16 interleaved running maxima:
// one running max waits on each compare's latency (a 1500-wide attention softmax spent most
// of its time there), 16 vectorise. The maximum does not depend on the order, but for which
// of +0.0 and -0.0 it returns, and exp(x - max) and x - max are the same for either.
// max16's end, shared with its vector builds: from element i (at most 16 before n) on, each
// into running maximum part[i % 16], then the 16 in order.
template <typename T>
__attribute__((always_inline)) inline T max16_finish(const T* x, int64_t i, int64_t n, T* part) {
  for (int k = 0; i < n; ++i, ++k)
    part[k] = x[i] > part[k] ? x[i] : part[k];
  T m = -std::numeric_limits<T>::infinity();
  for (int k = 0; k < 16; ++k)
    m = part[k] > m ? part[k] : m;
  return m;
}

template <typename T>
__attribute__((always_inline)) inline T max16(const T* x, int64_t n) {
  T part[16];
  for (T& p : part)
    p = -std::numeric_limits<T>::infinity();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 16; ++k)
      part[k] = x[i + k] > part[k] ? x[i + k] : part[k];
  }
  return max16_finish(x, i, n, part);
}

// acc[i] = the double sum of row i of x (rows of `count` floats) for i in [r0, r1), by sum8:
// built for AVX-512, AVX2 and any x86-64 and chosen per call as the GEMM's micro-kernel is
// (adds only, in sum8's order: every build gives the same bits). The build for any x86-64
// alone converted 2 floats at a time (mobilenet_v3_small's global means of 576 x 7x7).
__attribute__((always_inline)) inline void row_sums_body(const float* x, int64_t count, int64_t r0,
                                                         int64_t r1, double* acc) {
  for (int64_t i = r0; i < r1; ++i)
    acc[i] = sum8<double>(x + i * count, count);
}
__attribute__((target("avx512f,fma"))) void row_sums_avx512(const float* x, int64_t count,
                                                            int64_t r0, int64_t r1, double* acc) {
  row_sums_body(x, count, r0, r1, acc);
}
__attribute__((target("avx2"))) void row_sums_avx2(const float* x, int64_t count, int64_t r0,
                                                   int64_t r1, double* acc) {
  row_sums_body(x, count, r0, r1, acc);
}
void row_sums_portable(const float* x, int64_t count, int64_t r0, int64_t r1, double* acc) {
  row_sums_body(x, count, r0, r1, acc);
}

// Channel sums of a channels-last tensor in sum8's order: a[c] = the double sum over
// positions p of x[p * channels + c], position p into partial sum p % 8, the eight added as
// sum8 adds them. Each channel is thus summed exactly as float_row_sums sums its plane of an
// NCHW tensor (the same bits in either layout), the channels of a block side by side in
// vectors. The positions go in chunks of kChannelSumChunk (a multiple of 8: each partial sum
// keeps its positions), every block of the task's channels over a chunk while its rows are in
// cache, the partial sums kept in `state` between chunks: block by block over the whole
// tensor read efficientnet_b0's 144 x 56x56 nine times from L3. Built for AVX-512, AVX2 and
// any x86-64 (adds only: the same bits); the build for any x86-64 alone, in position order,
// took 4x XNNPACK's time for efficientnet_b0's global means.
constexpr int64_t kChannelSumBlock = 16;
constexpr int64_t kChannelSumChunk = 64;

// Positions [p0, p1) (p0 a multiple of 8) of channels [0, CB) into state[k][c], which the
// first chunk (p0 == 0) starts from zero; the last (p1 == positions) puts the sums in a[0, CB)
// instead. One chunk needs no state.
template <int64_t CB>
__attribute__((always_inline)) inline void channel_sums_block(const float* x, int64_t p0,
                                                              int64_t p1, int64_t positions,
                                                              int64_t channels, double* state,
                                                              double* a) {
  double part[8][CB];
  for (int k = 0; k < 8; ++k) {
    for (int64_t c = 0; c < CB; ++c)
      part[k][c] = p0 == 0 ? 0.0 : state[k * CB + c];
  }
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const float* row = x + (p + k) * channels;
#pragma GCC unroll 16
      for (int64_t c = 0; c < CB; ++c)
        part[k][c] += static_cast<double>(row[c]);
    }
  }
  for (int k = 0; p < p1; ++p, ++k) {
    const float* row = x + p * channels;
    for (int64_t c = 0; c < CB; ++c)
      part[k][c] += static_cast<double>(row[c]);
  }
  if (p1 == positions) {
    for (int64_t c = 0; c < CB; ++c)
      a[c] = sum8_finish(&part[0][c], CB);
    return;
  }
  for (int k = 0; k < 8; ++k) {
    for (int64_t c = 0; c < CB; ++c)
      state[k * CB + c] = part[k][c];
  }
}

// sum8's end, lane by lane.
__attribute__((target("avx512f,fma"))) inline __m512d sum8_finish_avx512(const __m512d* q) {
  return _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(q[0], q[4]), _mm512_add_pd(q[2], q[6])),
                       _mm512_add_pd(_mm512_add_pd(q[1], q[5]), _mm512_add_pd(q[3], q[7])));
}

// channel_sums_block<16> for AVX-512 in 16 zmm accumulators (GCC's own vectorisation of it
// used 256-bit vectors without ymm16-31 and kept half the partial sums on the stack).
__attribute__((target("avx512f,fma"))) inline void channel_sums_block16_avx512(
    const float* x, int64_t p0, int64_t p1, int64_t positions, int64_t channels, double* state,
    double* a) {
  __m512d lo[8], hi[8];
  for (int k = 0; k < 8; ++k) {
    lo[k] = p0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(state + int64_t{16} * k);
    hi[k] = p0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(state + int64_t{16} * k + 8);
  }
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const float* row = x + (p + k) * channels;
      lo[k] = _mm512_add_pd(lo[k], _mm512_cvtps_pd(_mm256_loadu_ps(row)));
      hi[k] = _mm512_add_pd(hi[k], _mm512_cvtps_pd(_mm256_loadu_ps(row + 8)));
    }
  }
  for (int k = 0; p < p1; ++p, ++k) {
    const float* row = x + p * channels;
    lo[k] = _mm512_add_pd(lo[k], _mm512_cvtps_pd(_mm256_loadu_ps(row)));
    hi[k] = _mm512_add_pd(hi[k], _mm512_cvtps_pd(_mm256_loadu_ps(row + 8)));
  }
  if (p1 == positions) {
    _mm512_storeu_pd(a, sum8_finish_avx512(lo));
    _mm512_storeu_pd(a + 8, sum8_finish_avx512(hi));
    return;
  }
  for (int k = 0; k < 8; ++k) {
    _mm512_storeu_pd(state + int64_t{16} * k, lo[k]);
    _mm512_storeu_pd(state + int64_t{16} * k + 8, hi[k]);
  }
}

// Channels [c0, c1) of x (one image) into a[c0, c1).
template <bool kAvx512 = false>
__attribute__((always_inline)) inline void channel_sums_body(const float* x, int64_t positions,
                                                             int64_t channels, int64_t c0,
                                                             int64_t c1, double* a) {
  // Each channel's 8 partial sums between chunks, in the layout of its block (CB of them per
  // k); none where one chunk holds every position.
  thread_local std::vector<double> state;
  const bool chunks = positions > kChannelSumChunk;
  if (chunks && state.size() < static_cast<size_t>(8 * (c1 - c0)))
    state.resize(static_cast<size_t>(8 * (c1 - c0)));
  for (int64_t p0 = 0; p0 < positions; p0 += kChannelSumChunk) {
    const int64_t p1 = std::min(positions, p0 + kChannelSumChunk);
    // Channel c's block state starts at 8 * (c - c0) (blocks are 16, 4 or 1 channels).
    auto st = [&](int64_t c) { return chunks ? state.data() + 8 * (c - c0) : nullptr; };
    int64_t c = c0;
    for (; c + kChannelSumBlock <= c1; c += kChannelSumBlock) {
      if constexpr (kAvx512) {
        channel_sums_block16_avx512(x + c, p0, p1, positions, channels, st(c), a + c);
      } else {
        channel_sums_block<kChannelSumBlock>(x + c, p0, p1, positions, channels, st(c), a + c);
      }
    }
    for (; c + 4 <= c1; c += 4)
      channel_sums_block<4>(x + c, p0, p1, positions, channels, st(c), a + c);
    for (; c < c1; ++c)
      channel_sums_block<1>(x + c, p0, p1, positions, channels, st(c), a + c);
  }
}
__attribute__((target("avx512f,fma"))) void channel_sums_avx512(const float* x, int64_t positions,
                                                                int64_t channels, int64_t c0,
                                                                int64_t c1, double* a) {
  channel_sums_body<true>(x, positions, channels, c0, c1, a);
}
__attribute__((target("avx2"))) void channel_sums_avx2(const float* x, int64_t positions,
                                                       int64_t channels, int64_t c0, int64_t c1,
                                                       double* a) {
  channel_sums_body(x, positions, channels, c0, c1, a);
}
void channel_sums_portable(const float* x, int64_t positions, int64_t channels, int64_t c0,
                           int64_t c1, double* a) {
  channel_sums_body(x, positions, channels, c0, c1, a);
}

// sum and mean: `mean` divides by the number of reduced elements.
Status sum_mean(KernelContext& ctx, std::span<Value*> args, bool mean) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 4);
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduced_dims(ctx, opt_int_list_arg(args, 1),
                                                               static_cast<int64_t>(self.rank())));
  std::optional<DType> dtype = opt_dtype_arg(args, 3);
  // ATen sums integers and bools in int64 unless a dtype is given.
  DType want = dtype.value_or(mean || dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  if (mean && !dtype_is_float(want)) {
    return ctx.error("mean needs a floating-point input or dtype, got " +
                     std::string(dtype_name(want)));
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, reduced_shape(self.sizes, reduced, args[2]->b), want));
  const int64_t n = out.numel();
  if (n == 0) return Status();
  int64_t count = 1;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (reduced[d]) count *= self.sizes[d];
  }
  // The reduced dims trailing and contiguous (a global average pool: [N, C, H, W] over H
  // and W): output i sums its own run of `count` elements.
  size_t first_reduced = self.rank();
  while (first_reduced > 0 && reduced[first_reduced - 1])
    --first_reduced;
  const bool trailing =
      std::none_of(reduced.begin(), reduced.begin() + first_reduced, [](bool r) { return r; });
  if (ctx.is_channels_last(0)) {
    // The input of a channels-last chain (kernels/load_plan.h), held [N, H, W, C]: a mean
    // over H and W (mnasnet's head). The load planner sets this only for a float32 4-d input
    // reduced over exactly those dims into float32.
    if (!mean || self.dtype != DType::kFloat32 || want != DType::kFloat32 || self.rank() != 4 ||
        reduced != std::vector<bool>{false, false, true, true}) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last input takes a float32 mean over dims 2 and 3");
    }
    Buffer<double> acc(n);
    channels_last_sums(self.data_as<const float>(), self.sizes[0], count, self.sizes[1],
                       acc.data());
    float* y = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i)
      y[i] = static_cast<float>(acc[i] / static_cast<double>(count));
    return Status();
  }
  auto run = [&]<typename Acc>() {
    Buffer<Acc> acc(n);
    std::fill_n(acc.data(), n, Acc(0));
    if (std::is_same_v<Acc, double> && trailing && self.dtype == DType::kFloat32 && count > 0) {
      if constexpr (std::is_same_v<Acc, double>) {
        float_row_sums(self.data_as<const float>(), n, count, acc.data());
      }
    } else {
      visit_dtype(self.dtype, [&]<typename T>() {
        reduce_into(self.data_as<const T>(), self.sizes, reduced, acc.data(),
                    [](Acc a, Acc v) { return a + v; });
      });
    }
    if constexpr (std::is_floating_point_v<Acc>) {
      if (mean) {
        // An empty reduction gives NaN (0/0), as torch.mean.
        for (int64_t i = 0; i < n; ++i)
          acc[i] /= static_cast<Acc>(count);
      }
    }
    convert_elements(acc.data(), kDTypeOf<Acc>, out.data, out.dtype, n);
  };
  if (dtype_is_float(want)) {
    run.template operator()<double>();
  } else {
    run.template operator()<int64_t>();
  }
  return Status();
}

Status sum_kernel(KernelContext& ctx, std::span<Value*> args) {
  return sum_mean(ctx, args, false);
}
Status mean_kernel(KernelContext& ctx, std::span<Value*> args) {
  return sum_mean(ctx, args, true);
}

// prod.int_out(self, int dim, bool keepdim=False, *, ScalarType? dtype=None, out): floats
// multiply in double, integers and bools in int64 (wrapping), as ATen gives int64 for them.
// An empty product is 1.
Status prod_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced, check_prod(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = Args(ctx, args).out();
  const DType want = out.dtype;
  const int64_t n = out.numel();
  if (n == 0) return Status();
  auto run = [&]<typename Acc>() {
    Buffer<Acc> acc(n);
    std::fill_n(acc.data(), n, Acc(1));
    visit_dtype(self.dtype, [&]<typename T>() {
      reduce_into(self.data_as<const T>(), self.sizes, reduced, acc.data(), [](Acc p, Acc v) {
        if constexpr (std::is_integral_v<Acc>) {
          return wrapping_mul(p, v);
        } else {
          return p * v;
        }
      });
    });
    convert_elements(acc.data(), kDTypeOf<Acc>, out.data, out.dtype, n);
  };
  if (dtype_is_float(want)) {
    run.template operator()<double>();
  } else {
    run.template operator()<int64_t>();
  }
  return Status();
}

// var.correction_out(self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False,
// out): sum((x - mean)^2) / max(N - correction, 0) in double (two passes), correction 1 by
// default; N - correction <= 0 gives inf (or NaN for 0 / 0), as ATen.
Status var_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(VarReduction var, check_var(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = Args(ctx, args).out();
  const std::vector<bool>& reduced = var.reduced;
  const double c = var.correction;
  const int64_t n = out.numel();
  if (n == 0) return Status();
  int64_t count = 1;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (reduced[d]) count *= self.sizes[d];
  }
  Buffer<double> mean(n), m2(n);
  std::fill_n(mean.data(), n, 0.0);
  std::fill_n(m2.data(), n, 0.0);
  visit_float_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    reduce_into(x, self.sizes, reduced, mean.data(), [](double s, double v) { return s + v; });
    for (int64_t i = 0; i < n; ++i)
      mean[i] /= static_cast<double>(count);
    // The second pass subtracts each output's mean: broadcast it back over the input.
    std::vector<int64_t> mean_strides(self.rank(), 0);
    int64_t s = 1;
    for (size_t d = self.rank(); d-- > 0;) {
      if (!reduced[d]) {
        mean_strides[d] = s;
        s *= self.sizes[d];
      }
    }
    StridedLoop<2> loop(self.sizes, {contiguous_strides(self.sizes), mean_strides});
    loop.for_each_run([&](int64_t len, const auto& off, const auto& st) {
      for (int64_t i = 0; i < len; ++i) {
        const double d = convert<double>(x[off[0] + i * st[0]]) - mean[off[1] + i * st[1]];
        m2[off[1] + i * st[1]] += d * d;
      }
    });
  });
  const double divisor = std::max(static_cast<double>(count) - c, 0.0);
  for (int64_t i = 0; i < n; ++i)
    m2[i] /= divisor;
  convert_elements(m2.data(), DType::kFloat64, out.data, out.dtype, n);
  return Status();
}

// ---- softmax -------------------------------------------------------------------------

// exp for softmax (of x - max, never positive): fast_exp_nonpositive for float
// (vectorisable), libm for double.
template <typename G>
inline G exp_of(G v) {
  if constexpr (std::is_same_v<G, float>) {
    return fast_exp_nonpositive(v);
  } else {
    return std::exp(v);
  }
}

// One float softmax row, y = exp(x - max) / sum, built for AVX2 and for any x86-64 (chosen
// per call as the GEMM's micro-kernel is; no multiply-add is fused in either, so both give
// the same bits): the max (max16's, each build's own loop in registers), the exponentials
// (fast_exp_nonpositive), the sum in eight interleaved partial sums added pairwise (one
// running sum waits on each add's latency), the scaling. A fully masked row (max = -inf)
// gives NaN, as ATen's does.
__attribute__((always_inline)) inline void softmax_row_body(const float* x, float* y, int64_t len,
                                                            float mx) {
  for (int64_t i = 0; i < len; ++i)
    y[i] = fast_exp_nonpositive(x[i] - mx);
  const float inv = 1.0f / sum8<float>(y, len);
  for (int64_t j = 0; j < len; ++j)
    y[j] *= inv;
}
// max16 in two registers (lanes 0-7 and 8-15 of each 16), max(v, m) being m where v is NaN or
// not larger (max16's select), the tail and the 16 as max16 ends them. GCC kept max16's
// running maxima in memory in this build, a store and a load on every compare's path.
__attribute__((target("avx2"))) inline float max16_avx2(const float* x, int64_t len) {
  const float lowest = -std::numeric_limits<float>::infinity();
  __m256 lo = _mm256_set1_ps(lowest), hi = lo;
  int64_t i = 0;
  for (; i + 16 <= len; i += 16) {
    lo = _mm256_max_ps(_mm256_loadu_ps(x + i), lo);
    hi = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), hi);
  }
  float part[16];
  _mm256_storeu_ps(part, lo);
  _mm256_storeu_ps(part + 8, hi);
  return max16_finish(x, i, len, part);
}

__attribute__((target("avx2"))) void softmax_row_avx2(const float* x, float* y, int64_t len) {
  softmax_row_body(x, y, len, max16_avx2(x, len));
}
void softmax_row_portable(const float* x, float* y, int64_t len) {
  softmax_row_body(x, y, len, max16(x, len));
}

// The AVX-512 build, 16 lanes, rounding as the two builds above: fast_exp_nonpositive's steps lane
// by lane in the same order, each product and sum its own rounding. Each product passes through
// an empty asm statement that claims to change it, so that no compiler can fuse it into the sum
// that follows (GCC and clang would under -ffp-contract=fast, whatever a pragma says); the tail
// runs masked, not as scalar code the compiler could contract; the sum keeps sum8's eight
// partial sums. (The _round_ intrinsics, which no compiler fuses either, made Zen 4 run the
// exponentials at less than half the speed: an explicit rounding mode is slow there.)
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 add16(__m512 a, __m512 b) {
  return _mm512_add_ps(a, b);
}
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 sub16(__m512 a, __m512 b) {
  return _mm512_sub_ps(a, b);
}
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 mul16(__m512 a, __m512 b) {
  __m512 p = _mm512_mul_ps(a, b);
  __asm__("" : "+v"(p));  // no instruction: the product is rounded before any sum reads it
  return p;
}

// fast_exp_nonpositive on 16 lanes, step for step, each product and sum its own rounding.
__attribute__((target("avx512f,fma"), always_inline)) inline __m512 exp16_nonpositive(__m512 z) {
  const __m512 magic = _mm512_set1_ps(kExpMagic);
  const __m512 t = add16(mul16(z, _mm512_set1_ps(kExpLog2e)), magic);
  const __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  const __m512 fn = sub16(t, magic);
  const __m512 r =
      sub16(sub16(z, mul16(fn, _mm512_set1_ps(kExpLn2Hi))), mul16(fn, _mm512_set1_ps(kExpLn2Lo)));
  __m512 p = _mm512_set1_ps(kExpPoly[0]);
  for (int i = 1; i < 6; ++i)
    p = add16(mul16(p, r), _mm512_set1_ps(kExpPoly[i]));
  const __m512 y = add16(mul16(p, mul16(r, r)), r);
  const __m512 e = add16(mul16(y, s), s);
  return _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(z, _mm512_set1_ps(kExpCutoff), _CMP_LT_OQ),
                            _mm512_setzero_ps());
}

// max16 in one register: element i into running maximum i % 16, max(v, m) being m where v is
// NaN or not larger (max16's select), then the 16 as max16 ends. GCC left max16's loop scalar
// in this build: 16 loads and compares a vector, more than the exponentials' time.
__attribute__((target("avx512f,fma"))) inline float max16_avx512(const float* x, int64_t len) {
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < len; i += 16) {
    const auto lanes = static_cast<__mmask16>(len - i >= 16 ? 0xffff : (1u << (len - i)) - 1);
    m = _mm512_mask_max_ps(m, lanes, _mm512_maskz_loadu_ps(lanes, x + i), m);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, m);
  return max16_finish(x, len, len, part);  // the tail ran masked above
}

__attribute__((target("avx512f,fma"))) void softmax_row_avx512(const float* x, float* y,
                                                               int64_t len) {
  const __m512 mx = _mm512_set1_ps(max16_avx512(x, len));
  // sum8 as the exponentials come: element i into partial sum i % 8, in order (a lane past
  // the row adds +0, which leaves a sum of exponentials as it is). In the same loop, the adds'
  // latency hides behind the exponentials' work; a pass of its own waited on it.
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < len; i += 16) {
    const auto lanes = static_cast<__mmask16>(len - i >= 16 ? 0xffff : (1u << (len - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
    const __m512 e = _mm512_maskz_mov_ps(lanes, exp16_nonpositive(sub16(v, mx)));
    _mm512_mask_storeu_ps(y + i, lanes, e);
    acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
    acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
  }
  float part[8];
  _mm256_storeu_ps(part, acc);
  const float sum = sum8_finish(part, 1);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < len; i += 16) {
    const auto lanes = static_cast<__mmask16>(len - i >= 16 ? 0xffff : (1u << (len - i)) - 1);
    _mm512_mask_storeu_ps(y + i, lanes, mul16(_mm512_maskz_loadu_ps(lanes, y + i), inv));
  }
}

}  // namespace

void softmax_rows_in_place(float* x, int64_t rows, int64_t len) {
  auto* softmax_row = isa_build(softmax_row_avx512, softmax_row_avx2, softmax_row_portable);
  const int64_t grain = std::max<int64_t>(1, 1024 / std::max<int64_t>(len, 1));
  parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      softmax_row(x + r * len, x + r * len, len);
  });
}

namespace {

template <typename G>
void softmax_typed(const TensorView& self, int64_t dim, bool log, TensorView& out) {
  ReadAs<G> in(self);
  WriteAs<G> wo(out);
  const G* x = in.data();
  G* y = wo.data();
  int64_t outer = 1, inner = 1;
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[dim];
  for (int64_t d = 0; d < dim; ++d)
    outer *= self.sizes[d];
  for (size_t d = dim + 1; d < self.rank(); ++d)
    inner *= self.sizes[d];
  const G neg_inf = -std::numeric_limits<G>::infinity();
  if (inner == 1) {
    // Rows are independent, each computed by one thread in the same order as serially: the
    // result does not depend on the thread count.
    // About 1024 elements per thread at least (an attention softmax of 12 heads x 24 x 24
    // is 6912: with 4096 it ran on one thread of two).
    const int64_t grain = std::max<int64_t>(1, 1024 / std::max<int64_t>(len, 1));
    auto* softmax_row = isa_build(softmax_row_avx512, softmax_row_avx2, softmax_row_portable);
    parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const G* xr = x + o * len;
        G* yr = y + o * len;
        if constexpr (std::is_same_v<G, float>) {
          if (!log) {
            softmax_row(xr, yr, len);
            continue;
          }
        }
        // Subtracting the row max keeps exp() from overflowing.
        const G mx = max16(xr, len);
        G sum = 0;
        // exp in a loop of its own, with no reduction in it, so that it vectorises (float:
        // fast_exp_nonpositive, within 2e-7 relative; libm's expf is a call per element); the sum
        // follows. A fully masked row (mx = -inf) gives NaN, as ATen's does.
        auto e = [mx](G v) { return exp_of(v - mx); };
        if (log) {
          for (int64_t i = 0; i < len; ++i)
            sum += e(xr[i]);
          const G lse = mx + std::log(sum);
          for (int64_t i = 0; i < len; ++i)
            yr[i] = xr[i] - lse;
        } else {
          for (int64_t i = 0; i < len; ++i)
            yr[i] = e(xr[i]);
          for (int64_t i = 0; i < len; ++i)
            sum += yr[i];
          const G inv = G(1) / sum;
          for (int64_t i = 0; i < len; ++i)
            yr[i] *= inv;
        }
      }
    });
  } else {
    // Softmax over a non-innermost dim: keep one running max / sum per inner position so
    // that every loop walks contiguous memory.
    Buffer<G> mx(inner), sum(inner);
    for (int64_t o = 0; o < outer; ++o) {
      const G* xb = x + o * len * inner;
      G* yb = y + o * len * inner;
      std::fill_n(mx.data(), inner, neg_inf);
      std::fill_n(sum.data(), inner, G(0));
      for (int64_t d = 0; d < len; ++d) {
        const G* xr = xb + d * inner;
        for (int64_t j = 0; j < inner; ++j)
          mx[j] = xr[j] > mx[j] ? xr[j] : mx[j];
      }
      for (int64_t d = 0; d < len; ++d) {
        const G* xr = xb + d * inner;
        G* yr = yb + d * inner;
        for (int64_t j = 0; j < inner; ++j) {
          const G e = exp_of(xr[j] - mx[j]);
          if (!log) yr[j] = e;
          sum[j] += e;
        }
      }
      for (int64_t j = 0; j < inner; ++j)
        sum[j] = log ? mx[j] + std::log(sum[j]) : G(1) / sum[j];
      for (int64_t d = 0; d < len; ++d) {
        const G* xr = xb + d * inner;
        G* yr = yb + d * inner;
        if (log) {
          for (int64_t j = 0; j < inner; ++j)
            yr[j] = xr[j] - sum[j];
        } else {
          for (int64_t j = 0; j < inner; ++j)
            yr[j] *= sum[j];
        }
      }
    }
  }
  wo.finish();
}

// The safe softmax the load planner gave this step (safe_softmax.h): into the where's out,
// each row's softmax as softmax_typed computes it, or `other` where every value is -inf.
Status run_safe_softmax(const KernelContext& ctx, const SafeSoftmax& safe, const TensorView& self,
                        int64_t dim) {
  const TensorView& y = *safe.out;
  if (self.dtype != DType::kFloat32 || y.dtype != DType::kFloat32 || y.sizes != self.sizes ||
      dim + 1 != static_cast<int64_t>(self.rank()) || y.data == nullptr) {
    return internal_error(std::string(ctx.op) + ": the safe softmax planned at load does not fit " +
                          self.describe() + " -> " + y.describe());
  }
  const int64_t len = self.sizes.back();
  if (y.numel() == 0 || len == 0) return Status();
  const int64_t rows = self.numel() / len;
  const auto* x = self.data_as<const float>();
  auto* out = static_cast<float*>(y.data);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  auto* softmax_row = isa_build(softmax_row_avx512, softmax_row_avx2, softmax_row_portable);
  parallel_for(rows, std::max<int64_t>(1, 1024 / len), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * len;
      float* yr = out + r * len;
      if (std::any_of(xr, xr + len, [neg_inf](float v) { return v != neg_inf; })) {
        softmax_row(xr, yr, len);
      } else {
        std::fill_n(yr, len, safe.other);
      }
    }
  });
  return Status();
}

Status softmax_common(KernelContext& ctx, std::span<Value*> args, bool log) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  if (!dtype_is_float(self.dtype)) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  }
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(self.rank())));
  const bool half_to_float = args[2]->b;
  if (half_to_float && self.dtype != DType::kFloat16) {
    return ctx.error("half_to_float needs a float16 input, got " +
                     std::string(dtype_name(self.dtype)));
  }
  ETC_RETURN_IF_ERROR(
      check_out(ctx, out, self.sizes, half_to_float ? DType::kFloat32 : self.dtype));
  if (const auto* safe =
          ctx.state != nullptr ? dynamic_cast<const SafeSoftmax*>(ctx.state->get()) : nullptr;
      safe != nullptr && !log) {
    return run_safe_softmax(ctx, *safe, self, dim);
  }
  if (out.numel() == 0) return Status();
  if (self.dtype == DType::kFloat64) {
    softmax_typed<double>(self, dim, log, out);
  } else {
    softmax_typed<float>(self, dim, log, out);
  }
  return Status();
}

Status softmax_kernel(KernelContext& ctx, std::span<Value*> args) {
  return softmax_common(ctx, args, false);
}
Status log_softmax_kernel(KernelContext& ctx, std::span<Value*> args) {
  return softmax_common(ctx, args, true);
}

// ---- Normalisation -------------------------------------------------------------------

// A parameter vector (weight, bias) as G, or `fallback` everywhere when absent.
template <typename G>
Buffer<G> param_or(const TensorView* t, int64_t n, G fallback) {
  Buffer<G> b(n);
  if (t == nullptr) {
    std::fill_n(b.data(), n, fallback);
  } else {
    convert_elements(t->data, t->dtype, b.data(), kDTypeOf<G>, n);
  }
  return b;
}

template <typename G>
void layer_norm_typed(const TensorView& x, const TensorView* weight, const TensorView* bias,
                      double eps, int64_t rows, int64_t cols, TensorView& out, TensorView& mean,
                      TensorView& rstd) {
  ReadAs<G> rx(x);
  WriteAs<G> wy(out), wm(mean), wr(rstd);
  Buffer<G> w = param_or<G>(weight, cols, G(1));
  Buffer<G> b = param_or<G>(bias, cols, G(0));
  // Rows are independent, each computed by one thread as serially. The sums in double, in
  // sum8's partial sums: one running sum waited on each add's latency (a 384-wide row took
  // 4 cycles per element). The kernels' build has no FMA to contract d * d into.
  auto row = [&](int64_t r) {
    const G* xr = rx.data() + r * cols;
    G* yr = wy.data() + r * cols;
    const double mu = sum8<double>(xr, cols) / static_cast<double>(cols);
    const double v = sum8<double>(xr, cols, [mu](double e) {
      const double d = e - mu;
      return d * d;
    });
    const double inv = 1.0 / std::sqrt(v / static_cast<double>(cols) + eps);  // biased variance
    const G m = static_cast<G>(mu), rs = static_cast<G>(inv);
    for (int64_t j = 0; j < cols; ++j)
      yr[j] = (xr[j] - m) * rs * w[j] + b[j];
    wm.data()[r] = m;
    wr.data()[r] = rs;
  };
  parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   row(r);
               });
  wy.finish();
  wm.finish();
  wr.finish();
}

Status native_layer_norm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView* weight = opt_tensor_arg(args, 2);
  const TensorView* bias = opt_tensor_arg(args, 3);
  const double eps = float_arg(args, 4);
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  ETC_ASSIGN_OR_RETURN(const LayerNormDims dims, check_layer_norm(ctx, args));
  const int64_t rows = dims.rows, cols = dims.cols;
  TensorView& out = out_arg(args, 5);
  TensorView& mean = out_arg(args, 6);
  TensorView& rstd = out_arg(args, 7);
  if (rows == 0) return Status();
  if (x.dtype == DType::kFloat64) {
    layer_norm_typed<double>(x, weight, bias, eps, rows, cols, out, mean, rstd);
  } else {
    layer_norm_typed<float>(x, weight, bias, eps, rows, cols, out, mean, rstd);
  }
  return Status();
}

// native_group_norm.out(input, weight?, bias?, N, C, HxW, group, eps, *, out0, out1, out2):
// per sample and group of C / group channels, the mean and biased variance in double;
// out0 = (x - mean) * rstd * weight[c] + bias[c], out1 the means, out2 the rstds [N, group].
Status native_group_norm_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_group_norm(ctx, args));
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* weight = a.opt_tensor("weight");
  const TensorView* bias = a.opt_tensor("bias");
  const int64_t n = a.integer("N"), c = a.integer("C"), hw = a.integer("HxW");
  const int64_t group = a.integer("group");
  const double eps = a.real("eps");
  TensorView& out = a.out(0);
  TensorView& mean = a.out(1);
  TensorView& rstd = a.out(2);
  if (n * group == 0) return Status();
  ReadAs<double> rx(x);
  const double* xs = rx.data();
  Buffer<double> w = param_or<double>(weight, c, 1.0);
  Buffer<double> b = param_or<double>(bias, c, 0.0);
  Buffer<double> y(x.numel()), mu(n * group), rs(n * group);
  const int64_t per = c / group * hw;  // elements of one group
  for (int64_t g = 0; g < n * group; ++g) {
    const double* p = xs + g * per;
    double s = 0.0;
    for (int64_t i = 0; i < per; ++i)
      s += p[i];
    const double m = s / static_cast<double>(per);
    double q = 0.0;
    for (int64_t i = 0; i < per; ++i)
      q += (p[i] - m) * (p[i] - m);
    const double r = 1.0 / std::sqrt(q / static_cast<double>(per) + eps);
    mu[g] = m;
    rs[g] = r;
    for (int64_t i = 0; i < per; ++i) {
      const int64_t ch = (g % group) * (c / group) + i / std::max<int64_t>(hw, 1);
      y[g * per + i] = (p[i] - m) * r * w[ch] + b[ch];
    }
  }
  convert_elements(y.data(), DType::kFloat64, out.data, out.dtype, x.numel());
  convert_elements(mu.data(), DType::kFloat64, mean.data, mean.dtype, n * group);
  convert_elements(rs.data(), DType::kFloat64, rstd.data, rstd.dtype, n * group);
  return Status();
}

// `channels_last`: x and out are [N, H, W, C] tensors of a channels-last chain
// (kernels/load_plan.h); each position's channels get the same operations as the planes.
template <typename G>
void batch_norm_typed(const TensorView& x, const TensorView* weight, const TensorView* bias,
                      const TensorView& running_mean, const TensorView& running_var, double eps,
                      TensorView& out, const Epilogue* epilogue, bool channels_last = false) {
  const int64_t n = x.sizes[0], c = x.sizes[1];
  const int64_t inner = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  ReadAs<double> rm(running_mean), rv(running_var);
  Buffer<double> w = param_or<double>(weight, c, 1.0);
  Buffer<double> b = param_or<double>(bias, c, 0.0);
  // out = (x - mean) / sqrt(var + eps) * w + b, folded into one scale and shift per channel.
  Buffer<G> scale(c), shift(c);
  for (int64_t i = 0; i < c; ++i) {
    const double s = w[i] / std::sqrt(rv.data()[i] + eps);
    scale[i] = static_cast<G>(s);
    shift[i] = static_cast<G>(b[i] - rm.data()[i] * s);
  }
  ReadAs<G> rx(x);
  WriteAs<G> wy(out);
  // Planes across threads (each output computed alike on any thread), and the elementwise
  // instructions after it (the load planner's epilogues: densenet's relu after each batch norm)
  // on each range of planes while it is in cache; over the whole out at the end where the
  // chain writes over the input (after_inputs), once every plane of it is read.
  const bool by_range = epilogue != nullptr && !epilogue->after_inputs;
  if (channels_last) {
    parallel_for(n * inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const G* xs = rx.data() + r * c;
                     G* ys = wy.data() + r * c;
                     for (int64_t j = 0; j < c; ++j)
                       ys[j] = xs[j] * scale[j] + shift[j];
                   }
                   if (by_range) apply_epilogue(*epilogue, r0 * c, r1 * c);
                 });
  } else {
    parallel_for(n * c, std::max<int64_t>(1, 16384 / std::max<int64_t>(inner, 1)),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t pl = p0; pl < p1; ++pl) {
                     const G* xs = rx.data() + pl * inner;
                     G* ys = wy.data() + pl * inner;
                     const G s = scale[pl % c], t = shift[pl % c];
                     for (int64_t j = 0; j < inner; ++j)
                       ys[j] = xs[j] * s + t;
                   }
                   if (by_range) apply_epilogue(*epilogue, p0 * inner, p1 * inner);
                 });
  }
  wy.finish();
  if (epilogue != nullptr && !by_range) apply_epilogue_whole(*epilogue, out.numel());
}

Status batch_norm_no_training_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = tensor_arg(args, 0);
  const TensorView* weight = opt_tensor_arg(args, 1);
  const TensorView* bias = opt_tensor_arg(args, 2);
  const TensorView& rm = tensor_arg(args, 3);
  const TensorView& rv = tensor_arg(args, 4);
  const double eps = float_arg(args, 6);
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  if (x.rank() < 2) return ctx.error("input must have rank 2 or more, got " + shape_str(x.sizes));
  const int64_t c = x.sizes[1];
  const std::pair<const char*, const TensorView*> params[] = {
      {"weight", weight}, {"bias", bias}, {"running_mean", &rm}, {"running_var", &rv}};
  for (const auto& [name, t] : params) {
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c)) {
      return ctx.error(std::string(name) + " must have shape [" + std::to_string(c) +
                       "] (the channel count), got " + shape_str(t->sizes));
    }
  }
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, x.sizes, x.dtype, "out0"));
  // No statistics are saved outside training: outs 1 and 2 are empty.
  const std::vector<int64_t> empty{0};
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out_arg(args, 8), empty, "out1"));
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out_arg(args, 9), empty, "out2"));
  if (out.numel() == 0) return Status();
  if (ctx.is_channels_last(7)) {
    // A channels-last chain's (kernels/load_plan.h): the load planner sets this only for
    // float32 4-d tensors, the input channels-last too.
    if (x.dtype != DType::kFloat32 || out.dtype != DType::kFloat32 || x.rank() != 4 ||
        !ctx.is_channels_last(0)) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last batch norm takes float32 4-d tensors");
    }
    batch_norm_typed<float>(x, weight, bias, rm, rv, eps, out, ctx.epilogue, true);
    return Status();
  }
  if (x.dtype == DType::kFloat64) {
    batch_norm_typed<double>(x, weight, bias, rm, rv, eps, out, nullptr);
  } else {
    // An epilogue only on float32 (the load planner).
    batch_norm_typed<float>(x, weight, bias, rm, rv, eps, out,
                            out.dtype == DType::kFloat32 ? ctx.epilogue : nullptr);
  }
  return Status();
}

// Out variants ExecuTorch's programs call that etc's importer writes with the ops above.

// max.unary_out / min.unary_out(self, *, out): the greatest (least) element, 0-d; NaN wins.
template <bool kMax>
Status extreme_all_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  ETC_RETURN_IF_ERROR(check_out(ctx, out, {}, self.dtype));
  if (self.numel() == 0) {
    return ctx.error(std::string(kMax ? "max" : "min") + " of an empty tensor " +
                     shape_str(self.sizes));
  }
  visit_dtype(self.dtype, [&]<typename T>() {
    using C = ComputeT<T>;
    const T* x = self.data_as<const T>();
    C best = convert<C>(x[0]);
    for (int64_t i = 1; i < self.numel() && best == best; ++i) {
      const C v = convert<C>(x[i]);
      if ((kMax ? v > best : v < best) || v != v) best = v;
    }
    *out.data_as<T>() = convert<T>(best);
  });
  return Status();
}

// prod.out(self, *, ScalarType? dtype=None, out): the product of every element, 0-d.
Status prod_all_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  std::optional<DType> dtype = opt_dtype_arg(args, 1);
  const DType want = dtype.value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, {}, want));
  visit_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    if (dtype_is_float(want)) {
      double p = 1.0;
      for (int64_t i = 0; i < self.numel(); ++i)
        p *= convert<double>(x[i]);
      convert_elements(&p, DType::kFloat64, out.data, out.dtype, 1);
    } else {
      int64_t p = 1;
      for (int64_t i = 0; i < self.numel(); ++i)
        p = wrapping_mul(p, convert<int64_t>(x[i]));
      convert_elements(&p, DType::kInt64, out.data, out.dtype, 1);
    }
  });
  return Status();
}

// _native_batch_norm_legit.no_stats_out(input, weight?, bias?, training, momentum, eps, *,
// out, save_mean, save_invstd): batch norm with the batch's own statistics per channel (over
// every dim but dim 1, biased variance), in double.
Status batch_norm_no_stats_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* weight = a.opt_tensor("weight");
  const TensorView* bias = a.opt_tensor("bias");
  const double eps = a.real("eps");
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  if (x.rank() < 2) return ctx.error("input " + shape_str(x.sizes) + " needs rank 2 or more");
  const int64_t n = x.sizes[0], c = x.sizes[1];
  const int64_t inner = n * c == 0 ? 0 : x.numel() / (n * c);
  for (const TensorView* t : {weight, bias}) {
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c)) {
      return ctx.error(std::string(t == weight ? "weight " : "bias ") + shape_str(t->sizes) +
                       " must be [" + std::to_string(c) + "]");
    }
  }
  TensorView& out = a.out(0);
  TensorView& save_mean = a.out(1);
  TensorView& save_invstd = a.out(2);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, x.sizes, x.dtype, "out"));
  const std::vector<int64_t> per_channel{c};
  ETC_RETURN_IF_ERROR(check_out(ctx, save_mean, per_channel, x.dtype, "save_mean"));
  ETC_RETURN_IF_ERROR(check_out(ctx, save_invstd, per_channel, x.dtype, "save_invstd"));
  if (c == 0) return Status();
  ReadAs<double> rx(x);
  const double* xs = rx.data();
  Buffer<double> w = param_or<double>(weight, c, 1.0);
  Buffer<double> b = param_or<double>(bias, c, 0.0);
  Buffer<double> y(x.numel()), mu(c), inv(c);
  const double count = static_cast<double>(n * inner);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0.0, q = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j)
        s += xs[(i * c + ch) * inner + j];
    }
    const double m = s / count;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const double d = xs[(i * c + ch) * inner + j] - m;
        q += d * d;
      }
    }
    const double r = 1.0 / std::sqrt(q / count + eps);
    mu[ch] = m;
    inv[ch] = r;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        const int64_t at = (i * c + ch) * inner + j;
        y[at] = (xs[at] - m) * r * w[ch] + b[ch];
      }
    }
  }
  convert_elements(y.data(), DType::kFloat64, out.data, out.dtype, x.numel());
  convert_elements(mu.data(), DType::kFloat64, save_mean.data, save_mean.dtype, c);
  convert_elements(inv.data(), DType::kFloat64, save_invstd.data, save_invstd.dtype, c);
  return Status();
}

}  // namespace

void float_row_sums(const float* x, int64_t rows, int64_t count, double* acc) {
  // At least 16384 floats a thread (a global mean of 1280 x 7x7 took longer on two).
  auto* sums = isa_build(row_sums_avx512, row_sums_avx2, row_sums_portable);
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(count, 1)),
               [&](int64_t begin, int64_t end) { sums(x, count, begin, end, acc); });
}

void channels_last_sums(const float* x, int64_t batch, int64_t positions, int64_t channels,
                        double* acc) {
  // Tasks of whole blocks of kChannelSumBlock channels (an image's channels split where it
  // has at least two blocks), at least about 16384 floats each.
  constexpr int64_t kBlock = kChannelSumBlock;
  const int64_t blocks = (channels + kBlock - 1) / kBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(positions * kBlock, 1));
  auto* sums = isa_build(channel_sums_avx512, channel_sums_avx2, channel_sums_portable);
  parallel_for(batch * blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end;) {
      // The task's blocks of one image.
      const int64_t n = t / blocks, b0 = t % blocks;
      const int64_t b1 = std::min(blocks, b0 + (end - t));
      sums(x + n * positions * channels, positions, channels, b0 * kBlock,
           std::min(channels, b1 * kBlock), acc + n * channels);
      t += b1 - b0;
    }
  });
}

Status register_reduce_norm_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Amax, amax_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Amin, amax_kernel<false>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ProdDimInt, prod_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::VarCorrection, var_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::NativeGroupNorm, native_group_norm_kernel));
  // Out variants ExecuTorch's programs call that etc's importer writes with other ops.
  ETC_RETURN_IF_ERROR(r.add("aten::max.unary_out",
                            "max.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
                            extreme_all_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add("aten::min.unary_out",
                            "min.unary_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
                            extreme_all_kernel<false>));
  ETC_RETURN_IF_ERROR(
      r.add("aten::prod.out",
            "prod.out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
            prod_all_kernel));
  ETC_RETURN_IF_ERROR(r.add(
      "aten::_native_batch_norm_legit.no_stats_out",
      "_native_batch_norm_legit.no_stats_out(Tensor input, Tensor? weight, Tensor? bias, bool "
      "training, float momentum, float eps, *, Tensor(a!) out, Tensor(b!) save_mean, Tensor(c!) "
      "save_invstd) -> (Tensor(a!), Tensor(b!), Tensor(c!))",
      batch_norm_no_stats_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AnyDim, any_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MeanDim, mean_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SumDimIntList, sum_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Softmax, softmax_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::LogSoftmax, log_softmax_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::NativeLayerNorm, native_layer_norm_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::NativeBatchNormNoTraining, batch_norm_no_training_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
