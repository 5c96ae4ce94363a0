// The GEMM's 16-bit right operands (gemm_wide16.h): widening, packing, and the in-place
// products for a decode step and a short prompt.
#include "runtime/kernels/gemm_wide16.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/kernels/simd_transpose.h"
#include "support/half.h"

namespace etc::rt::kernels {
namespace {

// out[i] = the float value of 16-bit float i (bf16: its bits are a float's upper half; fp16:
// IEEE half), exactly.
void widen16_run(const uint16_t* __restrict src, int64_t count, bool float16,
                 float* __restrict out) {
  if (float16) {
    for (int64_t i = 0; i < count; ++i)
      out[i] = half_to_float(src[i]);
  } else {
    for (int64_t i = 0; i < count; ++i)
      out[i] = bfloat16_to_float(src[i]);
  }
}

__attribute__((target("avx512f,fma"))) void widen16_run_avx512(const uint16_t* src, int64_t count,
                                                               bool float16, float* out) {
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m512 v = float16 ? _mm512_cvtph_ps(h)
                             : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    _mm512_storeu_ps(out + i, v);
  }
  widen16_run(src + i, count - i, float16, out + i);
}

// F16C (CPUID leaf 1, ECX bit 29), asked of the CPU itself: clang's __builtin_cpu_supports
// does not know the name.
bool cpu_has_f16c() {
  static const bool kHas = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  }();
  return kHas;
}

// fp16 needs F16C (every AVX2 CPU etc has met has it; checked once).
__attribute__((target("avx2,f16c"))) void widen16_run_avx2(const uint16_t* src, int64_t count,
                                                           bool float16, float* out) {
  if (float16 && !cpu_has_f16c()) return widen16_run(src, count, float16, out);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256 v = float16 ? _mm256_cvtph_ps(h)
                             : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    _mm256_storeu_ps(out + i, v);
  }
  widen16_run(src + i, count - i, float16, out + i);
}

// pack_dequant for 16-bit floats (DequantB::bits16): the same panels, each value widened.
}  // namespace

void pack_widened(FloatKernel isa, const DequantB& d, int64_t p0, int64_t j0, int64_t kc,
                  int64_t nc, int64_t nr, float* __restrict dst) {
  thread_local std::vector<float> rows;
  const auto run = isa == FloatKernel::kAvx512 ? widen16_run_avx512
                   : isa == FloatKernel::kAvx2 ? widen16_run_avx2
                                               : widen16_run;
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min(nr, nc - jr), n0 = d.col0 + j0 + jr;
    if (d.q_k == 1) {
      // Stored [N, K] (a linear layer's weight): a column of B at a time, then transposed.
      rows.resize(static_cast<size_t>(nr * kc));
      for (int64_t j = 0; j < cols; ++j)
        run(d.bits16 + (n0 + j) * d.q_n + p0, kc, d.float16, rows.data() + j * kc);
      for (int64_t j = 0; j < cols; j += 16) {
        for (int64_t p = 0; p < kc; p += 16) {
          transpose_tile(isa, rows.data() + j * kc + p, kc, std::min<int64_t>(16, cols - j),
                         std::min<int64_t>(16, kc - p), dst + p * nr + j, nr);
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        float* out = dst + p * nr;
        if (d.panel > 0) {
          // In panels: each run of columns within one (float32 ones copied as they are).
          for (int64_t j = 0; j < cols;) {
            const int64_t n = j0 + jr + j, len = std::min(cols - j, d.panel_left(n));
            if (d.f32 != nullptr) {
              std::memcpy(out + j, d.f32 + d.offset(p0 + p, n),
                          static_cast<size_t>(len) * sizeof(float));
            } else {
              run(d.bits16 + d.offset(p0 + p, n), len, d.float16, out + j);
            }
            j += len;
          }
          continue;
        }
        const uint16_t* src = d.bits16 + (p0 + p) * d.q_k + n0 * d.q_n;
        if (d.q_n == 1) {
          run(src, cols, d.float16, out);
        } else {
          for (int64_t j = 0; j < cols; ++j)
            widen16_run(src + j * d.q_n, 1, d.float16, out + j);
        }
      }
    }
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t j = cols; j < nr; ++j)
        dst[p * nr + j] = 0.0f;
    }
    dst += nr * kc;
  }
}

namespace {

// acc[i] = fma(av, widened src[i], acc[i]) for i < count: one row of a 16-bit [K, N] weight
// multiplied into a row of accumulators (one_row_w16 without AVX-512).
__attribute__((target("avx2,fma,f16c"))) void axpy_w16_avx2(float av, const uint16_t* src,
                                                            int64_t count, bool float16,
                                                            float* acc) {
  int64_t i = 0;
  if (!float16 || cpu_has_f16c()) {
    const __m256 a = _mm256_set1_ps(av);
    for (; i + 8 <= count; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m256 v = float16
                           ? _mm256_cvtph_ps(h)
                           : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(a, v, _mm256_loadu_ps(acc + i)));
    }
  }
  for (; i < count; ++i)
    acc[i] = std::fma(av, float16 ? half_to_float(src[i]) : bfloat16_to_float(src[i]), acc[i]);
}

// The same for float32 values (a float32 weight in panels).
__attribute__((target("avx2,fma"))) void axpy_f32_avx2(float av, const float* src, int64_t count,
                                                       float* acc) {
  const __m256 a = _mm256_set1_ps(av);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(acc + i,
                     _mm256_fmadd_ps(a, _mm256_loadu_ps(src + i), _mm256_loadu_ps(acc + i)));
  }
  for (; i < count; ++i)
    acc[i] = std::fma(av, src[i], acc[i]);
}

// out[j] = fma(alpha, acc[j], init ? *init : out[j]) for j < count: a K block's sums into C.
__attribute__((target("avx2,fma"))) void finish_row_avx2(float alpha, const float* acc,
                                                         int64_t count, const float* init,
                                                         float* out) {
  const __m256 al = _mm256_set1_ps(alpha);
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    const __m256 c0 = init != nullptr ? _mm256_set1_ps(*init) : _mm256_loadu_ps(out + j);
    _mm256_storeu_ps(out + j, _mm256_fmadd_ps(al, _mm256_loadu_ps(acc + j), c0));
  }
  for (; j < count; ++j)
    out[j] = std::fma(alpha, acc[j], init != nullptr ? *init : out[j]);
}

// 16 bf16 (fp16) values widened exactly.
__attribute__((target("avx512f,fma"))) inline __m512 widen16_lanes(__m256i h, bool float16) {
  return float16 ? _mm512_cvtph_ps(h)
                 : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 values of a weight row from src, widened exactly: bf16/fp16 (uint16_t) or int8.
__attribute__((target("avx512f,fma"))) inline __m512 load_widened(const uint16_t* src,
                                                                  bool float16) {
  return widen16_lanes(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), float16);
}
__attribute__((target("avx512f,fma"))) inline __m512 load_widened(const float* src, bool) {
  return _mm512_loadu_ps(src);
}
__attribute__((target("avx512f,fma"))) inline __m512 load_widened(const int8_t* src, bool) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src))));
}

constexpr int64_t kTilePrefetchRows = 16;

// The AVX-512 tile kernel (micro_kernel_f32_avx512) for m <= 8 rows of A read in place and a
// [K, N] weight of 16-bit floats or int8 read in place (cols <= 32 of its columns at w, rows
// ldw apart), widened as it is multiplied: a short prompt's product, without packing either
// operand (each packed value would be read once). The accumulators take k in order from zero
// and C takes alpha * acc + C (or init[i]), as the tile kernel does: the same bits.
template <typename Src>
__attribute__((target("avx512f,fma"))) void tile_w16_avx512(int64_t kc, const float* a,
                                                            int64_t a_rs, int64_t a_cs, int64_t m,
                                                            const Src* w, int64_t ldw, int64_t cols,
                                                            bool float16, float* c, int64_t ldc,
                                                            float alpha, const float* init) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
  alignas(64) Src edge[32] = {};  // a row's columns when fewer than 32
  for (int64_t p = 0; p < kc; ++p) {
    const Src* row = w + p * ldw;
    // The weight's rows lie a row of the weight apart, too far for the hardware's stream
    // prefetch: ask for the row kPrefetchRows ahead (its 64 bytes may span two lines).
    if (p + kTilePrefetchRows < kc) {
      const char* ahead = reinterpret_cast<const char*>(row + kTilePrefetchRows * ldw);
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 63, _MM_HINT_T0);
    }
    // And this row's next 32 columns, which the next tile reads after kc rows.
    _mm_prefetch(reinterpret_cast<const char*>(row + 32) + 63, _MM_HINT_T1);
    if (cols < 32) {
      std::memcpy(edge, row, static_cast<size_t>(cols) * sizeof(Src));
      row = edge;
    }
    const __m512 b0 = load_widened(row, float16);
    const __m512 b1 = load_widened(row + 16, float16);
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      if (i < m) {
        const __m512 av = _mm512_set1_ps(a[i * a_rs + p * a_cs]);
        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
      }
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  const __mmask16 m0 = first_lanes(std::min<int64_t>(16, cols)),
                  m1 = cols > 16 ? first_lanes(cols - 16) : __mmask16(0);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    if (i >= m) break;
    float* out = c + i * ldc;
    const __m512 c0 = init != nullptr ? _mm512_set1_ps(init[i]) : _mm512_maskz_loadu_ps(m0, out);
    const __m512 c1 =
        init != nullptr ? _mm512_set1_ps(init[i]) : _mm512_maskz_loadu_ps(m1, out + 16);
    _mm512_mask_storeu_ps(out, m0, _mm512_fmadd_ps(al, acc[i][0], c0));
    _mm512_mask_storeu_ps(out + 16, m1, _mm512_fmadd_ps(al, acc[i][1], c1));
  }
}

// Where a weight's columns lie for the in-place paths: row p of column j (counted from the
// operand's col0) at col(j) + p * step, by the operand's layout (DequantB::offset): stored
// [K, N] (rows `step` apart), or in panels (DequantB::panel: step == panel), which a pass
// reads front to back.
template <typename Src>
struct WeightCols {
  const Src* data;
  const DequantB* d;
  int64_t step;
  const Src* col(int64_t j) const { return data + d->offset(0, j); }
  // How many columns from j on col(j) reaches in one run (j's panel).
  int64_t run(int64_t j) const { return d->panel_left(j); }
};

template <typename Src>
WeightCols<Src> weight_cols(const Src* data, const DequantB& d) {
  return {data, &d, d.q_k};
}

// One row of A times columns [j0, j0 + cols) (cols <= 384) of a weight of 16-bit floats or
// int8 over a K block of kc rows from row p0: C = alpha * acc + (init ? *init : C) with each
// column's acc in a register, k in order from zero (the row kernels' arithmetic). Per 16
// products one load of the weight and one multiply-add, where an accumulator row in memory
// costs a load and a store more. kPanels: the weight in panels (each vector of 16 columns
// within one), each panel's rows read in order; else [K, N], the rows a row apart.
template <typename Src, bool kPanels, bool kFull = false>
__attribute__((target("avx512f,fma"))) void cols_in_registers(
    int64_t kc, const float* a, int64_t a_step, const WeightCols<Src>& w, int64_t p0, int64_t j0,
    int64_t cols, bool float16, float* c, float alpha, const float* init) {
  constexpr int64_t kVecs = 24;
  if constexpr (!kFull) {
    // All 384 columns: every vector's update unconditional, which lets the compiler keep
    // the accumulators in registers.
    if (cols == 16 * kVecs) {
      return cols_in_registers<Src, kPanels, true>(kc, a, a_step, w, p0, j0, cols, float16, c,
                                                   alpha, init);
    }
  }
  constexpr int64_t kPrefetchRows = 8;
  __mmask16 mask[kVecs];
  for (int64_t v = 0; v < kVecs; ++v) {
    const int64_t left = cols - 16 * v;
    mask[v] = left >= 16 ? __mmask16(0xFFFF) : left > 0 ? first_lanes(left) : __mmask16(0);
  }
  const int64_t vecs = kFull ? kVecs : (cols + 15) / 16, full = kFull ? kVecs : cols / 16;
  const int64_t tail = kFull ? 0 : cols % 16;  // a last part vector, read through a zeroed copy
  const int64_t b_step = w.step;
  // Row p0 of each vector's first column: in panels, each vector's own; else one row.
  const Src* vb[kVecs] = {};
  for (int64_t v = 0; v < (kPanels ? vecs : 1); ++v)
    vb[v] = w.col(j0 + 16 * v) + p0 * b_step;
  __m512 acc[kVecs];
  for (__m512& x : acc)
    x = _mm512_setzero_ps();
  for (int64_t p = 0, off = 0; p < kc; ++p, off += b_step) {
    const __m512 av = _mm512_set1_ps(a[p * a_step]);
    if constexpr (!kPanels) {
      // The rows a page or more apart defeat the hardware's stream prefetch: ask for the
      // chunk kPrefetchRows rows ahead. (Panels are streams it follows.)
      if (p + kPrefetchRows < kc) {
        const char* ahead = reinterpret_cast<const char*>(vb[0] + off + kPrefetchRows * b_step);
        for (int64_t byte = 0; byte < cols * static_cast<int64_t>(sizeof(Src)); byte += 64)
          _mm_prefetch(ahead + byte, _MM_HINT_T0);
      }
    }
#pragma GCC unroll 24
    for (int64_t v = 0; v < kVecs; ++v) {
      if (v < full) {
        const Src* src = kPanels ? vb[v] + off : vb[0] + off + 16 * v;
        acc[v] = _mm512_fmadd_ps(av, load_widened(src, float16), acc[v]);
      }
    }
    if (tail != 0) {
      Src part[16] = {};
      const Src* src = kPanels ? vb[full] + off : vb[0] + off + 16 * full;
      std::memcpy(part, src, static_cast<size_t>(tail) * sizeof(Src));
      acc[full] = _mm512_fmadd_ps(av, load_widened(part, float16), acc[full]);
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  for (int64_t v = 0; v < vecs; ++v) {
    float* out = c + 16 * v;
    const __m512 c0 = init != nullptr ? _mm512_set1_ps(*init) : _mm512_maskz_loadu_ps(mask[v], out);
    _mm512_mask_storeu_ps(out, mask[v], _mm512_fmadd_ps(al, acc[v], c0));
  }
}

// The one-row product over a weight in registers, 384 columns at a time (AVX-512).
template <typename Src>
void rows_in_tiles(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                   MatrixRef<float> a, const WeightCols<Src>& w, bool float16, float* c,
                   int64_t ldc, const float* init);

template <typename Src>
void one_row_in_registers(int64_t n, int64_t k, int64_t kc_block, float alpha, MatrixRef<float> a,
                          const WeightCols<Src>& w, bool float16, float* c, const float* init) {
  const bool panels = w.d->panel > 0;
  // In panels, a vector of 16 columns must lie in one: else the tile kernel, whose tiles end
  // at the panels' ends (the same arithmetic).
  if (panels && (w.d->panel % 16 != 0 || w.d->col0 % 16 != 0))
    return rows_in_tiles(1, n, k, kc_block, alpha, a, w, float16, c, n, init);
  for (int64_t j = 0; j < n; j += 384) {
    for (int64_t pc = 0; pc < k; pc += kc_block) {
      const int64_t kc = std::min(kc_block, k - pc), cols = std::min<int64_t>(384, n - j);
      const float* ap = a.data + pc * a.col_stride;
      const float* first = pc == 0 ? init : nullptr;
      if (panels) {
        cols_in_registers<Src, true>(kc, ap, a.col_stride, w, pc, j, cols, float16, c + j, alpha,
                                     first);
      } else {
        cols_in_registers<Src, false>(kc, ap, a.col_stride, w, pc, j, cols, float16, c + j, alpha,
                                      first);
      }
    }
  }
}

// m <= 8 rows of A times a weight by tile_w16_avx512 (tiles of at most 32 columns, each
// within a panel), a K block of the weight's rows across all its columns before the next.
template <typename Src>
void rows_in_tiles(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                   MatrixRef<float> a, const WeightCols<Src>& w, bool float16, float* c,
                   int64_t ldc, const float* init) {
  for (int64_t pc = 0; pc < k; pc += kc_block) {
    const int64_t kc = std::min(kc_block, k - pc);
    for (int64_t j = 0; j < n;) {
      const int64_t cols = std::min({int64_t{32}, n - j, w.run(j)});
      tile_w16_avx512(kc, a.data + pc * a.col_stride, a.row_stride, a.col_stride, m,
                      w.col(j) + pc * w.step, w.step, cols, float16, c + j, ldc, alpha,
                      pc == 0 ? init : nullptr);
      j += cols;
    }
  }
}

// The one-row product over a 16-bit weight stored [K, N] (the rows of B contiguous: a bf16
// model's linear layer as etc's export folds its transpose) or in panels, for a decode step.
// AVX-512: 384 columns' accumulators in registers (one_row_in_registers). AVX2: row by row of
// the weight (of a panel), each read once and in order, into a row of accumulators in
// memory, a chunk of columns at a time. Either way each column's accumulator takes k in
// order from zero within a K block and C takes alpha * acc + C (or the row's init) after
// each, as the row kernels do: the same bits.
template <typename Src>
void one_row_w16(bool avx512, int64_t n, int64_t k, int64_t kc_block, float alpha,
                 MatrixRef<float> a, const Src* data, const DequantB& d, float* c,
                 const float* init) {
  const WeightCols<Src> w = weight_cols(data, d);
  if (avx512) return one_row_in_registers(n, k, kc_block, alpha, a, w, d.float16, c, init);
  constexpr int64_t kChunk = 2048;  // columns per pass: 8 KiB of accumulators in the L1 cache
  alignas(64) float acc[kChunk];
  for (int64_t n0 = 0; n0 < n;) {
    const int64_t cn = std::min({kChunk, n - n0, w.run(n0)});
    const Src* col = w.col(n0);
    for (int64_t pc = 0; pc < k; pc += kc_block) {
      const int64_t kc = std::min(kc_block, k - pc);
      std::fill_n(acc, cn, 0.0f);
      for (int64_t p = 0; p < kc; ++p) {
        const float av = a.data[(pc + p) * a.col_stride];
        if constexpr (std::is_same_v<Src, float>) {
          axpy_f32_avx2(av, col + (pc + p) * w.step, cn, acc);
        } else {
          axpy_w16_avx2(av, col + (pc + p) * w.step, cn, d.float16, acc);
        }
      }
      finish_row_avx2(alpha, acc, cn, pc == 0 ? init : nullptr, c + n0);
    }
    n0 += cn;
  }
}

}  // namespace

void wide16_rows(bool avx512, int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                 MatrixRef<float> a, const DequantB& d, float* c, int64_t ldc, const float* init) {
  if (d.f32 != nullptr) {
    if (m == 1) return one_row_w16(avx512, n, k, kc_block, alpha, a, d.f32, d, c, init);
    return rows_in_tiles(m, n, k, kc_block, alpha, a, weight_cols(d.f32, d), false, c, ldc, init);
  }
  if (m == 1) return one_row_w16(avx512, n, k, kc_block, alpha, a, d.bits16, d, c, init);
  rows_in_tiles(m, n, k, kc_block, alpha, a, weight_cols(d.bits16, d), d.float16, c, ldc, init);
}

bool int8_row_applies(const DequantB& d) {
  return d.q != nullptr && d.q_n == 1 && !d.zero.present() && !d.scale.present();
}

void int8_rows_avx512(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                      MatrixRef<float> a, const DequantB& d, float* c, int64_t ldc,
                      const float* init) {
  const WeightCols<int8_t> w = weight_cols(d.q, d);
  if (m == 1) return one_row_in_registers(n, k, kc_block, alpha, a, w, false, c, init);
  rows_in_tiles(m, n, k, kc_block, alpha, a, w, false, c, ldc, init);
}

}  // namespace etc::rt::kernels
