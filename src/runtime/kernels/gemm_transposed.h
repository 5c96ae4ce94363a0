// The GEMM's path for a few rows of A by a B stored transposed: its columns contiguous, a
// [N, K] matrix read as K^T (a decode step's scores against the KV cache's K, for one query
// head or the few that share a cache head). B's values are loaded 16 x 16 at a time, widened
// where they are 16-bit, and transposed in registers, once for all the rows, instead of
// packed into panels through memory. Per element the arithmetic of the float32 tile kernels
// (gemm.cpp): k in order from zero within a K block, then C = alpha * acc + C: the same bits.
// Internal to gemm.cpp.
#pragma once

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// C (m x n, rows ldc apart) = alpha * A @ B + C for 1 <= m <= kTransposedBRows rows of A
// (AVX-512 only: the caller checks), B float32 with its rows' elements contiguous
// (row_stride 1), or 16-bit floats (DequantB::bits16 with q_k 1, no zero point, scale or
// panels); K in blocks of kc_block; first_init (one value per row, may be null) starts C
// instead of its contents in the first block. False, with nothing written, where B is held
// otherwise.
bool transposed_b_product(int64_t m, int64_t n, int64_t k, int64_t kc_block, float alpha,
                          MatrixRef<float> a, MatrixRef<float> b, float* c, int64_t ldc,
                          const float* first_init);

}  // namespace etc::rt::kernels
