// The ONNX importer's driver: model and graph checks, inputs and initializers, the
// unsupported-op report, node conversion through the converter table, and outputs.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "consteval/evaluate.h"
#include "frontends/import_report.h"
#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_reader.h"
#include "graph/verifier.h"
#include "support/file_io.h"

namespace etc {
namespace onnx_import {

namespace {

// ONNX's default-domain opsets etc converts (per-op version rules are in the converters;
// before opset 7 only what check_before_opset7() accepts).
constexpr int64_t kMinOpset = 1;
constexpr int64_t kMaxOpset = 21;
// The training domain's optimizers (Adagrad, Adam, Momentum) exist at version 1 only.
constexpr std::string_view kTrainingDomain = "ai.onnx.preview.training";

bool is_default_domain(const std::string& domain) {
  return domain.empty() || domain == "ai.onnx";
}

// A fixed size: dim_value >= 0. Exporters (Paddle2ONNX among them) write dim_value -1 for a
// dynamic dim, as ONNX Runtime reads it; etc reads it as unknown too.
bool fixed_dim(const onnx::TensorShapeProto::Dimension& d) {
  return d.has_dim_value() && d.dim_value() >= 0;
}

std::string dims_string(const onnx::TensorShapeProto& shape) {
  std::string s = "[";
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (i) s += ", ";
    const auto& d = shape.dim(i);
    if (fixed_dim(d)) {
      s += std::to_string(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      s += d.dim_param();
    } else {
      s += "?";
    }
  }
  return s + "]";
}

}  // namespace

class Importer {
 public:
  Importer(std::string file, std::string base_dir, const OnnxImportOptions& options)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), options_(options) {}

  Result<Graph> run(onnx::ModelProto& model);
  // Converts `body` (a node's graph attribute, at `pointer`) with its inputs bound to
  // `inputs`; the names it defines shadow the outer scope's while it converts and are
  // forgotten after, so it can be converted again.
  Result<std::vector<Entry>> convert_subgraph(const onnx::GraphProto& body,
                                              const std::string& pointer,
                                              const std::vector<Entry>& inputs);

  Location at(const std::string& pointer, const std::string& node = {}) const {
    return Location{.file = file_, .pointer = pointer, .node = node};
  }

  // --- Used by NodeCtx ------------------------------------------------------------------
  Graph graph_;
  std::unordered_map<std::string, Entry> env_;
  std::unordered_set<std::string> onnx_names_;  // every tensor name the model defines
  std::unordered_set<uint32_t> temps_;          // IR values with generated names
  std::string file_;
  std::string base_dir_;
  std::string graph_pointer_ = "/graph";  // the graph whose nodes are being converted

  // A name no ONNX tensor and no IR value has, nor any of `pending` (names about to be used).
  std::string fresh_value_name(const std::string& base,
                               const std::vector<std::string>& pending = {}) {
    for (int k = 1;; ++k) {
      std::string n = base + "." + std::to_string(k);
      if (!onnx_names_.count(n) && !graph_.find_value(n) &&
          std::find(pending.begin(), pending.end(), n) == pending.end()) {
        return n;
      }
    }
  }
  ValueId materialize(const std::string& name, Entry& e) {
    if (!e.value) {
      std::string n = graph_.find_value(name) ? fresh_value_name(name) : name;
      e.value = graph_.add_constant(n, e.constant->spec());
    }
    return *e.value;
  }

 private:
  Status check_model(const onnx::ModelProto& model);
  Status read_initializers(onnx::GraphProto& g);
  Status read_inputs(const onnx::GraphProto& g);
  Status report_unsupported(const onnx::GraphProto& g);
  // A sequence or optional graph input (or one of its tensors): its elements become
  // program inputs, shaped by the options.
  Result<Entry> structured_input(const std::string& name, const onnx::TypeProto& type,
                                 const std::string& p, std::set<std::string>& used_shapes);
  // Adds the program outputs of graph output `name` (a sequence's elements as NAME.i).
  Status add_output(const std::string& name, Entry& e, const onnx::TypeProto* declared,
                    const std::string& p, std::vector<ValueId>& outs);
  // Adds the op types of `g`'s nodes (and of their subgraphs) etc cannot import to `missing`.
  Status find_unsupported(const onnx::GraphProto& g, const std::string& pointer,
                          std::map<std::string, UnsupportedOp>& missing);
  Status convert_nodes(const onnx::GraphProto& g);
  Status read_outputs(const onnx::GraphProto& g);

  const OnnxImportOptions& options_;
  int64_t opset_ = 0;
  bool default_domain_ = false;   // the model imports the default ONNX domain
  bool training_domain_ = false;  // ... and ai.onnx.preview.training version 1
};

std::string qualified_op_type(const onnx::NodeProto& node) {
  return is_default_domain(node.domain()) ? node.op_type() : node.domain() + "::" + node.op_type();
}

// ---- NodeCtx ------------------------------------------------------------------------------

NodeCtx::NodeCtx(Importer& importer, const onnx::NodeProto& node, int index, int64_t opset)
    : im_(importer),
      node_(node),
      index_(index),
      pointer_(importer.graph_pointer_ + "/node/" + std::to_string(index)),
      opset_(opset) {}

Location NodeCtx::location() const {
  return im_.at(pointer_, node_.name().empty() ? node_.op_type() + "#" + std::to_string(index_)
                                               : node_.name());
}

Status NodeCtx::invalid(const std::string& message) const {
  return invalid_input(op_type() + ": " + message, location());
}
Status NodeCtx::unsupported(const std::string& message) const {
  return etc::unsupported(op_type() + ": " + message, location());
}

Status NodeCtx::missing_input_error(int i) const {
  return invalid("input " + std::to_string(i) + " is required, but the node has " +
                 std::to_string(num_inputs()) + " input(s)" +
                 (i < num_inputs() ? " and input " + std::to_string(i) + " is empty" : ""));
}

const Entry& NodeCtx::entry(int i) const {
  static const Entry kMissing;
  if (!has_input(i)) {
    if (missing_.ok()) missing_ = missing_input_error(i);
    return kMissing;
  }
  auto it = im_.env_.find(node_.input(i));
  if (it == im_.env_.end()) {  // convert_nodes checks every input first: not reached
    if (missing_.ok()) missing_ = invalid("input '" + node_.input(i) + "' is not defined");
    return kMissing;
  }
  return it->second;
}
DType NodeCtx::dtype(int i) const {
  return entry(i).dtype;
}
const std::vector<int64_t>& NodeCtx::shape(int i) const {
  return entry(i).shape;
}

Result<ValueId> NodeCtx::input(int i) {
  if (!has_input(i)) return invalid("input " + std::to_string(i) + " is required");
  Entry& e = im_.env_.at(node_.input(i));  // defined: checked
  if (!e.is_tensor()) {
    return unsupported("input " + std::to_string(i) + " ('" + node_.input(i) +
                       "') is a sequence or optional; a tensor is needed here");
  }
  return im_.materialize(node_.input(i), e);
}

const HostTensor* NodeCtx::constant(int i) const {
  if (!has_input(i)) return nullptr;
  const Entry& e = entry(i);
  return e.constant ? &*e.constant : nullptr;
}

Result<const HostTensor*> NodeCtx::require_constant(int i, const std::string& what) {
  if (!has_input(i)) return invalid(what + " (input " + std::to_string(i) + ") is required");
  const HostTensor* t = constant(i);
  if (t == nullptr) {
    return unsupported(what + " (input " + std::to_string(i) + ", '" + node_.input(i) +
                       "') must be known at export time: an initializer, a Constant, or "
                       "computed from static shapes");
  }
  return t;
}

bool NodeCtx::all_inputs_constant() const {
  for (int i = 0; i < num_inputs(); ++i) {
    if (has_input(i) && constant(i) == nullptr) return false;
  }
  return true;
}

const onnx::AttributeProto* NodeCtx::attr(const std::string& name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

namespace {
std::string attr_type_name(onnx::AttributeProto::AttributeType t) {
  return onnx::AttributeProto_AttributeType_IsValid(t) ? onnx::AttributeProto_AttributeType_Name(t)
                                                       : "type " + std::to_string(t);
}
}  // namespace

#define ETC_ATTR_CHECK(a, expected)                                         \
  if ((a)->type() != onnx::AttributeProto::expected &&                      \
      (a)->type() != onnx::AttributeProto::UNDEFINED) {                     \
    return invalid("attribute '" + name + "' must be " #expected ", got " + \
                   attr_type_name((a)->type()));                            \
  }

Result<int64_t> NodeCtx::attr_int(const std::string& name, std::optional<int64_t> fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) {
    if (!fallback) return invalid("attribute '" + name + "' is required");
    return *fallback;
  }
  ETC_ATTR_CHECK(a, INT);
  return a->i();
}

Result<float> NodeCtx::attr_float(const std::string& name, std::optional<float> fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) {
    if (!fallback) return invalid("attribute '" + name + "' is required");
    return *fallback;
  }
  ETC_ATTR_CHECK(a, FLOAT);
  return a->f();
}

Result<std::string> NodeCtx::attr_string(const std::string& name,
                                         std::optional<std::string> fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) {
    if (!fallback) return invalid("attribute '" + name + "' is required");
    return *fallback;
  }
  ETC_ATTR_CHECK(a, STRING);
  return a->s();
}

Result<std::vector<std::string>> NodeCtx::attr_strings(const std::string& name) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return std::vector<std::string>();
  ETC_ATTR_CHECK(a, STRINGS);
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

Result<std::vector<int64_t>> NodeCtx::attr_ints(
    const std::string& name, std::optional<std::vector<int64_t>> fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) {
    if (!fallback) return invalid("attribute '" + name + "' is required");
    return *fallback;
  }
  ETC_ATTR_CHECK(a, INTS);
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<std::vector<float>> NodeCtx::attr_floats(const std::string& name) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return std::vector<float>{};
  ETC_ATTR_CHECK(a, FLOATS);
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

Result<HostTensor> NodeCtx::attr_tensor(const std::string& name) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return invalid("attribute '" + name + "' is required");
  ETC_ATTR_CHECK(a, TENSOR);
  onnx::TensorProto copy = a->t();
  return decode_tensor(copy, im_.base_dir_, location());
}

#undef ETC_ATTR_CHECK

Status NodeCtx::set_output(int i, ValueId value) {
  if (!has_output(i)) return Status();
  const std::string& name = node_.output(i);
  if (im_.env_.count(name)) return invalid("tensor '" + name + "' is defined twice");
  if (im_.temps_.erase(value.v)) {
    // A subgraph converted more than once (an unrolled Loop or Scan) defines its names
    // again: the IR value gets a fresh one.
    const std::string ir_name = im_.graph_.find_value(name) ? im_.fresh_value_name(name) : name;
    if (!im_.graph_.rename_value(value, ir_name)) {
      return internal_error("ONNX import: name '" + name + "' is taken", location());
    }
  }
  const Value& v = im_.graph_.value(value);
  std::optional<HostTensor> known;
  if (v.kind == ValueKind::kConstant)
    known = HostTensor{v.spec.dtype, v.spec.sizes, v.spec.constant};
  im_.env_[name] = Entry{value, std::move(known), v.spec.dtype, v.spec.sizes};
  return Status();
}

Entry NodeCtx::entry_of(ValueId v) const {
  const TensorSpec& spec = im_.graph_.value(v).spec;
  return Entry{v, std::nullopt, spec.dtype, spec.sizes};
}

ValueId NodeCtx::value_of(const Entry& e) {
  return e.value ? *e.value : add_constant(*e.constant);
}

Status NodeCtx::set_output_entry(int i, const Entry& e) {
  if (e.is_tensor()) return e.value ? set_output(i, *e.value) : set_output_constant(i, *e.constant);
  if (!has_output(i)) return Status();
  const std::string& name = node_.output(i);
  if (im_.env_.count(name)) return invalid("tensor '" + name + "' is defined twice");
  im_.env_[name] = e;
  return Status();
}

Result<std::vector<Entry>> NodeCtx::subgraph(const std::string& name,
                                             const std::vector<Entry>& inputs) {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return invalid("attribute '" + name + "' is required");
  if (a->type() != onnx::AttributeProto::GRAPH) {
    return invalid("attribute '" + name + "' must be GRAPH, got " + attr_type_name(a->type()));
  }
  return im_.convert_subgraph(a->g(), pointer_ + "/" + name, inputs);
}

void NodeCtx::mark_dynamic_bound(ValueId v) {
  im_.graph_.value(v).spec.dynamism = ShapeDynamism::kDynamicBound;
}

Status NodeCtx::set_output_constant(int i, HostTensor value) {
  if (!has_output(i)) return Status();
  const std::string& name = node_.output(i);
  if (im_.env_.count(name)) return invalid("tensor '" + name + "' is defined twice");
  DType dt = value.dtype;
  std::vector<int64_t> shape = value.shape;
  im_.env_[name] = Entry{std::nullopt, std::move(value), dt, std::move(shape)};
  return Status();
}

Status NodeCtx::require_no_output(int i, const std::string& what) const {
  if (has_output(i))
    return unsupported("output " + std::to_string(i) + " (" + what + ") is not supported");
  return Status();
}

Result<ValueId> NodeCtx::emit(OpKind op,
                              std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
  ETC_ASSIGN_OR_RETURN(std::vector<ArgValue> args, bind_args(op, named));
  std::vector<TensorType> types;
  auto type_of = [this](ValueId id) -> const TensorSpec& { return im_.graph_.value(id).spec; };
  Location loc = location();
  Status s = infer_types(op, args, type_of, loc, &types);
  if (!s.ok()) {
    return std::move(s).add_context("while converting ONNX " + op_type() + " to " +
                                    op_info(op).name);
  }
  std::string base = num_outputs() > 0 && !node_.output(0).empty() ? node_.output(0) : loc.node;
  std::vector<std::string> names;
  std::vector<TensorSpec> specs;
  for (const TensorType& t : types) {
    names.push_back(im_.fresh_value_name(base, names));
    specs.push_back(TensorSpec::make(t.dtype, t.sizes));
    if (std::string err = check_tensor_spec(specs.back()); !err.empty()) return invalid(err);
  }
  ETC_ASSIGN_OR_RETURN(bool folded, fold(op, args, names, specs));
  if (folded) {
    ++emitted_;
    return last_outputs_[0];
  }
  std::string node_name = im_.graph_.unique_node_name(
      emitted_ == 0 ? loc.node : loc.node + "/" + std::to_string(emitted_));
  ++emitted_;
  NodeId id = im_.graph_.add_node(op, node_name, std::move(args), names, std::move(specs));
  im_.graph_.node(id).origin = loc.pointer;
  last_outputs_ = im_.graph_.node(id).outputs;
  for (ValueId v : last_outputs_)
    im_.temps_.insert(v.v);
  return last_outputs_[0];
}

Result<bool> NodeCtx::fold(OpKind op, const std::vector<ArgValue>& args,
                           const std::vector<std::string>& names,
                           const std::vector<TensorSpec>& specs) {
  int64_t in_bytes = 0, out_bytes = 0, out_elements = 0;
  bool all_known = true, any_tensor = false;
  auto known = [&](ValueId v) {
    const Value& val = im_.graph_.value(v);
    any_tensor = true;
    all_known =
        all_known && val.kind == ValueKind::kConstant && val.spec.numel() <= kMaxEvalElements;
    in_bytes += val.spec.nbytes();
  };
  for (const ArgValue& a : args) {
    if (const auto* id = std::get_if<ValueId>(&a)) {
      known(*id);
    } else if (const auto* list = std::get_if<std::vector<ValueId>>(&a)) {
      for (ValueId item : *list) {
        if (item.valid()) known(item);
      }
    }
  }
  for (const TensorSpec& s : specs) {
    out_bytes += s.nbytes();
    out_elements += s.numel();
  }
  if (!any_tensor || !all_known || out_elements > kMaxEvalElements ||
      !keeps_program_small(in_bytes, out_bytes) || !why_not_evaluable(op).empty())
    return false;
  Result<std::vector<ValueId>> r = add_evaluated(im_.graph_, op, args, names, specs);
  if (!r.ok()) {
    Status s = r.status();
    return std::move(s)
        .add_location(location())
        .add_context("while evaluating ONNX " + op_type() + " (as " + op_info(op).name +
                     ") at export time: its inputs are known");
  }
  last_outputs_ = std::move(*r);
  for (ValueId v : last_outputs_)
    im_.temps_.insert(v.v);  // named as the node's outputs by set_output
  return true;
}

ValueId NodeCtx::add_constant(const HostTensor& value) {
  std::string base = num_outputs() > 0 && !node_.output(0).empty() ? node_.output(0) : "const";
  ValueId id = im_.graph_.add_constant(im_.fresh_value_name(base + ".const"), value.spec());
  return id;
}

const std::vector<int64_t>& NodeCtx::sizes_of(ValueId v) const {
  return im_.graph_.value(v).spec.sizes;
}

int64_t NodeCtx::wrap_axis(int64_t axis, int64_t rank) const {
  return axis < 0 ? axis + rank : axis;
}

Status NodeCtx::check_axis(int64_t axis, int64_t rank, const std::string& what) const {
  // A 0-d tensor has no axis: callers index the shape with the wrapped axis.
  if (axis < -rank || axis >= rank) {
    return invalid(what + " " + std::to_string(axis) + " is out of range for rank " +
                   std::to_string(rank));
  }
  return Status();
}

// ---- Importer -----------------------------------------------------------------------------

Status Importer::check_model(const onnx::ModelProto& model) {
  if (!model.has_graph()) return invalid_input("the model has no graph", at("/graph"));
  for (int i = 0; i < model.opset_import_size(); ++i) {
    const auto& op = model.opset_import(i);
    if (is_default_domain(op.domain())) {
      opset_ = op.version();
      default_domain_ = true;
    } else if (op.domain() == kTrainingDomain) {
      if (op.version() != 1) {
        return etc::unsupported("the model imports " + std::string(kTrainingDomain) + " version " +
                                    std::to_string(op.version()) + "; etc knows version 1",
                                at("/opset_import/" + std::to_string(i)));
      }
      training_domain_ = true;
    }
  }
  if (!default_domain_ && training_domain_) {
    // Only the training domain's ops: the converters see the newest default opset.
    opset_ = kMaxOpset;
  } else if (!default_domain_) {
    // IR version 1/2 models have no opset_import; ONNX says the default domain is opset 1.
    return etc::unsupported("the model does not import the default ONNX domain; etc needs opset " +
                                std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset),
                            at("/opset_import"));
  }
  if (opset_ < kMinOpset || opset_ > kMaxOpset) {
    return etc::unsupported("the model uses ONNX opset " + std::to_string(opset_) +
                                "; etc supports opsets " + std::to_string(kMinOpset) + " to " +
                                std::to_string(kMaxOpset),
                            at("/opset_import"));
  }
  return Status();
}

Status Importer::read_initializers(onnx::GraphProto& g) {
  if (g.sparse_initializer_size() > 0) {
    return etc::unsupported("sparse initializers are not supported",
                            at("/graph/sparse_initializer/0"));
  }
  for (int i = 0; i < g.initializer_size(); ++i) {
    onnx::TensorProto& t = *g.mutable_initializer(i);
    std::string p = "/graph/initializer/" + std::to_string(i);
    if (t.name().empty()) return invalid_input("an initializer has no name", at(p));
    if (env_.count(t.name())) {
      return invalid_input("initializer '" + t.name() + "' is defined twice", at(p));
    }
    ETC_ASSIGN_OR_RETURN(HostTensor h, decode_tensor(t, base_dir_, at(p)));
    DType dt = h.dtype;
    std::vector<int64_t> shape = h.shape;
    env_[t.name()] = Entry{std::nullopt, std::move(h), dt, std::move(shape)};
  }
  return Status();
}

Status Importer::read_inputs(const onnx::GraphProto& g) {
  std::set<std::string> used_shapes;
  Status missing;
  for (int i = 0; i < g.input_size(); ++i) {
    const onnx::ValueInfoProto& in = g.input(i);
    std::string p = "/graph/input/" + std::to_string(i);
    if (env_.count(in.name())) continue;  // an initializer listed as an input (IR < 4)
    if (in.name().empty()) return invalid_input("a graph input has no name", at(p));
    if (in.type().has_sequence_type() || in.type().has_optional_type()) {
      ETC_ASSIGN_OR_RETURN(Entry e, structured_input(in.name(), in.type(), p, used_shapes));
      env_[in.name()] = std::move(e);
      continue;
    }
    if (!in.type().has_tensor_type()) {
      return etc::unsupported("input '" + in.name() + "' is not a tensor, sequence or optional",
                              at(p));
    }
    const auto& tt = in.type().tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt) {
      return etc::unsupported("input '" + in.name() + "' has type " +
                                  onnx_dtype_name(tt.elem_type()) + ", which etc does not support",
                              at(p));
    }
    auto given = options_.input_shapes.find(in.name());
    std::vector<int64_t> shape;
    if (given != options_.input_shapes.end()) {
      used_shapes.insert(in.name());
      shape = given->second;
      if (tt.has_shape()) {
        bool ok = tt.shape().dim_size() == static_cast<int>(shape.size());
        for (int d = 0; ok && d < tt.shape().dim_size(); ++d) {
          if (fixed_dim(tt.shape().dim(d)) && tt.shape().dim(d).dim_value() != shape[d]) ok = false;
        }
        if (!ok) {
          return invalid_input("--input-shape " + in.name() + "=" + shape_to_string(shape) +
                                   " does not match the model's shape " + dims_string(tt.shape()) +
                                   " for input '" + in.name() + "'",
                               at(p));
        }
      }
    } else {
      bool is_static = tt.has_shape();
      for (int d = 0; is_static && d < tt.shape().dim_size(); ++d) {
        if (!fixed_dim(tt.shape().dim(d))) {
          is_static = false;
        } else {
          shape.push_back(tt.shape().dim(d).dim_value());
        }
      }
      if (!is_static) {
        std::string declared = tt.has_shape() ? dims_string(tt.shape()) : "unknown";
        std::string example;
        for (int d = 0; tt.has_shape() && d < tt.shape().dim_size(); ++d) {
          const auto& dim = tt.shape().dim(d);
          example += (d ? "x" : "") + (fixed_dim(dim) ? std::to_string(dim.dim_value()) : "?");
        }
        Status s = invalid_input("input '" + in.name() + "' has shape " + declared +
                                     " with symbolic or unknown dims; give static sizes with "
                                     "--input-shape " +
                                     in.name() + "=" +
                                     (example.empty() ? "AxBxC" : example + " (each ? a size)"),
                                 at(p));
        if (missing.ok()) {
          missing = std::move(s);
        } else {
          missing.add_related(std::move(s));
        }
        continue;
      }
    }
    ValueId v = graph_.add_input(in.name(), TensorSpec::make(*dt, shape));
    graph_.value(v).origin = p;
    env_[in.name()] = Entry{v, std::nullopt, *dt, shape};
  }
  ETC_RETURN_IF_ERROR(missing);
  // An absent input must be one the model declares optional.
  for (const std::string& name : options_.absent_inputs) {
    bool optional = false;
    for (const auto& in : g.input()) {
      if (in.name() == name) optional = in.type().has_optional_type();
    }
    if (!optional) {
      return invalid_input(
          "--absent-input names '" + name + "', which is not an optional input of the model",
          at("/graph/input"));
    }
  }
  for (const auto& [name, shape] : options_.input_shapes) {
    if (!used_shapes.count(name)) {
      std::string names;
      for (const auto& in : g.input()) {
        if (!env_.count(in.name()) || env_[in.name()].value)
          names += (names.empty() ? "" : ", ") + in.name();
      }
      return invalid_input("--input-shape names '" + name +
                               "', which is not an input of the model "
                               "(inputs: " +
                               names + ")",
                           at("/graph/input"));
    }
  }
  return Status();
}

Status Importer::find_unsupported(const onnx::GraphProto& g, const std::string& pointer,
                                  std::map<std::string, UnsupportedOp>& missing) {
  const auto& table = converters();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    const std::string op = qualified_op_type(n);
    const std::string node_pointer = pointer + "/node/" + std::to_string(i);
    const bool imported = is_default_domain(n.domain())   ? default_domain_
                          : n.domain() == kTrainingDomain ? training_domain_
                                                          : true;
    if (!imported) {
      return invalid_input("node " + std::to_string(i) + " (" + op + ") is of domain '" +
                               n.domain() + "', which the model's opset_import does not name",
                           at(node_pointer));
    }
    // The bodies of If, Loop and Scan: their nodes must be importable too.
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH) {
        ETC_RETURN_IF_ERROR(find_unsupported(a.g(), node_pointer + "/" + a.name(), missing));
      }
      for (int k = 0; k < a.graphs_size(); ++k) {
        ETC_RETURN_IF_ERROR(find_unsupported(
            a.graphs(k), node_pointer + "/" + a.name() + "/" + std::to_string(k), missing));
      }
    }
    // (A default-domain op type never names a domain itself.)
    if (table.count(op) && (!is_default_domain(n.domain()) || op.find(':') == std::string::npos))
      continue;
    missing[op].nodes.push_back(n.name().empty() ? n.op_type() + "#" + std::to_string(i)
                                                 : n.name());
  }
  return Status();
}

Result<Entry> Importer::structured_input(const std::string& name, const onnx::TypeProto& type,
                                         const std::string& p, std::set<std::string>& used_shapes) {
  if (type.has_tensor_type()) {
    const auto& tt = type.tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (!dt) {
      return etc::unsupported("input '" + name + "' holds " + onnx_dtype_name(tt.elem_type()) +
                                  ", which etc does not support",
                              at(p));
    }
    std::vector<int64_t> shape;
    auto given = options_.input_shapes.find(name);
    if (given != options_.input_shapes.end()) {
      used_shapes.insert(name);
      shape = given->second;
      if (tt.has_shape() && tt.shape().dim_size() != static_cast<int>(shape.size())) {
        return invalid_input("--input-shape " + name + "=" + shape_to_string(shape) +
                                 " does not match the declared shape " + dims_string(tt.shape()),
                             at(p));
      }
    } else {
      bool is_static = tt.has_shape();
      for (int d = 0; is_static && d < tt.shape().dim_size(); ++d) {
        is_static = fixed_dim(tt.shape().dim(d));
        if (is_static) shape.push_back(tt.shape().dim(d).dim_value());
      }
      if (!is_static) {
        return invalid_input("input '" + name +
                                 "' needs static sizes: give them with --input-shape " + name +
                                 "=AxBxC",
                             at(p));
      }
    }
    ValueId v = graph_.add_input(name, TensorSpec::make(*dt, shape));
    graph_.value(v).origin = p;
    return Entry{v, std::nullopt, *dt, shape};
  }
  if (type.has_sequence_type()) {
    const onnx::TypeProto& elem = type.sequence_type().elem_type();
    if (!elem.has_tensor_type()) {
      return etc::unsupported("input '" + name + "' is a sequence of non-tensors", at(p));
    }
    Entry seq;
    seq.kind = Entry::Kind::kSequence;
    std::optional<DType> dt = dtype_from_onnx(elem.tensor_type().elem_type());
    if (!dt) {
      return etc::unsupported("input '" + name + "' holds " +
                                  onnx_dtype_name(elem.tensor_type().elem_type()) +
                                  ", which etc does not support",
                              at(p));
    }
    seq.dtype = *dt;
    // Its length: the elements NAME.0, NAME.1, ... given shapes.
    for (int i = 0; options_.input_shapes.count(name + "." + std::to_string(i)); ++i) {
      ETC_ASSIGN_OR_RETURN(Entry e,
                           structured_input(name + "." + std::to_string(i), elem, p, used_shapes));
      seq.elements.push_back(std::move(e));
    }
    return seq;
  }
  if (type.has_optional_type()) {
    Entry opt;
    opt.kind = Entry::Kind::kOptional;
    const onnx::TypeProto& elem = type.optional_type().elem_type();
    if (elem.has_tensor_type()) {
      std::optional<DType> dt = dtype_from_onnx(elem.tensor_type().elem_type());
      if (dt) opt.dtype = *dt;
    }
    if (options_.absent_inputs.count(name)) return opt;
    ETC_ASSIGN_OR_RETURN(Entry e, structured_input(name, elem, p, used_shapes));
    opt.dtype = e.dtype;
    opt.elements.push_back(std::move(e));
    return opt;
  }
  return etc::unsupported("input '" + name + "' is not a tensor, sequence or optional", at(p));
}

Status Importer::report_unsupported(const onnx::GraphProto& g) {
  std::map<std::string, UnsupportedOp> missing;  // op -> node names
  ETC_RETURN_IF_ERROR(find_unsupported(g, "/graph", missing));
  if (missing.empty()) return Status();
  return unsupported_ops(missing, "op type", "--onnx", at("/graph/node"));
}

// The ops that read sequences or optionals (the others take tensors only).
static bool takes_structured(const std::string& op_type) {
  static const std::set<std::string> ops = {"Identity",
                                            "If",
                                            "Loop",
                                            "SequenceAt",
                                            "ConcatFromSequence",
                                            "SequenceErase",
                                            "SequenceInsert",
                                            "SequenceLength",
                                            "SequenceMap",
                                            "OptionalHasElement",
                                            "OptionalGetElement",
                                            "Optional"};
  return ops.count(op_type) > 0;
}

Status Importer::convert_nodes(const onnx::GraphProto& g) {
  const auto& table = converters();
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    NodeCtx ctx(*this, n, i, opset_);
    for (int k = 0; k < n.input_size(); ++k) {
      if (!n.input(k).empty() && !env_.count(n.input(k))) {
        return ctx.invalid("input '" + n.input(k) +
                           "' is not defined before this node (ONNX "
                           "graphs must list nodes in topological order)");
      }
      if (n.input(k).empty()) continue;
      const Entry& e = env_.at(n.input(k));
      if (!e.is_tensor() && !takes_structured(n.op_type())) {
        return ctx.unsupported("input '" + n.input(k) + "' is " +
                               (e.kind == Entry::Kind::kSequence ? "a sequence" : "an optional") +
                               "; this op takes tensors");
      }
      if (e.value && graph_.value(*e.value).spec.dynamism == ShapeDynamism::kDynamicBound) {
        return ctx.unsupported("input '" + n.input(k) +
                               "' has a size known only at run time (an output of "
                               "NonZero, NonMaxSuppression or Unique); etc takes such "
                               "tensors only as graph outputs");
      }
    }
    const std::string op = qualified_op_type(n);
    // Arity first, so no converter reads an input or output the node does not have.
    for (int k = 0; k < required_inputs(op); ++k) {
      if (!ctx.has_input(k)) return ctx.missing_input_error(k);
    }
    // Output 0 is optional for a few ops (the recurrent ops' Y): some output must be named.
    bool any_output = false;
    for (int k = 0; k < n.output_size(); ++k)
      any_output = any_output || ctx.has_output(k);
    if (!any_output) return ctx.invalid("the node has no outputs");
    const bool y_optional = n.op_type() == "LSTM" || n.op_type() == "GRU" || n.op_type() == "RNN";
    if (!ctx.has_output(0) && !y_optional) return ctx.invalid("the node has no output 0");
    if (opset_ < 7) ETC_RETURN_IF_ERROR(check_before_opset7(ctx));
    Result<bool> evaluated = try_evaluate(ctx);
    Status converted = !evaluated.ok() ? evaluated.status()
                       : *evaluated    ? Status()
                                       : table.at(op)(ctx);
    if (!ctx.missing_input().ok()) return ctx.missing_input();
    ETC_RETURN_IF_ERROR(converted);
    for (int k = 0; k < n.output_size(); ++k) {
      if (!n.output(k).empty() && !env_.count(n.output(k))) {
        // An optional output nobody reads is fine; a converter that forgot one is a bug.
        bool used = false;
        for (int j = i + 1; j < g.node_size() && !used; ++j) {
          for (const auto& in : g.node(j).input())
            used = used || in == n.output(k);
        }
        for (const auto& o : g.output())
          used = used || o.name() == n.output(k);
        if (used) return ctx.unsupported("output " + std::to_string(k) + " is not supported");
      }
    }
  }
  return Status();
}

Result<std::vector<Entry>> Importer::convert_subgraph(const onnx::GraphProto& body,
                                                      const std::string& pointer,
                                                      const std::vector<Entry>& inputs) {
  if (body.input_size() != static_cast<int>(inputs.size())) {
    return invalid_input("the subgraph has " + std::to_string(body.input_size()) +
                             " inputs; the node gives it " + std::to_string(inputs.size()),
                         at(pointer));
  }
  if (body.sparse_initializer_size() > 0) {
    return etc::unsupported("sparse initializers are not supported",
                            at(pointer + "/sparse_initializer/0"));
  }
  // The names the body defines hide the outer scope's while it converts.
  std::vector<std::string> names;
  for (const auto& in : body.input())
    names.push_back(in.name());
  for (const auto& t : body.initializer())
    names.push_back(t.name());
  for (const auto& n : body.node()) {
    for (const auto& o : n.output()) {
      if (!o.empty()) names.push_back(o);
    }
  }
  std::vector<std::pair<std::string, Entry>> hidden;
  for (const std::string& name : names) {
    auto it = env_.find(name);
    if (it != env_.end()) {
      hidden.emplace_back(name, std::move(it->second));
      env_.erase(it);
    }
  }
  auto convert = [&]() -> Result<std::vector<Entry>> {
    for (int i = 0; i < body.input_size(); ++i) {
      const std::string& name = body.input(i).name();
      const std::string p = pointer + "/input/" + std::to_string(i);
      if (name.empty()) return invalid_input("a subgraph input has no name", at(p));
      if (env_.count(name)) return invalid_input("'" + name + "' is defined twice", at(p));
      env_[name] = inputs[static_cast<size_t>(i)];
    }
    for (int i = 0; i < body.initializer_size(); ++i) {
      onnx::TensorProto t = body.initializer(i);  // decode_tensor moves raw_data out
      const std::string p = pointer + "/initializer/" + std::to_string(i);
      if (t.name().empty() || env_.count(t.name())) {
        return invalid_input("an initializer has no name or one defined twice", at(p));
      }
      ETC_ASSIGN_OR_RETURN(HostTensor h, decode_tensor(t, base_dir_, at(p)));
      const DType dt = h.dtype;
      std::vector<int64_t> shape = h.shape;
      env_[t.name()] = Entry{std::nullopt, std::move(h), dt, std::move(shape)};
    }
    const std::string outer = graph_pointer_;
    graph_pointer_ = pointer;
    Status s = convert_nodes(body);
    graph_pointer_ = outer;
    ETC_RETURN_IF_ERROR(s);
    std::vector<Entry> outs;
    for (int i = 0; i < body.output_size(); ++i) {
      auto it = env_.find(body.output(i).name());
      if (it == env_.end()) {
        return invalid_input("output '" + body.output(i).name() + "' is not produced by any node",
                             at(pointer + "/output/" + std::to_string(i)));
      }
      outs.push_back(it->second);
    }
    return outs;
  };
  Result<std::vector<Entry>> outs = convert();
  for (const std::string& name : names)
    env_.erase(name);
  for (auto& [name, e] : hidden)
    env_[name] = std::move(e);
  return outs;
}

Status Importer::add_output(const std::string& name, Entry& e, const onnx::TypeProto* declared,
                            const std::string& p, std::vector<ValueId>& outs) {
  if (e.kind == Entry::Kind::kSequence) {
    const onnx::TypeProto* elem = declared && declared->has_sequence_type()
                                      ? &declared->sequence_type().elem_type()
                                      : nullptr;
    for (size_t i = 0; i < e.elements.size(); ++i) {
      ETC_RETURN_IF_ERROR(add_output(name + "." + std::to_string(i), e.elements[i], elem, p, outs));
    }
    return Status();
  }
  if (e.kind == Entry::Kind::kOptional) {
    const onnx::TypeProto* elem = declared && declared->has_optional_type()
                                      ? &declared->optional_type().elem_type()
                                      : nullptr;
    if (!e.elements.empty()) ETC_RETURN_IF_ERROR(add_output(name, e.elements[0], elem, p, outs));
    return Status();
  }
  ValueId v = materialize(name, e);
  if (graph_.value(v).name != name) {
    // An alias (Identity) or a constant: give the output its own name.
    ETC_ASSIGN_OR_RETURN(std::vector<ArgValue> args, bind_args(OpKind::Clone, {{"self", v}}));
    // Copied before add_node: a new value may move the graph's values (and `spec` with them).
    const TensorSpec spec = graph_.value(v).spec;
    NodeId id =
        graph_.add_node(OpKind::Clone, graph_.unique_node_name(name + "/output"), std::move(args),
                        {graph_.find_value(name) ? fresh_value_name(name) : name},
                        {TensorSpec::make(spec.dtype, spec.sizes)});
    const ShapeDynamism dynamism = spec.dynamism;
    v = graph_.node(id).outputs[0];
    graph_.value(v).spec.dynamism = dynamism;
  }
  const TensorSpec& spec = graph_.value(v).spec;
  if (declared && declared->has_tensor_type()) {
    const auto& tt = declared->tensor_type();
    std::optional<DType> dt = dtype_from_onnx(tt.elem_type());
    if (tt.elem_type() != 0 && dt && *dt != spec.dtype) {
      return invalid_input("output '" + name + "' is declared " + onnx_dtype_name(tt.elem_type()) +
                               " but computes " + spec.type_string(),
                           at(p));
    }
    if (tt.has_shape()) {
      bool ok = tt.shape().dim_size() == static_cast<int>(spec.sizes.size());
      for (int d = 0; ok && d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        // A dynamic-bound output's sizes are upper bounds.
        const bool bound = spec.dynamism == ShapeDynamism::kDynamicBound;
        if (fixed_dim(dim) &&
            (bound ? dim.dim_value() > spec.sizes[d] : dim.dim_value() != spec.sizes[d]))
          ok = false;
      }
      if (!ok) {
        return invalid_input("output '" + name + "' is declared with shape " +
                                 dims_string(tt.shape()) + " but computes " + spec.type_string(),
                             at(p));
      }
    }
  }
  outs.push_back(v);
  return Status();
}

Status Importer::read_outputs(const onnx::GraphProto& g) {
  if (g.output_size() == 0) return invalid_input("the graph has no outputs", at("/graph/output"));
  std::vector<ValueId> outs;
  for (int i = 0; i < g.output_size(); ++i) {
    const onnx::ValueInfoProto& o = g.output(i);
    std::string p = "/graph/output/" + std::to_string(i);
    auto it = env_.find(o.name());
    if (it == env_.end()) {
      return invalid_input("output '" + o.name() + "' is not produced by any node", at(p));
    }
    ETC_RETURN_IF_ERROR(
        add_output(o.name(), it->second, o.has_type() ? &o.type() : nullptr, p, outs));
  }
  if (outs.empty()) {
    return etc::unsupported(
        "the outputs are empty sequences or absent optionals: the program "
        "would have no outputs",
        at("/graph/output"));
  }
  graph_.set_outputs(std::move(outs));
  return Status();
}

Result<Graph> Importer::run(onnx::ModelProto& model) {
  ETC_RETURN_IF_ERROR(check_model(model));
  onnx::GraphProto& g = *model.mutable_graph();
  graph_.name = g.name();
  for (const auto& in : g.input())
    onnx_names_.insert(in.name());
  for (const auto& t : g.initializer())
    onnx_names_.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output())
      onnx_names_.insert(o);
  }
  ETC_RETURN_IF_ERROR(report_unsupported(g));
  ETC_RETURN_IF_ERROR(read_initializers(g));
  ETC_RETURN_IF_ERROR(read_inputs(g));
  ETC_RETURN_IF_ERROR(convert_nodes(g));
  ETC_RETURN_IF_ERROR(read_outputs(g));
  Status v = verify_graph(graph_);
  if (!v.ok()) return internal_error("ONNX import produced an invalid graph: " + v.to_string());
  return std::move(graph_);
}

}  // namespace onnx_import

bool is_onnx_path(const std::string& path) {
  if (path.size() < 5) return false;
  std::string ext = path.substr(path.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".onnx";
}

Result<Graph> parse_onnx_model(std::span<const uint8_t> bytes, const std::string& file,
                               const std::string& base_dir, const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return etc::unsupported("ONNX models over 2 GiB must keep their weights in external data",
                            Location{.file = file});
  }
  if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid_input("not a valid ONNX model: the protobuf message does not parse (" +
                             std::to_string(bytes.size()) + " bytes; truncated or not ONNX?)",
                         Location{.file = file});
  }
  onnx_import::Importer importer(file, base_dir, options);
  return importer.run(model);
}

Result<Graph> load_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  std::string dir = std::filesystem::path(path).parent_path().string();
  return parse_onnx_model(blob->bytes(), path, dir.empty() ? "." : dir, options);
}

Result<std::pair<std::string, std::vector<int64_t>>> parse_input_shape(const std::string& text) {
  size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return Status(ErrorCode::kUsage,
                  "--input-shape must look like NAME=1x3x224x224, got '" + text + "'");
  }
  std::vector<int64_t> dims;
  std::string rest = text.substr(eq + 1);
  if (rest != "scalar") {
    std::stringstream ss(rest);
    std::string part;
    while (std::getline(ss, part, 'x')) {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || errno != 0 || v < 0) {
        return Status(ErrorCode::kUsage, "--input-shape " + text + ": '" + part +
                                             "' is not a non-negative dim (use NAME=AxBxC, or "
                                             "NAME=scalar for a 0-d input)");
      }
      dims.push_back(v);
    }
    if (rest.back() == 'x') {
      return Status(ErrorCode::kUsage, "--input-shape " + text + ": trailing 'x'");
    }
  }
  return std::make_pair(text.substr(0, eq), dims);
}

Result<OnnxTensor> load_onnx_tensor_file(const std::string& path) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  return parse_onnx_tensor(blob->bytes(), path);
}

Result<OnnxTensor> parse_onnx_tensor(std::span<const uint8_t> bytes, const std::string& path) {
  onnx::TensorProto t;
  if (!t.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return invalid_input("not a serialized ONNX TensorProto", Location{.file = path});
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  ETC_ASSIGN_OR_RETURN(onnx_import::HostTensor h,
                       onnx_import::decode_tensor(t, dir, Location{.file = path}));
  auto span = h.data.bytes();
  return OnnxTensor{t.name(), h.dtype, h.shape, std::string(span.begin(), span.end())};
}

std::vector<std::string> supported_onnx_ops() {
  std::vector<std::string> ops;
  for (const auto& [name, fn] : onnx_import::converters())
    ops.push_back(name);
  return ops;
}

}  // namespace etc
