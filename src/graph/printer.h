// The canonical text dump of a graph: one line per value declaration and per node, with
// stable ids (%value, #node), TensorSpecs with device and memory-planning fields, and
// delegate subgraphs indented under their call. Used by --print-ir-after and golden tests;
// the same graph always prints the same bytes.
#pragma once

#include <string>

#include "graph/graph.h"

namespace etc {

std::string print_graph(const Graph& graph);

// "float32[2, 3] cuda:0 mem=2+64 life=[3, 5]" — what the dump shows for one spec.
std::string print_spec(const TensorSpec& spec);

}  // namespace etc
