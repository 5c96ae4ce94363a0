// 2-d pooling (max with indices, average, adaptive average), resizing (nearest and
// bilinear upsampling) and grid sampling, NCHW.
#include <immintrin.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "support/checked_math.h"

namespace etc::rt::kernels {
namespace {

// ---- Pooling -------------------------------------------------------------------------

// ATen's pooling_output_shape.
Result<int64_t> pooled_size(const KernelContext& ctx, int64_t in, int64_t k, int64_t pad,
                            int64_t stride, int64_t dilation, bool ceil_mode) {
  const std::optional<SlidingWindow> win = sliding_window(in, k, pad, stride, dilation, ceil_mode);
  if (!win) return ctx.error("kernel extent or padding overflows a 64-bit size");
  if (win->count == 0) {
    return ctx.error("kernel of extent " + std::to_string(win->span) +
                     " does not fit an input of size " + std::to_string(in) + " with padding " +
                     std::to_string(pad));
  }
  return win->count;
}

Result<PoolGeometry> pool_params(const KernelContext& ctx, const TensorView& self,
                                 const Value& kernel, const Value& stride, const Value& padding,
                                 const Value* dilation, bool ceil_mode) {
  if (self.rank() != 3 && self.rank() != 4) {
    return ctx.error("self must have rank 3 or 4, got " + shape_str(self.sizes));
  }
  PoolGeometry p;
  ETC_ASSIGN_OR_RETURN(p.kernel, pair_arg(ctx, "kernel_size", kernel.ints, 0, false));
  ETC_ASSIGN_OR_RETURN(p.stride, pair_arg(ctx, "stride", stride.ints, 0, true));
  if (stride.ints.empty()) p.stride = p.kernel;  // stride=[] means the kernel size
  ETC_ASSIGN_OR_RETURN(p.pad, pair_arg(ctx, "padding", padding.ints, 0, false));
  p.dil = {1, 1};
  if (dilation != nullptr) {
    ETC_ASSIGN_OR_RETURN(p.dil, pair_arg(ctx, "dilation", dilation->ints, 1, false));
  }
  for (int i = 0; i < 2; ++i) {
    if (p.kernel[i] <= 0) return ctx.error("kernel_size must be positive");
    if (p.stride[i] <= 0) return ctx.error("stride must be positive");
    if (p.dil[i] <= 0) return ctx.error("dilation must be positive");
    if (p.pad[i] < 0 || p.pad[i] > p.kernel[i] / 2) {
      return ctx.error("padding must be between 0 and half the kernel size, got " +
                       std::to_string(p.pad[i]));
    }
  }
  p.ceil_mode = ceil_mode;
  const size_t r = self.rank();
  p.in_h = self.sizes[r - 2];
  p.in_w = self.sizes[r - 1];
  ETC_ASSIGN_OR_RETURN(
      p.out_h, pooled_size(ctx, p.in_h, p.kernel[0], p.pad[0], p.stride[0], p.dil[0], ceil_mode));
  ETC_ASSIGN_OR_RETURN(
      p.out_w, pooled_size(ctx, p.in_w, p.kernel[1], p.pad[1], p.stride[1], p.dil[1], ceil_mode));
  p.planes = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    p.planes *= self.sizes[d];
  p.out_sizes = self.sizes;
  p.out_sizes[r - 2] = p.out_h;
  p.out_sizes[r - 1] = p.out_w;
  return p;
}

}  // namespace

// ---- Argument checks shared with the CUDA kernels -------------------------------------

Result<PoolGeometry> check_max_pool2d(const KernelContext& ctx, std::span<Value*> args,
                                      bool with_indices) {
  const TensorView& self = tensor_arg(args, 0);
  if (self.dtype == DType::kBool) {
    return unsupported_dtype(ctx, "self", self.dtype, "a numeric dtype (not bool)");
  }
  ETC_ASSIGN_OR_RETURN(PoolGeometry p,
                       pool_params(ctx, self, *args[1], *args[2], *args[3], args[4], args[5]->b));
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 6), p.out_sizes, self.dtype));
  if (with_indices) {
    ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 7), p.out_sizes, DType::kInt64, "indices"));
  }
  return p;
}

Result<PoolGeometry> check_avg_pool2d(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  if (!dtype_is_float(self.dtype) && self.dtype != DType::kInt64) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype or int64");
  }
  std::optional<int64_t> divisor = opt_int_arg(args, 6);
  if (divisor && *divisor == 0) return ctx.error("divisor_override must not be zero");
  ETC_ASSIGN_OR_RETURN(PoolGeometry p,
                       pool_params(ctx, self, *args[1], *args[2], *args[3], nullptr, args[4]->b));
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 7), p.out_sizes, self.dtype));
  return p;
}

Result<PoolGeometry> check_adaptive_avg_pool2d(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  const std::vector<int64_t>& os = args[1]->ints;
  if (self.rank() != 3 && self.rank() != 4) {
    return ctx.error("self must have rank 3 or 4, got " + shape_str(self.sizes));
  }
  if (!dtype_is_float(self.dtype)) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  }
  if (os.size() != 2 || os[0] <= 0 || os[1] <= 0) {
    return ctx.error("output_size must be two positive sizes, got " + shape_str(os));
  }
  const size_t r = self.rank();
  PoolGeometry p;
  p.in_h = self.sizes[r - 2];
  p.in_w = self.sizes[r - 1];
  p.out_h = os[0];
  p.out_w = os[1];
  p.planes = self.numel() / std::max<int64_t>(p.in_h * p.in_w, 1);
  p.out_sizes = self.sizes;
  p.out_sizes[r - 2] = os[0];
  p.out_sizes[r - 1] = os[1];
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 2), p.out_sizes, self.dtype));
  return p;
}

namespace {

// One output element: the window's largest value (NaN wins, as in PyTorch) and its flat
// index in the plane; the first of equal values is kept.
template <typename C>
inline bool max_pool_takes(C v, C best, bool have) {
  if constexpr (std::is_floating_point_v<C>) return !have | (v > best) | (v != v);
  return !have | (v > best);
}

// fn(ih, iw) for each tap of output (oh, ow)'s window that lies inside the input, in (row,
// column) order: padding is no tap.
template <typename F>
__attribute__((always_inline)) inline void for_each_window_tap(const PoolGeometry& p, int64_t oh,
                                                               int64_t ow, F&& fn) {
  const int64_t h0 = oh * p.stride[0] - p.pad[0], w0 = ow * p.stride[1] - p.pad[1];
  for (int64_t i = 0; i < p.kernel[0]; ++i) {
    const int64_t ih = h0 + i * p.dil[0];
    if (ih < 0 || ih >= p.in_h) continue;
    for (int64_t j = 0; j < p.kernel[1]; ++j) {
      const int64_t iw = w0 + j * p.dil[1];
      if (iw >= 0 && iw < p.in_w) fn(ih, iw);
    }
  }
}

// c ? a : b on the bits, without a branch (which tap wins is data: a branch mispredicts).
template <typename T>
inline T select_bits(bool c, T a, T b) {
  using U =
      std::conditional_t<sizeof(T) == 8, uint64_t,
                         std::conditional_t<sizeof(T) == 4, uint32_t,
                                            std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(U) == sizeof(T));
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(T));
  std::memcpy(&ub, &b, sizeof(T));
  const U mask = static_cast<U>(U(0) - static_cast<U>(c));
  const U r = static_cast<U>((ua & mask) | (ub & static_cast<U>(~mask)));
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

// 8 consecutive outputs of one tap row: src[0], src[stride], ... for stride 1 or 2 (stride
// 2 loads 16 values and keeps the even ones; the caller's buffer holds all 16).
__attribute__((target("avx2"))) inline __m256 tap_values_avx2(const float* src, int64_t stride) {
  if (stride == 1) return _mm256_loadu_ps(src);
  const __m256 even =
      _mm256_shuffle_ps(_mm256_loadu_ps(src), _mm256_loadu_ps(src + 8), _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The lanes of the 16 columns from c that lie in [0, in_w) (iota: 0..15; width: in_w).
__attribute__((target("avx512f,fma"))) inline __mmask16 columns_inside(int64_t c, int64_t in_w,
                                                                       __m512i iota,
                                                                       __m512i width) {
  if (c >= 0 && c + 16 <= in_w) return __mmask16(0xFFFF);
  if (c >= in_w || c + 16 <= 0) return __mmask16(0);
  const __m512i col = _mm512_add_epi32(iota, _mm512_set1_epi32(static_cast<int32_t>(c)));
  return _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(col, _mm512_setzero_si512()), col,
                                      width);
}

// A whole row of float32 max-pool outputs without indices on AVX-512, 16 at a time, column
// stride 1 or 2: `rows` are the window's rows inside the input (unpadded row starts, in
// order). Columns outside the input read as -inf through masked loads, so the edge outputs
// need no scalar path; -inf never wins against a value of the input (a larger value, a NaN,
// or -inf itself: the same bits), so every output equals the scalar loop's, which skips
// those taps. Stride 2 keeps the even lanes of two loads (one permute). Lanes past out_w are
// computed from in-bounds reads only and not stored.
// kGroups groups of 16 outputs from o0 (fewer than 64 outputs left: only the groups they need).
template <int kGroups>
__attribute__((target("avx512f,fma"), always_inline)) inline void max_pool_row_groups_avx512(
    const float* const* rows, int64_t nrows, int64_t in_w, int64_t kw, int64_t dw, int64_t stride,
    int64_t pad_w, int64_t out_w, float* out, int64_t o0) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i width = _mm512_set1_epi32(static_cast<int32_t>(in_w));
  {
    __m512 best[kGroups];
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g)
      best[g] = neg_inf;
    for (int64_t i = 0; i < nrows; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
#pragma GCC unroll 4
        for (int g = 0; g < kGroups; ++g) {
          const int64_t c =
              (o0 + int64_t{16} * g) * stride - pad_w + j * dw;  // the column of lane 0
          const __mmask16 m0 = columns_inside(c, in_w, iota, width);
          __m512 v = _mm512_mask_loadu_ps(neg_inf, m0, rows[i] + c);
          if (stride == 2) {
            const __mmask16 m1 = columns_inside(c + 16, in_w, iota, width);
            v = _mm512_permutex2var_ps(v, even,
                                       _mm512_mask_loadu_ps(neg_inf, m1, rows[i] + c + 16));
          }
          const __mmask16 take = _mm512_kor(_mm512_cmp_ps_mask(v, best[g], _CMP_GT_OQ),
                                            _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q));
          best[g] = _mm512_mask_blend_ps(take, best[g], v);
        }
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < kGroups; ++g) {
      const int64_t o = o0 + int64_t{16} * g, left = out_w - o;
      if (left <= 0) break;
      _mm512_mask_storeu_ps(out + o, left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1),
                            best[g]);
    }
  }
}

// Four groups of 16 outputs at a time: each output's taps are a chain of dependent compares
// and blends, and four independent chains keep the vector units busy (one chain at a time
// waited on each blend: 0.30 ms for resnet18's pooling). The last groups of a row only as many
// as it has outputs: a 14-wide row computed four groups, three of them all masked
// (googlenet's 14x14 and 7x7 pools took 4x their time).
__attribute__((target("avx512f,fma"))) void max_pool_row_f32_avx512(const float* const* rows,
                                                                    int64_t nrows, int64_t in_w,
                                                                    int64_t kw, int64_t dw,
                                                                    int64_t stride, int64_t pad_w,
                                                                    int64_t out_w, float* out) {
  for (int64_t o0 = 0; o0 < out_w; o0 += 64) {
    const int64_t left = out_w - o0;
    if (left > 48) {
      max_pool_row_groups_avx512<4>(rows, nrows, in_w, kw, dw, stride, pad_w, out_w, out, o0);
    } else if (left > 32) {
      max_pool_row_groups_avx512<3>(rows, nrows, in_w, kw, dw, stride, pad_w, out_w, out, o0);
    } else if (left > 16) {
      max_pool_row_groups_avx512<2>(rows, nrows, in_w, kw, dw, stride, pad_w, out_w, out, o0);
    } else {
      max_pool_row_groups_avx512<1>(rows, nrows, in_w, kw, dw, stride, pad_w, out_w, out, o0);
    }
  }
}

// One tap across a row of outputs: best[o] and index[o] (may be null) take src[o * stride]
// when it is larger or NaN, or unconditionally for the window's first tap. No output depends
// on another, so the loop pipelines (and vectorises without indices).
template <typename T>
void pool_row_tap(const T* __restrict src, int64_t stride, int64_t count, T* __restrict best,
                  int64_t* __restrict index, int64_t idx0, bool first) {
  if (first) {
    for (int64_t o = 0; o < count; ++o)
      best[o] = src[o * stride];
    if (index != nullptr) {
      for (int64_t o = 0; o < count; ++o)
        index[o] = idx0 + o * stride;
    }
    return;
  }
  if (index == nullptr) {
    for (int64_t o = 0; o < count; ++o) {
      const T v = src[o * stride];
      best[o] = select_bits(max_pool_takes<T>(v, best[o], true), v, best[o]);
    }
    return;
  }
  for (int64_t o = 0; o < count; ++o) {
    const T v = src[o * stride];
    const bool take = max_pool_takes<T>(v, best[o], true);
    best[o] = select_bits(take, v, best[o]);
    index[o] = select_bits(take, idx0 + o * stride, index[o]);
  }
}

// Float max pooling without indices on AVX2 (and on AVX-512 for rows of up to 64 outputs).
// Each plane is first copied into a buffer bordered with -inf (as many columns past it as a
// group of 8 outputs at stride 2 reads), so that every tap is a plain load with no bounds or
// mask to compute; its output rows then go four at a time as independent chains (one chain
// per row kept the vector units waiting on each compare and blend on narrow rows), each
// over its window's taps in the scalar loop's order with its rule (best starts at -inf,
// which the first tap replaces unless it is -inf itself; a border tap is -inf, which never
// wins): the same bits. Without masks this beats the AVX-512 row kernel up to 64 outputs.
template <int kChains>
__attribute__((target("avx2"), always_inline)) inline void max_pool_chains_avx2(
    const float* const* rows, int64_t kh, int64_t kw, int64_t dw, int64_t stride, int64_t groups,
    int64_t out_w, float* const* outs) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t g = 0; g < groups; ++g) {
    __m256 best[kChains];
#pragma GCC unroll 4
    for (int ch = 0; ch < kChains; ++ch)
      best[ch] = neg_inf;
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
#pragma GCC unroll 4
        for (int ch = 0; ch < kChains; ++ch) {
          const __m256 v = tap_values_avx2(rows[ch * kh + i] + j * dw + 8 * g * stride, stride);
          const __m256 take = _mm256_or_ps(_mm256_cmp_ps(v, best[ch], _CMP_GT_OQ),
                                           _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
          best[ch] = _mm256_blendv_ps(best[ch], v, take);
        }
      }
    }
    // Whole groups as plain stores; the last one's valid lanes one by one (a masked store,
    // vmaskmovps, is microcoded on AMD's cores: as masked stores every group took a quarter
    // of squeezenet's 111x111 pool).
    const int64_t left = std::min<int64_t>(8, out_w - 8 * g);
    if (left == 8) {
#pragma GCC unroll 4
      for (int ch = 0; ch < kChains; ++ch)
        _mm256_storeu_ps(outs[ch] + 8 * g, best[ch]);
    } else {
      alignas(32) float lanes[8];
      for (int ch = 0; ch < kChains; ++ch) {
        _mm256_store_ps(lanes, best[ch]);
        std::memcpy(outs[ch] + 8 * g, lanes, static_cast<size_t>(left) * sizeof(float));
      }
    }
  }
}

__attribute__((target("avx2"))) void max_pool_bordered_avx2(const PoolGeometry& p, const float* x,
                                                            float* y, int64_t r0, int64_t r1) {
  const int64_t kh = p.kernel[0], kw = p.kernel[1];
  // The bordered plane: pad rows above, enough below for the last window; pad columns to the
  // left, and to the right the last window's reach plus a stride-2 group's 16 loads.
  const int64_t top = p.pad[0];
  const int64_t bottom =
      std::max<int64_t>(0, (p.out_h - 1) * p.stride[0] + (kh - 1) * p.dil[0] - top - p.in_h + 1);
  const int64_t left = p.pad[1];
  const int64_t width =
      left +
      std::max<int64_t>(p.in_w, (p.out_w - 1) * p.stride[1] + (kw - 1) * p.dil[1] - left + 1) + 32;
  const int64_t height = top + p.in_h + bottom;
  // The border is -inf once for the whole call: each plane's copy writes the interior only.
  thread_local std::vector<float> plane;
  plane.assign(static_cast<size_t>(height * width), -std::numeric_limits<float>::infinity());
  const float* rows[4 * 16];
  float* outs[4];
  const int64_t groups = (p.out_w + 7) / 8;
  for (int64_t r = r0; r < r1;) {
    const int64_t pl = r / p.out_h;
    const float* xp = x + pl * p.in_h * p.in_w;
    for (int64_t ih = 0; ih < p.in_h; ++ih) {
      std::memcpy(plane.data() + (top + ih) * width + left, xp + ih * p.in_w,
                  static_cast<size_t>(p.in_w) * sizeof(float));
    }
    const int64_t end = std::min(r1, (pl + 1) * p.out_h);  // this plane's rows
    while (r < end) {
      const int chains = static_cast<int>(std::min<int64_t>(4, end - r));
      for (int ch = 0; ch < chains; ++ch) {
        const int64_t oh = (r + ch) % p.out_h;
        for (int64_t i = 0; i < kh; ++i)
          rows[ch * kh + i] = plane.data() + (oh * p.stride[0] + i * p.dil[0]) * width;
        outs[ch] = y + (pl * p.out_h + oh) * p.out_w;
      }
      switch (chains) {
        case 4:
          max_pool_chains_avx2<4>(rows, kh, kw, p.dil[1], p.stride[1], groups, p.out_w, outs);
          break;
        case 3:
          max_pool_chains_avx2<3>(rows, kh, kw, p.dil[1], p.stride[1], groups, p.out_w, outs);
          break;
        case 2:
          max_pool_chains_avx2<2>(rows, kh, kw, p.dil[1], p.stride[1], groups, p.out_w, outs);
          break;
        default:
          max_pool_chains_avx2<1>(rows, kh, kw, p.dil[1], p.stride[1], groups, p.out_w, outs);
      }
      r += chains;
    }
  }
}

template <typename T>
void max_pool_typed(const PoolGeometry& p, const TensorView& self, TensorView& out,
                    int64_t* indices) {
  using C = ComputeT<T>;
  const T* x = self.data_as<const T>();
  T* y = out.data_as<T>();
  const int64_t in_plane = p.in_h * p.in_w;
  const int64_t out_plane = p.out_h * p.out_w;
  // Output (pl, oh, ow) over its window, bounds-checked: padding counts as -inf (skipped).
  auto one_output = [&](const T* xp, int64_t pl, int64_t oh, int64_t ow) {
    C best{};
    int64_t best_index = -1;
    for_each_window_tap(p, oh, ow, [&](int64_t ih, int64_t iw) {
      const int64_t idx = ih * p.in_w + iw;
      const C v = convert<C>(xp[idx]);
      if (max_pool_takes(v, best, best_index >= 0)) {
        best = v;
        best_index = idx;
      }
    });
    if (best_index < 0) {  // no tap inside (impossible with pad <= kernel / 2)
      best = std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                         : std::numeric_limits<C>::lowest();
    }
    const int64_t o = pl * out_plane + oh * p.out_w + ow;
    y[o] = convert<T>(best);
    if (indices != nullptr) indices[o] = best_index;
  };
  // Row oh of plane pl. Outputs [lo, hi) of a row whose windows lie inside the input go a
  // tap at a time across the row (pool_row_tap), so that no output waits on the previous
  // tap's comparison; the rest take the bounds-checked path.
  auto one_row = [&](int64_t pl, int64_t oh) {
    const T* xp = x + pl * in_plane;
    const int64_t h0 = oh * p.stride[0] - p.pad[0];
    int64_t lo = 0, hi = 0;
    if constexpr (std::is_same_v<T, C>) {
      // The window's rows inside the input, [i0, i1): a row of padding is no tap (-inf), so
      // the top and bottom output rows skip theirs and go the same way.
      int64_t i0 = 0, i1 = p.kernel[0];
      while (i0 < i1 && h0 + i0 * p.dil[0] < 0)
        ++i0;
      while (i1 > i0 && h0 + (i1 - 1) * p.dil[0] >= p.in_h)
        --i1;
      if (i0 < i1) {
        lo = std::min(p.out_w, (p.pad[1] + p.stride[1] - 1) / p.stride[1]);
        hi = p.out_w;
        while (hi > lo &&
               (hi - 1) * p.stride[1] - p.pad[1] + (p.kernel[1] - 1) * p.dil[1] >= p.in_w)
          --hi;
        T* yr = y + pl * out_plane + oh * p.out_w;
        int64_t* ir = indices != nullptr ? indices + pl * out_plane + oh * p.out_w : nullptr;
        if constexpr (std::is_same_v<T, float>) {
          if (ir == nullptr && (p.stride[1] == 1 || p.stride[1] == 2) && i1 - i0 <= 16 &&
              gemm_float_kernel() == FloatKernel::kAvx512) {
            const float* rows[16];
            for (int64_t i = i0; i < i1; ++i)
              rows[i - i0] = xp + (h0 + i * p.dil[0]) * p.in_w;
            max_pool_row_f32_avx512(rows, i1 - i0, p.in_w, p.kernel[1], p.dil[1], p.stride[1],
                                    p.pad[1], p.out_w, yr);
            return;  // the whole row, edges included
          }
        }
        for (int64_t i = i0; i < i1; ++i) {
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            const int64_t first =
                (h0 + i * p.dil[0]) * p.in_w + j * p.dil[1] - p.pad[1] + lo * p.stride[1];
            pool_row_tap<T>(xp + first, p.stride[1], hi - lo, yr + lo,
                            ir == nullptr ? nullptr : ir + lo, first, i == i0 && j == 0);
          }
        }
      }
    }
    for (int64_t ow = 0; ow < lo; ++ow)
      one_output(xp, pl, oh, ow);
    for (int64_t ow = std::max(lo, hi); ow < p.out_w; ++ow)
      one_output(xp, pl, oh, ow);
  };
  if constexpr (std::is_same_v<T, float>) {
    if (indices == nullptr && (p.out_w <= 64 || gemm_float_kernel() == FloatKernel::kAvx2) &&
        (p.stride[1] == 1 || p.stride[1] == 2) && p.kernel[0] <= 16 && gemm_uses_avx2()) {
      // Output rows across threads, four at a time on each.
      parallel_for(p.planes * p.out_h, 64,
                   [&](int64_t r0, int64_t r1) { max_pool_bordered_avx2(p, x, y, r0, r1); });
      return;
    }
  }
  // Planes (channels) in parallel: each output element is one thread's, computed as serially.
  parallel_for(p.planes, 1, [&](int64_t pl0, int64_t pl1) {
    for (int64_t pl = pl0; pl < pl1; ++pl) {
      for (int64_t oh = 0; oh < p.out_h; ++oh)
        one_row(pl, oh);
    }
  });
}

// Float max pooling of channels-last tensors (x [N, H, W, C], y [N, OH, OW, C]) without
// indices: each output pixel's channels side by side, over the window's taps in (row,
// column) order with the scalar loop's rule (the first tap inside the input, then a larger
// value or a NaN), so the bits of the NCHW kernel. Output rows across threads; built for
// AVX-512, AVX2 and any x86-64, chosen per call as the GEMM's micro-kernel is.
// best[c] takes v[c] where it is larger or NaN, the scalar loop's rule. Pointers as restrict
// parameters, so that the compiler vectorises it (through the window lambda below it kept the
// loop scalar: 512-channel 14x14 pools ran at one element per cycle).
__attribute__((always_inline)) inline void max_pool_take(float* __restrict best,
                                                         const float* __restrict v, int64_t n) {
  for (int64_t c = 0; c < n; ++c)
    best[c] = (v[c] > best[c]) | (v[c] != v[c]) ? v[c] : best[c];
}

// Up to 64 channels of one output over its taps (channel-block pointers) in V zmm, the
// last under `last` (a block's rest: 24 channels are a vector and a half): taking each tap
// into the out in memory cost a load and a store of the running maximum per tap, and a rest
// of channels went that way at 6 ns a tap (shufflenet's 24-channel pool 0.16 -> 0.11 ms, 11%
// of the model before). The same rule in the same tap order: the same bits. Lanes outside
// `last` load as zero and are never stored. (Taking the taps in four runs side by side, joined
// in order, which gives the same bits with four chains of compares, was no faster.)
constexpr int64_t kPoolChannelBlock = 64;
constexpr int64_t kPoolBlockTaps = 64;
template <int V>
__attribute__((target("avx512f,fma"), always_inline)) inline void max_pool_block_avx512(
    const float* const* taps, int64_t count, float* out, __mmask16 last) {
  __m512 best[V];
#pragma GCC unroll 4
  for (int k = 0; k < V; ++k)
    best[k] = _mm512_maskz_loadu_ps(k == V - 1 ? last : __mmask16{0xFFFF}, taps[0] + 16L * k);
  for (int64_t t = 1; t < count; ++t) {
#pragma GCC unroll 4
    for (int k = 0; k < V; ++k) {
      const __m512 v =
          _mm512_maskz_loadu_ps(k == V - 1 ? last : __mmask16{0xFFFF}, taps[t] + 16L * k);
      const __mmask16 take =
          _mm512_cmp_ps_mask(v, best[k], _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
      best[k] = _mm512_mask_mov_ps(best[k], take, v);
    }
  }
#pragma GCC unroll 4
  for (int k = 0; k < V - 1; ++k)
    _mm512_storeu_ps(out + 16L * k, best[k]);
  _mm512_mask_storeu_ps(out + 16L * (V - 1), last, best[V - 1]);
}
// `n` channels (1 to 64) from each of `count` taps (at least one).
__attribute__((target("avx512f,fma"))) void max_pool_channels_avx512(const float* const* taps,
                                                                     int64_t count, float* out,
                                                                     int64_t n) {
  const int64_t vectors = (n + 15) / 16;
  const auto last = static_cast<__mmask16>((1u << (n - 16 * (vectors - 1))) - 1u);
  switch (vectors) {
    case 1:
      return max_pool_block_avx512<1>(taps, count, out, last);
    case 2:
      return max_pool_block_avx512<2>(taps, count, out, last);
    case 3:
      return max_pool_block_avx512<3>(taps, count, out, last);
    default:
      return max_pool_block_avx512<4>(taps, count, out, last);
  }
}

// The same in ymm registers: `vectors` (1 to 8) whole vectors of 8 channels from each of
// `count` taps (at least one), the running maxima in registers. AVX2 has no cheap masked
// store on AMD (vmaskmovps is microcoded), so a block's rest of channels (n % 8) goes the
// memory loop's way in max_pool_nhwc_body. shufflenet's 24-channel pool on a Zen 1: 0.205 ms
// with the maxima in memory.
template <int V>
__attribute__((target("avx2"), always_inline)) inline void max_pool_block_avx2(
    const float* const* taps, int64_t count, float* out) {
  __m256 best[V];
#pragma GCC unroll 8
  for (int k = 0; k < V; ++k)
    best[k] = _mm256_loadu_ps(taps[0] + 8L * k);
  for (int64_t t = 1; t < count; ++t) {
#pragma GCC unroll 8
    for (int k = 0; k < V; ++k) {
      const __m256 v = _mm256_loadu_ps(taps[t] + 8L * k);
      const __m256 take =
          _mm256_or_ps(_mm256_cmp_ps(v, best[k], _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      best[k] = _mm256_blendv_ps(best[k], v, take);
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < V; ++k)
    _mm256_storeu_ps(out + 8L * k, best[k]);
}
__attribute__((target("avx2"))) void max_pool_vectors_avx2(const float* const* taps, int64_t count,
                                                           float* out, int64_t vectors) {
  switch (vectors) {
    case 1:
      return max_pool_block_avx2<1>(taps, count, out);
    case 2:
      return max_pool_block_avx2<2>(taps, count, out);
    case 3:
      return max_pool_block_avx2<3>(taps, count, out);
    case 4:
      return max_pool_block_avx2<4>(taps, count, out);
    case 5:
      return max_pool_block_avx2<5>(taps, count, out);
    case 6:
      return max_pool_block_avx2<6>(taps, count, out);
    case 7:
      return max_pool_block_avx2<7>(taps, count, out);
    default:
      return max_pool_block_avx2<8>(taps, count, out);
  }
}

// How max_pool_nhwc_body takes a window (one whose taps fit kPoolBlockTaps): blocks of up to
// 64 channels in zmm registers (max_pool_channels_avx512), in ymm registers
// (max_pool_vectors_avx2, a rest of channels by the memory loop), or the running maximum in
// the out (any build, any window).
enum class PoolBlocks : uint8_t { kNone, kAvx512, kAvx2 };

__attribute__((always_inline)) inline void max_pool_nhwc_body(
    const PoolGeometry& p, int64_t channels, const float* x, float* y, int64_t r0, int64_t r1,
    PoolBlocks blocks = PoolBlocks::kNone) {
  if (p.kernel[0] * p.kernel[1] > kPoolBlockTaps) blocks = PoolBlocks::kNone;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / p.out_h, oh = r % p.out_h;
    for (int64_t ow = 0; ow < p.out_w; ++ow) {
      float* __restrict best = y + ((n * p.out_h + oh) * p.out_w + ow) * channels;
      if (blocks != PoolBlocks::kNone) {
        const float* taps[kPoolBlockTaps];
        int64_t count = 0;
        for_each_window_tap(p, oh, ow, [&](int64_t ih, int64_t iw) {
          taps[count++] = x + ((n * p.in_h + ih) * p.in_w + iw) * channels;
        });
        if (count == 0) {  // no tap inside (impossible with pad <= kernel / 2)
          std::fill_n(best, channels, -std::numeric_limits<float>::infinity());
        }
        for (int64_t c0 = 0; count > 0 && c0 < channels; c0 += kPoolChannelBlock) {
          const int64_t block = std::min(kPoolChannelBlock, channels - c0);
          if (blocks == PoolBlocks::kAvx512) {
            max_pool_channels_avx512(taps, count, best + c0, block);
          } else {
            const int64_t whole = block / 8 * 8;
            if (whole > 0) max_pool_vectors_avx2(taps, count, best + c0, whole / 8);
            if (whole < block) {  // the rest, the maximum in the out
              float* rest = best + c0 + whole;
              std::memcpy(rest, taps[0] + whole, static_cast<size_t>(block - whole) * 4);
              for (int64_t t = 1; t < count; ++t)
                max_pool_take(rest, taps[t] + whole, block - whole);
            }
          }
          for (int64_t t = 0; t < count; ++t)
            taps[t] += kPoolChannelBlock;
        }
        continue;
      }
      // The running maximum in the out.
      bool first = true;
      for_each_window_tap(
          p, oh, ow, [&](int64_t ih, int64_t iw) __attribute__((always_inline)) {
            const float* __restrict v = x + ((n * p.in_h + ih) * p.in_w + iw) * channels;
            if (first) {
              std::memcpy(best, v, static_cast<size_t>(channels) * sizeof(float));
              first = false;
              return;
            }
            max_pool_take(best, v, channels);
          });
      if (first) {  // no tap inside (impossible with pad <= kernel / 2)
        for (int64_t c = 0; c < channels; ++c)
          best[c] = -std::numeric_limits<float>::infinity();
      }
    }
  }
}
__attribute__((target("avx512f,fma"))) void max_pool_nhwc_avx512(const PoolGeometry& p,
                                                                 int64_t channels, const float* x,
                                                                 float* y, int64_t r0, int64_t r1) {
  max_pool_nhwc_body(p, channels, x, y, r0, r1, PoolBlocks::kAvx512);
}
__attribute__((target("avx2"))) void max_pool_nhwc_avx2(const PoolGeometry& p, int64_t channels,
                                                        const float* x, float* y, int64_t r0,
                                                        int64_t r1) {
  max_pool_nhwc_body(p, channels, x, y, r0, r1, PoolBlocks::kAvx2);
}
void max_pool_nhwc_portable(const PoolGeometry& p, int64_t channels, const float* x, float* y,
                            int64_t r0, int64_t r1) {
  max_pool_nhwc_body(p, channels, x, y, r0, r1);
}

Status max_pool(KernelContext& ctx, std::span<Value*> args, bool with_indices) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  ETC_ASSIGN_OR_RETURN(const PoolGeometry p, check_max_pool2d(ctx, args, with_indices));
  TensorView& out = out_arg(args, 6);
  int64_t* indices = nullptr;
  // Indices nothing reads (an inference program's) are not computed: a plain max.
  if (with_indices && !ctx.is_unread(7)) indices = out_arg(args, 7).data_as<int64_t>();
  if (out.numel() == 0) return Status();
  if (ctx.is_channels_last(0) || ctx.is_channels_last(6)) {
    // Set at load only for a float pooling whose indices nothing reads, input and out alike
    // (kernels/load_plan.h).
    if (!ctx.is_channels_last(0) || !ctx.is_channels_last(6) || indices != nullptr ||
        self.dtype != DType::kFloat32 || out.dtype != DType::kFloat32 || self.rank() != 4) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last pooling needs float tensors both channels-last "
                            "and no indices");
    }
    const int64_t channels = self.sizes[1], rows = self.sizes[0] * p.out_h;
    const float* x = self.data_as<const float>();
    float* y = out.data_as<float>();
    auto* run = isa_build(max_pool_nhwc_avx512, max_pool_nhwc_avx2, max_pool_nhwc_portable);
    parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(p.out_w * channels, 1)),
                 [&](int64_t r0, int64_t r1) { run(p, channels, x, y, r0, r1); });
    return Status();
  }
  visit_dtype(self.dtype, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) max_pool_typed<T>(p, self, out, indices);
  });
  return Status();
}

Status max_pool2d_with_indices_kernel(KernelContext& ctx, std::span<Value*> args) {
  return max_pool(ctx, args, true);
}

// The IR's max_pool2d (one output; ExecuTorch only has the with_indices out-variant).
Status max_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  return max_pool(ctx, args, false);
}

// The input window of average pooling's output (oh, ow) and its divisor. ATen: the padded
// window (clipped to input + padding) sets count_include_pad's divisor; the sum runs over the
// part inside the input, rows [h0, h1) and columns [w0, w1).
struct AvgWindow {
  int64_t h0 = 0, h1 = 0, w0 = 0, w1 = 0, divisor = 1;
};
AvgWindow avg_window(const PoolGeometry& p, int64_t oh, int64_t ow, bool count_include_pad,
                     std::optional<int64_t> divisor_override) {
  AvgWindow a;
  a.h0 = oh * p.stride[0] - p.pad[0];
  a.w0 = ow * p.stride[1] - p.pad[1];
  a.h1 = std::min(a.h0 + p.kernel[0], p.in_h + p.pad[0]);
  a.w1 = std::min(a.w0 + p.kernel[1], p.in_w + p.pad[1]);
  const int64_t padded_count = (a.h1 - a.h0) * (a.w1 - a.w0);
  a.h0 = std::max<int64_t>(a.h0, 0);
  a.w0 = std::max<int64_t>(a.w0, 0);
  a.h1 = std::min(a.h1, p.in_h);
  a.w1 = std::min(a.w1, p.in_w);
  a.divisor = divisor_override    ? *divisor_override
              : count_include_pad ? padded_count
                                  : (a.h1 - a.h0) * (a.w1 - a.w0);
  return a;
}

template <typename T>
void avg_pool_typed(const PoolGeometry& p, bool count_include_pad,
                    std::optional<int64_t> divisor_override, const TensorView& self,
                    TensorView& out) {
  const T* x = self.data_as<const T>();
  T* y = out.data_as<T>();
  const int64_t in_plane = p.in_h * p.in_w;
  for (int64_t pl = 0; pl < p.planes; ++pl) {
    const T* xp = x + pl * in_plane;
    for (int64_t oh = 0; oh < p.out_h; ++oh) {
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow win = avg_window(p, oh, ow, count_include_pad, divisor_override);
        const int64_t h0 = win.h0, h1 = win.h1, w0 = win.w0, w1 = win.w1, divisor = win.divisor;
        T& result = y[(pl * p.out_h + oh) * p.out_w + ow];
        if constexpr (std::is_same_v<T, int64_t>) {
          // ATen sums int64 in int64 (wrapping) and divides truncating toward zero.
          uint64_t sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw)
              sum += static_cast<uint64_t>(xp[ih * p.in_w + iw]);
          }
          const auto s = static_cast<int64_t>(sum);
          result = divisor == -1 ? static_cast<int64_t>(0 - sum) : s / divisor;
        } else {
          double sum = 0;
          for (int64_t ih = h0; ih < h1; ++ih) {
            for (int64_t iw = w0; iw < w1; ++iw)
              sum += convert<double>(xp[ih * p.in_w + iw]);
          }
          result = convert<T>(sum / static_cast<double>(divisor));
        }
      }
    }
  }
}

// avg_pool_typed for float [N, H, W, C] tensors of a channels-last chain
// (kernels/load_plan.h): each output position's channels summed over the same window in the
// same order, in double, and divided alike.
void avg_pool_channels_last(const PoolGeometry& p, bool count_include_pad,
                            std::optional<int64_t> divisor_override, const TensorView& self,
                            TensorView& out) {
  const int64_t c = self.sizes[1];
  const float* x = self.data_as<const float>();
  float* y = out.data_as<float>();
  const int64_t rows = self.sizes[0] * p.out_h;  // output rows of every image
  parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<double> sum(static_cast<size_t>(c));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.out_h, oh = r % p.out_h;
      for (int64_t ow = 0; ow < p.out_w; ++ow) {
        const AvgWindow win = avg_window(p, oh, ow, count_include_pad, divisor_override);
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t ih = win.h0; ih < win.h1; ++ih) {
          for (int64_t iw = win.w0; iw < win.w1; ++iw) {
            const float* px = x + ((n * p.in_h + ih) * p.in_w + iw) * c;
            for (int64_t k = 0; k < c; ++k)
              sum[static_cast<size_t>(k)] += static_cast<double>(px[k]);
          }
        }
        float* py = y + ((n * p.out_h + oh) * p.out_w + ow) * c;
        const auto divisor = static_cast<double>(win.divisor);
        for (int64_t k = 0; k < c; ++k)
          py[k] = static_cast<float>(sum[static_cast<size_t>(k)] / divisor);
      }
    }
  });
}

Status avg_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  ETC_ASSIGN_OR_RETURN(const PoolGeometry p, check_avg_pool2d(ctx, args));
  const std::optional<int64_t> divisor = opt_int_arg(args, 6);
  TensorView& out = out_arg(args, 7);
  if (out.numel() == 0) return Status();
  if (ctx.is_channels_last(7)) {
    // The load planner sets this only for float32 4-d tensors, the input channels-last too.
    if (self.dtype != DType::kFloat32 || out.dtype != DType::kFloat32 || self.rank() != 4 ||
        !ctx.is_channels_last(0)) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last average pooling takes float32 4-d tensors");
    }
    avg_pool_channels_last(p, args[5]->b, divisor, self, out);
    return Status();
  }
  if (self.dtype == DType::kInt64) {
    avg_pool_typed<int64_t>(p, args[5]->b, divisor, self, out);
  } else {
    visit_float_dtype(self.dtype,
                      [&]<typename T>() { avg_pool_typed<T>(p, args[5]->b, divisor, self, out); });
  }
  return Status();
}

Status adaptive_avg_pool2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  const std::vector<int64_t>& os = args[1]->ints;
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const PoolGeometry geo, check_adaptive_avg_pool2d(ctx, args));
  if (out.numel() == 0) return Status();
  const int64_t ih = geo.in_h, iw = geo.in_w, planes = geo.planes;
  if (ctx.is_channels_last(0)) {
    // The input of a channels-last chain (kernels/load_plan.h), held [N, H, W, C]: a
    // squeeze-and-excitation block's global mean. The load planner sets this only for a
    // float32 4-d input and a 1x1 output, whose bytes are the same in either layout.
    if (os[0] != 1 || os[1] != 1 || self.dtype != DType::kFloat32 || self.rank() != 4) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last input takes a float32 4-d tensor and a 1x1 out");
    }
    Buffer<double> sums(planes);
    channels_last_sums(self.data_as<const float>(), self.sizes[0], ih * iw, self.sizes[1],
                       sums.data());
    float* y = out.data_as<float>();
    for (int64_t pl = 0; pl < planes; ++pl)
      y[pl] = static_cast<float>(sums[pl] / static_cast<double>(ih * iw));
    return Status();
  }
  if (os[0] == 1 && os[1] == 1 && self.dtype == DType::kFloat32) {
    // A global mean (mobilenet_v3's squeeze-and-excitation blocks, every classifier's pool):
    // each plane summed by the vector builds in double, as mean.dim; the plane-by-plane loop
    // below summed one double at a time, 10% of mobilenet_v3_small.
    Buffer<double> sums(planes);
    float_row_sums(self.data_as<const float>(), planes, ih * iw, sums.data());
    float* y = out.data_as<float>();
    const auto count = static_cast<double>(ih * iw);
    for (int64_t pl = 0; pl < planes; ++pl)
      y[pl] = static_cast<float>(sums[pl] / count);
    return Status();
  }
  visit_float_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    T* y = out.data_as<T>();
    for (int64_t pl = 0; pl < planes; ++pl) {
      for (int64_t oh = 0; oh < os[0]; ++oh) {
        // PyTorch: start = floor(i * in / out), end = ceil((i + 1) * in / out).
        const int64_t h0 = oh * ih / os[0];
        const int64_t h1 = ((oh + 1) * ih + os[0] - 1) / os[0];
        for (int64_t ow = 0; ow < os[1]; ++ow) {
          const int64_t w0 = ow * iw / os[1];
          const int64_t w1 = ((ow + 1) * iw + os[1] - 1) / os[1];
          double sum = 0;
          for (int64_t h = h0; h < h1; ++h) {
            for (int64_t w = w0; w < w1; ++w)
              sum += convert<double>(x[(pl * ih + h) * iw + w]);
          }
          const auto count = static_cast<double>((h1 - h0) * (w1 - w0));
          y[(pl * os[0] + oh) * os[1] + ow] = convert<T>(sum / count);
        }
      }
    }
  });
  return Status();
}

// Source coordinate of output position o along a dim resized from `in` to `out` elements.
struct ResizeAxis {
  int64_t in = 0, out = 0;
  std::optional<double> scale;  // the scale factor, when given instead of a size
  bool align_corners = false;

  // nearest ("legacy" PyTorch/ONNX asymmetric + floor): floor(o / scale).
  int64_t nearest(int64_t o) const {
    int64_t i =
        scale ? static_cast<int64_t>(std::floor(static_cast<double>(o) / *scale)) : o * in / out;
    return std::min(i, in - 1);
  }
  // bilinear: the two neighbours and the weight of the second.
  void linear(int64_t o, int64_t* i0, int64_t* i1, double* w) const {
    double src;
    if (align_corners) {
      src = out > 1 ? static_cast<double>(o) * static_cast<double>(in - 1) /
                          static_cast<double>(out - 1)
                    : 0.0;
    } else {
      const double ratio =
          scale ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
      src = std::max((static_cast<double>(o) + 0.5) * ratio - 0.5, 0.0);
    }
    *i0 = std::min(static_cast<int64_t>(src), in - 1);
    *i1 = std::min(*i0 + 1, in - 1);
    *w = std::min(src - static_cast<double>(*i0), 1.0);
  }
};

Status upsample2d(KernelContext& ctx, std::span<Value*> args, bool bilinear) {
  ETC_ASSIGN_OR_RETURN(UpsampleShape shape, check_upsample2d(ctx, args, bilinear));
  const TensorView& x = tensor_arg(args, 0);
  TensorView& out = out_arg(args, bilinear ? 4 : 3);
  if (out.numel() == 0) return Status();
  ResizeAxis ax[2];
  for (size_t i = 0; i < 2; ++i)
    ax[i] = ResizeAxis{shape.in[i], shape.out[i], shape.scale[i], shape.align_corners};
  const int64_t ih = ax[0].in, iw = ax[1].in, oh = ax[0].out, ow = ax[1].out;
  const int64_t planes = x.sizes[0] * x.sizes[1];
  visit_float_dtype(x.dtype, [&]<typename T>() {
    const T* src = x.data_as<const T>();
    T* dst = out.data_as<T>();
    if (!bilinear) {
      std::vector<int64_t> cols(static_cast<size_t>(ow));
      for (int64_t j = 0; j < ow; ++j)
        cols[j] = ax[1].nearest(j);
      for (int64_t p = 0; p < planes; ++p) {
        for (int64_t i = 0; i < oh; ++i) {
          const T* row = src + (p * ih + ax[0].nearest(i)) * iw;
          T* d = dst + (p * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j)
            d[j] = row[cols[j]];
        }
      }
      return;
    }
    std::vector<int64_t> c0(static_cast<size_t>(ow)), c1(static_cast<size_t>(ow));
    std::vector<double> cw(static_cast<size_t>(ow));
    for (int64_t j = 0; j < ow; ++j)
      ax[1].linear(j, &c0[j], &c1[j], &cw[j]);
    std::vector<int64_t> r0(static_cast<size_t>(oh)), r1(static_cast<size_t>(oh));
    std::vector<double> rw(static_cast<size_t>(oh));
    for (int64_t i = 0; i < oh; ++i)
      ax[0].linear(i, &r0[i], &r1[i], &rw[i]);
    // Each input row interpolated along the width once (an upsampling reads each one for
    // several output rows: lraspp's 28 -> 224 eight times, in two rows each), then each output
    // row the blend of its two: the same double arithmetic per output as interpolating both
    // rows for it, so the same bits. Planes across threads.
    parallel_for(planes, 1, [&](int64_t p0, int64_t p1) {
      std::vector<double> across(static_cast<size_t>(ih * ow));
      for (int64_t p = p0; p < p1; ++p) {
        for (int64_t r = 0; r < ih; ++r) {
          const T* a = src + (p * ih + r) * iw;
          double* h = across.data() + r * ow;
          for (int64_t j = 0; j < ow; ++j)
            h[j] = convert<double>(a[c0[j]]) * (1 - cw[j]) + convert<double>(a[c1[j]]) * cw[j];
        }
        for (int64_t i = 0; i < oh; ++i) {
          const double* top = across.data() + r0[i] * ow;
          const double* bot = across.data() + r1[i] * ow;
          const double w = rw[i];
          T* d = dst + (p * oh + i) * ow;
          for (int64_t j = 0; j < ow; ++j)
            d[j] = convert<T>(top[j] * (1 - w) + bot[j] * w);
        }
      }
    });
  });
  return Status();
}

// ---- grid_sampler_2d -------------------------------------------------------------------
// PyTorch's grid sampling (aten/src/ATen/native/GridSampler.h), which ONNX's GridSample
// follows: grid values in [-1, 1] are unnormalized to pixel coordinates, padded by the
// padding mode, and interpolated.

struct GridSampling {
  int64_t mode = 0;     // 0 bilinear, 1 nearest, 2 bicubic
  int64_t padding = 0;  // 0 zeros, 1 border, 2 reflection
  bool align_corners = false;
};

double grid_unnormalize(double c, int64_t size, bool align_corners) {
  return align_corners ? (c + 1) / 2 * static_cast<double>(size - 1)
                       : ((c + 1) * static_cast<double>(size) - 1) / 2;
}

double grid_clip(double c, int64_t size) {
  return std::min(static_cast<double>(size - 1), std::max(c, 0.0));
}

// Reflects c into [twice_low / 2, twice_high / 2].
double grid_reflect(double c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double lo = static_cast<double>(twice_low) / 2;
  const double span = static_cast<double>(twice_high - twice_low) / 2;
  c = std::fabs(c - lo);
  const double extra = std::fmod(c, span);
  const auto flips = static_cast<int64_t>(std::floor(c / span));
  return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

// A coordinate after the padding mode (border and reflection keep it inside).
double grid_pad(double c, int64_t size, const GridSampling& g) {
  if (g.padding == 1) return grid_clip(c, size);
  if (g.padding == 2) {
    c = g.align_corners ? grid_reflect(c, 0, 2 * (size - 1)) : grid_reflect(c, -1, 2 * size - 1);
    return grid_clip(c, size);
  }
  return c;
}

double cubic_near(double x, double a) {  // |x| <= 1
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
double cubic_far(double x, double a) {  // 1 < |x| < 2
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}
void cubic_weights(double t, double w[4]) {
  constexpr double kA = -0.75;
  w[0] = cubic_far(t + 1, kA);
  w[1] = cubic_near(t, kA);
  w[2] = cubic_near(1 - t, kA);
  w[3] = cubic_far(2 - t, kA);
}

template <typename T>
void grid_sample_typed(const TensorView& x, const TensorView& grid, const GridSampling& g,
                       TensorView& out) {
  const int64_t n = x.sizes[0], c = x.sizes[1], h = x.sizes[2], w = x.sizes[3];
  const int64_t oh = grid.sizes[1], ow = grid.sizes[2];
  const T* src = x.data_as<const T>();
  const T* gp = grid.data_as<const T>();
  T* dst = out.data_as<T>();
  auto at = [&](const T* plane, int64_t yy, int64_t xx) -> double {
    if (yy < 0 || yy >= h || xx < 0 || xx >= w) return 0;
    return convert<double>(plane[yy * w + xx]);
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh * ow; ++i) {
      const T* gxy = gp + (b * oh * ow + i) * 2;
      double ix = grid_unnormalize(convert<double>(gxy[0]), w, g.align_corners);
      double iy = grid_unnormalize(convert<double>(gxy[1]), h, g.align_corners);
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* plane = src + (b * c + ch) * h * w;
        double v = 0;
        if (g.mode == 2) {
          // Bicubic: the padding applies to each of the 16 taps.
          const double fx = std::floor(ix), fy = std::floor(iy);
          double wx[4], wy[4];
          cubic_weights(ix - fx, wx);
          cubic_weights(iy - fy, wy);
          for (int dy = 0; dy < 4; ++dy) {
            const double ty = grid_pad(fy - 1 + dy, h, g);
            double row = 0;
            for (int dx = 0; dx < 4; ++dx) {
              const double tx = grid_pad(fx - 1 + dx, w, g);
              row += at(plane, static_cast<int64_t>(ty), static_cast<int64_t>(tx)) * wx[dx];
            }
            v += row * wy[dy];
          }
        } else {
          const double px = grid_pad(ix, w, g), py = grid_pad(iy, h, g);
          if (g.mode == 1) {
            v = at(plane, static_cast<int64_t>(std::nearbyint(py)),
                   static_cast<int64_t>(std::nearbyint(px)));
          } else {
            const double x0 = std::floor(px), y0 = std::floor(py);
            const double tx = px - x0, ty = py - y0;
            const auto xi = static_cast<int64_t>(x0), yi = static_cast<int64_t>(y0);
            v = at(plane, yi, xi) * (1 - tx) * (1 - ty) + at(plane, yi, xi + 1) * tx * (1 - ty) +
                at(plane, yi + 1, xi) * (1 - tx) * ty + at(plane, yi + 1, xi + 1) * tx * ty;
          }
        }
        dst[((b * c + ch) * oh) * ow + i] = convert<T>(v);
      }
    }
  }
}

Status grid_sampler_2d_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView& grid = a.tensor("grid");
  TensorView& out = a.out();
  if (x.rank() != 4 || grid.rank() != 4 || grid.sizes[0] != x.sizes[0] || grid.sizes[3] != 2) {
    return ctx.error("expected input [N, C, H, W] and grid [N, H_out, W_out, 2], got " +
                     shape_str(x.sizes) + " and " + shape_str(grid.sizes));
  }
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  if (grid.dtype != x.dtype) return ctx.error("grid must have the input's dtype");
  GridSampling g{a.integer("interpolation_mode"), a.integer("padding_mode"),
                 a.flag("align_corners")};
  if (g.mode < 0 || g.mode > 2 || g.padding < 0 || g.padding > 2) {
    return ctx.error("interpolation_mode " + std::to_string(g.mode) + " or padding_mode " +
                     std::to_string(g.padding) + " is not 0, 1 or 2");
  }
  ETC_RETURN_IF_ERROR(check_out(
      ctx, out, std::vector<int64_t>{x.sizes[0], x.sizes[1], grid.sizes[1], grid.sizes[2]},
      x.dtype));
  if (out.numel() == 0) return Status();
  if (x.sizes[2] == 0 || x.sizes[3] == 0) {
    return ctx.error("cannot sample an empty input " + shape_str(x.sizes));
  }
  visit_float_dtype(x.dtype, [&]<typename T>() { grid_sample_typed<T>(x, grid, g, out); });
  return Status();
}
}  // namespace

Status register_pool_resize_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(
      OpKind::UpsampleNearest2d,
      [](KernelContext& ctx, std::span<Value*> args) { return upsample2d(ctx, args, false); }));
  ETC_RETURN_IF_ERROR(r.add(
      OpKind::UpsampleBilinear2d,
      [](KernelContext& ctx, std::span<Value*> args) { return upsample2d(ctx, args, true); }));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MaxPool2dWithIndices, max_pool2d_with_indices_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MaxPool2d, max_pool2d_kernel, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AvgPool2d, avg_pool2d_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AdaptiveAvgPool2d, adaptive_avg_pool2d_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::GridSampler2d, grid_sampler_2d_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
