// ExecuTorch's tensors as etc's runtime views, for the plugin's backend and kernel library:
// the same memory, nothing copied. Internal to the plugin: etc::executorch_plugin holds the
// calls libetc_executorch.so exports (exports.map), and nothing else.
#pragma once

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/exec_aten/exec_aten.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "runtime/tensor.h"

namespace etc::et_interop {

// The largest size in bytes each dynamic-bound tensor has had over the same memory: its
// bound. ExecuTorch loads a dynamic-bound tensor at its upper bound and gives no way to ask
// it later, and only the instruction (or delegate) writing a tensor resizes it, so the size it
// has when that instruction first sees it is the bound. A tensor found over other memory
// (another method's tensor at a reused address, an output the caller bound elsewhere) starts
// again from its current size: it may shrink, never grow past what is known to be there.
struct TensorBound {
  const void* data = nullptr;
  int64_t bytes = 0;
};
using TensorBounds = std::unordered_map<const ::executorch::aten::TensorImpl*, TensorBound>;

// `t` as a view `v`: data, dtype, sizes, device; for a dynamic-bound tensor its capacity from
// `bounds`. Tensors must be contiguous (dim order 0, 1, ...); with `host_only`, in host
// memory. Returns an empty string, or why `t` cannot be viewed.
std::string view_of(const ::executorch::aten::Tensor& t, TensorBounds& bounds, bool host_only,
                    rt::TensorView& v);

// After etc's code ran: `t` takes the sizes etc gave its view (a dynamic-bound out resized).
::executorch::runtime::Error resize_to_view(const ::executorch::aten::Tensor& t,
                                            const rt::TensorView& v);

}  // namespace etc::et_interop
