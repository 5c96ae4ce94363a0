// Reads a graph in the etc.graph JSON format (docs/graph-format.md) into the IR.
//
// The reader checks everything it can say in terms of the file: every error names the
// file and a JSON pointer (and the node name where there is one), syntax errors give line
// and column. Nodes may appear in any order; they are scheduled topologically, keeping
// file order where the data allows, and a cycle is reported with the nodes on it. The
// result has passed verify_graph().
#pragma once

#include <string>
#include <string_view>

#include "graph/graph.h"
#include "support/status.h"

namespace etc {

inline constexpr int kGraphFormatVersion = 1;

// Loads `path`; external weight files are resolved relative to the file's folder.
Result<Graph> load_graph_file(const std::string& path);

// Parses JSON text. `file` is used in diagnostics; `base_dir` resolves weight files.
Result<Graph> parse_graph_json(std::string_view text, const std::string& file,
                               const std::string& base_dir);

}  // namespace etc
