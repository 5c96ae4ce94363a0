// CUDA op wrappers for gathers, creation and the ops that give indices: embedding,
// unpack_int4, advanced indexing (index.Tensor, index_put, index_put_), the fill ops (full,
// full_like, ones, zeros) the index reductions (argmax, argmin, max.dim, min.dim), sort and topk.
// An index out of range cannot fail at launch (that would need a read-back): the kernels write
// zeros or skip the element and set the device's error flag, which the next read-back reports
// (DeviceContext::error_flag). Argument checks follow the CPU reference kernels
// (src/runtime/kernels/index.cpp, creation.cpp, reduce_index.cpp).
#include <algorithm>

#include "backends/cuda/runtime/cuda_op_util.h"

namespace etc::cuda {
namespace {

using namespace ops;  // NOLINT: the helpers of cuda_op_util.h
using rt::kernels::opt_dtype_arg;

Status embedding(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& weight = tensor_arg(args, 0);
  const TensorView& indices = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 5);
  ETC_RETURN_IF_ERROR(rt::kernels::check_embedding(ctx, args));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  // Out-of-range indices give zero rows and set the device's error flag, which the next
  // synchronisation reports (checking here would need a read-back).
  ETC_ASSIGN_OR_RETURN(int32_t * bad, dev->error_flag());
  ETC_CUDA_RETURN_IF_ERROR(k::launch_embedding(
      weight.data, weight.sizes[0], weight.sizes[1] * dtype_size(weight.dtype), indices.data,
      indices.dtype == DType::kInt64, indices.numel(), out.data, bad, dev->stream()));
  return Status();
}

Status unpack_int4(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(rt::kernels::check_unpack_int4(ctx, args));
  const TensorView& packed = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  const int64_t size = args[1]->i, row_bytes = packed.sizes.back();
  if (row_bytes == 0) return Status();
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_unpack_int4(packed.data_as<const uint8_t>(),
                                                 packed.numel() / row_bytes, size,
                                                 out.data_as<int8_t>(), dev->stream()));
  return Status();
}

// ---- Advanced indexing -------------------------------------------------------------------

// `self[indices]` for the index kernels, as `plan` (index_plan's) lays it out: the same walk
// as the CPU kernels (index.cpp), with the index tensors' device pointers.
Result<k::IndexArgs> index_args(const KernelContext& ctx, const TensorView& self,
                                const Value& indices, const IndexPlan& plan) {
  if (plan.result.size() > static_cast<size_t>(k::kMaxRank) ||
      plan.broadcast.size() > static_cast<size_t>(k::kMaxRank) ||
      self.rank() > static_cast<size_t>(k::kMaxRank))
    return ctx.error("ranks above " + std::to_string(k::kMaxRank) + " are not supported");
  k::IndexArgs a;
  a.result = shape_of(plan.result);
  a.elem_bytes = static_cast<int32_t>(dtype_size(self.dtype));
  a.b_rank = static_cast<int32_t>(plan.broadcast.size());
  const std::vector<int64_t> strides = rt::contiguous_strides(self.sizes);
  if (plan.indexed.empty()) {
    a.head_rank = 0;
    a.block = self.numel();
  } else {
    const auto last = static_cast<size_t>(plan.indexed.back());
    for (size_t d = last + 1; d < self.rank(); ++d)
      a.block *= self.sizes[d];
    const size_t tail_rank = self.rank() - last - 1;
    const size_t head_rank = plan.result.size() - tail_rank;
    a.head_rank = static_cast<int32_t>(head_rank);
    std::vector<size_t> sliced;
    for (size_t d = 0; d < self.rank(); ++d) {
      if (std::find(plan.indexed.begin(), plan.indexed.end(), static_cast<int>(d)) ==
          plan.indexed.end())
        sliced.push_back(d);
    }
    size_t next_sliced = 0;
    const size_t b_begin = plan.b_position, b_end = b_begin + plan.broadcast.size();
    for (size_t r = 0; r < head_rank; ++r) {
      if (r >= b_begin && r < b_end) {
        a.head_b_dim[r] = static_cast<int32_t>(r - b_begin);
      } else {
        a.head_b_dim[r] = -1;
        a.head_self_stride[r] = strides[sliced[next_sliced++]];
      }
    }
    a.n_indexed = static_cast<int32_t>(plan.indexed.size());
    for (size_t i = 0; i < plan.indexed.size(); ++i) {
      const auto d = static_cast<size_t>(plan.indexed[i]);
      const TensorView* t = indices.tensors[d];
      a.index[i] = t->data;
      a.index_i64[i] = t->dtype == DType::kInt64;
      a.index_self_stride[i] = strides[d];
      a.index_self_size[i] = self.sizes[d];
      const std::vector<int64_t> b = broadcast_strides(t->sizes, plan.broadcast);
      std::copy(b.begin(), b.end(), a.index_b_strides[i]);
    }
  }
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_ASSIGN_OR_RETURN(a.bad_index, dev->error_flag());
  return a;
}

// index.Tensor(self, indices) -> out
Status index_tensor(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const IndexPlan plan, rt::kernels::index_plan(ctx, self, *args[1]));
  ETC_ASSIGN_OR_RETURN(k::IndexArgs a, index_args(ctx, self, *args[1], plan));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, plan.result, self.dtype));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_index_gather(a, self.data, out.data, dev->stream()));
  return Status();
}

// index_put(self, indices, values, accumulate=False) -> out, and the in-place index_put_.
// `out` may be self's storage (a KV cache updated in place); the copy is skipped then.
// accumulate=True stays on the host (the capability table): atomics would add in any order.
template <bool kInPlace>
Status index_put(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  TensorView& self = args[0]->tensor;
  const TensorView& values = tensor_arg(args, 2);
  TensorView& out = kInPlace ? self : out_arg(args, 4);
  if (args[3]->b) return ctx.error("accumulate=True has no CUDA kernel (it runs on the host)");
  ETC_ASSIGN_OR_RETURN(const IndexPlan plan, rt::kernels::check_index_put(ctx, args, kInPlace));
  ETC_ASSIGN_OR_RETURN(k::IndexArgs a, index_args(ctx, self, *args[1], plan));
  ETC_RETURN_IF_ERROR(copy_d2d(ctx, self, out));
  const std::vector<int64_t> vstrides = broadcast_strides(values.sizes, plan.result);
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(
      k::launch_index_scatter(a, values.data, vstrides.data(), out.data, dev->stream()));
  return Status();
}

Status fill(const KernelContext& ctx, const std::vector<int64_t>& size, std::optional<DType> dtype,
            const Value& value, TensorView& out) {
  for (int64_t d : size) {
    if (d < 0) return ctx.error("size " + shape_str(size) + " has a negative dim");
  }
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, size));
  if (dtype) ETC_RETURN_IF_ERROR(rt::kernels::check_out_dtype(ctx, out, *dtype));
  MapBuilder m(ctx, k::MapOp::kFill, out);
  m.p.scalar = scalar_of(value, out.dtype);
  return m.run();
}

Status full(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, args[0]->ints, opt_dtype_arg(args, 2), *args[1], out_arg(args, 6));
}

// full_like(self, fill_value, ...): self's actual sizes (dynamic-bound masks and positions).
Status full_like(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill(ctx, tensor_arg(args, 0).sizes, opt_dtype_arg(args, 2), *args[1], out_arg(args, 7));
}

template <int64_t kValue>
Status constant(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  Value v;
  v.kind = Value::Kind::kInt;
  v.i = kValue;
  return fill(ctx, args[0]->ints, opt_dtype_arg(args, 1), v, out_arg(args, 5));
}

// ---- Index reductions and sorts ----------------------------------------------------------

// argmax / argmin: one block per lane; NaN and ties as the CPU kernel (check_arg_reduce).
template <bool kMax>
Status arg_extreme(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::Lanes l, rt::kernels::check_arg_reduce(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = rt::kernels::Args(ctx, args).out();
  if (out.numel() == 0) return Status();
  ETC_RETURN_IF_ERROR(check_rank(ctx, self));
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_arg_extreme(self.data, type, l.outer, l.len, l.inner, kMax,
                                                 nullptr, out.data_as<int64_t>(), dev->stream()));
  return Status();
}

// max.dim / min.dim: argmax / argmin along the dim, and the elements they pick.
template <bool kMax>
Status max_dim(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::Lanes l, rt::kernels::check_max_dim(ctx, args));
  const TensorView& self = args[0]->tensor;
  const rt::kernels::Args a(ctx, args);
  TensorView& values = a.out(0);
  if (values.numel() == 0) return Status();
  ETC_RETURN_IF_ERROR(check_rank(ctx, self));
  ETC_ASSIGN_OR_RETURN(k::Elem type, elem_of(ctx, self.dtype, "self"));
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  ETC_CUDA_RETURN_IF_ERROR(k::launch_arg_extreme(self.data, type, l.outer, l.len, l.inner, kMax,
                                                 values.data, a.out(1).data_as<int64_t>(),
                                                 dev->stream()));
  return Status();
}

// sort / topk: the first k of each lane's stable order (check_sort / check_topk); lanes
// longer than the kernels' shared-memory tile sort in the device's scratch memory.
Status ordered(KernelContext& ctx, std::span<Value*> args, const rt::kernels::OrderedLanes& o) {
  const TensorView& self = args[0]->tensor;
  const rt::kernels::Args a(ctx, args);
  TensorView& values = a.out(0);
  if (values.numel() == 0) return Status();
  ETC_RETURN_IF_ERROR(check_rank(ctx, self));
  k::SortArgs p;
  p.in = self.data;
  ETC_ASSIGN_OR_RETURN(p.type, elem_of(ctx, self.dtype, "self"));
  p.values = values.data;
  p.indices = a.out(1).data_as<int64_t>();
  p.outer = o.lanes.outer;
  p.len = o.lanes.len;
  p.inner = o.lanes.inner;
  p.k = o.k;
  p.descending = o.descending;
  ETC_ASSIGN_OR_RETURN(DeviceContext * dev, device_of(ctx));
  void* scratch = nullptr;
  if (const size_t bytes = k::sort_scratch_bytes(o.lanes.count(), o.lanes.len); bytes > 0) {
    ETC_ASSIGN_OR_RETURN(scratch, dev->scratch(bytes));
  }
  ETC_CUDA_RETURN_IF_ERROR(k::launch_sort(p, scratch, dev->stream()));
  return Status();
}

Status sort(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::OrderedLanes o, rt::kernels::check_sort(ctx, args));
  return ordered(ctx, args, o);
}

Status topk(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(rt::kernels::OrderedLanes o, rt::kernels::check_topk(ctx, args));
  return ordered(ctx, args, o);
}

}  // namespace

Status register_cuda_index_kernels(rt::OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Embedding, embedding, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::UnpackInt4, unpack_int4, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::IndexTensor, index_tensor, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::IndexPut, index_put<false>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add("aten::index_put_", rt::kIndexPutInPlaceSchema, index_put<true>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Full, full, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::FullLike, full_like, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Ones, constant<1>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Zeros, constant<0>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Argmax, arg_extreme<true>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Argmin, arg_extreme<false>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MaxDim, max_dim<true>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MinDim, max_dim<false>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sort, sort, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Topk, topk, KernelForms::kFunctional));
  return Status();
}

}  // namespace etc::cuda
