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

// Whether index_put node `n` fits ExecuTorch's in-place index_put_: accumulate False, one
// 1-D int index tensor, values of self's shape but for the indexed dim.
bool fits_index_put_inplace(const Graph& g, const Node& n);

// The device delegate call that computes state `s`'s update in the state's own storage, when
// there is one: the call is the state's only reader, and inside it the state is read once, by
// an in-place-fitting index_put (a KV-cache write) or an elementwise op of the state's type
// (a step counter) whose result is the update. Such a state
// lives on the delegate's device (propagate-devices), its update is planned over it
// (plan-memory), and it is never copied between host and device.
std::optional<NodeId> device_state_writer(const Graph& g, const StateBuffer& s);

}  // namespace etc
