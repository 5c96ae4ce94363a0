// Shape and layout kernels: cat, clone, constant_pad_nd and the view ops, which ExecuTorch
// runs as copies (expand/permute/select/slice/squeeze/transpose/unsqueeze/view _copy, and
// the IR's reshape).
//
// Every view is "out[i] = self[offset + sum i_d * stride_d]" for some offset and strides
// over out's dims, so they share one strided byte copy; dtype conversion is never needed
// except in cat, whose out may have the promoted dtype of its inputs.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>

#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"
#include "support/checked_math.h"

namespace etc::rt::kernels {
namespace {

// out = self viewed through (offset, strides); out's shape is already checked.
void copy_view(const TensorView& self, int64_t offset, std::span<const int64_t> strides,
               TensorView& out) {
  if (out.numel() == 0) return;
  const int64_t elem = dtype_size(self.dtype);
  strided_copy(static_cast<const char*>(self.data) + offset * elem, strides, out.data,
               contiguous_strides(out.sizes), out.sizes, elem);
}

// Copies all of self into out (same numel), for the ops that only change the shape.
void copy_all(const TensorView& self, TensorView& out) {
  if (out.numel() > 0 && out.data != self.data)
    std::memmove(out.data, self.data, static_cast<size_t>(self.nbytes()));
}

// ---- cat -----------------------------------------------------------------------------

Status cat_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(CatShape shape, check_cat(ctx, args));
  const std::vector<TensorView*>& ts = args[0]->tensors;
  TensorView& out = out_arg(args, 2);
  if (shape.first == nullptr) return Status();
  const int64_t dim = shape.dim;
  const std::vector<int64_t>& sizes = shape.sizes;
  if (out.numel() == 0) return Status();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= sizes[d];
  for (size_t d = static_cast<size_t>(dim) + 1; d < sizes.size(); ++d)
    inner *= sizes[d];
  const int64_t out_elem = dtype_size(out.dtype);
  if (ctx.is_channels_last(2)) {
    // Items and out of a channels-last chain (kernels/load_plan.h), held [N, H, W, C]: the
    // channels of each position one after the other, item by item. The load planner sets
    // this only for float32 4-d tensors joined along their channels.
    bool planned = dim == 1 && sizes.size() == 4 && out.dtype == DType::kFloat32;
    for (const TensorView* t : ts)
      planned = planned && t->dtype == DType::kFloat32 && t->rank() == 4;
    if (!planned) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last cat takes 4-d float32 tensors joined along dim 1");
    }
    const int64_t positions = sizes[0] * sizes[2] * sizes[3];
    auto* o = static_cast<float*>(out.data);
    parallel_for(positions, std::max<int64_t>(1, (int64_t{1} << 13) / sizes[1]),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t p = p0; p < p1; ++p) {
                     float* to = o + p * sizes[1];
                     for (const TensorView* t : ts) {
                       const int64_t c = t->sizes[1];
                       std::memcpy(to, static_cast<const float*>(t->data) + p * c,
                                   static_cast<size_t>(c) * sizeof(float));
                       to += c;
                     }
                   }
                 });
    return Status();
  }
  const int64_t out_row = sizes[dim] * inner;
  int64_t at = 0;  // element offset of the current input inside each out row
  for (const TensorView* t : ts) {
    if (cat_skips(*t)) continue;
    const int64_t row = t->sizes[dim] * inner;
    const int64_t in_elem = dtype_size(t->dtype);
    for (int64_t o = 0; o < outer; ++o) {
      convert_elements(static_cast<const char*>(t->data) + o * row * in_elem, t->dtype,
                       static_cast<char*>(out.data) + (o * out_row + at) * out_elem, out.dtype,
                       row);
    }
    at += row;
  }
  return Status();
}

// ---- clone, view, reshape, squeeze, unsqueeze ------------------------------------------

Status clone_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  copy_all(self, out);
  return Status();
}

// view/reshape: `size` may hold one -1, inferred from the element count.
Status view_common(KernelContext& ctx, std::span<Value*> args, const char* arg) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, view_sizes(ctx, self, args[1]->ints, arg));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  copy_all(self, out);
  return Status();
}

Status view_kernel(KernelContext& ctx, std::span<Value*> args) {
  return view_common(ctx, args, "size");
}
Status reshape_kernel(KernelContext& ctx, std::span<Value*> args) {
  return view_common(ctx, args, "shape");
}

// aten::sym_size.int(self, dim) -> int: ExecuTorch programs with dynamic-bound tensors read a
// size at run time into an Int value (the last argument) that later IntLists hold.
Status sym_size_kernel(KernelContext& ctx, std::span<Value*> args) {
  if (args.size() != 3 || !args[0]->is_tensor() || args[1]->kind != Value::Kind::kInt ||
      args[2]->kind != Value::Kind::kInt)
    return ctx.error("expected (Tensor self, int dim) and an Int for the result");
  const TensorView& self = args[0]->tensor;
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(self.rank())));
  args[2]->i = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  return Status();
}

// executorch_prim::et_view.default(self, size) -> Tensor: ExecuTorch's view of a
// dynamic-bound tensor. The out tensor is self's memory at the new sizes (no copy); `size`
// may hold one -1.
Status et_view_kernel(KernelContext& ctx, std::span<Value*> args) {
  if (args.size() != 3 || !args[0]->is_tensor() || args[1]->kind != Value::Kind::kIntList ||
      !args[2]->is_tensor())
    return ctx.error("expected (Tensor self, int[] size) and the out Tensor");
  const TensorView& self = args[0]->tensor;
  TensorView& out = args[2]->tensor;
  std::vector<int64_t> sizes = args[1]->ints;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return ctx.error("size " + shape_str(sizes) + " is invalid");
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || self.numel() % known != 0)
      return ctx.error("size " + shape_str(sizes) + " does not fit " + shape_str(self.sizes));
    sizes[static_cast<size_t>(infer)] = self.numel() / known;
  }
  if (std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>()) !=
          self.numel() ||
      out.dtype != self.dtype || sizes.size() != out.sizes.size()) {
    return ctx.error("cannot view " + self.describe() + " as " + shape_str(sizes) + " (out " +
                     out.describe() + ")");
  }
  out.sizes = std::move(sizes);
  out.data = self.data;
  return Status();
}

Status squeeze_dim_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, squeeze_dim_sizes(ctx, self, args[1]->i));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  copy_all(self, out);
  return Status();
}

Status squeeze_dims_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, squeeze_dims_sizes(ctx, self, args[1]->ints));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  copy_all(self, out);
  return Status();
}

Status unsqueeze_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, unsqueeze_sizes(ctx, self, args[1]->i));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  copy_all(self, out);
  return Status();
}

// ---- Strided views ---------------------------------------------------------------------

Status expand_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, expand_sizes(ctx, self, args[1]->ints));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, size, self.dtype));
  copy_view(self, 0, broadcast_strides(self.sizes, size), out);
  return Status();
}

Status permute_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(const StridedView v, check_permute(ctx, args));
  if (ctx.is_channels_last(0) || ctx.is_channels_last(2)) {
    // A chain tensor (kernels/load_plan.h) held [N, H, W, C] permuted to [N, H, W, C], or a
    // plain [N, H, W, C] tensor permuted into a chain tensor: the bytes stay as they are. The
    // load planner sets this only for those permutations of 4-d float32 tensors.
    const std::vector<int64_t> to_nhwc{0, 2, 3, 1}, from_nhwc{0, 3, 1, 2};
    const bool planned = self.rank() == 4 && self.dtype == DType::kFloat32 &&
                         ctx.is_channels_last(0) != ctx.is_channels_last(2) &&
                         args[1]->ints == (ctx.is_channels_last(0) ? to_nhwc : from_nhwc);
    if (!planned) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last permute takes a 4-d float32 tensor to or from "
                            "[N, H, W, C]");
    }
    copy_all(self, out);
    return Status();
  }
  copy_view(self, v.offset, v.strides, out);
  return Status();
}

Status transpose_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  const auto rank = static_cast<int64_t>(self.rank());
  ETC_ASSIGN_OR_RETURN(int64_t d0, wrap_dim(ctx, "dim0", args[1]->i, rank));
  ETC_ASSIGN_OR_RETURN(int64_t d1, wrap_dim(ctx, "dim1", args[2]->i, rank));
  std::vector<int64_t> sizes = self.sizes;
  std::vector<int64_t> strides = contiguous_strides(self.sizes);
  if (rank > 0) {
    std::swap(sizes[d0], sizes[d1]);
    std::swap(strides[d0], strides[d1]);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  if (ctx.is_channels_last(0) || ctx.is_channels_last(3)) {
    // A channel shuffle in a channels-last chain (kernels/load_plan.h): [N, A, B, H, W] held
    // [N, H, W, A, B] to [N, B, A, H, W] held [N, H, W, B, A], each position's A x B
    // channels transposed. The load planner sets this only for dims 1 and 2 of 5-d float32
    // tensors, in and out both.
    const bool planned = rank == 5 && self.dtype == DType::kFloat32 && ctx.is_channels_last(0) &&
                         ctx.is_channels_last(3) && std::min(d0, d1) == 1 && std::max(d0, d1) == 2;
    if (!planned) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last transpose takes dims 1 and 2 of a 5-d float32 "
                            "tensor");
    }
    const int64_t a = self.sizes[1], b = self.sizes[2];
    const int64_t positions = self.sizes[0] * self.sizes[3] * self.sizes[4];
    const auto* x = static_cast<const float*>(self.data);
    auto* y = static_cast<float*>(out.data);
    parallel_for(positions, std::max<int64_t>(1, (int64_t{1} << 13) / std::max<int64_t>(1, a * b)),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t p = p0; p < p1; ++p) {
                     const float* from = x + p * a * b;
                     float* to = y + p * a * b;
                     if (a == 2) {  // ShuffleNet's two groups: two rows interleaved
                       const float* second = from + b;
                       for (int64_t j = 0; j < b; ++j) {
                         to[2 * j] = from[j];
                         to[2 * j + 1] = second[j];
                       }
                       continue;
                     }
                     for (int64_t j = 0; j < b; ++j) {
                       for (int64_t i = 0; i < a; ++i)
                         to[j * a + i] = from[i * b + j];
                     }
                   }
                 });
    return Status();
  }
  copy_view(self, 0, strides, out);
  return Status();
}

Status select_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const StridedView v, check_select(ctx, args));
  copy_view(self, v.offset, v.strides, out);
  return Status();
}

Status slice_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 5);
  ETC_ASSIGN_OR_RETURN(const StridedView v, check_slice(ctx, args));
  if (ctx.is_channels_last(0) || ctx.is_channels_last(5)) {
    // A split along the channels in a channels-last chain (kernels/load_plan.h): [N, C, H, W]
    // held [N, H, W, C], each position's channels start, start + step, ... copied. The load
    // planner sets this only for dim 1 of 4-d float32 tensors, in and out both.
    const bool planned = self.rank() == 4 && self.dtype == DType::kFloat32 &&
                         ctx.is_channels_last(0) && ctx.is_channels_last(5) &&
                         (args[1]->i == 1 || args[1]->i == -3);
    if (!planned) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last slice takes dim 1 of a 4-d float32 tensor");
    }
    if (out.numel() == 0) return Status();
    // check_slice's view of the NCHW tensor: its first channel and step, in planes.
    const int64_t plane = self.sizes[2] * self.sizes[3];
    const int64_t start = v.offset / plane, step = v.strides[1] / plane;
    const int64_t c_in = self.sizes[1], c_out = out.sizes[1];
    const int64_t positions = self.sizes[0] * plane;
    const auto* x = static_cast<const float*>(self.data);
    auto* y = static_cast<float*>(out.data);
    parallel_for(positions, std::max<int64_t>(1, (int64_t{1} << 13) / c_out),
                 [&](int64_t p0, int64_t p1) {
                   for (int64_t p = p0; p < p1; ++p) {
                     const float* from = x + p * c_in + start;
                     float* to = y + p * c_out;
                     if (step == 1) {
                       std::memcpy(to, from, static_cast<size_t>(c_out) * sizeof(float));
                     } else {
                       for (int64_t c = 0; c < c_out; ++c)
                         to[c] = from[c * step];
                     }
                   }
                 });
    return Status();
  }
  copy_view(self, v.offset, v.strides, out);
  return Status();
}

// ---- constant_pad_nd -------------------------------------------------------------------

Status constant_pad_nd_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 3);
  ETC_ASSIGN_OR_RETURN(const PadCopy c, check_constant_pad_nd(ctx, args));
  if (out.numel() == 0) return Status();
  fill_scalar(out, *args[2]);
  if (c.region.empty() && self.rank() > 0) return Status();  // nothing of self remains
  const int64_t elem = dtype_size(self.dtype);
  strided_copy(static_cast<const char*>(self.data) + c.in_offset * elem, c.in_strides,
               static_cast<char*>(out.data) + c.out_offset * elem, c.out_strides, c.region, elem);
  return Status();
}

}  // namespace

// ---- Argument checks shared with the CUDA kernels -------------------------------------

Result<StridedView> check_permute(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  const std::vector<int64_t>& dims = args[1]->ints;
  const auto rank = static_cast<int64_t>(self.rank());
  if (dims.size() != self.rank()) {
    return ctx.error("dims " + shape_str(dims) + " must have one entry per dim of self " +
                     shape_str(self.sizes));
  }
  const std::vector<int64_t> in_strides = contiguous_strides(self.sizes);
  std::vector<bool> seen(self.rank(), false);
  StridedView v;
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(const int64_t w, wrap_dim(ctx, "dim", d, rank));
    const auto u = static_cast<size_t>(w);
    if (seen[u]) return ctx.error("dim " + std::to_string(w) + " appears more than once in dims");
    seen[u] = true;
    v.sizes.push_back(self.sizes[u]);
    v.strides.push_back(in_strides[u]);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 2), v.sizes, self.dtype));
  return v;
}

Result<StridedView> check_select(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  if (self.rank() == 0) return ctx.error("cannot select from a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(const int64_t dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(self.rank())));
  const auto d = static_cast<size_t>(dim);
  const int64_t n = self.sizes[d];
  int64_t index = args[2]->i;
  if (index < -n || index >= n) {
    return ctx.error("index " + std::to_string(index) + " is out of range for dim " +
                     std::to_string(dim) + " of size " + std::to_string(n));
  }
  if (index < 0) index += n;
  StridedView v{0, self.sizes, contiguous_strides(self.sizes)};
  v.offset = index * v.strides[d];
  v.sizes.erase(v.sizes.begin() + dim);
  v.strides.erase(v.strides.begin() + dim);
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 3), v.sizes, self.dtype));
  return v;
}

Result<StridedView> check_slice(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  if (self.rank() == 0) return ctx.error("cannot slice a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(const int64_t dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(self.rank())));
  const auto d = static_cast<size_t>(dim);
  const int64_t n = self.sizes[d];
  const int64_t step = args[4]->i;
  if (step <= 0) return ctx.error("slice step must be positive, got " + std::to_string(step));
  // ATen wraps a negative start/end once, then clamps into [0, n].
  auto clamp_index = [n](int64_t i) {
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  };
  const int64_t start = clamp_index(opt_int_arg(args, 2).value_or(0));
  const int64_t end = clamp_index(opt_int_arg(args, 3).value_or(n));
  StridedView v{0, self.sizes, contiguous_strides(self.sizes)};
  v.sizes[d] = end > start ? (end - start - 1) / step + 1 : 0;
  v.offset = v.sizes[d] > 0 ? start * v.strides[d] : 0;
  v.strides[d] *= step;
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 5), v.sizes, self.dtype));
  return v;
}

Result<PadCopy> check_constant_pad_nd(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  const std::vector<int64_t>& pad = args[1]->ints;
  if (pad.size() % 2 != 0 || pad.size() / 2 > self.rank()) {
    return ctx.error("pad must have an even number of values, at most 2 per dim of self " +
                     shape_str(self.sizes) + ", got " + std::to_string(pad.size()));
  }
  const size_t rank = self.rank();
  std::vector<int64_t> before(rank, 0), sizes = self.sizes;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const size_t d = rank - 1 - i;  // pads run from the last dim backwards
    before[d] = pad[2 * i];
    // A negative pad crops, at most the whole dim (ATen narrows by it).
    if (pad[2 * i] < -self.sizes[d] || pad[2 * i + 1] < -self.sizes[d]) {
      return ctx.error("pad crops more than dim " + std::to_string(d) + " of self " +
                       shape_str(self.sizes) + " holds");
    }
    const std::optional<int64_t> padded = checked_add(sizes[d], pad[2 * i]);
    const std::optional<int64_t> both = padded ? checked_add(*padded, pad[2 * i + 1]) : padded;
    if (!both) return ctx.error("padding dim " + std::to_string(d) + " overflows a 64-bit size");
    sizes[d] = *both;
    if (sizes[d] < 0) {
      return ctx.error("padding makes dim " + std::to_string(d) + " of self " +
                       shape_str(self.sizes) + " negative");
    }
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 3), sizes, self.dtype));
  // Where the part of self the cropping leaves goes.
  PadCopy c;
  c.in_strides = contiguous_strides(self.sizes);
  c.out_strides = contiguous_strides(sizes);
  c.region.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t src0 = std::max<int64_t>(-before[d], 0);
    const int64_t dst0 = std::max<int64_t>(before[d], 0);
    c.region[d] = std::min(self.sizes[d] - src0, sizes[d] - dst0);
    if (c.region[d] <= 0) {
      c.region.clear();
      break;
    }
    c.in_offset += src0 * c.in_strides[d];
    c.out_offset += dst0 * c.out_strides[d];
  }
  return c;
}

Result<std::vector<int64_t>> view_sizes(const KernelContext& ctx, const TensorView& self,
                                        std::span<const int64_t> size, const char* arg) {
  std::vector<int64_t> sizes(size.begin(), size.end());
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer_at < 0) {
      infer_at = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return ctx.error(std::string(arg) + " " + shape_str(size) +
                       " is invalid (a negative size, or more than one -1)");
    } else {
      auto k = checked_mul(known, sizes[i]);
      if (!k) return ctx.error(std::string(arg) + " " + shape_str(sizes) + " is too large");
      known = *k;
    }
  }
  const int64_t numel = self.numel();
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      return ctx.error(std::string(arg) + " " + shape_str(sizes) + " is invalid for an input of " +
                       std::to_string(numel) + " elements");
    }
    sizes[static_cast<size_t>(infer_at)] = numel / known;
  } else if (known != numel) {
    return ctx.error(std::string(arg) + " " + shape_str(sizes) + " has " + std::to_string(known) +
                     " elements but self " + shape_str(self.sizes) + " has " +
                     std::to_string(numel));
  }
  return sizes;
}

Result<std::vector<int64_t>> squeeze_dim_sizes(const KernelContext& ctx, const TensorView& self,
                                               int64_t dim) {
  ETC_ASSIGN_OR_RETURN(int64_t w, wrap_dim(ctx, "dim", dim, static_cast<int64_t>(self.rank())));
  std::vector<int64_t> sizes = self.sizes;
  if (self.rank() > 0 && sizes[static_cast<size_t>(w)] == 1) sizes.erase(sizes.begin() + w);
  return sizes;
}

Result<std::vector<int64_t>> squeeze_dims_sizes(const KernelContext& ctx, const TensorView& self,
                                                std::span<const int64_t> dims) {
  const auto rank = static_cast<int64_t>(self.rank());
  std::vector<bool> drop(self.rank(), false);
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(int64_t w, wrap_dim(ctx, "dim", d, rank));
    if (rank > 0 && self.sizes[static_cast<size_t>(w)] == 1) drop[static_cast<size_t>(w)] = true;
  }
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < self.rank(); ++i) {
    if (!drop[i]) sizes.push_back(self.sizes[i]);
  }
  return sizes;
}

Result<std::vector<int64_t>> unsqueeze_sizes(const KernelContext& ctx, const TensorView& self,
                                             int64_t dim) {
  const auto rank = static_cast<int64_t>(self.rank());
  if (dim < -(rank + 1) || dim > rank) {
    return ctx.error("dim " + std::to_string(dim) +
                     " is out of range for unsqueezing a tensor of rank " + std::to_string(rank));
  }
  std::vector<int64_t> sizes = self.sizes;
  sizes.insert(sizes.begin() + (dim < 0 ? dim + rank + 1 : dim), 1);
  return sizes;
}

Result<std::vector<int64_t>> expand_sizes(const KernelContext& ctx, const TensorView& self,
                                          std::span<const int64_t> size_arg) {
  std::vector<int64_t> size(size_arg.begin(), size_arg.end());
  if (size.size() < self.rank()) {
    return ctx.error("cannot expand " + shape_str(self.sizes) + " to fewer dims " +
                     shape_str(size));
  }
  const size_t lead = size.size() - self.rank();
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) return ctx.error("-1 is not allowed for a new leading dim");
      continue;
    }
    const int64_t have = self.sizes[i - lead];
    if (size[i] == -1) size[i] = have;
    if (have != size[i] && have != 1) {
      return ctx.error("cannot expand " + shape_str(self.sizes) + " to " + shape_str(size_arg) +
                       ": dim " + std::to_string(i) + " has size " + std::to_string(have));
    }
  }
  return size;
}

Status register_shape_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Cat, cat_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Clone, clone_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::ConstantPadNd, constant_pad_nd_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Expand, expand_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Permute, permute_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SelectInt, select_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SliceTensor, slice_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SqueezeDim, squeeze_dim_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SqueezeDims, squeeze_dims_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::TransposeInt, transpose_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Unsqueeze, unsqueeze_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::View, view_kernel));
  // These two return an Int and a view: they check their own arguments.
  ETC_RETURN_IF_ERROR(r.add("aten::sym_size.int", sym_size_kernel));
  ETC_RETURN_IF_ERROR(r.add("executorch_prim::et_view.default", et_view_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Reshape, reshape_kernel, KernelForms::kFunctional));
  return Status();
}

}  // namespace etc::rt::kernels
