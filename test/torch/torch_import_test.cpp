// The torch.export importer on archives PyTorch wrote (test/torch/programs): signature,
// names, weights mapped from the archive (not copied) and read in the right layout, symbolic
// dims, the Core ATen forms, and telling model kinds apart by content.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>

#include "frontends/model_format.h"
#include "frontends/torch_export/pt2_archive.h"
#include "frontends/torch_export/torch_import.h"
#include "frontends/torch_export/torch_pickle.h"
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

// ---- torchao's weight-only int8 (a tensor subclass stored pickled) ---------------------------

// linear_int8wo.pt2: Linear(32, 16) after torchao's quantize_(m, Int8WeightOnlyConfig()),
// torch.export.export'ed (torch 2.14.1, torchao 0.18.0). Its weight is a torch.save archive
// whose pickle rebuilds a torchao.quantization.Int8Tensor.
TEST_CASE("linear_int8wo.pt2: the Int8Tensor weight imports as its int8 qdata and scale") {
  Result<std::shared_ptr<const Blob>> archive = map_file(kPrograms + "linear_int8wo.pt2");
  REQUIRE(archive.ok());
  Result<Graph> g = parse_torch_export(*archive, "linear_int8wo.pt2");
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  const Value& q = value_named(*g, "p_fc_weight_qdata");
  CHECK(q.kind == ValueKind::kConstant);
  CHECK(q.spec.type_string() == "int8[16, 32]");
  CHECK(q.spec.constant.size == 16 * 32);
  const Value& s = value_named(*g, "p_fc_weight_scale");
  CHECK(s.spec.type_string() == "float32[16, 1]");
  // The qdata's bytes are a window into the mapped archive (a stored entry of a stored entry).
  const uint8_t* base = (*archive)->bytes().data();
  const uint8_t* at = q.spec.constant.bytes().data();
  CHECK(at >= base);
  CHECK(at + 16 * 32 <= base + (*archive)->bytes().size());
}

namespace {
// The pickle of a .pt2's weight_0 (a torch.save archive inside the archive).
std::string weight_pickle(const std::string& program, const std::string& name) {
  Result<std::shared_ptr<const Blob>> archive = map_file(kPrograms + program);
  REQUIRE(archive.ok());
  Result<torch_import::ZipArchive> zip = torch_import::ZipArchive::open(*archive, "a.pt2");
  REQUIRE(zip.ok());
  const torch_import::ZipEntry* e = zip->find(name + "/data/weights/weight_0");
  REQUIRE(e != nullptr);
  Result<ConstantData> bytes = zip->read(*e);
  REQUIRE(bytes.ok());
  auto inner_blob =
      make_blob(std::string(reinterpret_cast<const char*>(bytes->bytes().data()), bytes->size));
  Result<torch_import::ZipArchive> inner = torch_import::ZipArchive::open(inner_blob, "w");
  REQUIRE(inner.ok());
  const torch_import::ZipEntry* p = inner->find("archive/data.pkl");
  REQUIRE(p != nullptr);
  Result<std::string> text = inner->read_text(*p);
  REQUIRE(text.ok());
  return *text;
}
// The pickle inside linear_int8wo.pt2's weight_0.
std::string int8wo_pickle() {
  return weight_pickle("linear_int8wo.pt2", "linear_int8wo");
}
Result<torch_import::PickledWeight> parse(const std::string& bytes) {
  return torch_import::parse_weight_pickle(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      "data.pkl");
}
// How many of the pickle's proper prefixes (every truncation) are errors.
size_t truncations_refused(const std::string& pkl) {
  size_t errors = 0;
  for (size_t n = 0; n < pkl.size(); ++n)
    errors += !parse(pkl.substr(0, n)).ok();
  return errors;
}
// How many of the pickles with one byte changed to one of `values` are errors (the rest parse;
// none may crash).
size_t changed_bytes_refused(const std::string& pkl, std::initializer_list<int> values) {
  size_t errors = 0;
  for (size_t i = 0; i < pkl.size(); ++i) {
    for (int v : values) {
      std::string b = pkl;
      if (static_cast<uint8_t>(b[i]) == v) continue;
      b[i] = static_cast<char>(v);
      errors += !parse(b).ok();
    }
  }
  return errors;
}
}  // namespace

TEST_CASE("The pickle reader rebuilds Int8Tensor's inner tensors without executing anything") {
  const std::string pkl = int8wo_pickle();
  Result<torch_import::PickledWeight> w = parse(pkl);
  INFO(w.status().to_string());
  REQUIRE(w.ok());
  CHECK(w->class_name == "torchao.quantization.Int8Tensor");
  CHECK(w->dtype == DType::kFloat32);
  CHECK(w->sizes == std::vector<int64_t>{16, 32});
  const torch_import::PickledTensor* q = w->tensor("qdata");
  REQUIRE(q != nullptr);
  CHECK(q->dtype == DType::kInt8);
  CHECK(q->sizes == std::vector<int64_t>{16, 32});
  CHECK(q->strides == std::vector<int64_t>{32, 1});
  CHECK(q->storage_key == "0");
  CHECK(q->storage_numel == 512);
  REQUIRE(w->tensor("scale") != nullptr);
  CHECK(w->tensor("scale")->dtype == DType::kFloat32);
  REQUIRE(w->attribute("block_size") != nullptr);
  CHECK(*w->attribute("block_size") == "[1, 32]");
  CHECK(*w->attribute("act_quant_kwargs") == "None");

  SECTION("a global off the allow-list is refused by name, at its byte") {
    // PROTO 2, GLOBAL 'os system', ... : the first global is refused before anything else.
    Result<torch_import::PickledWeight> bad = parse(std::string("\x80\x02"
                                                                "cos\nsystem\n",
                                                                13) +
                                                    "X\x02\0\0\0ls\x85R.");
    REQUIRE(!bad.ok());
    const std::string m = bad.status().to_string();
    INFO(m);
    CHECK(m.find("'os.system'") != std::string::npos);
    CHECK(m.find("data.pkl") != std::string::npos);
    CHECK(bad.status().location().byte_offset == std::optional<uint64_t>(2));
  }
  SECTION("POP and FRAME (found by fuzz_torch_pickle: their status outlived its result)") {
    CHECK(!parse("0").ok());
    Result<torch_import::PickledWeight> r =
        parse(std::string("\x80\x04\x95\x02\0\0\0\0\0\0\0N0N.", 16));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("holds None, not a tensor") != std::string::npos);
  }
  SECTION("every truncation is an error") {
    CHECK(truncations_refused(pkl) == pkl.size());
  }
  SECTION("every byte changed: an error or a weight, never a crash") {
    CHECK(changed_bytes_refused(pkl, {0x00, 0xff, 0x7f, 0x80, '(', 'R', 'h', 'Q', '.', 't'}) >
          pkl.size());
  }
}

// linear_w8a8.pt2: Linear(32, 16) after quantize_(m, Int8DynamicActivationInt8WeightConfig()),
// torch.export.export'ed (torch 2.14.1, torchao 0.18.0). Its Int8Tensor carries records
// describing the activations' quantization (NEWOBJ and BUILD of allow-listed plain classes).
TEST_CASE("The pickle reader reads Int8DynamicActivationInt8WeightConfig's records as text") {
  const std::string pkl = weight_pickle("linear_w8a8.pt2", "linear_w8a8");
  Result<torch_import::PickledWeight> w = parse(pkl);
  INFO(w.status().to_string());
  REQUIRE(w.ok());
  CHECK(w->class_name == "torchao.quantization.Int8Tensor");
  REQUIRE(w->tensor("qdata") != nullptr);
  CHECK(w->tensor("qdata")->sizes == std::vector<int64_t>{16, 32});
  REQUIRE(w->attribute("act_quant_kwargs") != nullptr);
  CHECK(*w->attribute("act_quant_kwargs") ==
        "QuantizeTensorToInt8Kwargs(granularity=PerRow(dim=-1), "
        "mapping_type=MappingType.SYMMETRIC, reduce_range=False)");
  CHECK(*w->attribute("act_quant_scale") == "None");

  SECTION("NEWOBJ and BUILD take only the allow-listed records") {
    // NEWOBJ of a tensor-rebuilding function, and BUILD of an int: refused, at their byte.
    for (const std::string& bad :
         {std::string("\x80\x02"
                      "ctorch._utils\n_rebuild_parameter\n)\x81.",
                      37),
          std::string("\x80\x02"
                      "K\x01}\x62.",
                      7),
          std::string("\x80\x02"
                      "ctorchao.quantization.granularity\nPerRow\n(K\x01t\x81.",
                      50),
          std::string("\x80\x02"
                      "ctorchao.quantization.quant_primitives\nMappingType\n)\x81.",
                      55)}) {
      Result<torch_import::PickledWeight> r = parse(bad);
      REQUIRE(!r.ok());
      INFO(r.status().to_string());
      CHECK((r.status().message().find("NEWOBJ") != std::string::npos ||
             r.status().message().find("BUILD") != std::string::npos));
      CHECK(r.status().location().byte_offset.has_value());
    }
    // A granularity that is not allow-listed is refused by name, with what etc reads.
    Result<torch_import::PickledWeight> r =
        parse(std::string("\x80\x02"
                          "ctorchao.quantization.granularity\nPerGroup\n)\x81.",
                          47));
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("'torchao.quantization.granularity.PerGroup'") !=
          std::string::npos);
    CHECK(r.status().message().find("per row (PerRow) or per tensor (PerTensor)") !=
          std::string::npos);
  }
  SECTION("every truncation is an error") {
    CHECK(truncations_refused(pkl) == pkl.size());
  }
  SECTION("every byte changed: an error or a weight, never a crash") {
    CHECK(changed_bytes_refused(pkl, {0x00, 0xff, 0x81, 'b', '(', 'R', 'h', '.', '}'}) >
          pkl.size());
  }
}

TEST_CASE("A record that holds itself prints within a budget (found by review: 4 GB of text)") {
  // act_quant_scale's None replaced by a PerTensor record whose state maps it to itself 16
  // times (through the memo): printing it recursed 32 ways a level. Its text is now capped.
  const std::string pkl = weight_pickle("linear_w8a8.pt2", "linear_w8a8");
  const size_t key = pkl.find("act_quant_scale");
  REQUIRE(key != std::string::npos);
  size_t at = key + std::string("act_quant_scale").size();
  if (pkl[at] == 'q') at += 2;  // the key's BINPUT
  REQUIRE(pkl[at] == 'N');
  std::string record = "ctorchao.quantization.granularity\nPerTensor\n)\x81q\xc8}(";
  for (int i = 0; i < 16; ++i)
    record += "h\xc8h\xc8";
  record += "ub";
  const std::string bad = pkl.substr(0, at) + record + pkl.substr(at + 1);
  Result<torch_import::PickledWeight> w = parse(bad);
  INFO(w.status().to_string());
  REQUIRE(w.ok());
  const std::string* scale = w->attribute("act_quant_scale");
  REQUIRE(scale != nullptr);
  CHECK(scale->rfind("PerTensor(", 0) == 0);
  CHECK(scale->size() < 2048);
}

TEST_CASE("linear_w8a8.pt2 imports: the quantized activations' integer product is _int_mm") {
  Result<std::shared_ptr<const Blob>> archive = map_file(kPrograms + "linear_w8a8.pt2");
  REQUIRE(archive.ok());
  Result<Graph> g = parse_torch_export(*archive, "linear_w8a8.pt2");
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  CHECK(count_op(*g, OpKind::IntMm) == 1);
  for (NodeId id : g->order()) {
    if (g->node(id).op == OpKind::IntMm)
      CHECK(g->value(g->node(id).outputs[0]).spec.type_string() == "int32[2, 16]");
  }
  CHECK(value_named(*g, "p_fc_weight_qdata").spec.type_string() == "int8[16, 32]");
}

TEST_CASE("The torchao release the importer names is the one the Python environment pins") {
  // Errors about torchao's ops and classes name the release etc was tested with
  // (kTorchaoTested); scripts/python/constraints.txt installs that release for the tests.
  std::ifstream f(std::string(ETC_SOURCE_DIR) + "/scripts/python/constraints.txt");
  REQUIRE(f.good());
  std::string line, pinned;
  while (std::getline(f, line)) {
    if (line.rfind("torchao==", 0) == 0) pinned = line.substr(9);
  }
  CHECK(pinned == torch_import::kTorchaoTested);
}

}  // namespace
}  // namespace etc
