// The IR verifier: checks every invariant stated in graph.h and reports each broken one
// as a located diagnostic (the node's JSON pointer and name when the graph came from a
// file). Runs after loading and, in debug builds, tests and with --verify-each, after
// every pass.
#pragma once

#include "graph/graph.h"
#include "support/status.h"

namespace etc {

struct VerifyOptions {
  // Stop collecting after this many problems.
  size_t max_errors = 20;
};

// OK, or an invalid-input Status for the first problem with the others attached as
// related diagnostics. Checks: ids in range and live; node outputs point back at their
// producer; use lists match the arguments in both directions; argument count and kinds
// match the op schema; every value is defined before it is used (so the order is acyclic);
// inferred output types equal the stored TensorSpecs; specs are well formed (non-negative
// dims, byte counts that fit in int64, dim_order a permutation, constants carry exactly
// nbytes() of data, devices valid); value and node names are unique; graph outputs exist;
// delegate calls match their subgraphs (which are verified too) and the device rules of
// graph.h hold; planned tensors lie inside their planned buffer on the same device.
Status verify_graph(const Graph& graph, const VerifyOptions& options = {});

// The output types of `node`: inferred from its arguments, or for a delegate call read
// from its subgraph's outputs.
Status infer_node_types(const Graph& graph, const Node& node, std::vector<TensorType>* out);

// Checks that `value` fits argument `schema`; returns a message describing the mismatch or
// an empty string. Shared by the verifier and the JSON reader.
std::string check_arg_kind(const ArgSchema& schema, const ArgValue& value);

// Checks one TensorSpec on its own (dims, byte count, dim_order, constant data size,
// device). Returns an error message or an empty string.
std::string check_tensor_spec(const TensorSpec& spec);

}  // namespace etc
