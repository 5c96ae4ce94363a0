#include "passes/fuse_weight_only.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "graph/int4.h"
#include "graph/weight_only.h"
#include "support/file_io.h"
#include "support/half.h"

namespace etc {
namespace {

const ArgValue& arg(const Node& n, const char* name) {
  return n.args[static_cast<size_t>(op_info(n.op).schema.arg_index(name))];
}

std::optional<ValueId> value_arg(const Node& n, const char* name) {
  const auto* id = std::get_if<ValueId>(&arg(n, name));
  return id != nullptr ? std::optional<ValueId>(*id) : std::nullopt;
}

// The node that computed v, where v is read by that one reader alone (so the node can go
// once the reader does).
const Node* sole_producer(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kNodeOutput || val.uses.size() != 1 || g.is_live_out(v))
    return nullptr;
  const Node& n = g.node(val.producer);
  return n.outputs.size() == 1 ? &n : nullptr;
}

// A constant read once, with contiguous dims, or null.
const Value* sole_constant(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kConstant || val.uses.size() != 1 || g.is_live_out(v) ||
      val.spec.dim_order != contiguous_dim_order(val.spec.rank()) ||
      val.spec.constant.size != static_cast<size_t>(val.spec.nbytes()))
    return nullptr;
  return &val;
}

// Whether a scalar argument is absent or 1.
bool is_one(const Node& n, const char* name) {
  const ArgValue& a = arg(n, name);
  if (std::holds_alternative<std::monostate>(a)) return true;
  const auto* s = std::get_if<Scalar>(&a);
  return s != nullptr && s->to_double() == 1.0;
}

// One product's chain, found from its weight back to the constants.
struct Chain {
  std::vector<NodeId> nodes;  // the product, then its weight's producers back to the constants
  ArgValue input, bias;
  ValueId weight, scale;
  std::optional<ValueId> zero;  // a constant: of the model's dtype, or int8
  int64_t n = 0, groups = 0, group_size = 0;
  bool int4 = false;
  // Int8WeightOnlyConfig's form: W^T [K, N], written as `weight` [N, K] when the chain is
  // fused (a scale of ones beside it), then erased.
  std::optional<ValueId> transposed;
};

// The weight W [N, K] a product multiplies by as W^T, its input and bias: linear(x, W, b),
// mm(x, W^T), addmm(b, x, W^T) (beta and alpha 1) and bmm(x, expand(W^T)) (W^T broadcast over
// a batch), W^T a permute or transpose read by the product alone (and the expand). False for
// any other product.
bool product_of(const Graph& g, const Node& p, Chain& c, ValueId* w) {
  c.nodes.push_back(p.id);
  if (p.op == OpKind::Linear) {
    c.input = arg(p, "input");
    c.bias = arg(p, "bias");
    const std::optional<ValueId> v = value_arg(p, "weight");
    if (!v) return false;
    *w = *v;
    return true;
  }
  std::optional<ValueId> wt;
  if (p.op == OpKind::Bmm) {
    // matmul of a batch of rows by a matrix, as PyTorch decomposes it for a non-contiguous
    // input: bmm(x [B, M, K], expand(W^T, [B, K, N])).
    c.input = arg(p, "self");
    c.bias = std::monostate();
    const std::optional<ValueId> e = value_arg(p, "mat2");
    const Node* expand = e ? sole_producer(g, *e) : nullptr;
    if (expand == nullptr || expand->op != OpKind::Expand) return false;
    wt = value_arg(*expand, "self");
    // Only a batch dim added: [K, N] -> [B, K, N] (an expand may also broadcast a dim of 1).
    const std::vector<int64_t>& to = g.value(*e).spec.sizes;
    if (!wt || g.value(*wt).spec.rank() != 2 || to.size() != 3 ||
        std::vector<int64_t>(to.begin() + 1, to.end()) != g.value(*wt).spec.sizes)
      return false;
    c.nodes.push_back(expand->id);
  } else if (p.op == OpKind::Mm) {
    c.input = arg(p, "self");
    c.bias = std::monostate();
    wt = value_arg(p, "mat2");
  } else if (p.op == OpKind::Addmm) {
    if (!is_one(p, "beta") || !is_one(p, "alpha")) return false;
    c.input = arg(p, "mat1");
    c.bias = arg(p, "self");
    wt = value_arg(p, "mat2");
  } else {
    return false;
  }
  const Node* t = wt ? sole_producer(g, *wt) : nullptr;
  if (t == nullptr) return false;
  if (t->op == OpKind::Permute) {
    if (std::get_if<std::vector<int64_t>>(&arg(*t, "dims")) == nullptr ||
        std::get<std::vector<int64_t>>(arg(*t, "dims")) != std::vector<int64_t>{1, 0})
      return false;
  } else if (t->op == OpKind::TransposeInt) {
    // Of a rank-2 tensor: a transpose unless both dims are the same one.
    const auto* d0 = std::get_if<int64_t>(&arg(*t, "dim0"));
    const auto* d1 = std::get_if<int64_t>(&arg(*t, "dim1"));
    if (d0 == nullptr || d1 == nullptr || ((*d0 % 2) + 2) % 2 == ((*d1 % 2) + 2) % 2) return false;
  } else {
    return false;
  }
  const std::optional<ValueId> v = value_arg(*t, "self");
  if (!v || g.value(*v).spec.rank() != 2) return false;
  c.nodes.push_back(t->id);
  *w = *v;
  return true;
}

std::optional<Chain> chain_of(const Graph& g, const Node& product) {
  Chain c;
  ValueId w;
  if (!product_of(g, product, c, &w)) return std::nullopt;
  const auto* x = std::get_if<ValueId>(&c.input);
  if (x == nullptr) return std::nullopt;
  const DType t = g.value(*x).spec.dtype;
  if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kBFloat16) return std::nullopt;
  const TensorSpec& ws = g.value(w).spec;
  if (ws.rank() != 2) return std::nullopt;
  const int64_t n = ws.sizes[0], k = ws.sizes[1];
  // The bias, if any, must be [N] of the model's dtype (the op's rule).
  if (const auto* b = std::get_if<ValueId>(&c.bias)) {
    const TensorSpec& bs = g.value(*b).spec;
    if (bs.rank() != 1 || bs.sizes[0] != n || bs.dtype != t) return std::nullopt;
  }
  const Node* step = sole_producer(g, w);
  if (step == nullptr) return std::nullopt;
  // [N, G, g] viewed as [N, K].
  if (step->op == OpKind::Reshape || step->op == OpKind::View) {
    c.nodes.push_back(step->id);
    const std::optional<ValueId> in = value_arg(*step, "self");
    if (!in) return std::nullopt;
    const TensorSpec& s = g.value(*in).spec;
    if (s.rank() != 3 || s.sizes[0] != n || s.sizes[1] * s.sizes[2] != k) return std::nullopt;
    step = sole_producer(g, *in);
    if (step == nullptr) return std::nullopt;
  }
  const std::vector<int64_t> shape = g.value(step->outputs[0]).spec.sizes;  // the chain's
  const size_t rank = shape.size();
  if (rank != 2 && rank != 3) return std::nullopt;
  c.n = n;
  c.groups = rank == 3 ? shape[1] : 1;
  c.group_size = shape.back();
  const std::vector<int64_t> per_group_sizes =
      rank == 3 ? std::vector<int64_t>{n, c.groups, 1} : std::vector<int64_t>{n, 1};
  // An operand per group: a constant read once, of the model's dtype (or, with `widened`,
  // an int8 constant widened to it by a _to_copy read once: recorded in c.nodes).
  auto per_group = [&](ValueId v, bool widened) -> std::optional<ValueId> {
    if (widened && g.value(v).kind == ValueKind::kNodeOutput) {
      const Node* cast = sole_producer(g, v);
      if (cast == nullptr || cast->op != OpKind::ToCopy || g.value(v).spec.dtype != t)
        return std::nullopt;
      const std::optional<ValueId> in = value_arg(*cast, "self");
      const Value* ci = in ? sole_constant(g, *in) : nullptr;
      if (ci == nullptr || ci->spec.dtype != DType::kInt8 || ci->spec.sizes != per_group_sizes)
        return std::nullopt;
      c.nodes.push_back(cast->id);
      return *in;
    }
    const Value* cv = sole_constant(g, v);
    if (cv == nullptr || cv->spec.dtype != t || cv->spec.sizes != per_group_sizes)
      return std::nullopt;
    return v;
  };
  // mul(self, scale) or mul(scale, self).
  if (step->op != OpKind::MulTensor) return std::nullopt;
  c.nodes.push_back(step->id);
  {
    const std::optional<ValueId> a = value_arg(*step, "self"), b = value_arg(*step, "other");
    if (!a || !b) return std::nullopt;
    std::optional<ValueId> scale = per_group(*b, false), rest = a;
    if (!scale) {
      scale = per_group(*a, false);
      rest = b;
    }
    if (!scale || g.value(*rest).spec.sizes != shape) return std::nullopt;
    c.scale = *scale;
    step = sole_producer(g, *rest);
    if (step == nullptr) return std::nullopt;
  }
  // sub(self, zero_point), alpha 1: optional (a symmetric scheme has none).
  if (step->op == OpKind::SubTensor) {
    c.nodes.push_back(step->id);
    const std::optional<ValueId> a = value_arg(*step, "self"), b = value_arg(*step, "other");
    if (!is_one(*step, "alpha") || !a || !b) return std::nullopt;
    c.zero = per_group(*b, true);
    if (!c.zero || g.value(*a).spec.sizes != shape) return std::nullopt;
    step = sole_producer(g, *a);
    if (step == nullptr) return std::nullopt;
  }
  // _to_copy of the int8 values to the model's dtype.
  if (step->op != OpKind::ToCopy) return std::nullopt;
  c.nodes.push_back(step->id);
  const std::optional<ValueId> q = value_arg(*step, "self");
  if (!q || g.value(step->outputs[0]).spec.dtype != t || g.value(*q).spec.dtype != DType::kInt8)
    return std::nullopt;
  // The int8 values: a constant, or a 4-bit one unpacked.
  if (const Value* cq = sole_constant(g, *q)) {
    if (cq->spec.sizes != shape) return std::nullopt;
    c.weight = *q;
    return c;
  }
  step = sole_producer(g, *q);
  if (step == nullptr || step->op != OpKind::UnpackInt4) return std::nullopt;
  c.nodes.push_back(step->id);
  const std::optional<ValueId> packed = value_arg(*step, "packed");
  if (!packed) return std::nullopt;
  const Value* cp = sole_constant(g, *packed);
  // Rows of groups are rows of K values only when each group fills whole bytes.
  if (cp == nullptr || (rank == 3 && c.group_size % 2 != 0)) return std::nullopt;
  c.weight = *packed;
  c.int4 = true;
  return c;
}

// torchao's Int8WeightOnlyConfig: mm(x, _to_copy(W^T)), W^T an int8 constant [K, N] (the
// export folded the transpose) widened to the model's dtype, the scale multiplying the
// product's result after (a step of its own, which stays). The input's dtype and the
// product's out are checked by fits().
std::optional<Chain> int8_product_of(const Graph& g, const Node& product) {
  if (product.op != OpKind::Mm) return std::nullopt;
  Chain c;
  c.nodes.push_back(product.id);
  c.input = arg(product, "self");
  c.bias = std::monostate();
  const auto* x = std::get_if<ValueId>(&c.input);
  const std::optional<ValueId> b = value_arg(product, "mat2");
  const Node* cast = b ? sole_producer(g, *b) : nullptr;
  if (x == nullptr || cast == nullptr || cast->op != OpKind::ToCopy) return std::nullopt;
  const std::optional<ValueId> q = value_arg(*cast, "self");
  const Value* cq = q ? sole_constant(g, *q) : nullptr;
  if (cq == nullptr || cq->spec.dtype != DType::kInt8 || cq->spec.rank() != 2 ||
      g.value(*b).spec.dtype != g.value(*x).spec.dtype)
    return std::nullopt;
  c.nodes.push_back(cast->id);
  c.n = cq->spec.sizes[1];
  c.groups = 1;
  c.group_size = cq->spec.sizes[0];
  c.transposed = *q;
  return c;
}

// W [N, K] from W^T [K, N] (int8), in blocks of 64 x 64, past the arena's memory budget to a
// temporary file; W^T's pages leave the process once read.
ConstantData transpose_int8(const TensorSpec& wt, WritableArena& arena) {
  const int64_t k = wt.sizes[0], n = wt.sizes[1];
  const size_t nbytes = static_cast<size_t>(k * n);
  const WritableArena::Piece piece = arena.allocate(std::max<size_t>(nbytes, 1));
  const uint8_t* src = wt.constant.bytes().data();
  constexpr int64_t kBlock = 64;
  for (int64_t k0 = 0; k0 < k; k0 += kBlock) {
    for (int64_t n0 = 0; n0 < n; n0 += kBlock) {
      for (int64_t j = n0; j < std::min(n, n0 + kBlock); ++j) {
        for (int64_t i = k0; i < std::min(k, k0 + kBlock); ++i)
          piece.data[j * k + i] = src[i * n + j];
      }
    }
  }
  piece.blob->release(piece.offset, nbytes);
  wt.constant.blob->release(wt.constant.offset, wt.constant.size);
  return ConstantData{piece.blob, piece.offset, nbytes};
}

// A constant [n, 1] of ones in dtype t.
ConstantData ones(DType t, int64_t n) {
  const size_t elem = static_cast<size_t>(dtype_size(t));
  uint8_t* data = nullptr;
  std::shared_ptr<const Blob> blob = make_writable_blob(static_cast<size_t>(n) * elem, &data);
  const float one = 1.0f;
  const uint16_t one16 = t == DType::kBFloat16 ? float_to_bfloat16(one) : float_to_half(one);
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(data + static_cast<size_t>(i) * elem,
                t == DType::kFloat32 ? static_cast<const void*>(&one) : &one16, elem);
  }
  return ConstantData{std::move(blob), 0, static_cast<size_t>(n) * elem};
}

// Whether the op the chain becomes is well formed and computes the product's out: its
// geometry by the op's rule (graph/weight_only.h), with the sizes the constants will be
// given, and the out's dtype and sizes. Checked before the graph is touched; a chain that
// fails keeps its steps.
bool fits(const Graph& g, const Chain& c, const TensorSpec& out) {
  const auto* x = std::get_if<ValueId>(&c.input);
  if (x == nullptr || c.group_size < 1 || c.groups < 1) return false;
  const TensorSpec& xs = g.value(*x).spec;
  const int64_t k = c.groups * c.group_size;
  using weight_only::Operand;
  const std::vector<int64_t> w_sizes{c.n, c.int4 ? int4::row_bytes(k) : k};
  const std::vector<int64_t> per_group{c.n, c.groups};
  const Operand zero{c.zero ? g.value(*c.zero).spec.dtype : xs.dtype, per_group};
  std::optional<Operand> bias;
  if (const auto* b = std::get_if<ValueId>(&c.bias))
    bias = Operand{g.value(*b).spec.dtype, g.value(*b).spec.sizes};
  weight_only::Geometry geo;
  if (weight_only::check({xs.dtype, xs.sizes}, {c.int4 ? DType::kUInt8 : DType::kInt8, w_sizes},
                         {xs.dtype, per_group}, c.zero ? &zero : nullptr, c.group_size,
                         bias ? &*bias : nullptr, &geo))
    return false;
  std::vector<int64_t> sizes = xs.sizes;
  sizes.back() = c.n;
  return out.dtype == xs.dtype && out.sizes == sizes;
}

// The constant viewed with other sizes (its bytes and everything else unchanged).
void resize_constant(Graph& g, ValueId v, std::vector<int64_t> sizes) {
  TensorSpec& s = g.value(v).spec;
  s.dim_order = contiguous_dim_order(sizes.size());
  s.sizes = std::move(sizes);
}

Status fuse_in(Graph& g, WritableArena& arena) {
  const std::vector<NodeId> order(g.order().begin(), g.order().end());
  for (NodeId id : order) {
    const OpKind op = g.node(id).op;
    if (g.node(id).erased ||
        (op != OpKind::Linear && op != OpKind::Mm && op != OpKind::Addmm && op != OpKind::Bmm))
      continue;
    std::optional<Chain> c = chain_of(g, g.node(id));
    if (!c) c = int8_product_of(g, g.node(id));
    if (!c || !fits(g, *c, g.value(g.node(id).outputs[0]).spec)) continue;
    if (c->transposed) {
      // W written [N, K], and a scale of ones: the product's value is mm's, exactly.
      const ValueId wt = *c->transposed;
      const DType t = g.value(std::get<ValueId>(c->input)).spec.dtype;
      TensorSpec w = TensorSpec::make(DType::kInt8, {c->n, c->group_size});
      w.constant = transpose_int8(g.value(wt).spec, arena);
      const std::string wname = g.value(wt).name;
      c->weight = g.add_constant(g.unique_value_name(wname + ".rows"), std::move(w));
      TensorSpec one = TensorSpec::make(t, {c->n, 1});
      one.constant = ones(t, c->n);
      c->scale = g.add_constant(g.unique_value_name(wname + ".unit_scale"), std::move(one));
    } else {
      // The chain's constants, viewed as the op takes them (the same bytes).
      const int64_t k = c->groups * c->group_size;
      resize_constant(g, c->weight, {c->n, c->int4 ? int4::row_bytes(k) : k});
      resize_constant(g, c->scale, {c->n, c->groups});
    }
    // (Copies, not references: adding a node below moves the graph's storage.)
    const std::string name = g.node(id).name;
    const std::string origin = g.node(id).origin;
    const ValueId out = g.node(id).outputs[0];
    const std::string out_name = g.value(out).name;
    if (c->zero) resize_constant(g, *c->zero, {c->n, c->groups});
    ETC_ASSIGN_OR_RETURN(
        std::vector<ArgValue> args,
        bind_args(OpKind::WeightOnlyLinear,
                  {{"input", c->input},
                   {"weight", c->weight},
                   {"scale", c->scale},
                   {"zero_point", c->zero ? ArgValue(*c->zero) : ArgValue(std::monostate())},
                   {"group_size", c->group_size},
                   {"bias", c->bias}}));
    std::vector<TensorType> types;
    auto type_of = [&](ValueId v) -> const TensorSpec& { return g.value(v).spec; };
    ETC_RETURN_IF_ERROR(
        infer_types(OpKind::WeightOnlyLinear, args, type_of, Location{.node = name}, &types));
    TensorSpec fused_spec = TensorSpec::make(types[0].dtype, types[0].sizes);
    fused_spec.dynamism = g.value(out).spec.dynamism;
    const NodeId fused = g.add_node(
        OpKind::WeightOnlyLinear, g.unique_node_name(name + ".weight_only"), std::move(args),
        {g.unique_value_name(out_name + ".weight_only")}, {fused_spec}, id);
    g.node(fused).origin = origin;
    const ValueId result = g.node(fused).outputs[0];
    g.replace_all_uses(out, result);
    for (NodeId n : c->nodes) {
      if (!g.erase_node(n))
        return internal_error("fuse-weight-only: could not remove node '" + g.node(n).name + "'");
    }
    if (c->transposed) g.erase_constant(*c->transposed);
    g.rename_value(result, out_name);
  }
  return Status();
}

}  // namespace

Result<bool> fuse_weight_only(Graph& graph, PassContext&) {
  bool changed = false;
  // Weights written transposed: past kComputedWeightsInMemory in a temporary file (pass.h).
  WritableArena arena(kComputedWeightsInMemory);
  for (NodeId id : std::vector<NodeId>(graph.order().begin(), graph.order().end())) {
    Node& call = graph.node(id);
    if (call.op != OpKind::DelegateCall || call.delegate == nullptr ||
        call.delegate->device.type != DeviceType::kCUDA)
      continue;
    Graph& sub = *call.delegate->graph;
    const size_t before = sub.order().size();
    ETC_RETURN_IF_ERROR(fuse_in(sub, arena));
    changed |= sub.order().size() != before;
  }
  return changed;
}

}  // namespace etc
