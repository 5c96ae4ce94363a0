// fold-constants: evaluates data-movement and cast ops whose tensor inputs are all
// constants — view, reshape, clone, squeeze, unsqueeze, permute, transpose, expand, slice,
// select, cat, _to_copy — and replaces them by new constants. Shape-only ops share the
// input's bytes (no copy). Arithmetic is not folded yet: that needs the CPU kernels of the
// runtime. Nodes producing graph outputs are kept. A widening cast of a large 8-bit integer
// constant (a quantized weight being dequantized, or widened for an integer product) is kept
// too: the weight stays packed in the program and is widened at run time, just before its
// first use (the pass moves it there).
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> fold_constants(Graph& graph, PassContext& context);

}  // namespace etc
