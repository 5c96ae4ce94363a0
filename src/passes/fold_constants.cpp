#include "passes/fold_constants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "consteval/evaluate.h"

namespace etc {
namespace {

// The most elements of an 8-bit integer constant that a widening cast folds: biases and
// zero points fold, weight matrices stay packed.
constexpr int64_t kMaxWidenedQuantized = 4096;

// Whether casting `in` to `to` widens a packed quantized weight: more than
// kMaxWidenedQuantized 8-bit integers cast to a wider type (float for DequantizeLinear, int32
// or int64 for the integer products). Folding it would store the weight at 2-8 times its
// size; it stays packed in the program and is widened at run time.
bool widens_packed_weight(const TensorSpec& in, DType to) {
  return (in.dtype == DType::kInt8 || in.dtype == DType::kUInt8) && dtype_size(to) > 1 &&
         in.numel() > kMaxWidenedQuantized;
}

struct Folder {
  const Graph& g;
  const Node& n;
  WritableArena& arena;  // memory for the evaluated results
  const OpSchema& schema = op_info(n.op).schema;

  const ArgValue& arg(const char* name) const {
    return n.args[static_cast<size_t>(schema.arg_index(name))];
  }
  const TensorSpec& self() const { return g.value(std::get<ValueId>(n.args[0])).spec; }

  std::optional<ConstantData> evaluated() const;

  // The folded bytes of output 0, or nullopt when this node is not foldable.
  std::optional<ConstantData> run() const {
    const TensorSpec& out = g.value(n.outputs[0]).spec;
    const size_t elem = static_cast<size_t>(dtype_size(out.dtype));
    auto fresh = [&](std::string bytes) {
      size_t size = bytes.size();
      return ConstantData{make_blob(std::move(bytes)), 0, size};
    };
    switch (n.op) {
      case OpKind::FullLike: {
        const Scalar& v = std::get<Scalar>(arg("fill_value"));
        std::string bytes(static_cast<size_t>(out.nbytes()), '\0');
        if (out.numel() > 0) {
          if (dtype_is_float(out.dtype)) {
            store_float_as(out.dtype, v.to_double(), bytes.data());
          } else {
            const auto i = static_cast<int64_t>(v.to_double());
            std::memcpy(bytes.data(), &i, elem);  // little-endian: the low bytes
          }
          for (size_t k = elem; k < bytes.size(); k += elem)
            std::memcpy(bytes.data() + k, bytes.data(), elem);
        }
        return fresh(std::move(bytes));
      }
      case OpKind::View:
      case OpKind::Reshape:
      case OpKind::Clone:
      case OpKind::SqueezeDim:
      case OpKind::SqueezeDims:
      case OpKind::Unsqueeze:
        return self().constant;  // same elements, same order: share the bytes
      case OpKind::UnpackInt4:   // a weight stored two values a byte stays so
        return std::nullopt;
      case OpKind::ToCopy:
        if (self().dtype == out.dtype) return self().constant;  // same elements: share
        if (widens_packed_weight(self(), out.dtype)) return std::nullopt;
        break;
      default:
        break;
    }
    return evaluated();
  }
};

// The bytes of output 0 computed by the op's CPU kernel (consteval/evaluate.h): every op
// but the shape-only ones above (transposes, slices, cat, casts, arithmetic), when the op
// is evaluable, has one output, and folding keeps the program small (a dequantized weight
// or an outer product stays a node). Results go into the pass's arena: many medium-sized
// ones (a model's transposed weights) fill huge pages. A kernel's refusal is left for the
// verifier and the runtime to report, where it is located.
std::optional<ConstantData> Folder::evaluated() const {
  if (!why_not_evaluable(n.op).empty()) return std::nullopt;
  int64_t in_bytes = 0;
  for (ValueId v : tensor_args(n))
    in_bytes += g.value(v).spec.nbytes();
  if (!keeps_program_small(in_bytes, g.value(n.outputs[0]).spec.nbytes())) return std::nullopt;
  Result<std::vector<ConstantData>> r = evaluate_node(g, n, &arena);
  if (!r.ok()) return std::nullopt;
  return std::move(r->front());
}

bool all_inputs_constant(const Graph& g, const Node& n) {
  std::vector<ValueId> ins = tensor_args(n);
  return !ins.empty() && std::all_of(ins.begin(), ins.end(), [&](ValueId v) {
    return g.value(v).kind == ValueKind::kConstant;
  });
}

// Moves the run-time dequantization of packed weights (an 8-bit constant's widening, left
// above, or a 4-bit one's unpacking, and the nodes after it that read only constants and such
// values) to just before the first node that reads its result. A QDQ model lists every weight's
// DequantizeLinear first; in that order all the widened weights would be live at once. Returns
// whether the order changed.
bool sink_widened_weights(Graph& graph) {
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  size_t ids = 0;
  for (NodeId id : order)
    ids = std::max<size_t>(ids, id.v + 1);
  std::vector<char> sunk(ids, 0);
  bool any = false;
  auto known = [&](ValueId v) {
    const Value& val = graph.value(v);
    return val.kind == ValueKind::kConstant ||
           (val.kind == ValueKind::kNodeOutput && sunk[val.producer.v]);
  };
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    if (n.delegate != nullptr) continue;
    std::vector<ValueId> ins = tensor_args(n);
    if (ins.empty() || !std::all_of(ins.begin(), ins.end(), known)) continue;
    const bool root =
        graph.value(ins[0]).kind == ValueKind::kConstant &&
        (n.op == OpKind::UnpackInt4 ||
         (n.op == OpKind::ToCopy &&
          widens_packed_weight(graph.value(ins[0]).spec, graph.value(n.outputs[0]).spec.dtype)));
    const bool follows = std::any_of(ins.begin(), ins.end(), [&](ValueId v) {
      return graph.value(v).kind == ValueKind::kNodeOutput;
    });
    if (root || follows) {
      sunk[id.v] = 1;
      any = true;
    }
  }
  if (!any) return false;
  // The new order: every other node in place, each preceded by the sunk nodes it needs
  // (depth first, producers before users) that are not placed yet; sunk nodes nothing
  // reads (graph outputs) go last.
  std::vector<NodeId> placed;
  placed.reserve(order.size());
  std::vector<char> done(ids, 0);
  std::function<void(NodeId)> place = [&](NodeId id) {
    if (done[id.v]) return;
    done[id.v] = 1;
    for (ValueId v : tensor_args(graph.node(id))) {
      const Value& val = graph.value(v);
      if (val.kind == ValueKind::kNodeOutput && sunk[val.producer.v]) place(val.producer);
    }
    placed.push_back(id);
  };
  for (NodeId id : order) {
    if (!sunk[id.v]) place(id);
  }
  for (NodeId id : order)
    place(id);
  return placed != order && graph.set_order(placed);
}

}  // namespace

Result<bool> fold_constants(Graph& graph, PassContext&) {
  bool changed = false;
  // Past kComputedWeightsInMemory folded bytes (a large model's transposed weights), results go to
  // a temporary file and leave the process once made: the export's peak memory does not grow with
  // the model.
  WritableArena arena(kComputedWeightsInMemory);
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    if (n.outputs.size() != 1 || n.delegate != nullptr || graph.is_live_out(n.outputs[0])) continue;
    // full_like reads only its self's shape: a static one folds whatever self is.
    const bool static_fill = n.op == OpKind::FullLike &&
                             graph.value(n.outputs[0]).spec.dynamism == ShapeDynamism::kStatic;
    if (!static_fill && !all_inputs_constant(graph, n)) continue;
    std::optional<ConstantData> data = Folder{graph, n, arena}.run();
    if (!data) continue;
    ValueId out = n.outputs[0];
    TensorSpec spec = TensorSpec::make(graph.value(out).spec.dtype, graph.value(out).spec.sizes);
    spec.constant = std::move(*data);
    std::string name = graph.value(out).name;
    std::vector<ValueId> inputs = tensor_args(n);
    if (spec.constant.blob) spec.constant.blob->release(spec.constant.offset, spec.constant.size);
    ValueId folded = graph.add_constant(graph.unique_value_name(name + ".folded"), std::move(spec));
    graph.replace_all_uses(out, folded);
    graph.erase_node(id);
    // An input nothing else reads goes now (not at the next dce): a mapped weight's pages are
    // released as soon as its folded form exists, so folding does not hold both.
    for (ValueId in : inputs)
      graph.erase_constant(in);
    graph.rename_value(folded, name);  // the original name is free again
    changed = true;
  }
  if (sink_widened_weights(graph)) changed = true;
  return changed;
}

}  // namespace etc
