// dce: removes nodes none of whose outputs is used or returned, and constants nothing
// reads. Runs to a fixed point in one backward sweep. Graph inputs are never removed
// (they are the calling convention).
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> dead_code_elimination(Graph& graph, PassContext& context);

}  // namespace etc
