// The verifier must catch every broken invariant; each case breaks one on purpose.
#include "graph/verifier.h"

#include <catch2/catch.hpp>

namespace etc {
namespace {

struct Fixture {
  Graph g;
  ValueId x, y;
  NodeId n;
  Fixture() {
    x = g.add_input("x", TensorSpec::make(DType::kFloat32, {2, 3}));
    n = g.add_node(OpKind::Relu, "r", *bind_args(OpKind::Relu, {{"self", x}}), {"y"},
                   {TensorSpec::make(DType::kFloat32, {2, 3})});
    g.node(n).origin = "/nodes/0";
    y = g.node(n).outputs[0];
    g.set_outputs({y});
  }
  std::string verify() {
    Status s = verify_graph(g);
    return s.ok() ? "ok" : s.to_string();
  }
};

TEST_CASE("a well-formed graph verifies") {
  CHECK(Fixture().verify() == "ok");
}

TEST_CASE("a stored type that disagrees with inference is reported") {
  Fixture f;
  f.g.value(f.y).spec = TensorSpec::make(DType::kFloat16, {2, 3});
  CHECK(f.verify() ==
        "/nodes/0 (node \"r\"): output 0 ('y') is float16[2, 3] but aten.relu.default produces "
        "float32[2, 3]");
}

TEST_CASE("a data-dependent output may be smaller than its bound only when dynamic-bound") {
  Graph g;
  ValueId x = g.add_input("x", TensorSpec::make(DType::kFloat32, {2, 3}));
  NodeId n = g.add_node(OpKind::Nonzero, "nz", *bind_args(OpKind::Nonzero, {{"self", x}}), {"i"},
                        {TensorSpec::make(DType::kInt64, {4, 2})});
  ValueId i = g.node(n).outputs[0];
  g.set_outputs({i});
  auto verify = [&] {
    Status s = verify_graph(g);
    return s.ok() ? "ok" : s.to_string();
  };
  // Static: the bound ([6, 2]) exactly.
  CHECK(verify() ==
        std::string("(node \"nz\"): output 0 ('i') is int64[4, 2] but aten.nonzero.default "
                    "produces int64[6, 2]"));
  g.value(i).spec.dynamism = ShapeDynamism::kDynamicBound;
  CHECK(verify() == std::string("ok"));
  g.value(i).spec.sizes = {6, 2};
  CHECK(verify() == std::string("ok"));
  g.value(i).spec.sizes = {7, 2};  // past the bound
  CHECK(verify() != std::string("ok"));
  g.value(i).spec.sizes = {4};
  CHECK(verify() != std::string("ok"));
}

TEST_CASE("a use list missing an entry is reported, and a stale entry too") {
  Fixture f;
  f.g.value(f.x).uses.clear();
  CHECK(f.verify() ==
        "/nodes/0 (node \"r\"): use list of 'x' is missing its use by argument 'self'");
  Fixture h;
  h.g.value(h.y).uses.push_back(Use{h.n, 0, -1});
  CHECK(h.verify() == "use list of 'y' names a use that does not exist");
}

TEST_CASE("a wrong argument kind is reported with the schema type") {
  Fixture f;
  f.g.node(f.n).args[0] = int64_t{3};
  f.g.value(f.x).uses.clear();
  CHECK(f.verify() == "/nodes/0 (node \"r\"): argument 'self': expected Tensor, got 3");
}

TEST_CASE("a dangling value id is reported") {
  Fixture f;
  f.g.node(f.n).args[0] = ValueId(99);
  // Both halves of the broken link are reported: x's stale use and the dangling argument.
  CHECK(f.verify() ==
        "use list of 'x' names a use that does not exist\n"
        "/nodes/0 (node \"r\"): argument 'self' refers to a value that does not exist (%99)");
}

TEST_CASE("bad specs are reported: negative dims, overflow, constant size") {
  Fixture f;
  f.g.value(f.x).spec.sizes = {-1, 3};
  CHECK(f.verify().find("value 'x': dim 0 is negative (-1)") != std::string::npos);

  Fixture o;
  o.g.value(o.x).spec.sizes = {int64_t{1} << 40, int64_t{1} << 40};
  CHECK(o.verify().find("value 'x': shape [1099511627776, 1099511627776] of float32 overflows a "
                        "64-bit byte count") != std::string::npos);

  Fixture c;
  TensorSpec spec = TensorSpec::make(DType::kFloat32, {4});
  spec.constant = ConstantData{make_blob(std::string(8, '\0')), 0, 8};
  c.g.add_constant("w", spec);
  CHECK(c.verify() == "value 'w': constant holds 8 bytes, float32[4] needs 16");
}

TEST_CASE("duplicate names and missing outputs are reported, several at once") {
  Fixture f;
  f.g.add_input("x", TensorSpec::make(DType::kFloat32, {1}));
  f.g.set_outputs({});
  Status s = verify_graph(f.g);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "duplicate value name 'x'");
  REQUIRE(s.related().size() == 1);
  CHECK(s.related()[0].message() == "the graph has no outputs");
}

TEST_CASE("device fields are checked") {
  Fixture f;
  f.g.value(f.x).spec.device = Device{DeviceType::kCPU, 2};
  CHECK(f.verify().find("the CPU has only device index 0") != std::string::npos);
}

}  // namespace
}  // namespace etc
