#include "passes/panel_weights.h"

#include <cstring>
#include <unordered_set>
#include <variant>

namespace etc {
namespace {

// Whether `use` is the right operand of a host mm or addmm.
bool product_weight(const Graph& g, const Use& use, const std::unordered_set<uint32_t>& host) {
  if (!host.contains(use.node.v) || use.element >= 0) return false;
  const OpKind op = g.node(use.node).op;
  return (op == OpKind::Mm && use.arg == 1) || (op == OpKind::Addmm && use.arg == 2);
}

// Whether the product reading its weight at `use` multiplies at most kMaxFloat32PanelRows
// rows (static): a decode step's.
bool few_rows(const Graph& g, const Use& use) {
  const Node& n = g.node(use.node);
  const auto* left = std::get_if<ValueId>(&n.args[n.op == OpKind::Mm ? 0 : 1]);
  if (left == nullptr) return false;
  const TensorSpec& s = g.value(*left).spec;
  return s.dynamism == ShapeDynamism::kStatic && s.rank() == 2 &&
         s.sizes[0] <= kMaxFloat32PanelRows;
}

// Whether every reader of constant `w` takes it as a product's weight: directly (16-bit, or
// float32 for products of few rows), or through host _to_copy steps to a float dtype whose
// outs only products read (int8).
bool only_product_weight(const Graph& g, const Value& w, const std::unordered_set<uint32_t>& host,
                         bool dynamic_shapes) {
  if (w.uses.empty()) return false;
  for (const Use& u : w.uses) {
    if (w.spec.dtype != DType::kInt8) {
      if (!product_weight(g, u, host)) return false;
      // (With dynamic dims a product's rows may be any of several: float32 stays [K, N].)
      if (w.spec.dtype == DType::kFloat32 && (dynamic_shapes || !few_rows(g, u))) return false;
      continue;
    }
    const Node& cast = g.node(u.node);
    if (!host.contains(u.node.v) || cast.op != OpKind::ToCopy || u.arg != 0 || u.element >= 0 ||
        cast.outputs.size() != 1)
      return false;
    const Value& wide = g.value(cast.outputs[0]);
    // (The dtypes of the CPU products that read panels.)
    const DType wd = wide.spec.dtype;
    if ((wd != DType::kFloat32 && wd != DType::kBFloat16 && wd != DType::kFloat16) ||
        wide.uses.empty() || g.is_live_out(wide.id))
      return false;
    for (const Use& cu : wide.uses) {
      if (!product_weight(g, cu, host)) return false;
    }
  }
  return true;
}

}  // namespace

Result<bool> panel_weights(Graph& graph, PassContext& context) {
  std::unordered_set<uint32_t> host;  // the top-level nodes: a delegate's are not in the order
  for (NodeId n : graph.order())
    host.insert(n.v);
  std::vector<ValueId> candidates;
  for (ValueId id : graph.constants()) {
    const Value& v = graph.value(id);
    const TensorSpec& s = v.spec;
    const bool dtype_ok = s.dtype == DType::kBFloat16 || s.dtype == DType::kFloat16 ||
                          s.dtype == DType::kInt8 || s.dtype == DType::kFloat32;
    if (!dtype_ok || s.rank() != 2 || s.sizes[1] % kWeightPanel != 0 ||
        s.numel() < kMinPanelWeight || s.dynamism != ShapeDynamism::kStatic ||
        s.dim_order != contiguous_dim_order(2) ||
        s.constant.size != static_cast<size_t>(s.nbytes()) || graph.is_live_out(id) ||
        !only_product_weight(graph, v, host, context.options.dynamic_shapes))
      continue;
    candidates.push_back(id);
  }
  WritableArena arena(kComputedWeightsInMemory);
  for (ValueId id : candidates) {
    const Value& v = graph.value(id);
    const std::string name = v.name;
    const DType dtype = v.spec.dtype;
    const int64_t k = v.spec.sizes[0], n = v.spec.sizes[1], panels = n / kWeightPanel;
    const size_t elem = static_cast<size_t>(dtype_size(dtype));
    const size_t nbytes = static_cast<size_t>(v.spec.nbytes());
    // Panel j's row p: W[p, j P : (j + 1) P].
    WritableArena::Piece piece = arena.allocate(nbytes);
    const uint8_t* src = v.spec.constant.bytes().data();
    const size_t run = static_cast<size_t>(kWeightPanel) * elem;
    for (int64_t j = 0; j < panels; ++j) {
      for (int64_t p = 0; p < k; ++p) {
        std::memcpy(
            piece.data + static_cast<size_t>(j * k + p) * run,
            src + (static_cast<size_t>(p * n) + static_cast<size_t>(j * kWeightPanel)) * elem, run);
      }
    }
    piece.blob->release(piece.offset, nbytes);
    v.spec.constant.blob->release(v.spec.constant.offset, v.spec.constant.size);
    TensorSpec panel_spec = TensorSpec::make(dtype, {panels, k, kWeightPanel});
    panel_spec.constant = ConstantData{piece.blob, piece.offset, nbytes};
    const ValueId paneled =
        graph.add_constant(graph.unique_value_name(name + ".panels"), std::move(panel_spec));
    // Before each reader, the weight permuted back: its own steps, so that each product's
    // chain is read by that product alone.
    const std::vector<Use> uses = graph.value(id).uses;
    for (const Use& u : uses) {
      const std::string base = graph.node(u.node).name;
      const NodeId permute =
          graph.add_node(OpKind::Permute, graph.unique_node_name(base + ".weight_panels"),
                         {ArgValue(paneled), ArgValue(std::vector<int64_t>{1, 0, 2})},
                         {graph.unique_value_name(name + ".from_panels")},
                         {TensorSpec::make(dtype, {k, panels, kWeightPanel})}, u.node);
      const NodeId view = graph.add_node(
          OpKind::View, graph.unique_node_name(base + ".weight"),
          {ArgValue(graph.node(permute).outputs[0]), ArgValue(std::vector<int64_t>{k, n})},
          {graph.unique_value_name(name + ".rows")}, {TensorSpec::make(dtype, {k, n})}, u.node);
      graph.node(permute).origin = graph.node(u.node).origin;
      graph.node(view).origin = graph.node(u.node).origin;
      graph.replace_use(u, id, graph.node(view).outputs[0]);
    }
    graph.erase_constant(id);
  }
  return !candidates.empty();
}

}  // namespace etc
