// The CUDA delegate's capability table (the CUDA column of ops.def): for one node, whether
// etc's CUDA backend can run it, and if not, why. A pure predicate on the node and its tensor
// types; the partitioner asks it, the report shows the reasons, and the CUDA kernels implement
// exactly this set.
#pragma once

#include <optional>
#include <string>

#include "format/backend_ids.h"
#include "graph/graph.h"

namespace etc {

// The largest tensor rank the CUDA kernels index.
inline constexpr size_t kCudaMaxRank = 8;

// nullopt when the CUDA delegate supports `node`, else a short reason ("float64 tensors
// run on the host").
std::optional<std::string> cuda_unsupported_reason(const Graph& graph, const Node& node);

// Whether the CUDA delegate takes nodes of `op` at all (for some dtypes and arguments): the
// ops whose CUDA kernels test/kernels/op_table_test.cpp requires.
bool cuda_may_delegate(OpKind op);

}  // namespace etc
