// Type conversion, indexing and creation kernels: _to_copy, embedding, full, ones, zeros.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "graph/int4.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::kernels {

Status check_embedding(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& weight = tensor_arg(args, 0);
  const TensorView& indices = tensor_arg(args, 1);
  if (weight.rank() != 2) {
    return ctx.error("weight must have rank 2, got " + shape_str(weight.sizes));
  }
  if (indices.dtype != DType::kInt64 && indices.dtype != DType::kInt32) {
    return unsupported_dtype(ctx, "indices", indices.dtype, "int64 or int32");
  }
  std::vector<int64_t> sizes = indices.sizes;
  sizes.push_back(weight.sizes[1]);
  return check_out(ctx, out_arg(args, 5), sizes, weight.dtype);
}

Status check_unpack_int4(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& packed = tensor_arg(args, 0);
  const int64_t size = args[1]->i;
  if (packed.dtype != DType::kUInt8) return unsupported_dtype(ctx, "packed", packed.dtype, "uint8");
  if (packed.rank() == 0) return ctx.error("packed must have rank 1 or more");
  if (size < 0 || int4::row_bytes(size) != packed.sizes.back()) {
    return ctx.error(std::to_string(size) + " values do not pack into packed " +
                     shape_str(packed.sizes) + " (ceil(size / 2) bytes a row)");
  }
  std::vector<int64_t> sizes = packed.sizes;
  sizes.back() = size;
  return check_out(ctx, out_arg(args, 2), sizes, DType::kInt8);
}

namespace {

Status to_copy_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 7);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, opt_dtype_arg(args, 1).value_or(self.dtype)));
  // float -> integer truncates toward zero, -> bool is != 0 (convert()).
  convert_elements(self.data, self.dtype, out.data, out.dtype, out.numel());
  return Status();
}

// _to_copy.out as PyTorch declares it (and ExecuTorch's portable kernel takes it): (self, *,
// non_blocking, memory_format, out), converting to the out tensor's dtype. Programs etc wrote
// before 2026-12-01 pass the functional form's arguments too (dtype, layout, device,
// pin_memory); they still run.
Status to_copy_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  if (args.size() == 9) {
    static const OpSchema kFunctional = functional_call_schema(op_info(OpKind::ToCopy).schema);
    KernelContext legacy = ctx;
    legacy.schema = &kFunctional;
    return to_copy_kernel(legacy, args);
  }
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, self.sizes));
  convert_elements(self.data, self.dtype, out.data, out.dtype, out.numel());
  return Status();
}

// ExecuTorch's edge dialect writes clone/contiguous as dim_order_ops::_clone_dim_order and
// _to_copy as dim_order_ops::_to_dim_order_copy; both out variants are (self, non_blocking,
// dim_order?, out). A clone keeps the dtype; a copy converts to the out tensor's.
template <bool kConvert>
Status dim_order_copy_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  ETC_RETURN_IF_ERROR(check_contiguous_dim_order(ctx, *args[2], self.sizes.size()));
  TensorView& out = out_arg(args, 3);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, kConvert ? out.dtype : self.dtype));
  if (kConvert) {
    convert_elements(self.data, self.dtype, out.data, out.dtype, out.numel());
  } else if (out.nbytes() > 0) {
    std::memcpy(out.data, self.data, static_cast<size_t>(out.nbytes()));
  }
  return Status();
}

template <typename I>
Status gather_rows(const KernelContext& ctx, const TensorView& weight, const TensorView& indices,
                   TensorView& out) {
  const int64_t rows = weight.sizes[0];
  const auto row_bytes = static_cast<size_t>(weight.sizes[1] * dtype_size(weight.dtype));
  const I* idx = indices.data_as<const I>();
  const auto* src = static_cast<const char*>(weight.data);
  auto* dst = static_cast<char*>(out.data);
  const int64_t n = indices.numel();
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<int64_t>(idx[i]);
    if (r < 0 || r >= rows) {
      return ctx.error("index " + std::to_string(r) + " (indices element " + std::to_string(i) +
                       ") is out of range for an embedding table of " + std::to_string(rows) +
                       " rows");
    }
    if (row_bytes > 0) std::memcpy(dst + i * row_bytes, src + r * row_bytes, row_bytes);
  }
  return Status();
}

Status embedding_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& weight = tensor_arg(args, 0);
  const TensorView& indices = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 5);
  ETC_RETURN_IF_ERROR(check_embedding(ctx, args));
  // padding_idx only affects gradients; the forward pass is a row gather.
  if (indices.dtype == DType::kInt64) return gather_rows<int64_t>(ctx, weight, indices, out);
  return gather_rows<int32_t>(ctx, weight, indices, out);
}

// out = value everywhere, after checking out against size (and dtype, when given).
Status fill(const KernelContext& ctx, const std::vector<int64_t>& size, std::optional<DType> dtype,
            const Value& value, TensorView& out) {
  for (int64_t d : size) {
    if (d < 0) return ctx.error("size " + shape_str(size) + " has a negative dim");
  }
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, size));
  if (dtype) ETC_RETURN_IF_ERROR(check_out_dtype(ctx, out, *dtype));
  fill_scalar(out, value);
  return Status();
}

Status full_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, args[0]->ints, std::nullopt, *args[1], out_arg(args, 2));
}

template <int64_t kValue>
Status constant_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  Value v;
  v.kind = Value::Kind::kInt;
  v.i = kValue;
  return fill(ctx, args[0]->ints, std::nullopt, v, out_arg(args, 1));
}

// The IR forms carry the factory arguments dtype/layout/device/pin_memory as well.
Status full_default_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, args[0]->ints, opt_dtype_arg(args, 2), *args[1], out_arg(args, 6));
}

template <int64_t kValue>
Status constant_default_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  Value v;
  v.kind = Value::Kind::kInt;
  v.i = kValue;
  return fill(ctx, args[0]->ints, opt_dtype_arg(args, 1), v, out_arg(args, 5));
}

// The out variants ExecuTorch's programs use for values PyTorch's decompositions create
// (masks and positions): arange.start_out, full_like.out, scalar_tensor.out.
Status arange_start_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  TensorView& out = out_arg(args, 3);
  const double start = args[0]->scalar_as_double(), end = args[1]->scalar_as_double(),
               step = args[2]->scalar_as_double();
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    return ctx.error("arange needs finite bounds and a non-zero step");
  }
  const double count = std::max(0.0, std::ceil((end - start) / step));
  const std::vector<int64_t> shape{static_cast<int64_t>(count)};
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, shape));
  const bool integral = args[0]->kind != Value::Kind::kDouble &&
                        args[1]->kind != Value::Kind::kDouble &&
                        args[2]->kind != Value::Kind::kDouble;
  visit_dtype(out.dtype, [&]<typename T>() {
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      if (integral) {
        o[i] = convert<T>(args[0]->scalar_as_int() + args[2]->scalar_as_int() * i);
      } else {
        o[i] = convert<T>(start + step * static_cast<double>(i));
      }
    }
  });
  return Status();
}

Status full_like_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, tensor_arg(args, 0).sizes, std::nullopt, *args[1], out_arg(args, 3));
}

// The IR's functional form (inside delegate subgraphs): the out tensor carries the dtype.
Status full_like_default_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, tensor_arg(args, 0).sizes, opt_dtype_arg(args, 2), *args[1], out_arg(args, 7));
}

Status scalar_tensor_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, std::vector<int64_t>{}, std::nullopt, *args[0], out_arg(args, 1));
}

// Two signed 4-bit values a byte, the low nibble first, into int8 (etc::unpack_int4).
Status unpack_int4_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(check_unpack_int4(ctx, args));
  const TensorView& packed = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  const int64_t size = args[1]->i, row_bytes = packed.sizes.back();
  if (row_bytes == 0) return Status();
  const uint8_t* in = packed.data_as<const uint8_t>();
  int8_t* o = out.data_as<int8_t>();
  parallel_for(packed.numel() / row_bytes, std::max<int64_t>(1, 65536 / row_bytes),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   int4::unpack(in + r * row_bytes, 0, size, o + r * size);
               });
  return Status();
}

}  // namespace

Status register_creation_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::FullLike, full_like_out_kernel, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::FullLike, full_like_default_kernel, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ToCopy, to_copy_kernel, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ToCopy, to_copy_out_kernel, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Embedding, embedding_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::UnpackInt4, unpack_int4_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Full, full_out_kernel, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Ones, constant_out_kernel<1>, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Zeros, constant_out_kernel<0>, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Full, full_default_kernel, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Ones, constant_default_kernel<1>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Zeros, constant_default_kernel<0>, KernelForms::kFunctional));
  // Out variants ExecuTorch's programs call that etc's IR has no op for: positions, scalars,
  // and the edge dialect's copies.
  ETC_RETURN_IF_ERROR(r.add("aten::arange.start_out",
                            "arange.start_out(Scalar start, Scalar end, Scalar step=1, *, "
                            "Tensor(a!) out) -> Tensor(a!)",
                            arange_start_out_kernel));
  ETC_RETURN_IF_ERROR(r.add("aten::scalar_tensor.out",
                            "scalar_tensor.out(Scalar s, *, Tensor(a!) out) -> Tensor(a!)",
                            scalar_tensor_out_kernel));
  ETC_RETURN_IF_ERROR(r.add("dim_order_ops::_to_dim_order_copy.out",
                            "dim_order_ops::_to_dim_order_copy.out(Tensor self, *, bool "
                            "non_blocking=False, int[]? dim_order=None, Tensor(a!) out) -> "
                            "Tensor(a!)",
                            dim_order_copy_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add("dim_order_ops::_clone_dim_order.out",
                            "dim_order_ops::_clone_dim_order.out(Tensor self, *, bool "
                            "non_blocking=False, int[]? dim_order=None, Tensor(a!) out) -> "
                            "Tensor(a!)",
                            dim_order_copy_kernel<false>));
  return Status();
}

}  // namespace etc::rt::kernels
