#include "export/export_pipeline.h"

#include <cstdio>
#include <cstdlib>

#include "partition/lower.h"
#include "passes/cse.h"
#include "passes/dead_code_elimination.h"
#include "passes/decompose_host_ops.h"
#include "passes/fold_batch_norm.h"
#include "passes/fold_constants.h"
#include "passes/fuse_weight_only.h"
#include "passes/gather_rows_first.h"
#include "passes/pack_int4_weights.h"
#include "passes/panel_weights.h"
#include "passes/plan_memory.h"
#include "passes/propagate_devices.h"
#include "passes/remove_noops.h"

namespace etc {

PassRegistry make_pass_registry() {
  PassRegistry r;
  const PassInfo passes[] = {
      {"dce", "remove unused nodes and constants", &dead_code_elimination},
      {"remove-noops", "remove clones, same-shape views and other identity ops", &remove_noops},
      {"fold-constants", "evaluate data-movement and cast ops on constants", &fold_constants},
      {"cse", "merge nodes that compute the same op on the same arguments",
       &eliminate_common_subexpressions},
      {"fold-batch-norm", "fold inference batch norms into the convolutions they follow",
       &fold_batch_norm},
      {"pack-int4-weights", "store int8 weights whose values fit in 4 bits two a byte",
       &pack_int4_weights},
      {"gather-rows-first",
       "look up an embedding's rows before computing them (quantized embeddings)",
       &gather_rows_first},
      {"partition", "group CUDA-capable nodes into delegates (--target)", &partition_pass},
      {"fuse-weight-only",
       "run a CUDA delegate's weight-only quantized linear layers as one op over the packed "
       "weight",
       &fuse_weight_only},
      {"decompose-host-ops", "rewrite host ops into ExecuTorch's portable kernel set",
       &decompose_host_ops},
      {"panel-weights",
       "store the CPU products' 16-bit and int8 weights (and decode steps' float32 ones) in "
       "panels of columns",
       &panel_weights},
      {"propagate-devices", "put delegate IO on the delegate's device, insert copies",
       &propagate_devices},
      {"plan-memory", "assign buffers and offsets per device", &plan_memory},
  };
  for (const PassInfo& p : passes) {
    Status s = r.add(p);
    if (!s.ok()) {  // the list above is source code: a duplicate is a bug
      std::fprintf(stderr, "etc: internal error: %s\n", s.to_string().c_str());
      std::abort();
    }
  }
  return r;
}

}  // namespace etc
