#include "graph/op_schema.h"

#include <catch2/catch.hpp>
#include <set>

#include "graph/ops.h"

namespace etc {
namespace {

TEST_CASE("parse_op_schema reads names, overloads, kinds and defaults") {
  Result<OpSchema> s = parse_op_schema(
      "max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] "
      "dilation=1, "
      "bool ceil_mode=False) -> Tensor");
  REQUIRE(s.ok());
  CHECK(s->qualified_name() == "aten.max_pool2d.default");
  REQUIRE(s->args.size() == 6);
  CHECK(s->args[1].type == ArgType::kIntList);
  CHECK(s->args[1].fixed_length == 2);
  CHECK_FALSE(s->args[1].default_value.has_value());
  CHECK(std::get<std::vector<int64_t>>(*s->args[2].default_value).empty());
  CHECK(std::get<std::vector<int64_t>>(*s->args[3].default_value) == std::vector<int64_t>{0, 0});
  CHECK(std::get<std::vector<int64_t>>(*s->args[4].default_value) == std::vector<int64_t>{1, 1});
  CHECK(std::get<bool>(*s->args[5].default_value) == false);
}

TEST_CASE("parse_op_schema handles optionals, keyword-only args, strings and tuples") {
  Result<OpSchema> s = parse_op_schema(
      "native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, "
      "float eps) -> "
      "(Tensor, Tensor, Tensor)");
  REQUIRE(s.ok());
  CHECK(s->num_outputs == 3);
  CHECK(s->args[2].optional);
  CHECK(s->args[4].type == ArgType::kFloat);

  Result<OpSchema> g = parse_op_schema("gelu(Tensor self, *, str approximate='none') -> Tensor");
  REQUIRE(g.ok());
  CHECK(g->args[1].kwarg_only);
  CHECK(std::get<std::string>(*g->args[1].default_value) == "none");

  Result<OpSchema> a =
      parse_op_schema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  REQUIRE(a.ok());
  CHECK(a->overload == "Tensor");
  CHECK(std::get<Scalar>(*a->args[2].default_value) == Scalar{int64_t{1}});

  Result<OpSchema> c =
      parse_op_schema("copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)");
  REQUIRE(c.ok());
  CHECK(c->args[0].type == ArgType::kTensor);
}

TEST_CASE("parse_op_schema rejects what it cannot represent") {
  CHECK_FALSE(parse_op_schema("foo(Tensor self").ok());
  CHECK_FALSE(parse_op_schema("foo(Dimname self) -> Tensor").ok());
  CHECK_FALSE(parse_op_schema("foo(int x=abc) -> Tensor").ok());
  CHECK_FALSE(parse_op_schema("foo(int x=None) -> Tensor").ok());  // None needs int?
}

TEST_CASE("every op in the table parses and has a unique name") {
  std::set<std::string> names;
  for (const OpInfo& op : all_ops()) {
    CHECK(names.insert(op.name).second);
    CHECK(op_from_name(op.name) == op.kind);
  }
  CHECK(names.size() >= 55);
  CHECK(op_from_name("aten::relu") == OpKind::Relu);
  CHECK(op_from_name("aten.relu") == OpKind::Relu);
  CHECK_FALSE(op_from_name("aten.add").has_value());  // add has no default overload
}

TEST_CASE("arg values print in schema notation") {
  CHECK(arg_value_to_string(ArgValue(std::monostate{})) == "None");
  CHECK(arg_value_to_string(ArgValue(std::vector<int64_t>{1, 2})) == "[1, 2]");
  CHECK(arg_value_to_string(ArgValue(2.0)) == "2.0");
  CHECK(arg_value_to_string(ArgValue(Scalar{0.5})) == "0.5");
  CHECK(arg_value_to_string(ArgValue(true)) == "True");
  CHECK(arg_value_to_string(ArgValue(std::string("tanh"))) == "'tanh'");
  CHECK(arg_value_to_string(ArgValue(ValueId(7))) == "%7");
  CHECK(arg_value_to_string(ArgValue(DType::kBFloat16)) == "bfloat16");
}

TEST_CASE("bind_args fills defaults and rejects unknown or missing arguments") {
  Result<std::vector<ArgValue>> a =
      bind_args(OpKind::AddTensor, {{"self", ValueId(0)}, {"other", ValueId(1)}});
  REQUIRE(a.ok());
  REQUIRE(a->size() == 3);
  CHECK(std::get<Scalar>((*a)[2]) == Scalar{int64_t{1}});
  CHECK_FALSE(bind_args(OpKind::AddTensor, {{"self", ValueId(0)}}).ok());
  CHECK_FALSE(bind_args(OpKind::AddTensor,
                        {{"self", ValueId(0)}, {"other", ValueId(1)}, {"beta", Scalar{1.0}}})
                  .ok());
}

}  // namespace
}  // namespace etc
