// The emitter: turns a compiled graph (after plan-memory) into an ExecuTorch program.
//
// - One ExecutionPlan "forward" with one chain. Values: graph inputs first (in order), then
//   tensors and arguments as instructions need them. Host ops become KernelCalls to
//   ExecuTorch's portable out-variant kernels ("aten::add" / "out") with ExecuTorch's
//   argument convention (every schema argument, defaults materialised, then the out
//   tensor(s), then the return value: the out index again, or a TensorList of outs).
//   Device copies become et_copy::_h2d_copy.out / _d2h_copy.out. Delegate calls become
//   DelegateCalls (inputs then outputs) to BackendDelegate entries, one per call site.
// - Tensors carry allocation_info when planned, data_buffer_idx for constants, and
//   extra_tensor_info with device type and index only when not on the CPU.
// - Host constants go to the constant segment (deduplicated by content, 16-byte aligned);
//   each delegate's processed blob (etc_delegate.fbs) to its own segment (deduplicated);
//   delegate constants to named data ("<delegate>/<constant>"), one segment per distinct
//   content. non_const_buffer_sizes / non_const_buffer_device mirror graph.planned_buffers.
#pragma once

#include "format/pte_model.h"
#include "graph/graph.h"
#include "support/status.h"

namespace etc {

struct EmitOptions {
  uint64_t segment_alignment = pte::kDefaultSegmentAlignment;
  uint64_t constant_alignment = pte::kConstantAlignment;
};

// Fails with kUnsupported for host ops that have no portable kernel (decompose-host-ops
// removes them in the default pipeline) and for dims that do not fit the format's int32.
Result<pte::File> emit_program(const Graph& graph, const EmitOptions& options = {});

// The portable out-variant kernel ExecuTorch runs for host op `op`, as a parsed schema
// ("add.out(Tensor self, ..., *, Tensor(a!) out) -> Tensor(a!)"), or nullptr if none.
const OpSchema* portable_kernel(OpKind op);

}  // namespace etc
