// The GEMM's micro-kernels and the choice among them (see gemm_kernels.h).
#include "runtime/kernels/gemm_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "runtime/kernels/simd_transpose.h"

namespace etc::rt::kernels {
namespace {

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

// A few rows of A (R <= 4) against P consecutive packed panels of B (one K block),
// few_rows_product's kernels.
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

// few_rows_product for R rows.
template <int R>
void small_m_columns(float alpha, MatrixRef<float> a, const PackedB& b, float* c, int64_t ldc,
                     int64_t j0, int64_t j1) {
  const bool wide = b.kernel() == FloatKernel::kAvx512;
  const int64_t nr = wide ? 32 : 16;
  constexpr int kPanels = R <= 2 ? 4 : 2;  // accumulators: R * kPanels * 2 <= 16
  for (int64_t pc = 0; pc < b.depth(); pc += kGemmKBlock) {
    const int64_t kc = std::min(kGemmKBlock, b.depth() - pc);
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

void few_rows_product(int64_t m, float alpha, MatrixRef<float> a, const PackedB& b, float* c,
                      int64_t ldc, int64_t j0, int64_t j1) {
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
}

GemmConfig<float> float_config(FloatKernel kind) {
  switch (kind) {
    case FloatKernel::kAvx512:
      return {8, 32, micro_kernel_f32_avx512<8>, kAvx512FewerRows};
    case FloatKernel::kAvx2:
      return {6, 16, micro_kernel_f32_avx2, kAvx2FewerRows, /*prefetch_ahead=*/true};
    case FloatKernel::kPortable:
      break;
  }
  return {4, 8, micro_kernel_portable<float, 4, 8>};
}
GemmConfig<float> gemm_config(float) {
  return float_config(float_kernel());
}
GemmConfig<double> gemm_config(double) {
  if (use_avx2()) return {4, 8, micro_kernel_f64_avx2};
  return {4, 4, micro_kernel_portable<double, 4, 4>};
}
GemmConfig<int64_t> gemm_config(int64_t) {
  return {4, 4, micro_kernel_portable<int64_t, 4, 4>};
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
