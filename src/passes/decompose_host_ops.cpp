#include "passes/decompose_host_ops.h"

#include <functional>

namespace etc {
namespace {

class Rewriter {
 public:
  Rewriter(Graph& g, NodeId at) : g_(g), at_(at), base_(g.node(at).name) {}

  // Adds `op` before the node being rewritten; returns its output `index`.
  Result<ValueId> emit(OpKind op,
                       std::initializer_list<std::pair<std::string_view, ArgValue>> named,
                       const std::string& suffix, size_t index = 0) {
    ETC_ASSIGN_OR_RETURN(std::vector<ArgValue> args, bind_args(op, named));
    std::vector<TensorType> types;
    auto type_of = [this](ValueId id) -> const TensorSpec& { return g_.value(id).spec; };
    ETC_RETURN_IF_ERROR(infer_types(op, args, type_of, Location{.node = base_}, &types));
    std::vector<std::string> names;
    std::vector<TensorSpec> specs;
    for (size_t i = 0; i < types.size(); ++i) {
      names.push_back(
          g_.unique_value_name(base_ + "." + suffix + (i ? "." + std::to_string(i) : "")));
      specs.push_back(TensorSpec::make(types[i].dtype, types[i].sizes));
    }
    NodeId n = g_.add_node(op, g_.unique_node_name(base_ + "." + suffix), std::move(args),
                           std::move(names), std::move(specs), at_);
    g_.node(n).origin = g_.node(at_).origin;
    return g_.node(n).outputs[index];
  }

  // Replaces the rewritten node's output 0 by `result` and removes the node.
  void finish(ValueId result) {
    ValueId old = g_.node(at_).outputs[0];
    std::string name = g_.value(old).name;
    g_.replace_all_uses(old, result);
    g_.erase_node(at_);
    g_.rename_value(result, name);
  }

  Result<ValueId> hardsigmoid(ValueId x) {
    ETC_ASSIGN_OR_RETURN(
        ValueId t, emit(OpKind::AddScalar, {{"self", x}, {"other", Scalar{int64_t{3}}}}, "plus3"));
    ETC_ASSIGN_OR_RETURN(
        ValueId c,
        emit(OpKind::Hardtanh,
             {{"self", t}, {"min_val", Scalar{int64_t{0}}}, {"max_val", Scalar{int64_t{6}}}},
             "relu6"));
    return emit(OpKind::DivScalar, {{"self", c}, {"other", Scalar{int64_t{6}}}}, "div6");
  }

 private:
  Graph& g_;
  NodeId at_;
  std::string base_;
};

// The ETC_DECOMPOSED functions of ops.def: each adds the ops that compute node `n` before
// it and finishes `r` with the result.
using Arg = std::function<const ArgValue&(const char*)>;

Status decompose_linear(Graph& g, const Node& n, Rewriter& r, const Arg& arg) {
  ValueId x = std::get<ValueId>(arg("input"));
  ValueId w = std::get<ValueId>(arg("weight"));
  ArgValue bias = arg("bias");
  std::vector<int64_t> x_sizes = g.value(x).spec.sizes;
  std::vector<int64_t> out_sizes = g.value(n.outputs[0]).spec.sizes;
  ETC_ASSIGN_OR_RETURN(
      ValueId wt,
      r.emit(OpKind::Permute, {{"self", w}, {"dims", std::vector<int64_t>{1, 0}}}, "weight_t"));
  ValueId x2 = x;
  if (x_sizes.size() != 2) {
    int64_t in = x_sizes.back();
    int64_t rows = in == 0 ? 0 : g.value(x).spec.numel() / in;
    ETC_ASSIGN_OR_RETURN(
        x2, r.emit(OpKind::View, {{"self", x}, {"size", std::vector<int64_t>{rows, in}}}, "in2d"));
  }
  ValueId y2;
  if (std::holds_alternative<ValueId>(bias)) {
    ETC_ASSIGN_OR_RETURN(
        y2, r.emit(OpKind::Addmm, {{"self", bias}, {"mat1", x2}, {"mat2", wt}}, "addmm"));
  } else {
    ETC_ASSIGN_OR_RETURN(y2, r.emit(OpKind::Mm, {{"self", x2}, {"mat2", wt}}, "mm"));
  }
  ValueId y = y2;
  if (x_sizes.size() != 2) {
    ETC_ASSIGN_OR_RETURN(y, r.emit(OpKind::View, {{"self", y2}, {"size", out_sizes}}, "out"));
  }
  r.finish(y);
  return Status();
}

Status decompose_silu(Graph&, const Node&, Rewriter& r, const Arg& arg) {
  ValueId x = std::get<ValueId>(arg("self"));
  ETC_ASSIGN_OR_RETURN(ValueId s, r.emit(OpKind::Sigmoid, {{"self", x}}, "sigmoid"));
  ETC_ASSIGN_OR_RETURN(ValueId y, r.emit(OpKind::MulTensor, {{"self", x}, {"other", s}}, "mul"));
  r.finish(y);
  return Status();
}

Status decompose_hardsigmoid(Graph&, const Node&, Rewriter& r, const Arg& arg) {
  ETC_ASSIGN_OR_RETURN(ValueId y, r.hardsigmoid(std::get<ValueId>(arg("self"))));
  r.finish(y);
  return Status();
}

Status decompose_hardswish(Graph&, const Node&, Rewriter& r, const Arg& arg) {
  ValueId x = std::get<ValueId>(arg("self"));
  ETC_ASSIGN_OR_RETURN(ValueId hs, r.hardsigmoid(x));
  ETC_ASSIGN_OR_RETURN(ValueId y, r.emit(OpKind::MulTensor, {{"self", x}, {"other", hs}}, "mul"));
  r.finish(y);
  return Status();
}

Status decompose_max_pool2d(Graph&, const Node&, Rewriter& r, const Arg& arg) {
  ETC_ASSIGN_OR_RETURN(ValueId y, r.emit(OpKind::MaxPool2dWithIndices,
                                         {{"self", arg("self")},
                                          {"kernel_size", arg("kernel_size")},
                                          {"stride", arg("stride")},
                                          {"padding", arg("padding")},
                                          {"dilation", arg("dilation")},
                                          {"ceil_mode", arg("ceil_mode")}},
                                         "with_indices"));
  r.finish(y);
  return Status();
}

Status decompose_reshape(Graph&, const Node&, Rewriter& r, const Arg& arg) {
  ETC_ASSIGN_OR_RETURN(
      ValueId y, r.emit(OpKind::View, {{"self", arg("self")}, {"size", arg("shape")}}, "view"));
  r.finish(y);
  return Status();
}

using DecomposeFn = Status (*)(Graph&, const Node&, Rewriter&, const Arg&);

// Per op of the table: its ETC_DECOMPOSED function, or null.
constexpr DecomposeFn kDecompose[] = {
#define ETC_OUT(text) nullptr
#define ETC_DECOMPOSED(fn) &fn
#define ETC_NO_KERNEL nullptr
#define ETC_OP(e, schema, kernel, infer, cuda) kernel,
#include "graph/ops.def"
#undef ETC_OP
#undef ETC_NO_KERNEL
#undef ETC_DECOMPOSED
#undef ETC_OUT
};

DecomposeFn decomposition(OpKind op) {
  return kDecompose[static_cast<size_t>(op)];
}

Status rewrite(Graph& g, NodeId id) {
  const Node& n = g.node(id);
  Rewriter r(g, id);
  Arg arg = [&](const char* name) -> const ArgValue& {
    return n.args[static_cast<size_t>(op_info(n.op).schema.arg_index(name))];
  };
  return decomposition(n.op)(g, n, r, arg);
}

}  // namespace

Result<bool> decompose_host_ops(Graph& graph, PassContext&) {
  std::vector<NodeId> targets;
  for (NodeId id : graph.order()) {
    if (decomposition(graph.node(id).op) != nullptr) targets.push_back(id);
  }
  for (NodeId id : targets) {
    ETC_RETURN_IF_ERROR_CTX(rewrite(graph, id),
                            "while decomposing node '" + graph.node(id).name + "'");
  }
  return !targets.empty();
}

}  // namespace etc
