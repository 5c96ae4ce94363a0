#include "graph/graph.h"

#include <algorithm>

namespace etc {

std::vector<ValueId> tensor_args(const Node& node) {
  std::vector<ValueId> out;
  for (const ArgValue& a : node.args) {
    if (const auto* v = std::get_if<ValueId>(&a)) {
      out.push_back(*v);
    } else if (const auto* l = std::get_if<std::vector<ValueId>>(&a)) {
      for (ValueId id : *l)
        if (id.valid()) out.push_back(id);
    }
  }
  return out;
}

ValueId Graph::new_value(std::string name, ValueKind kind, TensorSpec spec) {
  ValueId id(static_cast<uint32_t>(values_.size()));
  Value v;
  v.id = id;
  v.name = std::move(name);
  v.kind = kind;
  v.spec = std::move(spec);
  if (!v.name.empty()) by_name_.emplace(v.name, id);
  values_.push_back(std::move(v));
  return id;
}

ValueId Graph::add_input(std::string name, TensorSpec spec) {
  ValueId id = new_value(std::move(name), ValueKind::kInput, std::move(spec));
  inputs_.push_back(id);
  return id;
}

ValueId Graph::add_constant(std::string name, TensorSpec spec) {
  spec.is_const = true;
  ValueId id = new_value(std::move(name), ValueKind::kConstant, std::move(spec));
  constants_.push_back(id);
  return id;
}

ValueId Graph::add_state(std::string name, TensorSpec spec, std::string fqn, ConstantData initial) {
  spec.is_const = false;
  ValueId id = new_value(std::move(name), ValueKind::kState, std::move(spec));
  states_.push_back(StateBuffer{id, std::move(fqn), std::move(initial), ValueId()});
  return id;
}

void Graph::set_state_update(ValueId state, ValueId update) {
  for (StateBuffer& s : states_) {
    if (s.value == state) s.update = update == state ? ValueId() : update;
  }
}

const StateBuffer* Graph::state_of(ValueId state) const {
  for (const StateBuffer& s : states_) {
    if (s.value == state) return &s;
  }
  return nullptr;
}

bool Graph::is_state_update(ValueId id) const {
  return std::any_of(states_.begin(), states_.end(),
                     [id](const StateBuffer& s) { return s.update == id; });
}

NodeId Graph::add_node(OpKind op, std::string name, std::vector<ArgValue> args,
                       std::vector<std::string> output_names, std::vector<TensorSpec> output_specs,
                       std::optional<NodeId> before) {
  NodeId id(static_cast<uint32_t>(nodes_.size()));
  Node n;
  n.id = id;
  n.name = std::move(name);
  n.op = op;
  n.args = std::move(args);
  for (size_t i = 0; i < output_specs.size(); ++i) {
    std::string out_name = i < output_names.size() ? std::move(output_names[i]) : std::string();
    ValueId v = new_value(std::move(out_name), ValueKind::kNodeOutput, std::move(output_specs[i]));
    values_[v.v].producer = id;
    values_[v.v].output_index = static_cast<uint32_t>(i);
    n.outputs.push_back(v);
  }
  if (!n.name.empty()) ++node_names_[n.name];
  nodes_.push_back(std::move(n));
  for (uint32_t i = 0; i < nodes_[id.v].args.size(); ++i) {
    for_each_value_in(nodes_[id.v].args[i], id, i, /*add=*/true);
  }
  prev_.push_back(kNone);
  next_.push_back(kNone);
  link_before(id, before);
  ++live_nodes_;
  return id;
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  outputs_ = std::move(outputs);
}

void Graph::add_use(ValueId v, Use use) {
  values_[v.v].uses.push_back(use);
}

void Graph::remove_use(ValueId v, Use use) {
  auto& uses = values_[v.v].uses;
  auto it = std::find(uses.begin(), uses.end(), use);
  if (it != uses.end()) uses.erase(it);
}

void Graph::for_each_value_in(const ArgValue& arg, NodeId node, uint32_t index, bool add) {
  if (const auto* v = std::get_if<ValueId>(&arg)) {
    Use u{node, index, -1};
    add ? add_use(*v, u) : remove_use(*v, u);
  } else if (const auto* list = std::get_if<std::vector<ValueId>>(&arg)) {
    for (size_t e = 0; e < list->size(); ++e) {
      if (!(*list)[e].valid()) continue;  // None in a Tensor?[]
      Use u{node, index, static_cast<int32_t>(e)};
      add ? add_use((*list)[e], u) : remove_use((*list)[e], u);
    }
  }
}

void Graph::replace_all_uses(ValueId from, ValueId to) {
  if (from == to) return;
  std::vector<Use> uses = std::move(values_[from.v].uses);
  values_[from.v].uses.clear();
  for (const Use& u : uses) {
    point_use_at(u, to);
    add_use(to, u);
  }
  for (ValueId& o : outputs_) {
    if (o == from) o = to;
  }
  for (StateBuffer& s : states_) {
    if (s.update == from) s.update = to == s.value ? ValueId() : to;
  }
}

void Graph::set_arg(NodeId node, uint32_t arg, ArgValue value) {
  for_each_value_in(nodes_[node.v].args[arg], node, arg, /*add=*/false);
  nodes_[node.v].args[arg] = std::move(value);
  for_each_value_in(nodes_[node.v].args[arg], node, arg, /*add=*/true);
}

bool Graph::erase_node(NodeId id) {
  Node& n = nodes_[id.v];
  for (ValueId o : n.outputs) {
    if (!values_[o.v].uses.empty() || is_live_out(o)) return false;
  }
  for (uint32_t i = 0; i < n.args.size(); ++i)
    for_each_value_in(n.args[i], id, i, /*add=*/false);
  for (ValueId o : n.outputs) {
    values_[o.v].erased = true;
    by_name_.erase(values_[o.v].name);
  }
  n.erased = true;
  if (auto it = node_names_.find(n.name); it != node_names_.end() && --it->second == 0)
    node_names_.erase(it);
  unlink(id);
  --live_nodes_;
  return true;
}

void Graph::link_before(NodeId node, std::optional<NodeId> before) {
  uint32_t n = node.v;
  uint32_t b = before ? before->v : kNone;
  uint32_t p = b == kNone ? tail_ : prev_[b];
  prev_[n] = p;
  next_[n] = b;
  (p == kNone ? head_ : next_[p]) = n;
  (b == kNone ? tail_ : prev_[b]) = n;
  order_valid_ = false;
}

void Graph::unlink(NodeId node) {
  uint32_t n = node.v;
  uint32_t p = prev_[n], x = next_[n];
  (p == kNone ? head_ : next_[p]) = x;
  (x == kNone ? tail_ : prev_[x]) = p;
  prev_[n] = next_[n] = kNone;
  order_valid_ = false;
}

std::span<const NodeId> Graph::order() const {
  if (!order_valid_) {
    order_cache_.clear();
    order_cache_.reserve(live_nodes_);
    for (uint32_t n = head_; n != kNone; n = next_[n])
      order_cache_.emplace_back(n);
    order_valid_ = true;
  }
  return order_cache_;
}

std::optional<NodeId> Graph::next_in_order(NodeId node) const {
  uint32_t x = next_[node.v];
  return x == kNone ? std::nullopt : std::optional<NodeId>(NodeId(x));
}

std::span<const ValueId> Graph::constants() const {
  if (constants_dirty_) {
    std::erase_if(constants_, [this](ValueId id) { return values_[id.v].erased; });
    constants_dirty_ = false;
  }
  return constants_;
}

bool Graph::set_order(const std::vector<NodeId>& order) {
  if (order.size() != live_nodes_) return false;
  std::vector<bool> seen(nodes_.size(), false);
  for (NodeId id : order) {
    if (!id.valid() || id.v >= nodes_.size() || nodes_[id.v].erased || seen[id.v]) return false;
    seen[id.v] = true;
  }
  head_ = tail_ = kNone;
  for (NodeId id : order)
    link_before(id, std::nullopt);
  return true;
}

void Graph::move_before(NodeId node, NodeId before) {
  if (node == before) return;
  unlink(node);
  link_before(node, before);
}

bool Graph::erase_constant(ValueId id) {
  Value& v = values_[id.v];
  if (v.kind != ValueKind::kConstant || !v.uses.empty() || is_live_out(id)) return false;
  v.erased = true;
  // Its bytes are no longer needed here (a folded weight's source): let a mapped weight file
  // drop them from memory. Only a hint: other constants sharing them still read them.
  if (v.spec.constant.blob)
    v.spec.constant.blob->release(v.spec.constant.offset, v.spec.constant.size);
  by_name_.erase(v.name);
  constants_dirty_ = true;
  return true;
}

void Graph::point_use_at(const Use& use, ValueId to) {
  ArgValue& arg = nodes_[use.node.v].args[use.arg];
  if (use.element < 0) {
    arg = to;
  } else {
    std::get<std::vector<ValueId>>(arg)[static_cast<size_t>(use.element)] = to;
  }
}

void Graph::replace_use(const Use& use, ValueId from, ValueId to) {
  point_use_at(use, to);
  remove_use(from, use);
  add_use(to, use);
}

namespace {

// `base`, or `base.1`, `base.2`, ... — the first name `taken` does not hold.
template <typename Map>
std::string first_free_name(const std::string& base, const Map& taken) {
  if (!taken.count(base)) return base;
  for (size_t i = 1;; ++i) {
    std::string candidate = base + "." + std::to_string(i);
    if (!taken.count(candidate)) return candidate;
  }
}

}  // namespace

std::string Graph::unique_node_name(const std::string& base) const {
  return first_free_name(base, node_names_);
}

bool Graph::rename_value(ValueId id, std::string name) {
  if (by_name_.count(name)) return false;
  Value& v = values_[id.v];
  if (!v.name.empty()) by_name_.erase(v.name);
  v.name = std::move(name);
  if (!v.name.empty()) by_name_.emplace(v.name, id);
  return true;
}

std::string Graph::unique_value_name(const std::string& base) const {
  return first_free_name(base, by_name_);
}

std::optional<ValueId> Graph::find_value(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

bool Graph::is_graph_output(ValueId id) const {
  return std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end();
}

}  // namespace etc
