// The ONNX importer on small hand-built models: what each ONNX construct becomes in the
// IR, and the errors for models etc cannot or will not import.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_reader.h"
#include "onnx.pb.h"

namespace etc {
namespace {

struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* g;

  explicit ModelBuilder(int64_t opset = 13) {
    model.set_ir_version(8);
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    g = model.mutable_graph();
    g->set_name("test");
  }
  // dims: >= 0 static, -1 symbolic (named "N").
  void input(const std::string& name, std::vector<int64_t> dims,
             int elem = onnx::TensorProto::FLOAT) {
    value_info(g->add_input(), name, dims, elem);
  }
  void output(const std::string& name, std::vector<int64_t> dims = {},
              int elem = onnx::TensorProto::FLOAT) {
    auto* v = g->add_output();
    v->set_name(name);
    if (!dims.empty()) value_info(v, name, dims, elem);
  }
  static void value_info(onnx::ValueInfoProto* v, const std::string& name,
                         const std::vector<int64_t>& dims, int elem) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (int64_t d : dims) {
      if (d >= 0)
        shape->add_dim()->set_dim_value(d);
      else
        shape->add_dim()->set_dim_param("N");
    }
  }
  void init_floats(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float f : v)
      t->add_float_data(f);
  }
  void init_ints(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims)
      t->add_dims(d);
    for (int64_t i : v)
      t->add_int64_data(i);
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string& name = "",
                        const std::string& domain = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    n->set_domain(domain);
    for (auto& s : in)
      n->add_input(s);
    for (auto& s : out)
      n->add_output(s);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t i : v)
      a->add_ints(i);
  }
  static void str(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  Result<Graph> import(const OnnxImportOptions& options = {}) const {
    std::string bytes = model.SerializeAsString();
    return parse_onnx_model({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                            "m.onnx", ".", options);
  }
};

std::vector<std::string> op_names(const Graph& g) {
  std::vector<std::string> ops;
  for (NodeId id : g.order())
    ops.push_back(op_info(g.node(id).op).name);
  return ops;
}

TEST_CASE("onnx: DequantizeLinear subtracts a zero point only when it is not all zeros") {
  auto dequantize = [](int zero_point) {
    ModelBuilder m;
    m.input("q", {4}, onnx::TensorProto::INT8);
    m.init_floats("s", {}, {0.5f});
    auto* t = m.g->add_initializer();
    t->set_name("z");
    t->set_data_type(onnx::TensorProto::INT8);
    t->add_int32_data(zero_point);
    m.node("DequantizeLinear", {"q", "s", "z"}, {"y"});
    m.output("y", {4});
    Result<Graph> g = m.import();
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    return op_names(*g);
  };
  // ONNX Runtime's quantizer writes symmetric int8 weights with zero points of 0. (The zero
  // point's own cast is imported either way, to check its shape; nothing reads it then, and
  // dead-code elimination drops it.)
  auto subs = [](const std::vector<std::string>& ops) {
    return std::count(ops.begin(), ops.end(), "aten.sub.Tensor");
  };
  CHECK(subs(dequantize(0)) == 0);
  CHECK(subs(dequantize(3)) == 1);
}

TEST_CASE("onnx: a conv net imports with static shapes from --input-shape") {
  ModelBuilder m;
  m.input("x", {-1, 2, 5, 5});
  m.init_floats("w", {3, 2, 3, 3}, std::vector<float>(54, 0.5f));
  m.init_floats("b", {3}, {1, 2, 3});
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv1");
  ModelBuilder::ints(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"y"}, "relu1");
  m.output("y", {-1, 3, 5, 5});

  Result<Graph> missing = m.import();
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == ErrorCode::kInvalidInput);
  CHECK(missing.status().to_string() ==
        "m.onnx: /graph/input/0: input 'x' has shape [N, 2, 5, 5] with symbolic or unknown dims; "
        "give "
        "static sizes with --input-shape x=?x2x5x5 (each ? a size)");

  Result<Graph> g = m.import({.input_shapes = {{"x", {4, 2, 5, 5}}}});
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(op_names(*g) == std::vector<std::string>{"aten.convolution.default", "aten.relu.default"});
  const Value& y = g->value(g->outputs()[0]);
  CHECK(y.name == "y");
  CHECK(y.spec.sizes == std::vector<int64_t>{4, 3, 5, 5});
  CHECK(g->node(g->order()[0]).name == "conv1");
  CHECK(g->node(g->order()[0]).origin == "/graph/node/0");

  Result<Graph> wrong = m.import({.input_shapes = {{"x", {4, 3, 5, 5}}}});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message() ==
        "--input-shape x=[4, 3, 5, 5] does not match the model's shape [N, 2, 5, 5] for input 'x'");
  Result<Graph> unknown = m.import({.input_shapes = {{"x", {4, 2, 5, 5}}, {"z", {1}}}});
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.status().message() ==
        "--input-shape names 'z', which is not an input of the model (inputs: x)");
}

TEST_CASE("onnx: every unsupported op is listed at once with counts and node names") {
  ModelBuilder m;
  m.input("x", {2, 3});
  m.node("Bernoulli", {"x"}, {"a"}, "coin_a");
  m.node("Bernoulli", {"a"}, {"b"}, "");
  m.node("Custom", {"b"}, {"c"}, "mine", "com.example");
  m.node("Relu", {"c"}, {"y"});
  m.output("y");
  Result<Graph> g = m.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(
      g.status().to_string() ==
      "m.onnx: /graph/node: 3 nodes of 2 op types that etc cannot import (see `etc ops --onnx`):\n"
      "  Bernoulli x2: coin_a, Bernoulli#1\n"
      "  com.example::Custom x1: mine");
}

TEST_CASE("onnx: shape computations fold into a static reshape") {
  ModelBuilder m(11);
  m.input("x", {2, 3, 4});
  m.init_ints("zero", {}, {0});
  m.init_ints("minus1", {1}, {-1});
  m.node("Shape", {"x"}, {"s"});
  auto* gather = m.node("Gather", {"s", "zero"}, {"n"});
  ModelBuilder::i(gather, "axis", 0);
  auto* unsq = m.node("Unsqueeze", {"n"}, {"n1"});
  ModelBuilder::ints(unsq, "axes", {0});
  auto* cat = m.node("Concat", {"n1", "minus1"}, {"shape"});
  ModelBuilder::i(cat, "axis", 0);
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y", {2, 12});
  Result<Graph> g = m.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  REQUIRE(op_names(*g) == std::vector<std::string>{"aten.reshape.default"});
  const Node& n = g->node(g->order()[0]);
  CHECK(std::get<std::vector<int64_t>>(n.args[1]) == std::vector<int64_t>{2, 12});
}

TEST_CASE("onnx: known values are evaluated by the CPU kernels, whatever the op") {
  // A reshape target computed through ops no ONNX-specific evaluator knew (Sqrt, Pow, Cast
  // of floats): sqrt(16) ^ 1 = 4 -> [4, -1].
  ModelBuilder m(13);
  m.input("x", {2, 3, 4});
  m.init_floats("sixteen", {1}, {16.0f});
  m.init_floats("one", {}, {1.0f});
  m.init_ints("minus1", {1}, {-1});
  m.node("Sqrt", {"sixteen"}, {"four"});
  m.node("Pow", {"four", "one"}, {"four_p"});
  auto* cast = m.node("Cast", {"four_p"}, {"four_i"});
  ModelBuilder::i(cast, "to", onnx::TensorProto::INT64);
  auto* cat = m.node("Concat", {"four_i", "minus1"}, {"shape"});
  ModelBuilder::i(cat, "axis", 0);
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y", {4, 6});
  Result<Graph> g = m.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  REQUIRE(op_names(*g) == std::vector<std::string>{"aten.reshape.default"});
  CHECK(std::get<std::vector<int64_t>>(g->node(g->order()[0]).args[1]) ==
        std::vector<int64_t>{4, 6});

  // int64 past 2^53 stays exact: 2^60 * 3 + 1 (a double would lose the + 1).
  ModelBuilder big(13);
  big.input("x", {1}, onnx::TensorProto::INT64);
  big.init_ints("a", {1}, {int64_t{1} << 60});
  big.init_ints("three", {1}, {3});
  big.init_ints("one", {1}, {1});
  big.node("Mul", {"a", "three"}, {"p"});
  big.node("Add", {"p", "one"}, {"k"});
  big.node("Add", {"x", "k"}, {"y"});
  big.output("y", {1}, onnx::TensorProto::INT64);
  Result<Graph> bg = big.import();
  INFO(bg.status().to_string());
  REQUIRE(bg.ok());
  // A one-element known operand is the op's Scalar argument: an int64, not a double.
  REQUIRE(op_names(*bg) == std::vector<std::string>{"aten.add.Scalar"});
  const Node& add = bg->node(bg->order()[0]);
  const Scalar& k = std::get<Scalar>(add.args[1]);
  REQUIRE(std::holds_alternative<int64_t>(k.v));
  const int64_t value = std::get<int64_t>(k.v);
  CHECK(value == (int64_t{3} << 60) + 1);

  // A known integer division by zero: an error at the node, as the kernel would raise it.
  ModelBuilder div(13);
  div.input("x", {2}, onnx::TensorProto::INT64);
  div.init_ints("n", {2}, {6, 7});
  div.init_ints("d", {2}, {2, 0});
  div.node("Div", {"n", "d"}, {"q"}, "div_by_zero");
  div.node("Add", {"x", "q"}, {"y"});
  div.output("y", {2}, onnx::TensorProto::INT64);
  Result<Graph> dg = div.import();
  REQUIRE_FALSE(dg.ok());
  CHECK_THAT(dg.status().to_string(), Catch::Contains("/graph/node/0 (node \"div_by_zero\")") &&
                                          Catch::Contains("integer division by zero") &&
                                          Catch::Contains("at export time"));
}

TEST_CASE("onnx: a shape known only at run time is unsupported, located at the node") {
  ModelBuilder m;
  m.input("x", {2, 3});
  m.input("shape", {2}, onnx::TensorProto::INT64);
  m.node("Reshape", {"x", "shape"}, {"y"}, "r");
  m.output("y");
  Result<Graph> g = m.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"r\"): Reshape: the target shape (input 1, 'shape') must be "
        "known at "
        "export time: an initializer, a Constant, or computed from static shapes");
}

TEST_CASE("onnx: window functions are constants, and a model of constants has no inputs") {
  SECTION("a size known at export time: the window is a constant, the program has no inputs") {
    ModelBuilder m(17);
    auto* t = m.g->add_initializer();
    t->set_name("n");
    t->set_data_type(onnx::TensorProto::INT32);
    t->add_int32_data(4);
    m.node("HannWindow", {"n"}, {"y"});
    m.output("y", {4});
    Result<Graph> g = m.import();
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    CHECK(g->inputs().empty());
    CHECK(op_names(*g).empty());  // the output is the constant itself
    CHECK(g->outputs().size() == 1);
  }
  SECTION("a size given at run time is refused at the node") {
    ModelBuilder m(17);
    m.input("n", {}, onnx::TensorProto::INT32);
    m.node("BlackmanWindow", {"n"}, {"y"}, "w");
    m.output("y");
    Result<Graph> g = m.import();
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string() ==
          "m.onnx: /graph/node/0 (node \"w\"): BlackmanWindow: only supported when all inputs "
          "are known at export time (etc has no run-time kernel for it)");
  }
}

// A subgraph attribute `name` of `n`: inputs `in`, one node `op`, outputs `out`.
onnx::GraphProto* subgraph(onnx::NodeProto* n, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}
onnx::NodeProto* body_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                           std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& s : in)
    n->add_input(s);
  for (auto& s : out)
    n->add_output(s);
  return n;
}

TEST_CASE("onnx: If selects, Loop and Scan unroll, and what they cannot do is refused") {
  SECTION("If on a run-time condition computes both branches and selects with where") {
    ModelBuilder m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {2});
    auto* n = m.node("If", {"c"}, {"y"}, "if");
    body_node(subgraph(n, "then_branch"), "Neg", {"x"}, {"a"});
    n->mutable_attribute(0)->mutable_g()->add_output()->set_name("a");
    body_node(subgraph(n, "else_branch"), "Abs", {"x"}, {"b"});
    n->mutable_attribute(1)->mutable_g()->add_output()->set_name("b");
    m.output("y", {2});
    Result<Graph> g = m.import();
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    const std::vector<std::string> ops = op_names(*g);
    CHECK(ops.back() == "aten.where.self");
    CHECK(std::count(ops.begin(), ops.end(), "aten.neg.default") == 1);
  }
  SECTION("If's branches of different shapes need a condition known at export time") {
    ModelBuilder m(13);
    m.input("c", {}, onnx::TensorProto::BOOL);
    m.input("x", {2});
    m.init_ints("zero", {1}, {0});
    auto* n = m.node("If", {"c"}, {"y"}, "if");
    body_node(subgraph(n, "then_branch"), "Identity", {"x"}, {"a"});
    n->mutable_attribute(0)->mutable_g()->add_output()->set_name("a");
    body_node(subgraph(n, "else_branch"), "Gather", {"x", "zero"}, {"b"});
    n->mutable_attribute(1)->mutable_g()->add_output()->set_name("b");
    m.output("y");
    Result<Graph> g = m.import();
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string() ==
          "m.onnx: /graph/node/0 (node \"if\"): If: output 0: the branches give float32[2] and "
          "float32[1]; with a condition known only at run time etc computes both branches and "
          "selects, which needs one type and shape");
  }
  SECTION("Loop with a constant trip count unrolls over run-time carried values") {
    ModelBuilder m(13);
    m.input("x", {2});
    m.init_ints("three", {}, {3});
    auto* n = m.node("Loop", {"three", "", "x"}, {"y", "ys"}, "loop");
    onnx::GraphProto* body = subgraph(n, "body");
    for (const char* name : {"i", "cond", "acc"})
      body->add_input()->set_name(name);
    body_node(body, "Identity", {"cond"}, {"cond_out"});
    body_node(body, "Add", {"acc", "x"}, {"next"});
    for (const char* name : {"cond_out", "next", "next"})
      body->add_output()->set_name(name);
    m.output("y", {2});
    m.output("ys", {3, 2});
    Result<Graph> g = m.import();
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    const std::vector<std::string> ops = op_names(*g);
    CHECK(std::count(ops.begin(), ops.end(), "aten.add.Tensor") == 3);
    CHECK(std::count(ops.begin(), ops.end(), "aten.cat.default") == 1);
  }
  SECTION("Loop's trip count given at run time is refused at the node") {
    ModelBuilder m(13);
    m.input("n", {}, onnx::TensorProto::INT64);
    m.input("x", {2});
    auto* n = m.node("Loop", {"n", "", "x"}, {"y"}, "loop");
    onnx::GraphProto* body = subgraph(n, "body");
    for (const char* name : {"i", "cond", "acc"})
      body->add_input()->set_name(name);
    for (const char* name : {"cond", "acc"})
      body->add_output()->set_name(name);
    m.output("y");
    Result<Graph> g = m.import();
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string() ==
          "m.onnx: /graph/node/0 (node \"loop\"): Loop: the trip count M (input 0, 'n') must be "
          "known at export time: an initializer, a Constant, or computed from static shapes");
  }
  SECTION("ops etc cannot import inside a body are reported with the others") {
    ModelBuilder m(13);
    m.input("x", {2});
    m.input("c", {}, onnx::TensorProto::BOOL);
    auto* n = m.node("If", {"c"}, {"y"}, "if");
    body_node(subgraph(n, "then_branch"), "NoSuchOp", {"x"}, {"a"});
    body_node(subgraph(n, "else_branch"), "NoSuchOp", {"x"}, {"b"});
    m.output("y");
    Result<Graph> g = m.import();
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string().find("NoSuchOp x2") != std::string::npos);
  }
  SECTION("a body's error is located inside the body") {
    ModelBuilder m(9);
    m.input("s", {2});
    m.input("x", {3, 2});
    auto* n = m.node("Scan", {"s", "x"}, {"t"}, "scan");
    ModelBuilder::i(n, "num_scan_inputs", 1);
    onnx::GraphProto* body = subgraph(n, "body");
    for (const char* name : {"acc", "row"})
      body->add_input()->set_name(name);
    body_node(body, "Reshape", {"acc", "row"}, {"next"});
    body->add_output()->set_name("next");
    m.output("t");
    Result<Graph> g = m.import();
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().to_string().rfind("m.onnx: /graph/node/0/body/node/0 (node \"Reshape#0\")",
                                       0) == 0);
  }
}

TEST_CASE("onnx: RoiAlign samples with two products, and an adaptive sampling ratio is refused") {
  auto model = [](int64_t ratio) {
    ModelBuilder m(16);
    m.input("x", {1, 2, 8, 8});
    m.input("rois", {3, 4});
    m.input("b", {3}, onnx::TensorProto::INT64);
    auto* n = m.node("RoiAlign", {"x", "rois", "b"}, {"y"}, "roi");
    ModelBuilder::i(n, "output_height", 2);
    ModelBuilder::i(n, "output_width", 3);
    ModelBuilder::i(n, "sampling_ratio", ratio);
    m.output("y", {3, 2, 2, 3});
    return m.import();
  };
  Result<Graph> g = model(2);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  const std::vector<std::string> ops = op_names(*g);
  CHECK(std::count(ops.begin(), ops.end(), "aten.index.Tensor") == 1);
  g = model(0);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"roi\"): RoiAlign: sampling_ratio 0 (samples per bin that "
        "follow each region's size, known only at run time); etc needs a fixed sampling_ratio");
}

TEST_CASE("onnx: 3-d Conv and ConvTranspose are 2-d ones, one per kernel depth") {
  for (const char* op : {"Conv", "ConvTranspose"}) {
    ModelBuilder m(13);
    m.input("x", {1, 2, 4, 5, 5});
    m.init_floats("w", {2, 2, 3, 2, 2}, std::vector<float>(48, 0.5f));
    m.node(op, {"x", "w"}, {"y"});
    m.output("y");
    Result<Graph> g = m.import();
    INFO(op << ": " << g.status().to_string());
    REQUIRE(g.ok());
    const std::vector<std::string> ops = op_names(*g);
    CHECK(std::count(ops.begin(), ops.end(), "aten.convolution.default") == 3);
    const std::vector<int64_t> want = std::string(op) == "Conv"
                                          ? std::vector<int64_t>{1, 2, 2, 4, 4}
                                          : std::vector<int64_t>{1, 2, 6, 6, 6};
    CHECK(g->value(g->outputs()[0]).spec.sizes == want);
  }
}

TEST_CASE("onnx: sequences and optionals are lists known at export time") {
  auto seq_input = [](ModelBuilder& m, const std::string& name, int elem) {
    auto* v = m.g->add_input();
    v->set_name(name);
    v->mutable_type()
        ->mutable_sequence_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(elem);
  };
  SECTION("a sequence input's elements are program inputs NAME.i, its outputs NAME.i too") {
    ModelBuilder m(13);
    seq_input(m, "s", onnx::TensorProto::FLOAT);
    m.input("t", {3});
    m.init_ints("zero", {}, {0});
    m.node("SequenceInsert", {"s", "t", "zero"}, {"u"});
    m.node("SequenceLength", {"u"}, {"n"});
    m.g->add_output()->set_name("u");
    m.output("n");
    OnnxImportOptions options;
    options.input_shapes["s.0"] = {2};
    options.input_shapes["s.1"] = {4};
    Result<Graph> g = m.import(options);
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    std::vector<std::string> in, out;
    for (ValueId v : g->inputs())
      in.push_back(g->value(v).name);
    for (ValueId v : g->outputs())
      out.push_back(g->value(v).name);
    CHECK(in == std::vector<std::string>{"s.0", "s.1", "t"});
    CHECK(out == std::vector<std::string>{"u.0", "u.1", "u.2", "n"});
    CHECK(g->value(g->outputs()[0]).spec.sizes == std::vector<int64_t>{3});
  }
  SECTION("a sequence reaching an op that takes tensors is refused at the node") {
    ModelBuilder m(13);
    seq_input(m, "s", onnx::TensorProto::FLOAT);
    m.node("Relu", {"s"}, {"y"}, "relu");
    m.output("y");
    OnnxImportOptions options;
    options.input_shapes["s.0"] = {2};
    Result<Graph> g = m.import(options);
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string() ==
          "m.onnx: /graph/node/0 (node \"relu\"): Relu: input 's' is a sequence; this op takes "
          "tensors");
  }
  SECTION("a sequence where a tensor is needed is refused, never read as one") {
    ModelBuilder m(13);
    seq_input(m, "s", onnx::TensorProto::BOOL);
    m.input("x", {2});
    auto* n = m.node("If", {"s"}, {"y"}, "if");
    body_node(subgraph(n, "then_branch"), "Identity", {"x"}, {"a"});
    n->mutable_attribute(0)->mutable_g()->add_output()->set_name("a");
    body_node(subgraph(n, "else_branch"), "Neg", {"x"}, {"b"});
    n->mutable_attribute(1)->mutable_g()->add_output()->set_name("b");
    m.output("y");
    OnnxImportOptions options;
    options.input_shapes["s.0"] = {};
    Result<Graph> g = m.import(options);
    REQUIRE_FALSE(g.ok());
    INFO(g.status().to_string());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string().find("is a sequence or optional") != std::string::npos);
  }
  SECTION("an absent optional input holds nothing") {
    ModelBuilder m(15);
    auto* v = m.g->add_input();
    v->set_name("o");
    v->mutable_type()
        ->mutable_optional_type()
        ->mutable_elem_type()
        ->mutable_tensor_type()
        ->set_elem_type(onnx::TensorProto::FLOAT);
    m.node("OptionalHasElement", {"o"}, {"has"});
    m.output("has", {}, onnx::TensorProto::BOOL);
    OnnxImportOptions options;
    options.absent_inputs.insert("o");
    Result<Graph> g = m.import(options);
    INFO(g.status().to_string());
    REQUIRE(g.ok());
    CHECK(g->inputs().empty());
  }
}

TEST_CASE("onnx: conversions of Gemm, asymmetric pads, HardSigmoid and opset-11 Softmax") {
  ModelBuilder m(11);
  m.input("x", {1, 2, 4, 4});
  m.init_floats("w", {2, 2, 2, 2}, std::vector<float>(16, 0.25f));
  auto* conv = m.node("Conv", {"x", "w"}, {"c"});
  ModelBuilder::ints(conv, "pads", {0, 0, 1, 1});  // pad bottom/right only
  auto* hs = m.node("HardSigmoid", {"c"}, {"h"});
  auto* alpha = hs->add_attribute();
  alpha->set_name("alpha");
  alpha->set_type(onnx::AttributeProto::FLOAT);
  alpha->set_f(0.2f);
  auto* flat = m.node("Flatten", {"h"}, {"f"});
  ModelBuilder::i(flat, "axis", 1);
  m.init_floats("fc", {5, 32}, std::vector<float>(160, 0.1f));
  m.init_floats("fcb", {5}, std::vector<float>(5, 0.0f));
  auto* gemm = m.node("Gemm", {"f", "fc", "fcb"}, {"g"});
  ModelBuilder::i(gemm, "transB", 1);
  m.node("Softmax", {"g"}, {"y"});
  m.output("y", {1, 5});
  Result<Graph> g = m.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(op_names(*g) == std::vector<std::string>{"aten.constant_pad_nd.default",
                                                 "aten.convolution.default", "aten.mul.Scalar",
                                                 "aten.add.Scalar", "aten.clamp.default",
                                                 "aten.reshape.default", "aten.linear.default",
                                                 "aten._softmax.default"});
}

TEST_CASE("onnx: window attributes whose arithmetic leaves int64 are located errors") {
  // SAME padding computes (out - 1) * stride + (k - 1) * dilation + 1 - in; a dilation of
  // 2^62 took it past int64 (undefined behaviour) before it was checked.
  auto conv = [](const char* op, const char* pad_mode, int64_t dilation, int64_t stride) {
    ModelBuilder m(11);
    m.input("x", {1, 2, 4, 4});
    m.init_floats("w", {2, 2, 3, 3}, std::vector<float>(36, 0.25f));
    auto* n = m.node(op, {"x", "w"}, {"y"});
    ModelBuilder::str(n, "auto_pad", pad_mode);
    ModelBuilder::ints(n, "dilations", {dilation, 1});
    ModelBuilder::ints(n, "strides", {stride, 1});
    m.output("y");
    Result<Graph> g = m.import();
    return g.ok() ? std::string() : g.status().to_string();
  };
  const int64_t big = int64_t{1} << 62;
  CHECK(
      conv("Conv", "SAME_UPPER", big, 1) ==
      "m.onnx: /graph/node/0 (node \"Conv#0\"): Conv: the window's extent overflows a 64-bit size");
  CHECK(conv("ConvTranspose", "SAME_LOWER", 1, big) ==
        "m.onnx: /graph/node/0 (node \"ConvTranspose#0\"): ConvTranspose: the transposed output "
        "size overflows a 64-bit "
        "size");
  CHECK(conv("ConvTranspose", "SAME_LOWER", big, 1) ==
        "m.onnx: /graph/node/0 (node \"ConvTranspose#0\"): ConvTranspose: the transposed window's "
        "extent overflows a 64-bit "
        "size");
  CHECK(conv("Conv", "SAME_UPPER", 1, 1).empty());
  CHECK(conv("ConvTranspose", "SAME_LOWER", 1, 2).empty());
}

TEST_CASE("onnx: before opset 7 only the ops whose meaning has not changed are converted") {
  ModelBuilder old(6);
  old.input("x", {2, 3});
  old.node("Elu", {"x"}, {"e"});
  old.node("Relu", {"e"}, {"y"});
  old.output("y");
  Result<Graph> g = old.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(op_names(*g) == std::vector<std::string>{"aten.expm1.default", "aten.mul.Scalar",
                                                 "aten.gt.Scalar", "aten.where.self",
                                                 "aten.relu.default"});

  // Concat's axis was optional (default 1) before opset 4: not read as at opset 7.
  ModelBuilder concat(3);
  concat.input("x", {2, 3});
  concat.node("Concat", {"x", "x"}, {"y"}, "cat");
  concat.output("y");
  g = concat.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"cat\"): Concat: a model of opset 3: before opset 7 etc "
        "converts only the op types whose meaning has not changed since opset 1 (broadcasting "
        "and attributes differ)");

  // The legacy `broadcast`: B on A's trailing dims is numpy's broadcasting; at another axis
  // it is refused.
  for (int64_t axis : {1, 0}) {
    ModelBuilder add(6);
    add.input("a", {2, 3});
    add.input("b", {axis == 1 ? 3 : 2});
    auto* n = add.node("Add", {"a", "b"}, {"y"}, "add");
    ModelBuilder::i(n, "broadcast", 1);
    ModelBuilder::i(n, "axis", axis);
    add.output("y");
    g = add.import();
    if (axis == 1) {
      INFO(g.status().to_string());
      CHECK(g.ok());
      continue;
    }
    REQUIRE_FALSE(g.ok());
    CHECK(g.status().code() == ErrorCode::kUnsupported);
    CHECK(g.status().to_string() ==
          "m.onnx: /graph/node/0 (node \"add\"): Add: the legacy 'broadcast' of B [2] onto A "
          "[2, 3] at axis 0 (etc takes B aligned with A's trailing dims)");
  }
}

TEST_CASE("onnx: gathers and scatters are index ops, and what they cannot do is refused by name") {
  ModelBuilder m;
  m.input("x", {3, 4});
  m.input("i", {3, 2}, onnx::TensorProto::INT64);
  m.input("u", {3, 2});
  auto* ge = m.node("GatherElements", {"x", "i"}, {"g"});
  ModelBuilder::i(ge, "axis", 1);
  auto* se = m.node("ScatterElements", {"x", "i", "u"}, {"s"});
  ModelBuilder::i(se, "axis", 1);
  ModelBuilder::str(se, "reduction", "add");
  m.output("g");
  m.output("s");
  Result<Graph> g = m.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(op_names(*g) == std::vector<std::string>{"aten.index.Tensor", "aten.index_put.default"});

  ModelBuilder mul;
  mul.input("x", {3, 4});
  mul.input("i", {3, 2}, onnx::TensorProto::INT64);
  mul.input("u", {3, 2});
  auto* sm = mul.node("ScatterElements", {"x", "i", "u"}, {"s"}, "sc");
  ModelBuilder::str(sm, "reduction", "mul");
  mul.output("s");
  g = mul.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"sc\"): ScatterElements: the indices of a 'mul' reduction "
        "(input 1, 'i') must be known at export time: an initializer, a Constant, or computed "
        "from static shapes");
  // With constant indices: a product with ones that hold the updates, one layer per repeat.
  ModelBuilder mulc;
  mulc.input("x", {3, 4});
  mulc.init_ints("i", {3, 2}, {0, 0, 1, 1, 2, 3});
  mulc.input("u", {3, 2});
  auto* smc = mulc.node("ScatterElements", {"x", "i", "u"}, {"s"}, "sc");
  ModelBuilder::i(smc, "axis", 1);
  ModelBuilder::str(smc, "reduction", "mul");
  mulc.output("s");
  g = mulc.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(op_names(*g) == std::vector<std::string>{"aten.reshape.default", "aten.full_like.default",
                                                 "aten.index.Tensor", "aten.index_put.default",
                                                 "aten.mul.Tensor", "aten.index.Tensor",
                                                 "aten.index_put.default", "aten.mul.Tensor"});

  // OneHot's depth sets the output shape: it must be known at export time.
  ModelBuilder hot;
  hot.input("i", {3}, onnx::TensorProto::INT64);
  hot.input("depth", {}, onnx::TensorProto::INT64);
  hot.init_floats("values", {2}, {0, 1});
  hot.node("OneHot", {"i", "depth", "values"}, {"y"}, "oh");
  hot.output("y");
  g = hot.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"oh\"): OneHot: depth (input 1, 'depth') must be known at "
        "export time: an initializer, a Constant, or computed from static shapes");
}

TEST_CASE("onnx: the training domain's optimizers need their domain imported and valid inputs") {
  const std::string training = "ai.onnx.preview.training";
  auto momentum = [&](bool import_domain, const std::string& mode,
                      std::vector<std::string> inputs) {
    ModelBuilder m;
    if (import_domain) {
      auto* import = m.model.add_opset_import();
      import->set_domain(training);
      import->set_version(1);
    }
    m.input("r", {});
    m.input("t", {}, onnx::TensorProto::INT64);
    m.input("x", {2});
    m.input("g", {2});
    m.input("v", {2});
    auto* n = m.node("Momentum", inputs, {"x_new", "v_new"}, "opt", training);
    ModelBuilder::str(n, "mode", mode);
    for (const char* name : {"alpha", "beta", "norm_coefficient"}) {
      auto* a = n->add_attribute();
      a->set_name(name);
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(0.5f);
    }
    m.output("x_new");
    m.output("v_new");
    return m.import();
  };
  Result<Graph> g = momentum(true, "nesterov", {"r", "t", "x", "g", "v"});
  INFO(g.status().to_string());
  REQUIRE(g.ok());

  g = momentum(false, "nesterov", {"r", "t", "x", "g", "v"});
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kInvalidInput);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0: node 0 (ai.onnx.preview.training::Momentum) is of domain "
        "'ai.onnx.preview.training', which the model's opset_import does not name");

  g = momentum(true, "heavy-ball", {"r", "t", "x", "g", "v"});
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"opt\"): Momentum: mode must be 'standard' or "
        "'nesterov', got 'heavy-ball'");

  g = momentum(true, "standard", {"r", "t", "x", "g"});
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"opt\"): Momentum: expects R, T and 3 inputs per "
        "optimized tensor, got 4 inputs");

  g = momentum(true, "standard", {"t", "r", "x", "g", "v"});
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"opt\"): Momentum: R must be a floating-point scalar");
}

TEST_CASE("onnx: outputs sized by the data are dynamic-bound graph outputs, never inputs") {
  ModelBuilder out;
  out.input("x", {2, 3});
  out.node("NonZero", {"x"}, {"nz"}, "nz");
  out.output("nz");
  Result<Graph> g = out.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  const Value& v = g->value(g->outputs()[0]);
  CHECK(v.spec.sizes == std::vector<int64_t>{2, 6});  // the bound: every element non-zero
  CHECK(v.spec.dynamism == ShapeDynamism::kDynamicBound);

  ModelBuilder used;
  used.input("x", {2, 3});
  used.node("NonZero", {"x"}, {"nz"}, "nz");
  used.node("Neg", {"nz"}, {"y"}, "neg");
  used.output("y");
  g = used.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/1 (node \"neg\"): Neg: input 'nz' has a size known only at run "
        "time (an output of NonZero, NonMaxSuppression or Unique); etc takes such tensors only "
        "as graph outputs");
}

TEST_CASE("onnx: Resize outside PyTorch's cases goes axis by axis, within bounds") {
  ModelBuilder m;
  m.input("x", {1, 1, 4, 4});
  m.init_ints("sizes", {4}, {1, 1, 6, 4});
  auto* rs = m.node("Resize", {"x", "", "", "sizes"}, {"y"}, "rs");
  ModelBuilder::str(rs, "mode", "cubic");
  m.output("y");
  Result<Graph> g = m.import();
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  // Only H changes: a [4, 6] interpolation matrix applied along it.
  CHECK(op_names(*g) == std::vector<std::string>{"aten.permute.default", "aten.reshape.default",
                                                 "aten.mm.default", "aten.reshape.default",
                                                 "aten.permute.default"});

  ModelBuilder big;
  big.input("x", {1, 1, 4, 4});
  big.init_ints("sizes", {4}, {1, 1, 4, int64_t{1} << 25});
  auto* huge = big.node("Resize", {"x", "", "", "sizes"}, {"y"}, "rs");
  ModelBuilder::str(huge, "mode", "linear");
  ModelBuilder::str(huge, "coordinate_transformation_mode", "asymmetric");
  big.output("y");
  g = big.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().code() == ErrorCode::kUnsupported);
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"rs\"): Resize: resizing dim 3 from 4 to 33554432 (over "
        "2^26 interpolation weights)");
}

TEST_CASE("onnx: malformed and unsupported models are clear errors") {
  const std::string junk = "this is not protobuf \xff\xff\xff\xff";
  Result<Graph> g = parse_onnx_model({reinterpret_cast<const uint8_t*>(junk.data()), junk.size()},
                                     "j.onnx", ".", {});
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "j.onnx: not a valid ONNX model: the protobuf message does not parse (25 bytes; truncated "
        "or not "
        "ONNX?)");

  ModelBuilder newer(22);
  newer.input("x", {1});
  newer.node("Relu", {"x"}, {"y"});
  newer.output("y");
  g = newer.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "the model uses ONNX opset 22; etc supports opsets 1 to 21");

  ModelBuilder order;
  order.input("x", {1});
  order.node("Relu", {"a"}, {"y"}, "late");
  order.node("Relu", {"x"}, {"a"}, "early");
  order.output("y");
  g = order.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"late\"): Relu: input 'a' is not defined before this node "
        "(ONNX "
        "graphs must list nodes in topological order)");

  ModelBuilder raw;
  raw.input("x", {2});
  auto* t = raw.g->add_initializer();
  t->set_name("k");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(2);
  t->set_raw_data(std::string(7, '\0'));
  raw.node("Add", {"x", "k"}, {"y"});
  raw.output("y");
  g = raw.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/initializer/0: tensor 'k': raw_data has 7 bytes, float32[2] needs 8");
}

TEST_CASE("onnx: nodes with missing, empty or extra inputs and outputs are located errors") {
  // fuzz_onnx found a Softmax without inputs that read past a repeated field (exit 70).
  Result<Graph> found = load_onnx_file(
      std::string(ETC_SOURCE_DIR) + "/test/onnx/regressions/softmax_without_inputs.onnx", {});
  REQUIRE_FALSE(found.ok());
  CHECK(found.status().message() == "Softmax: input 0 is required, but the node has 0 input(s)");
  CHECK(found.status().code() == ErrorCode::kInvalidInput);

  // Every input a fuzzer found (test/onnx/regressions): a located error, never exit 70; the
  // sanitizer build (make test-sanitize) also checks that reading them is clean.
  // split_of_a_scalar.onnx: Split of a 0-d tensor indexed its empty shape.
  size_t regressions = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(ETC_SOURCE_DIR) +
                                                               "/test/onnx/regressions")) {
    INFO(entry.path().string());
    Result<Graph> r = load_onnx_file(entry.path().string(), {});
    if (!r.ok()) {
      CHECK(r.status().code() != ErrorCode::kInternal);
      CHECK(r.status().to_string().find("/graph/") != std::string::npos);
    }
    ++regressions;
  }
  CHECK(regressions >= 2);

  // Every supported op, with every shape of arity: never an internal error or a crash.
  const std::vector<std::vector<std::string>> inputs = {{},
                                                        {""},
                                                        {"x"},
                                                        {"", "x"},
                                                        {"x", ""},
                                                        {"x", "x"},
                                                        {"x", "x", "x"},
                                                        {"x", "", "", "", "x"},
                                                        {"x", "x", "x", "x", "x", "x"}};
  const std::vector<std::vector<std::string>> outputs = {
      {}, {""}, {"y"}, {"", "y"}, {"y", "z", "w"}};
  for (const auto& [op, fn] : onnx_import::converters()) {
    // Another domain's ops are listed as "domain::OpType".
    const size_t sep = op.find("::");
    const std::string domain = sep == std::string::npos ? "" : op.substr(0, sep);
    const std::string type = sep == std::string::npos ? op : op.substr(sep + 2);
    for (const auto& in : inputs) {
      for (const auto& out : outputs) {
        ModelBuilder m;
        if (!domain.empty()) {
          auto* import = m.model.add_opset_import();
          import->set_domain(domain);
          import->set_version(1);
        }
        m.input("x", {2, 3});
        m.node(type, in, out, "n", domain);
        m.output(out.empty() || out.back().empty() ? "x" : out.back());
        INFO(op << " with " << in.size() << " input(s), " << out.size() << " output(s)");
        Result<Graph> g = m.import();
        if (!g.ok()) {
          CHECK(g.status().code() != ErrorCode::kInternal);
          CHECK(g.status().to_string().find("/graph/") != std::string::npos);
        }
      }
    }
  }
  ModelBuilder conv;
  conv.input("x", {1, 1, 4, 4});
  conv.node("Conv", {"x"}, {"y"}, "c");
  conv.output("y");
  Result<Graph> g = conv.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().to_string() ==
        "m.onnx: /graph/node/0 (node \"c\"): Conv: input 1 is required, but the node has 1 "
        "input(s)");
}

TEST_CASE("onnx: dim_value -1 is a dynamic dim (Paddle2ONNX writes it, ONNX Runtime agrees)") {
  ModelBuilder m;
  m.input("x", {1, 3});
  m.g->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(-1);
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  Result<Graph> g = m.import();
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() ==
        "input 'x' has shape [?, 3] with symbolic or unknown dims; give static sizes with "
        "--input-shape x=?x3 (each ? a size)");
  OnnxImportOptions given;
  given.input_shapes["x"] = {4, 3};
  g = m.import(given);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(g->value(g->inputs()[0]).spec.sizes == std::vector<int64_t>{4, 3});
}

TEST_CASE("onnx: --input-shape parsing") {
  auto ok = parse_input_shape("x=1x3x48x192");
  REQUIRE(ok.ok());
  CHECK(ok->first == "x");
  CHECK(ok->second == std::vector<int64_t>{1, 3, 48, 192});
  auto colon = parse_input_shape("onnx::Flatten_0=1x24x96");
  REQUIRE(colon.ok());
  CHECK(colon->first == "onnx::Flatten_0");
  auto scalar = parse_input_shape("t=scalar");
  REQUIRE(scalar.ok());
  CHECK(scalar->second.empty());
  for (const char* bad : {"x", "=1x2", "x=", "x=1xx2", "x=1x-2", "x=1x2x"}) {
    INFO(bad);
    auto r = parse_input_shape(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kUsage);
  }
}

}  // namespace
}  // namespace etc
