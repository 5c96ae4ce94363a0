// Attention the CPU load planner found as four instructions - bmm(Q, K^T) -> mul.Scalar ->
// _softmax over the last dim -> bmm(P, V), nothing else reading the scores - and gave to
// the first bmm (load_plan.cpp, fuse_attention): softmax(Q K^T * scale) V, a block of query
// rows at a time, so that the [B, L, S] scores never leave the cache (a 1500-position
// encoder's are 54 MB a layer). Each element is computed as the four kernels compute it (the
// same GEMM, the scale in float, the same softmax row), so the bits are the unfused ones.
#pragma once

#include <cstdint>

#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace etc::rt::kernels {

struct FusedAttention final : KernelState {
  float scale = 1;                  // the mul.Scalar's factor, as its kernel rounds it
  const TensorView* v = nullptr;    // [B, S, Ev], the second bmm's mat2
  const TensorView* out = nullptr;  // [B, L, Ev], the second bmm's out
};

// Query rows a block: their scores (rows x S floats) stay in the core's cache. Each block is
// a task of its own, on one thread, with its own buffer.
inline constexpr int64_t kAttentionRows = 64;

}  // namespace etc::rt::kernels
