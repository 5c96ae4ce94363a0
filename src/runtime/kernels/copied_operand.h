// A bmm's right operand that the steps before it only copy from another tensor, read from
// that tensor instead. A decoder's attention step makes K^T and V for its bmm's from the KV
// cache by copies: expand_copy repeats each cache head for the query heads that share it
// (grouped-query attention), _to_copy widens a bf16/fp16 cache to float32, transpose_copy
// swaps K's last two dims. Each copy writes and the next reads the whole cache again (three
// copies of K, two of V, every layer and every token), so their cost grows with the context
// while the product itself reads each value once. The CPU load planner (load_plan_copies.cpp)
// gives such steps to the bmm, which then reads the source through a batch map and strides:
// the same values in the same order, so the bits of the unfused steps.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/dtype.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace etc::rt::kernels {

// In an aten::bmm.out step's state slot. mat2 [batch, k, n] float32 is, element (b, r, c),
// source's element batch_offset[b] + r * k_stride + c * n_stride (widened where source is
// bf16/fp16).
struct CopiedOperand final : KernelState {
  const void* b = nullptr;  // mat2's planned bytes, which the skipped steps would have written
  int64_t batch = 0, k = 0, n = 0;  // mat2's sizes
  // The tensor the first skipped step read (planned memory, read through the view when the
  // bmm runs), its dtype (float32, bf16 or fp16) and element count at load.
  const TensorView* source = nullptr;
  DType dtype = DType::kFloat32;
  int64_t source_numel = 0;
  std::vector<int64_t> batch_offset;
  int64_t k_stride = 0, n_stride = 0;
};

}  // namespace etc::rt::kernels
