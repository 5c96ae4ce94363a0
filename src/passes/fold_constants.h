// fold-constants: evaluates data-movement and cast ops whose tensor inputs are all
// constants — view, reshape, clone, squeeze, unsqueeze, permute, transpose, expand, slice,
// select, cat, _to_copy — and replaces them by new constants. Shape-only ops share the
// input's bytes (no copy). A _to_copy to a wider dtype (int8 -> float32) is not folded: the
// narrow constant is kept and widened at run time. Arithmetic is not folded yet: that needs
// the CPU kernels of the runtime. Nodes producing graph outputs are kept.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> fold_constants(Graph& graph, PassContext& context);

}  // namespace etc
