// What every pass sees: the export options and the report it may add to, and the pass
// signature. A pass is a function of (graph, context); it keeps no state between runs and
// returns whether it changed the graph.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "graph/device.h"
#include "graph/graph.h"
#include "passes/report.h"
#include "support/status.h"

namespace etc {

// Where graph inputs and outputs live when delegates touch them (--io-device).
enum class IoDevice : uint8_t {
  kHost,    // on the CPU; copies move them to and from delegates
  kDevice,  // inputs that feed only delegates, and outputs that delegates produce, live on
            // the delegates' device: no copies, not planned in host memory
};

struct PartitionOptions {
  size_t min_partition_size = 1;          // smaller groups stay on the host
  std::vector<std::string> excluded_ops;  // op names never delegated ("aten.add.Tensor")
};

enum class PlanAlgorithm : uint8_t {
  kBest,           // run all and keep the smallest plan (default)
  kGreedyBySize,   // etc's algorithm: largest first, best-fitting gap among live tensors
  kSharedObjects,  // ExecuTorch's greedy shared-object algorithm (the baseline)
};

struct MemoryPlanOptions {
  uint64_t alignment = 16;  // every planned tensor's offset and size are multiples of this
  PlanAlgorithm algorithm = PlanAlgorithm::kBest;
};

struct ExportOptions {
  Device target{DeviceType::kCUDA, 0};  // cpu: no delegation
  IoDevice io_device = IoDevice::kHost;
  PartitionOptions partition;
  MemoryPlanOptions memory;
  // Set by the export when the model has dynamic dims: it compiles the graph at several
  // sizes and requires the same program from each, so a pass must not choose by a tensor's
  // sizes (which differ between those builds).
  bool dynamic_shapes = false;
};

struct PassContext {
  const ExportOptions& options;
  ExportReport& report;
};

// Weights a pass computes (folded, scaled, packed) are kept in memory up to this many bytes
// per pass run; past it they go to a temporary file and leave the process once made
// (WritableArena), so an export's peak memory does not grow with the model.
inline constexpr size_t kComputedWeightsInMemory = size_t{32} << 20;

// Returns true if the graph changed.
using PassFn = Result<bool> (*)(Graph& graph, PassContext& context);

}  // namespace etc
