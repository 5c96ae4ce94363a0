// The GEMM's path for a few rows of A by a B stored transposed (see gemm_transposed.h).
#include "runtime/kernels/gemm_transposed.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/kernels/simd_transpose.h"

namespace etc::rt::kernels {
namespace {

// Rows of C (m <= kTransposedBRows: a decode step's product, or the query heads that share a
// cache head) where B is stored transposed, its columns contiguous ([N, K] rows: a product
// by K^T read from K itself), in float32 or 16-bit floats widened exactly: for 16 columns of
// C at a time, 16 values of each of their 16 rows of B loaded (and widened), then transposed
// in registers, then row_kernel_f32_avx512's multiply-adds in its order for each row of A
// (per element, over the K block's values in order from 0, then C = alpha * acc + C, or
// init + alpha * acc in the first block): the bits of packing those columns into a panel
// first, without the panel's trip through memory, and B's values loaded and transposed once
// for all the rows. Column j's values start at b + j * ld (in elements of the source's type);
// A[i, p] is a[i * a_row + p * a_step], C[i, j] c[i * ldc + j].
enum class RowsOf : uint8_t { kFloat32, kBFloat16, kFloat16 };
template <RowsOf kSrc>
using RowElem = std::conditional_t<kSrc == RowsOf::kFloat32, float, uint16_t>;

// 16 values of a column of B from p (fewer: zeros after `count`) as floats.
template <RowsOf kSrc>
__attribute__((target("avx512f,fma"))) inline __m512 load_column(const RowElem<kSrc>* p,
                                                                 int64_t count) {
  if constexpr (kSrc == RowsOf::kFloat32) {
    return _mm512_maskz_loadu_ps(first_lanes(count), p);
  } else {
    __m256i h;
    if (count >= 16) {
      h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    } else {
      alignas(32) uint16_t part[16] = {};
      std::copy_n(p, count, part);
      h = _mm256_load_si256(reinterpret_cast<const __m256i*>(part));
    }
    if constexpr (kSrc == RowsOf::kFloat16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <RowsOf kSrc, int R>
__attribute__((target("avx512f,fma"))) void transposed_b_rows_avx512(
    int64_t n, int64_t k, int64_t kc_block, float alpha, const float* a, int64_t a_row,
    int64_t a_step, const void* b, int64_t ld, float* c, int64_t ldc, const float* init) {
  const auto* src = static_cast<const RowElem<kSrc>*>(b);
  const __m512 al = _mm512_set1_ps(alpha);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t cols = std::min<int64_t>(16, n - j0);
    const __mmask16 along = first_lanes(cols);
    for (int64_t pc = 0; pc < k; pc += kc_block) {
      const int64_t kc = std::min(kc_block, k - pc);
      __m512 acc[R];
      for (int i = 0; i < R; ++i)
        acc[i] = _mm512_setzero_ps();
      for (int64_t p0 = pc; p0 < pc + kc; p0 += 16) {
        const int64_t pn = std::min<int64_t>(16, pc + kc - p0);
        __m512 r[16];
        for (int64_t i = 0; i < 16; ++i)
          r[i] = i < cols ? load_column<kSrc>(src + (j0 + i) * ld + p0, pn) : _mm512_setzero_ps();
        transpose16(r);
        for (int64_t q = 0; q < pn; ++q) {
          for (int i = 0; i < R; ++i) {
            const __m512 ai = _mm512_set1_ps(a[i * a_row + (p0 + q) * a_step]);
            acc[i] = _mm512_fmadd_ps(ai, r[q], acc[i]);
          }
        }
      }
      for (int i = 0; i < R; ++i) {
        float* cj = c + i * ldc + j0;
        const __m512 c0 =
            pc == 0 && init != nullptr ? _mm512_set1_ps(init[i]) : _mm512_maskz_loadu_ps(along, cj);
        _mm512_mask_storeu_ps(cj, along, _mm512_fmadd_ps(al, acc[i], c0));
      }
    }
  }
}

// transposed_b_rows_avx512 for m rows (1 to kTransposedBRows) of A, B's columns float32 or
// 16-bit floats at b (`ld` elements apart).
template <RowsOf kSrc>
void transposed_b_rows(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                       const float* a, int64_t a_row, int64_t a_step, const void* b, int64_t ld,
                       float* c, int64_t ldc, const float* init) {
  switch (m) {
    case 1:
      return transposed_b_rows_avx512<kSrc, 1>(n, k, kc_block, alpha, a, a_row, a_step, b, ld, c,
                                               ldc, init);
    case 2:
      return transposed_b_rows_avx512<kSrc, 2>(n, k, kc_block, alpha, a, a_row, a_step, b, ld, c,
                                               ldc, init);
    case 3:
      return transposed_b_rows_avx512<kSrc, 3>(n, k, kc_block, alpha, a, a_row, a_step, b, ld, c,
                                               ldc, init);
    default:
      static_assert(kTransposedBRows == 4, "a build for each row count");
      return transposed_b_rows_avx512<kSrc, 4>(n, k, kc_block, alpha, a, a_row, a_step, b, ld, c,
                                               ldc, init);
  }
}

}  // namespace

bool transposed_b_product(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                          MatrixRef<float> a, MatrixRef<float> b, float* c, int64_t ldc,
                          const float* first_init) {
  if (b.row_offsets != nullptr) return false;
  const DequantB* d = b.dequant;
  if (d == nullptr && b.row_stride == 1 && b.col_stride != 1) {
    transposed_b_rows<RowsOf::kFloat32>(m, n, k, kc_block, alpha, a.data, a.row_stride,
                                        a.col_stride, b.data, b.col_stride, c, ldc, first_init);
    return true;
  }
  if (d != nullptr && d->bits16 != nullptr && d->q_k == 1 && d->panel == 0 && !d->zero.present() &&
      !d->scale.present()) {
    const uint16_t* cols = d->bits16 + d->col0 * d->q_n;
    if (d->float16) {
      transposed_b_rows<RowsOf::kFloat16>(m, n, k, kc_block, alpha, a.data, a.row_stride,
                                          a.col_stride, cols, d->q_n, c, ldc, first_init);
    } else {
      transposed_b_rows<RowsOf::kBFloat16>(m, n, k, kc_block, alpha, a.data, a.row_stride,
                                           a.col_stride, cols, d->q_n, c, ldc, first_init);
    }
    return true;
  }
  return false;
}

}  // namespace etc::rt::kernels
