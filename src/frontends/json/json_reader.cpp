#include "frontends/json/json_reader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>

#include "frontends/json/safetensors.h"
#include "graph/verifier.h"
#include "support/base64.h"
#include "support/checked_math.h"
#include "support/half.h"
#include "support/json_pointer.h"

namespace etc {
namespace {

using Json = nlohmann::json;

// Largest single dimension accepted; larger values are certainly typos and would make
// byte counts overflow.
constexpr int64_t kMaxDim = int64_t{1} << 48;

std::string json_type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::object:
      return "an object";
    default:
      return "an unknown JSON value";
  }
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// " (did you mean 'x'?)" when a candidate is close to `name`.
std::string suggestion(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(3, name.size() / 3) + 1;
  for (const std::string& c : candidates) {
    size_t d = edit_distance(name, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// One node as read from the file, before scheduling.
struct PendingNode {
  size_t index = 0;  // position in "nodes"
  std::string pointer;
  std::string name;
  OpKind op = OpKind::AddTensor;
  // Per schema argument: the JSON value (or null when absent) and whether it was given.
  std::vector<const Json*> args;
  std::vector<std::string> output_names;
  std::vector<const Json*> output_decls;  // object declarations, or nullptr
  std::vector<size_t> deps;               // indices of producing nodes
};

class Reader {
 public:
  Reader(std::string file, std::string base_dir)
      : file_(std::move(file)), base_dir_(std::move(base_dir)) {}

  Result<Graph> read(std::string_view text) {
    ETC_ASSIGN_OR_RETURN(Json root, parse(text));
    ETC_RETURN_IF_ERROR(read_root(root));
    Status s = verify_graph(graph_);
    if (!s.ok()) return std::move(s).add_location(Location{.file = file_});
    return std::move(graph_);
  }

 private:
  Status error(const std::string& pointer, std::string message, std::string node = {}) const {
    return invalid_input(std::move(message),
                         Location{.file = file_, .pointer = pointer, .node = std::move(node)});
  }

  Result<Json> parse(std::string_view text) {
    try {
      return Json::parse(text);
    } catch (const Json::parse_error& e) {
      // Turn the byte offset into a line and column (1-based).
      size_t byte = std::min<size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
      int line = 1, col = 1;
      for (size_t i = 0; i < byte; ++i) {
        if (text[i] == '\n') {
          ++line;
          col = 1;
        } else {
          ++col;
        }
      }
      std::string what = e.what();
      // nlohmann's text is "[json.exception.parse_error.101] parse error at line 1, column 2: X".
      if (size_t p = what.find(": "); p != std::string::npos) what = what.substr(p + 2);
      return invalid_input("JSON syntax error: " + what,
                           Location{.file = file_, .line = line, .column = col});
    } catch (const Json::out_of_range& e) {
      // A number too large for a double ("1e400"); nlohmann does not say where, so find the
      // literal it quotes.
      std::string what = e.what();
      size_t q1 = what.find('\''), q2 = what.rfind('\'');
      std::string literal =
          q1 != std::string::npos && q2 > q1 ? what.substr(q1 + 1, q2 - q1 - 1) : "";
      Location loc{.file = file_};
      if (size_t at = literal.empty() ? std::string_view::npos : text.find(literal);
          at != std::string_view::npos) {
        loc.line = 1 + static_cast<int>(std::count(
                           text.begin(), text.begin() + static_cast<ptrdiff_t>(at), '\n'));
        size_t bol = text.rfind('\n', at);
        loc.column = static_cast<int>(at - (bol == std::string_view::npos ? 0 : bol + 1)) + 1;
      }
      return invalid_input(
          "JSON number " + literal + " is out of range (numbers must be finite doubles)", loc);
    } catch (const Json::exception& e) {
      return invalid_input(std::string("JSON error: ") + e.what(), Location{.file = file_});
    }
  }

  Status check_keys(const Json& obj, const std::string& pointer,
                    std::initializer_list<const char*> allowed, const std::string& node = {}) {
    std::vector<std::string> names(allowed.begin(), allowed.end());
    for (const auto& [key, value] : obj.items()) {
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        std::string list;
        for (const auto& n : names)
          list += (list.empty() ? "" : ", ") + n;
        return error(
            json_pointer_append(pointer, key),
            "unknown key '" + key + "'" + suggestion(key, names) + "; expected one of: " + list,
            node);
      }
    }
    return Status();
  }

  Result<const Json*> member(const Json& obj, const std::string& pointer, const char* key,
                             Json::value_t type, const char* what, const std::string& node = {}) {
    auto it = obj.find(key);
    if (it == obj.end()) {
      return error(pointer,
                   std::string("missing required ") + (pointer.empty() ? "top-level " : "") +
                       "key '" + key + "'",
                   node);
    }
    bool ok =
        it->type() == type || (type == Json::value_t::number_integer && it->is_number_unsigned());
    if (!ok) {
      return error(json_pointer_append(pointer, key),
                   std::string("'") + key + "' must be " + what + ", got " + json_type_name(*it),
                   node);
    }
    return &*it;
  }

  Result<std::string> name_at(const Json& obj, const std::string& pointer, const char* what) {
    ETC_ASSIGN_OR_RETURN(const Json* n,
                         member(obj, pointer, "name", Json::value_t::string, "a string"));
    std::string name = n->get<std::string>();
    if (name.empty()) {
      return error(json_pointer_append(pointer, "name"),
                   std::string(what) + " name must not be empty");
    }
    return name;
  }

  Result<DType> dtype_at(const Json& obj, const std::string& pointer,
                         const std::string& node = {}) {
    ETC_ASSIGN_OR_RETURN(const Json* d,
                         member(obj, pointer, "dtype", Json::value_t::string, "a string", node));
    auto t = dtype_from_name(d->get<std::string>());
    if (!t) {
      return error(json_pointer_append(pointer, "dtype"),
                   "unknown dtype '" + d->get<std::string>() +
                       "'; expected one of: " + std::string(dtype_names()),
                   node);
    }
    return *t;
  }

  Result<std::vector<int64_t>> shape_at(const Json& obj, const std::string& pointer,
                                        const std::string& node = {}) {
    ETC_ASSIGN_OR_RETURN(const Json* s, member(obj, pointer, "shape", Json::value_t::array,
                                               "an array of integers", node));
    std::string sp = json_pointer_append(pointer, "shape");
    std::vector<int64_t> dims;
    for (size_t i = 0; i < s->size(); ++i) {
      const Json& d = (*s)[i];
      if (d.is_number_float()) {
        return error(json_pointer_append(sp, i),
                     "dim must be a non-negative integer, got " + d.dump(), node);
      }
      if (!d.is_number_integer()) {
        return error(json_pointer_append(sp, i),
                     "dim must be a non-negative integer, got " + json_type_name(d), node);
      }
      if (d.is_number_unsigned() ? d.get<uint64_t>() > static_cast<uint64_t>(kMaxDim)
                                 : d.get<int64_t>() < 0) {
        return error(json_pointer_append(sp, i),
                     d.is_number_unsigned()
                         ? "dim " + d.dump() + " is larger than the limit of 2^48"
                         : "dim must be a non-negative integer, got " + d.dump(),
                     node);
      }
      dims.push_back(d.get<int64_t>());
    }
    auto numel = checked_numel(dims);
    if (!numel || !checked_mul(*numel, 8)) {
      return error(sp,
                   "shape " + shape_to_string(dims) +
                       " has too many elements: its byte count overflows 64 bits",
                   node);
    }
    return dims;
  }

  Status read_root(const Json& root) {
    if (!root.is_object())
      return error("", "the top level must be a JSON object, got " + json_type_name(root));
    ETC_RETURN_IF_ERROR(check_keys(
        root, "",
        {"format", "version", "name", "description", "inputs", "constants", "nodes", "outputs"}));
    ETC_ASSIGN_OR_RETURN(const Json* fmt,
                         member(root, "", "format", Json::value_t::string, "a string"));
    if (*fmt != "etc.graph") {
      return error("/format", "format is '" + fmt->get<std::string>() + "'; expected 'etc.graph'");
    }
    ETC_ASSIGN_OR_RETURN(const Json* ver,
                         member(root, "", "version", Json::value_t::number_integer, "an integer"));
    if (*ver != kGraphFormatVersion) {
      return error("/version", "unsupported format version " + ver->dump() +
                                   "; this etc reads version " +
                                   std::to_string(kGraphFormatVersion));
    }
    if (auto it = root.find("name"); it != root.end()) {
      if (!it->is_string())
        return error("/name", "'name' must be a string, got " + json_type_name(*it));
      graph_.name = it->get<std::string>();
    }
    if (auto it = root.find("description"); it != root.end() && !it->is_string()) {
      return error("/description", "'description' must be a string, got " + json_type_name(*it));
    }
    ETC_ASSIGN_OR_RETURN(const Json* inputs,
                         member(root, "", "inputs", Json::value_t::array, "an array"));
    for (size_t i = 0; i < inputs->size(); ++i)
      ETC_RETURN_IF_ERROR(read_input((*inputs)[i], json_pointer_append("/inputs", i)));
    if (auto it = root.find("constants"); it != root.end()) {
      if (!it->is_array())
        return error("/constants", "'constants' must be an array, got " + json_type_name(*it));
      for (size_t i = 0; i < it->size(); ++i) {
        ETC_RETURN_IF_ERROR(read_constant((*it)[i], json_pointer_append("/constants", i)));
      }
    }
    ETC_ASSIGN_OR_RETURN(const Json* nodes,
                         member(root, "", "nodes", Json::value_t::array, "an array"));
    std::vector<PendingNode> pending;
    for (size_t i = 0; i < nodes->size(); ++i) {
      ETC_ASSIGN_OR_RETURN(PendingNode p,
                           read_node((*nodes)[i], json_pointer_append("/nodes", i), i));
      pending.push_back(std::move(p));
    }
    ETC_ASSIGN_OR_RETURN(std::vector<size_t> order, schedule(pending));
    for (size_t i : order)
      ETC_RETURN_IF_ERROR(build_node(pending[i]));
    return read_outputs(root);
  }

  Status declare(const std::string& name, const std::string& pointer, std::string node = {}) {
    auto [it, fresh] = declared_.emplace(name, pointer);
    if (!fresh) {
      return error(pointer,
                   "duplicate value name '" + name + "' (first declared at " + it->second + ")",
                   std::move(node));
    }
    return Status();
  }

  Status read_input(const Json& in, const std::string& p) {
    if (!in.is_object()) return error(p, "an input must be an object, got " + json_type_name(in));
    ETC_RETURN_IF_ERROR(check_keys(in, p, {"name", "dtype", "shape"}));
    ETC_ASSIGN_OR_RETURN(std::string name, name_at(in, p, "input"));
    ETC_ASSIGN_OR_RETURN(DType dtype, dtype_at(in, p));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, shape_at(in, p));
    ETC_RETURN_IF_ERROR(declare(name, json_pointer_append(p, "name")));
    ValueId id = graph_.add_input(name, TensorSpec::make(dtype, std::move(shape)));
    graph_.value(id).origin = p;
    return Status();
  }

  Result<const SafetensorsFile*> weight_file(const std::string& rel, const std::string& pointer) {
    std::filesystem::path path = std::filesystem::path(rel).is_absolute()
                                     ? std::filesystem::path(rel)
                                     : std::filesystem::path(base_dir_) / rel;
    std::string key = path.lexically_normal().string();
    if (auto it = weight_files_.find(key); it != weight_files_.end()) return &it->second;
    Result<SafetensorsFile> f = read_safetensors(key);
    if (!f.ok()) {
      return std::move(f).take_status().add_context("while reading the weight file named at " +
                                                    file_ + ": " + pointer);
    }
    return &weight_files_.emplace(key, std::move(f).value()).first->second;
  }

  Status read_constant(const Json& c, const std::string& p) {
    if (!c.is_object()) return error(p, "a constant must be an object, got " + json_type_name(c));
    ETC_RETURN_IF_ERROR(
        check_keys(c, p, {"name", "dtype", "shape", "data", "values", "safetensors"}));
    ETC_ASSIGN_OR_RETURN(std::string name, name_at(c, p, "constant"));
    ETC_ASSIGN_OR_RETURN(DType dtype, dtype_at(c, p));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, shape_at(c, p));
    TensorSpec spec = TensorSpec::make(dtype, std::move(shape));
    int sources = static_cast<int>(c.contains("data")) + static_cast<int>(c.contains("values")) +
                  static_cast<int>(c.contains("safetensors"));
    if (sources != 1) {
      return error(p,
                   "constant '" + name +
                       "' needs exactly one of 'data' (base64), 'values' or 'safetensors', found " +
                       std::to_string(sources));
    }
    const auto nbytes = static_cast<uint64_t>(spec.nbytes());
    if (auto it = c.find("data"); it != c.end()) {
      std::string dp = json_pointer_append(p, "data");
      if (!it->is_string())
        return error(dp, "'data' must be a base64 string, got " + json_type_name(*it));
      Result<std::string> bytes = base64_decode(it->get<std::string>());
      if (!bytes.ok()) return error(dp, "bad base64 data: " + bytes.status().message());
      if (bytes->size() != nbytes) {
        return error(dp, "constant '" + name + "' is " + spec.type_string() + " (" +
                             std::to_string(nbytes) + " bytes) but 'data' holds " +
                             std::to_string(bytes->size()) + " bytes");
      }
      spec.constant = ConstantData{make_blob(std::move(bytes).value()), 0, nbytes};
    } else if (auto it2 = c.find("values"); it2 != c.end()) {
      ETC_ASSIGN_OR_RETURN(spec.constant,
                           values_to_bytes(*it2, json_pointer_append(p, "values"), spec, name));
    } else {
      std::string sp = json_pointer_append(p, "safetensors");
      const Json& ref = c["safetensors"];
      if (!ref.is_object())
        return error(sp, "'safetensors' must be an object, got " + json_type_name(ref));
      ETC_RETURN_IF_ERROR(check_keys(ref, sp, {"file", "tensor"}));
      ETC_ASSIGN_OR_RETURN(const Json* file,
                           member(ref, sp, "file", Json::value_t::string, "a string"));
      std::string tensor = name;
      if (auto t = ref.find("tensor"); t != ref.end()) {
        if (!t->is_string()) {
          return error(json_pointer_append(sp, "tensor"),
                       "'tensor' must be a string, got " + json_type_name(*t));
        }
        tensor = t->get<std::string>();
      }
      ETC_ASSIGN_OR_RETURN(const SafetensorsFile* wf, weight_file(file->get<std::string>(), sp));
      auto entry = wf->tensors.find(tensor);
      if (entry == wf->tensors.end()) {
        std::vector<std::string> names;
        for (const auto& [n, t] : wf->tensors)
          names.push_back(n);
        return error(sp, "weight file '" + file->get<std::string>() + "' has no tensor '" + tensor +
                             "'" + suggestion(tensor, names));
      }
      const SafetensorsTensor& t = entry->second;
      if (t.dtype != spec.dtype || t.shape != spec.sizes) {
        return error(sp, "constant '" + name + "' is declared " + spec.type_string() +
                             " but tensor '" + tensor + "' in '" + file->get<std::string>() +
                             "' is " + std::string(dtype_name(t.dtype)) + shape_to_string(t.shape));
      }
      spec.constant = t.data;
    }
    ETC_RETURN_IF_ERROR(declare(name, json_pointer_append(p, "name")));
    ValueId id = graph_.add_constant(name, std::move(spec));
    graph_.value(id).origin = p;
    return Status();
  }

  // A flat, row-major list of numbers (or booleans) converted to little-endian bytes.
  Result<ConstantData> values_to_bytes(const Json& v, const std::string& p, const TensorSpec& spec,
                                       const std::string& name) {
    if (!v.is_array()) return error(p, "'values' must be an array, got " + json_type_name(v));
    if (static_cast<int64_t>(v.size()) != spec.numel()) {
      return error(p, "constant '" + name + "' is " + spec.type_string() + " (" +
                          std::to_string(spec.numel()) + " elements) but 'values' has " +
                          std::to_string(v.size()));
    }
    std::string bytes(static_cast<size_t>(spec.nbytes()), '\0');
    char* out = bytes.data();
    for (size_t i = 0; i < v.size(); ++i) {
      const Json& x = v[i];
      std::string ep = json_pointer_append(p, i);
      if (spec.dtype == DType::kBool) {
        if (!x.is_boolean()) return error(ep, "expected a boolean, got " + json_type_name(x));
        out[i] = x.get<bool>() ? 1 : 0;
        continue;
      }
      if (!x.is_number()) return error(ep, "expected a number, got " + json_type_name(x));
      if (dtype_is_float(spec.dtype)) {
        store_float(x.get<double>(), spec.dtype, out + i * dtype_size(spec.dtype));
      } else {
        if (!x.is_number_integer()) {
          return error(ep, "expected an integer for " + std::string(dtype_name(spec.dtype)) +
                               ", got " + x.dump());
        }
        ETC_RETURN_IF_ERROR(store_int(x, spec.dtype, out + i * dtype_size(spec.dtype), ep));
      }
    }
    return ConstantData{make_blob(std::move(bytes)), 0, static_cast<size_t>(spec.nbytes())};
  }

  static void store_float(double d, DType t, char* out) {
    if (t == DType::kFloat64) {
      std::memcpy(out, &d, 8);
      return;
    }
    float f = static_cast<float>(d);
    if (t == DType::kFloat32) {
      std::memcpy(out, &f, 4);
      return;
    }
    uint16_t h = t == DType::kBFloat16 ? float_to_bfloat16(f) : float_to_half(f);
    std::memcpy(out, &h, 2);
  }

  Status store_int(const Json& x, DType t, char* out, const std::string& p) {
    int64_t lo = 0, hi = 0;
    switch (t) {
      case DType::kUInt8:
        lo = 0;
        hi = 255;
        break;
      case DType::kInt8:
        lo = -128;
        hi = 127;
        break;
      case DType::kInt16:
        lo = -32768;
        hi = 32767;
        break;
      case DType::kInt32:
        lo = std::numeric_limits<int32_t>::min();
        hi = std::numeric_limits<int32_t>::max();
        break;
      default:
        lo = std::numeric_limits<int64_t>::min();
        hi = std::numeric_limits<int64_t>::max();
        break;
    }
    if (x.is_number_unsigned() && x.get<uint64_t>() > static_cast<uint64_t>(hi)) {
      return error(p, "value " + x.dump() + " does not fit in " + std::string(dtype_name(t)));
    }
    int64_t v = x.get<int64_t>();
    if (v < lo || v > hi)
      return error(p, "value " + x.dump() + " does not fit in " + std::string(dtype_name(t)));
    std::memcpy(out, &v, static_cast<size_t>(dtype_size(t)));  // little-endian host
    return Status();
  }

  Result<PendingNode> read_node(const Json& n, const std::string& p, size_t index) {
    if (!n.is_object()) return error(p, "a node must be an object, got " + json_type_name(n));
    PendingNode pn;
    pn.index = index;
    pn.pointer = p;
    ETC_ASSIGN_OR_RETURN(pn.name, name_at(n, p, "node"));
    ETC_RETURN_IF_ERROR(check_keys(n, p, {"name", "op", "args", "outputs"}, pn.name));
    if (!node_names_.insert(pn.name).second) {
      return error(json_pointer_append(p, "name"), "duplicate node name '" + pn.name + "'",
                   pn.name);
    }
    ETC_ASSIGN_OR_RETURN(const Json* op,
                         member(n, p, "op", Json::value_t::string, "a string", pn.name));
    auto kind = op_from_name(op->get<std::string>());
    if (!kind) {
      std::vector<std::string> names;
      for (const OpInfo& o : all_ops())
        names.push_back(o.name);
      return error(json_pointer_append(p, "op"),
                   "unknown op '" + op->get<std::string>() + "'" +
                       suggestion(op->get<std::string>(), names) +
                       "; run 'etc ops' for the supported ops",
                   pn.name);
    }
    pn.op = *kind;
    const OpSchema& schema = op_info(pn.op).schema;
    // ATen's ops and etc's own (etc::unpack_int4: weights a graph may ship packed); the
    // device copies, the delegate call and ONNX's ops are the importers' and passes' to make.
    if (schema.ns != "aten" && schema.ns != "etc") {
      return error(json_pointer_append(p, "op"),
                   "op '" + op_info(pn.op).name +
                       "' is inserted by the compiler and cannot appear in an input graph",
                   pn.name);
    }
    std::string ap = json_pointer_append(p, "args");
    ETC_ASSIGN_OR_RETURN(const Json* args,
                         member(n, p, "args", Json::value_t::object, "an object", pn.name));
    std::vector<std::string> arg_names;
    for (const ArgSchema& a : schema.args)
      arg_names.push_back(a.name);
    for (const auto& [key, value] : args->items()) {
      if (!schema.find_arg(key)) {
        std::string list;
        for (const auto& a : arg_names)
          list += (list.empty() ? "" : ", ") + a;
        return error(json_pointer_append(ap, key),
                     "unknown argument '" + key + "' for " + op_info(pn.op).name +
                         suggestion(key, arg_names) + " (arguments: " + list + ")",
                     pn.name);
      }
    }
    pn.args.resize(schema.args.size(), nullptr);
    for (size_t i = 0; i < schema.args.size(); ++i) {
      const ArgSchema& a = schema.args[i];
      auto it = args->find(a.name);
      if (it != args->end()) {
        pn.args[i] = &*it;
      } else if (!a.default_value) {
        return error(ap,
                     "missing argument '" + a.name + "' (" + std::string(arg_type_name(a.type)) +
                         ") for " + op_info(pn.op).name,
                     pn.name);
      }
    }
    ETC_ASSIGN_OR_RETURN(const Json* outs,
                         member(n, p, "outputs", Json::value_t::array, "an array", pn.name));
    std::string op_ptr = json_pointer_append(p, "outputs");
    if (outs->size() != static_cast<size_t>(schema.num_outputs)) {
      return error(op_ptr,
                   op_info(pn.op).name + " has " + std::to_string(schema.num_outputs) + " output" +
                       (schema.num_outputs == 1 ? "" : "s") + ", 'outputs' names " +
                       std::to_string(outs->size()),
                   pn.name);
    }
    for (size_t i = 0; i < outs->size(); ++i) {
      const Json& o = (*outs)[i];
      std::string opi = json_pointer_append(op_ptr, i);
      std::string out_name;
      if (o.is_string()) {
        out_name = o.get<std::string>();
        pn.output_decls.push_back(nullptr);
      } else if (o.is_object()) {
        ETC_RETURN_IF_ERROR(check_keys(o, opi, {"name", "dtype", "shape"}, pn.name));
        ETC_ASSIGN_OR_RETURN(out_name, name_at(o, opi, "output"));
        pn.output_decls.push_back(&o);
      } else {
        return error(opi,
                     "an output must be a name or an object with 'name', got " + json_type_name(o),
                     pn.name);
      }
      if (out_name.empty()) return error(opi, "output name must not be empty", pn.name);
      ETC_RETURN_IF_ERROR(declare(out_name, opi, pn.name));
      producer_of_[out_name] = index;
      pn.output_names.push_back(out_name);
    }
    return pn;
  }

  // Collects the names a JSON argument refers to (for Tensor and Tensor[] arguments).
  static void referenced_names(const ArgSchema& a, const Json* v, std::vector<std::string>* out) {
    if (v == nullptr) return;
    if (a.type == ArgType::kTensor && v->is_string()) out->push_back(v->get<std::string>());
    if ((a.type == ArgType::kTensorList || a.type == ArgType::kOptionalTensorList) &&
        v->is_array()) {
      for (const Json& e : *v) {
        if (e.is_string()) out->push_back(e.get<std::string>());
      }
    }
  }

  // Kahn's algorithm, always taking the ready node that comes first in the file.
  Result<std::vector<size_t>> schedule(std::vector<PendingNode>& nodes) {
    std::vector<std::vector<size_t>> users(nodes.size());
    std::vector<size_t> indegree(nodes.size(), 0);
    for (PendingNode& n : nodes) {
      const OpSchema& schema = op_info(n.op).schema;
      std::set<size_t> deps;
      for (size_t i = 0; i < schema.args.size(); ++i) {
        std::vector<std::string> names;
        referenced_names(schema.args[i], n.args[i], &names);
        for (const std::string& name : names) {
          auto it = producer_of_.find(name);
          if (it != producer_of_.end()) deps.insert(it->second);
        }
      }
      for (size_t d : deps) {
        users[d].push_back(n.index);
        ++indegree[n.index];
      }
    }
    std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (indegree[i] == 0) ready.push(i);
    }
    std::vector<size_t> order;
    while (!ready.empty()) {
      size_t i = ready.top();
      ready.pop();
      order.push_back(i);
      for (size_t u : users[i]) {
        if (--indegree[u] == 0) ready.push(u);
      }
    }
    if (order.size() == nodes.size()) return order;
    // Report one cycle: walk from the first stuck node along stuck dependencies.
    size_t start = 0;
    while (indegree[start] == 0)
      ++start;
    std::vector<size_t> path;
    std::vector<int> pos(nodes.size(), -1);
    size_t cur = start;
    while (pos[cur] < 0) {
      pos[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      // Find a stuck producer of cur.
      for (size_t d = 0; d < nodes.size(); ++d) {
        if (indegree[d] > 0 && std::find(users[d].begin(), users[d].end(), cur) != users[d].end()) {
          cur = d;
          break;
        }
      }
    }
    std::string cycle;
    for (size_t k = static_cast<size_t>(pos[cur]); k < path.size(); ++k)
      cycle = "'" + nodes[path[k]].name + "' -> " + cycle;
    cycle = "'" + nodes[cur].name + "' -> " + cycle;
    cycle.resize(cycle.size() - 4);
    return error(nodes[cur].pointer,
                 "the graph has a cycle: " + cycle + " (each node uses the next one's output)",
                 nodes[cur].name);
  }

  Result<ValueId> resolve(const std::string& name, const std::string& p, const std::string& node) {
    if (auto v = graph_.find_value(name)) return *v;
    std::vector<std::string> names;
    for (const auto& [n, ptr] : declared_)
      names.push_back(n);
    return error(p,
                 "unknown value '" + name + "': not a graph input, constant or node output" +
                     suggestion(name, names),
                 node);
  }

  Result<double> float_value(const Json& v, const std::string& p, const std::string& node) {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      if (s == "inf") return std::numeric_limits<double>::infinity();
      if (s == "-inf") return -std::numeric_limits<double>::infinity();
      if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    }
    return error(p, "expected a number (or \"inf\", \"-inf\", \"nan\"), got " + json_type_name(v),
                 node);
  }

  Result<int64_t> int_value(const Json& v, const std::string& p, const std::string& node) {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return error(p, "integer " + v.dump() + " is out of range", node);
    }
    if (!v.is_number_integer()) {
      return error(p, "expected an integer, got " + (v.is_number() ? v.dump() : json_type_name(v)),
                   node);
    }
    return v.get<int64_t>();
  }

  // Converts one argument's JSON to an ArgValue, driven by its schema type.
  Result<ArgValue> convert(const ArgSchema& a, const Json& v, const std::string& p,
                           const std::string& node) {
    if (v.is_null()) {
      if (!a.optional) {
        return error(p,
                     "argument '" + a.name + "' (" + std::string(arg_type_name(a.type)) +
                         ") must not be null",
                     node);
      }
      return ArgValue(std::monostate{});
    }
    auto expect = [&](const char* what) {
      return error(p, "argument '" + a.name + "' must be " + what + ", got " + json_type_name(v),
                   node);
    };
    switch (a.type) {
      case ArgType::kTensor: {
        if (!v.is_string()) return expect("the name of a tensor value");
        ETC_ASSIGN_OR_RETURN(ValueId id, resolve(v.get<std::string>(), p, node));
        return ArgValue(id);
      }
      case ArgType::kTensorList:
      case ArgType::kOptionalTensorList: {
        const bool nones = a.type == ArgType::kOptionalTensorList;
        if (!v.is_array())
          return expect(nones ? "an array of tensor names or nulls" : "an array of tensor names");
        std::vector<ValueId> ids;
        for (size_t i = 0; i < v.size(); ++i) {
          std::string ep = json_pointer_append(p, i);
          if (nones && v[i].is_null()) {
            ids.emplace_back();  // None
            continue;
          }
          if (!v[i].is_string()) {
            return error(ep, "expected the name of a tensor value, got " + json_type_name(v[i]),
                         node);
          }
          ETC_ASSIGN_OR_RETURN(ValueId id, resolve(v[i].get<std::string>(), ep, node));
          ids.push_back(id);
        }
        return ArgValue(std::move(ids));
      }
      case ArgType::kScalar:
        if (v.is_boolean()) return ArgValue(Scalar{v.get<bool>()});
        if (v.is_number_integer()) {
          ETC_ASSIGN_OR_RETURN(int64_t i, int_value(v, p, node));
          return ArgValue(Scalar{i});
        }
        if (v.is_number() || v.is_string()) {
          ETC_ASSIGN_OR_RETURN(double d, float_value(v, p, node));
          return ArgValue(Scalar{d});
        }
        return expect("a number or boolean");
      case ArgType::kInt: {
        ETC_ASSIGN_OR_RETURN(int64_t i, int_value(v, p, node));
        return ArgValue(i);
      }
      case ArgType::kIntList: {
        std::vector<int64_t> items;
        if (v.is_number() && a.fixed_length > 0) {  // int[2] given as one int
          ETC_ASSIGN_OR_RETURN(int64_t i, int_value(v, p, node));
          items.assign(static_cast<size_t>(a.fixed_length), i);
          return ArgValue(std::move(items));
        }
        if (!v.is_array()) return expect("an array of integers");
        for (size_t i = 0; i < v.size(); ++i) {
          ETC_ASSIGN_OR_RETURN(int64_t x, int_value(v[i], json_pointer_append(p, i), node));
          items.push_back(x);
        }
        if (a.fixed_length > 1 && items.size() != static_cast<size_t>(a.fixed_length) &&
            items.size() > 1) {
          return error(p,
                       "argument '" + a.name + "' takes " + std::to_string(a.fixed_length) +
                           " integers, got " + std::to_string(items.size()),
                       node);
        }
        return ArgValue(std::move(items));
      }
      case ArgType::kFloat: {
        ETC_ASSIGN_OR_RETURN(double d, float_value(v, p, node));
        return ArgValue(d);
      }
      case ArgType::kFloatList: {
        if (!v.is_array()) return expect("an array of numbers");
        std::vector<double> items;
        for (size_t i = 0; i < v.size(); ++i) {
          ETC_ASSIGN_OR_RETURN(double d, float_value(v[i], json_pointer_append(p, i), node));
          items.push_back(d);
        }
        return ArgValue(std::move(items));
      }
      case ArgType::kBool:
        if (!v.is_boolean()) return expect("true or false");
        return ArgValue(v.get<bool>());
      case ArgType::kBoolList: {
        if (!v.is_array()) return expect("an array of booleans");
        std::vector<bool> items;
        for (size_t i = 0; i < v.size(); ++i) {
          if (!v[i].is_boolean()) {
            return error(json_pointer_append(p, i),
                         "expected true or false, got " + json_type_name(v[i]), node);
          }
          items.push_back(v[i].get<bool>());
        }
        return ArgValue(std::move(items));
      }
      case ArgType::kString:
        if (!v.is_string()) return expect("a string");
        return ArgValue(v.get<std::string>());
      case ArgType::kScalarType: {
        if (!v.is_string()) return expect("a dtype name");
        auto t = dtype_from_name(v.get<std::string>());
        if (!t) {
          return error(p,
                       "unknown dtype '" + v.get<std::string>() +
                           "'; expected one of: " + std::string(dtype_names()),
                       node);
        }
        return ArgValue(*t);
      }
      case ArgType::kLayout:
      case ArgType::kDevice:
      case ArgType::kMemoryFormat:
        return error(p, "argument '" + a.name + "' only supports null (the default)", node);
    }
    return internal_error("unhandled argument type");
  }

  Status build_node(const PendingNode& pn) {
    const OpInfo& info = op_info(pn.op);
    std::vector<ArgValue> args;
    std::string ap = json_pointer_append(pn.pointer, "args");
    for (size_t i = 0; i < info.schema.args.size(); ++i) {
      const ArgSchema& a = info.schema.args[i];
      if (pn.args[i] == nullptr) {
        args.push_back(*a.default_value);
        continue;
      }
      ETC_ASSIGN_OR_RETURN(ArgValue v,
                           convert(a, *pn.args[i], json_pointer_append(ap, a.name), pn.name));
      args.push_back(std::move(v));
    }
    std::vector<TensorType> types;
    auto type_of = [this](ValueId id) -> const TensorSpec& { return graph_.value(id).spec; };
    Status s = infer_types(pn.op, args, type_of,
                           Location{.file = file_, .pointer = pn.pointer, .node = pn.name}, &types);
    if (!s.ok()) return s;
    std::vector<TensorSpec> specs;
    for (size_t i = 0; i < types.size(); ++i) {
      TensorSpec spec = TensorSpec::make(types[i].dtype, types[i].sizes);
      if (std::string err = check_tensor_spec(spec); !err.empty()) {
        return error(pn.pointer, "output " + std::to_string(i) + ": " + err, pn.name);
      }
      if (const Json* decl = pn.output_decls[i]) {
        std::string dp = json_pointer_append(json_pointer_append(pn.pointer, "outputs"), i);
        if (decl->contains("dtype")) {
          ETC_ASSIGN_OR_RETURN(DType dt, dtype_at(*decl, dp, pn.name));
          if (dt != spec.dtype) {
            return error(json_pointer_append(dp, "dtype"),
                         "output '" + pn.output_names[i] + "' is declared " +
                             std::string(dtype_name(dt)) + " but " + info.name + " produces " +
                             spec.type_string(),
                         pn.name);
          }
        }
        if (decl->contains("shape")) {
          ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, shape_at(*decl, dp, pn.name));
          if (shape != spec.sizes) {
            return error(json_pointer_append(dp, "shape"),
                         "output '" + pn.output_names[i] + "' is declared with shape " +
                             shape_to_string(shape) + " but " + info.name + " produces " +
                             spec.type_string(),
                         pn.name);
          }
        }
      }
      specs.push_back(std::move(spec));
    }
    NodeId id = graph_.add_node(pn.op, pn.name, std::move(args), pn.output_names, std::move(specs));
    graph_.node(id).origin = pn.pointer;
    for (size_t i = 0; i < pn.output_names.size(); ++i) {
      graph_.value(graph_.node(id).outputs[i]).origin =
          json_pointer_append(json_pointer_append(pn.pointer, "outputs"), i);
    }
    return Status();
  }

  Status read_outputs(const Json& root) {
    ETC_ASSIGN_OR_RETURN(const Json* outs, member(root, "", "outputs", Json::value_t::array,
                                                  "an array of value names"));
    if (outs->empty()) return error("/outputs", "the graph must have at least one output");
    std::vector<ValueId> ids;
    for (size_t i = 0; i < outs->size(); ++i) {
      std::string p = json_pointer_append("/outputs", i);
      const Json& o = (*outs)[i];
      if (!o.is_string())
        return error(p, "an output must be the name of a value, got " + json_type_name(o));
      ETC_ASSIGN_OR_RETURN(ValueId id, resolve(o.get<std::string>(), p, {}));
      ids.push_back(id);
    }
    graph_.set_outputs(std::move(ids));
    return Status();
  }

  std::string file_;
  std::string base_dir_;
  Graph graph_;
  std::map<std::string, std::string> declared_;  // value name -> pointer of its declaration
  std::set<std::string> node_names_;
  std::map<std::string, size_t> producer_of_;  // value name -> node index
  std::map<std::string, SafetensorsFile> weight_files_;
};

}  // namespace

Result<Graph> parse_graph_json(std::string_view text, const std::string& file,
                               const std::string& base_dir) {
  return Reader(file, base_dir).read(text);
}

Result<Graph> load_graph_file(const std::string& path) {
  ETC_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_graph_json(text, path, dir.empty() ? "." : dir);
}

}  // namespace etc
