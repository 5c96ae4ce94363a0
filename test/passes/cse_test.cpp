// cse: which repeated nodes merge (same op, same argument values and attributes bit for bit,
// reading a runtime value) and which stay (constants-only chains, random ops, graph outputs,
// dynamic shapes).
#include <catch2/catch.hpp>
#include <string>

#include "passes/cse.h"
#include "passes/graph_builder.h"

namespace etc {
namespace {

using testing::f32;
using testing::graph_from_json;
using testing::node;
using testing::require_valid;
using testing::unary;
using testing::value_named;

using Ctx = testing::PassCtx;

size_t count_op(const Graph& g, OpKind op) {
  size_t n = 0;
  for (NodeId id : g.order())
    n += g.node(id).op == op ? 1 : 0;
  return n;
}

// The value node `name`'s argument `arg` reads.
ValueId arg_of(const Graph& g, const std::string& name, size_t arg) {
  for (NodeId id : g.order()) {
    if (g.node(id).name == name) return std::get<ValueId>(g.node(id).args[arg]);
  }
  FAIL("no live node named " << name);
  return ValueId{};
}

bool live(const Graph& g, const std::string& name) {
  for (NodeId id : g.order()) {
    if (g.node(id).name == name) return true;
  }
  return false;
}

TEST_CASE("cse merges repeated chains, the later users reading the first") {
  // Two copies of neg -> exp of the same input; each copy's users move to the first chain in
  // one run, so the second exp merges once its input has.
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("n1", "aten.neg.default", "a", "n1") + "," +
                                unary("e1", "aten.exp.default", "n1", "e1") + "," +
                                unary("n2", "aten.neg.default", "a", "n2") + "," +
                                unary("e2", "aten.exp.default", "n2", "e2") + "," +
                                testing::add("s", "e1", "e2", "y") + "]",
                            R"(["y"])");
  Ctx c;
  REQUIRE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::Neg) == 1);
  CHECK(count_op(g, OpKind::Exp) == 1);
  CHECK(live(g, "n1"));
  CHECK(live(g, "e1"));
  CHECK(arg_of(g, "s", 0) == value_named(g, "e1"));
  CHECK(arg_of(g, "s", 1) == value_named(g, "e1"));
  CHECK_FALSE(*eliminate_common_subexpressions(g, c.ctx));  // fixed point
}

TEST_CASE("cse keeps nodes whose attributes differ, bit for bit") {
  // clamp to 6 and to 5 differ; -0.0 and 0.0 differ (their bits); a NaN bound equals itself;
  // the same op on different inputs differs.
  Graph g = graph_from_json(
      "[" + f32("a") + "," + f32("b") + "]",
      "[" + node("c6", "aten.clamp.default", R"({"self": "a", "min": 0.0, "max": 6.0})", "c6") +
          "," + node("c5", "aten.clamp.default", R"({"self": "a", "min": 0.0, "max": 5.0})", "c5") +
          "," + node("m0", "aten.mul.Scalar", R"({"self": "a", "other": 0.0})", "m0") + "," +
          node("mneg0", "aten.mul.Scalar", R"({"self": "a", "other": -0.0})", "mneg0") + "," +
          node("m0b", "aten.mul.Scalar", R"({"self": "a", "other": 0.0})", "m0b") + "," +
          unary("ra", "aten.relu.default", "a", "ra") + "," +
          unary("rb", "aten.relu.default", "b", "rb") + "," + testing::add("s1", "c6", "c5", "t1") +
          "," + testing::add("s2", "m0", "mneg0", "t2") + "," +
          testing::add("s3", "t2", "m0b", "t3") + "," + testing::add("s4", "ra", "rb", "t4") + "]",
      R"(["t1", "t3", "t4"])");
  Ctx c;
  REQUIRE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::Clamp) == 2);
  CHECK(count_op(g, OpKind::MulScalar) == 2);  // m0b merged into m0; mneg0 kept
  CHECK(live(g, "mneg0"));
  CHECK_FALSE(live(g, "m0b"));
  CHECK(arg_of(g, "s3", 1) == value_named(g, "m0"));
  CHECK(count_op(g, OpKind::Relu) == 2);
}

TEST_CASE("cse leaves constants-only chains, graph outputs and random ops") {
  // neg of a constant twice (weights' preparation, left to the passes that fold or fuse it
  // per use); a repeated node whose output is a graph output; rand twice.
  Graph g = graph_from_json(
      "[" + f32("a") + "]",
      "[" + unary("w1", "aten.neg.default", "w", "w1") + "," +
          unary("w2", "aten.neg.default", "w", "w2") + "," + testing::add("x1", "a", "w1", "y1") +
          "," + testing::add("x2", "a", "w2", "y2") + "," +
          unary("o1", "aten.relu.default", "a", "o1") + "," +
          unary("o2", "aten.relu.default", "a", "o2") + "," +
          node("r1", "aten.rand.default", R"({"size": [2, 2]})", "r1") + "," +
          node("r2", "aten.rand.default", R"({"size": [2, 2]})", "r2") + "," +
          testing::add("x3", "r1", "r2", "y3") + "]",
      R"(["y1", "y2", "o1", "o2", "y3"])",
      R"([{"name": "w", "dtype": "float32", "shape": [2, 2], "values": [1, 2, 3, 4]}])");
  Ctx c;
  CHECK_FALSE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::Neg) == 2);
  CHECK(count_op(g, OpKind::Relu) == 2);
  CHECK(count_op(g, OpKind::Rand) == 2);
  // x1 and x2 read different values (w1 and w2), so they stay apart too.
  CHECK(count_op(g, OpKind::AddTensor) == 3);
}

TEST_CASE("cse merges every output of a multi-output node") {
  Graph g = graph_from_json(
      "[" + f32("a", "[3, 4]") + "]",
      R"([{"name": "m1", "op": "aten.max.dim", "args": {"self": "a", "dim": 1}, "outputs": ["v1", "i1"]},
          {"name": "m2", "op": "aten.max.dim", "args": {"self": "a", "dim": 1}, "outputs": ["v2", "i2"]},
          {"name": "m3", "op": "aten.max.dim", "args": {"self": "a", "dim": 0}, "outputs": ["v3", "i3"]},
          {"name": "sv", "op": "aten.add.Tensor", "args": {"self": "v1", "other": "v2"}, "outputs": ["y"]},
          {"name": "si", "op": "aten.add.Tensor", "args": {"self": "i1", "other": "i2"}, "outputs": ["z"]}])",
      R"(["y", "z", "v3"])");
  Ctx c;
  REQUIRE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::MaxDim) == 2);
  CHECK(arg_of(g, "sv", 1) == value_named(g, "v1"));
  CHECK(arg_of(g, "si", 1) == value_named(g, "i1"));
}

TEST_CASE("cse compares small constants by contents, and lists with None") {
  // Each step holds its own constant of the same bytes (as importers give each call its
  // own): equal keys. index.Tensor's indices list holds None.
  Graph g = graph_from_json(
      "[" + f32("a", "[3, 4]") + R"(, {"name": "i", "dtype": "int64", "shape": [2]}])",
      R"([{"name": "m1", "op": "aten.maximum.default", "args": {"self": "a", "other": "z1"}, "outputs": ["m1"]},
          {"name": "m2", "op": "aten.maximum.default", "args": {"self": "a", "other": "z2"}, "outputs": ["m2"]},
          {"name": "m3", "op": "aten.maximum.default", "args": {"self": "a", "other": "one"}, "outputs": ["m3"]},
          {"name": "x1", "op": "aten.index.Tensor", "args": {"self": "m1", "indices": [null, "i"]}, "outputs": ["x1"]},
          {"name": "x2", "op": "aten.index.Tensor", "args": {"self": "m2", "indices": [null, "i"]}, "outputs": ["x2"]},
          {"name": "s", "op": "aten.add.Tensor", "args": {"self": "x1", "other": "x2"}, "outputs": ["y"]}])",
      R"(["y", "m3"])",
      R"([{"name": "z1", "dtype": "float32", "shape": [1], "values": [0]},
          {"name": "z2", "dtype": "float32", "shape": [1], "values": [0]},
          {"name": "one", "dtype": "float32", "shape": [1], "values": [1]}])");
  Ctx c;
  REQUIRE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::Maximum) == 2);  // m2 merged into m1; m3 reads 1, not 0
  CHECK(count_op(g, OpKind::IndexTensor) == 1);
  CHECK(arg_of(g, "s", 1) == value_named(g, "x1"));
}

TEST_CASE("cse merges reads of a state, never the state's update") {
  // relu(s) three times: the first two merge; the third is the state's update and stays.
  Graph g;
  const TensorSpec spec = TensorSpec::make(DType::kFloat32, {2, 2});
  const ValueId s = g.add_state("s", spec, "s", ConstantData{});
  auto relu = [&](const std::string& name) {
    const NodeId id = g.add_node(OpKind::Relu, name, {ArgValue(s)}, {name}, {spec});
    return g.node(id).outputs[0];
  };
  const ValueId r1 = relu("r1"), r2 = relu("r2"), r3 = relu("r3");
  const NodeId sum =
      g.add_node(OpKind::AddTensor, "sum",
                 {ArgValue(r1), ArgValue(r2), ArgValue(Scalar{int64_t{1}})}, {"y"}, {spec});
  g.set_outputs({g.node(sum).outputs[0]});
  g.set_state_update(s, r3);
  require_valid(g);
  Ctx c;
  REQUIRE(*eliminate_common_subexpressions(g, c.ctx));
  require_valid(g);
  CHECK(count_op(g, OpKind::Relu) == 2);
  CHECK(live(g, "r1"));
  CHECK(live(g, "r3"));
  CHECK(arg_of(g, "sum", 1) == r1);
}

// y = relu(a) + relu(a): one merge where cse may run.
Graph relu_twice() {
  return graph_from_json("[" + f32("a") + "]",
                         "[" + unary("r1", "aten.relu.default", "a", "r1") + "," +
                             unary("r2", "aten.relu.default", "a", "r2") + "," +
                             testing::add("s", "r1", "r2", "y") + "]",
                         R"(["y"])");
}

TEST_CASE("cse refuses a graph whose memory is planned") {
  Graph g = relu_twice();
  g.planned_buffers.push_back(PlannedBuffer{Device{}, 64});
  Ctx c;
  Result<bool> r = eliminate_common_subexpressions(g, c.ctx);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kUsage);
  CHECK(count_op(g, OpKind::Relu) == 2);
}

TEST_CASE("cse does nothing to a program of dynamic dims") {
  Graph g = relu_twice();
  Ctx c;
  c.options.dynamic_shapes = true;
  CHECK_FALSE(*eliminate_common_subexpressions(g, c.ctx));
  CHECK(count_op(g, OpKind::Relu) == 2);
}

}  // namespace
}  // namespace etc
