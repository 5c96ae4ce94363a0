// The etc graph IR.
//
// Semantics
// - A Graph is a straight-line program: an ordered list of Nodes over tensor Values. The
//   order is a valid schedule (every value is defined before it is used); there is no
//   control flow yet.
// - A Value is one tensor, described by its TensorSpec. It is a graph input, a constant, or
//   the k-th output of exactly one node. Values are immutable once defined (SSA); ops never
//   write their inputs, and views (view, permute, expand, ...) are value semantics: a
//   copying implementation is always correct, aliasing is an optimisation left to memory
//   planning.
// - Dtypes are the ten in dtypes.def; shapes are static (every dim a known non-negative
//   integer; dynamism is recorded but only STATIC is produced today). dim_order describes
//   the layout; tensors are contiguous unless a pass says otherwise.
// - A constant holds its bytes (little-endian, row-major in dim_order, exactly
//   nbytes() long) by reference to a shared Blob; it is never written.
// - Device: every TensorSpec names the device its storage lives on. Everything starts on
//   cpu; device propagation marks delegate inputs/outputs and copies as cuda:N.
// - Nodes are ATen operators (ops.def). A node holds one ArgValue per schema argument, in
//   schema order, defaults materialised, so it maps one-to-one onto an out-variant kernel
//   call. Tensor arguments are ValueIds.
// - Use lists: each Value knows every (node, argument, list element) that reads it. They
//   change only through the Graph API below, and the verifier checks both directions.
// - Graph outputs are an ordered list of values; a value may appear there several times.
// - State (a mutable buffer: torch.export's buffers_to_mutate, ExecuTorch's mutable buffer):
//   a kState value is the buffer's contents when an execution starts; the graph's state
//   update names the value it holds when the execution ends (the next execution's start).
//   The state's bytes persist across executions and start as `initial` when the program
//   loads. Within one execution the state value is as immutable as any other; the write
//   back happens after the last node (memory planning may let the op that computes the
//   update write the state's storage in place, ExecuTorch's reinplacing).
// - Delegates: lowering replaces a group of nodes by one executorch.call_delegate node that
//   owns a Delegate (backend, compile specs, device, subgraph). Device rules, checked by
//   the verifier: ATen ops of the top-level graph read and write CPU tensors only; an
//   _h2d_copy goes from CPU to a device, a _d2h_copy back; a delegate's inputs and outputs
//   are either all CPU (before device propagation) or all on the delegate's device.
// - Memory planning fills each planned TensorSpec's mem_id/mem_offset/lifetime and the
//   graph's planned_buffers; constants and device-resident graph IO are never planned.
//
// Ids: ValueId and NodeId index the graph's tables and are never reused; erased nodes and
// values stay as tombstones so ids printed in a dump stay meaningful for the whole run.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graph/ids.h"
#include "graph/op_schema.h"
#include "graph/ops.h"
#include "graph/tensor_spec.h"

namespace etc {

enum class ValueKind : uint8_t { kInput, kConstant, kNodeOutput, kState };

// One read of a value: argument `arg` of `node`; `element` is the index inside a
// Tensor[] argument, or -1.
struct Use {
  NodeId node;
  uint32_t arg = 0;
  int32_t element = -1;
  bool operator==(const Use&) const = default;
};

struct Value {
  ValueId id;
  std::string name;
  ValueKind kind = ValueKind::kNodeOutput;
  TensorSpec spec;
  NodeId producer;            // for kNodeOutput
  uint32_t output_index = 0;  // for kNodeOutput
  std::vector<Use> uses;
  std::string origin;  // JSON pointer of the declaration in the source file, if any
  bool erased = false;
};

// A compile spec: a key and opaque bytes, serialised verbatim into the .pte
// (ExecuTorch's CompileSpec). "target_device" = "cuda:N" selects the delegate's device.
struct CompileSpec {
  std::string key;
  std::string value;
  bool operator==(const CompileSpec&) const = default;
};

inline constexpr const char* kTargetDeviceSpec = "target_device";

class Graph;

// What a delegate call runs: a subgraph owned by one backend. The subgraph's inputs are the
// call's inputs in order, its outputs the call's outputs; its constants belong to the
// delegate (uploaded once when the program loads). Subgraph tensors carry no device: the
// call's device is `device`, and the call's inputs and outputs in the parent graph carry it.
struct Delegate {
  std::string backend_id;
  std::vector<CompileSpec> compile_specs;
  Device device;
  std::unique_ptr<Graph> graph;
};

struct Node {
  NodeId id;
  std::string name;
  OpKind op = OpKind::AddTensor;
  std::vector<ArgValue> args;  // one per schema argument
  std::vector<ValueId> outputs;
  std::string origin;  // JSON pointer of the node in the source file, if any
  bool erased = false;
  // Set by memory planning for a view (view, unsqueeze, squeeze) whose output shares its
  // input's planned storage: the node emits no instruction, as ExecuTorch's memory.view.
  bool storage_alias = false;
  // Set by memory planning for an index_put whose output is the storage of its `self`, a
  // state buffer (ExecuTorch's reinplaced KV-cache write): it runs as aten::index_put_ and
  // the state needs no write back.
  bool in_place = false;
  std::unique_ptr<Delegate> delegate;  // set for OpKind::DelegateCall only
};

// One planned buffer (ExecuTorch's non_const_buffer_sizes entry). mem_id i+1 is
// planned_buffers[i]; mem_id 0 is reserved.
struct PlannedBuffer {
  Device device;
  uint64_t size = 0;
  bool operator==(const PlannedBuffer&) const = default;
};

// One mutable buffer: its kState value, fully qualified name in the source model, bytes at
// load, and the value it holds after an execution (invalid: the program never writes it).
struct StateBuffer {
  ValueId value;
  std::string fqn;
  ConstantData initial;
  ValueId update;
};

// Every tensor a node reads, in argument order (Tensor[] arguments flattened).
std::vector<ValueId> tensor_args(const Node& node);

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  std::string name;
  // Set by memory planning; empty before.
  std::vector<PlannedBuffer> planned_buffers;

  // --- Building -----------------------------------------------------------------------
  ValueId add_input(std::string name, TensorSpec spec);
  ValueId add_constant(std::string name, TensorSpec spec);
  // A mutable buffer, `initial` exactly spec.nbytes() long (or empty: zeros).
  ValueId add_state(std::string name, TensorSpec spec, std::string fqn, ConstantData initial);
  // The value `state` holds after an execution; a state's own value means "unchanged".
  void set_state_update(ValueId state, ValueId update);
  // Appends a node (or inserts it before `before`) with the given arguments and one new
  // output value per spec. Registers the uses of every ValueId argument. The caller has
  // checked the arguments against the schema; the verifier will catch it otherwise.
  NodeId add_node(OpKind op, std::string name, std::vector<ArgValue> args,
                  std::vector<std::string> output_names, std::vector<TensorSpec> output_specs,
                  std::optional<NodeId> before = std::nullopt);
  void set_outputs(std::vector<ValueId> outputs);

  // --- Editing ------------------------------------------------------------------------
  // Replaces every use of `from` (node arguments and graph outputs) by `to`.
  void replace_all_uses(ValueId from, ValueId to);
  // Sets argument `arg` of `node`, keeping use lists consistent.
  void set_arg(NodeId node, uint32_t arg, ArgValue value);
  // Erases a node whose outputs have no uses and are not graph outputs. Returns false
  // (and changes nothing) otherwise.
  bool erase_node(NodeId node);
  // Replaces the node order by a permutation of it (the verifier checks it is a schedule).
  // Returns false, changing nothing, if `order` is not a permutation of the live nodes.
  bool set_order(const std::vector<NodeId>& order);
  // Moves `node` to just before `before` in the order.
  void move_before(NodeId node, NodeId before);
  // Erases an unused constant. Returns false (and changes nothing) if it has uses or is a
  // graph output.
  bool erase_constant(ValueId id);
  // Points one use of `from` at `to` (an argument, or a list element of one).
  void replace_use(const Use& use, ValueId from, ValueId to);
  // A node name not used by any live node: `base`, else `base.1`, ...
  std::string unique_node_name(const std::string& base) const;
  // Renames a value; the new name must not be in use (returns false otherwise).
  bool rename_value(ValueId id, std::string name);
  // A name not used by any live value: `base`, else `base.1`, `base.2`, ...
  std::string unique_value_name(const std::string& base) const;

  // --- Access -------------------------------------------------------------------------
  const Value& value(ValueId id) const { return values_[id.v]; }
  Value& value(ValueId id) { return values_[id.v]; }
  const Node& node(NodeId id) const { return nodes_[id.v]; }
  Node& node(NodeId id) { return nodes_[id.v]; }
  // Live nodes in program order.
  // Live nodes in program order. The span is valid until the graph next changes.
  std::span<const NodeId> order() const;
  // The node after `node` in the order, if any (O(1)).
  std::optional<NodeId> next_in_order(NodeId node) const;
  std::span<const ValueId> inputs() const { return inputs_; }
  std::span<const ValueId> constants() const;
  std::span<const ValueId> outputs() const { return outputs_; }
  std::span<const StateBuffer> states() const { return states_; }
  const StateBuffer* state_of(ValueId state) const;
  // Whether `id` is the update of some state (it is read after the last node).
  bool is_state_update(ValueId id) const;
  // A graph output or a state update: read after the last node.
  bool is_live_out(ValueId id) const { return is_graph_output(id) || is_state_update(id); }
  // All value/node slots, including erased ones; index = id.
  size_t value_slots() const { return values_.size(); }
  size_t node_slots() const { return nodes_.size(); }
  std::optional<ValueId> find_value(std::string_view name) const;
  bool is_graph_output(ValueId id) const;

 private:
  void add_use(ValueId v, Use use);
  // Writes `to` into the argument slot `use` names (use lists are the caller's job).
  void point_use_at(const Use& use, ValueId to);
  void remove_use(ValueId v, Use use);
  void for_each_value_in(const ArgValue& arg, NodeId node, uint32_t index, bool add);
  ValueId new_value(std::string name, ValueKind kind, TensorSpec spec);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  // The order is a doubly linked list over node ids (O(1) insert and erase, which passes
  // do per node); order() materialises it into a cache on demand.
  void link_before(NodeId node, std::optional<NodeId> before);
  void unlink(NodeId node);
  std::vector<uint32_t> prev_, next_;  // per node slot; kNone when absent
  uint32_t head_ = kNone, tail_ = kNone;
  size_t live_nodes_ = 0;
  static constexpr uint32_t kNone = 0xffffffffu;
  mutable std::vector<NodeId> order_cache_;
  mutable bool order_valid_ = true;
  mutable bool constants_dirty_ = false;
  std::vector<ValueId> inputs_;
  mutable std::vector<ValueId> constants_;  // erased entries are dropped lazily
  std::vector<ValueId> outputs_;
  std::vector<StateBuffer> states_;
  std::unordered_map<std::string, ValueId> by_name_;
  std::unordered_map<std::string, uint32_t> node_names_;  // live node name -> count
};

}  // namespace etc
