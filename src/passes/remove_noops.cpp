#include "passes/remove_noops.h"

#include <numeric>

namespace etc {

bool is_noop(const Graph& graph, const Node& node) {
  if (node.args.empty() || !std::holds_alternative<ValueId>(node.args[0]) ||
      node.outputs.size() != 1)
    return false;
  const TensorSpec& in = graph.value(std::get<ValueId>(node.args[0])).spec;
  const TensorSpec& out = graph.value(node.outputs[0]).spec;
  if (in.dtype != out.dtype || in.sizes != out.sizes || in.device != out.device) return false;
  const OpSchema& schema = op_info(node.op).schema;
  auto arg = [&](const char* name) -> const ArgValue& {
    return node.args[static_cast<size_t>(schema.arg_index(name))];
  };
  switch (node.op) {
    case OpKind::Clone:
    case OpKind::View:
    case OpKind::Reshape:
    case OpKind::Expand:
    case OpKind::SqueezeDim:
    case OpKind::SqueezeDims:
    // Same shape, row-major: the same elements in the same order. ToCopy: the same dtype
    // (checked above); layout/device/memory_format are always None.
    case OpKind::ToCopy:
      return true;
    case OpKind::Permute: {
      const auto& dims = std::get<std::vector<int64_t>>(arg("dims"));
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t d = dims[i] < 0 ? dims[i] + static_cast<int64_t>(dims.size()) : dims[i];
        if (d != static_cast<int64_t>(i)) return false;
      }
      return true;
    }
    case OpKind::TransposeInt: {
      int64_t r = std::max<int64_t>(1, static_cast<int64_t>(in.rank()));
      int64_t a = std::get<int64_t>(arg("dim0")), b = std::get<int64_t>(arg("dim1"));
      return (a + r) % r == (b + r) % r;
    }
    case OpKind::SliceTensor:
      return std::get<int64_t>(arg("step")) == 1;  // same size with step 1: the full range
    default:
      return false;
  }
}

Result<bool> remove_noops(Graph& graph, PassContext&) {
  bool changed = false;
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    if (!is_noop(graph, n)) continue;
    ValueId in = std::get<ValueId>(n.args[0]);
    ValueId out = n.outputs[0];
    if (graph.is_graph_output(out) && graph.value(in).kind != ValueKind::kNodeOutput) continue;
    graph.replace_all_uses(out, in);
    graph.erase_node(id);
    changed = true;
  }
  return changed;
}

}  // namespace etc
