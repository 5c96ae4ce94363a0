// Depthwise float convolution (see conv.h).
//
// A depthwise plane is small (MobileNet's 5x5 layers run on 14x14 and 7x7 planes), so a loop
// per output row and tap spends its time in loop control and in border checks. Instead each
// input plane is copied once into zero-padded rows, split into stride phases (phase q holds
// the padded columns q, q + stride, ...), so tap (i, j) of output columns [c, c + n) reads
// n contiguous floats of one phase row. An output row then goes in strips of up to 32
// columns held in registers for all kh * kw taps; a strip narrower than the row's vector
// width computes padding columns that are never stored.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_transpose.h"
#include "runtime/kernels/simd_vec.h"

namespace etc::rt::kernels {
namespace {

constexpr int64_t kLanes = 8;      // a strip chunk: 8 floats
constexpr int64_t kMaxChunks = 4;  // a strip: up to 32 output columns
constexpr int64_t kMaxRows = 8;    // a strip: up to 8 output rows

// One input plane, zero-padded and split by column stride phase.
struct PaddedPlane {
  int64_t rows = 0;    // H + 2 * pad_h, and zero rows for strips past the last output row
  int64_t width = 0;   // floats per phase row
  int64_t phases = 0;  // the column stride
  std::vector<int64_t> tap_offset;  // per tap column j: phase * rows * width + column
  int64_t floats() const { return phases * rows * width; }
};

// `col_round`: the output columns a strip may compute, rounded up to it (reads stay inside
// the plane's rows).
PaddedPlane plane_layout(const ConvGeometry& g, int64_t col_round = kLanes) {
  PaddedPlane p;
  // The last band of kMaxRows output rows reads up to row
  // (round_up(OH, kMaxRows) - 1) * stride + (KH - 1) * dilation.
  const int64_t band_rows = (g.oh + kMaxRows - 1) / kMaxRows * kMaxRows;
  p.rows = std::max(g.h + 2 * g.pad[0], (band_rows - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1);
  p.phases = g.stride[1];
  const int64_t ow_pad = (g.ow + col_round - 1) / col_round * col_round;
  int64_t max_col = 0;
  for (int64_t j = 0; j < g.kw; ++j)
    max_col = std::max(max_col, j * g.dil[1] / p.phases);
  p.width = ow_pad + max_col;
  for (int64_t j = 0; j < g.kw; ++j) {
    const int64_t off = j * g.dil[1];
    p.tap_offset.push_back((off % p.phases) * p.rows * p.width + off / p.phases);
  }
  return p;
}

// A strip chunk is one Vec8 (simd_vec.h).
static_assert(sizeof(Vec8) == kLanes * sizeof(float));

__attribute__((always_inline)) inline Vec8 load8(const float* p) {
  return load_v<Vec8>(p);
}

// Padded row c of phase q of a plane: the columns [lo, hi) whose source column c * sw + q -
// pad_w lies in [0, W).
struct PhaseColumns {
  int64_t off = 0, lo = 0, hi = 0;
};
inline PhaseColumns phase_columns(const ConvGeometry& g, const PaddedPlane& p, int64_t q) {
  const int64_t sw = p.phases;
  PhaseColumns c;
  c.off = q - g.pad[1];
  c.lo = std::min(p.width, c.off >= 0 ? 0 : (-c.off + sw - 1) / sw);
  const int64_t last = g.w - 1 - c.off;
  c.hi = std::max(c.lo, last < 0 ? 0 : std::min(p.width, last / sw + 1));
  return c;
}

// d[c] = row[c * sw] for c in [lo, hi).
__attribute__((always_inline)) inline void copy_phase_row(const float* __restrict row, int64_t sw,
                                                          int64_t lo, int64_t hi,
                                                          float* __restrict d) {
  if (sw == 1) {  // vector moves, not a memcpy call: rows are short, a call costs as much
    int64_t c = lo;
    for (; c + kLanes <= hi; c += kLanes) {
      const Vec8 v = load8(row + c);
      std::memcpy(d + c, &v, sizeof v);
    }
    for (; c < hi; ++c)
      d[c] = row[c];
  } else if (sw == 2) {
    // The even floats of 16 in two vectors (a shuffle, not 8 scalar moves). Only while
    // the 16 lie in the row: up to row[2 * c + 15], so c + 8 < hi.
    int64_t c = lo;
    for (; c + kLanes < hi; c += kLanes) {
      const Vec8 v = __builtin_shufflevector(load8(row + 2 * c), load8(row + 2 * c + kLanes), 0, 2,
                                             4, 6, 8, 10, 12, 14);
      std::memcpy(d + c, &v, sizeof v);
    }
    for (; c < hi; ++c)
      d[c] = row[2 * c];
  } else {
    for (int64_t c = lo; c < hi; ++c)
      d[c] = row[c * sw];
  }
}

// dst[q][r][c] = x[r - pad_h][c * stride_w + q - pad_w] where that lies in the input. The
// rest of dst (the padding) is zero from the start and never written, so one buffer serves
// every channel a thread runs.
__attribute__((always_inline)) inline void fill_plane(const float* __restrict x,
                                                      const ConvGeometry& g, const PaddedPlane& p,
                                                      float* __restrict dst) {
  for (int64_t q = 0; q < p.phases; ++q) {
    const PhaseColumns c = phase_columns(g, p, q);
    float* d = dst + (q * p.rows + g.pad[0]) * p.width;
    const float* row = x + c.off;
    for (int64_t ih = 0; ih < g.h; ++ih, d += p.width, row += g.w)
      copy_phase_row(row, p.phases, c.lo, c.hi, d);
  }
}

// Padded rows [r0, r1) of every phase of a plane, padding included (zeros): what fill_plane
// writes there into a zeroed plane, for a plane whose rows are split across threads.
__attribute__((always_inline)) inline void fill_plane_rows(const float* __restrict x,
                                                           const ConvGeometry& g,
                                                           const PaddedPlane& p, int64_t r0,
                                                           int64_t r1, float* __restrict dst) {
  for (int64_t q = 0; q < p.phases; ++q) {
    const PhaseColumns c = phase_columns(g, p, q);
    for (int64_t r = r0; r < r1; ++r) {
      float* d = dst + (q * p.rows + r) * p.width;
      const int64_t ih = r - g.pad[0];
      if (ih < 0 || ih >= g.h) {
        std::fill_n(d, p.width, 0.0f);
        continue;
      }
      std::fill_n(d, c.lo, 0.0f);
      copy_phase_row(x + ih * g.w + c.off, p.phases, c.lo, c.hi, d);
      std::fill_n(d + c.hi, p.width - c.hi, 0.0f);
    }
  }
}

// One output channel's work: its padded input plane, its kh x kw weights and its bias.
struct ChannelTaps {
  const float* plane;
  const float* weight;
  float bias;
};

// The first n floats of a strip held in kChunks vectors, stored to y: whole vectors, then the
// valid lanes of the last one element by element. The chunk loop unrolls, so each vector is
// named by a constant index and stays in its register: with a run-time index the compiler
// spilled the accumulators and copied them out with a memcpy call (and a copy through the
// stack stalls the next load on a store it cannot forward).
template <typename V, int64_t kChunks>
__attribute__((always_inline)) inline void store_strip(float* __restrict y, const V (&acc)[kChunks],
                                                       int64_t n) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
#pragma GCC unroll 8
  for (int64_t c = 0; c < kChunks; ++c) {
    const int64_t left = n - c * kL;
    const V v = acc[c];
    if (left >= kL) {
      std::memcpy(y + c * kL, &v, sizeof(V));
    } else {
      for (int64_t t = 0; t < left; ++t)
        y[c * kL + t] = v[t];
    }
  }
}

// Output columns [c0, c0 + n) (n <= C * kLanes) of output rows [oh, oh + rows) (rows <= R),
// all taps in registers. R rows at once keep R * C independent sums in flight (one row of a
// 7-wide plane alone would wait on each multiply-add's latency); rows past the plane read
// the zero rows below it and are not stored. KW > 0 fixes the kernel width at compile time
// (3 and 5, MobileNet's), so the tap loop unrolls; KW = 0 reads it from g.
template <int64_t C, int64_t R, int64_t KW>
__attribute__((always_inline)) inline void strip(const ChannelTaps& ch, const PaddedPlane& p,
                                                 const ConvGeometry& g, int64_t oh, int64_t rows,
                                                 int64_t c0, int64_t n, float* __restrict y0) {
  const int64_t kw = KW > 0 ? KW : g.kw;
  Vec8 acc[R][C];
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t k = 0; k < C; ++k)
      acc[r][k] = Vec8{} + ch.bias;
  }
  const int64_t row_step = g.stride[0] * p.width;
  const int64_t* tap_offset = p.tap_offset.data();
  for (int64_t i = 0; i < g.kh; ++i) {
    const float* __restrict prow = ch.plane + (oh * g.stride[0] + i * g.dil[0]) * p.width + c0;
    const float* __restrict wrow = ch.weight + i * kw;
#pragma GCC unroll 8
    for (int64_t j = 0; j < kw; ++j) {
      const float* s = prow + tap_offset[j];
      const float wv = wrow[j];
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t k = 0; k < C; ++k)
          acc[r][k] += wv * load8(s + r * row_step + k * kLanes);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    store_strip<Vec8, C>(y0 + r * g.ow, acc[r], n);
}

// Every output row of one channel: strips of 32 columns, then one narrower strip for the
// rest; each in bands of rows.
template <int64_t KW>
__attribute__((always_inline)) inline void channel(const ChannelTaps& ch, const PaddedPlane& p,
                                                   const ConvGeometry& g, float* yc) {
  auto band = [&](auto c_tag, auto r_tag, int64_t c0, int64_t n) {
    constexpr int64_t kC = decltype(c_tag)::value, kR = decltype(r_tag)::value;
    for (int64_t oh = 0; oh < g.oh; oh += kR) {
      strip<kC, kR, KW>(ch, p, g, oh, std::min(kR, g.oh - oh), c0, n, yc + oh * g.ow + c0);
    }
  };
  using std::integral_constant;
  int64_t c0 = 0;
  for (; c0 + kMaxChunks * kLanes <= g.ow; c0 += kMaxChunks * kLanes) {
    band(integral_constant<int64_t, kMaxChunks>{}, integral_constant<int64_t, 2>{}, c0,
         kMaxChunks * kLanes);
  }
  const int64_t rest = g.ow - c0;
  switch ((rest + kLanes - 1) / kLanes) {
    case 1:
      band(integral_constant<int64_t, 1>{}, integral_constant<int64_t, kMaxRows>{}, c0, rest);
      break;
    case 2:
      band(integral_constant<int64_t, 2>{}, integral_constant<int64_t, 4>{}, c0, rest);
      break;
    case 3:
      band(integral_constant<int64_t, 3>{}, integral_constant<int64_t, 2>{}, c0, rest);
      break;
    case 4:
      band(integral_constant<int64_t, 4>{}, integral_constant<int64_t, 2>{}, c0, rest);
      break;
    default:  // 0: the row is whole strips
      break;
  }
}

// Output channels [begin, end) of every image (t = n * c_out + c): the group's input plane is
// filled once for each run of its output channels.
__attribute__((always_inline)) inline void channels(const float* x, const float* w,
                                                    const float* bias, const ConvGeometry& g,
                                                    int64_t cout_g, float* y,
                                                    const Epilogue* epilogue, int64_t begin,
                                                    int64_t end) {
  const PaddedPlane p = plane_layout(g);
  std::vector<float> plane(static_cast<size_t>(p.floats()), 0.0f);
  const int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow, taps = g.kh * g.kw;
  int64_t filled = -1;  // the (image, group) whose plane is in `plane`
  for (int64_t t = begin; t < end; ++t) {
    const int64_t n = t / g.c_out, c = t % g.c_out, gi = c / cout_g;
    if (n * g.groups + gi != filled) {
      filled = n * g.groups + gi;
      fill_plane(x + (n * g.c_in + gi) * in_plane, g, p, plane.data());
    }
    const ChannelTaps ch{plane.data(), w + c * taps, bias != nullptr ? bias[c] : 0.0f};
    float* yc = y + t * out_plane;
    if (g.kw == 3) {
      channel<3>(ch, p, g, yc);
    } else if (g.kw == 5) {
      channel<5>(ch, p, g, yc);
    } else {
      channel<0>(ch, p, g, yc);
    }
    // The channel's plane while it is still in cache.
    if (epilogue != nullptr) apply_epilogue(*epilogue, t * out_plane, (t + 1) * out_plane);
  }
}

__attribute__((target("avx2,fma"))) void channels_avx2(const float* x, const float* w,
                                                       const float* bias, const ConvGeometry& g,
                                                       int64_t cout_g, float* y,
                                                       const Epilogue* epilogue, int64_t begin,
                                                       int64_t end) {
  channels(x, w, bias, g, cout_g, y, epilogue, begin, end);
}

void channels_portable(const float* x, const float* w, const float* bias, const ConvGeometry& g,
                       int64_t cout_g, float* y, const Epilogue* epilogue, int64_t begin,
                       int64_t end) {
  channels(x, w, bias, g, cout_g, y, epilogue, begin, end);
}

// ---- Depthwise, a block of channels side by side (16 on AVX-512, 8 on AVX2) -------------
//
// On 14x14 and 7x7 planes (and stride-2 layers into them) the plane-by-plane loop above fills a
// vector with 14 or 7 columns and pays each channel's setup (its padded plane, its strips, its
// epilogue call) for a few hundred multiply-adds. Here a vector's worth of channels (L: 16 on
// AVX-512, 8 on AVX2) go side by side: their input is transposed (L x L blocks in registers)
// into [padded row][padded column][L channels], so every tap is one multiply-add per output
// pixel on L channels with all lanes used, and the output is transposed back, L pixels at a
// time. Per output: bias, then the taps in (row, column) order with fused multiply-adds: the
// bits of the plane-by-plane loop. The loops are written once over GCC's vector types and
// built for each ISA; only the transposes are ISA code.

// Output planes up to this many pixels go by channel blocks in one band (this Zen 5, 1
// thread, 3x3: 384 channels of 14x14 71 -> 33 us, 960 of 7x7 76 -> 18 us, 144 of 56x56 by
// stride 2 108 -> 88 us; 28x28 by stride 1 about even). Larger planes go in bands of output
// rows whose transposed input rows take at most kBlockedSlab bytes, in L2 (whole, the block
// left L2 and ran slower than the plane-by-plane loop; in bands, 1 thread: 16 channels of
// 112x112 by stride 2 39 -> 31 us, 32 of 112x112 144 -> 120 us, 72 of 56x56 by stride 2 about
// even).
constexpr int64_t kBlockedPlane = int64_t{28} * 28;
constexpr int64_t kBlockedSlab = int64_t{1} << 17;

// Channels [0, cn) of pixels [0, cols) of the planes at x (`plane` floats apart), cn and cols
// <= L: pixel j's L channels (zero past cn) to dst[j].
using PlanesToPixels = void (*)(const float* x, int64_t plane, int64_t cn, int64_t cols,
                                float* const* dst);
// The reverse: L pixel vectors at src ([L][L], all readable) to channels [0, cn) of pixels
// [0, cols) of the planes at y.
using PixelsToPlanes = void (*)(const float* src, int64_t cn, int64_t cols, float* y,
                                int64_t plane);

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // transpose16's shuffles (simd_transpose.h)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,fma"))) void planes_to_pixels_avx512(const float* x, int64_t plane,
                                                                    int64_t cn, int64_t cols,
                                                                    float* const* dst) {
  const __mmask16 m = first_lanes(cols);
  __m512 r[16];
  // Channels past the last: no lane read (a masked load does not touch them).
  for (int64_t k = 0; k < 16; ++k)
    r[k] = _mm512_maskz_loadu_ps(k < cn ? m : __mmask16(0), x + k * plane);
  transpose16(r);
  for (int64_t j = 0; j < cols; ++j)
    _mm512_storeu_ps(dst[j], r[j]);
}

__attribute__((target("avx512f,fma"))) void pixels_to_planes_avx512(const float* src, int64_t cn,
                                                                    int64_t cols, float* y,
                                                                    int64_t plane) {
  const __mmask16 m = first_lanes(cols);
  __m512 r[16];
  for (int64_t j = 0; j < 16; ++j)
    r[j] = _mm512_loadu_ps(src + j * 16);
  transpose16(r);
  for (int64_t k = 0; k < cn; ++k)
    _mm512_mask_storeu_ps(y + k * plane, m, r[k]);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

__attribute__((target("avx2"))) void planes_to_pixels_avx2(const float* x, int64_t plane,
                                                           int64_t cn, int64_t cols,
                                                           float* const* dst) {
  __m256 r[8];
  if (cols == 8) {
    for (int64_t k = 0; k < 8; ++k)
      r[k] = k < cn ? _mm256_loadu_ps(x + k * plane) : _mm256_setzero_ps();
  } else {
    const __m256i m = first_lanes8(cols);
    for (int64_t k = 0; k < 8; ++k)
      r[k] = k < cn ? _mm256_maskload_ps(x + k * plane, m) : _mm256_setzero_ps();
  }
  transpose8(r);
  for (int64_t j = 0; j < cols; ++j)
    _mm256_storeu_ps(dst[j], r[j]);
}

__attribute__((target("avx2"))) void pixels_to_planes_avx2(const float* src, int64_t cn,
                                                           int64_t cols, float* y, int64_t plane) {
  __m256 r[8];
  for (int64_t j = 0; j < 8; ++j)
    r[j] = _mm256_loadu_ps(src + j * 8);
  transpose8(r);
  if (cols == 8) {
    for (int64_t k = 0; k < cn; ++k)
      _mm256_storeu_ps(y + k * plane, r[k]);
  } else {
    const __m256i m = first_lanes8(cols);
    for (int64_t k = 0; k < cn; ++k)
      _mm256_maskstore_ps(y + k * plane, m, r[k]);
  }
}

// P output pixels [ow0, ow0 + P) of output row oh from the transposed block `tin`
// ([Hp][Wp][L]), stored pixel by pixel into `row` ([OW][L]).
template <typename V, int P>
__attribute__((always_inline)) inline void block_pixels(const float* tin, int64_t wp,
                                                        const float* wv, V bias,
                                                        const ConvGeometry& g, int64_t oh,
                                                        int64_t ow0, float* row) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  V acc[P];
  for (int p = 0; p < P; ++p)
    acc[p] = bias;
  const int64_t step = g.stride[1] * kL;
  for (int64_t i = 0; i < g.kh; ++i) {
    const float* src = tin + ((oh * g.stride[0] + i * g.dil[0]) * wp + ow0 * g.stride[1]) * kL;
    for (int64_t j = 0; j < g.kw; ++j) {
      const V w = load_v<V>(wv + (i * g.kw + j) * kL);
      const float* s = src + j * g.dil[1] * kL;
      for (int p = 0; p < P; ++p)
        acc[p] = w * load_v<V>(s + p * step) + acc[p];  // one fused multiply-add
    }
  }
  for (int p = 0; p < P; ++p)
    store_v(row + (ow0 + p) * kL, acc[p]);
}

// block_pixels for a KW-wide kernel of column stride S and column dilation 1 (MobileNet's 3x3
// and 5x5, stride 1 or 2): each input pixel of a kernel row is loaded once into a register
// and feeds every output pixel whose taps reach it (8 outputs of a 5-wide row: 12 loads, not
// 40; the loop was bound by its loads). The same multiply-adds in the same order as
// block_pixels: equal bits.
template <typename V, int P, int KW, int S>
__attribute__((always_inline)) inline void block_pixels_rows(const float* tin, int64_t wp,
                                                             const float* wv, V bias,
                                                             const ConvGeometry& g, int64_t oh,
                                                             int64_t ow0, float* row) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  constexpr int kIn = S * (P - 1) + KW;
  V acc[P];
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
    acc[p] = bias;
  for (int64_t i = 0; i < g.kh; ++i) {
    const float* src = tin + ((oh * g.stride[0] + i * g.dil[0]) * wp + ow0 * S) * kL;
    V in[kIn];
#pragma GCC unroll 32
    for (int q = 0; q < kIn; ++q)
      in[q] = load_v<V>(src + q * kL);
#pragma GCC unroll 8
    for (int j = 0; j < KW; ++j) {
      const V w = load_v<V>(wv + (i * KW + j) * kL);
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p)
        acc[p] = w * in[p * S + j] + acc[p];
    }
  }
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
    store_v(row + (ow0 + p) * kL, acc[p]);
}

// block_pixels for P pixels: the register-blocked loop where it has a build for the
// kernel's width and column stride, else the general one.
template <typename V, int P>
__attribute__((always_inline)) inline void block_pixels_any(const float* tin, int64_t wp,
                                                            const float* wv, V bias,
                                                            const ConvGeometry& g, int64_t oh,
                                                            int64_t ow0, float* row) {
  if (g.dil[1] == 1) {
    const int64_t kw = g.kw, sw = g.stride[1];
    if (kw == 3 && sw == 1)
      return block_pixels_rows<V, P, 3, 1>(tin, wp, wv, bias, g, oh, ow0, row);
    if (kw == 3 && sw == 2)
      return block_pixels_rows<V, P, 3, 2>(tin, wp, wv, bias, g, oh, ow0, row);
    if (kw == 5 && sw == 1)
      return block_pixels_rows<V, P, 5, 1>(tin, wp, wv, bias, g, oh, ow0, row);
    if (kw == 5 && sw == 2)
      return block_pixels_rows<V, P, 5, 2>(tin, wp, wv, bias, g, oh, ow0, row);
  }
  block_pixels<V, P>(tin, wp, wv, bias, g, oh, ow0, row);
}

// Pixels of a block's output row at a time: as many as the build's registers hold with the
// input pixels a 5-wide kernel row reaches (AVX-512: 32 registers, AVX2: 16).
template <typename V>
constexpr int kRowPixels = sizeof(V) == 64 ? 8 : 4;

// A whole output row of n < kRowPixels<V> pixels, by its length.
template <typename V, int P = 1>
__attribute__((always_inline)) inline void block_short_row(int64_t n, const float* tin, int64_t wp,
                                                           const float* wv, V bias,
                                                           const ConvGeometry& g, int64_t oh,
                                                           float* row) {
  if constexpr (P < kRowPixels<V>) {
    if (n == P) {
      if constexpr (P < 4) {
        block_pixels<V, P>(tin, wp, wv, bias, g, oh, 0, row);
      } else {
        block_pixels_any<V, P>(tin, wp, wv, bias, g, oh, 0, row);
      }
      return;
    }
    block_short_row<V, P + 1>(n, tin, wp, wv, bias, g, oh, row);
  }
}

// Bands [begin, end) of channel blocks (t = (n * blocks + b) * bands + i: output rows
// [i * band, (i + 1) * band) of channels [L b, L b + L) of image n) of a depthwise
// convolution with one output channel per input channel. Each band transposes only the input
// rows its windows reach into `tin`, so that on a large plane (56x56, 112x112) the transposed
// slab stays in L2; a small plane is one band. Threads take bands, not only blocks: a layer of
// 16 channels is one block (mobilenet_v3's 16 of 112x112 ran on one thread of two).
template <typename V>
__attribute__((always_inline)) inline void depthwise_blocks(
    const float* x, const float* wpack, const float* bias, const ConvGeometry& g, float* y,
    const Epilogue* epilogue, int64_t band, int64_t begin, int64_t end, PlanesToPixels to_pixels,
    PixelsToPlanes to_planes) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  constexpr int kP = kRowPixels<V>;
  const int64_t wp = g.w + 2 * g.pad[1];
  const int64_t taps = g.kh * g.kw, out_plane = g.oh * g.ow;
  const int64_t blocks = (g.c_out + kL - 1) / kL;
  // The padded input rows one band reads: from (oh0 * SH - PH) on.
  const int64_t slab_rows =
      std::min(g.h + 2 * g.pad[0], (band - 1) * g.stride[0] + (g.kh - 1) * g.dil[0] + 1);
  // The padding columns of `tin` are zero from the start and never written.
  std::vector<float> tin(static_cast<size_t>(slab_rows * wp * kL), 0.0f);
  // The band's output, pixel by pixel ([band * OW, rounded up to L][L]).
  std::vector<float> out(static_cast<size_t>((band * g.ow + kL - 1) / kL * kL * kL), 0.0f);
  const int64_t in_plane = g.h * g.w;
  const int64_t bands = (g.oh + band - 1) / band;
  int64_t bias_of = -1;  // the block (n * blocks + b) whose bias is in bias_lanes
  float bias_lanes[kL] = {};
  for (int64_t t = begin; t < end; ++t) {
    const int64_t nb = t / bands, n = nb / blocks, c0 = nb % blocks * kL;
    const int64_t cn = std::min(kL, g.c_out - c0);
    const float* wv = wpack + nb % blocks * taps * kL;
    if (nb != bias_of) {
      bias_of = nb;
      for (int64_t k = 0; k < kL; ++k)
        bias_lanes[k] = bias != nullptr && k < cn ? bias[c0 + k] : 0.0f;
    }
    const V bv = load_v<V>(bias_lanes);
    const float* xn = x + (n * g.c_in + c0) * in_plane;
    float* yb = y + (n * g.c_out + c0) * out_plane;
    const int64_t oh0 = t % bands * band, oh1 = std::min(g.oh, oh0 + band);
    // Slab row r is padded input row top + r, input row top + r - PH.
    const int64_t top = oh0 * g.stride[0];
    const int64_t rows = std::min(slab_rows, g.h + 2 * g.pad[0] - top);
    const int64_t ih0 = std::max<int64_t>(0, top - g.pad[0]);
    const int64_t ih1 = std::min(g.h, top + rows - g.pad[0]);
    // Rows of padding (above or below the input) are zero.
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t ih = top + r - g.pad[0];
      if (ih < 0 || ih >= g.h) std::fill_n(tin.data() + r * wp * kL, wp * kL, 0.0f);
    }
    // Input rows [ih0, ih1), L pixels of the planes at a time (across rows: a 7x7 plane is
    // 4 transposes of 16, not 7), each pixel to its padded place (channels past the last:
    // zero).
    const int64_t f_end = ih1 * g.w;
    float* dst[kL];
    for (int64_t f0 = ih0 * g.w, ih = ih0, iw = 0; f0 < f_end; f0 += kL) {
      const int64_t cols = std::min(kL, f_end - f0);
      for (int64_t j = 0; j < cols; ++j) {
        dst[j] = tin.data() + ((ih + g.pad[0] - top) * wp + iw + g.pad[1]) * kL;
        if (++iw == g.w) {
          iw = 0;
          ++ih;
        }
      }
      to_pixels(xn + f0, in_plane, cn, cols, dst);
    }
    // Output rows as rows of the slab: row oh reads slab rows from (oh - oh0) * SH on.
    ConvGeometry gb = g;
    gb.oh = oh1 - oh0;
    for (int64_t oh = 0; oh < gb.oh; ++oh) {
      float* row = out.data() + oh * g.ow * kL;
      // kP pixels at a time; the last kP overlap the ones before (the same values again).
      if (g.ow >= kP) {
        for (int64_t ow0 = 0; ow0 < g.ow; ow0 += kP)
          block_pixels_any<V, kP>(tin.data(), wp, wv, bv, gb, oh, std::min(ow0, g.ow - kP), row);
      } else {
        block_short_row<V>(g.ow, tin.data(), wp, wv, bv, gb, oh, row);
      }
    }
    // The band's output back to the block's channels, L positions at a time.
    const int64_t positions = gb.oh * g.ow, at0 = oh0 * g.ow;
    for (int64_t f0 = 0; f0 < positions; f0 += kL)
      to_planes(out.data() + f0 * kL, cn, std::min(kL, positions - f0), yb + at0 + f0, out_plane);
    // The band's rows of each channel while they are in cache: one call for the block where
    // the band is the whole plane (its channels are then one range of the out; per channel,
    // mobilenet_v3's 576 channels of 7x7 paid an epilogue call per 49 floats).
    if (epilogue != nullptr && positions == out_plane) {
      const int64_t at = (n * g.c_out + c0) * out_plane;
      apply_epilogue(*epilogue, at, at + cn * out_plane);
    }
    for (int64_t k = 0; epilogue != nullptr && positions < out_plane && k < cn; ++k) {
      const int64_t at = (n * g.c_out + c0 + k) * out_plane + at0;
      apply_epilogue(*epilogue, at, at + positions);
    }
  }
}

__attribute__((target("avx512f,fma"))) void depthwise_blocks_avx512(
    const float* x, const float* wpack, const float* bias, const ConvGeometry& g, float* y,
    const Epilogue* epilogue, int64_t band, int64_t begin, int64_t end) {
  depthwise_blocks<Vec16>(x, wpack, bias, g, y, epilogue, band, begin, end, planes_to_pixels_avx512,
                          pixels_to_planes_avx512);
}

__attribute__((target("avx2,fma"))) void depthwise_blocks_avx2(
    const float* x, const float* wpack, const float* bias, const ConvGeometry& g, float* y,
    const Epilogue* epilogue, int64_t band, int64_t begin, int64_t end) {
  depthwise_blocks<Vec8>(x, wpack, bias, g, y, epilogue, band, begin, end, planes_to_pixels_avx2,
                         pixels_to_planes_avx2);
}

// ---- Few input channels, all output channels (an RGB first layer) ---------------------

// The strip shapes: an AVX2 (or portable) build holds 4 output channels x 2 chunks of 8
// columns (8 of its 16 registers); the AVX-512 build 8 output channels x 2 chunks of 16
// (16 of its 32), so each input load feeds twice the multiply-adds on twice the lanes.
template <typename V, int64_t kCo, int64_t Chunks = 2>
struct DenseShape {
  using Vec = V;
  static constexpr int64_t kLanesV = sizeof(V) / sizeof(float);
  static constexpr int64_t kCoV = kCo;
  static constexpr int64_t kChunks = Chunks;
  static constexpr int64_t kStrip = kChunks * kLanesV;
  // A row's last strip when it fits one vector: half the multiply-adds (mobilenet's 112
  // columns are 3 strips of 32 and one of 16).
  using Half = DenseShape<V, kCo, 1>;
};
using DenseNarrow = DenseShape<Vec8, 4>;
using DenseWide = DenseShape<Vec16, 8>;

// Output columns [c0, c0 + n) (n <= S::kStrip) of output row oh, for the S::kCoV output
// channels of weight block `wb` ([tap][kCoV], zero past the last channel), all taps in
// registers. Stores the first `cob` channels: channel k's row oh at
// y + k * y_plane + (oh - y_row0) * OW.
template <typename S, int64_t KW>
__attribute__((always_inline)) inline void dense_strip(const float* planes, int64_t plane_floats,
                                                       const PaddedPlane& p, const ConvGeometry& g,
                                                       const float* wb, const float* bias,
                                                       int64_t cob, int64_t oh, int64_t c0,
                                                       int64_t n, float* y, int64_t y_plane,
                                                       int64_t y_row0) {
  using V = typename S::Vec;
  constexpr int64_t kCo = S::kCoV, kChunks = S::kChunks, kL = S::kLanesV;
  const int64_t kw = KW > 0 ? KW : g.kw;
  V acc[kCo][kChunks];
  for (int64_t k = 0; k < kCo; ++k) {
    const float b = bias != nullptr && k < cob ? bias[k] : 0.0f;
    for (int64_t c = 0; c < kChunks; ++c)
      acc[k][c] = V{} + b;
  }
  const int64_t* tap_offset = p.tap_offset.data();
  const float* w = wb;
  for (int64_t ci = 0; ci < g.c_in; ++ci) {
    const float* plane = planes + ci * plane_floats;
    for (int64_t i = 0; i < g.kh; ++i) {
      const float* __restrict prow = plane + (oh * g.stride[0] + i * g.dil[0]) * p.width + c0;
#pragma GCC unroll 8
      for (int64_t j = 0; j < kw; ++j, w += kCo) {
        const float* s = prow + tap_offset[j];
        V v[kChunks];
#pragma GCC unroll 2
        for (int64_t c = 0; c < kChunks; ++c)
          v[c] = load_v<V>(s + c * kL);
        for (int64_t k = 0; k < kCo; ++k) {
#pragma GCC unroll 2
          for (int64_t c = 0; c < kChunks; ++c)
            acc[k][c] += w[k] * v[c];
        }
      }
    }
  }
  for (int64_t k = 0; k < cob; ++k)
    store_strip<V, kChunks>(y + k * y_plane + (oh - y_row0) * g.ow + c0, acc[k], n);
}

// Output rows [r0, r1) of every output channel of one image: channel c's row oh at
// y + c * y_plane + (oh - y_row0) * OW (y_plane = OH * OW and y_row0 = 0 for the whole NCHW
// out).
template <typename S>
__attribute__((always_inline)) inline void dense_rows(const float* planes, int64_t plane_floats,
                                                      const PaddedPlane& p, const ConvGeometry& g,
                                                      const float* wpack, const float* bias,
                                                      float* y, int64_t y_plane, int64_t y_row0,
                                                      int64_t r0, int64_t r1,
                                                      const TileEpilogue* tiles) {
  const int64_t taps = g.c_in * g.kh * g.kw;
  // Where nothing reads the out after the epilogue (TileEpilogue::out_unread), each strip
  // goes to a scratch row of the block's channels instead, and the epilogue reads it there.
  const bool scratch = tiles != nullptr && tiles->out_unread();
  const int64_t scratch_ld = (g.ow + S::kStrip - 1) / S::kStrip * S::kStrip;
  std::vector<float> strip(scratch ? static_cast<size_t>(S::kCoV * scratch_ld) : 0);
  for (int64_t co = 0; co < g.c_out; co += S::kCoV) {
    const float* wb = wpack + co * taps;
    const float* b = bias != nullptr ? bias + co : nullptr;
    const int64_t cob = std::min(S::kCoV, g.c_out - co);
    float* yc = y + co * y_plane;
    // Where each strip goes: the out (channel k's row oh at yc + k * y_plane + (oh - y_row0)
    // * OW), or the scratch row (at strip + k * scratch_ld).
    float* dst = scratch ? strip.data() : yc;
    const int64_t dst_plane = scratch ? scratch_ld : y_plane;
    for (int64_t oh = r0; oh < r1; ++oh) {
      const int64_t dst_row0 = scratch ? oh : y_row0;
      for (int64_t c0 = 0; c0 < g.ow; c0 += S::kStrip) {
        const int64_t n = std::min(S::kStrip, g.ow - c0);
        if (n <= S::kLanesV) {
          using H = typename S::Half;
          if (g.kw == 3) {
            dense_strip<H, 3>(planes, plane_floats, p, g, wb, b, cob, oh, c0, n, dst, dst_plane,
                              dst_row0);
          } else {
            dense_strip<H, 0>(planes, plane_floats, p, g, wb, b, cob, oh, c0, n, dst, dst_plane,
                              dst_row0);
          }
        } else if (g.kw == 3) {
          dense_strip<S, 3>(planes, plane_floats, p, g, wb, b, cob, oh, c0, n, dst, dst_plane,
                            dst_row0);
        } else {
          dense_strip<S, 0>(planes, plane_floats, p, g, wb, b, cob, oh, c0, n, dst, dst_plane,
                            dst_row0);
        }
        // The strip's epilogue while it is in L1.
        float* out = yc + (oh - y_row0) * g.ow + c0;
        if (scratch) {
          tiles->run_from(strip.data() + c0, scratch_ld, out, y_plane, cob, n);
        } else if (tiles != nullptr) {
          tiles->run(out, y_plane, cob, n);
        }
      }
    }
  }
}

using DenseRowsFn = void (*)(const float*, int64_t, const PaddedPlane&, const ConvGeometry&,
                             const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                             const TileEpilogue*);

__attribute__((target("avx512f,fma"))) void dense_rows_avx512(
    const float* planes, int64_t plane_floats, const PaddedPlane& p, const ConvGeometry& g,
    const float* wpack, const float* bias, float* y, int64_t y_plane, int64_t y_row0, int64_t r0,
    int64_t r1, const TileEpilogue* tiles) {
  dense_rows<DenseWide>(planes, plane_floats, p, g, wpack, bias, y, y_plane, y_row0, r0, r1, tiles);
}

__attribute__((target("avx2,fma"))) void dense_rows_avx2(
    const float* planes, int64_t plane_floats, const PaddedPlane& p, const ConvGeometry& g,
    const float* wpack, const float* bias, float* y, int64_t y_plane, int64_t y_row0, int64_t r0,
    int64_t r1, const TileEpilogue* tiles) {
  dense_rows<DenseNarrow>(planes, plane_floats, p, g, wpack, bias, y, y_plane, y_row0, r0, r1,
                          tiles);
}

void dense_rows_portable(const float* planes, int64_t plane_floats, const PaddedPlane& p,
                         const ConvGeometry& g, const float* wpack, const float* bias, float* y,
                         int64_t y_plane, int64_t y_row0, int64_t r0, int64_t r1,
                         const TileEpilogue* tiles) {
  dense_rows<DenseNarrow>(planes, plane_floats, p, g, wpack, bias, y, y_plane, y_row0, r0, r1,
                          tiles);
}

// ---- The same into a channels-last out --------------------------------------------------
//
// In a channels-last chain (mobilenet_v2's 3 -> 32 layer) the out is [position][channel]. The
// loop above writes rows of one channel; its out went through an NCHW band, a transpose and
// a pass of the epilogue. Here the vectors run along the output channels instead (Cv vectors
// hold every channel of a position) and P positions of an output row go side by side: each tap
// is Cv weight loads, then per position one broadcast input and Cv multiply-adds. A position's
// channels are then one contiguous store, and the epilogue runs on the strip while it is in
// L1. Per output: bias, then the taps in (ci, i, j) order with fused multiply-adds, as in
// dense_strip: the same bits as the NCHW out.

// Positions side by side: as many as the build's registers hold beside the Cv weight vectors
// and the broadcast input (AVX-512: 32 registers, Cv up to 2; AVX2 and the portable build: 16,
// Cv up to 3).
template <typename V, int Cv>
constexpr int64_t kNhwcPositions = sizeof(V) == 64 ? (Cv == 1 ? 28 : 14)
                                   : Cv == 1       ? 12
                                   : Cv == 2       ? 6
                                                   : 4;

// kNhwcPositions for the build's vectors (wide: AVX-512) and cv vectors a position.
constexpr int64_t nhwc_positions(bool wide, int64_t cv) {
  if (wide) return cv == 1 ? kNhwcPositions<Vec16, 1> : kNhwcPositions<Vec16, 2>;
  return cv == 1   ? kNhwcPositions<Vec8, 1>
         : cv == 2 ? kNhwcPositions<Vec8, 2>
                   : kNhwcPositions<Vec8, 3>;
}

// Output columns [c0, c0 + n) (n <= P) of output row oh, all channels: channel c of column
// c0 + q at y[q * C + c]. w: [tap][Cv * L] (zero past the last channel); src[t]: where tap t
// reads column c0's input, column c0 + q's SW * q floats on (P positions are read whatever n
// is: every src[t] has them).
template <typename V, int Cv, int64_t P, int64_t SW>
__attribute__((always_inline)) inline void nhwc_strip(const float* const* src, int64_t taps,
                                                      const float* __restrict w,
                                                      const V (&bias)[Cv], int64_t c_out, int64_t n,
                                                      float* __restrict y) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  V acc[P][Cv];
  for (int64_t q = 0; q < P; ++q) {
    for (int v = 0; v < Cv; ++v)
      acc[q][v] = bias[v];
  }
  for (int64_t t = 0; t < taps; ++t, w += Cv * kL) {
    const float* __restrict s = src[t];
    // Opaque to the optimiser: GCC otherwise kept s + q for every position q in a register
    // of its own (spilling half of them) instead of one pointer and constant offsets.
    asm("" : "+r"(s));
    V wv[Cv];
    for (int v = 0; v < Cv; ++v)
      wv[v] = load_v<V>(w + v * kL);
#pragma GCC unroll 28
    for (int64_t q = 0; q < P; ++q) {
      const float x = s[q * SW];
      for (int v = 0; v < Cv; ++v)
        acc[q][v] += wv[v] * x;
    }
  }
  // Unrolled, so that each accumulator is named by a constant index and stored from its
  // register (as store_strip).
#pragma GCC unroll 28
  for (int64_t q = 0; q < P; ++q) {
    if (q >= n) break;
    for (int v = 0; v < Cv; ++v) {
      const int64_t left = c_out - v * kL;
      if (left >= kL) {
        store_v<V>(y + q * c_out + v * kL, acc[q][v]);
      } else {
        for (int64_t k = 0; k < left; ++k)
          y[q * c_out + v * kL + k] = acc[q][v][k];
      }
    }
  }
}

// One image's channels-last first layer, read one of two ways:
// - `planes` (any stride): its padded input planes split by stride phase (fill_plane), and
//   each tap's offset in them (tap_off) from row oh * stride, column c0;
// - else straight from the NCHW image `x` (column strides 1 and 2), without that copy. Filling
//   the planes, zeros included, took 46 of mnasnet0_5's 180 us stem: 600 KB written and read
//   again for a 3 x 224 x 224 input. Each tap reads its input row in place where a strip's
//   columns lie inside it, a row of zeros where the tap's row lies in the padding, and a short
//   zero-padded copy of the row's span where the strip crosses the left or right edge: the
//   same values in the same order, so the same bits as through the planes.
// Then the weights as nhwc_strip takes them, the out yn ([OH * OW][C]) and its epilogue
// (`tiles`, or `epilogue` by rows from element `epilogue_at` of the out on; neither where an
// out of the chain lies over the input, whose rows are then still being read: the caller runs
// it on the whole out after).
struct NhwcJob {
  const float* planes;
  const std::vector<int64_t>& tap_off;
  const PaddedPlane& p;
  const float* x;
  const ConvGeometry& g;
  const float* w;
  const float* bias;
  float* yn;
  const TileEpilogue* tiles;
  const Epilogue* epilogue;
  int64_t epilogue_at;
};

// Output rows [r0, r1) of the job, the epilogue on each strip or row. SW: the column stride
// nhwc_strip reads at (1 through the planes).
template <typename V, int Cv, int64_t SW>
__attribute__((always_inline)) inline void nhwc_rows(const NhwcJob& job, int64_t r0, int64_t r1) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  constexpr int64_t kP = kNhwcPositions<V, Cv>;
  const PaddedPlane& p = job.p;
  const ConvGeometry& g = job.g;
  const TileEpilogue* tiles = job.tiles;
  const int64_t taps = g.c_in * g.kh * g.kw, c = g.c_out;
  V bv[Cv];
  for (int v = 0; v < Cv; ++v) {
    float lanes[kL] = {};
    for (int64_t k = 0; k < kL && v * kL + k < c; ++k)
      lanes[k] = job.bias != nullptr ? job.bias[v * kL + k] : 0.0f;
    bv[v] = V{} + load_v<V>(lanes);  // as dense_strip's V{} + b: a -0 bias starts at +0
  }
  // Where nothing reads the out after the epilogue, each strip goes to a scratch block and
  // the epilogue reads it there.
  const bool scratch = tiles != nullptr && tiles->out_unread();
  float strip[kP * Cv * kL];
  std::vector<const float*> src(static_cast<size_t>(taps));
  // Reading in place: the input columns a strip's taps span, from its first position's first
  // tap on; the rows of zeros, and the edge strips' padded copies, one per (channel, row).
  const int64_t span = (kP - 1) * SW + (g.kw - 1) * g.dil[1] + 1;
  std::vector<float> zeros, edges;
  if (job.planes == nullptr) {
    zeros.assign(static_cast<size_t>(span), 0.0f);
    edges.resize(static_cast<size_t>(g.c_in * g.kh * span));
  }
  for (int64_t oh = r0; oh < r1; ++oh) {
    const float* row = job.planes != nullptr ? job.planes + oh * g.stride[0] * p.width : nullptr;
    float* yrow = job.yn + oh * g.ow * c;
    for (int64_t c0 = 0; c0 < g.ow; c0 += kP) {
      const int64_t n = std::min(kP, g.ow - c0);
      if (job.planes != nullptr) {
        for (size_t t = 0; t < src.size(); ++t)
          src[t] = row + c0 + job.tap_off[t];
      } else {
        const int64_t col = c0 * SW - g.pad[1];  // position c0's first tap's input column
        const bool inside = col >= 0 && col + span <= g.w;
        for (int64_t ci = 0; ci < g.c_in; ++ci) {
          for (int64_t i = 0; i < g.kh; ++i) {
            const int64_t ih = oh * g.stride[0] - g.pad[0] + i * g.dil[0];
            const int64_t r = ci * g.kh + i;
            const float* from = zeros.data();
            if (ih >= 0 && ih < g.h) {
              const float* in = job.x + (ci * g.h + ih) * g.w;
              if (inside) {
                from = in + col;
              } else {
                // The span's columns [lo, hi) lie in the row; the rest is padding.
                float* e = edges.data() + r * span;
                const int64_t lo = std::clamp<int64_t>(-col, 0, span);
                const int64_t hi = std::clamp<int64_t>(g.w - col, lo, span);
                std::fill(e, e + span, 0.0f);
                if (lo < hi) std::copy(in + (col + lo), in + (col + hi), e + lo);
                from = e;
              }
            }
            for (int64_t j = 0; j < g.kw; ++j)
              src[static_cast<size_t>(r * g.kw + j)] = from + j * g.dil[1];
          }
        }
      }
      float* out = yrow + c0 * c;
      nhwc_strip<V, Cv, kP, SW>(src.data(), taps, job.w, bv, c, n, scratch ? strip : out);
      if (scratch) {
        tiles->run_from(strip, n * c, out, n * c, 1, n * c);
      } else if (tiles != nullptr) {
        tiles->run(out, n * c, 1, n * c);
      }
    }
    if (tiles == nullptr && job.epilogue != nullptr) {
      const int64_t at = job.epilogue_at + oh * g.ow * c;
      apply_epilogue(*job.epilogue, at, at + g.ow * c);
    }
  }
}

// SW: the column stride read in place (2), or 1 (in place, or through the planes).
template <typename V, int Cv>
__attribute__((always_inline)) inline void nhwc_rows_strided(const NhwcJob& job, int64_t r0,
                                                             int64_t r1) {
  if (job.planes == nullptr && job.g.stride[1] == 2) {
    nhwc_rows<V, Cv, 2>(job, r0, r1);
  } else {
    nhwc_rows<V, Cv, 1>(job, r0, r1);
  }
}

// Cv: the vectors a position's channels take (few_input_channels_max_outputs: at most 32
// channels in two 16-wide vectors, 24 in three 8-wide ones).
template <typename V>
__attribute__((always_inline)) inline void nhwc_rows_any(const NhwcJob& job, int64_t r0,
                                                         int64_t r1) {
  constexpr int64_t kL = sizeof(V) / sizeof(float);
  const int64_t cv = (job.g.c_out + kL - 1) / kL;
  if (cv == 1) {
    nhwc_rows_strided<V, 1>(job, r0, r1);
  } else if (cv == 2 || kL == 16) {
    nhwc_rows_strided<V, 2>(job, r0, r1);
  } else if constexpr (kL == 8) {  // three vectors: 8-wide builds only
    nhwc_rows_strided<V, 3>(job, r0, r1);
  }
}

__attribute__((target("avx512f,fma"))) void nhwc_rows_avx512(const NhwcJob& job, int64_t r0,
                                                             int64_t r1) {
  nhwc_rows_any<Vec16>(job, r0, r1);
}
__attribute__((target("avx2,fma"))) void nhwc_rows_avx2(const NhwcJob& job, int64_t r0,
                                                        int64_t r1) {
  nhwc_rows_any<Vec8>(job, r0, r1);
}
void nhwc_rows_portable(const NhwcJob& job, int64_t r0, int64_t r1) {
  nhwc_rows_any<Vec8>(job, r0, r1);
}

// Padded rows [r0, r1) of `count` planes of x (each g.h x g.w) into dst, one p.floats()
// apart. Inlined into a build per ISA: in the portable build the stride-2 shuffle became
// scalar moves through the stack, each read back as a vector before the stores had landed
// (0.13 ms of mobilenet_v3_small's 1.6, on its first layer's 3 planes of 224x224).
__attribute__((always_inline)) inline void fill_planes(const float* x, const ConvGeometry& g,
                                                       const PaddedPlane& p, int64_t count,
                                                       int64_t r0, int64_t r1, float* dst) {
  for (int64_t t = 0; t < count; ++t)
    fill_plane_rows(x + t * g.h * g.w, g, p, r0, r1, dst + t * p.floats());
}

__attribute__((target("avx2,fma"))) void fill_planes_avx2(const float* x, const ConvGeometry& g,
                                                          const PaddedPlane& p, int64_t count,
                                                          int64_t r0, int64_t r1, float* dst) {
  fill_planes(x, g, p, count, r0, r1, dst);
}

void fill_planes_portable(const float* x, const ConvGeometry& g, const PaddedPlane& p,
                          int64_t count, int64_t r0, int64_t r1, float* dst) {
  fill_planes(x, g, p, count, r0, r1, dst);
}

}  // namespace

int64_t few_input_channels_max_outputs() {
  switch (gemm_float_kernel()) {
    case FloatKernel::kAvx512:
      return 32;
    case FloatKernel::kAvx2:
      return 24;
    case FloatKernel::kPortable:
      break;
  }
  return 16;
}

bool few_input_channels_conv(const ConvGeometry& g) {
  return g.groups == 1 && g.c_in <= 4 && g.c_out <= few_input_channels_max_outputs() && g.kh <= 7 &&
         g.kw <= 7;
}

void few_input_channels_conv_f32(const float* x, const float* w, const float* bias,
                                 const ConvGeometry& g, float* y, const Epilogue* epilogue,
                                 bool out_nhwc) {
  const bool wide = gemm_float_kernel() == FloatKernel::kAvx512;
  const bool portable = gemm_float_kernel() == FloatKernel::kPortable;
  const int64_t lanes = wide ? 16 : 8;
  const int64_t taps = g.c_in * g.kh * g.kw;
  // The output columns a strip computes, and the weights by blocks of output channels,
  // tap-major within a block (ci, i, j), the block's channels side by side (zero past the last
  // channel): for an NCHW out blocks of the strip's channels; for a channels-last out one
  // block of every channel in whole vectors ([tap][channel]).
  int64_t strip = 0, co_block = 0;
  if (out_nhwc) {
    const int64_t cv = (g.c_out + lanes - 1) / lanes;
    co_block = cv * lanes;
    strip = nhwc_positions(wide, cv);
  } else {
    co_block = wide ? DenseWide::kCoV : DenseNarrow::kCoV;
    strip = wide ? DenseWide::kStrip : DenseNarrow::kStrip;
  }
  const std::vector<float> wpack = pack_depthwise_weights(w, g.c_out, taps, co_block);
  const int64_t out_plane = g.oh * g.ow;
  const std::optional<TileEpilogue> tiles =
      epilogue != nullptr ? TileEpilogue::make(*epilogue) : std::nullopt;
  const TileEpilogue* tile = tiles ? &*tiles : nullptr;
  // A channels-last out of column stride 1 or 2 reads the input in place (NhwcJob).
  const bool in_place = out_nhwc && (g.stride[1] == 1 || g.stride[1] == 2);
  // Otherwise every image's planes first: the input is read whole before any output is
  // written, so the epilogue may go by rows even when its outs lie over the input.
  const PaddedPlane p = in_place ? PaddedPlane{} : plane_layout(g, strip);
  const int64_t plane_floats = p.floats();
  Buffer<float> planes(in_place ? 0 : g.batch * g.c_in * plane_floats);
  if (!in_place) {
    // Padded rows across threads (the fill, zeros included, was about a quarter of a 224x224
    // first layer, serial).
    parallel_for(p.rows, 16, [&](int64_t r0, int64_t r1) {
      if (portable) {
        fill_planes_portable(x, g, p, g.batch * g.c_in, r0, r1, planes.data());
      } else {  // 8-wide shuffles: the AVX2 build serves AVX-512 CPUs too
        fill_planes_avx2(x, g, p, g.batch * g.c_in, r0, r1, planes.data());
      }
    });
  }
  if (out_nhwc) {
    std::vector<int64_t> tap_off;  // tap (ci, i, j): its plane, row and column phase
    if (!in_place) {
      tap_off.reserve(static_cast<size_t>(taps));
      for (int64_t ci = 0; ci < g.c_in; ++ci) {
        for (int64_t i = 0; i < g.kh; ++i) {
          for (int64_t j = 0; j < g.kw; ++j)
            tap_off.push_back(ci * plane_floats + i * g.dil[0] * p.width + p.tap_offset[j]);
        }
      }
    }
    // Read in place, the input is read as the outputs are written: an epilogue whose out lies
    // over it (no TileEpilogue then) waits for the whole out.
    const bool whole_after = in_place && epilogue != nullptr && epilogue->after_inputs;
    auto* run = isa_build(nhwc_rows_avx512, nhwc_rows_avx2, nhwc_rows_portable);
    for (int64_t n = 0; n < g.batch; ++n) {
      const NhwcJob job{in_place ? nullptr : planes.data() + n * g.c_in * plane_floats,
                        tap_off,
                        p,
                        x + n * g.c_in * g.h * g.w,
                        g,
                        wpack.data(),
                        bias,
                        y + n * g.c_out * out_plane,
                        tile,
                        whole_after ? nullptr : epilogue,
                        n * g.c_out * out_plane};
      parallel_for(g.oh, 2, [&](int64_t r0, int64_t r1) { run(job, r0, r1); });
    }
    if (whole_after) apply_epilogue_whole(*epilogue, g.batch * g.c_out * out_plane);
    return;
  }
  DenseRowsFn run = isa_build(dense_rows_avx512, dense_rows_avx2, dense_rows_portable);
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* pn = planes.data() + n * g.c_in * plane_floats;
    float* yn = y + n * g.c_out * out_plane;
    // The epilogue strip by strip as the loop writes them where it is an activation, else on
    // the rows just written, while they are in cache.
    parallel_for(g.oh, 4, [&](int64_t r0, int64_t r1) {
      run(pn, plane_floats, p, g, wpack.data(), bias, yn, out_plane, 0, r0, r1, tile);
      for (int64_t co = 0; epilogue != nullptr && !tile && co < g.c_out; ++co) {
        const int64_t at = (n * g.c_out + co) * out_plane;
        apply_epilogue(*epilogue, at + r0 * g.ow, at + r1 * g.ow);
      }
    });
  }
}

int64_t depthwise_block_lanes(const ConvGeometry& g, int64_t cout_g) {
  if (cout_g != 1 || g.c_out != g.c_in) return 0;
  switch (gemm_float_kernel()) {
    case FloatKernel::kAvx512:
      return 16;
    case FloatKernel::kAvx2:
      return 8;
    case FloatKernel::kPortable:
      break;
  }
  return 0;
}

std::vector<float> pack_depthwise_weights(const float* w, int64_t c_out, int64_t taps,
                                          int64_t lanes) {
  const int64_t blocks = (c_out + lanes - 1) / lanes;
  std::vector<float> packed(static_cast<size_t>(blocks * taps * lanes), 0.0f);
  for (int64_t c = 0; c < c_out; ++c) {
    for (int64_t tap = 0; tap < taps; ++tap) {
      packed[static_cast<size_t>(((c / lanes) * taps + tap) * lanes + c % lanes)] =
          w[c * taps + tap];
    }
  }
  return packed;
}

void depthwise_conv_f32(const float* x, const float* w, const float* bias, const ConvGeometry& g,
                        int64_t cout_g, float* y, const Epilogue* epilogue, const float* packed) {
  // One output per input channel on an AVX-512 or AVX2 CPU: channel blocks (in bands of rows
  // past kBlockedPlane).
  const int64_t lanes = depthwise_block_lanes(g, cout_g);
  if (lanes > 0) {
    const bool wide = lanes == 16;
    const int64_t blocks = (g.c_out + lanes - 1) / lanes;
    std::vector<float> own;
    if (packed == nullptr) {
      own = pack_depthwise_weights(w, g.c_out, g.kh * g.kw, lanes);
      packed = own.data();
    }
    int64_t band = g.oh;
    if (g.oh * g.ow > kBlockedPlane) {
      const int64_t wp = g.w + 2 * g.pad[1], reach = (g.kh - 1) * g.dil[0] + 1;
      const int64_t rows = std::max(reach, kBlockedSlab / (wp * lanes * 4));
      band = std::clamp<int64_t>((rows - reach) / g.stride[0] + 1, 1, g.oh);
    }
    const int64_t bands = (g.oh + band - 1) / band;
    auto* run = wide ? depthwise_blocks_avx512 : depthwise_blocks_avx2;
    parallel_for(g.batch * blocks * bands, 1, [&](int64_t begin, int64_t end) {
      run(x, packed, bias, g, y, epilogue, band, begin, end);
    });
    return;
  }
  // 8-wide vectors: the AVX2 build serves AVX-512 CPUs too.
  auto* run = isa_build(channels_avx2, channels_avx2, channels_portable);
  parallel_for(g.batch * g.c_out, 4, [&](int64_t begin, int64_t end) {
    run(x, w, bias, g, cout_g, y, epilogue, begin, end);
  });
}

}  // namespace etc::rt::kernels
