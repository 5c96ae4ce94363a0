// Lowering: applies a PartitionPlan. Each partition becomes one executorch.call_delegate
// node owning a Delegate — etc's CUDA backend, the target_device compile spec ("cuda:N"),
// and a subgraph holding the partition's nodes and the constants they read. The call takes
// the values the partition reads from outside (in order of first use) and returns the values
// used outside or returned by the graph (in order of definition); it keeps their names.
// Tensors stay on the CPU here; propagate-devices moves the delegate's IO to its device.
// A partition none of whose results is read outside it is dead code and is removed.
#pragma once

#include "partition/partitioner.h"
#include "passes/pass.h"

namespace etc {

Status lower_partitions(Graph& graph, const PartitionPlan& plan, Device target,
                        ExportReport& report);

// The "partition" pass: plan_partitions + lower_partitions for options.target, reporting
// op coverage. With --target cpu nothing is delegated.
Result<bool> partition_pass(Graph& graph, PassContext& context);

}  // namespace etc
