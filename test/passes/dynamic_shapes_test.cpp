// mark_dynamic_shapes on small graphs built at two sizes of a dim: which values become
// dynamic-bound, which arguments are rewritten for the runtime to recompute (view -1, expand
// -1, slice to the end), and the errors for what cannot move.
#include <catch2/catch.hpp>

#include <limits>

#include "graph/verifier.h"
#include "passes/dynamic_shapes.h"

namespace etc {
namespace {

ValueId node(Graph& g, OpKind op, const std::string& name,
             std::initializer_list<std::pair<std::string_view, ArgValue>> args) {
  Result<std::vector<ArgValue>> bound = bind_args(op, args);
  REQUIRE(bound.ok());
  std::vector<ArgValue> a = std::move(bound).value();
  std::vector<TensorType> types;
  REQUIRE(infer_types(
              op, a, [&g](ValueId v) -> const TensorSpec& { return g.value(v).spec; }, Location{},
              &types)
              .ok());
  NodeId id = g.add_node(op, name, std::move(a), {name},
                         {TensorSpec::make(types[0].dtype, types[0].sizes)});
  return g.node(id).outputs[0];
}

// x [1, s, 64] -> view [1, s, 8, 8] -> expand [2, s, 8, 8] of an unsqueezed copy ->
// slice of dim 1 to its end; a static weight path alongside.
Graph build(int64_t s, bool extra_moving_arg = false) {
  Graph g;
  ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {1, s, 64}));
  ValueId w = g.add_input("w", TensorSpec::make(DType::kFloat32, {4, 4}));
  ValueId v = node(g, OpKind::View, "v", {{"self", x}, {"size", std::vector<int64_t>{1, s, 8, 8}}});
  ValueId e =
      node(g, OpKind::Expand, "e", {{"self", v}, {"size", std::vector<int64_t>{2, s, 8, 8}}});
  ValueId sl = node(g, OpKind::SliceTensor, "sl",
                    {{"self", e}, {"dim", int64_t{1}}, {"start", int64_t{0}}, {"end", s}});
  ValueId r = node(g, OpKind::Relu, "r", {{"self", w}});
  ValueId last = sl;
  if (extra_moving_arg) {  // select at index s - 1: no run-time rewrite exists for it
    last =
        node(g, OpKind::SelectInt, "last", {{"self", sl}, {"dim", int64_t{1}}, {"index", s - 1}});
  }
  g.set_outputs({last, r});
  return g;
}

TEST_CASE("dims that move are dynamic-bound, view, expand and slice ends are rewritten") {
  Graph a = build(16), b = build(15), c = build(1);
  std::vector<Graph*> all{&a, &b, &c};
  Status s = mark_dynamic_shapes(all, "s in [1, 16]");
  INFO(s.to_string());
  REQUIRE(s.ok());
  REQUIRE(verify_graph(a).ok());
  auto value = [&a](const char* name) -> const Value& { return a.value(*a.find_value(name)); };
  CHECK(value("x").spec.dynamism == ShapeDynamism::kDynamicBound);
  CHECK(value("v").spec.dynamism == ShapeDynamism::kDynamicBound);
  CHECK(value("sl").spec.dynamism == ShapeDynamism::kDynamicBound);
  CHECK(value("w").spec.dynamism == ShapeDynamism::kStatic);
  CHECK(value("r").spec.dynamism == ShapeDynamism::kStatic);
  CHECK(value("sl").spec.sizes == std::vector<int64_t>{2, 16, 8, 8});  // planned at the bound
  for (Graph* g : all) {  // every build rewritten alike
    const Node& v = g->node(g->value(*g->find_value("v")).producer);
    CHECK(std::get<std::vector<int64_t>>(v.args[1]) == std::vector<int64_t>{1, -1, 8, 8});
    const Node& e = g->node(g->value(*g->find_value("e")).producer);
    CHECK(std::get<std::vector<int64_t>>(e.args[1]) == std::vector<int64_t>{2, -1, 8, 8});
    const Node& sl = g->node(g->value(*g->find_value("sl")).producer);
    CHECK(std::get<int64_t>(sl.args[3]) == std::numeric_limits<int64_t>::max());
  }
}

TEST_CASE("an argument that moves and cannot be recomputed at run time is an error") {
  Graph a = build(16, true), b = build(15, true);
  std::vector<Graph*> all{&a, &b};
  Status s = mark_dynamic_shapes(all, "s in [1, 16]");
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == ErrorCode::kUnsupported);
  CHECK(s.to_string().find("argument 'index' of node 'last' (aten.select.int) changes with the "
                           "dynamic dims (s in [1, 16])") != std::string::npos);
}

TEST_CASE("a view with two moving dims, and a constant that moves, are errors") {
  auto two = [](int64_t s) {
    Graph g;
    ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {s, s}));
    ValueId v = node(g, OpKind::View, "v", {{"self", x}, {"size", std::vector<int64_t>{s, s}}});
    g.set_outputs({v});
    return g;
  };
  Graph a = two(4), b = two(3);
  std::vector<Graph*> all{&a, &b};
  Status s = mark_dynamic_shapes(all, "s in [1, 4]");
  REQUIRE_FALSE(s.ok());
  CHECK(s.to_string().find("argument 'size' of node 'v'") != std::string::npos);

  auto with_constant = [](int64_t n) {
    Graph g;
    ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {n}));
    TensorSpec c = TensorSpec::make(DType::kFloat32, {n});
    std::string bytes(static_cast<size_t>(4 * n), '\0');
    c.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
    ValueId k = g.add_constant("mask", std::move(c));
    ValueId y = node(g, OpKind::AddTensor, "y", {{"self", x}, {"other", k}});
    g.set_outputs({y});
    return g;
  };
  Graph p = with_constant(4), q = with_constant(3);
  std::vector<Graph*> pq{&p, &q};
  s = mark_dynamic_shapes(pq, "s in [1, 4]");
  REQUIRE_FALSE(s.ok());
  CHECK(s.to_string().find("constant 'mask' (computed at export) changes") != std::string::npos);
}

}  // namespace
}  // namespace etc
