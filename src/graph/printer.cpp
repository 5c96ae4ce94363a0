#include "graph/printer.h"

#include <cctype>

namespace etc {
namespace {

// Names print bare when they are simple, JSON-quoted otherwise.
std::string name_text(const std::string& name) {
  bool simple = !name.empty();
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' &&
        c != ':' && c != '@')
      simple = false;
  }
  if (simple) return name;
  std::string out = "\"";
  for (char c : name) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string value_ref(const Graph& g, ValueId id) {
  std::string s = "%" + std::to_string(id.v);
  if (id.valid() && id.v < g.value_slots() && !g.value(id).name.empty())
    s += ":" + name_text(g.value(id).name);
  return s;
}

std::string arg_text(const Graph& g, const ArgValue& a) {
  if (const auto* v = std::get_if<ValueId>(&a)) return value_ref(g, *v);
  if (const auto* l = std::get_if<std::vector<ValueId>>(&a)) {
    std::string s = "[";
    for (size_t i = 0; i < l->size(); ++i)
      s += (i ? ", " : "") + ((*l)[i].valid() ? value_ref(g, (*l)[i]) : std::string("None"));
    return s + "]";
  }
  return arg_value_to_string(a);
}

void print_into(const Graph& g, const std::string& indent, std::string& out) {
  out += indent + "graph " + name_text(g.name.empty() ? std::string("main") : g.name) + " {\n";
  for (ValueId id : g.inputs())
    out += indent + "  input " + value_ref(g, id) + ": " + print_spec(g.value(id).spec) + "\n";
  for (ValueId id : g.constants()) {
    const TensorSpec& s = g.value(id).spec;
    out += indent + "  const " + value_ref(g, id) + ": " + print_spec(s) + " (" +
           std::to_string(s.constant.size) + " bytes)\n";
  }
  for (NodeId nid : g.order()) {
    const Node& n = g.node(nid);
    const OpInfo& op = op_info(n.op);
    out += indent + "  #" + std::to_string(nid.v) + " " + name_text(n.name) + " = " + op.name + "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i > 0) out += ", ";
      out +=
          (i < op.schema.args.size() ? op.schema.args[i].name : "?") + "=" + arg_text(g, n.args[i]);
    }
    out += ")";
    if (n.storage_alias) out += " alias";
    if (n.delegate != nullptr) {
      out += " backend=" + n.delegate->backend_id + " device=" + to_string(n.delegate->device) +
             " specs={";
      for (size_t i = 0; i < n.delegate->compile_specs.size(); ++i) {
        out += (i ? ", " : "") + n.delegate->compile_specs[i].key + "=" +
               n.delegate->compile_specs[i].value;
      }
      out += "}";
    }
    out += "\n";
    for (ValueId o : n.outputs)
      out += indent + "      -> " + value_ref(g, o) + ": " + print_spec(g.value(o).spec) + "\n";
    if (n.delegate != nullptr && n.delegate->graph != nullptr)
      print_into(*n.delegate->graph, indent + "    ", out);
  }
  out += indent + "  outputs:";
  for (ValueId id : g.outputs())
    out += " " + value_ref(g, id);
  out += "\n";
  for (size_t i = 0; i < g.planned_buffers.size(); ++i) {
    out += indent + "  buffer " + std::to_string(i + 1) + ": " +
           to_string(g.planned_buffers[i].device) + " " +
           std::to_string(g.planned_buffers[i].size) + " bytes\n";
  }
  out += indent + "}\n";
}

}  // namespace

std::string print_spec(const TensorSpec& s) {
  std::string out = s.type_string() + " " + to_string(s.device);
  if (s.dim_order != contiguous_dim_order(s.rank())) {
    out += " dim_order=[";
    for (size_t i = 0; i < s.dim_order.size(); ++i)
      out += (i ? ", " : "") + std::to_string(s.dim_order[i]);
    out += "]";
  }
  if (s.mem_id)
    out += " mem=" + std::to_string(*s.mem_id) + "+" + std::to_string(s.mem_offset.value_or(0));
  if (s.lifetime.valid()) {
    out +=
        " life=[" + std::to_string(s.lifetime.first) + ", " + std::to_string(s.lifetime.last) + "]";
  }
  return out;
}

std::string print_graph(const Graph& graph) {
  std::string out;
  print_into(graph, "", out);
  return out;
}

}  // namespace etc
