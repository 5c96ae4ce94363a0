// fuse-weight-only: inside each CUDA delegate, a linear layer whose weight the program
// dequantizes from constants on every call - torchao's weight-only chain: a 4-bit weight
// unpacked (pack-int4-weights), or an int8 one, widened with _to_copy, its zero point
// subtracted, multiplied by its scale, reshaped to [N, K] - becomes one
// etc::weight_only_linear (graph/weight_only.h) over the packed weight, its scale and zero
// point. The chain made a float copy of every weight on every call (a decode step wrote and
// read each weight at four times its bf16 size where it needs to read it once, at its packed
// size); the fused op reads the packed weight and computes the chain's values.
//
// torchao's Int8WeightOnlyConfig holds another form: mm(x, _to_copy(W^T)) with W^T an int8
// constant [K, N], its scale multiplying the product's result after. That product becomes
// etc::weight_only_linear over W (written [N, K] at export) with a scale of ones, exactly
// mm's value; the multiplication by the scale stays.
//
// Fused only where the chain has that exact form: the scale and zero point constants of
// the input's dtype, one per group of the weight's last dim ([N, G, 1] over a weight
// [N, G, g], or [N, 1] over [N, K]); every value of the chain read by the next step alone;
// a 4-bit weight's groups of even size (so that its rows of groups are rows of K values).
// Anything else keeps its steps. Host programs keep them too: ExecuTorch's portable kernels
// run them, and etc's CPU load planner reads the packed weight already (load_plan_dequant.cpp).
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> fuse_weight_only(Graph& graph, PassContext& context);

}  // namespace etc
