#include "graph/graph.h"

#include <catch2/catch.hpp>

#include "graph/verifier.h"

namespace etc {
namespace {

// x -> relu -> a ; a + x -> b ; out: b
struct Small {
  Graph g;
  ValueId x, a, b;
  NodeId relu, add;
  Small() {
    x = g.add_input("x", TensorSpec::make(DType::kFloat32, {4}));
    relu = g.add_node(OpKind::Relu, "relu", *bind_args(OpKind::Relu, {{"self", x}}), {"a"},
                      {TensorSpec::make(DType::kFloat32, {4})});
    a = g.node(relu).outputs[0];
    add = g.add_node(OpKind::AddTensor, "add",
                     *bind_args(OpKind::AddTensor, {{"self", a}, {"other", x}}), {"b"},
                     {TensorSpec::make(DType::kFloat32, {4})});
    b = g.node(add).outputs[0];
    g.set_outputs({b});
  }
};

TEST_CASE("building a graph records use lists and passes the verifier") {
  Small s;
  CHECK(s.g.value(s.x).uses == std::vector<Use>{{s.relu, 0, -1}, {s.add, 1, -1}});
  CHECK(s.g.value(s.a).uses == std::vector<Use>{{s.add, 0, -1}});
  CHECK(s.g.value(s.a).producer == s.relu);
  CHECK(s.g.find_value("b") == s.b);
  CHECK(s.g.is_graph_output(s.b));
  CHECK(verify_graph(s.g).ok());
}

TEST_CASE("replace_all_uses rewires arguments, use lists and graph outputs") {
  Small s;
  s.g.replace_all_uses(s.a, s.x);
  CHECK(s.g.value(s.a).uses.empty());
  CHECK(std::get<ValueId>(s.g.node(s.add).args[0]) == s.x);
  CHECK(s.g.value(s.x).uses.size() == 3);
  CHECK(verify_graph(s.g).ok());
  s.g.replace_all_uses(s.b, s.a);
  CHECK(s.g.outputs()[0] == s.a);
}

TEST_CASE("erase_node refuses nodes whose outputs are used, then erases cleanly") {
  Small s;
  CHECK_FALSE(s.g.erase_node(s.relu));
  CHECK_FALSE(s.g.erase_node(s.add));  // graph output
  s.g.replace_all_uses(s.a, s.x);
  REQUIRE(s.g.erase_node(s.relu));
  CHECK(s.g.order().size() == 1);
  CHECK(s.g.value(s.a).erased);
  CHECK_FALSE(s.g.find_value("a").has_value());
  CHECK(s.g.value(s.x).uses == std::vector<Use>{{s.add, 1, -1}, {s.add, 0, -1}});
  CHECK(verify_graph(s.g).ok());
}

TEST_CASE("set_arg keeps use lists consistent, including list arguments") {
  Small s;
  NodeId cat = s.g.add_node(OpKind::Cat, "cat",
                            *bind_args(OpKind::Cat, {{"tensors", std::vector<ValueId>{s.a, s.b}}}),
                            {"c"}, {TensorSpec::make(DType::kFloat32, {8})});
  CHECK(s.g.value(s.b).uses == std::vector<Use>{{cat, 0, 1}});
  s.g.set_arg(cat, 0, std::vector<ValueId>{s.x, s.x});
  CHECK(s.g.value(s.b).uses.empty());
  CHECK(s.g.value(s.a).uses.size() == 1);
  CHECK(s.g.value(s.x).uses.size() == 4);
  CHECK(verify_graph(s.g).ok());
}

TEST_CASE("insertion before a node and move_before keep the order a schedule") {
  Small s;
  NodeId neg = s.g.add_node(OpKind::Neg, "neg", *bind_args(OpKind::Neg, {{"self", s.x}}), {"n"},
                            {TensorSpec::make(DType::kFloat32, {4})}, s.add);
  CHECK(std::vector<NodeId>(s.g.order().begin(), s.g.order().end()) ==
        std::vector<NodeId>{s.relu, neg, s.add});
  s.g.move_before(neg, s.relu);
  CHECK(s.g.order()[0] == neg);
  CHECK(verify_graph(s.g).ok());
  s.g.move_before(s.add, s.relu);  // [neg, add, relu]: add uses a before relu defines it
  Status st = verify_graph(s.g);
  REQUIRE_FALSE(st.ok());
  CHECK(st.message() == "argument 'self' uses 'a' before it is defined");
}

}  // namespace
}  // namespace etc
