// The CUDA partitioner: an analysis that decides which nodes go to which delegate, and a
// separate step (lower_partitions) that rewrites the graph accordingly.
//
// Algorithm: mark each node supported or not (capability table, excluded ops); find a
// topological order that keeps supported nodes together — Kahn's algorithm that keeps
// taking nodes of the kind it is currently emitting and switches only when none is ready,
// breaking ties by original position; cut the order into maximal runs of supported nodes
// and split each run into its connected components. A contiguous run of a topological
// order is convex (a path between two of its nodes only passes nodes placed between them),
// and so is each component of it, so every group is connected and convex by construction;
// groups under the minimum size go back to the host. Deterministic: the same graph and
// options always give the same plan.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "passes/pass.h"

namespace etc {

struct PartitionPlan {
  // A topological order of all nodes in which every partition is contiguous.
  std::vector<NodeId> schedule;
  // Partitions in schedule order; nodes in schedule order.
  std::vector<std::vector<NodeId>> partitions;
  // Nodes left on the host, in schedule order, with the reason.
  std::vector<std::pair<NodeId, std::string>> host_nodes;
};

PartitionPlan plan_partitions(const Graph& graph, const PartitionOptions& options);

// True if no path leaves `nodes` and comes back (used by tests and as a debug check).
bool is_convex(const Graph& graph, std::span<const NodeId> nodes);
// True if `nodes` are connected through data edges between them (ignoring direction).
bool is_connected(const Graph& graph, std::span<const NodeId> nodes);

}  // namespace etc
