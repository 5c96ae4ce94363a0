#include "graph/summary.h"

#include <map>

namespace etc {
namespace {

// 1234567 -> "1,234,567"
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string value_list(const Graph& g, std::span<const ValueId> ids) {
  std::string s;
  for (ValueId id : ids) {
    if (!s.empty()) s += ", ";
    s += g.value(id).name + ": " + g.value(id).spec.type_string();
  }
  return s;
}

}  // namespace

GraphSummary summarize(const Graph& g) {
  GraphSummary s;
  s.inputs = g.inputs().size();
  s.outputs = g.outputs().size();
  s.nodes = g.order().size();
  s.constants = g.constants().size();
  for (ValueId id : g.constants()) {
    s.parameters += g.value(id).spec.numel();
    s.constant_bytes += g.value(id).spec.nbytes();
  }
  std::map<std::string, size_t> ops;
  for (NodeId n : g.order()) {
    ++ops[op_info(g.node(n).op).name];
    for (ValueId o : g.node(n).outputs)
      s.activation_bytes += g.value(o).spec.nbytes();
  }
  s.op_counts.assign(ops.begin(), ops.end());
  return s;
}

std::string format_summary(const Graph& g, const GraphSummary& s, const std::string& source,
                           std::string_view kind) {
  std::string out = source + ": valid " + std::string(kind);
  if (!g.name.empty()) out += " \"" + g.name + "\"";
  out += "\n";
  out += "  inputs:      " + std::to_string(s.inputs) + " (" + value_list(g, g.inputs()) + ")\n";
  out += "  outputs:     " + std::to_string(s.outputs) + " (" + value_list(g, g.outputs()) + ")\n";
  out += "  nodes:       " + std::to_string(s.nodes) + "\n";
  for (const auto& [op, count] : s.op_counts)
    out += "    " + op + " x" + std::to_string(count) + "\n";
  out += "  constants:   " + std::to_string(s.constants) + " (" + grouped(s.parameters) +
         " parameters, " + grouped(s.constant_bytes) + " bytes)\n";
  out += "  activations: " + grouped(s.activation_bytes) + " bytes before memory planning\n";
  return out;
}

}  // namespace etc
