#include "passes/plan_memory.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "passes/memory_planner.h"

namespace etc {
namespace {

int64_t align_up(int64_t n, uint64_t alignment) {
  int64_t a = static_cast<int64_t>(alignment);
  return (n + a - 1) / a * a;
}

// Device-resident graph IO is bound by the caller, never planned.
bool is_planned(const Graph& g, const Value& v) {
  if (v.erased || v.kind == ValueKind::kConstant) return false;
  if (v.kind == ValueKind::kState) return true;
  if (v.kind == ValueKind::kInput) return v.spec.device.is_cpu();
  return !(g.is_graph_output(v.id) && !v.spec.device.is_cpu());
}

// A view whose output can share its input's storage: same bytes in the same order.
bool is_storage_view(OpKind op) {
  switch (op) {
    case OpKind::View:
    case OpKind::Unsqueeze:
    case OpKind::SqueezeDim:
    case OpKind::SqueezeDims:
      return true;
    default:
      return false;
  }
}

// Marks the views whose output can live in its input's storage (both planned on the CPU,
// contiguous) and returns, for each value id, the value whose storage it uses (itself for
// most). ExecuTorch plans static views the same way (memory.view: no kernel call, the view's
// tensor at its base's offset).
std::vector<ValueId> alias_views(Graph& graph) {
  std::vector<ValueId> root(graph.value_slots());
  for (size_t i = 0; i < root.size(); ++i)
    root[i] = ValueId(static_cast<uint32_t>(i));
  for (NodeId nid : graph.order()) {
    Node& n = graph.node(nid);
    n.storage_alias = false;
    if (!is_storage_view(n.op) || n.outputs.size() != 1 || n.args.empty()) continue;
    const auto* in = std::get_if<ValueId>(&n.args[0]);
    if (in == nullptr) continue;
    const Value& x = graph.value(*in);
    const Value& y = graph.value(n.outputs[0]);
    const bool contiguous = x.spec.dim_order == contiguous_dim_order(x.spec.rank()) &&
                            y.spec.dim_order == contiguous_dim_order(y.spec.rank());
    // A dynamic-bound view is a kernel call: its sizes are computed at run time.
    const bool dynamic =
        x.spec.dynamism != ShapeDynamism::kStatic || y.spec.dynamism != ShapeDynamism::kStatic;
    if (dynamic || !is_planned(graph, x) || !is_planned(graph, y) || !x.spec.device.is_cpu() ||
        !y.spec.device.is_cpu() || !contiguous || x.spec.dtype != y.spec.dtype ||
        x.spec.nbytes() != y.spec.nbytes()) {
      continue;
    }
    n.storage_alias = true;
    root[y.id.v] = root[x.id.v];
  }
  return root;
}

// A state whose update an index_put computes from the state itself, when nothing reads the
// state (or a view of it) after that index_put: the index_put writes the state's storage in
// place, so the update needs no copy at the end (ExecuTorch's reinplace pass does this for the
// KV cache). Merges the update's storage group into the state's.
void reinplace_state_updates(Graph& graph, std::vector<ValueId>& root) {
  std::unordered_map<uint32_t, int32_t> position;
  int32_t pos = 0;
  for (NodeId id : graph.order()) {
    graph.node(id).in_place = false;
    position[id.v] = ++pos;
  }
  for (const StateBuffer& s : graph.states()) {
    if (!s.update.valid()) continue;
    const Value& u = graph.value(s.update);
    if (u.kind != ValueKind::kNodeOutput || root[u.id.v] != u.id) continue;
    Node& writer = graph.node(u.producer);
    const bool device_writer = device_state_writer(graph, s).has_value();
    if (!device_writer &&
        (!fits_index_put_inplace(graph, writer) || std::get<ValueId>(writer.args[0]) != s.value))
      continue;
    const int32_t at = position[writer.id.v];
    const ValueId group = root[s.value.v];
    bool read_later = false;
    for (size_t i = 0; i < root.size() && !read_later; ++i) {
      if (root[i] != group) continue;
      const ValueId x(static_cast<uint32_t>(i));
      read_later = graph.is_graph_output(x);
      for (const Use& use : graph.value(x).uses)
        read_later = read_later || position[use.node.v] > at;
    }
    if (read_later) continue;
    for (ValueId& r : root) {
      if (r == u.id) r = group;
    }
    // A delegate writes the state through its own index_put, which is given the state's
    // storage as both self and out.
    if (!device_writer) writer.in_place = true;
  }
}

// The elementwise ops planned in place: activations and arithmetic, the ops rt::Method can
// run as a convolution's or a matrix product's epilogue (GELU: a transformer's MLP, run on
// each tile of the product's out as the GEMM finishes it).
bool reinplaceable(const Node& n) {
  switch (n.op) {
    case OpKind::Gelu:
    case OpKind::Relu:
    case OpKind::Clamp:
    case OpKind::Hardtanh:
    case OpKind::AddTensor:
    case OpKind::SubTensor:
    case OpKind::MulTensor:
    case OpKind::DivTensor:
    case OpKind::AddScalar:
    case OpKind::SubScalar:
    case OpKind::MulScalar:
    case OpKind::DivScalar:
      return true;
    default:
      return false;
  }
}

// An activation or elementwise arithmetic op whose input dies there writes its out over that
// input: relu(x) -> out in x's storage, add(x, skip) -> out in the storage of whichever
// operand was computed last (and dies there). Elementwise
// kernels read each element before writing the same element, so the aliasing is exact for
// etc's kernels and for ExecuTorch's portable ones; it saves the out's bytes, and lets the
// runtime apply the op as the producing kernel's epilogue (the op then finds its input
// already transformed in place). Needs both values planned on the CPU, static, contiguous,
// of one dtype and size; the input's storage group must hold no graph input, state or graph
// output and have no use after this node.
void reinplace_elementwise(Graph& graph, std::vector<ValueId>& root) {
  std::unordered_map<uint32_t, int32_t> position;
  int32_t pos = 0;
  for (NodeId id : graph.order())
    position[id.v] = ++pos;
  // Per storage group: its last use, whether it may be overwritten.
  std::unordered_map<uint32_t, int32_t> last_use;
  std::unordered_map<uint32_t, bool> pinned;
  for (size_t i = 0; i < root.size(); ++i) {
    const ValueId id(static_cast<uint32_t>(i));
    const Value& v = graph.value(id);
    if (v.erased) continue;
    const uint32_t r = root[i].v;
    if (v.kind != ValueKind::kNodeOutput || graph.is_live_out(id)) pinned[r] = true;
    for (const Use& use : v.uses)
      last_use[r] = std::max(last_use[r], position[use.node.v]);
  }
  auto simple = [&graph](const Value& v) {
    return is_planned(graph, v) && v.spec.device.is_cpu() &&
           v.spec.dynamism == ShapeDynamism::kStatic &&
           v.spec.dim_order == contiguous_dim_order(v.spec.rank());
  };
  for (NodeId nid : graph.order()) {
    const Node& n = graph.node(nid);
    if (!reinplaceable(n) || n.outputs.size() != 1) continue;
    const Value& y = graph.value(n.outputs[0]);
    if (!simple(y) || root[y.id.v] != y.id || pinned[y.id.v]) continue;
    const std::vector<ValueId> ins = tensor_args(n);
    // The operand produced last first: the one the kernel right before wrote, whose
    // epilogue the runtime can then make this op (a residual add after a convolution).
    std::vector<ValueId> order = ins;
    auto produced_at = [&](ValueId v) {
      const Value& x = graph.value(v);
      return x.kind == ValueKind::kNodeOutput ? position[x.producer.v] : 0;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](ValueId a, ValueId b) { return produced_at(a) > produced_at(b); });
    for (ValueId in : order) {
      const Value& x = graph.value(in);
      const uint32_t group = root[in.v].v;
      if (!simple(x) || x.spec.dtype != y.spec.dtype || x.spec.sizes != y.spec.sizes ||
          pinned[group] || last_use[group] != position[nid.v])
        continue;
      // The other operand must not share the storage (add(x, x) reads it twice).
      const bool shared = std::count_if(ins.begin(), ins.end(),
                                        [&](ValueId o) { return root[o.v].v == group; }) > 1;
      if (shared) continue;
      for (ValueId& r : root) {
        if (r == y.id) r = ValueId(group);
      }
      last_use[group] = std::max(last_use[group], last_use[y.id.v]);
      pinned[group] = pinned[y.id.v];
      break;
    }
  }
}

}  // namespace

bool fits_index_put_inplace(const Graph& g, const Node& n) {
  if (n.op != OpKind::IndexPut || std::get<bool>(n.args[3])) return false;
  const TensorSpec& self = g.value(std::get<ValueId>(n.args[0])).spec;
  const TensorSpec& values = g.value(std::get<ValueId>(n.args[2])).spec;
  const auto& indices = std::get<std::vector<ValueId>>(n.args[1]);
  int dim = -1;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d].valid()) continue;
    if (dim >= 0) return false;
    dim = static_cast<int>(d);
  }
  if (dim < 0) return false;
  const TensorSpec& index = g.value(indices[static_cast<size_t>(dim)]).spec;
  if (index.rank() != 1 || values.rank() != self.rank()) return false;
  for (size_t d = 0; d < self.rank(); ++d) {
    const int64_t want = static_cast<int>(d) == dim ? index.sizes[0] : self.sizes[d];
    if (values.sizes[d] != want) return false;
  }
  return true;
}

std::optional<NodeId> device_state_writer(const Graph& g, const StateBuffer& s) {
  if (!s.update.valid() || g.is_graph_output(s.value)) return std::nullopt;
  const Value& state = g.value(s.value);
  const Value& update = g.value(s.update);
  if (update.kind != ValueKind::kNodeOutput || state.uses.size() != 1) return std::nullopt;
  const Node& call = g.node(update.producer);
  if (call.op != OpKind::DelegateCall || call.delegate == nullptr ||
      call.delegate->device.is_cpu() || state.uses[0].node != call.id)
    return std::nullopt;
  const auto& ins = std::get<std::vector<ValueId>>(call.args[0]);
  const auto in = std::find(ins.begin(), ins.end(), s.value);
  const auto out = std::find(call.outputs.begin(), call.outputs.end(), s.update);
  if (in == ins.end() || out == call.outputs.end()) return std::nullopt;
  const Graph& sub = *call.delegate->graph;
  const ValueId sub_state = sub.inputs()[static_cast<size_t>(in - ins.begin())];
  const ValueId sub_update = sub.outputs()[static_cast<size_t>(out - call.outputs.begin())];
  const Value& su = sub.value(sub_update);
  if (su.kind != ValueKind::kNodeOutput || sub.value(sub_state).uses.size() != 1 ||
      std::count(sub.outputs().begin(), sub.outputs().end(), sub_update) != 1)
    return std::nullopt;
  const Node& writer = sub.node(su.producer);
  const auto* self = std::get_if<ValueId>(&writer.args[0]);
  if (self == nullptr || *self != sub_state) return std::nullopt;
  // A KV-cache write, or elementwise arithmetic of the state's own type (a step counter):
  // kernels that read each element before writing it.
  const bool elementwise = reinplaceable(writer) && su.spec.dtype == state.spec.dtype &&
                           su.spec.sizes == state.spec.sizes;
  if (!elementwise && !fits_index_put_inplace(sub, writer)) return std::nullopt;
  return call.id;
}

Result<bool> plan_memory(Graph& graph, PassContext& context) {
  const MemoryPlanOptions& opts = context.options.memory;
  if (opts.alignment == 0 || (opts.alignment & (opts.alignment - 1)) != 0) {
    return Status(ErrorCode::kUsage,
                  "memory alignment must be a power of two, got " + std::to_string(opts.alignment));
  }
  // Lifetimes as ExecuTorch computes them: inputs are live from position 0 to their last
  // use, node k defines its outputs at k + 1, and graph outputs stay live to the end. An
  // input's bytes may therefore be reused once it is read for the last time, so a caller sets
  // every planned input again before each execution (rt::Method enforces this for the inputs
  // whose memory the plan shares).
  const auto end = static_cast<int32_t>(graph.order().size() + 1);
  for (size_t i = 0; i < graph.value_slots(); ++i) {
    Value& v = graph.value(ValueId(static_cast<uint32_t>(i)));
    v.spec.lifetime = Lifetime{};
    v.spec.mem_id.reset();
    v.spec.mem_offset.reset();
    if (v.kind == ValueKind::kInput) v.spec.lifetime = Lifetime{0, 0};
    // State persists across executions: its bytes are never shared.
    if (v.kind == ValueKind::kState) v.spec.lifetime = Lifetime{0, end};
  }
  auto touch = [&graph](ValueId id, int32_t pos) {
    Lifetime& l = graph.value(id).spec.lifetime;
    if (l.first < 0) l.first = pos;
    l.last = std::max(l.last, pos);
  };
  int32_t pos = 0;
  for (NodeId nid : graph.order()) {
    ++pos;
    const Node& n = graph.node(nid);
    for (ValueId v : tensor_args(n))
      touch(v, pos);
    for (ValueId o : n.outputs)
      touch(o, pos);
  }
  for (ValueId o : graph.outputs())
    touch(o, end);
  for (const StateBuffer& s : graph.states()) {
    if (s.update.valid()) touch(s.update, end);  // written back after the last node
  }

  // A view sharing its input's storage: the group is planned once, live from its first
  // member's definition to its last member's last use.
  std::vector<ValueId> root = alias_views(graph);
  reinplace_state_updates(graph, root);
  reinplace_elementwise(graph, root);
  for (size_t i = 0; i < root.size(); ++i) {
    if (root[i].v == i) continue;
    const Lifetime l = graph.value(ValueId(static_cast<uint32_t>(i))).spec.lifetime;
    Lifetime& r = graph.value(root[i]).spec.lifetime;
    r.first = std::min(r.first, l.first);
    r.last = std::max(r.last, l.last);
  }
  for (size_t i = 0; i < root.size(); ++i) {
    if (root[i].v != i) {
      graph.value(ValueId(static_cast<uint32_t>(i))).spec.lifetime =
          graph.value(root[i]).spec.lifetime;
    }
  }

  // Buckets by device, CPU first then (type, index): std::map orders Device that way.
  std::map<Device, std::vector<ValueId>> buckets;
  for (size_t i = 0; i < graph.value_slots(); ++i) {
    const Value& v = graph.value(ValueId(static_cast<uint32_t>(i)));
    if (is_planned(graph, v) && root[i].v == i) buckets[v.spec.device].push_back(v.id);
  }
  graph.planned_buffers.clear();
  context.report.memory.clear();
  for (auto& [device, values] : buckets) {
    std::vector<PlanTensor> tensors;
    for (ValueId id : values) {
      const TensorSpec& s = graph.value(id).spec;
      tensors.push_back(
          PlanTensor{align_up(s.nbytes(), opts.alignment), s.lifetime.first, s.lifetime.last});
    }
    BufferPlan ours, baseline;
    if (opts.algorithm != PlanAlgorithm::kSharedObjects) ours = plan_greedy_by_size(tensors);
    if (opts.algorithm != PlanAlgorithm::kGreedyBySize) baseline = plan_shared_objects(tensors);
    const char* kept_name = "greedy_by_size";
    BufferPlan* kept = &ours;
    if (opts.algorithm == PlanAlgorithm::kSharedObjects ||
        (opts.algorithm == PlanAlgorithm::kBest && baseline.size < ours.size)) {
      kept = &baseline;
      kept_name = "shared_objects";
    }
    Status ok = verify_plan(tensors, *kept);
    if (!ok.ok()) return std::move(ok).add_context("while planning memory on " + to_string(device));
    auto mem_id = static_cast<uint32_t>(graph.planned_buffers.size() + 1);
    graph.planned_buffers.push_back(PlannedBuffer{device, static_cast<uint64_t>(kept->size)});
    for (size_t i = 0; i < values.size(); ++i) {
      TensorSpec& s = graph.value(values[i]).spec;
      s.mem_id = mem_id;
      s.mem_offset = static_cast<uint64_t>(kept->offsets[i]);
    }
    ExportReport::Buffer b;
    b.mem_id = mem_id;
    b.device = device;
    b.tensors = values.size();
    b.planned_bytes = kept->size;
    b.lower_bound_bytes = plan_lower_bound(tensors);
    b.baseline_bytes = opts.algorithm == PlanAlgorithm::kGreedyBySize ? 0 : baseline.size;
    b.algorithm = kept_name;
    context.report.memory.push_back(b);
  }
  for (size_t i = 0; i < root.size(); ++i) {
    if (root[i].v == i) continue;
    TensorSpec& s = graph.value(ValueId(static_cast<uint32_t>(i))).spec;
    const TensorSpec& r = graph.value(root[i]).spec;
    s.mem_id = r.mem_id;
    s.mem_offset = r.mem_offset;
  }
  // ExecuTorch always has at least one (CPU) buffer entry.
  if (graph.planned_buffers.empty()) graph.planned_buffers.push_back(PlannedBuffer{Device{}, 0});
  return true;
}

}  // namespace etc
