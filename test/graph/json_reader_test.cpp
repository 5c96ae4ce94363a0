#include "frontends/json/json_reader.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include <unistd.h>

#include "frontends/json/safetensors.h"
#include "support/base64.h"
#include "support/file_io.h"

namespace etc {
namespace {

Result<Graph> parse(const std::string& text, const std::string& dir = ".") {
  return parse_graph_json(text, "m.json", dir);
}

std::string err(const std::string& text) {
  Result<Graph> g = parse(text);
  REQUIRE_FALSE(g.ok());
  return g.status().to_string();
}

const char* kHeader = R"("format": "etc.graph", "version": 1, )";

TEST_CASE("a graph with inline constants loads, with defaults materialised") {
  std::string text =
      std::string("{") + kHeader + R"(
    "name": "tiny",
    "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "constants": [
      {"name": "w", "dtype": "float32", "shape": [4, 3], "values": [1,2,3,4,5,6,7,8,9,10,11,12]},
      {"name": "b", "dtype": "float32", "shape": [4], "data": ")" +
      base64_encode(std::string("\0\0\x80\x3f\0\0\0\x40\0\0\x40\x40\0\0\x80\x40", 16)) + R"("}
    ],
    "nodes": [
      {"name": "fc", "op": "aten.linear.default", "args": {"input": "x", "weight": "w", "bias": "b"},
       "outputs": [{"name": "h", "dtype": "float32", "shape": [2, 4]}]},
      {"name": "act", "op": "aten.hardtanh", "args": {"self": "h", "min_val": 0}, "outputs": ["y"]}
    ],
    "outputs": ["y", "h"]
  })";
  Result<Graph> g = parse(text);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(g->name == "tiny");
  CHECK(g->order().size() == 2);
  CHECK(g->outputs().size() == 2);
  const Node& act = g->node(g->order()[1]);
  CHECK(std::get<Scalar>(act.args[1]) == Scalar{int64_t{0}});
  CHECK(std::get<Scalar>(act.args[2]) == Scalar{int64_t{1}});  // default max_val
  CHECK(act.origin == "/nodes/1");
  const Value& b = g->value(*g->find_value("b"));
  float f[4];
  std::memcpy(f, b.spec.constant.bytes().data(), 16);
  CHECK(f[3] == 4.0f);
  const Value& w = g->value(*g->find_value("w"));
  std::memcpy(f, w.spec.constant.bytes().data(), 16);
  CHECK(f[1] == 2.0f);
}

TEST_CASE("nodes are scheduled topologically, keeping file order when free") {
  std::string text = std::string("{") + kHeader + R"(
    "inputs": [{"name": "x", "dtype": "float32", "shape": [3]}],
    "nodes": [
      {"name": "c", "op": "aten.add.Tensor", "args": {"self": "a", "other": "b"}, "outputs": ["z"]},
      {"name": "a", "op": "aten.relu.default", "args": {"self": "x"}, "outputs": ["a"]},
      {"name": "b", "op": "aten.neg.default", "args": {"self": "x"}, "outputs": ["b"]}
    ],
    "outputs": ["z"]
  })";
  Result<Graph> g = parse(text);
  REQUIRE(g.ok());
  std::vector<std::string> names;
  for (NodeId n : g->order())
    names.push_back(g->node(n).name);
  CHECK(names == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("scalars accept inf and nan strings, int[2] accepts one int") {
  std::string text = std::string("{") + kHeader + R"(
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 1, 4, 4]}],
    "nodes": [
      {"name": "c", "op": "aten.clamp.default", "args": {"self": "x", "min": "-inf", "max": 6.0}, "outputs": ["y"]},
      {"name": "p", "op": "aten.max_pool2d.default", "args": {"self": "y", "kernel_size": 2}, "outputs": ["z"]}
    ],
    "outputs": ["z"]
  })";
  Result<Graph> g = parse(text);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  const Node& c = g->node(g->order()[0]);
  CHECK(std::isinf(std::get<Scalar>(c.args[1]).to_double()));
  const Node& p = g->node(g->order()[1]);
  CHECK(std::get<std::vector<int64_t>>(p.args[1]) == std::vector<int64_t>{2, 2});
  CHECK(g->value(*g->find_value("z")).spec.sizes == std::vector<int64_t>{1, 1, 2, 2});
}

TEST_CASE("constants from a safetensors file are windows into the mapped file") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("etc_json_reader_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string w(24, '\0');
  for (int i = 0; i < 6; ++i) {
    float v = static_cast<float>(i) * 0.5f;
    std::memcpy(w.data() + 4 * i, &v, 4);
  }
  std::string st = write_safetensors({{"layer.w", DType::kFloat32, {2, 3}, w}});
  REQUIRE(write_file_atomic((dir / "w.safetensors").string(),
                            {reinterpret_cast<const uint8_t*>(st.data()), st.size()})
              .ok());
  std::string text = std::string("{") + kHeader + R"(
    "inputs": [{"name": "x", "dtype": "float32", "shape": [2, 3]}],
    "constants": [{"name": "w", "dtype": "float32", "shape": [2, 3],
                   "safetensors": {"file": "w.safetensors", "tensor": "layer.w"}}],
    "nodes": [{"name": "m", "op": "aten.mul.Tensor", "args": {"self": "x", "other": "w"}, "outputs": ["y"]}],
    "outputs": ["y"]
  })";
  Result<Graph> g = parse(text, dir.string());
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  const TensorSpec& spec = g->value(*g->find_value("w")).spec;
  float v;
  std::memcpy(&v, spec.constant.bytes().data() + 20, 4);
  CHECK(v == 2.5f);

  std::string wrong = text;
  wrong.replace(wrong.find("\"shape\": [2, 3],\n"), 16, "\"shape\": [3, 2],");
  Result<Graph> bad = parse(wrong, dir.string());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().to_string() ==
        "m.json: /constants/0/safetensors: constant 'w' is declared float32[3, 2] but tensor "
        "'layer.w' in "
        "'w.safetensors' is float32[2, 3]");
  fs::remove_all(dir);
}

TEST_CASE("syntax errors report line and column") {
  CHECK(err("{\n  \"format\": \"etc.graph\",\n  \"version\": 1,,\n}") ==
        "m.json:3:16: JSON syntax error: syntax error while parsing object key - unexpected ','; "
        "expected string "
        "literal");
}

TEST_CASE("values declared twice and nodes named twice are rejected") {
  CHECK(err(std::string("{") + kHeader +
            R"("inputs": [{"name": "x", "dtype": "float32", "shape": [1]},
                                                     {"name": "x", "dtype": "float32", "shape": [1]}],
            "nodes": [], "outputs": ["x"]})") ==
        "m.json: /inputs/1/name: duplicate value name 'x' (first declared at /inputs/0/name)");
}

TEST_CASE("float constants convert to float16 and bfloat16 with rounding") {
  std::string text = std::string("{") + kHeader + R"(
    "inputs": [{"name": "x", "dtype": "float16", "shape": [2]}],
    "constants": [{"name": "h", "dtype": "float16", "shape": [2], "values": [1.0, -2.0]},
                  {"name": "bf", "dtype": "bfloat16", "shape": [1], "values": [1.0]},
                  {"name": "i8", "dtype": "int8", "shape": [2], "values": [-128, 127]},
                  {"name": "m", "dtype": "bool", "shape": [2], "values": [true, false]}],
    "nodes": [{"name": "a", "op": "aten.add.Tensor", "args": {"self": "x", "other": "h"}, "outputs": ["y"]}],
    "outputs": ["y"]
  })";
  Result<Graph> g = parse(text);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  auto bytes = g->value(*g->find_value("h")).spec.constant.bytes();
  CHECK(bytes[0] == 0x00);
  CHECK(bytes[1] == 0x3c);
  CHECK(bytes[3] == 0xc0);
  auto bf = g->value(*g->find_value("bf")).spec.constant.bytes();
  CHECK(bf[1] == 0x3f);
  CHECK(bf[0] == 0x80);
  auto i8 = g->value(*g->find_value("i8")).spec.constant.bytes();
  CHECK(i8[0] == 0x80);
  CHECK(i8[1] == 0x7f);
}

}  // namespace
}  // namespace etc
