// pack-int4-weights: stores int4 weights two values a byte. torchao's int4 weight-only and
// 8da4w configs keep their 4-bit values one a byte (an int8 qdata in [-8, 7]); each int8
// constant of at least kMinPackedInt4 elements whose values all fit in 4 bits becomes a uint8
// constant of half the bytes (graph/int4.h's layout, rows along the last dim) and an
// etc::unpack_int4 node before its first reader gives the int8 values back, exactly. The CPU
// runtime's matrix products read the nibbles where the unpacked weight is dequantized for
// them (runtime/kernels/load_plan.cpp); the CUDA delegate runs the unpacking as a kernel.
#pragma once

#include <cstdint>

#include "passes/pass.h"

namespace etc {

// Smaller int8 constants (zero points, biases) are left as they are.
inline constexpr int64_t kMinPackedInt4 = 4096;

Result<bool> pack_int4_weights(Graph& graph, PassContext& context);

}  // namespace etc
