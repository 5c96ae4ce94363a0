#include "partition/lower.h"

#include <unordered_map>
#include <unordered_set>

#include "backends/cuda/cuda_capability.h"

namespace etc {
namespace {

// A value's type on the other side of a delegate boundary: dtype, sizes (the upper bound of
// a dynamic-bound tensor) and dynamism; memory planning and devices are set later.
TensorSpec boundary_spec(const TensorSpec& s) {
  TensorSpec t = TensorSpec::make(s.dtype, s.sizes);
  t.dynamism = s.dynamism;
  return t;
}

class Lowerer {
 public:
  Lowerer(Graph& g, Device target, ExportReport& report)
      : g_(g), target_(target), report_(report) {}

  void lower(const std::vector<NodeId>& nodes, size_t index) {
    std::unordered_set<uint32_t> inside;
    for (NodeId id : nodes)
      inside.insert(id.v);
    // Inputs (non-constant values defined outside) and constants, in order of first use.
    std::vector<ValueId> inputs, constants;
    std::unordered_set<uint32_t> seen;
    auto note = [&](ValueId v) {
      const Value& val = g_.value(v);
      if (val.kind == ValueKind::kNodeOutput && inside.count(val.producer.v)) return;
      if (!seen.insert(v.v).second) return;
      (val.kind == ValueKind::kConstant ? constants : inputs).push_back(v);
    };
    for (NodeId id : nodes) {
      for (ValueId v : tensor_args(g_.node(id)))
        note(v);
    }
    // Outputs: defined inside, used outside or returned.
    std::vector<ValueId> outputs;
    for (NodeId id : nodes) {
      for (ValueId o : g_.node(id).outputs) {
        bool escapes = g_.is_live_out(o);
        for (const Use& u : g_.value(o).uses)
          escapes = escapes || !inside.count(u.node.v);
        if (escapes) outputs.push_back(o);
      }
    }

    if (outputs.empty()) {
      // Nothing outside reads what this partition computes: it is dead code.
      for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
        g_.erase_node(*it);
      return;
    }
    auto delegate = std::make_unique<Delegate>();
    delegate->backend_id = kCudaBackendId;
    delegate->device = target_;
    delegate->compile_specs.push_back(CompileSpec{kTargetDeviceSpec, to_string(target_)});
    std::string name = g_.unique_node_name("delegate_" + std::to_string(index));
    delegate->graph = build_subgraph(name, nodes, inputs, constants, outputs);

    ExportReport::Partition part;
    part.delegate = name;
    part.device = target_;
    for (NodeId id : nodes)
      part.nodes.push_back(g_.node(id).name);
    for (ValueId v : inputs)
      part.inputs.push_back(g_.value(v).name);
    for (ValueId v : outputs)
      part.outputs.push_back(g_.value(v).name);
    report_.partitions.push_back(std::move(part));
    report_.delegated_ops += nodes.size();

    std::vector<std::string> out_names;
    std::vector<TensorSpec> out_specs;
    for (ValueId o : outputs) {
      out_names.push_back(g_.unique_value_name(g_.value(o).name + ".delegated"));
      out_specs.push_back(boundary_spec(g_.value(o).spec));
    }
    NodeId call =
        g_.add_node(OpKind::DelegateCall, name, {inputs}, out_names, out_specs, nodes.front());
    g_.node(call).delegate = std::move(delegate);
    std::vector<std::string> old_names;
    for (size_t i = 0; i < outputs.size(); ++i) {
      old_names.push_back(g_.value(outputs[i]).name);
      g_.replace_all_uses(outputs[i], g_.node(call).outputs[i]);
    }
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
      g_.erase_node(*it);
    for (size_t i = 0; i < outputs.size(); ++i)
      g_.rename_value(g_.node(call).outputs[i], old_names[i]);
  }

 private:
  std::unique_ptr<Graph> build_subgraph(const std::string& name, const std::vector<NodeId>& nodes,
                                        const std::vector<ValueId>& inputs,
                                        const std::vector<ValueId>& constants,
                                        const std::vector<ValueId>& outputs) {
    auto sub = std::make_unique<Graph>();
    sub->name = name;
    std::unordered_map<uint32_t, ValueId> map;
    for (ValueId v : inputs) {
      map[v.v] = sub->add_input(g_.value(v).name, boundary_spec(g_.value(v).spec));
    }
    for (ValueId v : constants) {
      TensorSpec spec = TensorSpec::make(g_.value(v).spec.dtype, g_.value(v).spec.sizes);
      spec.constant = g_.value(v).spec.constant;  // shares the bytes
      map[v.v] = sub->add_constant(g_.value(v).name, std::move(spec));
      sub->value(map[v.v]).origin = g_.value(v).origin;
    }
    auto remap = [&](const ArgValue& a) -> ArgValue {
      if (const auto* v = std::get_if<ValueId>(&a)) return map.at(v->v);
      if (const auto* l = std::get_if<std::vector<ValueId>>(&a)) {
        std::vector<ValueId> out;
        for (ValueId v : *l)
          out.push_back(v.valid() ? map.at(v.v) : v);  // an invalid id is None in a Tensor?[]
        return out;
      }
      return a;
    };
    for (NodeId id : nodes) {
      const Node& n = g_.node(id);
      std::vector<ArgValue> args;
      for (const ArgValue& a : n.args)
        args.push_back(remap(a));
      std::vector<std::string> names;
      std::vector<TensorSpec> specs;
      for (ValueId o : n.outputs) {
        names.push_back(g_.value(o).name);
        specs.push_back(boundary_spec(g_.value(o).spec));
      }
      NodeId copy =
          sub->add_node(n.op, n.name, std::move(args), std::move(names), std::move(specs));
      sub->node(copy).origin = n.origin;
      for (size_t i = 0; i < n.outputs.size(); ++i)
        map[n.outputs[i].v] = sub->node(copy).outputs[i];
    }
    std::vector<ValueId> sub_outputs;
    sub_outputs.reserve(outputs.size());
    for (ValueId o : outputs)
      sub_outputs.push_back(map.at(o.v));
    sub->set_outputs(std::move(sub_outputs));
    return sub;
  }

  Graph& g_;
  Device target_;
  ExportReport& report_;
};

}  // namespace

Status lower_partitions(Graph& graph, const PartitionPlan& plan, Device target,
                        ExportReport& report) {
  if (!graph.set_order(plan.schedule))
    return internal_error("partition plan's schedule is not a permutation of the graph");
  Lowerer lowerer(graph, target, report);
  for (size_t i = 0; i < plan.partitions.size(); ++i)
    lowerer.lower(plan.partitions[i], i);
  return Status();
}

Result<bool> partition_pass(Graph& graph, PassContext& context) {
  ExportReport& report = context.report;
  report.partitions.clear();
  report.host_ops.clear();
  report.delegated_ops = 0;
  report.total_ops = graph.order().size();
  if (context.options.target.is_cpu()) {
    for (NodeId id : graph.order()) {
      report.host_ops.push_back(
          {graph.node(id).name, op_info(graph.node(id).op).name, "--target cpu"});
    }
    return false;
  }
  PartitionPlan plan = plan_partitions(graph, context.options.partition);
  for (const auto& [id, why] : plan.host_nodes) {
    report.host_ops.push_back({graph.node(id).name, op_info(graph.node(id).op).name, why});
  }
  if (plan.partitions.empty()) return false;
  ETC_RETURN_IF_ERROR(lower_partitions(graph, plan, context.options.target, report));
  return true;
}

}  // namespace etc
