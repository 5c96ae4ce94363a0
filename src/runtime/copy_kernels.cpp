#include "runtime/copy_kernels.h"

#include "runtime/device_allocator.h"

namespace etc::rt {

namespace {

Status copy_kernel(KernelContext& ctx, std::span<Value*> args, bool to_device) {
  if (args.size() != 3 || !args[0]->is_tensor() || !args[1]->is_tensor()) {
    return ctx.error("expected (self, out, return), got " + std::to_string(args.size()) +
                     " arguments");
  }
  const TensorView& src = args[0]->tensor;
  TensorView& dst = args[1]->tensor;
  // A dynamic-bound destination takes the source's actual sizes (within its bound).
  const bool resizable =
      dst.capacity >= 0 && src.sizes.size() == dst.sizes.size() && src.nbytes() <= dst.capacity;
  if (src.dtype != dst.dtype || (src.sizes != dst.sizes && !resizable)) {
    return ctx.error("source " + src.describe() + " and destination " + dst.describe() + " differ");
  }
  dst.sizes = src.sizes;
  const TensorView& device_side = to_device ? dst : src;
  const TensorView& host_side = to_device ? src : dst;
  if (device_side.device.is_cpu() || !host_side.device.is_cpu()) {
    return ctx.error(std::string("expected a ") +
                     (to_device ? "host source and a device destination"
                                : "device source and a host destination") +
                     ", got " + src.describe() + " -> " + dst.describe());
  }
  if (ctx.allocators == nullptr) return ctx.error("no device allocators are available");
  ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, ctx.allocators->for_device(device_side.device));
  size_t bytes = static_cast<size_t>(src.nbytes());
  return to_device ? a->copy_host_to_device(dst.data, src.data, bytes, dst.device.index)
                   : a->copy_device_to_host(dst.data, src.data, bytes, src.device.index);
}

Status h2d_copy(KernelContext& ctx, std::span<Value*> args) {
  return copy_kernel(ctx, args, true);
}
Status d2h_copy(KernelContext& ctx, std::span<Value*> args) {
  return copy_kernel(ctx, args, false);
}

}  // namespace

Status register_copy_kernels(OperatorRegistry& registry) {
  ETC_RETURN_IF_ERROR(registry.add(OpKind::H2DCopy, &h2d_copy, KernelForms::kOut));
  return registry.add(OpKind::D2HCopy, &d2h_copy, KernelForms::kOut);
}

}  // namespace etc::rt
