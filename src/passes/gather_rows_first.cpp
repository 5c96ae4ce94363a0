#include "passes/gather_rows_first.h"

#include <algorithm>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace etc {
namespace {

// Ops that compute row r of their output from row r of their row-indexed operands (row =
// index along dim 0): elementwise casts and arithmetic, reshapes that keep dim 0, and
// unpack_int4, which works within the last dim.
bool row_wise(OpKind op) {
  switch (op) {
    case OpKind::ToCopy:
    case OpKind::SubTensor:
    case OpKind::MulTensor:
    case OpKind::AddTensor:
    case OpKind::DivTensor:
    case OpKind::Reshape:
    case OpKind::View:
    case OpKind::UnpackInt4:
      return true;
    default:
      return false;
  }
}

// The table's chain: the row-wise nodes that compute `table` (rows: its dim 0, `rows` long)
// from constants, in program order, and the constants read row by row (the leaves to
// gather). nullopt when the table is computed any other way or a value of the chain is read
// outside it.
struct Chain {
  std::vector<NodeId> nodes;
  std::vector<ValueId> leaves;  // constants indexed by row, in the order first met
};

std::optional<Chain> chain_of(const Graph& g, ValueId table, int64_t rows) {
  Chain c;
  std::unordered_set<uint32_t> seen;
  // Depth first, without recursion (a chain may be as long as the program).
  std::vector<ValueId> stack{table};
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    const Value& val = g.value(v);
    if (!seen.insert(v.v).second) continue;
    if (val.kind == ValueKind::kConstant) {
      c.leaves.push_back(v);
      continue;
    }
    if (val.kind != ValueKind::kNodeOutput || val.uses.size() != 1 || g.is_live_out(v) ||
        val.spec.rank() == 0 || val.spec.sizes[0] != rows)
      return std::nullopt;
    const Node& n = g.node(val.producer);
    if (!row_wise(n.op) || n.outputs.size() != 1 || n.delegate != nullptr) return std::nullopt;
    const size_t rank = val.spec.rank();
    const bool unary = n.op != OpKind::SubTensor && n.op != OpKind::MulTensor &&
                       n.op != OpKind::AddTensor && n.op != OpKind::DivTensor;
    std::vector<ValueId> next;
    for (ValueId in : tensor_args(n)) {
      const TensorSpec& s = g.value(in).spec;
      // An operand indexed by row: as long as the output and row-sized at dim 0 (reshapes
      // and unary ops: their input, which must keep the rows). Others broadcast over rows.
      const bool by_row = s.rank() == rank && s.sizes[0] == rows;
      if (unary && (s.rank() == 0 || s.sizes[0] != rows)) return std::nullopt;
      if (!unary && !by_row) {
        // A constant or input broadcast over the rows stays as it is; a computed one is not
        // worth the trouble.
        if (g.value(in).kind == ValueKind::kNodeOutput) return std::nullopt;
        continue;
      }
      next.push_back(in);
    }
    stack.insert(stack.end(), next.rbegin(), next.rend());  // visited in argument order
    c.nodes.push_back(val.producer);
  }
  if (c.nodes.empty() || c.leaves.empty()) return std::nullopt;
  return c;
}

}  // namespace

Result<bool> gather_rows_first(Graph& graph, PassContext&) {
  bool changed = false;
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId e : order) {
    // (Copies, not references: adding nodes and values below moves the graph's storage.)
    const Node& emb = graph.node(e);
    if (emb.op != OpKind::Embedding || emb.delegate != nullptr) continue;
    const OpSchema& schema = op_info(OpKind::Embedding).schema;
    const ValueId table = std::get<ValueId>(emb.args[schema.arg_index("weight")]);
    const ValueId indices = std::get<ValueId>(emb.args[schema.arg_index("indices")]);
    const ArgValue padding = emb.args[schema.arg_index("padding_idx")];
    const ValueId old = emb.outputs[0];
    const std::string base = emb.name;
    const TensorSpec ts = graph.value(table).spec;
    const TensorSpec is = graph.value(indices).spec;
    if (ts.rank() != 2 || is.dynamism != ShapeDynamism::kStatic ||
        ts.dynamism != ShapeDynamism::kStatic || is.numel() >= ts.sizes[0])
      continue;  // gathering first saves nothing when as many rows are read as there are
    const int64_t rows = ts.sizes[0];
    std::optional<Chain> chain = chain_of(graph, table, rows);
    if (!chain) continue;
    // The order the chain's nodes run in (the order now: earlier rewrites added nodes).
    std::unordered_map<uint32_t, size_t> position;
    const std::span<const NodeId> now_order = graph.order();
    for (size_t i = 0; i < now_order.size(); ++i)
      position[now_order[i].v] = i;
    std::sort(chain->nodes.begin(), chain->nodes.end(),
              [&](NodeId a, NodeId b) { return position[a.v] < position[b.v]; });

    const Location where{.node = base};
    auto type_of = [&](ValueId id) -> const TensorSpec& { return graph.value(id).spec; };
    auto add = [&](OpKind op, std::vector<ArgValue> args,
                   const std::string& suffix) -> Result<ValueId> {
      std::vector<TensorType> types;
      ETC_RETURN_IF_ERROR(infer_types(op, args, type_of, where, &types));
      std::string stem = base;
      stem += ".";
      stem += suffix;
      const std::string name = graph.unique_value_name(stem);
      NodeId n = graph.add_node(op, graph.unique_node_name(stem), std::move(args), {name},
                                {TensorSpec::make(types[0].dtype, types[0].sizes)}, e);
      graph.node(n).origin = graph.node(e).origin;
      return graph.node(n).outputs[0];
    };
    // Sizes with dim 0 (the rows) replaced by the indices' dims.
    auto looked_up = [&](const std::vector<int64_t>& sizes) {
      std::vector<int64_t> out = is.sizes;
      out.insert(out.end(), sizes.begin() + 1, sizes.end());
      return out;
    };
    std::unordered_map<uint32_t, ValueId> now;  // old value -> its looked-up rows
    // Each leaf's rows: embedding over the leaf viewed as [rows, rest].
    for (const ValueId v : chain->leaves) {
      const std::vector<int64_t> sizes = graph.value(v).spec.sizes;  // a copy
      const int64_t rest = graph.value(v).spec.numel() / rows;
      ValueId flat = v;
      if (sizes.size() != 2) {
        ETC_ASSIGN_OR_RETURN(
            std::vector<ArgValue> a,
            bind_args(OpKind::Reshape, {{"self", v}, {"shape", std::vector<int64_t>{rows, rest}}}));
        ETC_ASSIGN_OR_RETURN(flat, add(OpKind::Reshape, std::move(a), "rows"));
      }
      ETC_ASSIGN_OR_RETURN(
          std::vector<ArgValue> a,
          bind_args(OpKind::Embedding,
                    {{"weight", flat}, {"indices", indices}, {"padding_idx", padding}}));
      ETC_ASSIGN_OR_RETURN(ValueId got, add(OpKind::Embedding, std::move(a), "gather"));
      if (sizes.size() != 2) {
        ETC_ASSIGN_OR_RETURN(
            std::vector<ArgValue> r,
            bind_args(OpKind::Reshape, {{"self", got}, {"shape", looked_up(sizes)}}));
        ETC_ASSIGN_OR_RETURN(got, add(OpKind::Reshape, std::move(r), "gathered"));
      }
      now[v.v] = got;
    }
    // The chain again over the looked-up rows.
    for (NodeId id : chain->nodes) {
      const OpKind op = graph.node(id).op;
      const ValueId out_old = graph.node(id).outputs[0];
      const OpSchema& s = op_info(op).schema;
      std::vector<ArgValue> args = graph.node(id).args;
      for (size_t i = 0; i < args.size(); ++i) {
        if (auto* v = std::get_if<ValueId>(&args[i])) {
          if (auto it = now.find(v->v); it != now.end()) *v = it->second;
        }
      }
      if (op == OpKind::Reshape || op == OpKind::View) {
        ArgValue& shape =
            args[static_cast<size_t>(s.arg_index(op == OpKind::Reshape ? "shape" : "size"))];
        shape = looked_up(graph.value(out_old).spec.sizes);
      }
      ETC_ASSIGN_OR_RETURN(ValueId out, add(op, std::move(args), "rows"));
      now[out_old.v] = out;
    }
    const ValueId result = now.at(table.v);
    const std::string name = graph.value(old).name;
    graph.replace_all_uses(old, result);
    graph.erase_node(e);
    // The whole-table chain is read by nothing now.
    for (auto it = chain->nodes.rbegin(); it != chain->nodes.rend(); ++it)
      graph.erase_node(*it);
    graph.rename_value(result, name);
    changed = true;
  }
  return changed;
}

}  // namespace etc
