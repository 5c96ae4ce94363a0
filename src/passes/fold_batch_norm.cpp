#include "passes/fold_batch_norm.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "support/file_io.h"

namespace etc {
namespace {

// The elements of a constant as doubles (float32/float64 only).
std::optional<std::vector<double>> read_floats(const TensorSpec& s) {
  if (!s.is_const || (s.dtype != DType::kFloat32 && s.dtype != DType::kFloat64))
    return std::nullopt;
  std::span<const uint8_t> bytes = s.constant.bytes();
  const auto n = static_cast<size_t>(s.numel());
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (s.dtype == DType::kFloat32) {
      float f;
      std::memcpy(&f, bytes.data() + i * 4, 4);
      out[i] = f;
    } else {
      std::memcpy(&out[i], bytes.data() + i * 8, 8);
    }
  }
  return out;
}

ConstantData write_floats(DType dtype, const std::vector<double>& v) {
  const size_t elem = dtype == DType::kFloat32 ? 4 : 8;
  uint8_t* data = nullptr;
  std::shared_ptr<const Blob> blob = make_writable_blob(v.size() * elem, &data);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kFloat32) {
      const auto f = static_cast<float>(v[i]);
      std::memcpy(data + i * 4, &f, 4);
    } else {
      std::memcpy(data + i * 8, &v[i], 8);
    }
  }
  return ConstantData{std::move(blob), 0, v.size() * elem};
}

// `w` (float32/float64, [channels, ...]) with row c multiplied by scale[c], each element
// computed in double and rounded once, written straight into the new constant: no copy of
// the weight in doubles (for resnet18's largest layer that would be 19 MB at once).
ConstantData scale_rows(const TensorSpec& w, const std::vector<double>& scale,
                        WritableArena& arena) {
  const size_t elem = w.dtype == DType::kFloat32 ? 4 : 8;
  const auto n = static_cast<size_t>(w.numel());
  const size_t per = n / std::max<size_t>(scale.size(), 1);
  std::span<const uint8_t> in = w.constant.bytes();
  const WritableArena::Piece piece = arena.allocate(std::max<size_t>(n * elem, 1));
  uint8_t* data = piece.data;
  for (size_t i = 0; i < n; ++i) {
    const double s = scale[i / std::max<size_t>(per, 1)];
    if (w.dtype == DType::kFloat32) {
      float f;
      std::memcpy(&f, in.data() + i * 4, 4);
      f = static_cast<float>(static_cast<double>(f) * s);
      std::memcpy(data + i * 4, &f, 4);
    } else {
      double d;
      std::memcpy(&d, in.data() + i * 8, 8);
      d *= s;
      std::memcpy(data + i * 8, &d, 8);
    }
  }
  // Made: out of the process until the writer reads it (past the arena's memory budget).
  piece.blob->release(piece.offset, n * elem);
  return ConstantData{piece.blob, piece.offset, n * elem};
}

const Value* constant_arg(const Graph& g, const Node& n, const char* name) {
  const ArgValue& a = n.args[static_cast<size_t>(op_info(n.op).schema.arg_index(name))];
  const auto* id = std::get_if<ValueId>(&a);
  if (id == nullptr) return nullptr;
  const Value& v = g.value(*id);
  return v.kind == ValueKind::kConstant ? &v : nullptr;
}

bool is_none(const Node& n, const char* name) {
  const ArgValue& a = n.args[static_cast<size_t>(op_info(n.op).schema.arg_index(name))];
  return std::holds_alternative<std::monostate>(a);
}

bool unread(const Graph& g, ValueId v) {
  return g.value(v).uses.empty() && !g.is_live_out(v);
}

}  // namespace

Result<bool> fold_batch_norm(Graph& graph, PassContext&) {
  bool changed = false;
  // The scaled weights: past kComputedWeightsInMemory in a temporary file (pass.h).
  WritableArena arena(kComputedWeightsInMemory);
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId bn_id : order) {
    const Node& bn = graph.node(bn_id);
    if (bn.erased || bn.op != OpKind::NativeBatchNormNoTraining || bn.outputs.size() != 3) continue;
    const auto* x = std::get_if<ValueId>(&bn.args[0]);
    if (x == nullptr) continue;
    const Value& conv_out = graph.value(*x);
    if (conv_out.kind != ValueKind::kNodeOutput || conv_out.uses.size() != 1 ||
        graph.is_live_out(*x) || !unread(graph, bn.outputs[1]) || !unread(graph, bn.outputs[2]))
      continue;
    const NodeId conv_id = conv_out.producer;
    const Node& conv = graph.node(conv_id);
    if (conv.op != OpKind::Convolution || conv.outputs.size() != 1) continue;
    const OpSchema& cs = op_info(conv.op).schema;
    if (std::get<bool>(conv.args[static_cast<size_t>(cs.arg_index("transposed"))])) continue;
    const Value* w = constant_arg(graph, conv, "weight");
    const Value* b = constant_arg(graph, conv, "bias");
    if (w == nullptr || (b == nullptr && !is_none(conv, "bias"))) continue;
    const Value* gamma = constant_arg(graph, bn, "weight");
    const Value* beta = constant_arg(graph, bn, "bias");
    const Value* mean = constant_arg(graph, bn, "running_mean");
    const Value* var = constant_arg(graph, bn, "running_var");
    if ((gamma == nullptr && !is_none(bn, "weight")) || (beta == nullptr && !is_none(bn, "bias")) ||
        mean == nullptr || var == nullptr)
      continue;
    const DType dtype = w->spec.dtype;
    if (w->spec.rank() < 1 || conv_out.spec.dtype != dtype) continue;
    const int64_t channels = w->spec.sizes[0];
    auto per_channel = [&](const Value* v) {
      return v == nullptr ||
             (v->spec.dtype == dtype && v->spec.rank() == 1 && v->spec.sizes[0] == channels);
    };
    if (!per_channel(b) || !per_channel(gamma) || !per_channel(beta) || !per_channel(mean) ||
        !per_channel(var))
      continue;
    if (w->spec.dtype != DType::kFloat32 && w->spec.dtype != DType::kFloat64) continue;
    std::optional<std::vector<double>> mv = read_floats(mean->spec), vv = read_floats(var->spec);
    if (!mv || !vv) continue;
    std::vector<double> bias(static_cast<size_t>(channels), 0.0);
    std::vector<double> g(static_cast<size_t>(channels), 1.0),
        be(static_cast<size_t>(channels), 0.0);
    if (b != nullptr) bias = *read_floats(b->spec);
    if (gamma != nullptr) g = *read_floats(gamma->spec);
    if (beta != nullptr) be = *read_floats(beta->spec);
    const double eps =
        std::get<double>(bn.args[static_cast<size_t>(op_info(bn.op).schema.arg_index("eps"))]);
    std::vector<double> scale(static_cast<size_t>(channels));
    for (size_t c = 0; c < static_cast<size_t>(channels); ++c) {
      scale[c] = g[c] / std::sqrt((*vv)[c] + eps);
      bias[c] = (bias[c] - (*mv)[c]) * scale[c] + be[c];
    }
    // New constants for the folded weight and bias; the old ones go when nothing reads them.
    TensorSpec ws = TensorSpec::make(dtype, w->spec.sizes);
    ws.constant = scale_rows(w->spec, scale, arena);
    TensorSpec bs = TensorSpec::make(dtype, {channels});
    bs.constant = write_floats(dtype, bias);
    const ValueId old_w = w->id;
    const std::optional<ValueId> old_b = b ? std::optional<ValueId>(b->id) : std::nullopt;
    std::vector<ValueId> bn_inputs = tensor_args(bn);
    const std::string name = graph.value(bn.outputs[0]).name;
    ValueId nw = graph.add_constant(graph.unique_value_name(w->name + ".bn_folded"), std::move(ws));
    ValueId nb = graph.add_constant(graph.unique_value_name(name + ".bias"), std::move(bs));
    graph.set_arg(conv_id, static_cast<uint32_t>(cs.arg_index("weight")), nw);
    graph.set_arg(conv_id, static_cast<uint32_t>(cs.arg_index("bias")), nb);
    const ValueId conv_value = *x;
    graph.replace_all_uses(bn.outputs[0], conv_value);
    graph.erase_node(bn_id);
    graph.rename_value(conv_value, name);  // what read the batch norm's output by name still does
    graph.erase_constant(old_w);
    if (old_b) graph.erase_constant(*old_b);
    for (ValueId in : bn_inputs)
      if (in != conv_value) graph.erase_constant(in);
    changed = true;
  }
  return changed;
}

}  // namespace etc
