// libetc_executorch_autoregister.so: etc registered with ExecuTorch when the library loads, as
// ExecuTorch's own kernel and backend libraries register themselves: linking it (kept with
// -Wl,--no-as-needed, since nothing need reference it) is all an application does. It
// registers etc's CPU kernels (register_kernels_with_executorch), then etc's CUDA allocator
// and EtcCudaBackend (register_with_executorch, which looks for a GPU then).
#include <executorch/runtime/platform/log.h>
#include <executorch/runtime/platform/runtime.h>

#include "executorch/etc_executorch.h"

namespace etc::executorch_plugin {
namespace {

::executorch::runtime::Error register_at_load() {
  ::executorch::runtime::runtime_init();  // the platform layer, for the log; idempotent
  ::executorch::runtime::Error e = register_kernels_with_executorch();
  if (e == ::executorch::runtime::Error::Ok) e = register_with_executorch();
  if (e != ::executorch::runtime::Error::Ok)
    ET_LOG(Error, "etc: registering at load failed (ExecuTorch error 0x%x)",
           static_cast<unsigned>(e));
  return e;
}

const ::executorch::runtime::Error kRegistered = register_at_load();

}  // namespace

::executorch::runtime::Error registered_at_load() {
  return kRegistered;
}

}  // namespace etc::executorch_plugin
