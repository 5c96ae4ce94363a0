// The torch.export importer on archives PyTorch wrote (test/torch/programs): signature,
// names, weights mapped from the archive (not copied) and read in the right layout, symbolic
// dims, the Core ATen forms, and telling model kinds apart by content.
#include <catch2/catch.hpp>
#include <cstring>

#include "frontends/model_format.h"
#include "frontends/torch_export/torch_import.h"
#include "runtime/npy.h"

namespace etc {
namespace {

const std::string kPrograms = std::string(ETC_SOURCE_DIR) + "/test/torch/programs/";

const Value& value_named(const Graph& g, const std::string& name) {
  auto id = g.find_value(name);
  REQUIRE(id.has_value());
  return g.value(*id);
}

size_t count_op(const Graph& g, OpKind op) {
  size_t n = 0;
  for (NodeId id : g.order())
    n += g.node(id).op == op;
  return n;
}

TEST_CASE("linear.pt2: inputs, outputs and parameters keep their names, weights stay mapped") {
  Result<std::shared_ptr<const Blob>> archive = map_file(kPrograms + "linear.pt2");
  REQUIRE(archive.ok());
  Result<Graph> g = parse_torch_export(*archive, "linear.pt2");
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  REQUIRE(g->inputs().size() == 1);
  CHECK(g->value(g->inputs()[0]).name == "x");
  CHECK(g->value(g->inputs()[0]).spec.type_string() == "float32[4, 32]");
  REQUIRE(g->outputs().size() == 1);
  CHECK(g->value(g->outputs()[0]).name == "linear");
  CHECK(g->value(g->outputs()[0]).spec.type_string() == "float32[4, 16]");
  const Value& w = value_named(*g, "p_fc_weight");
  const Value& b = value_named(*g, "p_fc_bias");
  CHECK(w.kind == ValueKind::kConstant);
  CHECK(w.spec.type_string() == "float32[16, 32]");
  // Stored entries are windows into the archive's own mapping.
  CHECK(w.spec.constant.blob == *archive);
  CHECK(b.spec.constant.blob == *archive);
  CHECK(w.spec.constant.size == 16 * 32 * 4);

  // The weights in the right layout: x W^T + b equals PyTorch eager's output.
  Result<rt::NpyArray> x = rt::read_npy(kPrograms + "linear.input_0.npy");
  Result<rt::NpyArray> y = rt::read_npy(kPrograms + "linear.expected_0.npy");
  REQUIRE(x.ok());
  REQUIRE(y.ok());
  auto floats = [](std::span<const uint8_t> bytes) {
    std::vector<float> v(bytes.size() / 4);
    std::memcpy(v.data(), bytes.data(), v.size() * 4);
    return v;
  };
  std::vector<float> xv =
      floats({reinterpret_cast<const uint8_t*>(x->data.data()), x->data.size()});
  std::vector<float> yv =
      floats({reinterpret_cast<const uint8_t*>(y->data.data()), y->data.size()});
  std::vector<float> wv = floats(w.spec.constant.bytes()), bv = floats(b.spec.constant.bytes());
  REQUIRE(xv.size() == 4 * 32);
  REQUIRE(yv.size() == 4 * 16);
  for (int i = 0; i < 4; ++i) {
    for (int o = 0; o < 16; ++o) {
      double acc = bv[o];
      for (int k = 0; k < 32; ++k)
        acc += static_cast<double>(xv[i * 32 + k]) * wv[o * 32 + k];
      CHECK(acc == Approx(yv[i * 16 + o]).margin(1e-5));
    }
  }
}

TEST_CASE("symbolic dims take --input-shape sizes within their range") {
  Result<Graph> none = load_torch_export_file(kPrograms + "linear_dynamic.pt2");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == ErrorCode::kUnsupported);
  CHECK(none.status().message().find("--input-shape x=s77x32") != std::string::npos);
  TorchImportOptions opts;
  opts.input_shapes["x"] = {9, 32};
  Result<Graph> g = load_torch_export_file(kPrograms + "linear_dynamic.pt2", opts);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(g->value(g->outputs()[0]).spec.type_string() == "float32[9, 16]");
  opts.input_shapes["x"] = {65, 32};
  Result<Graph> over = load_torch_export_file(kPrograms + "linear_dynamic.pt2", opts);
  REQUIRE_FALSE(over.ok());
  CHECK(over.status().code() == ErrorCode::kUsage);
  CHECK(over.status().message().find("outside s77 in [1, 64]") != std::string::npos);
}

TEST_CASE("Core ATen forms: SDPA's safe softmax and a 1-d convolution") {
  Result<Graph> sdpa = load_torch_export_file(kPrograms + "sdpa.core.pt2");
  INFO(sdpa.status().to_string());
  REQUIRE(sdpa.ok());
  CHECK(count_op(*sdpa, OpKind::EqScalar) == 1);
  CHECK(count_op(*sdpa, OpKind::LogicalNot) == 2);
  CHECK(count_op(*sdpa, OpKind::AnyDim) == 1);
  CHECK(count_op(*sdpa, OpKind::Softmax) == 1);
  CHECK(count_op(*sdpa, OpKind::Bmm) == 2);

  Result<Graph> conv = load_torch_export_file(kPrograms + "conv1d.core.pt2");
  INFO(conv.status().to_string());
  REQUIRE(conv.ok());
  CHECK(count_op(*conv, OpKind::Convolution) == 1);
  CHECK(conv->value(conv->outputs()[0]).spec.type_string() == "float32[2, 8, 20]");
}

TEST_CASE("model kinds are told by content, the extension only when content cannot say") {
  CHECK(*detect_model_format(kPrograms + "linear.pt2") == ModelFormat::kTorchExport);
  CHECK(*detect_model_format(std::string(ETC_SOURCE_DIR) + "/examples/mlp.json") ==
        ModelFormat::kGraphJson);
  CHECK(*detect_model_format("/nonexistent/model.onnx") == ModelFormat::kOnnx);
  CHECK(*detect_model_format("/nonexistent/model.pt2") == ModelFormat::kTorchExport);
}

}  // namespace
}  // namespace etc
