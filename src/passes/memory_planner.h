// Offset assignment for one planned buffer: given tensors with sizes and lifetimes (inclusive
// ranges of schedule positions), place each at an offset so that tensors alive at the same
// time never overlap, using as few bytes as possible.
//
// Two algorithms:
// - greedy_by_size (etc's): largest tensor first; each goes into the smallest gap between
//   already placed tensors whose lifetimes overlap its own, else on top. Close to the lower
//   bound on real networks.
// - shared_objects: ExecuTorch's default "greedy" (exir/memory_planning.py): tensors, largest
//   first, share "objects"; kept as the baseline and as a fallback.
// plan_lower_bound() is the largest total size of simultaneously live tensors: no plan can
// use fewer bytes. verify_plan() checks a plan independently of how it was made.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace etc {

struct PlanTensor {
  int64_t size = 0;   // bytes, already rounded up to the alignment
  int32_t first = 0;  // first schedule position where it is live
  int32_t last = 0;   // last one (inclusive)
};

struct BufferPlan {
  std::vector<int64_t> offsets;  // one per tensor
  int64_t size = 0;              // bytes the buffer needs
};

BufferPlan plan_greedy_by_size(const std::vector<PlanTensor>& tensors);
BufferPlan plan_shared_objects(const std::vector<PlanTensor>& tensors);
int64_t plan_lower_bound(const std::vector<PlanTensor>& tensors);

// OK if every tensor lies inside [0, plan.size) and no two tensors that are live at the
// same time share a byte. The error names the two tensors (by index) and their ranges.
Status verify_plan(const std::vector<PlanTensor>& tensors, const BufferPlan& plan);

}  // namespace etc
