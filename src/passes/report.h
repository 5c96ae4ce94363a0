// ExportReport: what the export pipeline did and why — op coverage, partitions, boundary
// tensors, host<->device copies and planned memory. Passes append to it; `etc export
// --report FILE.json` writes it with stable keys, and a summary goes to stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/device.h"

namespace etc {

struct ExportReport {
  struct HostOp {
    std::string node;
    std::string op;
    std::string reason;  // why it was not delegated
  };
  struct Partition {
    std::string delegate;  // name of the delegate call node
    Device device;
    std::vector<std::string> nodes;
    std::vector<std::string> inputs;
    std::vector<std::string> outputs;
  };
  struct BoundaryTensor {
    std::string value;
    Device device;
    std::string reason;
  };
  struct Copy {
    std::string kind;  // "h2d" or "d2h"
    std::string source;
    std::string copy;
    Device from;
    Device to;
    int64_t bytes = 0;
    std::string cause;
  };
  struct Buffer {
    uint32_t mem_id = 0;
    Device device;
    int64_t planned_bytes = 0;
    int64_t lower_bound_bytes = 0;
    int64_t baseline_bytes = 0;  // ExecuTorch's greedy algorithm on the same tensors
    std::string algorithm;       // the one whose plan was kept
    size_t tensors = 0;
  };

  size_t total_ops = 0;
  size_t delegated_ops = 0;
  std::vector<HostOp> host_ops;
  std::vector<Partition> partitions;
  std::vector<BoundaryTensor> boundary;
  std::vector<Copy> copies;
  std::vector<Buffer> memory;

  size_t count_copies(const std::string& kind) const;
  int64_t copy_bytes() const;

  // Pretty-printed JSON with stable keys: ops, partitions, boundary, copies{h2d, d2h,
  // bytes, list}, memory[{mem_id, device, planned_bytes, lower_bound_bytes, ...}].
  std::string to_json() const;
  // A few lines for stderr.
  std::string summary() const;
};

}  // namespace etc
