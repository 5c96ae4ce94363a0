// Weight-only quantized matrix products on the CPU. A program from torchao's weight-only
// configs (and ExecuTorch's quantizers) widens each int8 weight to float32 with the
// elementwise steps of dequantize_affine - _to_copy, a subtraction of the zero point, a
// multiplication by the scale, a transpose - and multiplies by the result. The load planner
// (load_plan.cpp) gives such a chain to the product it feeds: the product then dequantizes the
// weight as it packs its panels (DequantB), and the chain's steps are skipped. The weight is
// read as int8 once per call instead of being widened, written and read again as float32;
// the result has the bits of running every step. The same for a bf16 or fp16 model's chain
// and product (each step rounded to the model's dtype, the product accumulated in float32).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// In an aten::mm.out step's state slot: its right operand (mat2) comes from `dequant`.
struct DequantizedWeight final : KernelState {
  const void* b = nullptr;  // mat2's planned bytes, which the skipped steps would have written
  int64_t k = 0, n = 0;     // mat2's sizes
  DequantB dequant;
  // A bf16/fp16 chain's constant zero point and scale widened to float32, which dequant's
  // operands point into.
  std::vector<float> zero_f32, scale_f32;
};

}  // namespace etc::rt::kernels
