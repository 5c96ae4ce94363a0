// Bounded dynamic shapes, found by comparison.
//
// A program whose inputs have symbolic dims (torch.export's dynamic_shapes) is imported and
// compiled several times, with every symbol at its upper bound and at other sizes in its
// range. The importer and the passes are deterministic, so the graphs agree node for node;
// what differs between them is exactly what depends on the symbols:
//   - a value whose sizes differ is dynamic-bound: planned and serialized at the upper bound
//     (ExecuTorch's DYNAMIC_BOUND), resized by the kernels at run time;
//   - an integer argument that differs must be one the runtime recomputes from the actual
//     input sizes: the one dynamic entry of a view/reshape size (written as -1), an expand
//     size that keeps the input's dim (-1), a slice end at the end of its dim (INT64_MAX).
// Anything else that depends on the symbols — another argument, a constant (a mask built
// for one sequence length), the graph's structure, a delegate — is an error that names it.
#pragma once

#include <span>
#include <string>

#include "graph/graph.h"

namespace etc {

// graphs[0] is the program built at the upper bound, the others the same program at other
// sizes. Marks and rewrites every graph the same way (so they stay comparable: `etc export`
// compares them once after import, so that partitioning keeps dynamic work on the host, and
// again after the passes). `symbols` names the symbols and ranges for messages.
Status mark_dynamic_shapes(std::span<Graph* const> graphs, const std::string& symbols);

}  // namespace etc
