#include "partition/partitioner.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "backends/cuda/cuda_capability.h"

namespace etc {
namespace {

// Producers of each node's inputs (node ids), deduplicated.
std::vector<NodeId> producers(const Graph& g, const Node& n) {
  std::vector<NodeId> out;
  auto add = [&](ValueId v) {
    const Value& val = g.value(v);
    if (val.kind == ValueKind::kNodeOutput &&
        std::find(out.begin(), out.end(), val.producer) == out.end()) {
      out.push_back(val.producer);
    }
  };
  for (ValueId v : tensor_args(n))
    add(v);
  return out;
}

std::vector<NodeId> consumers(const Graph& g, const Node& n) {
  std::vector<NodeId> out;
  for (ValueId o : n.outputs) {
    for (const Use& u : g.value(o).uses) {
      if (std::find(out.begin(), out.end(), u.node) == out.end()) out.push_back(u.node);
    }
  }
  return out;
}

struct UnionFind {
  std::vector<size_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t x) {
    while (parent[x] != x)
      x = parent[x] = parent[parent[x]];
    return x;
  }
  void unite(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace

PartitionPlan plan_partitions(const Graph& graph, const PartitionOptions& options) {
  std::span<const NodeId> order = graph.order();
  const size_t n = order.size();
  std::unordered_map<uint32_t, size_t> pos;  // node id -> original position
  pos.reserve(n);
  for (size_t i = 0; i < n; ++i)
    pos[order[i].v] = i;

  std::vector<bool> supported(n);
  std::vector<std::string> reason(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph.node(order[i]);
    const std::string& name = op_info(node.op).name;
    if (std::find(options.excluded_ops.begin(), options.excluded_ops.end(), name) !=
        options.excluded_ops.end()) {
      reason[i] = "excluded by --exclude-ops";
    } else if (auto r = cuda_unsupported_reason(graph, node)) {
      reason[i] = *r;
    }
    supported[i] = reason[i].empty();
  }

  // Kahn's algorithm preferring to stay on the current side (supported or not).
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> indegree(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (NodeId p : producers(graph, graph.node(order[i]))) {
      users[pos.at(p.v)].push_back(i);
      ++indegree[i];
    }
  }
  using MinHeap = std::priority_queue<size_t, std::vector<size_t>, std::greater<>>;
  MinHeap ready[2];
  for (size_t i = 0; i < n; ++i) {
    if (indegree[i] == 0) ready[supported[i]].push(i);
  }
  std::vector<size_t> schedule;
  schedule.reserve(n);
  int side =
      ready[1].empty() ? 0 : (ready[0].empty() ? 1 : (ready[0].top() < ready[1].top() ? 0 : 1));
  while (schedule.size() < n) {
    if (ready[side].empty()) side = 1 - side;
    size_t i = ready[side].top();
    ready[side].pop();
    schedule.push_back(i);
    for (size_t u : users[i]) {
      if (--indegree[u] == 0) ready[supported[u]].push(u);
    }
  }

  // Runs of supported nodes, split into connected components.
  PartitionPlan plan;
  for (size_t i : schedule)
    plan.schedule.push_back(order[i]);
  std::vector<int64_t> run_of(n, -1);
  std::vector<std::vector<size_t>> runs;
  for (size_t k = 0; k < n; ++k) {
    size_t i = schedule[k];
    if (!supported[i]) continue;
    if (k == 0 || !supported[schedule[k - 1]]) runs.emplace_back();
    run_of[i] = static_cast<int64_t>(runs.size() - 1);
    runs.back().push_back(i);
  }
  UnionFind uf(n);
  for (size_t i = 0; i < n; ++i) {
    if (run_of[i] < 0) continue;
    for (size_t u : users[i]) {
      if (run_of[u] == run_of[i]) uf.unite(i, u);
    }
  }
  std::vector<bool> delegated(n, false);
  for (const std::vector<size_t>& run : runs) {
    std::vector<std::vector<size_t>> components;
    std::unordered_map<size_t, size_t> component_of_root;
    for (size_t i : run) {
      size_t root = uf.find(i);
      auto [it, fresh] = component_of_root.emplace(root, components.size());
      if (fresh) components.emplace_back();
      components[it->second].push_back(i);
    }
    for (const std::vector<size_t>& c : components) {
      if (c.size() < std::max<size_t>(options.min_partition_size, 1)) {
        for (size_t i : c) {
          reason[i] = "in a group of " + std::to_string(c.size()) + " node" +
                      (c.size() == 1 ? "" : "s") + ", below --min-partition-size " +
                      std::to_string(options.min_partition_size);
        }
        continue;
      }
      std::vector<NodeId> nodes;
      for (size_t i : c) {
        nodes.push_back(order[i]);
        delegated[i] = true;
      }
      plan.partitions.push_back(std::move(nodes));
    }
  }
  for (size_t i : schedule) {
    if (!delegated[i]) plan.host_nodes.emplace_back(order[i], reason[i]);
  }
  return plan;
}

bool is_convex(const Graph& graph, std::span<const NodeId> nodes) {
  std::unordered_set<uint32_t> inside;
  for (NodeId id : nodes)
    inside.insert(id.v);
  // Walk forward from every edge that leaves the set; reaching the set again breaks convexity.
  std::vector<NodeId> stack;
  std::unordered_set<uint32_t> visited;
  for (NodeId id : nodes) {
    for (NodeId c : consumers(graph, graph.node(id))) {
      if (!inside.count(c.v) && visited.insert(c.v).second) stack.push_back(c);
    }
  }
  while (!stack.empty()) {
    NodeId cur = stack.back();
    stack.pop_back();
    for (NodeId c : consumers(graph, graph.node(cur))) {
      if (inside.count(c.v)) return false;
      if (visited.insert(c.v).second) stack.push_back(c);
    }
  }
  return true;
}

bool is_connected(const Graph& graph, std::span<const NodeId> nodes) {
  if (nodes.empty()) return true;
  std::unordered_set<uint32_t> inside;
  for (NodeId id : nodes)
    inside.insert(id.v);
  std::unordered_set<uint32_t> reached{nodes[0].v};
  std::vector<NodeId> stack{nodes[0]};
  while (!stack.empty()) {
    NodeId cur = stack.back();
    stack.pop_back();
    std::vector<NodeId> next = consumers(graph, graph.node(cur));
    std::vector<NodeId> prev = producers(graph, graph.node(cur));
    next.insert(next.end(), prev.begin(), prev.end());
    for (NodeId m : next) {
      if (inside.count(m.v) && reached.insert(m.v).second) stack.push_back(m);
    }
  }
  return reached.size() == inside.size();
}

}  // namespace etc
