// fold-constants: replaces each node whose tensor inputs are all constants by new constants.
// Shape-only ops (view, reshape, clone, squeeze, unsqueeze, a cast to the same dtype) share
// the input's bytes; every other op is computed by its CPU kernel (consteval/evaluate.h):
// transposes, slices, cat, casts, arithmetic, unless it is random or its result would be
// much larger than its inputs. Nodes producing graph outputs are kept. A widening cast of a
// large 8-bit integer constant (a quantized weight being dequantized, or widened for an
// integer product) is kept too: the weight stays packed in the program and is widened at
// run time, just before its first use (the pass moves it there).
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> fold_constants(Graph& graph, PassContext& context);

}  // namespace etc
