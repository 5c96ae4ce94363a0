#include "graph/ops.h"

#include <algorithm>
#include <cstdlib>
#include <unordered_map>

#include "graph/shape_inference.h"
#include "support/json_pointer.h"

namespace etc {
namespace {

struct OpDecl {
  OpKind kind;
  const char* schema;
  HostForm host_form;
  const char* out_schema;  // kOutVariant only
  InferFn infer;
};

constexpr OpDecl kDecls[] = {
#define ETC_OUT(text) HostForm::kOutVariant, text
#define ETC_DECOMPOSED(fn) HostForm::kDecomposed, nullptr
#define ETC_NO_KERNEL HostForm::kNone, nullptr
#define ETC_OP(e, schema, kernel, fn, cuda) {OpKind::e, schema, kernel, &infer::fn},
#include "graph/ops.def"
#undef ETC_OP
#undef ETC_NO_KERNEL
#undef ETC_DECOMPOSED
#undef ETC_OUT
};

// The schemas are part of the source, so a parse failure or an out variant that does not
// fit its op is a bug in ops.def: fail loudly at once rather than limp on.
[[noreturn]] void table_bug(const std::string& message) {
  std::fprintf(stderr, "etc: internal error: ops.def: %s\n", message.c_str());
  std::abort();
}

OpSchema parse_or_die(const char* text) {
  Result<OpSchema> s = parse_op_schema(text);
  if (!s.ok()) table_bug(s.status().to_string());
  return std::move(s).value();
}

// Parsed once, on first use.
const std::vector<OpInfo>& table() {
  static const std::vector<OpInfo> kOps = [] {
    std::vector<OpInfo> v;
    v.reserve(std::size(kDecls));
    for (const OpDecl& d : kDecls) {
      OpInfo info{d.kind, parse_or_die(d.schema), "", d.infer, d.host_form, std::nullopt, "", ""};
      info.name = info.schema.qualified_name();
      info.kernel_name = kernel_name_of(info.schema);
      if (d.out_schema != nullptr) {
        info.out_schema = parse_or_die(d.out_schema);
        // The out variant takes the functional arguments it keeps by name, and one out per
        // result (the emitter and the kernels rely on both).
        for (const ArgSchema& a : info.out_schema->args) {
          if (!a.is_out && info.schema.find_arg(a.name) == nullptr)
            table_bug(info.name + ": out-variant argument '" + a.name + "' is not an argument");
        }
        if (static_cast<int>(info.out_schema->num_out_args()) != info.schema.num_outputs)
          table_bug(info.name + ": the out variant's outs do not match the results");
        info.out_kernel_name = kernel_name_of(*info.out_schema);
      }
      v.push_back(std::move(info));
    }
    return v;
  }();
  return kOps;
}

}  // namespace

std::string kernel_name_of(const OpSchema& schema) {
  return schema.ns + "::" + schema.name + "." + schema.overload;
}

std::optional<KernelOp> op_from_kernel_name(std::string_view name) {
  static const std::unordered_map<std::string_view, KernelOp> kIndex = [] {
    std::unordered_map<std::string_view, KernelOp> m;
    for (const OpInfo& op : table()) {
      m.emplace(op.kernel_name, KernelOp{op.kind, false});
      if (!op.out_kernel_name.empty()) m.emplace(op.out_kernel_name, KernelOp{op.kind, true});
    }
    return m;
  }();
  auto it = kIndex.find(name);
  if (it == kIndex.end()) return std::nullopt;
  return it->second;
}

const OpInfo& op_info(OpKind kind) {
  return table()[static_cast<size_t>(kind)];
}
std::span<const OpInfo> all_ops() {
  return table();
}

std::optional<OpKind> op_from_name(std::string_view name) {
  std::string n(name);
  if (size_t colons = n.find("::"); colons != std::string::npos) n.replace(colons, 2, ".");
  for (const OpInfo& op : table()) {
    if (op.name == n) return op.kind;
    if (op.schema.overload == "default" && op.schema.ns + "." + op.schema.name == n) return op.kind;
  }
  return std::nullopt;
}

InferContext::InferContext(const OpSchema& schema, std::span<const ArgValue> args, TypeOf type_of,
                           Location node_location)
    : schema_(schema),
      args_(args),
      type_of_(std::move(type_of)),
      location_(std::move(node_location)) {}

const ArgValue& InferContext::arg(std::string_view name) const {
  int i = schema_.arg_index(name);
  if (i < 0 || static_cast<size_t>(i) >= args_.size()) {
    std::fprintf(stderr, "etc: internal error: op %s has no argument '%.*s'\n",
                 schema_.qualified_name().c_str(), static_cast<int>(name.size()), name.data());
    std::abort();
  }
  return args_[static_cast<size_t>(i)];
}

const TensorSpec& InferContext::tensor(std::string_view a) const {
  return type_of_(std::get<ValueId>(arg(a)));
}
const TensorSpec* InferContext::optional_tensor(std::string_view a) const {
  const ArgValue& v = arg(a);
  return std::holds_alternative<ValueId>(v) ? &type_of_(std::get<ValueId>(v)) : nullptr;
}
Result<IndexPlan> plan_index(std::span<const int64_t> self,
                             std::span<const std::optional<std::vector<int64_t>>> indices) {
  if (indices.size() > self.size()) {
    return invalid_input("too many indices (" + std::to_string(indices.size()) +
                         ") for a tensor of rank " + std::to_string(self.size()));
  }
  IndexPlan p;
  bool first = true;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d]) continue;
    p.indexed.push_back(static_cast<int>(d));
    if (first) {
      p.broadcast = *indices[d];
      first = false;
      continue;
    }
    auto b = broadcast_shapes(p.broadcast, *indices[d]);
    if (!b) {
      return invalid_input("index " + std::to_string(d) + " of shape " +
                           shape_to_string(*indices[d]) + " does not broadcast with " +
                           shape_to_string(p.broadcast));
    }
    p.broadcast = std::move(*b);
  }
  const bool adjacent = p.indexed.empty() || p.indexed.back() - p.indexed.front() + 1 ==
                                                 static_cast<int>(p.indexed.size());
  std::vector<int64_t> before, after;  // sliced dims before / after B
  for (size_t d = 0; d < self.size(); ++d) {
    if (std::find(p.indexed.begin(), p.indexed.end(), static_cast<int>(d)) != p.indexed.end())
      continue;
    (adjacent && !p.indexed.empty() && static_cast<int>(d) < p.indexed.front() ? before : after)
        .push_back(self[d]);
  }
  if (p.indexed.empty()) {
    p.result.assign(self.begin(), self.end());
    return p;
  }
  p.b_position = before.size();
  p.result = before;
  p.result.insert(p.result.end(), p.broadcast.begin(), p.broadcast.end());
  p.result.insert(p.result.end(), after.begin(), after.end());
  return p;
}

std::vector<const TensorSpec*> InferContext::tensor_list(std::string_view a) const {
  std::vector<const TensorSpec*> out;
  for (ValueId id : std::get<std::vector<ValueId>>(arg(a)))
    out.push_back(id.valid() ? &type_of_(id) : nullptr);  // None in a Tensor?[]
  return out;
}
int64_t InferContext::int_arg(std::string_view a) const {
  return std::get<int64_t>(arg(a));
}
std::optional<int64_t> InferContext::optional_int(std::string_view a) const {
  const ArgValue& v = arg(a);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}
const std::vector<int64_t>& InferContext::int_list(std::string_view a) const {
  return std::get<std::vector<int64_t>>(arg(a));
}
const std::vector<int64_t>* InferContext::optional_int_list(std::string_view a) const {
  return std::get_if<std::vector<int64_t>>(&arg(a));
}
const std::vector<double>* InferContext::optional_float_list(std::string_view a) const {
  return std::get_if<std::vector<double>>(&arg(a));
}
bool InferContext::bool_arg(std::string_view a) const {
  return std::get<bool>(arg(a));
}
double InferContext::float_arg(std::string_view a) const {
  return std::get<double>(arg(a));
}
const std::string& InferContext::string_arg(std::string_view a) const {
  return std::get<std::string>(arg(a));
}
const std::string* InferContext::optional_string(std::string_view a) const {
  return std::get_if<std::string>(&arg(a));
}
std::optional<Scalar> InferContext::optional_scalar(std::string_view a) const {
  const ArgValue& v = arg(a);
  if (auto* s = std::get_if<Scalar>(&v)) return *s;
  return std::nullopt;
}
Scalar InferContext::scalar(std::string_view a) const {
  return std::get<Scalar>(arg(a));
}
std::optional<DType> InferContext::dtype_arg(std::string_view a) const {
  const ArgValue& v = arg(a);
  if (auto* t = std::get_if<DType>(&v)) return *t;
  return std::nullopt;
}

Status InferContext::error(std::string_view a, std::string message) const {
  Location loc = location_;
  loc.pointer = json_pointer_append(json_pointer_append(loc.pointer, "args"), a);
  return invalid_input(schema_.qualified_name() + ": " + std::move(message), std::move(loc));
}

Status InferContext::error(std::string message) const {
  return invalid_input(schema_.qualified_name() + ": " + std::move(message), location_);
}

Result<int64_t> InferContext::wrap_dim(std::string_view a, int64_t dim, int64_t rank) const {
  int64_t r = rank == 0 ? 1 : rank;  // ATen lets a 0-d tensor use dim 0 / -1
  if (dim < -r || dim >= r) {
    return error(a, "dim " + std::to_string(dim) + " is out of range for a tensor of rank " +
                        std::to_string(rank) + " (expected " + std::to_string(-r) + " to " +
                        std::to_string(r - 1) + ")");
  }
  return dim < 0 ? dim + r : dim;
}

Result<std::vector<ArgValue>> bind_args(
    OpKind kind, std::initializer_list<std::pair<std::string_view, ArgValue>> named) {
  const OpInfo& op = op_info(kind);
  std::vector<std::optional<ArgValue>> slots(op.schema.args.size());
  for (const auto& [name, value] : named) {
    int i = op.schema.arg_index(name);
    if (i < 0) return internal_error(op.name + " has no argument '" + std::string(name) + "'");
    slots[static_cast<size_t>(i)] = value;
  }
  std::vector<ArgValue> args;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i]) {
      args.push_back(std::move(*slots[i]));
    } else if (op.schema.args[i].default_value) {
      args.push_back(*op.schema.args[i].default_value);
    } else {
      return internal_error(op.name + ": missing argument '" + op.schema.args[i].name + "'");
    }
  }
  return args;
}

Status infer_types(OpKind kind, std::span<const ArgValue> args, const InferContext::TypeOf& type_of,
                   const Location& node_location, std::vector<TensorType>* out) {
  const OpInfo& op = op_info(kind);
  InferContext ctx(op.schema, args, type_of, node_location);
  out->clear();
  ETC_RETURN_IF_ERROR(op.infer(ctx, *out));
  if (op.schema.num_outputs >= 0 && out->size() != static_cast<size_t>(op.schema.num_outputs)) {
    return internal_error("inference for " + op.name + " produced " + std::to_string(out->size()) +
                          " outputs, schema says " + std::to_string(op.schema.num_outputs));
  }
  return Status();
}

std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a,
                                                     std::span<const int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace etc
