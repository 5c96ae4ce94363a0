// PyTorch's safe softmax as one kernel. torch.export writes scaled_dot_product_attention's
// softmax (torch's _safe_softmax) as five instructions: _softmax(x) over the last dim, then
// eq(x, -inf), logical_not, any over the last dim and where(any, softmax, 0), so that a row
// every position of which is masked gives zeros instead of NaN. Every transformers model
// exported with its sdpa attention has them, after every attention's softmax: four extra passes
// over the scores, whose cost grows with the sequence (a decoder's 2048-row cache: 5% of its
// step). The CPU load planner (load_plan.cpp, fuse_safe_softmax) gives the four to the
// softmax, which writes the where's out: each row's softmax, or the where's other value where
// no position of the row differs from -inf. The same bits.
#pragma once

#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace etc::rt::kernels {

// In an aten::_softmax.out step's state slot: write `out` (the where's, float32, the
// softmax's shape) instead of the softmax's own out, `other` in rows with no value but -inf.
struct SafeSoftmax final : KernelState {
  const TensorView* out = nullptr;
  float other = 0;
};

}  // namespace etc::rt::kernels
