#include "executorch/et_tensors.h"

#include <executorch/runtime/core/exec_aten/util/tensor_util.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "graph/dtype.h"

namespace etc::et_interop {

namespace et = ::executorch::runtime;

std::string view_of(const ::executorch::aten::Tensor& t, TensorBounds& bounds, bool host_only,
                    rt::TensorView& v) {
  const std::optional<DType> dtype = dtype_from_scalar_type(static_cast<int>(t.scalar_type()));
  if (!dtype) return "a tensor of ScalarType " + std::to_string(static_cast<int>(t.scalar_type()));
  switch (t.device_type()) {
    case et::etensor::DeviceType::CPU:
      v.device = Device{DeviceType::kCPU, 0};
      break;
    case et::etensor::DeviceType::CUDA:
      if (host_only)
        return "a tensor outside host memory (etc's CPU kernels read host memory only)";
      v.device = Device{DeviceType::kCUDA, static_cast<int8_t>(std::max<int>(t.device_index(), 0))};
      break;
    default:
      return "a tensor on a device type etc does not know (" +
             std::to_string(static_cast<int>(t.device_type())) + ")";
  }
  const auto order = t.dim_order();
  for (size_t d = 0; d < order.size(); ++d) {
    if (order[d] != d) {
      return "a tensor in a dim order other than contiguous (etc takes contiguous tensors)";
    }
  }
  v.data = t.mutable_data_ptr();
  v.dtype = *dtype;
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.capacity = -1;
  if (t.shape_dynamism() != ::executorch::aten::TensorShapeDynamism::STATIC) {
    TensorBound& bound = bounds[t.unsafeGetTensorImpl()];
    const auto now = static_cast<int64_t>(t.nbytes());
    if (bound.data != v.data) {
      bound = TensorBound{v.data, now};
    } else {
      bound.bytes = std::max(bound.bytes, now);
    }
    v.capacity = bound.bytes;
  }
  return {};
}

et::Error resize_to_view(const ::executorch::aten::Tensor& t, const rt::TensorView& v) {
  const auto sizes = t.sizes();
  if (std::equal(sizes.begin(), sizes.end(), v.sizes.begin(), v.sizes.end())) return et::Error::Ok;
  std::vector<::executorch::aten::SizesType> to(v.sizes.begin(), v.sizes.end());
  return et::resize_tensor(t, {to.data(), to.size()});
}

}  // namespace etc::et_interop
