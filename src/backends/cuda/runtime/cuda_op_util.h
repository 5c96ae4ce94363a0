// Helpers shared by the CUDA op wrappers (cuda_ops.cpp, cuda_ops_tensor.cpp): dtype mapping,
// scalars, operands over an index space with dim coalescing, and a builder for elementwise
// maps. Private to src/backends/cuda/runtime.
#pragma once

#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/runtime/cuda_context.h"
#include "backends/cuda/runtime/cuda_kernels.h"
#include "backends/cuda/runtime/cuda_status.h"
#include "graph/ops.h"
#include "runtime/kernels/op_checks.h"

namespace etc::cuda::ops {

using ::etc::rt::kernels::broadcast_strides;
using ::etc::rt::kernels::check_args;
using ::etc::rt::kernels::check_out;
using ::etc::rt::kernels::check_out_shape;
using ::etc::rt::kernels::opt_tensor_arg;
using ::etc::rt::kernels::out_arg;
using ::etc::rt::kernels::shape_str;
using ::etc::rt::kernels::tensor_arg;
using ::etc::rt::kernels::unsupported_dtype;
using rt::KernelContext;
using rt::KernelForms;
using rt::TensorView;
using rt::Value;
namespace k = kernels;

inline Result<DeviceContext*> device_of(const KernelContext& ctx) {
  if (ctx.backend_state == nullptr)
    return internal_error(std::string(ctx.op) + ": CUDA kernel called without a device context");
  return static_cast<DeviceContext*>(ctx.backend_state);
}

// out = self, the same elements (a device-to-device copy; nothing when out is self's storage).
inline Status copy_d2d(const KernelContext& ctx, const TensorView& self, TensorView& out) {
  if (out.numel() != self.numel() || out.dtype != self.dtype)
    return ctx.error("out " + out.describe() + " does not match self " + self.describe());
  if (out.nbytes() == 0 || out.data == self.data) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out.data, self.data, static_cast<size_t>(out.nbytes()),
                                           cudaMemcpyDeviceToDevice, dev->stream()));
  return Status();
}

inline Result<k::Elem> elem_of(const KernelContext& ctx, DType t, const char* what) {
  switch (t) {
    case DType::kFloat32:
      return k::Elem::kF32;
    case DType::kFloat16:
      return k::Elem::kF16;
    case DType::kBFloat16:
      return k::Elem::kBF16;
    case DType::kInt32:
      return k::Elem::kI32;
    case DType::kInt64:
      return k::Elem::kI64;
    case DType::kBool:
      return k::Elem::kBool;
    case DType::kUInt8:
      return k::Elem::kU8;
    case DType::kInt8:
      return k::Elem::kI8;
    case DType::kInt16:
      return k::Elem::kI16;
    case DType::kFloat64:
      break;
  }
  return unsupported_dtype(ctx, what, t, "a dtype other than float64 on CUDA");
}

inline bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

inline k::Scalar scalar_of(const Value& v, DType out) {
  k::Scalar s;
  s.d = v.scalar_as_double();
  if (v.kind == Value::Kind::kDouble) {
    const double d = v.d;
    s.i = std::isnan(d) ? 0
          : d <= static_cast<double>(std::numeric_limits<int64_t>::min())
              ? std::numeric_limits<int64_t>::min()
          : d >= static_cast<double>(std::numeric_limits<int64_t>::max())
              ? std::numeric_limits<int64_t>::max()
              : static_cast<int64_t>(d);
  } else {
    s.i = v.scalar_as_int();
  }
  if (out == DType::kBool) s.i = s.d != 0;
  return s;
}

inline k::Operand operand(const KernelContext& ctx, const TensorView& t,
                          std::span<const int64_t> strides, int64_t offset, Status* error) {
  k::Operand o;
  o.data = t.data;
  Result<k::Elem> e = elem_of(ctx, t.dtype, "tensor");
  if (!e.ok() && error->ok()) *error = e.status();
  o.type = e.ok() ? *e : k::Elem::kF32;
  o.offset = offset;
  for (size_t d = 0; d < strides.size() && d < k::kMaxRank; ++d)
    o.strides[d] = strides[d];
  return o;
}

// Drops size-1 dims and merges adjacent dims that every operand walks contiguously, so most
// maps run with rank <= 1 (no index arithmetic per element).
inline void coalesce(k::MapArgs& p) {
  k::Operand* ops[] = {&p.out, &p.a, &p.b, &p.c};
  int out = 0;
  for (int d = 0; d < p.shape.rank; ++d) {
    if (p.shape.sizes[d] == 1) continue;
    if (out > 0) {
      bool mergeable = true;
      for (k::Operand* o : ops)
        mergeable &= o->strides[out - 1] == o->strides[d] * p.shape.sizes[d];
      if (mergeable) {
        p.shape.sizes[out - 1] *= p.shape.sizes[d];
        for (k::Operand* o : ops)
          o->strides[out - 1] = o->strides[d];
        continue;
      }
    }
    p.shape.sizes[out] = p.shape.sizes[d];
    for (k::Operand* o : ops)
      o->strides[out] = o->strides[d];
    ++out;
  }
  p.shape.rank = out;
  if (out == 0) {  // one element
    for (k::Operand* o : ops)
      o->strides[0] = 0;
  }
}

inline Status check_rank(const KernelContext& ctx, const TensorView& t) {
  if (t.rank() > static_cast<size_t>(k::kMaxRank))
    return ctx.error("rank " + std::to_string(t.rank()) + " is above the CUDA limit of 8");
  return Status();
}

// Runs a map over out's index space; out is contiguous unless out_strides/out_offset say.
inline Status run_map(const KernelContext& ctx, k::MapArgs& p) {
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  coalesce(p);
  ETC_CUDA_RETURN_IF_ERROR(k::launch_map(p, dev->stream()));
  return Status();
}

inline k::Shape shape_of(std::span<const int64_t> sizes) {
  k::Shape s;
  s.rank = static_cast<int32_t>(sizes.size());
  for (size_t d = 0; d < sizes.size() && d < k::kMaxRank; ++d)
    s.sizes[d] = sizes[d];
  return s;
}

// A map whose out is `out` (contiguous) and whose inputs are given by the caller.
struct MapBuilder {
  const KernelContext& ctx;
  k::MapArgs p;
  Status error;

  MapBuilder(const KernelContext& c, k::MapOp op, TensorView& out) : ctx(c) {
    p.op = op;
    p.shape = shape_of(out.sizes);
    std::vector<int64_t> st = rt::contiguous_strides(out.sizes);
    p.out = operand(ctx, out, st, 0, &error);
    if (out.rank() > static_cast<size_t>(k::kMaxRank))
      error = ctx.error("rank " + std::to_string(out.rank()) + " is above the CUDA limit of 8");
  }
  // `t` broadcast to out's shape.
  k::Operand broadcast(const TensorView& t) {
    if (t.rank() > static_cast<size_t>(k::kMaxRank) && error.ok())
      error = ctx.error("rank " + std::to_string(t.rank()) + " is above the CUDA limit of 8");
    std::vector<int64_t> sizes(p.shape.sizes, p.shape.sizes + p.shape.rank);
    return operand(ctx, t, broadcast_strides(t.sizes, sizes), 0, &error);
  }
  Status run() {
    ETC_RETURN_IF_ERROR(error);
    return run_map(ctx, p);
  }
};

}  // namespace etc::cuda::ops
