#include "backends/cuda/runtime/cuda_graph_cache.h"

#include <algorithm>

namespace etc::cuda {

GraphCache::Action GraphCache::decide(const Key& key) const {
  for (const Entry& e : entries_)
    if (e.key == key) return Action::kReplay;
  if (std::find(plain_.begin(), plain_.end(), key) != plain_.end()) return Action::kCapture;
  return Action::kPlain;
}

const GraphCache::Entry* GraphCache::replay(const Key& key) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key != key) continue;
    entries_.splice(entries_.begin(), entries_, it);
    ++counters_.replays;
    return &entries_.front();
  }
  return nullptr;
}

void GraphCache::ran_plainly(const Key& key) {
  ++counters_.plain;
  auto it = std::find(plain_.begin(), plain_.end(), key);
  if (it != plain_.end()) {
    plain_.splice(plain_.begin(), plain_, it);
    return;
  }
  plain_.push_front(key);
  // As many keys as graphs: a key whose plain run is forgotten just runs plainly once more.
  while (plain_.size() > capacity_)
    plain_.pop_back();
}

void GraphCache::add(Key key, cudaGraphExec_t exec, Sizes out_sizes) {
  ++counters_.captures;
  plain_.remove(key);  // cached from now on: replayed, never captured again
  entries_.push_front(Entry{std::move(key), exec, std::move(out_sizes)});
  while (entries_.size() > capacity_) {
    if (entries_.back().exec != nullptr) destroy_(entries_.back().exec);
    entries_.pop_back();
    ++counters_.evicted;
  }
}

void GraphCache::clear() {
  for (Entry& e : entries_)
    if (e.exec != nullptr) destroy_(e.exec);
  entries_.clear();
  plain_.clear();
}

}  // namespace etc::cuda
