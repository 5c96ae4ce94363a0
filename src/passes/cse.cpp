#include "passes/cse.h"

#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace etc {
namespace {

bool mergeable_op(OpKind op) {
  switch (op) {
    case OpKind::Rand:
    case OpKind::Randn:
    case OpKind::Randperm:
    case OpKind::H2DCopy:
    case OpKind::D2HCopy:
    case OpKind::DelegateCall:
      return false;
    default:
      return true;
  }
}

// Appends v's bytes to the key.
template <typename T>
void put(std::string& key, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  key.append(bytes, sizeof(T));
}

template <typename T>
void put_list(std::string& key, const std::vector<T>& list) {
  put(key, list.size());
  for (const T& e : list) {
    if constexpr (std::is_same_v<T, bool>) {
      put(key, static_cast<uint8_t>(e));
    } else {
      put(key, e);
    }
  }
}

// Constants up to this size are told apart by their contents, not their ids: importers give
// each call its own small constants (torchao's quantization steps each hold their own
// quant_min, eps and zero), so that repeated steps read equal constants of different ids.
constexpr size_t kContentKeyBytes = 4096;

// The id that stands for a constant in the keys: the first constant of the same dtype, sizes
// and bytes (small ones), else its own.
class ConstantIds {
 public:
  explicit ConstantIds(const Graph& graph)
      : graph_(graph), known_(graph.value_slots(), ValueId::kInvalid) {}
  uint32_t of(ValueId id) {
    if (!id.valid()) return id.v;  // None in a Tensor?[] list
    uint32_t& known = known_[id.v];
    if (known == ValueId::kInvalid) known = canonical(id);
    return known;
  }

 private:
  uint32_t canonical(ValueId id) {
    const Value& v = graph_.value(id);
    const std::span<const uint8_t> bytes = v.spec.constant.bytes();
    if (v.kind != ValueKind::kConstant || v.spec.constant.size > kContentKeyBytes ||
        bytes.size() != v.spec.constant.size)
      return id.v;
    std::string key;
    put(key, v.spec.dtype);
    put_list(key, v.spec.sizes);
    put_list(key, v.spec.dim_order);
    key.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return by_content_.try_emplace(std::move(key), id.v).first->second;
  }
  const Graph& graph_;
  std::vector<uint32_t> known_;  // per value id: its key id, once asked
  std::unordered_map<std::string, uint32_t> by_content_;
};

// The argument as bytes that differ whenever two arguments do: its alternative, then its
// contents (floats by their bits, so that NaN equals itself and -0 differs from 0).
void put_arg(std::string& key, const ArgValue& arg, ConstantIds& constants) {
  put(key, static_cast<uint8_t>(arg.index()));
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          // None: the alternative says it all.
        } else if constexpr (std::is_same_v<T, ValueId>) {
          put(key, constants.of(v));
        } else if constexpr (std::is_same_v<T, std::vector<ValueId>>) {
          put(key, v.size());
          for (ValueId id : v)
            put(key, constants.of(id));
        } else if constexpr (std::is_same_v<T, Scalar>) {
          put(key, static_cast<uint8_t>(v.v.index()));
          std::visit([&](const auto& s) { put(key, s); }, v.v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          put(key, v.size());
          key.append(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>> ||
                             std::is_same_v<T, std::vector<bool>>) {
          put_list(key, v);
        } else {  // int64_t, double, bool, DType
          put(key, v);
        }
      },
      arg);
}

bool same_spec(const TensorSpec& a, const TensorSpec& b) {
  return a.dtype == b.dtype && a.sizes == b.sizes && a.dim_order == b.dim_order &&
         a.device == b.device;
}

}  // namespace

Result<bool> eliminate_common_subexpressions(Graph& graph, PassContext& context) {
  if (context.options.dynamic_shapes) return false;
  // Merging lengthens the kept value's lifetime, which a memory plan made already would not
  // know of.
  if (!graph.planned_buffers.empty()) {
    return Status(ErrorCode::kUsage,
                  "cse: the graph's memory is planned already; run cse before plan-memory");
  }
  // Graph outputs and state updates (fixed for the whole pass: merges never touch them).
  std::vector<bool> live_out(graph.value_slots(), false);
  for (ValueId id : graph.outputs())
    live_out[id.v] = true;
  for (const StateBuffer& s : graph.states()) {
    if (s.update.valid()) live_out[s.update.v] = true;
  }
  // Values that depend on the program's inputs or state (by value id).
  std::vector<bool> runtime(graph.value_slots(), false);
  for (ValueId id : graph.inputs())
    runtime[id.v] = true;
  for (const StateBuffer& s : graph.states())
    runtime[s.value.v] = true;
  std::unordered_map<std::string, NodeId> seen;
  ConstantIds constants(graph);
  bool changed = false;
  std::string key;
  const std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    bool reads_runtime = false;
    for (ValueId v : tensor_args(n))
      reads_runtime = reads_runtime || runtime[v.v];
    for (ValueId out : n.outputs)
      runtime[out.v] = reads_runtime;
    if (!reads_runtime || !mergeable_op(n.op)) continue;
    key.clear();
    put(key, static_cast<uint32_t>(n.op));
    for (const ArgValue& arg : n.args)
      put_arg(key, arg, constants);
    const auto [it, inserted] = seen.try_emplace(key, id);
    if (inserted) continue;
    const Node& first = graph.node(it->second);
    bool merge = first.outputs.size() == n.outputs.size();
    for (size_t i = 0; merge && i < n.outputs.size(); ++i) {
      merge = !live_out[n.outputs[i].v] &&
              same_spec(graph.value(first.outputs[i]).spec, graph.value(n.outputs[i]).spec);
    }
    if (!merge) continue;
    const std::vector<ValueId> outs = n.outputs, keep = first.outputs;
    for (size_t i = 0; i < outs.size(); ++i)
      graph.replace_all_uses(outs[i], keep[i]);
    if (!graph.erase_node(id)) return internal_error("cse: could not erase node " + n.name);
    changed = true;
  }
  return changed;
}

}  // namespace etc
