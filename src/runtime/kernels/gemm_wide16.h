// The GEMM's paths for a 16-bit (bf16, fp16) right operand (and a plainly widened int8 one) read
// in its own dtype
// (DequantB::bits16) and widened to float32 on the way, never copied whole to float32 first:
// into the packed panels (any shape), or read in place for a decode step or a short prompt
// over a weight stored [K, N]. Each keeps the arithmetic of the float32 kernels (gemm_kernels.cpp):
// per element, k in order from zero within a K block, then C = alpha * acc + C: the bits of
// the float32 product of the same values. Internal to gemm.cpp.
#pragma once

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// pack_dequant for DequantB::bits16: the kc x nc block at (p0, j0) into NR-column panels, each
// value widened, laid out as pack_b lays them.
void pack_widened(FloatKernel isa, const DequantB& d, int64_t p0, int64_t j0, int64_t kc,
                  int64_t nc, int64_t nr, float* dst);

// C (m x n, row pitch ldc) = alpha * A @ B + C for m == 1 (AVX-512 or AVX2) or m <= kWide16Rows
// (AVX-512) rows of A read in place and B a 16-bit weight stored [K, N] (d.q_n == 1) read in
// place, K in blocks of kc_block; init (one value per row, may be null) starts C instead of
// its contents in the first block.
void wide16_rows(bool avx512, int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                 MatrixRef<float> a, const DequantB& d, float* c, int64_t ldc, const float* init);

// An int8 weight stored [K, N] that the product only widens (DequantB with q, q_n == 1, no
// zero point, no scale: torchao's Int8WeightOnlyConfig, whose scale multiplies the product's
// output), for a decode step or a short prompt (m <= kWide16Rows) on AVX-512: read in place
// as wide16_rows reads a 16-bit one.
bool int8_row_applies(const DequantB& d);
void int8_rows_avx512(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                      MatrixRef<float> a, const DequantB& d, float* c, int64_t ldc,
                      const float* init);

}  // namespace etc::rt::kernels
