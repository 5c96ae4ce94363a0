#include "passes/dead_code_elimination.h"

#include <algorithm>

namespace etc {

Result<bool> dead_code_elimination(Graph& graph, PassContext&) {
  bool changed = false;
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (auto it = order.rbegin(); it != order.rend(); ++it)
    changed |= graph.erase_node(*it);
  std::vector<ValueId> constants(graph.constants().begin(), graph.constants().end());
  for (ValueId c : constants)
    changed |= graph.erase_constant(c);
  return changed;
}

}  // namespace etc
