// plan-memory: assigns every planned tensor a buffer (mem_id) and an offset, per device.
//
// Must run last (after device propagation): lifetimes come from the final schedule.
// Planned: graph inputs and every node output of the top-level graph, except constants and
// graph inputs/outputs that live on a device because of --io-device device. Tensors are
// bucketed by device; each bucket is planned independently into one buffer; buffers are
// ordered CPU first, then devices by (type, index) — ExecuTorch's layout, so mem_id 1 is
// the CPU buffer when there is one. Graph inputs are live for the whole run (unlike
// ExecuTorch's plans, where an output may reuse an input's bytes), so running a program twice
// with the same inputs gives the same outputs. Each bucket is planned by the algorithm the options
// choose (by default both etc's and ExecuTorch's, keeping the smaller plan), and every plan
// is verified before it is accepted. Afterwards: each planned TensorSpec has mem_id,
// mem_offset and lifetime; graph.planned_buffers lists the buffers.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> plan_memory(Graph& graph, PassContext& context);

}  // namespace etc
