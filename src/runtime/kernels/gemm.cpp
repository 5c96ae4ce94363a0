// Packed, cache-blocked GEMM with register-blocked micro-kernels (see gemm.h).
#include "runtime/kernels/gemm.h"

#include "runtime/kernels/gemm_dequant.h"
#include "runtime/kernels/gemm_transposed.h"
#include "runtime/kernels/gemm_wide16.h"
#include "runtime/kernels/parallel.h"
#include "runtime/kernels/simd_transpose.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace etc::rt::kernels {
namespace {

// Blocking: an MCxKC block of A stays in L2, a KCxNR sliver of B in L1 while the
// micro-kernel sweeps it, and the KCxNC panel of B in L3. MC and NC are multiples of every
// MR and NR used below.
constexpr int64_t kMC = 144;
constexpr int64_t kKC = kGemmKBlock;
constexpr int64_t kNC = 4064;

// The rows a tile starts from when a GEMM overwrites C without row values (at least MR).
constexpr float kZeroRows[16] = {};

// Computes one MRxNR tile: acc = A_panel @ B_panel over kc, then C[i, j] += alpha * acc for
// the valid mr x nr corner (edge tiles are zero-padded in the packed panels).
// With `init` (the tile's MR row values), C is not read: C[i, j] = init[i] + alpha * acc
// (fused where the accumulation is), the first K block of a GEMM that overwrites C.
template <typename T>
using MicroKernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, T alpha,
                             int64_t mr, int64_t nr, const T* init);

template <typename T, int MR, int NR>
__attribute__((always_inline)) inline void micro_kernel_body(int64_t kc, const T* __restrict a,
                                                             const T* __restrict b, T* __restrict c,
                                                             int64_t ldc, T alpha, int64_t mr,
                                                             int64_t nr, const T* init) {
  // Integers accumulate in uint64, where overflow wraps (as ATen's integer products do)
  // instead of being undefined; the result converts back modulo 2^bits.
  using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, T>;
  Acc acc[MR][NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    for (int i = 0; i < MR; ++i) {
      const auto ai = static_cast<Acc>(a[i]);
      for (int j = 0; j < NR; ++j)
        acc[i][j] += ai * static_cast<Acc>(b[j]);
    }
    a += MR;
    b += NR;
  }
  const auto al = static_cast<Acc>(alpha);
  if (init != nullptr) {
    for (int64_t i = 0; i < mr; ++i) {
      for (int64_t j = 0; j < nr; ++j)
        c[i * ldc + j] = static_cast<T>(static_cast<Acc>(init[i]) + al * acc[i][j]);
    }
  } else if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j)
        c[i * ldc + j] = static_cast<T>(static_cast<Acc>(c[i * ldc + j]) + al * acc[i][j]);
    }
  } else {
    for (int64_t i = 0; i < mr; ++i) {
      for (int64_t j = 0; j < nr; ++j)
        c[i * ldc + j] = static_cast<T>(static_cast<Acc>(c[i * ldc + j]) + al * acc[i][j]);
    }
  }
}

// 8x32 floats with AVX-512: 16 zmm accumulators, 2 for the B row, 1 for the broadcast A
// value. Each element of C is accumulated in the same order and with the same fused
// multiply-adds as the AVX2 6x16 kernel, so the two give the same bits.
// R < 8: the first R rows of the panel only (C's last rows, mr == R): the full kernel would
// multiply the zero rows too (vit_b_32's 50 rows are 7 tiles of 8 rows, 56 rows' work).
template <int R>
__attribute__((target("avx512f,fma"))) void micro_kernel_f32_avx512(int64_t kc, const float* a,
                                                                    const float* b, float* c,
                                                                    int64_t ldc, float alpha,
                                                                    int64_t mr, int64_t nr,
                                                                    const float* init) {
  __m512 acc[R][2];
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm512_setzero_ps();
    acc[i][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
    }
    a += 8;
    b += 32;
  }
  const __m512 al = _mm512_set1_ps(alpha);
  if (mr == R && nr == 32) {
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      if (init != nullptr) {
        const __m512 base = _mm512_set1_ps(init[i]);
        _mm512_storeu_ps(row, _mm512_fmadd_ps(al, acc[i][0], base));
        _mm512_storeu_ps(row + 16, _mm512_fmadd_ps(al, acc[i][1], base));
      } else {
        _mm512_storeu_ps(row, _mm512_fmadd_ps(al, acc[i][0], _mm512_loadu_ps(row)));
        _mm512_storeu_ps(row + 16, _mm512_fmadd_ps(al, acc[i][1], _mm512_loadu_ps(row + 16)));
      }
    }
    return;
  }
  // An edge tile: the same fused update on the valid columns only (masked lanes are neither
  // read nor written).
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32  ? __mmask16(0xFFFF)
                       : nr > 16 ? __mmask16((1u << (nr - 16)) - 1)
                                 : 0;
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    if (i >= mr) break;
    float* row = c + i * ldc;
    const __m512 c0 = init != nullptr ? _mm512_set1_ps(init[i]) : _mm512_maskz_loadu_ps(m0, row);
    const __m512 c1 =
        init != nullptr ? _mm512_set1_ps(init[i]) : _mm512_maskz_loadu_ps(m1, row + 16);
    _mm512_mask_storeu_ps(row, m0, _mm512_fmadd_ps(al, acc[i][0], c0));
    _mm512_mask_storeu_ps(row + 16, m1, _mm512_fmadd_ps(al, acc[i][1], c1));
  }
}

template <typename T, int MR, int NR>
void micro_kernel_portable(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, T alpha,
                           int64_t mr, int64_t nr, const T* init) {
  micro_kernel_body<T, MR, NR>(kc, a, b, c, ldc, alpha, mr, nr, init);
}

__attribute__((target("avx2,fma"))) void micro_kernel_f64_avx2(int64_t kc, const double* a,
                                                               const double* b, double* c,
                                                               int64_t ldc, double alpha,
                                                               int64_t mr, int64_t nr,
                                                               const double* init) {
  micro_kernel_body<double, 4, 8>(kc, a, b, c, ldc, alpha, mr, nr, init);
}

// 6x16 floats: 12 ymm accumulators, 2 for the B row, 1 for the broadcast A value.
__attribute__((target("avx2,fma"))) void micro_kernel_f32_avx2(int64_t kc, const float* a,
                                                               const float* b, float* c,
                                                               int64_t ldc, float alpha, int64_t mr,
                                                               int64_t nr, const float* init) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
    __m256 av = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(av, b0, c00);
    c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(av, b0, c10);
    c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(av, b0, c20);
    c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(av, b0, c30);
    c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a + 4);
    c40 = _mm256_fmadd_ps(av, b0, c40);
    c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a + 5);
    c50 = _mm256_fmadd_ps(av, b0, c50);
    c51 = _mm256_fmadd_ps(av, b1, c51);
    a += 6;
    b += 16;
  }
  const __m256 al = _mm256_set1_ps(alpha);
  if (mr == 6 && nr == 16) {
    // With init (a first K block that overwrites C: a convolution's bias), the row's value
    // instead of C's.
#define ETC_UPDATE_ROW(i, lo, hi)                                                              \
  do {                                                                                         \
    float* row = c + (i)*ldc;                                                                  \
    const __m256 base0 = init != nullptr ? _mm256_set1_ps(init[i]) : _mm256_loadu_ps(row);     \
    const __m256 base1 = init != nullptr ? _mm256_set1_ps(init[i]) : _mm256_loadu_ps(row + 8); \
    _mm256_storeu_ps(row, _mm256_fmadd_ps(al, lo, base0));                                     \
    _mm256_storeu_ps(row + 8, _mm256_fmadd_ps(al, hi, base1));                                 \
  } while (false)
    ETC_UPDATE_ROW(0, c00, c01);
    ETC_UPDATE_ROW(1, c10, c11);
    ETC_UPDATE_ROW(2, c20, c21);
    ETC_UPDATE_ROW(3, c30, c31);
    ETC_UPDATE_ROW(4, c40, c41);
    ETC_UPDATE_ROW(5, c50, c51);
#undef ETC_UPDATE_ROW
    return;
  }
  alignas(32) float t[6][16];
  _mm256_store_ps(t[0], c00);
  _mm256_store_ps(t[0] + 8, c01);
  _mm256_store_ps(t[1], c10);
  _mm256_store_ps(t[1] + 8, c11);
  _mm256_store_ps(t[2], c20);
  _mm256_store_ps(t[2] + 8, c21);
  _mm256_store_ps(t[3], c30);
  _mm256_store_ps(t[3] + 8, c31);
  _mm256_store_ps(t[4], c40);
  _mm256_store_ps(t[4] + 8, c41);
  _mm256_store_ps(t[5], c50);
  _mm256_store_ps(t[5] + 8, c51);
  // An edge tile (or a first K block over C): the full tile's fused update, element by
  // element.
  for (int64_t i = 0; i < mr; ++i) {
    for (int64_t j = 0; j < nr; ++j)
      c[i * ldc + j] = std::fma(alpha, t[i][j], init != nullptr ? init[i] : c[i * ldc + j]);
  }
}

// The first R < 6 rows of an AVX2 panel (C's last rows, mr == R), in the 6x16 kernel's
// order and fused multiply-adds (the same bits) without its work on the zero rows: vit_b_32's
// 50 rows are 9 tiles of 6 (54 rows' work), convnext's last stage's 49 too.
template <int R>
__attribute__((target("avx2,fma"))) void micro_kernel_f32_avx2_rows(int64_t kc, const float* a,
                                                                    const float* b, float* c,
                                                                    int64_t ldc, float alpha,
                                                                    int64_t mr, int64_t nr,
                                                                    const float* init) {
  __m256 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    acc[i][0] = _mm256_setzero_ps();
    acc[i][1] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
      acc[i][0] = _mm256_fmadd_ps(av, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(av, b1, acc[i][1]);
    }
    a += 6;
    b += 16;
  }
  const __m256 al = _mm256_set1_ps(alpha);
  if (mr == R && nr == 16) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      float* row = c + i * ldc;
      const __m256 base0 = init != nullptr ? _mm256_set1_ps(init[i]) : _mm256_loadu_ps(row);
      const __m256 base1 = init != nullptr ? _mm256_set1_ps(init[i]) : _mm256_loadu_ps(row + 8);
      _mm256_storeu_ps(row, _mm256_fmadd_ps(al, acc[i][0], base0));
      _mm256_storeu_ps(row + 8, _mm256_fmadd_ps(al, acc[i][1], base1));
    }
    return;
  }
  alignas(32) float t[R][16];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm256_store_ps(t[i], acc[i][0]);
    _mm256_store_ps(t[i] + 8, acc[i][1]);
  }
  for (int64_t i = 0; i < std::min<int64_t>(mr, R); ++i) {
    for (int64_t j = 0; j < nr; ++j)
      c[i * ldc + j] = std::fma(alpha, t[i][j], init != nullptr ? init[i] : c[i * ldc + j]);
  }
}

// Each ISA's kernels for tiles of fewer rows than its MR, by row count (entry 0 unused).
constexpr MicroKernel<float> kAvx512FewerRows[8] = {nullptr,
                                                    micro_kernel_f32_avx512<1>,
                                                    micro_kernel_f32_avx512<2>,
                                                    micro_kernel_f32_avx512<3>,
                                                    micro_kernel_f32_avx512<4>,
                                                    micro_kernel_f32_avx512<5>,
                                                    micro_kernel_f32_avx512<6>,
                                                    micro_kernel_f32_avx512<7>};
constexpr MicroKernel<float> kAvx2FewerRows[6] = {nullptr,
                                                  micro_kernel_f32_avx2_rows<1>,
                                                  micro_kernel_f32_avx2_rows<2>,
                                                  micro_kernel_f32_avx2_rows<3>,
                                                  micro_kernel_f32_avx2_rows<4>,
                                                  micro_kernel_f32_avx2_rows<5>};

// A few rows of A (R <= 4) against P consecutive packed panels of B (one KC block): the
// GEMV-shaped products of a batch-1 linear layer, where the 8-row micro-kernel would spend
// most of its work on zero rows. Each C element is summed as the micro-kernels sum it (from
// zero over the block's k in order, fused multiply-adds, then C += alpha * sum fused), so
// the bits are theirs.
template <int R, int P>
__attribute__((target("avx512f,fma"))) void rows_avx512(int64_t kc, const float* a, int64_t a_rs,
                                                        int64_t a_cs, const float* b, float* c,
                                                        int64_t ldc, float alpha, int64_t cols) {
  __m512 acc[R][P][2];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q)
      acc[r][q][0] = acc[r][q][1] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m512 bv[P][2];
    for (int q = 0; q < P; ++q) {
      bv[q][0] = _mm512_loadu_ps(b + (q * kc + p) * 32);
      bv[q][1] = _mm512_loadu_ps(b + (q * kc + p) * 32 + 16);
    }
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * a_rs + p * a_cs]);
      for (int q = 0; q < P; ++q) {
        acc[r][q][0] = _mm512_fmadd_ps(av, bv[q][0], acc[r][q][0]);
        acc[r][q][1] = _mm512_fmadd_ps(av, bv[q][1], acc[r][q][1]);
      }
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
  for (int q = 0; q < P; ++q) {
    for (int h = 0; h < 2; ++h) {
      const int64_t col = q * 32 + h * 16;
      if (col >= cols) continue;
      const __mmask16 m =
          cols - col >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (cols - col)) - 1);
      for (int r = 0; r < R; ++r) {
        float* dst = c + r * ldc + col;
        _mm512_mask_storeu_ps(dst, m,
                              _mm512_fmadd_ps(al, acc[r][q][h], _mm512_maskz_loadu_ps(m, dst)));
      }
    }
  }
}

template <int R, int P>
__attribute__((target("avx2,fma"))) void rows_avx2(int64_t kc, const float* a, int64_t a_rs,
                                                   int64_t a_cs, const float* b, float* c,
                                                   int64_t ldc, float alpha, int64_t cols) {
  __m256 acc[R][P][2];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < P; ++q)
      acc[r][q][0] = acc[r][q][1] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < kc; ++p) {
    __m256 bv[P][2];
    for (int q = 0; q < P; ++q) {
      bv[q][0] = _mm256_loadu_ps(b + (q * kc + p) * 16);
      bv[q][1] = _mm256_loadu_ps(b + (q * kc + p) * 16 + 8);
    }
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * a_rs + p * a_cs);
      for (int q = 0; q < P; ++q) {
        acc[r][q][0] = _mm256_fmadd_ps(av, bv[q][0], acc[r][q][0]);
        acc[r][q][1] = _mm256_fmadd_ps(av, bv[q][1], acc[r][q][1]);
      }
    }
  }
  const __m256 al = _mm256_set1_ps(alpha);
  for (int q = 0; q < P; ++q) {
    for (int h = 0; h < 2; ++h) {
      const int64_t col = q * 16 + h * 8;
      if (col >= cols) continue;
      for (int r = 0; r < R; ++r) {
        float* dst = c + r * ldc + col;
        if (cols - col >= 8) {
          _mm256_storeu_ps(dst, _mm256_fmadd_ps(al, acc[r][q][h], _mm256_loadu_ps(dst)));
        } else {
          alignas(32) float t[8];
          _mm256_store_ps(t, acc[r][q][h]);
          for (int64_t j = 0; j < cols - col; ++j)
            dst[j] = std::fma(alpha, t[j], dst[j]);
        }
      }
    }
  }
}

// One row of C (m = 1) with the arithmetic the tile kernels give their rows - per element,
// fused multiply-adds over the kc values in order from 0, then C = alpha * acc + C (or init
// + alpha * acc) - without the MR - 1 rows of zeros they would compute along. A[0, p] is
// a[p * a_step]; row p of B starts at b + p * b_step (a packed panel's: NR; B's own rows: its
// row stride), its first nr <= NR columns valid: lanes past them are neither read nor
// written.
__attribute__((target("avx512f,fma"))) void row_kernel_f32_avx512(int64_t kc, const float* a,
                                                                  int64_t a_step, const float* b,
                                                                  int64_t b_step, float* c,
                                                                  float alpha, int64_t nr,
                                                                  const float* init) {
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32  ? __mmask16(0xFFFF)
                       : nr > 16 ? __mmask16((1u << (nr - 16)) - 1)
                                 : 0;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (int64_t p = 0; p < kc; ++p, b += b_step) {
    const __m512 av = _mm512_set1_ps(a[p * a_step]);
    acc0 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m0, b), acc0);
    acc1 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m1, b + 16), acc1);
  }
  const __m512 al = _mm512_set1_ps(alpha);
  const __m512 c0 = init != nullptr ? _mm512_set1_ps(*init) : _mm512_maskz_loadu_ps(m0, c);
  const __m512 c1 = init != nullptr ? _mm512_set1_ps(*init) : _mm512_maskz_loadu_ps(m1, c + 16);
  _mm512_mask_storeu_ps(c, m0, _mm512_fmadd_ps(al, acc0, c0));
  _mm512_mask_storeu_ps(c + 16, m1, _mm512_fmadd_ps(al, acc1, c1));
}

__attribute__((target("avx2,fma"))) void row_kernel_f32_avx2(int64_t kc, const float* a,
                                                             int64_t a_step, const float* b,
                                                             int64_t b_step, float* c, float alpha,
                                                             int64_t nr, const float* init) {
  const __m256i m0 = first_lanes8(nr), m1 = first_lanes8(nr - 8);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p, b += b_step) {
    const __m256 av = _mm256_broadcast_ss(a + p * a_step);
    acc0 = _mm256_fmadd_ps(av, _mm256_maskload_ps(b, m0), acc0);
    acc1 = _mm256_fmadd_ps(av, _mm256_maskload_ps(b + 8, m1), acc1);
  }
  const __m256 al = _mm256_set1_ps(alpha);
  const __m256 c0 = init != nullptr ? _mm256_set1_ps(*init) : _mm256_maskload_ps(c, m0);
  const __m256 c1 = init != nullptr ? _mm256_set1_ps(*init) : _mm256_maskload_ps(c + 8, m1);
  _mm256_maskstore_ps(c, m0, _mm256_fmadd_ps(al, acc0, c0));
  _mm256_maskstore_ps(c + 8, m1, _mm256_fmadd_ps(al, acc1, c1));
}

template <typename T>
struct GemmConfig {
  int64_t mr = 0;
  int64_t nr = 0;
  MicroKernel<T> kernel = nullptr;
  // Kernels for tiles of r < mr rows at fewer_rows[r] (same bits); null: `kernel` for all.
  const MicroKernel<T>* fewer_rows = nullptr;
  MicroKernel<T> for_rows(int64_t rows) const {
    return rows < mr && fewer_rows != nullptr ? fewer_rows[rows] : kernel;
  }
};

// The ISA cap: $ETC_MAX_ISA when the first kernel asks (an unknown value is no cap: the CLI
// refuses it before anything runs), then whatever set_gemm_isa sets.
std::atomic<int>& isa_cap() {
  static std::atomic<int> cap{static_cast<int>(env_max_isa().value_or(GemmIsa::kAuto))};
  return cap;
}

bool cpu_has_avx2_fma() {
  static const bool kHas = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kHas;
}

// Every AVX-512 build is target("avx512f,fma"), which this check allows: GCC ends a 16-wide
// loop with 8-wide vectors, and those fuse multiply-adds only with FMA's own instructions
// enabled, so without it a tail rounded unlike the body and the AVX2 build (tested).
bool cpu_has_avx512f() {
  static const bool kHas = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  return kHas;
}

bool use_avx2() {
  const int isa = isa_cap().load(std::memory_order_relaxed);
  return (isa == static_cast<int>(GemmIsa::kAuto) || isa == static_cast<int>(GemmIsa::kAvx2)) &&
         cpu_has_avx2_fma();
}

// The float micro-kernel the next GEMM uses: AVX-512 where the CPU has it (forced down by
// set_gemm_isa), else AVX2/FMA, else portable.
FloatKernel float_kernel() {
  const int isa = isa_cap().load(std::memory_order_relaxed);
  if (isa == static_cast<int>(GemmIsa::kAuto) && cpu_has_avx512f()) return FloatKernel::kAvx512;
  return use_avx2() ? FloatKernel::kAvx2 : FloatKernel::kPortable;
}

GemmConfig<float> float_config(FloatKernel kind) {
  switch (kind) {
    case FloatKernel::kAvx512:
      return {8, 32, micro_kernel_f32_avx512<8>, kAvx512FewerRows};
    case FloatKernel::kAvx2:
      return {6, 16, micro_kernel_f32_avx2, kAvx2FewerRows};
    case FloatKernel::kPortable:
      break;
  }
  return {4, 8, micro_kernel_portable<float, 4, 8>};
}
GemmConfig<float> config(float) {
  return float_config(float_kernel());
}
GemmConfig<double> config(double) {
  if (use_avx2()) return {4, 8, micro_kernel_f64_avx2};
  return {4, 4, micro_kernel_portable<double, 4, 4>};
}
GemmConfig<int64_t> config(int64_t) {
  return {4, 4, micro_kernel_portable<int64_t, 4, 4>};
}

// Per-thread packing buffers, 64-byte aligned, grown on demand and reused across calls
// (a model runs many small GEMMs; allocating per call would show in the profile).
template <typename T>
T* scratch(int slot, int64_t count) {
  struct Block {
    void* p = nullptr;
    size_t bytes = 0;
    ~Block() { std::free(p); }
  };
  thread_local Block blocks[2];
  Block& b = blocks[slot];
  size_t want = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
  if (b.bytes < want) {
    std::free(b.p);
    b.p = std::aligned_alloc(64, want);
    b.bytes = b.p != nullptr ? want : 0;
  }
  return static_cast<T*>(b.p);
}

// One 8-row panel of the AVX-512 micro-kernel from `rows` (<= 8) rows of contiguous floats
// `ld` apart: 8 x 8 blocks transposed in registers (the scalar loop stored one float at a
// time, a twelfth of a Whisper encoder's time), rows past the last zero.
__attribute__((target("avx2"))) void pack_a_panel8_avx2(const float* src, int64_t ld, int64_t rows,
                                                        int64_t kc, float* __restrict dst) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    __m256 r[8];
    for (int64_t i = 0; i < 8; ++i)
      r[i] = i < rows ? _mm256_loadu_ps(src + i * ld + p) : _mm256_setzero_ps();
    transpose8(r);
    for (int64_t j = 0; j < 8; ++j)
      _mm256_storeu_ps(dst + (p + j) * 8, r[j]);
  }
  for (; p < kc; ++p) {
    for (int64_t i = 0; i < 8; ++i)
      dst[p * 8 + i] = i < rows ? src[i * ld + p] : 0.0f;
  }
}

// Packs the mc x kc block of A at (i0, p0) as consecutive MR-row panels, each stored k-major
// (MR values per k), zero-padding the last panel.
template <typename T>
void pack_a(MatrixRef<T> a, int64_t i0, int64_t p0, int64_t mc, int64_t kc, int64_t mr,
            T* __restrict dst) {
  if (a.col_offsets != nullptr) {  // gathered: A[i, k] = data[row_offsets[i] + col_offsets[k]]
    for (int64_t ir = 0; ir < mc; ir += mr) {
      const int64_t rows = std::min(mr, mc - ir);
      const int64_t* ro = a.row_offsets + i0 + ir;
      for (int64_t p = 0; p < kc; ++p) {
        const T* base = a.data + a.col_offsets[p0 + p];
        T* d = dst + p * mr;
        if (mr == 8 && rows == 8) {  // the AVX-512 panels: a compile-time count
          for (int i = 0; i < 8; ++i)
            d[i] = base[ro[i]];
          continue;
        }
        for (int64_t i = 0; i < rows; ++i)
          d[i] = base[ro[i]];
        for (int64_t i = rows; i < mr; ++i)
          d[i] = T(0);
      }
      dst += mr * kc;
    }
    return;
  }
  for (int64_t ir = 0; ir < mc; ir += mr) {
    const int64_t rows = std::min(mr, mc - ir);
    const T* src = a.data + (i0 + ir) * a.row_stride + p0 * a.col_stride;
    if constexpr (std::is_same_v<T, float>) {
      // Row-major A on the AVX-512 panels (MR = 8 only there, on a CPU with AVX2).
      if (mr == 8 && a.col_stride == 1) {
        pack_a_panel8_avx2(src, a.row_stride, rows, kc, dst);
        dst += mr * kc;
        continue;
      }
    }
    if (a.row_stride == 1 && rows == mr) {  // column-major A: MR contiguous values per k
      for (int64_t p = 0; p < kc; ++p)
        std::memcpy(dst + p * mr, src + p * a.col_stride, mr * sizeof(T));
    } else {
      for (int64_t i = 0; i < rows; ++i) {
        const T* row = src + i * a.row_stride;
        for (int64_t p = 0; p < kc; ++p)
          dst[p * mr + i] = row[p * a.col_stride];
      }
      for (int64_t i = rows; i < mr; ++i) {
        for (int64_t p = 0; p < kc; ++p)
          dst[p * mr + i] = T(0);
      }
    }
    dst += mr * kc;
  }
}

// One packed B panel of the vector micro-kernels from rows of contiguous floats: row p is
// src + offsets[p] (with offsets) or src + p * stride, its first `cols` values valid, the
// rest of the panel's NR zero. Vector loads and stores of a compile-time width: a per-row
// memcpy call (what GCC makes of a copy of run-time length) cost a fifth of a 64-channel
// convolution's GEMM.
__attribute__((target("avx512f,fma"))) void pack_panel_32_avx512(const float* src, int64_t stride,
                                                                 const int64_t* offsets, int64_t kc,
                                                                 int64_t cols,
                                                                 float* __restrict dst) {
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = cols >= 32  ? __mmask16(0xFFFF)
                       : cols > 16 ? __mmask16((1u << (cols - 16)) - 1)
                                   : 0;
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = offsets != nullptr ? src + offsets[p] : src + p * stride;
    _mm512_storeu_ps(dst + p * 32, _mm512_maskz_loadu_ps(m0, row));
    _mm512_storeu_ps(dst + p * 32 + 16, _mm512_maskz_loadu_ps(m1, row + 16));
  }
}

__attribute__((target("avx2,fma"))) void pack_panel_16_avx2(const float* src, int64_t stride,
                                                            const int64_t* offsets, int64_t kc,
                                                            int64_t cols, float* __restrict dst) {
  alignas(32) static constexpr int32_t kLanes[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                     8, 9, 10, 11, 12, 13, 14, 15};
  const __m256i n = _mm256_set1_epi32(static_cast<int32_t>(cols));
  const __m256i m0 = _mm256_cmpgt_epi32(n, _mm256_load_si256((const __m256i*)kLanes));
  const __m256i m1 = _mm256_cmpgt_epi32(n, _mm256_load_si256((const __m256i*)(kLanes + 8)));
  for (int64_t p = 0; p < kc; ++p) {
    const float* row = offsets != nullptr ? src + offsets[p] : src + p * stride;
    if (cols >= 16) {
      _mm256_storeu_ps(dst + p * 16, _mm256_loadu_ps(row));
      _mm256_storeu_ps(dst + p * 16 + 8, _mm256_loadu_ps(row + 8));
    } else {
      _mm256_storeu_ps(dst + p * 16, _mm256_maskload_ps(row, m0));
      _mm256_storeu_ps(dst + p * 16 + 8, _mm256_maskload_ps(row + 8, m1));
    }
  }
}

// Packs the kc x nc block of B at (p0, j0) as consecutive NR-column panels, each stored
// k-major (NR values per k), zero-padding the last panel.
template <typename T>
void pack_b(MatrixRef<T> b, int64_t p0, int64_t j0, int64_t kc, int64_t nc, int64_t nr,
            T* __restrict dst) {
  if constexpr (std::is_same_v<T, float>) {
    if (b.dequant != nullptr) {
      pack_dequant(float_kernel(), *b.dequant, p0, j0, kc, nc, nr, dst);
      return;
    }
    // Contiguous columns into the AVX-512 or AVX2 panels (nr says which micro-kernel, and
    // so that the CPU has its instructions).
    if (b.col_stride == 1 && (nr == 32 || nr == 16)) {
      const int64_t* offsets = b.row_offsets != nullptr ? b.row_offsets + p0 : nullptr;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const int64_t cols = std::min(nr, nc - jr);
        const float* src =
            offsets != nullptr ? b.data + j0 + jr : b.data + p0 * b.row_stride + j0 + jr;
        if (nr == 32) {
          pack_panel_32_avx512(src, b.row_stride, offsets, kc, cols, dst);
        } else {
          pack_panel_16_avx2(src, b.row_stride, offsets, kc, cols, dst);
        }
        dst += nr * kc;
      }
      return;
    }
    // B^T row-major (B's columns contiguous: a product by K^T read from K itself) into the
    // panels by 16 x 16 transposes through registers: the same values in the same places.
    if (b.row_stride == 1 && b.row_offsets == nullptr && (nr == 32 || nr == 16)) {
      const FloatKernel isa = nr == 32 ? FloatKernel::kAvx512 : FloatKernel::kAvx2;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const int64_t cols = std::min(nr, nc - jr);
        const float* src = b.data + p0 + (j0 + jr) * b.col_stride;
        for (int64_t j = 0; j < cols; j += 16) {
          for (int64_t p = 0; p < kc; p += 16) {
            transpose_tile(isa, src + j * b.col_stride + p, b.col_stride,
                           std::min<int64_t>(16, cols - j), std::min<int64_t>(16, kc - p),
                           dst + p * nr + j, nr);
          }
        }
        for (int64_t p = 0; p < kc; ++p)
          std::fill(dst + p * nr + cols, dst + p * nr + nr, 0.0f);
        dst += nr * kc;
      }
      return;
    }
  }
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t cols = std::min(nr, nc - jr);
    if (b.row_offsets != nullptr) {  // rows anywhere, each NR contiguous values per k
      const T* base = b.data + (j0 + jr) * b.col_stride;
      for (int64_t p = 0; p < kc; ++p) {
        const T* row = base + b.row_offsets[p0 + p];
        T* d = dst + p * nr;
        if (b.col_stride == 1) {
          std::copy_n(row, cols, d);
        } else {
          for (int64_t j = 0; j < cols; ++j)
            d[j] = row[j * b.col_stride];
        }
        std::fill(d + cols, d + nr, T(0));
      }
      dst += nr * kc;
      continue;
    }
    const T* src = b.data + p0 * b.row_stride + (j0 + jr) * b.col_stride;
    if (b.col_stride == 1 && cols == nr) {  // row-major B: NR contiguous values per k
      // A compile-time size lets the copy become a few vector moves.
      if (nr == 8) {
        for (int64_t p = 0; p < kc; ++p)
          std::memcpy(dst + p * 8, src + p * b.row_stride, 8 * sizeof(T));
      } else {
        for (int64_t p = 0; p < kc; ++p)
          std::memcpy(dst + p * nr, src + p * b.row_stride, nr * sizeof(T));
      }
    } else {
      for (int64_t j = 0; j < cols; ++j) {
        const T* col = src + j * b.col_stride;
        for (int64_t p = 0; p < kc; ++p)
          dst[p * nr + j] = col[p * b.row_stride];
      }
      for (int64_t j = cols; j < nr; ++j) {
        for (int64_t p = 0; p < kc; ++p)
          dst[p * nr + j] = T(0);
      }
    }
    dst += nr * kc;
  }
}

// gemm_blocked for one row of A (a decode step's matrix-vector product): the same K and N
// blocks and the same per-element arithmetic as the tile kernels (row_kernel_f32_*), so the
// same bits, without packing A and without the tile's other rows. B is read in place where
// its rows are contiguous, else packed (or dequantized) a block at a time as gemm_blocked
// packs it. nr: the panel width of the ISA's tile kernel (32: AVX-512, 16: AVX2).
void gemm_one_row(int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
                  float* c, const PackedB* packed_b_all, int64_t col0, const GemmInit* init,
                  int64_t row0, int64_t nr) {
  const auto row = nr == 32 ? row_kernel_f32_avx512 : row_kernel_f32_avx2;
  const bool direct = packed_b_all == nullptr && b.dequant == nullptr && b.row_offsets == nullptr &&
                      b.col_stride == 1;
  float* scratch_b =
      packed_b_all != nullptr || direct
          ? nullptr
          : scratch<float>(1, std::min(kNC, (n + nr - 1) / nr * nr) * std::min(kKC, k));
  if (b.dequant != nullptr) {
    // A quantized B a panel at a time, through every K block before the next panel: the
    // panel's weight rows are read in order (a [N, K] weight's rows are a page apart: K
    // blocks outer would revisit each row after all the others). Each element of C still takes
    // its K blocks in order: the same bits.
    // int8 and 4-bit weights on AVX-512 skip the panel: dequantized in registers (the same
    // bits).
    const bool in_registers =
        nr == 32 && row_in_registers_applies(float_kernel(), *b.dequant, k, kKC);
    for (int64_t j = 0; j < n; j += nr) {
      const int64_t cols = std::min(nr, n - j);
      for (int64_t pc = 0; pc < k; pc += kKC) {
        const int64_t kc = std::min(kKC, k - pc);
        const float* tile_init = nullptr;
        if (init != nullptr && pc == 0)
          tile_init = init->rows != nullptr ? init->rows + row0 : kZeroRows;
        if (in_registers) {
          row_in_registers_avx512(*b.dequant, pc, kc, j, cols, a.data + pc * a.col_stride,
                                  a.col_stride, c + j, alpha, tile_init);
          continue;
        }
        pack_dequant(float_kernel(), *b.dequant, pc, j, kc, cols, nr, scratch_b);
        row(kc, a.data + pc * a.col_stride, a.col_stride, scratch_b, nr, c + j, alpha, cols,
            tile_init);
      }
    }
    return;
  }
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const float* panels = nullptr;
      if (packed_b_all != nullptr) {
        panels = packed_b_all->panels(pc, col0 + jc);
      } else if (!direct) {
        pack_b(b, pc, jc, kc, nc, nr, scratch_b);
        panels = scratch_b;
      }
      const float* tile_init = nullptr;
      if (init != nullptr && pc == 0)
        tile_init = init->rows != nullptr ? init->rows + row0 : kZeroRows;
      for (int64_t jr = 0; jr < nc; jr += nr) {
        const float* bp =
            panels != nullptr ? panels + jr * kc : b.data + pc * b.row_stride + jc + jr;
        row(kc, a.data + pc * a.col_stride, a.col_stride, bp, panels != nullptr ? nr : b.row_stride,
            c + jc + jr, alpha, std::min(nr, nc - jr), tile_init);
      }
    }
  }
}

// C[i, j] = cols[j] for the rows x n block of C at c (pitch ldc): a GemmInit's column values
// where a path takes row values only (and then accumulates).
void fill_from_cols(const float* cols, int64_t rows, int64_t n, float* c, int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(c + i * ldc, cols, static_cast<size_t>(n) * sizeof(float));
}

// The row values the first K block of a path that takes row values only starts C from
// (rows counted from row0; null: accumulate). With column values, the m x n block of C at c
// is filled with them first and accumulated into.
const float* first_rows(const GemmInit* init, int64_t row0, int64_t m, int64_t n, float* c,
                        int64_t ldc) {
  if (init == nullptr) return nullptr;
  if (init->cols != nullptr) {
    fill_from_cols(init->cols, m, n, c, ldc);
    return nullptr;
  }
  return init->rows != nullptr ? init->rows + row0 : kZeroRows;
}

// With `packed` (float only), A's blocks come from it instead of being packed here, and
// this call's rows start at row `row0` of the packed matrix (a multiple of kMC).
// With `packed_b`, B's panels come from it, this call's columns starting at its column
// `col0` (a multiple of the panel width).
// With `init` (float only), C is not read: the first K block writes C = init.rows[row] (0
// without rows) + alpha * sum, rows counted from row0; or C = init.cols[col] + alpha * sum,
// columns counted from c.
template <typename T>
void gemm_blocked(int64_t m, int64_t n, int64_t k, T alpha, MatrixRef<T> a, MatrixRef<T> b, T* c,
                  int64_t ldc, const PackedA* packed = nullptr, int64_t row0 = 0,
                  const PackedB* packed_b_all = nullptr, int64_t col0 = 0,
                  const GemmInit* init = nullptr) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  GemmConfig<T> cfg = config(T{});
  if constexpr (std::is_same_v<T, float>) {
    if (packed != nullptr) cfg = float_config(packed->kernel());
    if (packed_b_all != nullptr) cfg = float_config(packed_b_all->kernel());
    const bool plain_rows = packed == nullptr && a.col_offsets == nullptr &&
                            a.row_offsets == nullptr &&
                            (init == nullptr || init->tile_done == nullptr);
    if (plain_rows && cfg.nr != 8 && b.dequant != nullptr &&
        (b.dequant->bits16 != nullptr || b.dequant->f32 != nullptr) && b.dequant->q_n == 1 &&
        (m == 1 || (m <= kWide16Rows && cfg.nr == 32))) {
      // A decode step or a short prompt over a 16-bit [K, N] weight (or one in panels, or a
      // float32 one in panels), read in place.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      wide16_rows(cfg.nr == 32, m, n, k, kKC, alpha, a, *b.dequant, c, ldc, rows_init);
      return;
    }
    if (m > 1 && m <= kRowsInRegisters && plain_rows && cfg.nr == 32 && b.dequant != nullptr &&
        rows_in_registers_applies(float_kernel(), *b.dequant, k, kKC)) {
      // A short prompt over a 4-bit weight: each value dequantized once for all its rows.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      for (int64_t j = 0; j < n; j += 32) {
        for (int64_t pc = 0; pc < k; pc += kKC) {
          rows_in_registers_avx512(*b.dequant, pc, std::min(kKC, k - pc), j,
                                   std::min<int64_t>(32, n - j), m, a.data + pc * a.col_stride,
                                   a.row_stride, a.col_stride, c + j, ldc, alpha,
                                   pc == 0 ? rows_init : nullptr);
        }
      }
      return;
    }
    if (m <= kWide16Rows && plain_rows && cfg.nr == 32 && b.dequant != nullptr &&
        int8_row_applies(*b.dequant)) {
      // A decode step or a short prompt over an int8 [K, N] weight, read in place.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      int8_rows_avx512(m, n, k, kKC, alpha, a, *b.dequant, c, ldc, rows_init);
      return;
    }
    if (m <= kTransposedBRows && plain_rows && cfg.nr == 32 && packed_b_all == nullptr) {
      // B stored transposed (K^T read from K): one row, or the query heads that share a
      // cache head, B's values loaded and transposed once for all of them.
      const float* rows_init = first_rows(init, row0, m, n, c, ldc);
      if (transposed_b_product(m, n, k, kKC, alpha, a, b, c, ldc, rows_init)) return;
    }
    if (m == 1 && plain_rows && cfg.nr != 8) {
      if (init != nullptr && init->cols != nullptr) {
        fill_from_cols(init->cols, 1, n, c, ldc);  // then accumulated into
        init = nullptr;
      }
      gemm_one_row(n, k, alpha, a, b, c, packed_b_all, col0, init, row0, cfg.nr);
      return;
    }
  }
  const int64_t mc_max = std::min(kMC, (m + cfg.mr - 1) / cfg.mr * cfg.mr);
  const int64_t nc_max = std::min(kNC, (n + cfg.nr - 1) / cfg.nr * cfg.nr);
  const int64_t kc_max = std::min(kKC, k);
  T* packed_a = packed != nullptr ? nullptr : scratch<T>(0, mc_max * kc_max);
  T* scratch_b = packed_b_all != nullptr ? nullptr : scratch<T>(1, nc_max * kc_max);
  // Tiles into a scratch tile for init->tile_done where K is one block (written once, from
  // init: never read back).
  bool scratch_tiles = false;
  alignas(64) T scratch_tile[8 * 32];
  if constexpr (std::is_same_v<T, float>) {
    scratch_tiles = init != nullptr && init->tile_done != nullptr && init->tile_scratch &&
                    init->cols == nullptr && k <= kKC && cfg.mr * cfg.nr <= 8 * 32;
  }
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kKC) {
      const int64_t kc = std::min(kKC, k - pc);
      const T* packed_b = scratch_b;
      if constexpr (std::is_same_v<T, float>) {
        if (packed_b_all != nullptr) packed_b = packed_b_all->panels(pc, col0 + jc);
      }
      if (packed_b_all == nullptr) pack_b(b, pc, jc, kc, nc, cfg.nr, scratch_b);
      for (int64_t ic = 0; ic < m;) {
        int64_t mc = std::min(kMC, m - ic);
        const T* block = packed_a;
        if constexpr (std::is_same_v<T, float>) {
          if (packed != nullptr) {
            // Rows from row0 + ic, which may start inside a packed block (at a multiple of
            // MR): the rest of that block, its MR-row panels kc * MR floats each.
            const int64_t row = row0 + ic, within = row % kMC;
            mc = std::min(kMC - within, m - ic);
            block = packed->block(pc, row - within) + within * kc;
          }
        }
        if (packed == nullptr) pack_a(a, ic, pc, mc, kc, cfg.mr, packed_a);
        for (int64_t jr = 0; jr < nc; jr += cfg.nr) {
          const int64_t nr = std::min(cfg.nr, nc - jr);
          for (int64_t ir = 0; ir < mc; ir += cfg.mr) {
            const int64_t mr = std::min(cfg.mr, mc - ir);
            const T* tile_init = nullptr;
            T* tile = c + (ic + ir) * ldc + jc + jr;
            if constexpr (std::is_same_v<T, float>) {
              if (init != nullptr && pc == 0) {
                if (init->cols != nullptr) {
                  fill_from_cols(init->cols + jc + jr, mr, nr, tile, ldc);  // then accumulated
                } else {
                  tile_init = init->rows != nullptr ? init->rows + row0 + ic + ir : kZeroRows;
                }
              }
            }
            if constexpr (std::is_same_v<T, float>) {
              if (scratch_tiles) {
                cfg.for_rows(mr)(kc, block + ir * kc, packed_b + jr * kc, scratch_tile, cfg.nr,
                                 alpha, mr, nr, tile_init);
                init->tile_done(init->tile_ctx, scratch_tile, cfg.nr, tile, ldc, mr, nr);
                continue;
              }
            }
            cfg.for_rows(mr)(kc, block + ir * kc, packed_b + jr * kc, tile, ldc, alpha, mr, nr,
                             tile_init);
            if constexpr (std::is_same_v<T, float>) {
              if (init != nullptr && init->tile_done != nullptr && pc + kc >= k)
                init->tile_done(init->tile_ctx, tile, ldc, tile, ldc, mr, nr);
            }
          }
        }
        ic += mc;
      }
    }
  }
}

// GEMMs below this many multiply-adds run on the calling thread: splitting them costs more
// than it saves (2^20 was tried: no better on Silero VAD, worse on MiniLM and
// mobilenet_v3_small at 2 threads).
constexpr int64_t kParallelMacs = int64_t{1} << 18;

// Splits C across threads — by columns when it is wider than tall, else by rows — in units
// that are multiples of every micro-tile, each part a serial blocked GEMM with the thread's
// own packing buffers. Every element of C is accumulated over the same K blocks in the same
// order as serially, so the result does not depend on the thread count.
template <typename T>
void gemm_parallel(int64_t m, int64_t n, int64_t k, T alpha, MatrixRef<T> a, MatrixRef<T> b, T* c,
                   int64_t ldc, const PackedA* packed = nullptr, const PackedB* packed_b = nullptr,
                   const GemmInit* init = nullptr) {
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <
      double(kParallelMacs)) {
    gemm_blocked(m, n, k, alpha, a, b, c, ldc, packed, 0, packed_b, 0, init);
    return;
  }
  if (n >= m || packed_b != nullptr) {
    constexpr int64_t kUnit = 64;  // a multiple of every panel width
    parallel_for((n + kUnit - 1) / kUnit, 1, [&](int64_t u0, int64_t u1) {
      const int64_t j0 = u0 * kUnit, j1 = std::min(n, u1 * kUnit);
      MatrixRef<T> part{b.data == nullptr ? nullptr : b.data + j0 * b.col_stride, b.row_stride,
                        b.col_stride, b.row_offsets};
      DequantB dequant;  // a quantized B from column j0 on
      if (b.dequant != nullptr) {
        dequant = b.dequant->shifted(j0);
        part.dequant = &dequant;
      }
      // Column values from column j0 on, as C's part.
      GemmInit shifted;
      const GemmInit* part_init = init;
      if constexpr (std::is_same_v<T, float>) {
        if (init != nullptr && init->cols != nullptr) {
          shifted = *init;
          shifted.cols += j0;
          part_init = &shifted;
        }
      }
      gemm_blocked(m, j1 - j0, k, alpha, a, part, c + j0, ldc, packed, 0, packed_b, j0, part_init);
    });
  } else {
    // Rows in units of 24, a multiple of every MR (a part may start inside a packed A's
    // block, at a panel boundary).
    const int64_t unit = 24;
    parallel_for((m + unit - 1) / unit, 1, [&](int64_t u0, int64_t u1) {
      const int64_t i0 = u0 * unit, i1 = std::min(m, u1 * unit);
      MatrixRef<T> part =
          a.col_offsets != nullptr
              ? MatrixRef<T>{a.data, 0, 0, a.row_offsets + i0, a.col_offsets}
              : MatrixRef<T>{a.data == nullptr ? nullptr : a.data + i0 * a.row_stride, a.row_stride,
                             a.col_stride};
      gemm_blocked(i1 - i0, n, k, alpha, part, b, c + i0 * ldc, ldc, packed, i0, nullptr, 0, init);
    });
  }
}

}  // namespace

void gemm(int64_t m, int64_t n, int64_t k, float alpha, MatrixRef<float> a, MatrixRef<float> b,
          float* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}

// 64-byte aligned storage for `count` floats (at least one).
std::unique_ptr<float, void (*)(void*)> aligned_floats(int64_t count) {
  const size_t bytes =
      (static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(float) + 63) / 64 * 64;
  std::unique_ptr<float, void (*)(void*)> p(static_cast<float*>(std::aligned_alloc(64, bytes)),
                                            std::free);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

std::shared_ptr<const PackedA> PackedA::pack(int64_t m, int64_t k, MatrixRef<float> a) {
  auto p = std::shared_ptr<PackedA>(new PackedA());
  p->m_ = m;
  p->k_ = k;
  p->kernel_ = float_kernel();
  const GemmConfig<float> cfg = float_config(p->kernel_);
  p->row_blocks_ = (m + kMC - 1) / kMC;
  int64_t total = 0;
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    for (int64_t ic = 0; ic < m; ic += kMC) {
      const int64_t mc = std::min(kMC, m - ic);
      p->offsets_.push_back(total);
      total += (mc + cfg.mr - 1) / cfg.mr * cfg.mr * kc;
    }
  }
  p->data_ = aligned_floats(total);
  size_t i = 0;
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    for (int64_t ic = 0; ic < m; ic += kMC, ++i) {
      const int64_t mc = std::min(kMC, m - ic);
      pack_a(a, ic, pc, mc, kc, cfg.mr, p->data_.get() + p->offsets_[i]);
    }
  }
  return p;
}

const float* PackedA::block(int64_t pc, int64_t ic) const {
  return data_.get() + offsets_[static_cast<size_t>((pc / kKC) * row_blocks_ + ic / kMC)];
}

void gemm_packed(const PackedA& a, int64_t n, float alpha, MatrixRef<float> b, float* c,
                 int64_t ldc, const GemmInit* init) {
  gemm_parallel(a.rows(), n, a.depth(), alpha, MatrixRef<float>{nullptr, 0, 0}, b, c, ldc, &a,
                nullptr, init);
}

std::shared_ptr<const PackedB> PackedB::pack(int64_t k, int64_t n, MatrixRef<float> b) {
  auto p = std::shared_ptr<PackedB>(new PackedB());
  p->k_ = k;
  p->n_ = n;
  p->kernel_ = float_kernel();
  const GemmConfig<float> cfg = float_config(p->kernel_);
  p->nr_ = cfg.nr;
  p->padded_n_ = (n + cfg.nr - 1) / cfg.nr * cfg.nr;
  p->data_ = aligned_floats(k * p->padded_n_);
  // Per k block, every panel across N, as pack_b lays out a block's panels.
  for (int64_t pc = 0; pc < k; pc += kKC) {
    const int64_t kc = std::min(kKC, k - pc);
    pack_b(b, pc, 0, kc, n, cfg.nr, p->data_.get() + pc * p->padded_n_);
  }
  return p;
}

const float* PackedB::panels(int64_t pc, int64_t j) const {
  const int64_t kc = std::min(kKC, k_ - pc);
  return data_.get() + pc * padded_n_ + (j / nr_) * nr_ * kc;
}

namespace {

// Rows [0, m) (m <= 4) of C += alpha * A @ B for B's columns [j0, j1) (j0 a multiple of
// four panels), K block by K block as gemm_blocked goes.
template <int R>
void small_m_columns(float alpha, MatrixRef<float> a, const PackedB& b, float* c, int64_t ldc,
                     int64_t j0, int64_t j1) {
  const bool wide = b.kernel() == FloatKernel::kAvx512;
  const int64_t nr = wide ? 32 : 16;
  constexpr int kPanels = R <= 2 ? 4 : 2;  // accumulators: R * kPanels * 2 <= 16
  for (int64_t pc = 0; pc < b.depth(); pc += kKC) {
    const int64_t kc = std::min(kKC, b.depth() - pc);
    const float* ap = a.data + pc * a.col_stride;
    for (int64_t j = j0; j < j1; j += kPanels * nr) {
      const int64_t cols = std::min(kPanels * nr, j1 - j);
      const float* panels = b.panels(pc, j);
      auto run = [&]<int P>() {
        if (wide) {
          rows_avx512<R, P>(kc, ap, a.row_stride, a.col_stride, panels, c + j, ldc, alpha, cols);
        } else {
          rows_avx2<R, P>(kc, ap, a.row_stride, a.col_stride, panels, c + j, ldc, alpha, cols);
        }
      };
      // The last columns: only the panels they need (the rest of B is not there).
      const int64_t need = (cols + nr - 1) / nr;
      // (kPanels is 2 for some R: that branch and the `need == 2` one are then the same.)
      if (need >= kPanels) {  // NOLINT(bugprone-branch-clone)
        run.template operator()<kPanels>();
      } else if (need == 3) {
        run.template operator()<3>();
      } else if (need == 2) {
        run.template operator()<2>();
      } else {
        run.template operator()<1>();
      }
    }
  }
}

}  // namespace

void gemm_packed(int64_t m, float alpha, MatrixRef<float> a, const PackedB& b, float* c,
                 int64_t ldc, const GemmInit* init) {
  // A few rows (a batch-1 linear layer) on the AVX2 or AVX-512 panels: row kernels over
  // columns split across threads in units of four panels. They accumulate into C: an
  // overwrite fills C with the rows' values first (the first K block then adds its sum to
  // them, as the micro-kernels' init does).
  if (m >= 1 && m <= 4 && b.depth() > 0 && b.kernel() != FloatKernel::kPortable &&
      a.col_offsets == nullptr) {
    if (init != nullptr && init->cols != nullptr) {
      fill_from_cols(init->cols, m, b.cols(), c, ldc);
    } else if (init != nullptr) {
      for (int64_t i = 0; i < m; ++i)
        std::fill_n(c + i * ldc, b.cols(), init->rows != nullptr ? init->rows[i] : 0.0f);
    }
    const int64_t unit = int64_t{4} * (b.kernel() == FloatKernel::kAvx512 ? 32 : 16);
    const int64_t n = b.cols();
    auto part = [&](int64_t u0, int64_t u1) {
      const int64_t j0 = u0 * unit, j1 = std::min(n, u1 * unit);
      switch (m) {
        case 1:
          return small_m_columns<1>(alpha, a, b, c, ldc, j0, j1);
        case 2:
          return small_m_columns<2>(alpha, a, b, c, ldc, j0, j1);
        case 3:
          return small_m_columns<3>(alpha, a, b, c, ldc, j0, j1);
        default:
          return small_m_columns<4>(alpha, a, b, c, ldc, j0, j1);
      }
    };
    const int64_t units = (n + unit - 1) / unit;
    if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(b.depth()) <
        double(kParallelMacs)) {
      part(0, units);
    } else {
      parallel_for(units, 1, part);
    }
    return;
  }
  gemm_parallel(m, b.cols(), b.depth(), alpha, a, MatrixRef<float>{nullptr, 0, 0}, c, ldc, nullptr,
                &b, init);
}
void gemm(int64_t m, int64_t n, int64_t k, double alpha, MatrixRef<double> a, MatrixRef<double> b,
          double* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}
void gemm(int64_t m, int64_t n, int64_t k, int64_t alpha, MatrixRef<int64_t> a,
          MatrixRef<int64_t> b, int64_t* c, int64_t ldc) {
  gemm_parallel(m, n, k, alpha, a, b, c, ldc);
}

void set_gemm_isa(GemmIsa isa) {
  isa_cap().store(static_cast<int>(isa), std::memory_order_relaxed);
}

std::optional<GemmIsa> parse_max_isa(std::string_view name) {
  if (name == "avx512") return GemmIsa::kAuto;
  if (name == "avx2") return GemmIsa::kAvx2;
  if (name == "portable") return GemmIsa::kPortable;
  return std::nullopt;
}

std::optional<GemmIsa> env_max_isa() {
  const char* v = std::getenv("ETC_MAX_ISA");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return parse_max_isa(v);
}

FloatKernel gemm_float_kernel() {
  return float_kernel();
}

bool gemm_uses_avx2() {
  return use_avx2();
}

const char* gemm_float_kernel_name() {
  switch (float_kernel()) {
    case FloatKernel::kAvx512:
      return "AVX-512 8x32";
    case FloatKernel::kAvx2:
      return "AVX2/FMA 6x16";
    case FloatKernel::kPortable:
      break;
  }
  return "portable 4x8";
}

}  // namespace etc::rt::kernels
