// A short human-readable summary of a graph, printed by `etc validate`.
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"

namespace etc {

struct GraphSummary {
  size_t inputs = 0;
  size_t outputs = 0;
  size_t nodes = 0;
  size_t constants = 0;
  int64_t parameters = 0;        // elements in constants
  int64_t constant_bytes = 0;    // bytes in constants
  int64_t activation_bytes = 0;  // bytes of all node outputs (an upper bound before planning)
  std::vector<std::pair<std::string, size_t>> op_counts;  // sorted by op name
};

GraphSummary summarize(const Graph& graph);
// Multi-line text; `source` is the file name shown in the first line.
// `kind` names what the source is ("etc.graph", "ONNX model", "torch.export program").
std::string format_summary(const Graph& graph, const GraphSummary& s, const std::string& source,
                           std::string_view kind);

}  // namespace etc
