// The GEMM's path for a quantized right operand (DequantB with int8 values, or 4-bit values two
// a byte): each value dequantized as the panels are packed, with the program's steps in their
// order (the bits of the unfused program). 16-bit operands go to gemm_wide16.h. Internal to
// gemm.cpp.
#pragma once

#include <cstdint>

#include "runtime/kernels/gemm.h"

namespace etc::rt::kernels {

// The kc x nc block of B at (p0, j0) into NR-column panels, as pack_b lays them out, each
// value dequantized; isa: the micro-kernel the panels are for (and the SIMD the packing uses).
void pack_dequant(FloatKernel isa, const DequantB& d, int64_t p0, int64_t j0, int64_t kc,
                  int64_t nc, int64_t nr, float* dst);

}  // namespace etc::rt::kernels
