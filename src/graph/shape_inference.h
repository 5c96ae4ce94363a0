// Declarations of the per-op inference functions named in ops.def (internal to etc_graph).
#pragma once

#include "graph/ops.h"

namespace etc::infer {

#define ETC_OP(e, schema, kernel, fn, cuda) \
  Status fn(const InferContext& ctx, std::vector<TensorType>& out);
#include "graph/ops.def"
#undef ETC_OP

}  // namespace etc::infer
