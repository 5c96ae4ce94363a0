// Values known at export time, computed by the runtime's CPU kernels.
//
// The compiler's one constant evaluator. The importers (values they must know to go on: a
// shape computed from other shapes, a causal mask built from arange) and the fold-constants
// pass (nodes whose tensor arguments are all constants) evaluate an IR node with the kernel
// the runtime would run it with, so a value folded at export has the bits it would have had
// at run time, and every op with a CPU kernel folds without a second implementation. As
// MLIR's fold hooks and TVM's FoldConstant do, this layer decides nothing: its callers choose
// which nodes to fold and how large a result may be.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/ops.h"
#include "graph/tensor_spec.h"
#include "support/file_io.h"
#include "support/status.h"

namespace etc {

// Why `op` cannot be evaluated at export time, or "" when it can: it has a functional CPU
// kernel and its result depends on its arguments only (not a random op; not one whose
// result sizes the data decides).
std::string why_not_evaluable(OpKind op);

// Whether replacing a node by its evaluated result keeps a program about the size it was:
// the result is no larger than the constants it reads plus 64 KiB. A dequantized weight (4x
// its int8 bytes) or an outer product stays a node, computed at run time.
bool keeps_program_small(int64_t input_bytes, int64_t output_bytes);

// Evaluates `node` of `graph`, every tensor argument of which is a constant with static
// sizes, with its CPU kernel; returns the bytes of each output, sized by the output's spec
// (which must be static). Fails when the node cannot be evaluated (why_not_evaluable, an
// argument that is not a constant) or the kernel rejects the call, with the kernel's message.
// The results' memory comes from `arena` when one is given (many medium-sized results fill
// its huge pages), else each result is a blob of its own.
Result<std::vector<ConstantData>> evaluate_node(const Graph& graph, const Node& node,
                                                WritableArena* arena = nullptr);

// The same for a node not (yet) in a graph: `args` as a node of `op` holds them (every schema
// argument), `known(v)` the spec, with its constant bytes, of each tensor argument (null for
// one that is not known), `outputs` the types shape inference gives.
using KnownSpecOf = std::function<const TensorSpec*(ValueId)>;
Result<std::vector<ConstantData>> evaluate_op(OpKind op, std::span<const ArgValue> args,
                                              const KnownSpecOf& known,
                                              std::span<const TensorSpec> outputs,
                                              WritableArena* arena = nullptr);

// An importer's fold: evaluates a node about to be added to `graph` (its arguments, the
// names and specs its outputs would have; every tensor argument a constant of `graph`) and
// adds its results as constants under those names instead. Returns them, in output order.
Result<std::vector<ValueId>> add_evaluated(Graph& graph, OpKind op, std::span<const ArgValue> args,
                                           std::span<const std::string> names,
                                           std::span<const TensorSpec> specs);

}  // namespace etc
