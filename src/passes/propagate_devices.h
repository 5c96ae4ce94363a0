// propagate-devices: puts every tensor a delegate reads or writes on the delegate's device
// and inserts exactly the host<->device copies that the program needs.
//
// Runs after lowering (delegate calls exist), before plan-memory. For each delegate whose
// device is not the CPU (from its target_device compile spec):
// - its outputs are tagged with its device;
// - an input on the host is read through an et_copy._h2d_copy to that device, inserted
//   before the first delegate that needs it and shared by every later delegate on the same
//   device (ExecuTorch copies once per delegate);
// - an input produced on another device goes through the host: one _d2h_copy (shared with
//   host users) and one _h2d_copy per target device; same-device edges need no copy;
// - host users and graph outputs of a delegate output read one shared _d2h_copy, inserted
//   right after the delegate.
// With --io-device device, graph inputs read only by delegates of one device are tagged with
// that device instead of copied, and graph outputs produced by a delegate stay on its device.
// Afterwards the device rules in graph.h hold, and the report lists every boundary tensor
// and copy with its cause.
#pragma once

#include "passes/pass.h"

namespace etc {

Result<bool> propagate_devices(Graph& graph, PassContext& context);

}  // namespace etc
