// decompose-host-ops: rewrites host ops that ExecuTorch's portable kernel library does not
// have into ones it has, so that ExecuTorch's own runtime can execute every CPU part of a
// program etc writes (docs/pte-format.md lists the kernel set). The ops are those ops.def
// declares ETC_DECOMPOSED(fn), each rewritten by its fn:
//   linear(x, W, b)  -> permute(W) then addmm(b, x2d, Wt) (mm without bias), with views
//                       around it when x is not 2-d
//   silu(x)          -> mul(x, sigmoid(x))
//   hardsigmoid(x)   -> div(hardtanh(add(x, 3), 0, 6), 6)
//   hardswish(x)     -> mul(x, hardsigmoid(x)) decomposed as above
//   max_pool2d       -> max_pool2d_with_indices (the indices output is unused)
//   reshape          -> view (the same thing for value-semantics tensors)
// Runs after partitioning (delegates keep the fused ops) and before fold-constants, which
// then folds the permuted constant weights. Results keep the original value names.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> decompose_host_ops(Graph& graph, PassContext& context);

}  // namespace etc
