// Products of int8 activation rows by 4-bit weights, in integers: ExecuTorch's 8da4w
// programs (torchao's Int8DynamicActivationIntxWeightConfig) quantize each activation row to
// int8 at run time, dequantize it, and multiply it by a weight they dequantize from 4-bit
// values in groups along K. Written out, that product is
//   y[r, n] = sum over groups g of sx[r] * sw[n, g] * S[r, n, g],
//   S[r, n, g] = sum over k in g of (qx[r, k] - zx[r]) * (qw[n, k] - zw[n, g]),
// and S is an integer, which this kernel computes exactly (AVX-512 VNNI dot products of
// bytes, or a portable loop), then combines in float32 in a fixed order. The float32 steps
// of the program round every dequantized value and every partial sum instead, so the two
// differ in the last bits (the integer form is the nearer to the exact value); the load
// planner takes this path only for that pattern (load_plan_dequant.cpp), and --no-fusion keeps the
// program's own steps. Every ISA gives the same bits: the integers are exact and the float
// steps are the same operations in the same order.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// A 4-bit weight [N, K] (B = its transpose) prepared at load for gemm_int8x4:
// qw[n, k] is value k of row n at q4 + n * row_bytes (graph/int4.h); zw and sw one value per
// row and group of `group` inputs.
struct Int4Weight {
  const uint8_t* q4 = nullptr;
  int64_t row_bytes = 0, n = 0, k = 0, group = 0;
  // At at(row, g): 8 + zw (the kernel multiplies qw + 8, which is unsigned); the sum of the
  // group's qw less group * zw; sw. Rows in tiles of 16 (the last padded), each tile's
  // groups in order: what a tile of the kernel reads is contiguous.
  std::vector<int32_t> c1, c2;
  std::vector<float> scale;
  int64_t groups() const { return k / group; }
  size_t at(int64_t row, int64_t g) const {
    return static_cast<size_t>(((row / 16) * groups() + g) * 16 + row % 16);
  }
};

// The largest group gemm_int8x4 takes (its integer sums stay within int32 below it).
inline constexpr int64_t kInt8x4MaxGroup = 1024;
// The largest activation zero point, in magnitude, it takes (the same bound).
inline constexpr int32_t kInt8x4MaxZero = 1024;

// d (4-bit values, the weight stored [N, K], float32 steps) as an Int4Weight for a product
// of depth k and n columns: nullopt unless the zero points are integers of magnitude at most
// 128 (or absent) and the zero points and scales hold one value per row, per row and group of
// inputs, or per group along K — one group size of 32, 64 or a multiple of 128 (at most
// kInt8x4MaxGroup) that divides k.
std::optional<Int4Weight> prepare_int4_weight(const DequantB& d, int64_t k, int64_t n);

// m activation rows quantized to int8: row r's values at q + r * q_rs, its zero point
// zero[r] (an integer of magnitude at most kInt8x4MaxZero) and scale scale[r].
struct Int8Rows {
  const int8_t* q = nullptr;
  int64_t q_rs = 0;
  const int32_t* zero = nullptr;
  const float* scale = nullptr;
};

// The rows copied into the layout the kernels read (per chunk of 128 inputs, the even inputs
// then the odd ones), with their sums per group of w and their zero points and scales: taken
// before the product writes C, which may lie over the rows.
struct Int8x4Rows {
  int64_t m = 0, chunks = 0;
  std::vector<int8_t> bytes;  // [m][chunks][128]
  std::vector<int32_t> sums;  // [m][w.groups()]
  std::vector<int32_t> zero;
  std::vector<float> scale;
};
Int8x4Rows arrange_int8_rows(int64_t m, const Int8Rows& x, const Int4Weight& w);

// C[r, n] = fma(alpha, acc * sx[r], C[r, n]) for r < x.m, n < w.n, where acc starts at 0 and
// takes acc = fma(sw[n, g], float(S[r, n, g]), acc) for each group g in order.
void gemm_int8x4(const Int8x4Rows& x, const Int4Weight& w, float alpha, float* c, int64_t ldc);

}  // namespace etc::rt::kernels
