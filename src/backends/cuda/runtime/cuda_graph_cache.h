// The CUDA delegate's choice, per call, between replaying a captured CUDA graph, running
// plainly and capturing, kept apart from the CUDA calls so that a host test can drive it.
//
// A graph is keyed on what its kernels baked in: the call's tensor pointers and input sizes
// and the device's scratch generation. Several keys stay cached (least recently used goes
// first): the runner's IO buffers, freed and allocated again each call, may come back from
// cudaMalloc in another order (token ids and positions are both 8 bytes), so that pointers
// alternate between a few sets; with one slot every other call would capture again and
// nothing would ever be replayed.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <vector>

namespace etc::cuda {

class GraphCache {
 public:
  using Key = std::vector<int64_t>;
  using Sizes = std::vector<std::vector<int64_t>>;
  enum class Action {
    kReplay,   // a graph for this key is cached: launch it (find() gives it)
    kPlain,    // first call with this key: run plainly (it may grow scratch, make cuBLAS state)
    kCapture,  // a plain run for this key completed: capture now
  };
  struct Entry {
    Key key;
    cudaGraphExec_t exec = nullptr;
    Sizes out_sizes;  // the outputs' sizes at capture (a replay does not compute them)
  };
  struct Counters {
    uint64_t captures = 0;  // graphs captured and instantiated
    uint64_t replays = 0;   // launches of a cached graph
    uint64_t plain = 0;     // calls run without a graph
    uint64_t evicted = 0;   // graphs dropped to make room
  };

  // `destroy` frees an executable graph (cudaGraphExecDestroy); `capacity` graphs at most.
  explicit GraphCache(std::function<void(cudaGraphExec_t)> destroy, size_t capacity = 8)
      : destroy_(std::move(destroy)), capacity_(capacity) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() { clear(); }

  // What to do for a call with `key`.
  Action decide(const Key& key) const;
  // The graph cached for `key` (most recently used from now on), or null; counts a replay.
  const Entry* replay(const Key& key);
  // A plain run for `key` completed: the next call with it captures.
  void ran_plainly(const Key& key);
  // Caches a graph captured for `key`, evicting the least recently used beyond capacity.
  void add(Key key, cudaGraphExec_t exec, Sizes out_sizes);
  // Drops every graph (a failed capture turns graphs off for the handle).
  void clear();

  size_t size() const { return entries_.size(); }
  const Counters& counters() const { return counters_; }

 private:
  std::function<void(cudaGraphExec_t)> destroy_;
  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::list<Key> plain_;      // keys whose plain run completed, most recent first
  Counters counters_;
};

}  // namespace etc::cuda
