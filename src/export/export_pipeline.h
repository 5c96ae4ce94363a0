// The export pipeline, declared in one place: which passes exist and in what order
// `etc export` runs them. `etc export --passes=a,b,c` runs another list of the same passes.
#pragma once

#include "passes/pass_manager.h"

namespace etc {

// Cleanups and batch norms folded into convolutions; 4-bit weights packed two a byte;
// quantized embeddings made to dequantize only the rows they read; partitioning for the
// target; a CUDA delegate's weight-only quantized linear layers made one op each; host ops
// rewritten into ExecuTorch's portable kernel set and the results folded; the host products'
// weights stored in panels (after the last folding, which would undo it); device copies; memory
// plan last. `cse` is registered but not in this list (see passes/cse.h for why).
inline constexpr const char* kDefaultExportPipeline =
    "dce,remove-noops,fold-constants,fold-batch-norm,dce,pack-int4-weights,gather-rows-first,"
    "partition,fuse-weight-only,decompose-host-ops,fold-constants,dce,panel-weights,"
    "propagate-devices,plan-memory";

// A registry with every pass etc has, registered explicitly.
PassRegistry make_pass_registry();

}  // namespace etc
