#include "passes/memory_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace etc {
namespace {

// Time range covered by the tensors: positions 0..max_last.
int32_t time_span(const std::vector<PlanTensor>& tensors) {
  int32_t n = 0;
  for (const PlanTensor& t : tensors)
    n = std::max(n, t.last + 1);
  return std::max(n, 1);
}

// Largest first; ties by earlier start, then by index, so plans are deterministic.
std::vector<size_t> by_size_desc(const std::vector<PlanTensor>& tensors) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (tensors[a].size != tensors[b].size) return tensors[a].size > tensors[b].size;
    return tensors[a].first < tensors[b].first;
  });
  return order;
}

// A segment tree over time whose nodes list the placed tensors covering them entirely;
// query() returns every placed tensor whose lifetime intersects a range.
class IntervalIndex {
 public:
  explicit IntervalIndex(int32_t span) {
    while (size_ < span)
      size_ <<= 1;
    nodes_.resize(2 * static_cast<size_t>(size_));
  }

  void insert(size_t id, int32_t first, int32_t last) { insert(1, 0, size_ - 1, first, last, id); }

  // Appends to `out` the ids intersecting [first, last], each once (`stamp` dedups).
  void query(int32_t first, int32_t last, std::vector<size_t>& out, std::vector<uint32_t>& seen,
             uint32_t stamp) const {
    query(1, 0, size_ - 1, first, last, out, seen, stamp);
  }

 private:
  void insert(size_t node, int32_t lo, int32_t hi, int32_t first, int32_t last, size_t id) {
    if (last < lo || hi < first) return;
    if (first <= lo && hi <= last) {
      nodes_[node].covering.push_back(id);
      nodes_[node].any_below = true;
      return;
    }
    nodes_[node].any_below = true;
    int32_t mid = lo + (hi - lo) / 2;
    insert(2 * node, lo, mid, first, last, id);
    insert(2 * node + 1, mid + 1, hi, first, last, id);
  }

  void query(size_t node, int32_t lo, int32_t hi, int32_t first, int32_t last,
             std::vector<size_t>& out, std::vector<uint32_t>& seen, uint32_t stamp) const {
    if (last < lo || hi < first || !nodes_[node].any_below) return;
    for (size_t id : nodes_[node].covering) {
      if (seen[id] != stamp) {
        seen[id] = stamp;
        out.push_back(id);
      }
    }
    if (lo == hi) return;
    int32_t mid = lo + (hi - lo) / 2;
    query(2 * node, lo, mid, first, last, out, seen, stamp);
    query(2 * node + 1, mid + 1, hi, first, last, out, seen, stamp);
  }

  struct Node {
    std::vector<size_t> covering;
    bool any_below = false;  // this subtree holds something: prune empty subtrees
  };
  int32_t size_ = 1;
  std::vector<Node> nodes_;
};

// A sparse segment tree over time holding, per position, the largest "end" (offset + size)
// of the allocations live there: range chmax update, range max query, both O(log T).
class MaxOverTime {
 public:
  explicit MaxOverTime(int32_t span) {
    size_ = 1;
    while (size_ < span)
      size_ <<= 1;
    nodes_.push_back(Node{});
  }
  void update(int32_t first, int32_t last, int64_t value) {
    update(0, 0, size_ - 1, first, last, value);
  }
  int64_t query(int32_t first, int32_t last) const { return query(0, 0, size_ - 1, first, last); }

 private:
  struct Node {
    int64_t tag = -1;  // max over allocations covering this whole node
    int64_t sub = -1;  // max over everything in this subtree
    int32_t left = -1, right = -1;
  };
  int32_t child(int32_t node, bool right) {
    int32_t c =
        right ? nodes_[static_cast<size_t>(node)].right : nodes_[static_cast<size_t>(node)].left;
    if (c < 0) {
      c = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});  // may reallocate: no reference into nodes_ is held across it
      Node& parent = nodes_[static_cast<size_t>(node)];
      (right ? parent.right : parent.left) = c;
    }
    return c;
  }
  void update(int32_t node, int32_t lo, int32_t hi, int32_t first, int32_t last, int64_t value) {
    if (last < lo || hi < first) return;
    Node& n = nodes_[static_cast<size_t>(node)];
    n.sub = std::max(n.sub, value);
    if (first <= lo && hi <= last) {
      n.tag = std::max(n.tag, value);
      return;
    }
    int32_t mid = lo + (hi - lo) / 2;
    int32_t l = child(node, false);
    update(l, lo, mid, first, last, value);
    int32_t r = child(node, true);
    update(r, mid + 1, hi, first, last, value);
  }
  int64_t query(int32_t node, int32_t lo, int32_t hi, int32_t first, int32_t last) const {
    if (node < 0 || last < lo || hi < first) return -1;
    const Node& n = nodes_[static_cast<size_t>(node)];
    if (first <= lo && hi <= last) return n.sub;
    int32_t mid = lo + (hi - lo) / 2;
    return std::max(
        {n.tag, query(n.left, lo, mid, first, last), query(n.right, mid + 1, hi, first, last)});
  }
  int32_t size_ = 1;
  std::vector<Node> nodes_;
};

}  // namespace

BufferPlan plan_greedy_by_size(const std::vector<PlanTensor>& tensors) {
  BufferPlan plan;
  plan.offsets.assign(tensors.size(), 0);
  IntervalIndex index(time_span(tensors));
  std::vector<uint32_t> seen(tensors.size(), 0);
  std::vector<size_t> live;
  uint32_t stamp = 0;
  for (size_t id : by_size_desc(tensors)) {
    const PlanTensor& t = tensors[id];
    live.clear();
    index.query(t.first, t.last, live, seen, ++stamp);
    std::sort(live.begin(), live.end(),
              [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    // Best fit: the smallest gap between placed neighbours that holds t; else on top.
    int64_t best_offset = -1, best_gap = INT64_MAX, top = 0;
    for (size_t other : live) {
      int64_t gap = plan.offsets[other] - top;
      if (gap >= t.size && gap < best_gap) {
        best_gap = gap;
        best_offset = top;
      }
      top = std::max(top, plan.offsets[other] + tensors[other].size);
    }
    plan.offsets[id] = best_offset >= 0 ? best_offset : top;
    plan.size = std::max(plan.size, plan.offsets[id] + t.size);
    index.insert(id, t.first, t.last);
  }
  return plan;
}

BufferPlan plan_shared_objects(const std::vector<PlanTensor>& tensors) {
  struct Object {
    int64_t size = 0;
    MaxOverTime ends;
    explicit Object(int32_t span) : ends(span) {}
  };
  const int32_t span = time_span(tensors);
  std::vector<Object> objects;
  std::vector<std::pair<size_t, int64_t>> placement(tensors.size());  // (object, offset in object)
  for (size_t id : by_size_desc(tensors)) {
    const PlanTensor& t = tensors[id];
    bool placed = false;
    // (a) an object with no allocation live during t's lifetime: offset 0.
    for (size_t o = 0; o < objects.size() && !placed; ++o) {
      if (objects[o].ends.query(t.first, t.last) < 0) {
        placement[id] = {o, 0};
        placed = true;
      }
    }
    // (b) an object with room above everything live during t's lifetime.
    for (size_t o = 0; o < objects.size() && !placed; ++o) {
      int64_t max_end = objects[o].ends.query(t.first, t.last);
      if (max_end > 0 && max_end + t.size <= objects[o].size) {
        placement[id] = {o, max_end};
        placed = true;
      }
    }
    // (c) a new object sized for t.
    if (!placed) {
      objects.emplace_back(span);
      placement[id] = {objects.size() - 1, 0};
    }
    Object& obj = objects[placement[id].first];
    obj.size = std::max(obj.size, placement[id].second + t.size);
    obj.ends.update(t.first, t.last, placement[id].second + t.size);
  }
  // Objects back to back in creation order.
  std::vector<int64_t> base(objects.size(), 0);
  BufferPlan plan;
  for (size_t o = 0; o < objects.size(); ++o) {
    base[o] = plan.size;
    plan.size += objects[o].size;
  }
  plan.offsets.resize(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    plan.offsets[i] = base[placement[i].first] + placement[i].second;
  return plan;
}

int64_t plan_lower_bound(const std::vector<PlanTensor>& tensors) {
  std::vector<int64_t> delta(static_cast<size_t>(time_span(tensors)) + 1, 0);
  for (const PlanTensor& t : tensors) {
    delta[static_cast<size_t>(t.first)] += t.size;
    delta[static_cast<size_t>(t.last) + 1] -= t.size;
  }
  int64_t live = 0, peak = 0;
  for (int64_t d : delta) {
    live += d;
    peak = std::max(peak, live);
  }
  return peak;
}

Status verify_plan(const std::vector<PlanTensor>& tensors, const BufferPlan& plan) {
  if (plan.offsets.size() != tensors.size())
    return internal_error("memory plan has the wrong number of offsets");
  std::vector<size_t> by_start(tensors.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(),
            [&](size_t a, size_t b) { return tensors[a].first < tensors[b].first; });
  // Active tensors keyed by offset; they are pairwise disjoint, so checking the neighbours
  // of each newcomer finds any overlap.
  std::map<int64_t, size_t> active;
  std::multimap<int32_t, size_t> ends;  // last position -> tensor
  auto describe = [&](size_t i) {
    return "tensor " + std::to_string(i) + " (bytes [" + std::to_string(plan.offsets[i]) + ", " +
           std::to_string(plan.offsets[i] + tensors[i].size) + "), live [" +
           std::to_string(tensors[i].first) + ", " + std::to_string(tensors[i].last) + "])";
  };
  for (size_t i : by_start) {
    const PlanTensor& t = tensors[i];
    if (plan.offsets[i] < 0 || plan.offsets[i] + t.size > plan.size) {
      return internal_error("memory plan: " + describe(i) + " lies outside the buffer of " +
                            std::to_string(plan.size) + " bytes");
    }
    while (!ends.empty() && ends.begin()->first < t.first) {
      active.erase(plan.offsets[ends.begin()->second]);
      ends.erase(ends.begin());
    }
    if (t.size == 0) continue;
    auto next = active.lower_bound(plan.offsets[i]);
    if (next != active.end() && next->first < plan.offsets[i] + t.size) {
      return internal_error("memory plan: " + describe(i) + " overlaps " + describe(next->second));
    }
    if (next != active.begin()) {
      auto prev = std::prev(next);
      if (prev->first + tensors[prev->second].size > plan.offsets[i]) {
        return internal_error("memory plan: " + describe(i) + " overlaps " +
                              describe(prev->second));
      }
    }
    active.emplace(plan.offsets[i], i);
    ends.emplace(t.last, i);
  }
  return Status();
}

}  // namespace etc
