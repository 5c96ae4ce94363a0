// TorchNode: a node's arguments by schema name, emitting IR, defining outputs.
#include <algorithm>
#include <limits>

#include "consteval/evaluate.h"
#include "frontends/torch_export/importer.h"
#include "graph/verifier.h"

namespace etc::torch_import {

namespace {
std::optional<std::string> output_tensor_name(const Json& node, int i);
}  // namespace

TorchNode::TorchNode(Importer& importer, const Json& node, int index, std::string target)
    : im_(importer), node_(node), index_(index), target_(std::move(target)) {
  if (node.contains("name") && node["name"].is_string()) name_ = node["name"].get<std::string>();
  if (name_.empty()) name_ = target_ + "#" + std::to_string(index);
  if (node.contains("inputs") && node["inputs"].is_array()) {
    for (const Json& in : node["inputs"]) {
      if (in.is_object() && in.contains("name") && in["name"].is_string() && in.contains("arg")) {
        args_.emplace(in["name"].get<std::string>(), &in["arg"]);
      }
    }
  }
}

Location TorchNode::location() const {
  return im_.at("/graph_module/graph/nodes/" + std::to_string(index_), name_);
}

Location TorchNode::arg_location(std::string_view arg) const {
  Location loc = location();
  if (node_.contains("inputs") && node_["inputs"].is_array()) {
    for (size_t i = 0; i < node_["inputs"].size(); ++i) {
      const Json& in = node_["inputs"][i];
      if (in.is_object() && in.contains("name") && in["name"] == arg) {
        loc.pointer += "/inputs/" + std::to_string(i) + "/arg";
        break;
      }
    }
  }
  return loc;
}

Status TorchNode::invalid(const std::string& message) const {
  return invalid_input(target_ + ": " + message + torchao_note(), location());
}

// For a torchao op: the release etc reads its schema as, and the arguments this node has (a
// program from another torchao release may name or order them otherwise).
std::string TorchNode::torchao_note() const {
  if (target_.rfind("torchao.", 0) != 0) return "";
  std::string names;
  if (node_.contains("inputs") && node_["inputs"].is_array()) {
    for (const Json& in : node_["inputs"]) {
      if (in.is_object() && in.contains("name") && in["name"].is_string())
        names += (names.empty() ? "" : ", ") + in["name"].get<std::string>();
    }
  }
  return std::string(" (etc reads torchao's ops as torchao ") + kTorchaoTested +
         " declares them; this node's arguments: " + (names.empty() ? "none" : names) +
         "; a program from another torchao release may differ)";
}
Status TorchNode::unsupported(const std::string& message) const {
  std::string where = source_line(node_);
  return etc::unsupported(target_ + ": " + message + (where.empty() ? "" : " (from " + where + ")"),
                          location());
}

Result<int64_t> TorchNode::wrap_dim(int64_t dim, int64_t rank, std::string_view what) const {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    return invalid(std::string(what) + " " + std::to_string(dim) + " is out of range for rank " +
                   std::to_string(rank));
  }
  return dim < 0 ? dim + r : dim;
}

Result<const Json*> TorchNode::arg_json(std::string_view arg) const {
  auto it = args_.find(arg);
  if (it == args_.end()) return static_cast<const Json*>(nullptr);
  const Json& j = *it->second;
  if (!j.is_object() || j.size() != 1) {
    return invalid_input(target_ + ": argument '" + std::string(arg) +
                             "' must be an object with one key (as_tensor, as_int, ...)",
                         arg_location(arg));
  }
  if (j.contains("as_none")) return static_cast<const Json*>(nullptr);
  return &j;
}

bool TorchNode::has(std::string_view arg) const {
  auto j = arg_json(arg);
  return j.ok() && *j != nullptr;
}

bool TorchNode::is_tensor(std::string_view arg) const {
  auto j = arg_json(arg);
  return j.ok() && *j != nullptr && (*j)->contains("as_tensor");
}

namespace {
Result<std::string> tensor_name(const Json& t, const std::string& what, const Location& loc) {
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) {
    return invalid_input(what + " must be a tensor argument {\"name\": ...}", loc);
  }
  return t["name"].get<std::string>();
}
}  // namespace

Result<const Entry*> TorchNode::entry(std::string_view arg) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr || !j->contains("as_tensor")) {
    return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a tensor",
                         j == nullptr ? location() : arg_location(arg));
  }
  ETC_ASSIGN_OR_RETURN(
      std::string name,
      tensor_name((*j)["as_tensor"], "'" + std::string(arg) + "'", arg_location(arg)));
  auto it = im_.env_.find(name);
  if (it == im_.env_.end()) {
    if (auto sub = im_.subclass_weights_.find(name); sub != im_.subclass_weights_.end()) {
      return unsupported("reads the weight '" + name + "' (a " + sub->second.class_name +
                         ") as a whole; etc reads a tensor subclass's inner tensors "
                         "(export.access_subclass_inner_tensor) only");
    }
    return invalid_input(target_ + ": tensor '" + name + "' is not defined before this node",
                         arg_location(arg));
  }
  ETC_RETURN_IF_ERROR(check_fresh(name));
  return &it->second;
}

Result<ValueId> TorchNode::subclass_inner_tensor(std::string_view arg, const std::string& attr) {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr || !j->contains("as_tensor"))
    return invalid(std::string("argument '") + std::string(arg) + "' must be a tensor");
  ETC_ASSIGN_OR_RETURN(
      std::string name,
      tensor_name((*j)["as_tensor"], "'" + std::string(arg) + "'", arg_location(arg)));
  auto sub = im_.subclass_weights_.find(name);
  if (sub == im_.subclass_weights_.end()) {
    return unsupported("'" + name +
                       "' is not a tensor-subclass weight etc read (a torchao Int8Tensor "
                       "parameter or constant)");
  }
  Importer::SubclassWeight& w = sub->second;
  if (auto v = w.values.find(attr); v != w.values.end()) return v->second;
  auto t = w.inner.find(attr);
  if (t == w.inner.end()) {
    std::string have;
    for (const auto& [n, spec] : w.inner)
      have += (have.empty() ? "" : ", ") + n;
    return invalid("'" + name + "' (a " + w.class_name + ") has no inner tensor '" + attr +
                   "'; it has " + have);
  }
  ValueId v = im_.graph_.add_constant(im_.fresh_value_name(name + "_" + attr), t->second);
  w.values.emplace(attr, v);
  return v;
}

Status TorchNode::check_fresh(const std::string& name) const {
  if (!im_.stale_view(name)) return Status();
  return unsupported(im_.stale_view_message(name));
}

Result<TorchNode::EagerLayout> TorchNode::eager_layout(std::string_view arg) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr || !j->contains("as_tensor"))
    return invalid(std::string("argument '") + std::string(arg) + "' must be a tensor");
  ETC_ASSIGN_OR_RETURN(
      std::string name,
      tensor_name((*j)["as_tensor"], "'" + std::string(arg) + "'", arg_location(arg)));
  const Json* values = im_.tensor_values_;
  if (values == nullptr || !values->contains(name) || !(*values)[name].is_object())
    return unsupported("tensor '" + name + "' has no recorded layout");
  const Json& meta = (*values)[name];
  EagerLayout layout;
  for (const Json& s : meta.value("strides", Json::array())) {
    if (!s.is_object() || !s.contains("as_int") || !s["as_int"].is_number_integer())
      return unsupported("tensor '" + name + "' has strides that are not static ints");
    layout.strides.push_back(s["as_int"].get<int64_t>());
  }
  const Json& offset = meta.value("storage_offset", Json::object());
  if (offset.is_object() && offset.contains("as_int") && offset["as_int"].is_number_integer())
    layout.storage_offset = offset["as_int"].get<int64_t>();
  return layout;
}

Result<ValueId> TorchNode::tensor(std::string_view arg) {
  ETC_ASSIGN_OR_RETURN(const Entry* e, entry(arg));
  const Json& j = *args_.find(arg)->second;
  std::string name = j["as_tensor"]["name"].get<std::string>();
  return im_.materialize(name, const_cast<Entry&>(*e));
}

Result<std::optional<ValueId>> TorchNode::optional_tensor(std::string_view arg) {
  if (!has(arg)) return std::optional<ValueId>();
  ETC_ASSIGN_OR_RETURN(ValueId v, tensor(arg));
  return std::optional<ValueId>(v);
}

Result<std::vector<const Entry*>> TorchNode::tensor_entries(std::string_view arg) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr || !j->contains("as_tensors") || !(*j)["as_tensors"].is_array()) {
    return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a tensor list",
                         arg_location(arg));
  }
  std::vector<const Entry*> out;
  for (const Json& t : (*j)["as_tensors"]) {
    ETC_ASSIGN_OR_RETURN(
        std::string name,
        tensor_name(t, "an element of '" + std::string(arg) + "'", arg_location(arg)));
    auto it = im_.env_.find(name);
    if (it == im_.env_.end()) {
      return invalid_input(target_ + ": tensor '" + name + "' is not defined before this node",
                           arg_location(arg));
    }
    ETC_RETURN_IF_ERROR(check_fresh(name));
    out.push_back(&it->second);
  }
  return out;
}

Result<std::vector<ValueId>> TorchNode::tensors(std::string_view arg) {
  ETC_RETURN_IF_ERROR(tensor_entries(arg));
  std::vector<ValueId> out;
  for (const Json& t : (*args_.find(arg)->second)["as_tensors"]) {
    std::string name = t["name"].get<std::string>();
    out.push_back(im_.materialize(name, im_.env_.at(name)));
  }
  return out;
}

Result<std::vector<ValueId>> TorchNode::optional_tensors(std::string_view arg) {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j != nullptr && j->contains("as_tensors")) return tensors(arg);
  if (j == nullptr || !j->contains("as_optional_tensors") ||
      !(*j)["as_optional_tensors"].is_array()) {
    return invalid_input(
        target_ + ": argument '" + std::string(arg) + "' must be a list of optional tensors",
        arg_location(arg));
  }
  std::vector<ValueId> out;
  for (const Json& t : (*j)["as_optional_tensors"]) {
    if (t.is_object() && t.contains("as_none")) {
      out.emplace_back();
      continue;
    }
    if (!t.is_object() || !t.contains("as_tensor")) {
      return invalid_input(
          target_ + ": an element of '" + std::string(arg) + "' is neither a tensor nor None",
          arg_location(arg));
    }
    ETC_ASSIGN_OR_RETURN(
        std::string name,
        tensor_name(t["as_tensor"], "an element of '" + std::string(arg) + "'", arg_location(arg)));
    auto it = im_.env_.find(name);
    if (it == im_.env_.end()) {
      return invalid_input(target_ + ": tensor '" + name + "' is not defined before this node",
                           arg_location(arg));
    }
    out.push_back(im_.materialize(name, it->second));
  }
  return out;
}

Result<int64_t> TorchNode::sym_int(const Json& j, std::string_view arg) const {
  if (j.is_object() && j.contains("as_int") && j["as_int"].is_number_integer()) {
    return j["as_int"].get<int64_t>();
  }
  if (j.is_object() && j.contains("as_name") && j["as_name"].is_string()) {
    auto it = im_.sym_ints_.find(j["as_name"].get<std::string>());
    if (it == im_.sym_ints_.end()) {
      return invalid_input(target_ + ": symbolic int '" + j["as_name"].get<std::string>() +
                               "' is not defined before this node",
                           arg_location(arg));
    }
    return it->second;
  }
  return invalid_input(
      target_ + ": argument '" + std::string(arg) + "' must be an int or a symbolic int",
      arg_location(arg));
}

Result<int64_t> TorchNode::int_arg(std::string_view arg, std::optional<int64_t> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  if (j->contains("as_int") && (*j)["as_int"].is_number_integer())
    return (*j)["as_int"].get<int64_t>();
  if (j->contains("as_sym_int")) return sym_int((*j)["as_sym_int"], arg);
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be an int",
                       arg_location(arg));
}

Result<std::optional<int64_t>> TorchNode::optional_int(std::string_view arg) const {
  if (!has(arg)) return std::optional<int64_t>();
  ETC_ASSIGN_OR_RETURN(int64_t v, int_arg(arg));
  return std::optional<int64_t>(v);
}

Result<std::vector<int64_t>> TorchNode::ints(std::string_view arg,
                                             std::optional<std::vector<int64_t>> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  std::vector<int64_t> out;
  if (j->contains("as_ints") && (*j)["as_ints"].is_array()) {
    for (const Json& v : (*j)["as_ints"]) {
      if (!v.is_number_integer()) {
        return invalid_input(target_ + ": '" + std::string(arg) + "' must hold ints",
                             arg_location(arg));
      }
      out.push_back(v.get<int64_t>());
    }
    return out;
  }
  if (j->contains("as_sym_ints") && (*j)["as_sym_ints"].is_array()) {
    for (const Json& v : (*j)["as_sym_ints"]) {
      ETC_ASSIGN_OR_RETURN(int64_t x, sym_int(v, arg));
      out.push_back(x);
    }
    return out;
  }
  if (j->contains("as_int") && (*j)["as_int"].is_number_integer()) {
    return std::vector<int64_t>{(*j)["as_int"].get<int64_t>()};
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a list of ints",
                       arg_location(arg));
}

Result<std::optional<std::vector<double>>> TorchNode::optional_floats(std::string_view arg) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) return std::optional<std::vector<double>>();
  if (j->contains("as_floats") && (*j)["as_floats"].is_array()) {
    std::vector<double> out;
    for (const Json& v : (*j)["as_floats"]) {
      if (!v.is_number()) {
        return invalid_input(target_ + ": '" + std::string(arg) + "' must hold floats",
                             arg_location(arg));
      }
      out.push_back(v.get<double>());
    }
    return std::optional<std::vector<double>>(std::move(out));
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a list of floats",
                       arg_location(arg));
}

Result<double> TorchNode::float_arg(std::string_view arg, std::optional<double> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  if (j->contains("as_float") && (*j)["as_float"].is_number())
    return (*j)["as_float"].get<double>();
  if (j->contains("as_float") && (*j)["as_float"].is_string()) {
    // PyTorch writes non-finite floats as strings: "Infinity", "-Infinity", "NaN".
    std::string s = (*j)["as_float"].get<std::string>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  if (j->contains("as_int") && (*j)["as_int"].is_number_integer()) {
    return static_cast<double>((*j)["as_int"].get<int64_t>());
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a float",
                       arg_location(arg));
}

Result<bool> TorchNode::bool_arg(std::string_view arg, std::optional<bool> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  if (j->contains("as_bool") && (*j)["as_bool"].is_boolean()) return (*j)["as_bool"].get<bool>();
  if (j->contains("as_sym_bool") && (*j)["as_sym_bool"].is_object()) {
    const Json& b = (*j)["as_sym_bool"];
    if (b.contains("as_bool") && b["as_bool"].is_boolean()) return b["as_bool"].get<bool>();
    if (b.contains("as_name") && b["as_name"].is_string()) {
      auto it = im_.sym_bools_.find(b["as_name"].get<std::string>());
      if (it == im_.sym_bools_.end()) {
        return invalid_input(target_ + ": symbolic bool '" + b["as_name"].get<std::string>() +
                                 "' is not defined before this node",
                             arg_location(arg));
      }
      return it->second;
    }
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a bool",
                       arg_location(arg));
}

std::string TorchNode::sym_bool_name(std::string_view arg) const {
  auto it = args_.find(arg);
  if (it == args_.end() || it->second == nullptr) return {};
  const Json& j = *it->second;
  if (!j.is_object() || !j.contains("as_sym_bool") || !j["as_sym_bool"].is_object()) return {};
  return j["as_sym_bool"].value("as_name", "");
}

Result<Scalar> TorchNode::scalar(std::string_view arg, std::optional<Scalar> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  if (j->contains("as_int") || j->contains("as_sym_int")) {
    ETC_ASSIGN_OR_RETURN(int64_t v, int_arg(arg));
    return Scalar{v};
  }
  if (j->contains("as_bool")) {
    ETC_ASSIGN_OR_RETURN(bool v, bool_arg(arg));
    return Scalar{v};
  }
  if (j->contains("as_float")) {
    ETC_ASSIGN_OR_RETURN(double v, float_arg(arg));
    return Scalar{v};
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a number",
                       arg_location(arg));
}

Result<std::optional<Scalar>> TorchNode::optional_scalar(std::string_view arg) const {
  if (!has(arg)) return std::optional<Scalar>();
  ETC_ASSIGN_OR_RETURN(Scalar s, scalar(arg));
  return std::optional<Scalar>(s);
}

Result<std::optional<DType>> TorchNode::dtype_arg(std::string_view arg) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) return std::optional<DType>();
  if (!j->contains("as_scalar_type") || !(*j)["as_scalar_type"].is_number_integer()) {
    return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a dtype",
                         arg_location(arg));
  }
  int64_t v = (*j)["as_scalar_type"].get<int64_t>();
  std::optional<DType> d = dtype_from_torch(v);
  if (!d) return unsupported("dtype " + torch_dtype_name(v) + " is not supported");
  return d;
}

Result<std::string> TorchNode::string_arg(std::string_view arg,
                                          std::optional<std::string> fallback) const {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr) {
    if (!fallback) return invalid(std::string("argument '") + std::string(arg) + "' is required");
    return *fallback;
  }
  if (j->contains("as_string") && (*j)["as_string"].is_string()) {
    return (*j)["as_string"].get<std::string>();
  }
  return invalid_input(target_ + ": argument '" + std::string(arg) + "' must be a string",
                       arg_location(arg));
}

const TensorSpec& TorchNode::spec(ValueId v) const {
  return im_.graph_.value(v).spec;
}

ValueId TorchNode::constant(const KnownTensor& t) {
  Entry e{std::nullopt, t, t.dtype, t.shape};
  return im_.materialize(name_ + ".const", e);
}

Result<ValueId> TorchNode::emit(
    OpKind op, std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
  ETC_ASSIGN_OR_RETURN(std::vector<ArgValue> args, bind_args(op, named));
  std::vector<TensorType> types;
  auto type_of = [this](ValueId id) -> const TensorSpec& { return im_.graph_.value(id).spec; };
  Location loc = location();
  Status s = infer_types(op, args, type_of, loc, &types);
  if (!s.ok()) {
    return std::move(s).add_context("while converting " + target_ + " to " + op_info(op).name);
  }
  std::vector<std::string> names;
  std::vector<TensorSpec> specs;
  for (const TensorType& t : types) {
    std::string base = name_ + (emitted_ ? "." + std::to_string(emitted_) : "");
    std::string n =
        im_.fresh_value_name(base + (names.empty() ? "" : "_" + std::to_string(names.size())));
    names.push_back(n);
    specs.push_back(TensorSpec::make(t.dtype, t.sizes));
    if (std::string err = check_tensor_spec(specs.back()); !err.empty()) return invalid(err);
  }
  ETC_ASSIGN_OR_RETURN(bool folded, fold(op, args, names, specs));
  if (folded) {
    ++emitted_;
    return last_outputs_[0];
  }
  std::string node_name =
      im_.graph_.unique_node_name(emitted_ == 0 ? name_ : name_ + "/" + std::to_string(emitted_));
  ++emitted_;
  NodeId id = im_.graph_.add_node(op, node_name, std::move(args), names, std::move(specs));
  im_.graph_.node(id).origin = loc.pointer;
  last_outputs_ = im_.graph_.node(id).outputs;
  return last_outputs_[0];
}

Result<bool> TorchNode::fold(OpKind op, const std::vector<ArgValue>& args,
                             const std::vector<std::string>& names,
                             const std::vector<TensorSpec>& specs) {
  bool any_tensor = false;
  auto known = [this, &any_tensor](ValueId v) {
    any_tensor = true;
    return im_.known_values_.count(v.v) != 0;
  };
  for (const ArgValue& a : args) {
    if (const auto* id = std::get_if<ValueId>(&a)) {
      if (!known(*id)) return false;
    } else if (const auto* list = std::get_if<std::vector<ValueId>>(&a)) {
      for (ValueId item : *list) {
        if (item.valid() && !known(item)) return false;
      }
    }
  }
  if (!any_tensor || !why_not_evaluable(op).empty()) return false;
  int64_t elements = 0;
  for (const TensorSpec& s : specs)
    elements += s.numel();
  if (elements > kMaxKnownElements) return false;
  Result<std::vector<ValueId>> r = add_evaluated(im_.graph_, op, args, names, specs);
  if (!r.ok()) {
    Status s = r.status();
    std::string where = source_line(node_);
    return std::move(s)
        .add_location(location())
        .add_context("while evaluating " + op_info(op).name + " for " + target_ +
                     " at export time (its inputs are known" +
                     (where.empty() ? ")" : "), from " + where));
  }
  last_outputs_ = std::move(*r);
  for (ValueId v : last_outputs_)
    im_.known_values_.insert(v.v);
  return true;
}

bool TorchNode::output_used(int i) const {
  std::optional<std::string> name = output_tensor_name(node_, i);
  return name && im_.read_names_.count(*name);
}

namespace {
// The tensor name an argument holds ("as_tensor"), if it holds one.
std::optional<std::string> tensor_name_of(const Json& arg) {
  if (!arg.is_object() || !arg.contains("as_tensor")) return std::nullopt;
  const Json& t = arg["as_tensor"];
  if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) return std::nullopt;
  return t["name"].get<std::string>();
}
}  // namespace

bool TorchNode::is_placeholder(std::string_view arg) const {
  auto a = args_.find(arg);
  if (a == args_.end()) return false;
  std::optional<std::string> name = tensor_name_of(*a->second);
  return name && (im_.fixed_placeholders_.count(*name) || im_.weight_buffers_.count(*name));
}

bool TorchNode::read_elsewhere(std::string_view arg) const {
  auto a = args_.find(arg);
  if (a == args_.end()) return false;
  std::optional<std::string> held = tensor_name_of(*a->second);
  if (!held) return false;
  const std::string name = *held;
  auto it = im_.read_names_.find(name);
  if (it == im_.read_names_.end()) return false;
  // This node's own reads of the name (one per tensor argument that names it).
  int own = 0;
  for (const auto& [key, value] : args_) {
    if (tensor_name_of(*value) == name) ++own;
  }
  return it->second > own;
}

bool TorchNode::output_is_none(int i) const {
  if (i < 0 || i >= num_outputs()) return false;
  const Json& o = node_["outputs"][static_cast<size_t>(i)];
  return o.is_object() && o.contains("as_none");
}

int TorchNode::num_outputs() const {
  return node_.contains("outputs") && node_["outputs"].is_array()
             ? static_cast<int>(node_["outputs"].size())
             : 0;
}

int TorchNode::num_tensor_outputs() const {
  if (num_outputs() == 1 && node_["outputs"][0].is_object() &&
      node_["outputs"][0].contains("as_tensors") && node_["outputs"][0]["as_tensors"].is_array())
    return static_cast<int>(node_["outputs"][0]["as_tensors"].size());
  return num_outputs();
}

namespace {
// The name of tensor output i of a node (as_tensor, or the i-th of a single as_tensors).
std::optional<std::string> output_tensor_name(const Json& node, int i) {
  const Json& outs = node["outputs"];
  if (outs.size() == 1 && outs[0].is_object() && outs[0].contains("as_tensors") &&
      outs[0]["as_tensors"].is_array()) {
    const Json& list = outs[0]["as_tensors"];
    if (i < static_cast<int>(list.size()) && list[i].is_object() && list[i].contains("name") &&
        list[i]["name"].is_string()) {
      return list[i]["name"].get<std::string>();
    }
    return std::nullopt;
  }
  if (i >= static_cast<int>(outs.size())) return std::nullopt;
  const Json& o = outs[i];
  if (o.is_object() && o.contains("as_tensor") && o["as_tensor"].is_object() &&
      o["as_tensor"].contains("name") && o["as_tensor"]["name"].is_string()) {
    return o["as_tensor"]["name"].get<std::string>();
  }
  return std::nullopt;
}
}  // namespace

Status TorchNode::set_output(int i, ValueId v) {
  std::optional<std::string> name = output_tensor_name(node_, i);
  if (!name) {
    if (i < num_outputs() && node_["outputs"][i].contains("as_none")) return Status();
    return invalid("output " + std::to_string(i) + " is not a tensor {\"as_tensor\": {\"name\"}}");
  }
  if (im_.env_.count(*name)) return invalid("tensor '" + *name + "' is defined twice");
  const TensorSpec& spec = im_.graph_.value(v).spec;
  // The IR value takes the program's name where it is free (outputs keep their names).
  if (im_.graph_.value(v).kind == ValueKind::kNodeOutput && im_.graph_.value(v).name != *name &&
      !im_.graph_.find_value(*name)) {
    // Not when the value already stands for another program name (an identity op's output).
    if (!im_.named_values_.count(v.v)) im_.graph_.rename_value(v, *name);
  }
  im_.named_values_.insert(v.v);
  im_.env_[*name] = Entry{v, std::nullopt, spec.dtype, spec.sizes};
  return Status();
}

std::optional<KnownTensor> TorchNode::known_value(std::string_view arg) const {
  if (!is_tensor(arg)) return std::nullopt;
  Result<const Entry*> e = entry(arg);
  if (!e.ok()) return std::nullopt;
  if ((*e)->known) return *(*e)->known;
  if ((*e)->value && im_.known_values_.count((*e)->value->v))
    return known_from_constant(im_.graph_.value(*(*e)->value).spec);
  return std::nullopt;
}

Status TorchNode::set_known_output(int i, KnownTensor t) {
  std::optional<std::string> name = output_tensor_name(node_, i);
  if (!name) return invalid("output " + std::to_string(i) + " is not a tensor");
  if (im_.env_.count(*name)) return invalid("tensor '" + *name + "' is defined twice");
  DType d = t.dtype;
  std::vector<int64_t> shape = t.shape;
  im_.env_[*name] = Entry{std::nullopt, std::move(t), d, std::move(shape)};
  return Status();
}

Status TorchNode::set_int_output(int i, int64_t v) {
  if (i >= num_outputs()) return invalid("output " + std::to_string(i) + " is missing");
  const Json& o = node_["outputs"][i];
  if (!o.is_object() || !o.contains("as_sym_int") || !o["as_sym_int"].is_object() ||
      !o["as_sym_int"].contains("as_name") || !o["as_sym_int"]["as_name"].is_string()) {
    return invalid("output " + std::to_string(i) + " must be a symbolic int {\"as_sym_int\": ...}");
  }
  im_.sym_ints_[o["as_sym_int"]["as_name"].get<std::string>()] = v;
  return Status();
}

Status TorchNode::set_bool_output(int i, bool v) {
  if (i >= num_outputs()) return invalid("output " + std::to_string(i) + " is missing");
  const Json& o = node_["outputs"][i];
  if (!o.is_object() || !o.contains("as_sym_bool") || !o["as_sym_bool"].is_object() ||
      !o["as_sym_bool"].contains("as_name") || !o["as_sym_bool"]["as_name"].is_string()) {
    return invalid("output " + std::to_string(i) +
                   " must be a symbolic bool {\"as_sym_bool\": ...}");
  }
  im_.sym_bools_[o["as_sym_bool"]["as_name"].get<std::string>()] = v;
  return Status();
}

std::optional<std::string> TorchNode::output_name(int i) const {
  return output_tensor_name(node_, i);
}

void TorchNode::set_data_bound(ValueId v, std::vector<int64_t> sizes) {
  TensorSpec& spec = im_.graph_.value(v).spec;
  spec.sizes = std::move(sizes);
  spec.dynamism = ShapeDynamism::kDynamicBound;
}

bool TorchNode::dynamic_build() const {
  return !im_.options().symbol_values.empty();
}

std::optional<int64_t> TorchNode::symbol_value(const std::string& sym) const {
  auto it = im_.options().symbol_values.find(sym);
  if (it == im_.options().symbol_values.end()) return std::nullopt;
  return it->second;
}

std::optional<std::pair<int64_t, int64_t>> TorchNode::symbol_range(const std::string& sym) const {
  if (auto it = im_.data_symbols_.find(sym); it != im_.data_symbols_.end()) return it->second;
  return im_.symbol_range(sym);
}

void TorchNode::set_data_symbol(const std::string& sym, int64_t lo, int64_t hi) {
  im_.data_symbols_[sym] = {lo, hi};
}

std::string TorchNode::sym_bool_expr(const std::string& name) const {
  return im_.sym_bool_expr(name);
}

std::optional<std::vector<std::variant<int64_t, std::string>>> TorchNode::recorded_sizes(
    const std::string& name) const {
  return im_.recorded_sizes(name);
}

Status TorchNode::rebind(std::string_view arg, ValueId v) {
  ETC_ASSIGN_OR_RETURN(const Json* j, arg_json(arg));
  if (j == nullptr || !j->contains("as_tensor")) return invalid("in-place op without a tensor");
  std::string name = (*j)["as_tensor"]["name"].get<std::string>();
  // An earlier in-place op's output names the tensor it wrote.
  if (auto r = im_.alias_root_.find(name); r != im_.alias_root_.end()) name = r->second;
  ETC_RETURN_IF_ERROR(write(name, v));
  // The op's output joins the tensor's names; bound already (by set_output), it reads what
  // was written (which may be the bound result cast to the tensor's dtype).
  if (std::optional<std::string> out = output_tensor_name(node_, 0)) {
    std::vector<std::string>& group = im_.alias_group_[name];
    if (group.empty()) group.push_back(name);
    group.push_back(*out);
    im_.alias_root_[*out] = name;
    if (auto bound = im_.env_.find(*out); bound != im_.env_.end())
      bound->second = im_.env_.at(name);
  }
  return Status();
}

Result<ValueId> TorchNode::output_value(int i) {
  std::optional<std::string> name = output_tensor_name(node_, i);
  if (!name) return invalid("output " + std::to_string(i) + " is not a tensor");
  auto it = im_.env_.find(*name);
  if (it == im_.env_.end()) return invalid("output " + std::to_string(i) + " is not bound");
  return im_.materialize(*name, it->second);
}

Status TorchNode::write(const std::string& name, ValueId v) {
  if (auto it = im_.view_of_.find(name); it != im_.view_of_.end()) {
    ETC_RETURN_IF_ERROR(check_fresh(name));
    const std::string base_name = it->second.base;
    auto b = im_.env_.find(base_name);
    if (b == im_.env_.end()) return invalid("the tensor '" + name + "' views is not defined");
    const ValueId base = im_.materialize(base_name, b->second);
    ETC_ASSIGN_OR_RETURN(ValueId updated, write_back(name, base, v));
    ETC_RETURN_IF_ERROR(write(base_name, updated));
  } else {
    if (auto fixed = im_.fixed_placeholders_.find(name); fixed != im_.fixed_placeholders_.end()) {
      return unsupported("in-place update of " + fixed->second + " '" + name +
                         "'; etc imports state as registered buffers (a mutated parameter, "
                         "constant or input is not supported)");
    }
    ++im_.writes_[name];
  }
  // Every name of the tensor now reads the update: itself and earlier in-place outputs.
  const TensorSpec& spec = im_.graph_.value(v).spec;
  std::vector<std::string>& group = im_.alias_group_[name];
  if (group.empty()) group.push_back(name);
  for (const std::string& n : group)
    im_.env_[n] = Entry{v, std::nullopt, spec.dtype, spec.sizes};
  if (im_.view_of_.count(name)) im_.view_writes_[name] = im_.writes_[im_.view_root(name)];
  return Status();
}

Result<ValueId> TorchNode::write_back(const std::string& view, ValueId base, ValueId value) {
  const Importer::ViewOf& of = im_.view_of_.at(view);
  TorchNode made(im_, *of.node, of.index, of.target);  // the view's node, for its arguments
  const std::string& t = of.target;
  const std::vector<int64_t> base_sizes = sizes(base);
  const auto rank = static_cast<int64_t>(base_sizes.size());
  auto unsupported_view = [&] {
    return unsupported("in-place write into '" + view + "', a " + t + " view of '" + of.base +
                       "' (an expanded view has no single element per position)");
  };
  if (t == "aten.diagonal.default" || t == "aten.as_strided.default" || t == "aten.split.Tensor" ||
      t == "aten.split_with_sizes.default" || t == "aten.chunk.default" || t == "aten.unbind.int") {
    return unsupported("in-place write into '" + view + "', a " + t + " view of '" + of.base +
                       "' (etc carries writes through slice, select, narrow, the permutations "
                       "and the reshapes); export with ep.run_decompositions() instead");
  }
  if (t == "aten.swapaxes.default" || t == "aten.swapdims.default") {
    ETC_ASSIGN_OR_RETURN(int64_t a, made.int_arg(t == "aten.swapaxes.default" ? "axis0" : "dim0"));
    ETC_ASSIGN_OR_RETURN(int64_t b, made.int_arg(t == "aten.swapaxes.default" ? "axis1" : "dim1"));
    return emit(OpKind::TransposeInt, {{"self", value}, {"dim0", a}, {"dim1", b}});
  }
  if (t == "aten.numpy_T.default") {
    std::vector<int64_t> reverse;
    for (int64_t d = rank - 1; d >= 0; --d)
      reverse.push_back(d);
    if (rank < 2) return value;
    return emit(OpKind::Permute, {{"self", value}, {"dims", reverse}});
  }
  if (t == "aten.movedim.int" || t == "aten.movedim.intlist") {
    // The view moved source to destination; moving destination back to source undoes it.
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> src, made.ints("source"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dst, made.ints("destination"));
    if (src.size() != dst.size()) return made.invalid("source and destination differ in length");
    std::vector<int64_t> perm(static_cast<size_t>(rank), -1);
    std::vector<bool> used(static_cast<size_t>(rank), false);
    for (size_t i = 0; i < src.size(); ++i) {
      ETC_ASSIGN_OR_RETURN(int64_t s, made.wrap_dim(src[i], rank, "source"));
      ETC_ASSIGN_OR_RETURN(int64_t d, made.wrap_dim(dst[i], rank, "destination"));
      perm[static_cast<size_t>(d)] = s;
      used[static_cast<size_t>(s)] = true;
    }
    int64_t next = 0;
    for (int64_t& p : perm) {
      if (p >= 0) continue;
      while (used[static_cast<size_t>(next)])
        ++next;
      p = next;
      used[static_cast<size_t>(next)] = true;
    }
    std::vector<int64_t> inverse(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      inverse[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    return emit(OpKind::Permute, {{"self", value}, {"dims", inverse}});
  }
  if (t == "aten.narrow.default") {
    ETC_ASSIGN_OR_RETURN(int64_t dim, made.int_arg("dim"));
    ETC_ASSIGN_OR_RETURN(dim, made.wrap_dim(dim, rank, "dim"));
    ETC_ASSIGN_OR_RETURN(int64_t start, made.int_arg("start"));
    ETC_ASSIGN_OR_RETURN(int64_t length, made.int_arg("length"));
    const int64_t len = base_sizes[static_cast<size_t>(dim)];
    if (start < 0) start += len;
    KnownTensor idx{DType::kInt64, {length}, {}};
    for (int64_t i = 0; i < length; ++i)
      idx.v.push_back(static_cast<double>(start + i));
    std::vector<ValueId> indices(static_cast<size_t>(dim));
    indices.push_back(constant(idx));
    return emit(OpKind::IndexPut,
                {{"self", base}, {"indices", indices}, {"values", value}, {"accumulate", false}});
  }
  if (t == "aten.slice.Tensor" || t == "aten.select.int") {
    ETC_ASSIGN_OR_RETURN(int64_t dim, made.int_arg("dim", 0));
    ETC_ASSIGN_OR_RETURN(dim, made.wrap_dim(dim, rank, "dim"));
    const int64_t len = base_sizes[static_cast<size_t>(dim)];
    std::vector<int64_t> positions;
    ValueId values = value;
    if (t == "aten.slice.Tensor") {
      ETC_ASSIGN_OR_RETURN(std::optional<int64_t> start, made.optional_int("start"));
      ETC_ASSIGN_OR_RETURN(std::optional<int64_t> end, made.optional_int("end"));
      ETC_ASSIGN_OR_RETURN(int64_t step, made.int_arg("step", 1));
      if (step <= 0) return made.invalid("step must be positive");
      auto clamp = [len](int64_t x) { return std::clamp<int64_t>(x < 0 ? x + len : x, 0, len); };
      const int64_t s = clamp(start.value_or(0)), e = std::max(s, clamp(end.value_or(len)));
      for (int64_t i = s; i < e; i += step)
        positions.push_back(i);
    } else {
      ETC_ASSIGN_OR_RETURN(int64_t index, made.int_arg("index"));
      if (index < -len || index >= len) return made.invalid("index is out of range");
      positions.push_back(index < 0 ? index + len : index);
      ETC_ASSIGN_OR_RETURN(values, emit(OpKind::Unsqueeze, {{"self", value}, {"dim", dim}}));
    }
    KnownTensor idx{DType::kInt64, {static_cast<int64_t>(positions.size())}, {}};
    idx.v.assign(positions.begin(), positions.end());
    std::vector<ValueId> indices(static_cast<size_t>(dim));
    indices.push_back(constant(idx));
    return emit(OpKind::IndexPut,
                {{"self", base}, {"indices", indices}, {"values", values}, {"accumulate", false}});
  }
  if (t == "aten.permute.default") {
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, made.ints("dims"));
    std::vector<int64_t> inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      ETC_ASSIGN_OR_RETURN(int64_t d, made.wrap_dim(dims[i], rank, "dims"));
      inverse[static_cast<size_t>(d)] = static_cast<int64_t>(i);
    }
    return emit(OpKind::Permute, {{"self", value}, {"dims", inverse}});
  }
  if (t == "aten.transpose.int" || t == "aten.t.default") {
    int64_t a = 0, b = 1;
    if (t == "aten.transpose.int") {
      ETC_ASSIGN_OR_RETURN(a, made.int_arg("dim0"));
      ETC_ASSIGN_OR_RETURN(b, made.int_arg("dim1"));
    } else if (rank < 2) {
      return value;
    }
    return emit(OpKind::TransposeInt, {{"self", value}, {"dim0", a}, {"dim1", b}});
  }
  if (t == "aten.expand.default" || t == "aten.expand_as.default") return unsupported_view();
  if (t == "aten.alias.default" || t == "aten.detach.default" || t == "aten.contiguous.default" ||
      t == "aten.dropout.default") {
    return value;
  }
  // view, _unsafe_view, view_as, reshape, flatten, unflatten, unsqueeze, squeeze: the same
  // elements in order.
  return emit(OpKind::Reshape, {{"self", value}, {"shape", base_sizes}});
}

}  // namespace etc::torch_import
