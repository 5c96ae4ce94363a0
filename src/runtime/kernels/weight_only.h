// Weight-only quantized matrix products on the CPU. A program from torchao's weight-only
// configs (and ExecuTorch's quantizers) widens each int8 weight to float32 with the
// elementwise steps of dequantize_affine - _to_copy, a subtraction of the zero point, a
// multiplication by the scale, a transpose - and multiplies by the result. The load planner
// (load_plan_dequant.cpp) gives such a chain to the product it feeds: the product then dequantizes
// the weight as it packs its panels (DequantB), and the chain's steps are skipped. The weight is
// read as int8 once per call instead of being widened, written and read again as float32;
// the result has the bits of running every step. The same for a bf16 or fp16 model's chain
// and product (each step rounded to the model's dtype, the product accumulated in float32).
//
// ExecuTorch's 8da4w programs also quantize the product's left operand to int8 per row at run
// time and dequantize it with the same kind of steps (_to_copy, sub of the row's zero point,
// mul by its scale). Where the weight is 4-bit, those steps join the product too, which then
// multiplies the int8 rows by the 4-bit weight in integers (gemm_int8x4.h): not the float
// steps' bits, but their exact integer sums in a fixed order (closer to the exact product).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/gemm_int8x4.h"

namespace etc::rt::kernels {

// In an aten::mm.out step's state slot: its right operand (mat2) comes from `dequant`.
struct DequantizedWeight final : KernelState {
  const void* b = nullptr;  // mat2's planned bytes, which the skipped steps would have written
  int64_t k = 0, n = 0;     // mat2's sizes
  DequantB dequant;
  // A bf16/fp16 chain's constant zero point and scale widened to float32, which dequant's
  // operands point into.
  std::vector<float> zero_f32, scale_f32;
  // A 4-bit weight's zero point and scale arranged for the row kernels (arrange_row_operands).
  std::vector<float> zero_lanes, scale_lanes;
  // The left operand's chain, when it joined too: a [rows, k] int8 tensor the program
  // quantized, and the row's zero point and scale (float32 tensors the skipped steps read:
  // row r's at (r / group) * stride), which the product reads when it runs.
  struct QuantizedRows {
    const int8_t* q = nullptr;
    int64_t rows = 0;
    const float* zero = nullptr;      // null: no zero point (symmetric), or:
    const int8_t* zero_i8 = nullptr;  // int8 zero points the skipped steps widen
    int64_t zero_stride = 0, zero_group = 1;
    const float* scale = nullptr;
    int64_t scale_stride = 0, scale_group = 1;
  };
  std::optional<QuantizedRows> quantized_rows;
  // The weight prepared for gemm_int8x4 (with quantized_rows).
  std::optional<Int4Weight> int4;
};

}  // namespace etc::rt::kernels
