#include "graph/verifier.h"

#include <algorithm>
#include <span>
#include <unordered_set>

#include "support/checked_math.h"

namespace etc {
namespace {

class Verifier {
 public:
  Verifier(const Graph& g, const VerifyOptions& o, bool inside_delegate)
      : g_(g), options_(o), inside_delegate_(inside_delegate) {}

  Status run() {
    check_values();
    check_nodes();
    check_outputs();
    check_states();
    check_planning();
    return std::move(result_);
  }

 private:
  Location where(const Node& n) const { return Location{.pointer = n.origin, .node = n.name}; }
  Location where(const Value& v) const { return Location{.pointer = v.origin}; }

  void report(std::string message, Location loc) {
    if (count_ >= options_.max_errors) return;
    ++count_;
    Status s = invalid_input(std::move(message), std::move(loc));
    if (result_.ok()) {
      result_ = std::move(s);
    } else {
      result_.add_related(std::move(s));
    }
  }

  bool live_value(ValueId id) const {
    return id.valid() && id.v < g_.value_slots() && !g_.value(id).erased;
  }

  std::string value_label(ValueId id) const {
    if (!live_value(id)) return "%" + std::to_string(id.v);
    const Value& v = g_.value(id);
    return v.name.empty() ? "%" + std::to_string(id.v) : "'" + v.name + "'";
  }

  void check_values() {
    std::unordered_set<std::string> names;
    for (size_t i = 0; i < g_.value_slots(); ++i) {
      const Value& v = g_.value(ValueId(static_cast<uint32_t>(i)));
      if (v.erased) continue;
      if (v.id.v != i)
        report("value slot " + std::to_string(i) + " holds id " + std::to_string(v.id.v), where(v));
      if (!v.name.empty() && !names.insert(v.name).second) {
        report("duplicate value name '" + v.name + "'", where(v));
      }
      if (std::string err = check_tensor_spec(v.spec); !err.empty()) {
        report("value " + value_label(v.id) + ": " + err, where(v));
      }
      if ((v.kind == ValueKind::kConstant) != v.spec.is_const) {
        report("value " + value_label(v.id) + ": constness does not match its kind", where(v));
      }
      if (v.kind == ValueKind::kNodeOutput) {
        bool ok = v.producer.valid() && v.producer.v < g_.node_slots() &&
                  !g_.node(v.producer).erased &&
                  v.output_index < g_.node(v.producer).outputs.size() &&
                  g_.node(v.producer).outputs[v.output_index] == v.id;
        if (!ok)
          report("value " + value_label(v.id) + " is not an output of its producer", where(v));
      }
      // Every recorded use must exist in the node's arguments.
      for (const Use& u : v.uses) {
        bool ok = u.node.valid() && u.node.v < g_.node_slots() && !g_.node(u.node).erased &&
                  u.arg < g_.node(u.node).args.size();
        if (ok) {
          const ArgValue& a = g_.node(u.node).args[u.arg];
          if (u.element < 0) {
            ok = std::holds_alternative<ValueId>(a) && std::get<ValueId>(a) == v.id;
          } else {
            const auto* list = std::get_if<std::vector<ValueId>>(&a);
            ok =
                list && static_cast<size_t>(u.element) < list->size() && (*list)[u.element] == v.id;
          }
        }
        if (!ok)
          report("use list of " + value_label(v.id) + " names a use that does not exist", where(v));
      }
    }
  }

  void check_use(const Node& n, ValueId id, uint32_t arg, int32_t element,
                 const std::unordered_set<uint32_t>& defined) {
    const std::string& arg_name = op_info(n.op).schema.args[arg].name;
    if (!live_value(id)) {
      report("argument '" + arg_name + "' refers to a value that does not exist (" +
                 value_label(id) + ")",
             where(n));
      return;
    }
    if (!defined.count(id.v)) {
      report("argument '" + arg_name + "' uses " + value_label(id) + " before it is defined",
             where(n));
    }
    const auto& uses = g_.value(id).uses;
    if (std::find(uses.begin(), uses.end(), Use{n.id, arg, element}) == uses.end()) {
      report(
          "use list of " + value_label(id) + " is missing its use by argument '" + arg_name + "'",
          where(n));
    }
  }

  void check_nodes() {
    std::unordered_set<uint32_t> defined;
    for (ValueId id : g_.inputs())
      defined.insert(id.v);
    for (ValueId id : g_.constants())
      defined.insert(id.v);
    for (const StateBuffer& s : g_.states())
      defined.insert(s.value.v);
    std::unordered_set<std::string> names;
    std::unordered_set<uint32_t> seen_nodes;
    for (NodeId nid : g_.order()) {
      if (!nid.valid() || nid.v >= g_.node_slots() || g_.node(nid).erased) {
        report("node order names a node that does not exist (#" + std::to_string(nid.v) + ")", {});
        continue;
      }
      const Node& n = g_.node(nid);
      if (!seen_nodes.insert(nid.v).second) report("node appears twice in the order", where(n));
      if (!n.name.empty() && !names.insert(n.name).second) {
        report("duplicate node name '" + n.name + "'", where(n));
      }
      const OpSchema& schema = op_info(n.op).schema;
      if (n.args.size() != schema.args.size()) {
        report(op_info(n.op).name + " takes " + std::to_string(schema.args.size()) +
                   " arguments, node has " + std::to_string(n.args.size()),
               where(n));
        continue;
      }
      bool kinds_ok = true;
      for (uint32_t i = 0; i < n.args.size(); ++i) {
        if (std::string err = check_arg_kind(schema.args[i], n.args[i]); !err.empty()) {
          report("argument '" + schema.args[i].name + "': " + err, where(n));
          kinds_ok = false;
          continue;
        }
        if (const auto* v = std::get_if<ValueId>(&n.args[i])) {
          check_use(n, *v, i, -1, defined);
        } else if (const auto* list = std::get_if<std::vector<ValueId>>(&n.args[i])) {
          for (size_t e = 0; e < list->size(); ++e) {
            if (!(*list)[e].valid() && schema.args[i].type == ArgType::kOptionalTensorList)
              continue;  // None
            check_use(n, (*list)[e], i, static_cast<int32_t>(e), defined);
          }
        }
      }
      if (n.op == OpKind::DelegateCall && !check_delegate(n)) {
        kinds_ok = false;
      } else if (n.op != OpKind::DelegateCall && n.delegate != nullptr) {
        report("only delegate calls may own a delegate", where(n));
      }
      if (schema.num_outputs >= 0 && n.outputs.size() != static_cast<size_t>(schema.num_outputs)) {
        report(op_info(n.op).name + " has " + std::to_string(schema.num_outputs) +
                   " outputs, node has " + std::to_string(n.outputs.size()),
               where(n));
        kinds_ok = false;
      }
      if (kinds_ok && count_ == 0) check_types(n);
      if (kinds_ok && !inside_delegate_) check_devices(n);
      for (ValueId o : n.outputs)
        defined.insert(o.v);
    }
    for (size_t i = 0; i < g_.node_slots(); ++i) {
      const Node& n = g_.node(NodeId(static_cast<uint32_t>(i)));
      if (!n.erased && !seen_nodes.count(static_cast<uint32_t>(i))) {
        report("live node is missing from the node order", where(n));
      }
    }
  }

  // A delegate call: a subgraph that verifies, with inputs that match the call's.
  bool check_delegate(const Node& n) {
    if (n.delegate == nullptr || n.delegate->graph == nullptr) {
      report("delegate call without a delegate", where(n));
      return false;
    }
    const Graph& sub = *n.delegate->graph;
    Status s = Verifier(sub, options_, /*inside_delegate=*/true).run();
    if (!s.ok()) {
      report("in the delegate's subgraph: " + s.to_string(), where(n));
      return false;
    }
    const auto& ins = std::get<std::vector<ValueId>>(n.args[0]);
    if (ins.size() != sub.inputs().size()) {
      report("delegate call passes " + std::to_string(ins.size()) + " inputs, its subgraph takes " +
                 std::to_string(sub.inputs().size()),
             where(n));
      return false;
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!live_value(ins[i])) continue;  // reported by check_use
      const TensorSpec& a = g_.value(ins[i]).spec;
      const TensorSpec& b = sub.value(sub.inputs()[i]).spec;
      if (a.dtype != b.dtype || a.sizes != b.sizes) {
        report("delegate input " + std::to_string(i) + " is " + a.type_string() +
                   " but the subgraph expects " + b.type_string(),
               where(n));
        return false;
      }
    }
    return true;
  }

  void check_devices(const Node& n) {
    std::vector<ValueId> ins = tensor_args(n);
    for (ValueId id : ins) {
      if (!live_value(id)) return;  // reported by check_use
    }
    auto dev = [this](ValueId id) { return g_.value(id).spec.device; };
    auto label = [this, &dev](ValueId id) { return value_label(id) + " on " + to_string(dev(id)); };
    switch (n.op) {
      case OpKind::H2DCopy:
        if (!dev(ins[0]).is_cpu() || dev(n.outputs[0]).is_cpu()) {
          report(
              "a host-to-device copy must read a CPU tensor and write a device tensor; it reads " +
                  label(ins[0]) + " and writes " + label(n.outputs[0]),
              where(n));
        }
        return;
      case OpKind::D2HCopy:
        if (dev(ins[0]).is_cpu() || !dev(n.outputs[0]).is_cpu()) {
          report(
              "a device-to-host copy must read a device tensor and write a CPU tensor; it reads " +
                  label(ins[0]) + " and writes " + label(n.outputs[0]),
              where(n));
        }
        return;
      case OpKind::DelegateCall: {
        Device want = n.delegate->device;
        std::vector<ValueId> io = ins;
        io.insert(io.end(), n.outputs.begin(), n.outputs.end());
        bool all_cpu =
            std::all_of(io.begin(), io.end(), [&](ValueId v) { return dev(v).is_cpu(); });
        if (all_cpu) return;
        for (ValueId v : io) {
          if (dev(v) != want) {
            report("delegate on " + to_string(want) + " has " + label(v) +
                       "; its inputs and outputs must all be on the delegate's device",
                   where(n));
            return;
          }
        }
        return;
      }
      default: {
        const std::vector<ValueId>* groups[] = {&ins, &n.outputs};
        for (const std::vector<ValueId>* group : groups) {
          for (ValueId v : *group) {
            if (!dev(v).is_cpu()) {
              report("host op " + op_info(n.op).name + (group == &ins ? " reads " : " writes ") +
                         label(v) + "; host ops need CPU tensors",
                     where(n));
              return;
            }
          }
        }
      }
    }
  }

  // Planned tensors lie inside a planned buffer of their own device.
  void check_planning() {
    for (size_t i = 0; i < g_.value_slots(); ++i) {
      const Value& v = g_.value(ValueId(static_cast<uint32_t>(i)));
      if (v.erased || !v.spec.mem_id) continue;
      uint32_t id = *v.spec.mem_id;
      if (id == 0 || id > g_.planned_buffers.size()) {
        report("value " + value_label(v.id) + " is planned into buffer " + std::to_string(id) +
                   ", but the graph has " + std::to_string(g_.planned_buffers.size()) +
                   " planned buffers",
               where(v));
        continue;
      }
      const PlannedBuffer& b = g_.planned_buffers[id - 1];
      uint64_t end = v.spec.mem_offset.value_or(0) + static_cast<uint64_t>(v.spec.nbytes());
      if (!v.spec.mem_offset || end > b.size) {
        report("value " + value_label(v.id) + " at offset " +
                   std::to_string(v.spec.mem_offset.value_or(0)) + " does not fit buffer " +
                   std::to_string(id) + " of " + std::to_string(b.size) + " bytes",
               where(v));
      }
      if (b.device != v.spec.device) {
        report("value " + value_label(v.id) + " is on " + to_string(v.spec.device) +
                   " but its buffer " + std::to_string(id) + " is on " + to_string(b.device),
               where(v));
      }
      if (v.spec.is_const)
        report("constant " + value_label(v.id) + " must not be planned", where(v));
    }
  }

  // A data-dependent output's sizes, each at most its bound's.
  static bool within_bound(std::span<const int64_t> sizes, std::span<const int64_t> bound) {
    if (sizes.size() != bound.size()) return false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] < 0 || sizes[d] > bound[d]) return false;
    }
    return true;
  }

  void check_types(const Node& n) {
    std::vector<TensorType> types;
    Status s = infer_node_types(g_, n, &types);
    if (!s.ok()) {
      report(s.message(), s.location());
      return;
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const TensorSpec& spec = g_.value(n.outputs[i]).spec;
      if (types[i].bound_by_data && spec.dynamism == ShapeDynamism::kDynamicBound &&
          within_bound(spec.sizes, types[i].sizes) && spec.dtype == types[i].dtype)
        continue;
      if (spec.dtype != types[i].dtype || spec.sizes != types[i].sizes) {
        TensorSpec want = TensorSpec::make(types[i].dtype, types[i].sizes);
        report("output " + std::to_string(i) + " (" + value_label(n.outputs[i]) + ") is " +
                   spec.type_string() + " but " + op_info(n.op).name + " produces " +
                   want.type_string(),
               where(n));
      }
    }
  }

  void check_outputs() {
    if (g_.outputs().empty()) report("the graph has no outputs", {});
    for (size_t i = 0; i < g_.outputs().size(); ++i) {
      if (!live_value(g_.outputs()[i])) {
        report("graph output " + std::to_string(i) + " refers to a value that does not exist", {});
      }
    }
  }

  // Each state buffer: a live kState value listed once, with initial bytes of its size; its
  // update (if any) a live value of the same type on the state's device.
  void check_states() {
    std::unordered_set<uint32_t> seen;
    for (const StateBuffer& s : g_.states()) {
      if (!live_value(s.value) || g_.value(s.value).kind != ValueKind::kState) {
        report("state '" + s.fqn + "' refers to a value that is not a live state value", {});
        continue;
      }
      const Value& v = g_.value(s.value);
      if (!seen.insert(s.value.v).second)
        report("state " + value_label(s.value) + " is listed twice", where(v));
      if (!s.initial.empty() && static_cast<int64_t>(s.initial.size) != v.spec.nbytes()) {
        report("state " + value_label(s.value) + " has " + std::to_string(s.initial.size) +
                   " bytes of initial value, its type needs " + std::to_string(v.spec.nbytes()),
               where(v));
      }
      if (!s.update.valid()) continue;
      if (!live_value(s.update)) {
        report("the update of state " + value_label(s.value) + " does not exist", where(v));
        continue;
      }
      const TensorSpec& u = g_.value(s.update).spec;
      if (u.dtype != v.spec.dtype || u.sizes != v.spec.sizes) {
        report("state " + value_label(s.value) + " (" + v.spec.type_string() +
                   ") is updated with " + value_label(s.update) + " (" + u.type_string() + ")",
               where(v));
      }
      if (u.device != v.spec.device) {
        report("the update of state " + value_label(s.value) + " is on " + to_string(u.device) +
                   ", the state on " + to_string(v.spec.device),
               where(v));
      }
    }
    for (size_t i = 0; i < g_.value_slots(); ++i) {
      const Value& v = g_.value(ValueId(static_cast<uint32_t>(i)));
      if (!v.erased && v.kind == ValueKind::kState && !seen.count(v.id.v))
        report("value " + value_label(v.id) + " is a state value no state buffer lists", where(v));
    }
  }

  const Graph& g_;
  const VerifyOptions& options_;
  bool inside_delegate_ = false;
  Status result_;
  size_t count_ = 0;
};

}  // namespace

std::string check_arg_kind(const ArgSchema& a, const ArgValue& v) {
  if (std::holds_alternative<std::monostate>(v)) {
    return a.optional ? "" : "None is not allowed for " + std::string(arg_type_name(a.type));
  }
  bool ok = false;
  switch (a.type) {
    case ArgType::kTensor:
      ok = std::holds_alternative<ValueId>(v);
      break;
    case ArgType::kTensorList:
    case ArgType::kOptionalTensorList:
      ok = std::holds_alternative<std::vector<ValueId>>(v);
      break;
    case ArgType::kScalar:
      ok = std::holds_alternative<Scalar>(v);
      break;
    case ArgType::kInt:
      ok = std::holds_alternative<int64_t>(v);
      break;
    case ArgType::kIntList:
      ok = std::holds_alternative<std::vector<int64_t>>(v);
      break;
    case ArgType::kFloat:
      ok = std::holds_alternative<double>(v);
      break;
    case ArgType::kFloatList:
      ok = std::holds_alternative<std::vector<double>>(v);
      break;
    case ArgType::kBool:
      ok = std::holds_alternative<bool>(v);
      break;
    case ArgType::kBoolList:
      ok = std::holds_alternative<std::vector<bool>>(v);
      break;
    case ArgType::kString:
      ok = std::holds_alternative<std::string>(v);
      break;
    case ArgType::kScalarType:
      ok = std::holds_alternative<DType>(v);
      break;
    case ArgType::kLayout:
    case ArgType::kDevice:
    case ArgType::kMemoryFormat:
      ok = false;
      break;  // only None is supported
  }
  if (ok && a.fixed_length > 1) {
    if (const auto* l = std::get_if<std::vector<int64_t>>(&v);
        l && l->size() != static_cast<size_t>(a.fixed_length) && !(l->empty() || l->size() == 1)) {
      return "expected " + std::to_string(a.fixed_length) + " values, got " +
             std::to_string(l->size());
    }
  }
  return ok ? ""
            : "expected " + std::string(arg_type_name(a.type)) + ", got " + arg_value_to_string(v);
}

std::string check_tensor_spec(const TensorSpec& spec) {
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    if (spec.sizes[i] < 0)
      return "dim " + std::to_string(i) + " is negative (" + std::to_string(spec.sizes[i]) + ")";
  }
  auto numel = checked_numel(spec.sizes);
  if (!numel || !checked_mul(*numel, dtype_size(spec.dtype))) {
    return "shape " + shape_to_string(spec.sizes) + " of " + std::string(dtype_name(spec.dtype)) +
           " overflows a 64-bit byte count";
  }
  if (spec.dim_order.size() != spec.sizes.size()) return "dim_order has the wrong length";
  std::vector<uint8_t> sorted = spec.dim_order;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != contiguous_dim_order(spec.sizes.size())) return "dim_order is not a permutation";
  if (spec.is_const && spec.constant.size != static_cast<size_t>(spec.nbytes())) {
    return "constant holds " + std::to_string(spec.constant.size) + " bytes, " +
           spec.type_string() + " needs " + std::to_string(spec.nbytes());
  }
  if (spec.device.index < 0) return "device index is negative";
  if (spec.device.is_cpu() && spec.device.index != 0) return "the CPU has only device index 0";
  return "";
}

Status verify_graph(const Graph& graph, const VerifyOptions& options) {
  return Verifier(graph, options, /*inside_delegate=*/false).run();
}

Status infer_node_types(const Graph& graph, const Node& node, std::vector<TensorType>* out) {
  if (node.op == OpKind::DelegateCall) {
    out->clear();
    if (node.delegate == nullptr || node.delegate->graph == nullptr) {
      return internal_error("delegate call without a delegate", Location{.node = node.name});
    }
    const Graph& sub = *node.delegate->graph;
    for (ValueId o : sub.outputs()) {
      out->push_back(TensorType{sub.value(o).spec.dtype, sub.value(o).spec.sizes});
    }
    return Status();
  }
  auto type_of = [&graph](ValueId id) -> const TensorSpec& { return graph.value(id).spec; };
  return infer_types(node.op, node.args, type_of,
                     Location{.pointer = node.origin, .node = node.name}, out);
}

}  // namespace etc
