// The torch.export importer's driver: the archive's layout and versions, the weights and
// constants, the graph signature, the unsupported-op report, node conversion through the
// converter table, and the outputs.
#include "frontends/torch_export/torch_import.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "frontends/import_report.h"
#include "frontends/torch_export/importer.h"
#include "frontends/torch_export/torch_pickle.h"
#include "graph/verifier.h"

namespace etc {
namespace torch_import {

namespace {

// The archive layout and the serialized-program schema this importer reads.
constexpr const char* kArchiveFormat = "pt2";
constexpr const char* kArchiveVersion = "0";
constexpr int64_t kSchemaMajor = 8;

}  // namespace

// PyTorch's serde ScalarType enum (torch/_export/serde/schema.py).
std::optional<DType> dtype_from_torch(int64_t v) {
  switch (v) {
    case 1:
      return DType::kUInt8;
    case 2:
      return DType::kInt8;
    case 3:
      return DType::kInt16;
    case 4:
      return DType::kInt32;
    case 5:
      return DType::kInt64;
    case 6:
      return DType::kFloat16;
    case 7:
      return DType::kFloat32;
    case 8:
      return DType::kFloat64;
    case 12:
      return DType::kBool;
    case 13:
      return DType::kBFloat16;
    default:
      return std::nullopt;
  }
}

std::string torch_dtype_name(int64_t v) {
  static const std::map<int64_t, std::string> names = {
      {0, "unknown"},          {9, "complex32"},    {10, "complex64"},     {11, "complex128"},
      {28, "uint16"},          {29, "float8_e5m2"}, {30, "float8_e4m3fn"}, {31, "float8_e5m2fnuz"},
      {32, "float8_e4m3fnuz"}, {34, "uint32"},      {35, "uint64"}};
  auto it = names.find(v);
  if (it != names.end()) return it->second;
  if (auto d = dtype_from_torch(v)) return std::string(dtype_name(*d));
  return "dtype enum " + std::to_string(v);
}

namespace {
std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.pop_back();
  size_t b = 0;
  while (b < s.size() && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  return s.substr(b);
}
}  // namespace

// "File \"m.py\", line 49, in forward\n    return self.fc(x)\n  File ..." -> the first frame
// (the user's code) as "m.py:49: return self.fc(x)".
std::string source_line(const Json& node) {
  const Json* md = node.contains("metadata") ? &node["metadata"] : nullptr;
  if (md == nullptr || !md->is_object() || !md->contains("stack_trace") ||
      !(*md)["stack_trace"].is_string()) {
    return {};
  }
  std::string st = (*md)["stack_trace"].get<std::string>();
  static const std::regex frame(R"re(File "([^"]*)", line (\d+), in [^\n]*\n\s*([^\n]*))re");
  std::smatch m;
  if (!std::regex_search(st, m, frame)) return {};
  return m[1].str() + ":" + m[2].str() + ": " + trim(m[3].str());
}

// ---- Layout, versions, program --------------------------------------------------------------

Status Importer::find_layout() {
  // Every entry sits under one top folder (named after the archive or "archive"); the
  // archive_format record marks it.
  std::vector<std::string> candidates;
  for (const ZipEntry& e : zip_.entries()) {
    const std::string suffix = "archive_format";
    if (e.name.size() >= suffix.size() &&
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      std::string p = e.name.substr(0, e.name.size() - suffix.size());
      if (p.empty() || (p.back() == '/' && std::count(p.begin(), p.end(), '/') == 1)) {
        candidates.push_back(p);
      }
    }
  }
  if (candidates.size() != 1) {
    std::string names;
    for (size_t i = 0; i < zip_.entries().size() && i < 8; ++i)
      names += (i ? ", " : "") + zip_.entries()[i].name;
    return invalid_input(
        candidates.empty()
            ? "not a PyTorch .pt2 archive: no archive_format record (torch.export.save writes "
              "one); entries: " +
                  (names.empty() ? std::string("none") : names)
            : "the archive has " + std::to_string(candidates.size()) +
                  " archive_format records; etc reads archives holding one program",
        zip_.at(""));
  }
  prefix_ = candidates[0];
  // The program: models/<name>.json, exactly one.
  std::vector<std::string> models;
  const std::string dir = prefix_ + "models/";
  for (const ZipEntry& e : zip_.entries()) {
    if (e.name.rfind(dir, 0) == 0 && e.name.size() > dir.size() + 5 &&
        e.name.find('/', dir.size()) == std::string::npos &&
        e.name.compare(e.name.size() - 5, 5, ".json") == 0) {
      models.push_back(e.name);
    }
  }
  if (models.size() != 1) {
    return invalid_input(models.empty()
                             ? "the archive has no program (" + dir + "<name>.json)"
                             : "the archive holds " + std::to_string(models.size()) +
                                   " programs under " + dir + "; etc imports archives with one",
                         zip_.at(""));
  }
  model_entry_ = models[0];
  model_name_ = model_entry_.substr(dir.size(), model_entry_.size() - dir.size() - 5);
  return Status();
}

Status Importer::check_versions() {
  auto text = [&](const std::string& rel) -> Result<std::optional<std::string>> {
    const ZipEntry* e = zip_.find(prefix_ + rel);
    if (e == nullptr) return std::optional<std::string>();
    if (e->size > 4096) return invalid_input("the record is implausibly long", zip_.at(e->name));
    ETC_ASSIGN_OR_RETURN(std::string t, zip_.read_text(*e));
    return std::optional<std::string>(trim(t));
  };
  ETC_ASSIGN_OR_RETURN(auto format, text("archive_format"));
  if (*format != kArchiveFormat) {
    return unsupported("archive format '" + *format + "'; etc reads '" + kArchiveFormat + "'",
                       zip_.at(prefix_ + "archive_format"));
  }
  ETC_ASSIGN_OR_RETURN(auto version, text("archive_version"));
  if (version && *version != kArchiveVersion) {
    return unsupported("archive version " + *version + "; etc reads version " + kArchiveVersion,
                       zip_.at(prefix_ + "archive_version"));
  }
  ETC_ASSIGN_OR_RETURN(auto order, text("byteorder"));
  if (order && *order != "little") {
    return unsupported("byte order '" + *order + "'; etc reads little-endian archives",
                       zip_.at(prefix_ + "byteorder"));
  }
  return Status();
}

namespace {
Result<Json> parse_json_entry(const ZipArchive& zip, const ZipEntry& e) {
  ETC_ASSIGN_OR_RETURN(std::string text, zip.read_text(e));
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& err) {
    std::string what = err.what();
    size_t p = what.find("parse error");
    return invalid_input("malformed JSON: " + (p == std::string::npos ? what : what.substr(p)),
                         zip.at(e.name, static_cast<uint64_t>(err.byte > 0 ? err.byte - 1 : 0)));
  }
}
}  // namespace

Status Importer::read_program() {
  const ZipEntry* e = zip_.find(model_entry_);
  ETC_ASSIGN_OR_RETURN(program_, parse_json_entry(zip_, *e));
  if (!program_.is_object()) return invalid_input("the program must be a JSON object", at(""));
  ETC_ASSIGN_OR_RETURN(const Json* sv,
                       member(program_, "schema_version", "", Json::value_t::object, "an object"));
  int64_t major = sv->contains("major") && (*sv)["major"].is_number_integer()
                      ? (*sv)["major"].get<int64_t>()
                      : -1;
  int64_t minor = sv->contains("minor") && (*sv)["minor"].is_number_integer()
                      ? (*sv)["minor"].get<int64_t>()
                      : -1;
  if (major != kSchemaMajor) {
    return unsupported("serialized-program schema version " + std::to_string(major) + "." +
                           std::to_string(minor) + "; etc reads schema " +
                           std::to_string(kSchemaMajor) + ".x (torch 2.4 and later)",
                       at("/schema_version"));
  }
  return Status();
}

Status Importer::read_weight_configs() {
  auto read_config = [&](const std::string& rel, Json& out, std::string& entry) -> Status {
    entry = prefix_ + rel;
    const ZipEntry* e = zip_.find(entry);
    out = Json::object();
    if (e == nullptr) return Status();
    ETC_ASSIGN_OR_RETURN(Json j, parse_json_entry(zip_, *e));
    if (!j.is_object() || !j.contains("config") || !j["config"].is_object()) {
      return invalid_input("expected {\"config\": {name: {path_name, tensor_meta, ...}}}",
                           zip_.at(entry));
    }
    out = std::move(j["config"]);
    return Status();
  };
  ETC_RETURN_IF_ERROR(read_config("data/weights/" + model_name_ + "_weights_config.json",
                                  weights_config_, weights_entry_));
  ETC_RETURN_IF_ERROR(read_config("data/constants/" + model_name_ + "_constants_config.json",
                                  constants_config_, constants_entry_));
  return Status();
}

Result<TensorSpec> Importer::tensor_meta(const Json& meta, const std::string& where) const {
  auto fail = [&](const std::string& m) { return invalid_input(m, at(where)); };
  if (!meta.is_object()) return fail("tensor_meta must be an object");
  if (!meta.contains("dtype") || !meta["dtype"].is_number_integer())
    return fail("dtype is missing");
  int64_t d = meta["dtype"].get<int64_t>();
  std::optional<DType> dtype = dtype_from_torch(d);
  if (!dtype) return unsupported("dtype " + torch_dtype_name(d) + " is not supported", at(where));
  if (!meta.contains("sizes") || !meta["sizes"].is_array()) return fail("sizes are missing");
  std::vector<int64_t> sizes;
  for (const Json& s : meta["sizes"]) {
    if (!s.is_object() || !s.contains("as_int") || !s["as_int"].is_number_integer()) {
      return fail("a size is not a static int");
    }
    int64_t v = s["as_int"].get<int64_t>();
    if (v < 0) return fail("a size is negative");
    sizes.push_back(v);
  }
  if (meta.contains("layout") && meta["layout"].is_number_integer() &&
      meta["layout"].get<int64_t>() != 7) {  // 7: strided
    return unsupported("tensor layout " + std::to_string(meta["layout"].get<int64_t>()) +
                           " (etc reads strided tensors)",
                       at(where));
  }
  TensorSpec spec = TensorSpec::make(*dtype, std::move(sizes));
  if (std::string err = check_tensor_spec(spec); !err.empty()) return fail(err);
  return spec;
}

Result<ValueId> Importer::add_weight(const std::string& graph_name, const std::string& fqn,
                                     const std::string& pointer) {
  ETC_ASSIGN_OR_RETURN(TensorSpec spec, read_weight(fqn, pointer));
  return graph_.add_constant(
      graph_.find_value(graph_name) ? fresh_value_name(graph_name) : graph_name, std::move(spec));
}

bool Importer::is_pickled(const std::string& fqn) const {
  const Json* cfg = weights_config_.contains(fqn)     ? &weights_config_[fqn]
                    : constants_config_.contains(fqn) ? &constants_config_[fqn]
                                                      : nullptr;
  return cfg != nullptr && cfg->is_object() && cfg->contains("use_pickle") &&
         (*cfg)["use_pickle"].is_boolean() && (*cfg)["use_pickle"].get<bool>();
}

namespace {
// The tensor subclasses etc imports, and what their inner tensors must be.
Status check_subclass(const PickledWeight& w, const std::function<Status(const std::string&)>& no) {
  std::string found;
  for (const auto& [n, t] : w.tensors) {
    found += (found.empty() ? "" : ", ") + n + " " + std::string(dtype_name(t.dtype)) +
             shape_to_string(t.sizes);
  }
  for (const auto& [n, v] : w.attributes)
    found += ", " + n + "=" + v;
  if (w.class_name == "torchao.quantization.IntxUnpackedToInt8Tensor") {
    // IntxWeightOnlyConfig: int8 qdata [N, K] holding int1..int8 values, a scale and a zero
    // point per group; the program dequantizes with torchao.dequantize_affine.
    // Int8DynamicActivationIntxWeightConfig (ExecuTorch's 8da4w) has the same weight and
    // quantizes each activation per token in the program itself (choose_qparams_affine,
    // quantize_affine, dequantize_affine before the linear).
    const PickledTensor* q = w.tensor("qdata");
    const std::string* act = w.attribute("activation_quantization");
    const bool act_ok = act == nullptr || *act == "None" || *act == "'int8_asym_per_token'" ||
                        *act == "int8_asym_per_token";
    if (q == nullptr || w.tensor("scale") == nullptr || w.tensor("zero_point") == nullptr ||
        q->dtype != DType::kInt8 || q->sizes != w.sizes || !act_ok) {
      return no(
          "a torchao IntxUnpackedToInt8Tensor in a layout etc does not import (" + found +
          "); etc imports IntxWeightOnlyConfig's and Int8DynamicActivationIntxWeightConfig's: "
          "int8 qdata of the weight's shape, a scale and zero point, activations not "
          "quantized or quantized per token in the program");
    }
    return Status();
  }
  if (w.class_name != "torchao.quantization.Int8Tensor") {
    return no("a " + w.class_name + " (" + found +
              "); etc imports torchao's Int8Tensor and IntxUnpackedToInt8Tensor");
  }
  // Int8WeightOnlyConfig: int8 qdata [N, K] and a scale per row; no activation quantization.
  // Int8DynamicActivationInt8WeightConfig: the same weight, each activation quantized per row
  // (or per tensor), symmetric or not, at run time, which the program spells out in its nodes
  // (choose_qparams_affine, quantize_affine, _int_mm); act_quant_kwargs only describes them.
  // A static activation scale (Int8StaticActivationInt8WeightConfig) is refused.
  const PickledTensor* q = w.tensor("qdata");
  const PickledTensor* scale = w.tensor("scale");
  const std::string* act = w.attribute("act_quant_kwargs");
  const std::string* pre = w.attribute("act_pre_scale");
  auto none = [&](const char* name) {
    const std::string* v = w.attribute(name);
    return w.tensor(name) == nullptr && (v == nullptr || *v == "None");
  };
  bool act_ok = act == nullptr || *act == "None";
  for (const char* granularity : {"PerRow(dim=-1)", "PerTensor()"}) {
    for (const char* mapping : {"SYMMETRIC", "ASYMMETRIC"}) {
      for (const char* reduce : {"False", "True"}) {
        act_ok = act_ok || *act == std::string("QuantizeTensorToInt8Kwargs(granularity=") +
                                       granularity + ", mapping_type=MappingType." + mapping +
                                       ", reduce_range=" + reduce + ")";
      }
    }
  }
  if (q == nullptr || scale == nullptr || q->dtype != DType::kInt8 || q->sizes != w.sizes ||
      w.sizes.size() != 2 || !act_ok || (pre != nullptr && *pre != "None") ||
      !none("act_quant_scale") || !none("act_quant_zero_point")) {
    return no("a torchao Int8Tensor in a layout etc does not import (" + found +
              "); etc imports Int8WeightOnlyConfig's and Int8DynamicActivationInt8WeightConfig's: "
              "int8 qdata of the weight's shape, a scale, activations not quantized or "
              "quantized per row or per tensor at run time (no static scale, no pre-scale)");
  }
  return Status();
}
}  // namespace

Result<TorchSaveArchive> Importer::open_pickled(const std::string& fqn, std::string* file) const {
  const bool is_weight = weights_config_.contains(fqn);
  const Json& cfg = is_weight ? weights_config_[fqn] : constants_config_[fqn];
  Location where = zip_.at(is_weight ? weights_entry_ : constants_entry_);
  where.pointer = "/config/" + fqn;
  if (!cfg.contains("path_name") || !cfg["path_name"].is_string())
    return invalid_input("'" + fqn + "': path_name is missing", where);
  const std::string path = prefix_ + (is_weight ? "data/weights/" : "data/constants/") +
                           cfg["path_name"].get<std::string>();
  const ZipEntry* e = zip_.find(path);
  if (e == nullptr)
    return invalid_input("'" + fqn + "': its bytes (" + path + ") are missing", where);
  ETC_ASSIGN_OR_RETURN(ConstantData bytes, zip_.read(*e));
  *file = zip_.at(path).file;
  Result<TorchSaveArchive> read = read_torch_save(bytes, *file);
  if (!read.ok()) {
    return std::move(read).take_status().add_context(
        "while reading '" + fqn +
        "', which is stored pickled (use_pickle: true): etc reads torch.save archives of "
        "plain tensors and of torchao's Int8Tensor and IntxUnpackedToInt8Tensor");
  }
  return read;
}

Status Importer::check_pickled_weights() {
  for (const Json* config : {&weights_config_, &constants_config_}) {
    for (auto it = config->begin(); it != config->end(); ++it) {
      if (!is_pickled(it.key())) continue;
      std::string file;
      ETC_ASSIGN_OR_RETURN(TorchSaveArchive saved, open_pickled(it.key(), &file));
      if (saved.weight.class_name.empty()) continue;
      ETC_RETURN_IF_ERROR(check_subclass(saved.weight, [&](const std::string& m) {
        return etc::unsupported("'" + it.key() + "' is " + m,
                                saved.zip.at(saved.prefix + "data.pkl"));
      }));
    }
  }
  return Status();
}

Status Importer::read_pickled_weight(const std::string& graph_name, const std::string& fqn,
                                     const std::string& pointer) {
  std::string file;
  ETC_ASSIGN_OR_RETURN(TorchSaveArchive saved, open_pickled(fqn, &file));
  const PickledWeight& w = saved.weight;
  auto inner_spec = [&](const PickledTensor& t, const std::string& what) -> Result<TensorSpec> {
    TensorSpec spec = TensorSpec::make(t.dtype, t.sizes);
    auto fail = [&](const std::string& m) {
      return invalid_input("'" + fqn + "'" + what + ": " + m,
                           saved.zip.at(saved.prefix + "data.pkl"));
    };
    if (std::string err = check_tensor_spec(spec); !err.empty()) return fail(err);
    const uint64_t storage_bytes =
        static_cast<uint64_t>(t.storage_numel) * static_cast<uint64_t>(dtype_size(t.dtype));
    return storage_view(
        std::move(spec), t.strides, t.storage_offset, saved.prefix + "data/" + t.storage_key,
        storage_bytes, [&]() { return saved.storage(t); }, fail);
  };
  if (w.class_name.empty()) {  // a plain tensor, pickled
    ETC_ASSIGN_OR_RETURN(TensorSpec spec, inner_spec(w.tensors[0].second, ""));
    ValueId v = graph_.add_constant(
        graph_.find_value(graph_name) ? fresh_value_name(graph_name) : graph_name, std::move(spec));
    const TensorSpec& s = graph_.value(v).spec;
    env_[graph_name] = Entry{v, std::nullopt, s.dtype, s.sizes};
    return Status();
  }
  ETC_RETURN_IF_ERROR(check_subclass(w, [&](const std::string& m) {
    return etc::unsupported("'" + fqn + "' (" + file + ") is " + m, at(pointer));
  }));
  SubclassWeight sw{fqn, w.class_name, {}, {}};
  for (const auto& [n, t] : w.tensors) {
    ETC_ASSIGN_OR_RETURN(TensorSpec spec, inner_spec(t, "." + n));
    sw.inner.emplace(n, std::move(spec));
  }
  subclass_weights_[graph_name] = std::move(sw);
  return Status();
}

Result<TensorSpec> Importer::read_weight(const std::string& fqn, const std::string& pointer) {
  const Json* cfg = nullptr;
  std::string config_entry, dir;
  if (weights_config_.contains(fqn)) {
    cfg = &weights_config_[fqn];
    config_entry = weights_entry_;
    dir = prefix_ + "data/weights/";
  } else if (constants_config_.contains(fqn)) {
    cfg = &constants_config_[fqn];
    config_entry = constants_entry_;
    dir = prefix_ + "data/constants/";
  } else {
    return invalid_input("'" + fqn + "' is not in the archive's weights or constants config",
                         at(pointer));
  }
  Location where = zip_.at(config_entry);
  where.pointer = "/config/" + fqn;
  auto fail = [&](const std::string& m) { return invalid_input("'" + fqn + "': " + m, where); };
  if (!cfg->is_object()) return fail("expected an object");
  if (cfg->contains("use_pickle") && (*cfg)["use_pickle"].is_boolean() &&
      (*cfg)["use_pickle"].get<bool>()) {
    return etc::unsupported("'" + fqn +
                                "' is stored pickled (use_pickle: true) and the program "
                                "updates it; etc reads pickled parameters and constants only",
                            where);
  }
  if (!cfg->contains("path_name") || !(*cfg)["path_name"].is_string()) {
    return fail("path_name is missing");
  }
  if (!cfg->contains("tensor_meta")) return fail("tensor_meta is missing");
  const Json& meta = (*cfg)["tensor_meta"];
  ETC_ASSIGN_OR_RETURN(TensorSpec spec, tensor_meta(meta, pointer));
  std::string path = dir + (*cfg)["path_name"].get<std::string>();
  const ZipEntry* e = zip_.find(path);
  if (e == nullptr) return fail("its bytes (" + path + ") are missing from the archive");

  // Strides and storage offset: a view into the stored storage.
  std::vector<int64_t> strides;
  if (meta.contains("strides") && meta["strides"].is_array()) {
    for (const Json& s : meta["strides"]) {
      if (!s.is_object() || !s.contains("as_int") || !s["as_int"].is_number_integer()) {
        return fail("a stride is not a static int");
      }
      strides.push_back(s["as_int"].get<int64_t>());
    }
  } else {
    strides = contiguous_strides(spec.sizes);
  }
  int64_t offset = 0;
  if (meta.contains("storage_offset") && meta["storage_offset"].is_object() &&
      meta["storage_offset"].contains("as_int") &&
      meta["storage_offset"]["as_int"].is_number_integer()) {
    offset = meta["storage_offset"]["as_int"].get<int64_t>();
  }
  return storage_view(
      std::move(spec), strides, offset, path, e->size, [&]() { return zip_.read(*e); }, fail);
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 0);
  int64_t st = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = st;
    st *= sizes[i];
  }
  return strides;
}

Result<TensorSpec> storage_view(TensorSpec spec, const std::vector<int64_t>& strides,
                                int64_t offset, const std::string& path, uint64_t storage_bytes,
                                const std::function<Result<ConstantData>()>& read,
                                const std::function<Status(const std::string&)>& fail) {
  if (strides.size() != spec.rank()) return fail("strides and sizes differ in length");
  int64_t es = dtype_size(spec.dtype);
  int64_t numel = spec.numel();
  // The last element read: offset + sum (size-1)*stride, all non-negative, in the storage.
  uint64_t last = static_cast<uint64_t>(std::max<int64_t>(offset, 0));
  bool contiguous = offset >= 0;
  int64_t expect = 1;
  for (size_t i = spec.rank(); i-- > 0;) {
    if (strides[i] < 0 || offset < 0) return fail("negative strides or offset are not supported");
    if (spec.sizes[i] > 1 && strides[i] != expect) contiguous = false;
    if (spec.sizes[i] > 0) {
      uint64_t span = static_cast<uint64_t>(spec.sizes[i] - 1);
      if (strides[i] != 0 && span > (uint64_t{1} << 48) / static_cast<uint64_t>(strides[i])) {
        return fail("strides reach past any plausible storage");
      }
      last += span * static_cast<uint64_t>(strides[i]);
    }
    expect *= spec.sizes[i];
  }
  uint64_t storage_elems = storage_bytes / static_cast<uint64_t>(es);
  if (numel > 0 && last >= storage_elems) {
    return fail("tensor_meta reads element " + std::to_string(last) + " of a storage of " +
                std::to_string(storage_elems) + " elements (" + path + " has " +
                std::to_string(storage_bytes) + " bytes)");
  }
  ETC_ASSIGN_OR_RETURN(ConstantData data, read());
  if (contiguous) {
    data.offset += static_cast<size_t>(offset) * es;
    data.size = static_cast<size_t>(numel * es);
  } else {  // a strided view: gathered into contiguous bytes
    std::string out(static_cast<size_t>(numel * es), '\0');
    std::vector<int64_t> idx(spec.rank(), 0);
    std::span<const uint8_t> src = data.bytes();
    for (int64_t k = 0; k < numel; ++k) {
      int64_t at_elem = offset;
      for (size_t d = 0; d < spec.rank(); ++d)
        at_elem += idx[d] * strides[d];
      std::memcpy(out.data() + k * es, src.data() + at_elem * es, es);
      for (size_t d = spec.rank(); d-- > 0;) {
        if (++idx[d] < spec.sizes[d]) break;
        idx[d] = 0;
      }
    }
    auto blob = make_blob(std::move(out));
    size_t n = blob->bytes().size();
    data = ConstantData{std::move(blob), 0, n};
  }
  spec.is_const = true;
  spec.constant = std::move(data);
  return spec;
}

// ---- Signature: inputs ----------------------------------------------------------------------

namespace {
// "torch.ops.aten.index_copy_.default" -> true: ATen's in-place ops end their name (the part
// before the overload) with '_'.
bool is_in_place_target(const std::string& target) {
  size_t b = target.rfind('.');
  if (b == std::string::npos || b == 0) return false;
  size_t a = target.rfind('.', b - 1);
  a = a == std::string::npos ? 0 : a + 1;
  return b > a + 1 && target[b - 1] == '_' && target[a] != '_';
}

// The tensor name of a node's first input (an in-place op's `self`), or empty.
std::string first_input_name(const Json& node) {
  if (!node.contains("inputs") || !node["inputs"].is_array() || node["inputs"].empty()) return {};
  const Json& arg = node["inputs"][0];
  if (!arg.is_object() || !arg.contains("arg") || !arg["arg"].is_object() ||
      !arg["arg"].contains("as_tensor") || !arg["arg"]["as_tensor"].is_object() ||
      !arg["arg"]["as_tensor"].contains("name") || !arg["arg"]["as_tensor"]["name"].is_string())
    return {};
  return arg["arg"]["as_tensor"]["name"].get<std::string>();
}
}  // namespace

// The buffers a program writes: named by a buffer_mutation output (the functional form), or
// the root of an in-place op's `self` (the training dialect: `cache.index_copy_(...)`; the
// op's output is another name for the same tensor).
Status Importer::find_mutated_buffers(const Json& nodes) {
  const Json& sig = program_["graph_module"]["signature"];
  std::unordered_map<std::string, std::string> buffer_placeholder;  // fqn -> placeholder
  if (sig.contains("input_specs") && sig["input_specs"].is_array()) {
    for (const Json& s : sig["input_specs"]) {
      if (!s.is_object() || !s.contains("buffer") || !s["buffer"].is_object()) continue;
      const Json& b = s["buffer"];
      if (b.contains("buffer_name") && b["buffer_name"].is_string() && b.contains("arg") &&
          b["arg"].is_object() && b["arg"].contains("name") && b["arg"]["name"].is_string()) {
        buffer_placeholder[b["buffer_name"].get<std::string>()] =
            b["arg"]["name"].get<std::string>();
      }
    }
  }
  std::unordered_set<std::string> placeholders;
  for (const auto& [fqn, name] : buffer_placeholder)
    placeholders.insert(name);
  if (sig.contains("output_specs") && sig["output_specs"].is_array()) {
    for (size_t i = 0; i < sig["output_specs"].size(); ++i) {
      const Json& s = sig["output_specs"][i];
      if (!s.is_object() || !s.contains("buffer_mutation")) continue;
      const Json& m = s["buffer_mutation"];
      std::string ptr = "/graph_module/signature/output_specs/" + std::to_string(i);
      if (!m.is_object() || !m.contains("buffer_name") || !m["buffer_name"].is_string())
        return invalid_input("buffer_name is missing", at(ptr + "/buffer_mutation"));
      auto it = buffer_placeholder.find(m["buffer_name"].get<std::string>());
      if (it == buffer_placeholder.end()) {
        return invalid_input("the program mutates buffer '" + m["buffer_name"].get<std::string>() +
                                 "', which no input spec declares",
                             at(ptr + "/buffer_mutation/buffer_name"));
      }
      mutated_buffers_.insert(it->second);
    }
  }
  std::unordered_map<std::string, std::string> root;  // in-place output -> its root
  for (const Json& n : nodes) {
    if (!n.is_object() || !n.contains("target") || !n["target"].is_string()) continue;
    if (!is_in_place_target(n["target"].get<std::string>())) continue;
    std::string self = first_input_name(n);
    if (self.empty()) continue;
    std::string r = root.count(self) ? root[self] : self;
    if (placeholders.count(r)) mutated_buffers_.insert(r);
    if (n.contains("outputs") && n["outputs"].is_array() && !n["outputs"].empty() &&
        n["outputs"][0].is_object() && n["outputs"][0].contains("as_tensor") &&
        n["outputs"][0]["as_tensor"].is_object() && n["outputs"][0]["as_tensor"].contains("name") &&
        n["outputs"][0]["as_tensor"]["name"].is_string())
      root[n["outputs"][0]["as_tensor"]["name"].get<std::string>()] = r;
  }
  return Status();
}

Status Importer::read_inputs() {
  const Json& gm = program_["graph_module"];
  const Json& graph = gm["graph"];
  ETC_ASSIGN_OR_RETURN(const Json* inputs, member(graph, "inputs", "/graph_module/graph",
                                                  Json::value_t::array, "an array"));
  ETC_ASSIGN_OR_RETURN(const Json* sig, member(gm, "signature", "/graph_module",
                                               Json::value_t::object, "an object"));
  ETC_ASSIGN_OR_RETURN(const Json* specs, member(*sig, "input_specs", "/graph_module/signature",
                                                 Json::value_t::array, "an array"));
  if (specs->size() != inputs->size()) {
    return invalid_input("the signature lists " + std::to_string(specs->size()) +
                             " inputs, the graph has " + std::to_string(inputs->size()),
                         at("/graph_module/signature/input_specs"));
  }
  const Json& ranges =
      program_.contains("range_constraints") && program_["range_constraints"].is_object()
          ? program_["range_constraints"]
          : Json::object();
  std::set<std::string> shaped;
  // The symbols --input-shape fixes, whichever input they are read from first: an input
  // sized by the same symbol takes that size.
  for (const auto& [given_name, want] : options_.input_shapes) {
    if (!tensor_values_->contains(given_name)) continue;
    const Json& sizes = (*tensor_values_)[given_name].value("sizes", Json::array());
    for (size_t k = 0; k < sizes.size() && k < want.size(); ++k) {
      const Json& d = sizes[k];
      if (!d.is_object() || !d.contains("as_expr") || !d["as_expr"].is_object()) continue;
      const std::string sym = bare_symbol(d["as_expr"].value("expr_str", ""));
      if (!sym.empty()) sym_ints_.emplace(sym, want[k]);
    }
  }
  for (size_t i = 0; i < specs->size(); ++i) {
    std::string ptr = "/graph_module/signature/input_specs/" + std::to_string(i);
    const Json& s = (*specs)[i];
    if (!s.is_object() || s.size() != 1)
      return invalid_input("expected an object with one key", at(ptr));
    const std::string kind = s.begin().key();
    const Json& body = s.begin().value();
    const Json& gin = (*inputs)[i];
    if (!gin.is_object() || !gin.contains("as_tensor") || !gin["as_tensor"].is_object() ||
        !gin["as_tensor"].contains("name") || !gin["as_tensor"]["name"].is_string()) {
      return etc::unsupported("graph input " + std::to_string(i) + " (" + kind +
                                  ") is not a tensor; etc imports tensor inputs only",
                              at("/graph_module/graph/inputs/" + std::to_string(i)));
    }
    std::string name = gin["as_tensor"]["name"].get<std::string>();
    if (env_.count(name)) return invalid_input("input '" + name + "' is defined twice", at(ptr));
    auto fqn_of = [&](const char* key) -> Result<std::string> {
      if (!body.is_object() || !body.contains(key) || !body[key].is_string()) {
        return invalid_input(std::string("'") + key + "' is missing", at(ptr + "/" + kind));
      }
      return body[key].get<std::string>();
    };
    if (kind == "buffer" && mutated_buffers_.count(name)) {
      // State: planned, loaded with the buffer's value, written back after each execution.
      ETC_ASSIGN_OR_RETURN(std::string fqn, fqn_of("buffer_name"));
      ETC_ASSIGN_OR_RETURN(TensorSpec spec, read_weight(fqn, ptr));
      ConstantData initial = std::move(spec.constant);
      spec.constant = ConstantData{};
      ValueId v = graph_.add_state(name, std::move(spec), fqn, std::move(initial));
      graph_.value(v).origin = ptr;
      const TensorSpec& state = graph_.value(v).spec;
      env_[name] = Entry{v, std::nullopt, state.dtype, state.sizes};
    } else if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant" ||
               kind == "constant_tensor") {
      const char* key = kind == "parameter" ? "parameter_name"
                        : kind == "buffer"  ? "buffer_name"
                                            : "tensor_constant_name";
      if (kind != "buffer") fixed_placeholders_[name] = kind;
      if (kind == "buffer") weight_buffers_.insert(name);
      ETC_ASSIGN_OR_RETURN(std::string fqn, fqn_of(key));
      if (is_pickled(fqn)) {
        ETC_RETURN_IF_ERROR(read_pickled_weight(name, fqn, ptr));
        continue;
      }
      ETC_ASSIGN_OR_RETURN(ValueId v, add_weight(name, fqn, ptr));
      const TensorSpec& spec = graph_.value(v).spec;
      env_[name] = Entry{v, std::nullopt, spec.dtype, spec.sizes};
    } else if (kind == "user_input") {
      fixed_placeholders_[name] = "user input";
      if (!tensor_values_->contains(name)) {
        return invalid_input("input '" + name + "' has no entry in tensor_values",
                             at("/graph_module/graph/tensor_values"));
      }
      const Json& meta = (*tensor_values_)[name];
      std::string mptr = "/graph_module/graph/tensor_values/" + name;
      if (!meta.is_object() || !meta.contains("sizes") || !meta["sizes"].is_array()) {
        return invalid_input("sizes are missing", at(mptr));
      }
      // Symbolic dims take their sizes from --input-shape, checked against the ranges.
      std::vector<int64_t> sizes;
      std::vector<std::string> symbols;  // per dim; empty for static
      bool dynamic = false;
      for (const Json& d : meta["sizes"]) {
        if (d.is_object() && d.contains("as_int") && d["as_int"].is_number_integer()) {
          sizes.push_back(d["as_int"].get<int64_t>());
          symbols.emplace_back();
        } else if (d.is_object() && d.contains("as_expr") && d["as_expr"].is_object() &&
                   d["as_expr"].contains("expr_str") && d["as_expr"]["expr_str"].is_string()) {
          std::string expr = d["as_expr"]["expr_str"].get<std::string>();
          std::string sym = bare_symbol(expr);
          if (sym.empty()) {
            return etc::unsupported("input '" + name + "' has a dim given by the expression '" +
                                        expr + "'; etc reads dims that are one symbol",
                                    at(mptr));
          }
          sizes.push_back(-1);
          symbols.push_back(sym);
          dynamic = true;
        } else {
          return invalid_input("a size is neither an int nor a symbolic expression", at(mptr));
        }
      }
      auto range_text = [&](const std::string& sym) {
        std::string lo = "?", hi = "?";
        if (ranges.contains(sym) && ranges[sym].is_object()) {
          if (ranges[sym].contains("min_val") && ranges[sym]["min_val"].is_number_integer())
            lo = std::to_string(ranges[sym]["min_val"].get<int64_t>());
          if (ranges[sym].contains("max_val") && ranges[sym]["max_val"].is_number_integer())
            hi = std::to_string(ranges[sym]["max_val"].get<int64_t>());
        }
        return sym + " in [" + lo + ", " + hi + "]";
      };
      auto given = options_.input_shapes.find(name);
      // A point of a bounded dynamic export: every symbol has a value.
      std::vector<int64_t> at_point;
      bool valued = dynamic && given == options_.input_shapes.end();
      for (size_t k = 0; valued && k < sizes.size(); ++k) {
        if (symbols[k].empty()) {
          at_point.push_back(sizes[k]);
        } else if (auto it = options_.symbol_values.find(symbols[k]);
                   it != options_.symbol_values.end()) {
          at_point.push_back(it->second);
        } else if (auto known = sym_ints_.find(symbols[k]); known != sym_ints_.end()) {
          at_point.push_back(known->second);  // fixed by an earlier input's --input-shape
        } else {
          valued = false;
        }
      }
      if (valued) {
        for (size_t k = 0; k < sizes.size(); ++k) {
          if (!symbols[k].empty()) sym_ints_[symbols[k]] = at_point[k];
        }
        sizes = at_point;
        dynamic = false;
      }
      if (dynamic && given == options_.input_shapes.end()) {
        std::string dims, syms, tmpl;
        for (size_t k = 0; k < sizes.size(); ++k) {
          tmpl += (k ? "x" : "") + (symbols[k].empty() ? std::to_string(sizes[k]) : symbols[k]);
          if (!symbols[k].empty() && syms.find(range_text(symbols[k])) == std::string::npos) {
            syms += (syms.empty() ? "" : ", ") + range_text(symbols[k]);
          }
        }
        return etc::unsupported("input '" + name + "' has symbolic dims (" + syms +
                                    "): give its sizes with --input-shape " + name + "=" + tmpl,
                                at(mptr));
      }
      if (given != options_.input_shapes.end()) {
        shaped.insert(name);
        const std::vector<int64_t>& want = given->second;
        if (want.size() != sizes.size()) {
          return Status(ErrorCode::kUsage,
                        "--input-shape " + name + ": rank " + std::to_string(want.size()) +
                            ", the program's input has rank " + std::to_string(sizes.size()));
        }
        for (size_t k = 0; k < sizes.size(); ++k) {
          if (symbols[k].empty()) {
            if (want[k] != sizes[k]) {
              return Status(ErrorCode::kUsage,
                            "--input-shape " + name + ": dim " + std::to_string(k) + " is " +
                                std::to_string(want[k]) + ", the program fixes it at " +
                                std::to_string(sizes[k]));
            }
            continue;
          }
          const std::string& sym = symbols[k];
          if (ranges.contains(sym) && ranges[sym].is_object()) {
            const Json& r = ranges[sym];
            bool below = r.contains("min_val") && r["min_val"].is_number_integer() &&
                         want[k] < r["min_val"].get<int64_t>();
            bool above = r.contains("max_val") && r["max_val"].is_number_integer() &&
                         want[k] > r["max_val"].get<int64_t>();
            if (below || above) {
              return Status(ErrorCode::kUsage,
                            "--input-shape " + name + ": dim " + std::to_string(k) + " = " +
                                std::to_string(want[k]) + " is outside " + range_text(sym));
            }
          }
          auto [it, fresh] = sym_ints_.emplace(sym, want[k]);
          if (!fresh && it->second != want[k]) {
            return Status(ErrorCode::kUsage, "--input-shape " + name + ": dim " +
                                                 std::to_string(k) + " is " +
                                                 std::to_string(want[k]) + " but symbol " + sym +
                                                 " is already " + std::to_string(it->second));
          }
          sizes[k] = want[k];
        }
      }
      Json static_meta = meta;
      static_meta["sizes"] = Json::array();
      for (int64_t d : sizes)
        static_meta["sizes"].push_back(Json{{"as_int", d}});
      ETC_ASSIGN_OR_RETURN(TensorSpec spec, tensor_meta(static_meta, mptr));
      ValueId v = graph_.add_input(name, spec);
      env_[name] = Entry{v, std::nullopt, spec.dtype, spec.sizes};
    } else {
      return etc::unsupported("graph input " + std::to_string(i) + " '" + name + "' is a " + kind +
                                  "; etc imports parameters, buffers, constants and tensor inputs",
                              at(ptr));
    }
  }
  for (const auto& [n, shape] : options_.input_shapes) {
    if (!shaped.count(n)) {
      return Status(ErrorCode::kUsage,
                    "--input-shape names '" + n +
                        "', which is not an input with symbolic dims of this program");
    }
  }
  return Status();
}

// ---- Nodes ----------------------------------------------------------------------------------

// "torch.ops.aten.linear.default" -> "aten.linear.default"; other targets as written.
std::string short_target(const Json& node) {
  if (!node.is_object() || !node.contains("target") || !node["target"].is_string()) return "";
  std::string t = node["target"].get<std::string>();
  if (t.rfind("torch.ops.", 0) == 0) t = t.substr(10);
  return t;
}

Status Importer::report_unsupported() {
  const auto& table = torch_converters();
  const Json& nodes = program_["graph_module"]["graph"]["nodes"];
  std::map<std::string, UnsupportedOp> missing;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string t = short_target(nodes[i]);
    if (t.empty()) {
      return invalid_input("the node has no target",
                           at("/graph_module/graph/nodes/" + std::to_string(i)));
    }
    if (table.count(t)) continue;
    std::string name = nodes[i].contains("name") && nodes[i]["name"].is_string()
                           ? nodes[i]["name"].get<std::string>()
                           : t + "#" + std::to_string(i);
    UnsupportedOp& u = missing[t];
    if (u.nodes.empty()) {
      u.source = source_line(nodes[i]);
      u.reason = torch_refusal(t).value_or("");
    }
    u.nodes.push_back(name);
  }
  if (missing.empty()) return Status();
  return unsupported_ops(missing, "op", "--torch", at("/graph_module/graph/nodes"));
}

Status Importer::check_output_types(const Json& node, int index, const std::string& node_name) {
  // The program records each output's dtype and sizes: etc's inference must agree.
  if (!node.contains("outputs") || !node["outputs"].is_array()) return Status();
  std::vector<std::string> names;
  for (const Json& o : node["outputs"]) {
    if (o.is_object() && o.contains("as_tensor") && o["as_tensor"].is_object() &&
        o["as_tensor"].contains("name") && o["as_tensor"]["name"].is_string()) {
      names.push_back(o["as_tensor"]["name"].get<std::string>());
    } else if (o.is_object() && o.contains("as_tensors") && o["as_tensors"].is_array()) {
      for (const Json& t : o["as_tensors"]) {
        if (t.is_object() && t.contains("name") && t["name"].is_string())
          names.push_back(t["name"].get<std::string>());
      }
    }
  }
  for (const std::string& n : names) {
    auto e = env_.find(n);
    if (e == env_.end() || !tensor_values_->contains(n)) continue;
    const Json& meta = (*tensor_values_)[n];
    if (!meta.is_object() || !meta.contains("dtype") || !meta["dtype"].is_number_integer() ||
        !meta.contains("sizes") || !meta["sizes"].is_array()) {
      continue;
    }
    std::optional<DType> dt = dtype_from_torch(meta["dtype"].get<int64_t>());
    std::vector<int64_t> sizes;
    bool is_static = true;
    for (const Json& s : meta["sizes"]) {
      if (s.is_object() && s.contains("as_int") && s["as_int"].is_number_integer()) {
        sizes.push_back(s["as_int"].get<int64_t>());
      } else {
        is_static = false;
      }
    }
    bool dtype_ok = !dt || *dt == e->second.dtype;
    bool sizes_ok = !is_static || sizes == e->second.shape;
    if (!dtype_ok || !sizes_ok) {
      std::string theirs = (dt ? std::string(dtype_name(*dt)) : "?") +
                           (is_static ? shape_to_string(sizes) : "[symbolic]");
      return invalid_input("the program records '" + n + "' as " + theirs + "; etc computes " +
                               std::string(dtype_name(e->second.dtype)) +
                               shape_to_string(e->second.shape),
                           at("/graph_module/graph/nodes/" + std::to_string(index), node_name));
    }
  }
  return Status();
}

Status Importer::convert_nodes() {
  const auto& table = torch_converters();
  const Json& nodes = program_["graph_module"]["graph"]["nodes"];
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::string t = short_target(nodes[i]);
    TorchNode ctx(*this, nodes[i], static_cast<int>(i), t);
    if (!nodes[i].contains("inputs") || !nodes[i]["inputs"].is_array()) {
      return ctx.invalid("'inputs' must be an array");
    }
    if (!nodes[i].contains("outputs") || !nodes[i]["outputs"].is_array()) {
      return ctx.invalid("'outputs' must be an array");
    }
    // View ops of the default export alias their input (Core ATen's are copies in effect,
    // but nothing writes in place there): each tensor output is recorded as a view of the
    // first tensor argument, made at its root's current write count. contiguous, reshape and
    // flatten copy a non-contiguous input (its eager layout says which), and dropout in
    // training makes a new tensor: those are not views.
    static const std::unordered_set<std::string> kViews = {
        "aten.view.default",       "aten._unsafe_view.default", "aten.reshape.default",
        "aten.flatten.using_ints", "aten.permute.default",      "aten.transpose.int",
        "aten.t.default",          "aten.unsqueeze.default",    "aten.squeeze.dim",
        "aten.squeeze.dims",       "aten.squeeze.default",      "aten.expand.default",
        "aten.expand_as.default",  "aten.slice.Tensor",         "aten.select.int",
        "aten.alias.default",      "aten.detach.default",       "aten.contiguous.default",
        "aten.dropout.default",    "aten.narrow.default",       "aten.unflatten.int",
        "aten.movedim.int",        "aten.movedim.intlist",      "aten.swapaxes.default",
        "aten.swapdims.default",   "aten.numpy_T.default",      "aten.diagonal.default",
        "aten.as_strided.default", "aten.split.Tensor",         "aten.split_with_sizes.default",
        "aten.chunk.default",      "aten.unbind.int",           "aten.view_as.default"};
    static const std::unordered_set<std::string> kCopyWhenStrided = {
        "aten.reshape.default", "aten.flatten.using_ints", "aten.contiguous.default"};
    if (kViews.count(t)) {
      std::string base;
      for (const Json& in : nodes[i]["inputs"]) {
        if (in.is_object() && in.contains("arg") && in["arg"].is_object() &&
            in["arg"].contains("as_tensor") && in["arg"]["as_tensor"].is_object() &&
            in["arg"]["as_tensor"].contains("name") && in["arg"]["as_tensor"]["name"].is_string()) {
          base = in["arg"]["as_tensor"]["name"].get<std::string>();
          break;  // the first tensor argument is the viewed one
        }
      }
      if (kCopyWhenStrided.count(t) && !eager_contiguous(base)) base.clear();
      if (t == "aten.dropout.default" && !dropout_in_eval(nodes[i])) base.clear();
      // An in-place op's output names the tensor it wrote: view that tensor.
      if (auto r = alias_root_.find(base); r != alias_root_.end()) base = r->second;
      auto record = [&](const Json& o) {
        if (base.empty() || !o.is_object() || !o.contains("name") || !o["name"].is_string()) return;
        const std::string out = o["name"].get<std::string>();
        view_of_[out] = ViewOf{base, &nodes[i], static_cast<int>(i), t};
        view_writes_[out] = writes_[view_root(base)];
      };
      for (const Json& o : nodes[i]["outputs"]) {
        if (!o.is_object()) continue;
        if (o.contains("as_tensor")) record(o["as_tensor"]);
        if (o.contains("as_tensors") && o["as_tensors"].is_array()) {  // split, chunk, unbind
          for (const Json& e : o["as_tensors"])
            record(e);
        }
      }
    }
    ETC_RETURN_IF_ERROR(table.at(t)(ctx));
    ETC_RETURN_IF_ERROR(check_output_types(nodes[i], static_cast<int>(i), ctx.name()));
  }
  return Status();
}

Status Importer::read_outputs() {
  const Json& gm = program_["graph_module"];
  const Json& specs =
      gm["signature"].contains("output_specs") ? gm["signature"]["output_specs"] : Json();
  if (!specs.is_array()) {
    return invalid_input("'output_specs' must be an array", at("/graph_module/signature"));
  }
  std::vector<ValueId> outs;
  for (size_t i = 0; i < specs.size(); ++i) {
    std::string ptr = "/graph_module/signature/output_specs/" + std::to_string(i);
    const Json& s = specs[i];
    if (!s.is_object() || s.size() != 1)
      return invalid_input("expected an object with one key", at(ptr));
    const std::string kind = s.begin().key();
    if (kind == "buffer_mutation") continue;  // read_state_updates
    if (kind != "user_output") {
      return etc::unsupported("output " + std::to_string(i) + " is a " + kind +
                                  " (the program mutates state); etc imports programs whose "
                                  "outputs are all user outputs",
                              at(ptr));
    }
    const Json& body = s.begin().value();
    if (!body.is_object() || !body.contains("arg") || !body["arg"].is_object() ||
        !body["arg"].contains("as_tensor") || !body["arg"]["as_tensor"].is_object() ||
        !body["arg"]["as_tensor"].contains("name") ||
        !body["arg"]["as_tensor"]["name"].is_string()) {
      return etc::unsupported(
          "output " + std::to_string(i) + " is not a tensor; etc imports tensor outputs only",
          at(ptr));
    }
    std::string name = body["arg"]["as_tensor"]["name"].get<std::string>();
    auto it = env_.find(name);
    if (it == env_.end()) {
      return invalid_input("output '" + name + "' is not defined by any node", at(ptr));
    }
    if (stale_view(name)) return etc::unsupported(stale_view_message(name), at(ptr));
    outs.push_back(materialize(name, it->second));
  }
  graph_.set_outputs(std::move(outs));
  return Status();
}

// Each state's value after an execution: the buffer_mutation output naming it, else the value
// its placeholder's name is bound to after in-place ops (unchanged if none wrote it).
Status Importer::read_state_updates() {
  const Json& specs = program_["graph_module"]["signature"]["output_specs"];
  std::unordered_map<std::string, std::string> explicit_update;  // fqn -> tensor name
  for (size_t i = 0; i < specs.size(); ++i) {
    const Json& s = specs[i];
    if (!s.is_object() || !s.contains("buffer_mutation")) continue;
    const Json& m = s["buffer_mutation"];
    std::string ptr =
        "/graph_module/signature/output_specs/" + std::to_string(i) + "/buffer_mutation";
    if (!m.contains("arg") || !m["arg"].is_object() || !m["arg"].contains("name") ||
        !m["arg"]["name"].is_string())
      return invalid_input("the mutation's tensor {\"arg\": {\"name\"}} is missing", at(ptr));
    explicit_update[m["buffer_name"].get<std::string>()] = m["arg"]["name"].get<std::string>();
  }
  std::vector<std::pair<ValueId, ValueId>> updates;
  for (const StateBuffer& s : graph_.states()) {
    const std::string& placeholder = graph_.value(s.value).name;
    std::string name = placeholder;
    if (auto it = explicit_update.find(s.fqn); it != explicit_update.end()) name = it->second;
    auto e = env_.find(name);
    if (e == env_.end()) {
      return invalid_input(
          "the new value of buffer '" + s.fqn + "' ('" + name + "') is not defined by any node",
          at("/graph_module/signature/output_specs"));
    }
    if (stale_view(name))
      return etc::unsupported(stale_view_message(name), at("/graph_module/signature/output_specs"));
    updates.emplace_back(s.value, materialize(name, e->second));
  }
  for (const auto& [state, update] : updates)
    graph_.set_state_update(state, update);
  return Status();
}

Result<Graph> Importer::run() {
  ETC_RETURN_IF_ERROR(find_layout());
  ETC_RETURN_IF_ERROR(check_versions());
  ETC_RETURN_IF_ERROR(read_program());
  ETC_ASSIGN_OR_RETURN(const Json* gm,
                       member(program_, "graph_module", "", Json::value_t::object, "an object"));
  ETC_ASSIGN_OR_RETURN(const Json* graph,
                       member(*gm, "graph", "/graph_module", Json::value_t::object, "an object"));
  ETC_ASSIGN_OR_RETURN(const Json* nodes, member(*graph, "nodes", "/graph_module/graph",
                                                 Json::value_t::array, "an array"));
  ETC_ASSIGN_OR_RETURN(tensor_values_, member(*graph, "tensor_values", "/graph_module/graph",
                                              Json::value_t::object, "an object"));
  for (auto it = tensor_values_->begin(); it != tensor_values_->end(); ++it)
    torch_names_.insert(it.key());
  collect_reads(*nodes, program_["graph_module"]);
  // Tensor-subclass weights first: a torchao layout etc does not read is named as such, not
  // only by the ops its program calls.
  ETC_RETURN_IF_ERROR(read_weight_configs());
  ETC_RETURN_IF_ERROR(check_pickled_weights());
  ETC_RETURN_IF_ERROR(report_unsupported());
  ETC_RETURN_IF_ERROR(find_mutated_buffers(*nodes));
  ETC_RETURN_IF_ERROR(read_inputs());
  ETC_RETURN_IF_ERROR(convert_nodes());
  ETC_RETURN_IF_ERROR(read_outputs());
  ETC_RETURN_IF_ERROR(read_state_updates());
  graph_.name = model_name_;
  ETC_RETURN_IF_ERROR_CTX(verify_graph(graph_), "after importing " + zip_.file());
  return std::move(graph_);
}

}  // namespace torch_import

Result<Graph> parse_torch_export(std::shared_ptr<const Blob> archive, const std::string& file,
                                 const TorchImportOptions& options) {
  if (!torch_import::looks_like_zip(archive->bytes())) {
    return invalid_input("not a zip archive (a torch.export .pt2 file starts with 'PK')",
                         Location{.file = file, .byte_offset = 0});
  }
  ETC_ASSIGN_OR_RETURN(torch_import::ZipArchive zip,
                       torch_import::ZipArchive::open(std::move(archive), file));
  torch_import::Importer importer(std::move(zip), options);
  return importer.run();
}

Result<Graph> load_torch_export_file(const std::string& path, const TorchImportOptions& options) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  return parse_torch_export(std::move(blob), path, options);
}

std::vector<std::string> supported_torch_ops() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : torch_import::torch_converters())
    out.push_back(name);
  return out;
}

}  // namespace etc
