#include "passes/propagate_devices.h"

#include <map>
#include <set>

#include "passes/plan_memory.h"

namespace etc {
namespace {

bool is_device_delegate(const Node& n) {
  return n.op == OpKind::DelegateCall && n.delegate != nullptr && !n.delegate->device.is_cpu();
}

class Propagator {
 public:
  Propagator(Graph& g, PassContext& ctx) : g_(g), ctx_(ctx) {}

  bool run() {
    std::vector<NodeId> delegates;
    for (NodeId id : g_.order()) {
      if (is_device_delegate(g_.node(id))) delegates.push_back(id);
    }
    if (delegates.empty()) return false;
    if (ctx_.options.io_device == IoDevice::kDevice) place_inputs_on_device();
    place_states_on_device();
    for (NodeId id : delegates) {
      // Adding copies grows the graph's tables: hold ids and copies, never references.
      const Device d = g_.node(id).delegate->device;
      const std::string name = g_.node(id).name;
      for (ValueId o : g_.node(id).outputs) {
        g_.value(o).spec.device = d;
        boundary(o, d, "output of delegate '" + name + "'");
      }
      const std::vector<ValueId> ins = std::get<std::vector<ValueId>>(g_.node(id).args[0]);
      for (size_t i = 0; i < ins.size(); ++i) {
        ValueId v = ins[i];
        Device have = g_.value(v).spec.device;
        if (have == d) continue;
        ValueId host =
            have.is_cpu()
                ? v
                : host_copy(v, "delegate '" + name + "' on " + to_string(d) + " reads it");
        ValueId dev = device_copy(host, d, id, name);
        std::vector<ValueId> updated = std::get<std::vector<ValueId>>(g_.node(id).args[0]);
        updated[i] = dev;
        g_.set_arg(id, 0, std::move(updated));
      }
    }
    // Host users and graph outputs of delegate outputs read a host copy.
    for (NodeId id : delegates) {
      for (ValueId o : g_.node(id).outputs)
        route_host_uses(o);
    }
    return true;
  }

 private:
  void boundary(ValueId v, Device d, std::string reason) {
    ctx_.report.boundary.push_back(
        ExportReport::BoundaryTensor{g_.value(v).name, d, std::move(reason)});
  }

  void place_inputs_on_device() {
    for (ValueId in : g_.inputs()) {
      const Value& v = g_.value(in);
      if (v.uses.empty() || g_.is_graph_output(in)) continue;
      std::set<Device> devices;
      bool only_delegates = true;
      for (const Use& u : v.uses) {
        const Node& user = g_.node(u.node);
        if (!is_device_delegate(user)) {
          only_delegates = false;
          break;
        }
        devices.insert(user.delegate->device);
      }
      if (!only_delegates || devices.size() != 1) continue;
      g_.value(in).spec.device = *devices.begin();
      boundary(in, *devices.begin(),
               "graph input read only by delegates on " + to_string(*devices.begin()) +
                   " (--io-device device): bound in device memory by the caller");
    }
  }

  // State that a device delegate reads and updates in place lives on that device: no copy
  // either way, ever (see device_state_writer).
  void place_states_on_device() {
    for (const StateBuffer& s : g_.states()) {
      std::optional<NodeId> writer = device_state_writer(g_, s);
      if (!writer) continue;
      const Node& call = g_.node(*writer);
      const Device d = call.delegate->device;
      g_.value(s.value).spec.device = d;
      boundary(s.value, d,
               "state updated in place by delegate '" + call.name + "': lives on " + to_string(d) +
                   ", initialised at load");
    }
  }

  // The device copy of host value `v` on `d`, created before node `before` on first use.
  ValueId device_copy(ValueId v, Device d, NodeId before, const std::string& reader) {
    auto key = std::make_pair(v.v, d);
    if (auto it = h2d_.find(key); it != h2d_.end()) {
      mark_shared(it->second);
      return it->second;
    }
    TensorSpec spec = TensorSpec::make(g_.value(v).spec.dtype, g_.value(v).spec.sizes);
    spec.dynamism = g_.value(v).spec.dynamism;
    spec.device = d;
    std::string name = g_.unique_value_name(g_.value(v).name + "@" + to_string(d));
    NodeId copy = g_.add_node(OpKind::H2DCopy, g_.unique_node_name("h2d." + name), {v}, {name},
                              {spec}, before);
    ValueId out = g_.node(copy).outputs[0];
    h2d_[key] = out;
    ctx_.report.copies.push_back(
        ExportReport::Copy{"h2d", g_.value(v).name, name, Device{}, d, spec.nbytes(),
                           "delegate '" + reader + "' on " + to_string(d) + " reads host tensor"});
    copy_index_[out.v] = ctx_.report.copies.size() - 1;
    return out;
  }

  void mark_shared(ValueId copy) {
    ExportReport::Copy& c = ctx_.report.copies[copy_index_[copy.v]];
    if (c.cause.find("(shared") == std::string::npos)
      c.cause += " (shared with later delegates on the same device)";
  }

  // The host copy of device value `v`, created right after its producer on first use.
  ValueId host_copy(ValueId v, const std::string& cause) {
    if (auto it = d2h_.find(v.v); it != d2h_.end()) return it->second;
    const Value& src = g_.value(v);
    TensorSpec spec = TensorSpec::make(src.spec.dtype, src.spec.sizes);
    spec.dynamism = src.spec.dynamism;
    std::string name = g_.unique_value_name(src.name + "@cpu");
    // Insert right after the producer.
    std::optional<NodeId> after_producer = g_.next_in_order(src.producer);
    Device from = src.spec.device;
    std::string src_name = src.name;
    int64_t bytes = spec.nbytes();
    NodeId copy = g_.add_node(OpKind::D2HCopy, g_.unique_node_name("d2h." + name), {v}, {name},
                              {spec}, after_producer);
    ValueId out = g_.node(copy).outputs[0];
    d2h_[v.v] = out;
    ctx_.report.copies.push_back(
        ExportReport::Copy{"d2h", src_name, name, from, Device{}, bytes, cause});
    return out;
  }

  void route_host_uses(ValueId o) {
    const Value& v = g_.value(o);
    std::vector<Use> host_uses;
    std::string reader;
    for (const Use& u : v.uses) {
      const Node& user = g_.node(u.node);
      if (user.op == OpKind::DelegateCall || user.op == OpKind::D2HCopy) continue;  // handled above
      host_uses.push_back(u);
      if (reader.empty())
        reader = "host op '" + user.name + "' (" + op_info(user.op).name + ") reads it";
    }
    bool to_host_output = g_.is_graph_output(o) && ctx_.options.io_device == IoDevice::kHost;
    // Host state updated by a delegate is written back from a host copy; device state is
    // updated in place.
    bool to_host_state = false;
    for (const StateBuffer& s : g_.states())
      to_host_state = to_host_state || (s.update == o && g_.value(s.value).spec.device.is_cpu());
    if (host_uses.empty() && !to_host_output && !to_host_state) {
      if (g_.is_graph_output(o)) {
        boundary(o, v.spec.device,
                 "graph output left on " + to_string(v.spec.device) + " (--io-device device)");
      }
      return;
    }
    ValueId host = host_copy(o, !reader.empty() ? reader
                                : to_host_state ? "the update of a state buffer"
                                                : "graph output");
    for (const Use& u : host_uses)
      g_.replace_use(u, o, host);
    if (to_host_state) {
      std::vector<ValueId> states;
      for (const StateBuffer& s : g_.states())
        if (s.update == o) states.push_back(s.value);
      for (ValueId s : states)
        g_.set_state_update(s, host);
    }
    if (to_host_output) {
      std::vector<ValueId> outs(g_.outputs().begin(), g_.outputs().end());
      for (ValueId& out : outs) {
        if (out == o) out = host;
      }
      g_.set_outputs(std::move(outs));
      keep_output_name(o, host);
    }
  }

  // A graph output read back to the host keeps its name (what `etc run` and users see); the
  // device tensor becomes "<name>@<device>".
  void keep_output_name(ValueId device_value, ValueId host_value) {
    const std::string name = g_.value(device_value).name;
    const std::string old_host = g_.value(host_value).name;
    const std::string device_name =
        g_.unique_value_name(name + "@" + to_string(g_.value(device_value).spec.device));
    if (!g_.rename_value(device_value, device_name) || !g_.rename_value(host_value, name)) return;
    for (ExportReport::BoundaryTensor& b : ctx_.report.boundary) {
      if (b.value == name) b.value = device_name;
    }
    for (ExportReport::Copy& c : ctx_.report.copies) {
      if (c.source == name) c.source = device_name;
      if (c.copy == old_host) c.copy = name;
    }
  }

  Graph& g_;
  PassContext& ctx_;
  std::map<std::pair<uint32_t, Device>, ValueId> h2d_;  // (host value, device) -> copy
  std::map<uint32_t, ValueId> d2h_;                     // device value -> host copy
  std::map<uint32_t, size_t> copy_index_;               // copy value -> report entry
};

}  // namespace

Result<bool> propagate_devices(Graph& graph, PassContext& context) {
  return Propagator(graph, context).run();
}

}  // namespace etc
