// dce, remove-noops, fold-constants, pack-int4-weights and gather-rows-first.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "consteval/evaluate.h"
#include "passes/dead_code_elimination.h"
#include "passes/fold_batch_norm.h"
#include "passes/fold_constants.h"
#include "passes/gather_rows_first.h"
#include "passes/graph_builder.h"
#include "passes/pack_int4_weights.h"
#include "passes/remove_noops.h"

namespace etc {
namespace {

using testing::f32;
using testing::graph_from_json;
using testing::node;
using testing::require_valid;
using testing::unary;
using testing::value_named;

using Ctx = testing::PassCtx;

template <typename T>
std::vector<T> values_of(const Graph& g, const std::string& name) {
  const TensorSpec& s = g.value(value_named(g, name)).spec;
  REQUIRE(s.is_const);
  std::vector<T> out(s.constant.size / sizeof(T));
  std::memcpy(out.data(), s.constant.bytes().data(), s.constant.size);
  return out;
}

TEST_CASE("dce removes dead chains and unused constants, keeps inputs") {
  Graph g = graph_from_json("[" + f32("a") + "," + f32("unused") + "]",
                            "[" + unary("live", "aten.relu.default", "a", "y") + "," +
                                unary("dead1", "aten.neg.default", "a", "d1") + "," +
                                unary("dead2", "aten.exp.default", "d1", "d2") + "]",
                            R"(["y"])",
                            R"([{"name": "w", "dtype": "float32", "shape": [1], "values": [1]}])");
  Ctx c;
  REQUIRE(*dead_code_elimination(g, c.ctx));
  require_valid(g);
  CHECK(g.order().size() == 1);
  CHECK(g.constants().empty());
  CHECK(g.inputs().size() == 2);
  CHECK_FALSE(*dead_code_elimination(g, c.ctx));  // fixed point
}

TEST_CASE("remove-noops drops identity ops and keeps real ones") {
  Graph g = graph_from_json(
      "[" + f32("a", "[2, 3]") + "]",
      "[" + unary("c", "aten.clone.default", "a", "c") + "," +
          node("v", "aten.view.default", R"({"self": "c", "size": [2, 3]})", "v") + "," +
          node("p", "aten.permute.default", R"({"self": "v", "dims": [0, 1]})", "p") + "," +
          node("t", "aten.transpose.int", R"({"self": "p", "dim0": 1, "dim1": -1})", "t") + "," +
          node("s", "aten.slice.Tensor", R"({"self": "t", "dim": 1, "start": 0, "end": 3})", "s") +
          "," + node("real", "aten.permute.default", R"({"self": "s", "dims": [1, 0]})", "y") + "]",
      R"(["y"])");
  Ctx c;
  REQUIRE(*remove_noops(g, c.ctx));
  require_valid(g);
  REQUIRE(g.order().size() == 1);
  const Node& n = g.node(g.order()[0]);
  CHECK(n.name == "real");
  CHECK(std::get<ValueId>(n.args[0]) == value_named(g, "a"));
}

TEST_CASE("remove-noops keeps an identity op between a graph input and a graph output") {
  Graph g = graph_from_json("[" + f32("a") + "]",
                            "[" + unary("c", "aten.clone.default", "a", "y") + "]", R"(["y"])");
  Ctx c;
  CHECK_FALSE(*remove_noops(g, c.ctx));
  CHECK(g.order().size() == 1);
}

TEST_CASE("fold-constants results, checked element by element") {
  std::string constants = R"([
    {"name": "w", "dtype": "float32", "shape": [2, 3], "values": [1, 2, 3, 4, 5, 6]},
    {"name": "f", "dtype": "float32", "shape": [3], "values": [1.7, -2.7, 300.5]}])";
  auto fold = [&](const std::string& node_json, const std::string& shape) {
    Graph g = graph_from_json("[" + f32("x", shape) + "]",
                              "[" + node_json + R"(, {"name": "use", "op": "aten.add.Tensor",
                                 "args": {"self": "x", "other": "k"}, "outputs": ["y"]}])",
                              R"(["y"])", constants);
    Ctx c;
    REQUIRE(*fold_constants(g, c.ctx));
    require_valid(g);
    REQUIRE(g.order().size() == 1);
    return g;
  };
  CHECK(values_of<float>(fold(node("n", "aten.slice.Tensor",
                                   R"({"self": "w", "dim": 1, "start": 1, "step": 2})", "k"),
                              "[2, 1]"),
                         "k") == std::vector<float>{2, 5});
  CHECK(values_of<float>(
            fold(node("n", "aten.cat.default", R"({"tensors": ["w", "w"], "dim": 1})", "k"),
                 "[2, 6]"),
            "k") == std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  CHECK(
      values_of<float>(
          fold(node("n", "aten.expand.default", R"({"self": "f", "size": [2, 3]})", "k"), "[2, 3]"),
          "k") == std::vector<float>{1.7f, -2.7f, 300.5f, 1.7f, -2.7f, 300.5f});
  CHECK(
      values_of<float>(
          fold(node("n", "aten.select.int", R"({"self": "w", "dim": 0, "index": -1})", "k"), "[3]"),
          "k") == std::vector<float>{4, 5, 6});
  CHECK(values_of<float>(
            fold(node("n", "aten.transpose.int", R"({"self": "w", "dim0": 0, "dim1": 1})", "k"),
                 "[3, 2]"),
            "k") == std::vector<float>{1, 4, 2, 5, 3, 6});
  // float -> int32 truncates toward zero, like ATen.
  Graph cast = graph_from_json(
      R"([{"name": "x", "dtype": "int32", "shape": [3]}])",
      "[" + node("n", "aten._to_copy.default", R"({"self": "f", "dtype": "int32"})", "k") +
          R"(, {"name": "use", "op": "aten.add.Tensor", "args": {"self": "x", "other": "k"},
                                   "outputs": ["y"]}])",
      R"(["y"])", constants);
  Ctx c;
  REQUIRE(*fold_constants(cast, c.ctx));
  CHECK(values_of<int32_t>(cast, "k") == std::vector<int32_t>{1, -2, 300});
}

TEST_CASE("fold-constants shares bytes for reshapes instead of copying") {
  Graph g = graph_from_json(
      "[" + f32("x", "[6]") + "]",
      "[" + node("v", "aten.view.default", R"({"self": "w", "size": [6]})", "k") +
          R"(, {"name": "use", "op": "aten.add.Tensor", "args": {"self": "x", "other": "k"}, "outputs": ["y"]}])",
      R"(["y"])",
      R"([{"name": "w", "dtype": "float32", "shape": [2, 3], "values": [1, 2, 3, 4, 5, 6]}])");
  const uint8_t* before = g.value(value_named(g, "w")).spec.constant.bytes().data();
  Ctx c;
  REQUIRE(*fold_constants(g, c.ctx));
  CHECK(g.value(value_named(g, "k")).spec.constant.bytes().data() == before);
}

TEST_CASE("fold-constants keeps large int8 weights packed: their widening casts stay") {
  // A dequantized weight (int8 -> float32 cast) or one widened for an integer product (int8 ->
  // int32) above 4096 elements is left for run time; a small one (a zero point, a bias) folds.
  auto graph_with = [](int64_t n, const std::string& to = "float32") {
    const std::string size = std::to_string(n);
    std::string values;
    for (int64_t i = 0; i < n; ++i)
      values += (i ? "," : "") + std::to_string(i % 7 - 3);
    return graph_from_json(
        R"([{"name": "x", "dtype": ")" + to + R"(", "shape": [)" + size + "]}]",
        "[" +
            node("n", "aten._to_copy.default", R"({"self": "q", "dtype": ")" + to + R"("})", "k") +
            R"(, {"name": "use", "op": "aten.mul.Tensor", "args": {"self": "x", "other": "k"},
                                   "outputs": ["y"]}])",
        R"(["y"])",
        R"([{"name": "q", "dtype": "int8", "shape": [)" + size + R"(], "values": [)" + values +
            "]}]");
  };
  Graph big = graph_with(4097);
  Ctx c;
  CHECK_FALSE(*fold_constants(big, c.ctx));
  CHECK(big.order().size() == 2);
  Graph small = graph_with(4096);
  REQUIRE(*fold_constants(small, c.ctx));
  CHECK(small.order().size() == 1);
  CHECK(values_of<float>(small, "k")[0] == -3.0f);
  Graph big_int = graph_with(4097, "int32");
  CHECK_FALSE(*fold_constants(big_int, c.ctx));
  CHECK(big_int.order().size() == 2);
}

TEST_CASE("pack-int4-weights stores int8 weights of 4-bit values two a byte, exactly") {
  // q: int8 [rows, cols] of values `value(i)`, widened and multiplied by x (and, with
  // `output`, also a graph output itself).
  auto graph_with = [](int64_t rows, int64_t cols, int (*value)(int64_t), bool output = false) {
    const std::string shape = "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
    std::string values;
    for (int64_t i = 0; i < rows * cols; ++i)
      values += (i ? "," : "") + std::to_string(value(i));
    return graph_from_json(
        "[" + f32("x", shape) + "]",
        "[" + node("n", "aten._to_copy.default", R"({"self": "q", "dtype": "float32"})", "k") +
            R"(, {"name": "use", "op": "aten.mul.Tensor", "args": {"self": "x", "other": "k"},
                                   "outputs": ["y"]}])",
        output ? R"(["y", "q"])" : R"(["y"])",
        R"([{"name": "q", "dtype": "int8", "shape": )" + shape + R"(, "values": [)" + values +
            "]}]");
  };
  auto in_range = [](int64_t i) { return static_cast<int>((i * 7 + i / 5) % 16) - 8; };
  for (const int64_t cols : {int64_t{64}, int64_t{63}}) {
    INFO("cols " << cols);
    Graph g = graph_with(80, cols, in_range);
    const TensorSpec before = g.value(value_named(g, "q")).spec;
    const std::span<const uint8_t> original = before.constant.bytes();
    Ctx c;
    REQUIRE(*pack_int4_weights(g, c.ctx));
    require_valid(g);
    // q is now the output of an unpack_int4 (before its reader) of a uint8 constant.
    const Value& q = g.value(value_named(g, "q"));
    REQUIRE(q.kind == ValueKind::kNodeOutput);
    const Node& unpack = g.node(q.producer);
    CHECK(unpack.op == OpKind::UnpackInt4);
    CHECK(g.order().front() == q.producer);
    CHECK(q.spec.dtype == DType::kInt8);
    CHECK(q.spec.sizes == before.sizes);
    CHECK(std::get<int64_t>(unpack.args[1]) == cols);
    const TensorSpec& packed = g.value(std::get<ValueId>(unpack.args[0])).spec;
    const int64_t row = (cols + 1) / 2;
    CHECK(packed.dtype == DType::kUInt8);
    CHECK(packed.sizes == std::vector<int64_t>{80, row});
    // Value c of row r: the low nibble of byte c / 2 when c is even, else the high one.
    const std::span<const uint8_t> bytes = packed.constant.bytes();
    REQUIRE(bytes.size() == static_cast<size_t>(80 * row));
    for (int64_t r = 0; r < 80; ++r) {
      for (int64_t col = 0; col < cols; ++col) {
        const unsigned b = bytes[static_cast<size_t>(r * row + col / 2)];
        const int nibble = static_cast<int>(col % 2 ? b >> 4 : b & 15);
        const int v = nibble >= 8 ? nibble - 16 : nibble;
        REQUIRE(v == static_cast<int8_t>(original[static_cast<size_t>(r * cols + col)]));
      }
      if (cols % 2) CHECK((bytes[static_cast<size_t>(r * row + row - 1)] >> 4) == 0);
    }
    // fold-constants leaves the unpacking alone: the weight stays packed.
    CHECK_FALSE(*fold_constants(g, c.ctx));
    CHECK(g.node(g.value(value_named(g, "q")).producer).op == OpKind::UnpackInt4);
  }
  // Left as they are: a value out of range, fewer than kMinPackedInt4 values, a last dim of
  // 1 (no byte saved), a constant that is itself a graph output.
  Ctx c;
  Graph wide = graph_with(80, 64, [](int64_t i) { return i == 4000 ? 8 : -8; });
  CHECK_FALSE(*pack_int4_weights(wide, c.ctx));
  Graph column = graph_with(8192, 1, [](int64_t) { return 3; });
  CHECK_FALSE(*pack_int4_weights(column, c.ctx));
  Graph few = graph_with(63, 65, [](int64_t) { return -1; });
  CHECK_FALSE(*pack_int4_weights(few, c.ctx));
  Graph output = graph_with(
      80, 64, [](int64_t) { return 1; }, true);
  CHECK_FALSE(*pack_int4_weights(output, c.ctx));
  CHECK(output.value(value_named(output, "q")).kind == ValueKind::kConstant);
}

TEST_CASE("gather-rows-first dequantizes the rows an embedding reads, not its table") {
  // A table of 64 rows dequantized in groups of 8 (int8 [64, 4, 8], a zero point and a scale
  // per group, [64, 4, 1]), viewed [64, 32], read at 3 indices.
  std::string q, zp, scale;
  for (int i = 0; i < 64 * 32; ++i)
    q += (i ? "," : "") + std::to_string(i % 13 - 6);
  for (int i = 0; i < 64 * 4; ++i) {
    zp += (i ? "," : "") + std::to_string(i % 3 - 1);
    scale += (i ? "," : "") + std::to_string(0.01 * (i % 7 + 1));
  }
  auto graph = [&](const std::string& indices_shape) {
    return graph_from_json(
        R"([{"name": "idx", "dtype": "int64", "shape": )" + indices_shape + "}]",
        "[" + node("c", "aten._to_copy.default", R"({"self": "q", "dtype": "float32"})", "f") +
            "," + node("s", "aten.sub.Tensor", R"({"self": "f", "other": "zp"})", "d") + "," +
            node("m", "aten.mul.Tensor", R"({"self": "d", "other": "scale"})", "w3") + "," +
            node("v", "aten.reshape.default", R"({"self": "w3", "shape": [64, 32]})", "w") + "," +
            node("e", "aten.embedding.default", R"({"weight": "w", "indices": "idx"})", "y") + "]",
        R"(["y"])",
        R"([{"name": "q", "dtype": "int8", "shape": [64, 4, 8], "values": [)" + q +
            R"(]}, {"name": "zp", "dtype": "float32", "shape": [64, 4, 1], "values": [)" + zp +
            R"(]}, {"name": "scale", "dtype": "float32", "shape": [64, 4, 1], "values": [)" +
            scale + "]}]");
  };
  Graph g = graph("[1, 3]");
  Ctx c;
  REQUIRE(*gather_rows_first(g, c.ctx));
  require_valid(g);
  // Three gathers, one per constant, each of the constant (viewed [64, rest]); every other
  // node works on the 3 rows read, none on the 64-row table.
  int gathers = 0;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    const TensorSpec& out = g.value(n.outputs[0]).spec;
    if (n.op == OpKind::Embedding) {
      ++gathers;
      const ValueId w = std::get<ValueId>(n.args[0]);
      CHECK(g.value(w).spec.sizes[0] == 64);
      CHECK(out.sizes[0] == 1);
      CHECK(out.sizes[1] == 3);
    } else if (n.op != OpKind::Reshape ||
               g.value(std::get<ValueId>(n.args[0])).kind != ValueKind::kConstant) {
      INFO(n.name);
      CHECK(out.sizes[0] == 1);
    }
  }
  CHECK(gathers == 3);
  CHECK(g.value(value_named(g, "y")).spec.sizes == std::vector<int64_t>{1, 3, 32});
  // As many indices as rows (or more): the table is computed once, as written.
  Graph all = graph("[64]");
  CHECK_FALSE(*gather_rows_first(all, c.ctx));
}

TEST_CASE("fold-constants computes other ops with their CPU kernels") {
  // exp(w) * 3 + w over constants: every node folds, to the float32 bits the runtime's
  // kernels give (exp in float32, not a double rounded once).
  const std::string constants =
      R"([{"name": "w", "dtype": "float32", "shape": [3], "values": [0.1, -1.5, 2.25]},
          {"name": "i", "dtype": "int64", "shape": [3], "values": [7, -7, 9]}])";
  Graph g = graph_from_json(
      "[" + f32("x", "[3]") + "]",
      "[" + unary("e", "aten.exp.default", "w", "ew") + "," +
          node("m", "aten.mul.Scalar", R"({"self": "ew", "other": 3.0})", "m3") + "," +
          node("a", "aten.add.Tensor", R"({"self": "m3", "other": "w"})", "k") + "," +
          node("use", "aten.add.Tensor", R"({"self": "x", "other": "k"})", "y") + "]",
      R"(["y"])", constants);
  Ctx c;
  REQUIRE(*fold_constants(g, c.ctx));
  require_valid(g);
  REQUIRE(g.order().size() == 1);
  const std::vector<float> w{0.1f, -1.5f, 2.25f};
  std::vector<float> expected;
  for (float v : w)
    expected.push_back(std::exp(v) * 3.0f + v);
  CHECK(values_of<float>(g, "k") == expected);

  // Integer division rounds toward negative infinity with rounding_mode "floor", as ATen.
  Graph div = graph_from_json(
      R"([{"name": "x", "dtype": "int64", "shape": [3]}])",
      "[" +
          node("d", "aten.div.Tensor_mode",
               R"({"self": "i", "other": "two", "rounding_mode": "floor"})", "k") +
          "," + node("use", "aten.add.Tensor", R"({"self": "x", "other": "k"})", "y") + "]",
      R"(["y"])",
      R"([{"name": "i", "dtype": "int64", "shape": [3], "values": [7, -7, 9]},
          {"name": "two", "dtype": "int64", "shape": [], "values": [2]}])");
  REQUIRE(*fold_constants(div, c.ctx));
  CHECK(values_of<int64_t>(div, "k") == std::vector<int64_t>{3, -4, 4});
}

TEST_CASE("export-time evaluation leaves random ops and large results") {
  // rand draws anew on every run: evaluating it once would freeze one draw.
  CHECK_THAT(why_not_evaluable(OpKind::Rand), Catch::Contains("random"));
  CHECK(why_not_evaluable(OpKind::AddTensor).empty());
  const std::vector<ArgValue> size_only{std::vector<int64_t>{3}, std::monostate{}, std::monostate{},
                                        std::monostate{}, std::monostate{}};
  Result<std::vector<ConstantData>> r = evaluate_op(
      OpKind::Rand, size_only, [](ValueId) { return nullptr; },
      std::vector<TensorSpec>{TensorSpec::make(DType::kFloat32, {3})});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.status().message(), Catch::Contains("random"));
  Ctx c;

  // An outer product of two 200-vectors (1.6 KB in, 160 KB out) stays a node: folding it
  // would grow the program; the same product of 100-vectors (40 KB) folds.
  auto outer = [](int n) {
    std::string values;
    for (int i = 0; i < n; ++i)
      values += (i ? "," : "") + std::to_string(i);
    const std::string size = std::to_string(n);
    return graph_from_json(
        "[" + f32("x", "[" + size + ", " + size + "]") + "]",
        "[" + node("o", "aten.mm.default", R"({"self": "a", "mat2": "b"})", "k") + "," +
            node("use", "aten.add.Tensor", R"({"self": "x", "other": "k"})", "y") + "]",
        R"(["y"])",
        R"([{"name": "a", "dtype": "float32", "shape": [)" + size + R"(, 1], "values": [)" +
            values + R"(]}, {"name": "b", "dtype": "float32", "shape": [1, )" + size +
            R"(], "values": [)" + values + "]}]");
  };
  Graph big = outer(200);
  CHECK_FALSE(*fold_constants(big, c.ctx));
  Graph small = outer(100);
  REQUIRE(*fold_constants(small, c.ctx));
  std::vector<float> k = values_of<float>(small, "k");
  REQUIRE(k.size() == 10000);
  CHECK(k[3 * 100 + 7] == 21.0f);
}

TEST_CASE("fold-constants moves a packed weight's widening to just before its first use") {
  std::string values;
  for (int i = 0; i < 5000; ++i)
    values += (i ? "," : "") + std::to_string(i % 5);
  Graph g = graph_from_json(
      "[" + f32("x", "[5000]") + "]",
      "[" + node("cast", "aten._to_copy.default", R"({"self": "q", "dtype": "float32"})", "k") +
          "," + node("scale", "aten.mul.Tensor", R"({"self": "k", "other": "s"})", "w") + "," +
          unary("first", "aten.relu.default", "x", "r") + "," +
          node("use", "aten.mul.Tensor", R"({"self": "r", "other": "w"})", "y") + "]",
      R"(["y"])",
      R"([{"name": "q", "dtype": "int8", "shape": [5000], "values": [)" + values +
          R"(]}, {"name": "s", "dtype": "float32", "shape": [1], "values": [0.5]}])");
  Ctx c;
  REQUIRE(*fold_constants(g, c.ctx));
  require_valid(g);
  std::vector<std::string> names;
  for (NodeId id : g.order())
    names.push_back(g.node(id).name);
  CHECK(names == std::vector<std::string>{"first", "cast", "scale", "use"});
  CHECK_FALSE(*fold_constants(g, c.ctx));  // fixed point
}

// conv (2 output channels, 1x1 kernel over 1 input channel) -> batch norm -> relu.
std::string conv_bn(const std::string& bn_outputs, const std::string& graph_outputs,
                    bool with_bias = true) {
  return R"({"format": "etc.graph", "version": 1, "name": "t",
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 2, 2]}],
    "constants": [
      {"name": "w", "dtype": "float32", "shape": [2, 1, 1, 1], "values": [2.0, -1.0]},
      {"name": "b", "dtype": "float32", "shape": [2], "values": [0.5, 1.0]},
      {"name": "gamma", "dtype": "float32", "shape": [2], "values": [3.0, 0.5]},
      {"name": "beta", "dtype": "float32", "shape": [2], "values": [0.25, -2.0]},
      {"name": "mean", "dtype": "float32", "shape": [2], "values": [1.0, -4.0]},
      {"name": "var", "dtype": "float32", "shape": [2], "values": [3.0, 0.0]}],
    "nodes": [
      {"name": "conv", "op": "aten.convolution.default",
       "args": {"input": "x", "weight": "w", "bias": )" +
         std::string(with_bias ? R"("b")" : "null") + R"(, "stride": [1, 1],
                "padding": [0, 0], "dilation": [1, 1], "transposed": false,
                "output_padding": [0, 0], "groups": 1}, "outputs": ["c"]},
      {"name": "bn", "op": "aten._native_batch_norm_legit_no_training.default",
       "args": {"input": "c", "weight": "gamma", "bias": "beta", "running_mean": "mean",
                "running_var": "var", "momentum": 0.1, "eps": 1.0},
       "outputs": )" +
         bn_outputs + R"(},
      {"name": "act", "op": "aten.relu.default", "args": {"self": "y"}, "outputs": ["r"]}],
    "outputs": )" +
         graph_outputs + "}";
}

Graph parse(const std::string& text) {
  Result<Graph> g = parse_graph_json(text, "test.json", ".");
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  return std::move(g).value();
}

TEST_CASE("fold-batch-norm folds the statistics into the convolution's weight and bias") {
  // scale = gamma / sqrt(var + eps): 3/2 = 1.5 and 0.5/1 = 0.5.
  // W' = W * scale: 3, -0.5. b' = (b - mean) * scale + beta: -0.5, 0.5.
  for (bool with_bias : {true, false}) {
    INFO("conv bias: " << with_bias);
    Graph g = parse(conv_bn(R"(["y", "m", "s"])", R"(["r", "y"])", with_bias));
    Ctx c;
    Result<bool> r = fold_batch_norm(g, c.ctx);
    REQUIRE(r.ok());
    CHECK(*r);
    require_valid(g);
    for (NodeId id : g.order())
      CHECK(g.node(id).op != OpKind::NativeBatchNormNoTraining);
    const Node& conv = g.node(g.value(value_named(g, "y")).producer);  // the name lives on
    REQUIRE(conv.op == OpKind::Convolution);
    const Value& w = g.value(std::get<ValueId>(conv.args[1]));
    const Value& b = g.value(std::get<ValueId>(conv.args[2]));
    std::vector<float> wv(2), bv(2);
    std::memcpy(wv.data(), w.spec.constant.bytes().data(), 8);
    std::memcpy(bv.data(), b.spec.constant.bytes().data(), 8);
    CHECK(wv == std::vector<float>{3.0f, -0.5f});
    CHECK(bv == (with_bias ? std::vector<float>{-0.5f, 0.5f} : std::vector<float>{-1.25f, 0.0f}));
    CHECK(g.outputs()[1] == value_named(g, "y"));    // the graph output follows the fold
    CHECK_FALSE(g.find_value("gamma").has_value());  // the statistics are gone
  }
}

TEST_CASE("fold-batch-norm leaves a batch norm whose statistics outputs are read") {
  Graph g = parse(conv_bn(R"(["y", "m", "s"])", R"(["r", "m"])"));
  Ctx c;
  Result<bool> r = fold_batch_norm(g, c.ctx);
  REQUIRE(r.ok());
  CHECK_FALSE(*r);
}

}  // namespace
}  // namespace etc
