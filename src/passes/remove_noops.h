// remove-noops: removes ops that return their input unchanged — clone, a view/reshape
// or expand to the same shape, an identity permute, a transpose of a dim with itself, a
// full-range slice, a squeeze of nothing, a _to_copy to the same dtype — by rewiring
// their users to the input. A node whose output is a graph output and whose input is a
// graph input or constant is kept, so that program outputs stay distinct values.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> remove_noops(Graph& graph, PassContext& context);

// Whether `node` returns its first tensor argument unchanged (exposed for tests).
bool is_noop(const Graph& graph, const Node& node);

}  // namespace etc
