// The GEMM's register-blocked micro-kernels, one build per ISA, and the choice among them.
// gemm.cpp's drivers pack the operands and call these on each tile; every build sums each
// element of C in the same order with the same fused multiply-adds, so the AVX-512 and AVX2
// builds give the same bits (gemm.h). Internal to the GEMM's files.
#pragma once

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// Computes one MRxNR tile: acc = A_panel @ B_panel over kc, then C[i, j] += alpha * acc for
// the valid mr x nr corner (edge tiles are zero-padded in the packed panels).
// With `init` (the tile's MR row values), C is not read: C[i, j] = init[i] + alpha * acc
// (fused where the accumulation is), the first K block of a GEMM that overwrites C.
template <typename T>
using MicroKernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, T alpha,
                             int64_t mr, int64_t nr, const T* init);

template <typename T>
struct GemmConfig {
  int64_t mr = 0;
  int64_t nr = 0;
  MicroKernel<T> kernel = nullptr;
  // Kernels for tiles of r < mr rows at fewer_rows[r] (same bits); null: `kernel` for all.
  const MicroKernel<T>* fewer_rows = nullptr;
  // Whether gemm fetches the next B panel and each C tile ahead of the kernel (gemm.cpp's
  // gemm_blocked): a gain with the AVX2 kernel's 16-wide panels (Zen 1: vit's 50 x 768 x 3072
  // 41.2 -> 42.7 GFLOP/s; Zen 4 capped at AVX2: 178 -> 183-193), a loss with the AVX-512
  // kernel's 32-wide ones on Zen 4 (50 x 3072 x 768: 200 -> 183-190), whose own prefetchers
  // keep up.
  bool prefetch_ahead = false;
  MicroKernel<T> for_rows(int64_t rows) const {
    return rows < mr && fewer_rows != nullptr ? fewer_rows[rows] : kernel;
  }
};

// The micro-kernel, its tile and its fewer-rows kernels for each float build; for the other
// element types, those of the best build the CPU (and the ISA cap) allows.
GemmConfig<float> float_config(FloatKernel kind);
GemmConfig<float> gemm_config(float);
GemmConfig<double> gemm_config(double);
GemmConfig<int64_t> gemm_config(int64_t);

// Rows [0, m) (1 <= m <= 4) of C += alpha * A @ B on B's packed AVX2 or AVX-512 panels, for
// B's columns [j0, j1) (j0 a multiple of four panels), K block by K block as the blocked GEMM
// goes: the GEMV-shaped products of a batch-1 linear layer, where the tile kernels would
// spend most of their work on zero rows. Each C element is summed as the tile kernels sum
// it (from zero over the block's k in order, fused multiply-adds, then C += alpha * sum
// fused), so the bits are theirs.
void few_rows_product(int64_t m, float alpha, MatrixRef<float> a, const PackedB& b, float* c,
                      int64_t ldc, int64_t j0, int64_t j1);

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
                                                                  const float* init);
__attribute__((target("avx2,fma"))) void row_kernel_f32_avx2(int64_t kc, const float* a,
                                                             int64_t a_step, const float* b,
                                                             int64_t b_step, float* c, float alpha,
                                                             int64_t nr, const float* init);

}  // namespace etc::rt::kernels
