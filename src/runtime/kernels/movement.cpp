// ExecuTorch's portable out-variants for data movement and the reductions its edge dialect
// writes for them, which etc's own programs never call (the torch.export importer
// decomposes these ops into indexing, torch_ops_movement.cpp) but ExecuTorch's programs do:
// flip, gather, index_select, repeat, diagonal_copy, as_strided_copy,
// split_with_sizes_copy, slice_scatter, scatter (src, value, add), any over all or several
// dims and mean of every element. Each is declared here by its schema; check_args checks
// every call against it.
//
// The copies move elements bit for bit through strided_copy (offsets and strides in
// elements, negative for flip); the gathers and scatters walk the index tensor.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "runtime/kernels/kernel_util.h"

namespace etc::rt::kernels {
namespace {

std::vector<int64_t> strides_of(const TensorView& t) {
  return contiguous_strides(t.sizes);
}

// flip.out(self, dims, *, out): the flipped dims read backwards.
Status flip_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  std::vector<int64_t> strides = strides_of(self);
  int64_t offset = 0;
  std::vector<bool> seen(self.rank(), false);
  for (int64_t d : a.ints("dims")) {
    ETC_ASSIGN_OR_RETURN(int64_t w, wrap_dim(ctx, "dims", d, static_cast<int64_t>(self.rank())));
    if (self.rank() == 0) continue;
    const auto k = static_cast<size_t>(w);
    if (seen[k]) return ctx.error("dims lists dim " + std::to_string(w) + " twice");
    seen[k] = true;
    offset += (self.sizes[k] - 1) * strides[k];
    strides[k] = -strides[k];
  }
  if (out.numel() == 0) return Status();
  const int64_t elem = dtype_size(self.dtype);
  strided_copy(static_cast<const char*>(self.data) + offset * elem, strides, out.data,
               strides_of(out), out.sizes, elem);
  return Status();
}

// An index tensor's element i as int64 (int32 or int64 indices).
Result<std::vector<int64_t>> index_values(const KernelContext& ctx, const TensorView& index) {
  if (index.dtype != DType::kInt64 && index.dtype != DType::kInt32)
    return unsupported_dtype(ctx, "index", index.dtype, "int64 or int32");
  std::vector<int64_t> v(static_cast<size_t>(index.numel()));
  convert_elements(index.data, index.dtype, v.data(), DType::kInt64, index.numel());
  return v;
}

// Gather and scatter address self at every position p of the index's shape, with p[dim]
// replaced by index[p]: the element offsets, checked against self's bounds.
Result<std::vector<int64_t>> scatter_offsets(const KernelContext& ctx, const TensorView& self,
                                             const TensorView& index, int64_t dim) {
  if (index.rank() != self.rank()) {
    return ctx.error("index " + shape_str(index.sizes) + " must have the rank of self " +
                     shape_str(self.sizes));
  }
  for (size_t d = 0; d < self.rank(); ++d) {
    if (static_cast<int64_t>(d) != dim && index.sizes[d] > self.sizes[d]) {
      return ctx.error("index " + shape_str(index.sizes) + " is larger than self " +
                       shape_str(self.sizes) + " outside dim " + std::to_string(dim));
    }
  }
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, index_values(ctx, index));
  const std::vector<int64_t> strides = strides_of(self);
  const auto k = static_cast<size_t>(dim);
  const int64_t len = self.sizes[k];
  std::vector<int64_t> pos(index.rank(), 0), offsets(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t v = idx[i];
    if (v < -len || v >= len) {
      return ctx.error("index " + std::to_string(v) + " is out of range for dim " +
                       std::to_string(dim) + " of size " + std::to_string(len));
    }
    if (v < 0) v += len;
    int64_t o = 0;
    for (size_t d = 0; d < pos.size(); ++d)
      o += (d == k ? v : pos[d]) * strides[d];
    offsets[i] = o;
    for (size_t d = pos.size(); d-- > 0;) {
      if (++pos[d] < index.sizes[d]) break;
      pos[d] = 0;
    }
  }
  return offsets;
}

// gather.out(self, dim, index, *, sparse_grad, out): out[p] = self[p with p[dim] = index[p]].
Status gather_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const TensorView& index = a.tensor("index");
  TensorView& out = a.out();
  if (self.rank() == 0) return ctx.error("gather of a 0-d tensor is not supported");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, index.sizes, self.dtype));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, scatter_offsets(ctx, self, index, dim));
  const auto elem = static_cast<size_t>(dtype_size(self.dtype));
  const auto* src = static_cast<const char*>(self.data);
  auto* dst = static_cast<char*>(out.data);
  for (size_t i = 0; i < offsets.size(); ++i)
    std::memcpy(dst + i * elem, src + static_cast<size_t>(offsets[i]) * elem, elem);
  return Status();
}

// scatter.src_out, scatter.value_out, scatter_add.out: out = self with the addressed
// elements set to src's (or value), or src's added (in index order).
enum class Scatter { kSrc, kValue, kAdd };

template <Scatter kMode>
Status scatter_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const TensorView& index = a.tensor("index");
  TensorView& out = a.out();
  if (self.rank() == 0) return ctx.error("scatter into a 0-d tensor is not supported");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, scatter_offsets(ctx, self, index, dim));
  if (out.data != self.data && out.nbytes() > 0)
    std::memcpy(out.data, self.data, static_cast<size_t>(out.nbytes()));
  if (offsets.empty()) return Status();
  if constexpr (kMode == Scatter::kValue) {
    const Value& v = a["value"];
    TensorView one{nullptr, self.dtype, {}, self.device};
    std::vector<char> bytes(static_cast<size_t>(dtype_size(self.dtype)));
    one.data = bytes.data();
    fill_scalar(one, v);
    for (int64_t o : offsets) {
      std::memcpy(static_cast<char*>(out.data) + o * dtype_size(self.dtype), bytes.data(),
                  bytes.size());
    }
    return Status();
  } else {
    const TensorView& src = a.tensor("src");
    if (src.rank() != index.rank()) return ctx.error("src must have the rank of index");
    for (size_t d = 0; d < src.rank(); ++d) {
      if (src.sizes[d] < index.sizes[d]) {
        return ctx.error("src " + shape_str(src.sizes) + " is smaller than index " +
                         shape_str(index.sizes));
      }
    }
    // The src element at each index position (src may be larger than index).
    std::vector<int64_t> src_strides = strides_of(src), pos(index.rank(), 0);
    return visit_dtype(self.dtype, [&]<typename T>() -> Status {
      ReadAs<T> s(src);
      T* o = out.data_as<T>();
      for (size_t i = 0; i < offsets.size(); ++i) {
        int64_t so = 0;
        for (size_t d = 0; d < pos.size(); ++d)
          so += pos[d] * src_strides[d];
        if constexpr (kMode == Scatter::kAdd) {
          using C = ComputeT<T>;
          o[offsets[i]] =
              convert<T>(wrapping_add(convert<C>(o[offsets[i]]), convert<C>(s.data()[so])));
        } else {
          o[offsets[i]] = s.data()[so];
        }
        for (size_t d = pos.size(); d-- > 0;) {
          if (++pos[d] < index.sizes[d]) break;
          pos[d] = 0;
        }
      }
      return Status();
    });
  }
}

// index_select.out(self, dim, index, *, out): the rows of dim that index names (a 0-d
// index keeps the dim, of size 1).
Status index_select_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const TensorView& index = a.tensor("index");
  TensorView& out = a.out();
  if (index.rank() > 1) return ctx.error("index must be 0-d or 1-D, got " + shape_str(index.sizes));
  const auto rank = static_cast<int64_t>(self.rank());
  ETC_ASSIGN_OR_RETURN(int64_t dim, wrap_dim(ctx, "dim", a.integer("dim"), rank));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, index_values(ctx, index));
  std::vector<int64_t> sizes = self.sizes;
  if (rank > 0) sizes[static_cast<size_t>(dim)] = static_cast<int64_t>(idx.size());
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  if (rank == 0) {
    if (idx.size() != 1 || (idx[0] != 0 && idx[0] != -1))
      return ctx.error("index must be 0 for a 0-d self");
    std::memcpy(out.data, self.data, static_cast<size_t>(self.nbytes()));
    return Status();
  }
  // [outer, len, inner] -> [outer, idx.size(), inner], a row of `inner` elements at a time.
  const auto k = static_cast<size_t>(dim);
  const int64_t len = self.sizes[k];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < k; ++d)
    outer *= self.sizes[d];
  for (size_t d = k + 1; d < self.rank(); ++d)
    inner *= self.sizes[d];
  const auto row = static_cast<size_t>(inner * dtype_size(self.dtype));
  const auto* src = static_cast<const char*>(self.data);
  auto* dst = static_cast<char*>(out.data);
  for (int64_t& v : idx) {
    if (v < -len || v >= len) {
      return ctx.error("index " + std::to_string(v) + " is out of range for dim " +
                       std::to_string(dim) + " of size " + std::to_string(len));
    }
    if (v < 0) v += len;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t j = 0; j < idx.size(); ++j) {
      std::memcpy(dst + (static_cast<size_t>(o) * idx.size() + j) * row,
                  src + static_cast<size_t>(o * len + idx[j]) * row, row);
    }
  }
  return Status();
}

// repeat.out(self, repeats, *, out): self tiled; each out position reads self at its
// position modulo self's size (self with leading 1s to the repeats' rank).
Status repeat_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const std::vector<int64_t>& repeats = a.ints("repeats");
  TensorView& out = a.out();
  if (repeats.size() < self.rank()) {
    return ctx.error("repeats " + shape_str(repeats) + " has fewer dims than self " +
                     shape_str(self.sizes));
  }
  std::vector<int64_t> in(repeats.size() - self.rank(), 1);
  in.insert(in.end(), self.sizes.begin(), self.sizes.end());
  // As [r0, s0, r1, s1, ...] over self's strides with 0 for the repeat dims.
  const std::vector<int64_t> in_strides = contiguous_strides(in);
  std::vector<int64_t> sizes, src_strides, out_sizes;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) return ctx.error("repeats " + shape_str(repeats) + " is negative");
    sizes.insert(sizes.end(), {repeats[d], in[d]});
    src_strides.insert(src_strides.end(), {0, in_strides[d]});
    out_sizes.push_back(repeats[d] * in[d]);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, out_sizes, self.dtype));
  if (out.numel() == 0) return Status();
  strided_copy(self.data, src_strides, out.data, contiguous_strides(sizes), sizes,
               dtype_size(self.dtype));
  return Status();
}

// diagonal_copy.out(self, offset, dim1, dim2, *, out): the diagonal of dims dim1 and dim2,
// last, after the other dims in order.
Status diagonal_copy_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const auto rank = static_cast<int64_t>(self.rank());
  if (rank < 2) return ctx.error("diagonal needs at least 2 dims, got " + shape_str(self.sizes));
  const int64_t offset = a.integer("offset");
  ETC_ASSIGN_OR_RETURN(int64_t d1, wrap_dim(ctx, "dim1", a.integer("dim1"), rank));
  ETC_ASSIGN_OR_RETURN(int64_t d2, wrap_dim(ctx, "dim2", a.integer("dim2"), rank));
  if (d1 == d2) return ctx.error("dim1 and dim2 are both " + std::to_string(d1));
  const std::vector<int64_t> st = strides_of(self);
  const auto k1 = static_cast<size_t>(d1), k2 = static_cast<size_t>(d2);
  const int64_t r0 = std::max<int64_t>(-offset, 0), c0 = std::max<int64_t>(offset, 0);
  const int64_t len = std::max<int64_t>(0, std::min(self.sizes[k1] - r0, self.sizes[k2] - c0));
  std::vector<int64_t> sizes, src_strides;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (d == k1 || d == k2) continue;
    sizes.push_back(self.sizes[d]);
    src_strides.push_back(st[d]);
  }
  sizes.push_back(len);
  src_strides.push_back(st[k1] + st[k2]);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, self.dtype));
  if (out.numel() == 0) return Status();
  const int64_t elem = dtype_size(self.dtype);
  strided_copy(static_cast<const char*>(self.data) + (r0 * st[k1] + c0 * st[k2]) * elem,
               src_strides, out.data, contiguous_strides(sizes), sizes, elem);
  return Status();
}

// The slice [start, end) by step of a dim of length len, as Python clamps it.
std::array<int64_t, 3> slice_range(const std::optional<int64_t>& start,
                                   const std::optional<int64_t>& end, int64_t step, int64_t len) {
  auto clamp = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
  const int64_t s = clamp(start.value_or(0));
  const int64_t e = std::max(s, clamp(end.value_or(len)));
  return {s, e, (e - s + step - 1) / step};
}

// split_with_sizes_copy.out(self, split_sizes, dim, *, out[]) -> (): each out a slice.
Status split_with_sizes_copy_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const std::vector<int64_t>& lengths = a.ints("split_sizes");
  const std::vector<TensorView*>& outs = a["out"].tensors;
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  if (self.rank() == 0) return ctx.error("split of a 0-d tensor");
  if (outs.size() != lengths.size()) {
    return ctx.error(std::to_string(lengths.size()) + " split sizes for " +
                     std::to_string(outs.size()) + " outs");
  }
  const auto k = static_cast<size_t>(dim);
  if (std::accumulate(lengths.begin(), lengths.end(), int64_t{0}) != self.sizes[k]) {
    return ctx.error("split_sizes " + shape_str(lengths) + " do not add up to " +
                     std::to_string(self.sizes[k]));
  }
  const std::vector<int64_t> st = strides_of(self);
  const int64_t elem = dtype_size(self.dtype);
  int64_t start = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<int64_t> sizes = self.sizes;
    sizes[k] = lengths[i];
    ETC_RETURN_IF_ERROR(check_out(ctx, *outs[i], sizes, self.dtype, "out"));
    if (outs[i]->numel() > 0) {
      strided_copy(static_cast<const char*>(self.data) + start * st[k] * elem, st, outs[i]->data,
                   contiguous_strides(sizes), sizes, elem);
    }
    start += lengths[i];
  }
  return Status();
}

// slice_scatter.out(self, src, dim, start, end, step, *, out): self with src written over
// the slice.
Status slice_scatter_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const TensorView& src = a.tensor("src");
  TensorView& out = a.out();
  if (self.rank() == 0) return ctx.error("slice_scatter into a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const int64_t step = a.integer("step");
  if (step <= 0) return ctx.error("step must be positive");
  auto opt = [&](const char* name) {
    const Value& v = a[name];
    return v.is_none() ? std::nullopt : std::optional<int64_t>(v.i);
  };
  const auto k = static_cast<size_t>(dim);
  const auto [s, e, count] = slice_range(opt("start"), opt("end"), step, self.sizes[k]);
  std::vector<int64_t> sizes = self.sizes;
  sizes[k] = count;
  if (src.sizes != sizes || src.dtype != self.dtype) {
    return ctx.error("src " + src.describe() + " does not fit the slice " + shape_str(sizes) +
                     " of self " + self.describe());
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  if (out.data != self.data && out.nbytes() > 0)
    std::memcpy(out.data, self.data, static_cast<size_t>(out.nbytes()));
  if (src.numel() == 0) return Status();
  std::vector<int64_t> dst_strides = strides_of(out);
  const int64_t elem = dtype_size(self.dtype);
  char* base = static_cast<char*>(out.data) + s * dst_strides[k] * elem;
  dst_strides[k] *= step;
  strided_copy(src.data, strides_of(src), base, dst_strides, sizes, elem);
  return Status();
}

// any.all_out(self, *, out) and any.dims_out(self, dim, keepdim, *, out): whether an element
// of the reduced dims is non-zero (NaN is non-zero).
template <bool kDims>
Status any_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const auto rank = static_cast<int64_t>(self.rank());
  std::vector<bool> reduced(self.rank(), true);
  bool keepdim = false;
  if constexpr (kDims) {
    const Value& dims = a["dim"];
    ETC_ASSIGN_OR_RETURN(reduced, reduced_dims(ctx, dims.is_none() ? nullptr : &dims.ints, rank));
    keepdim = a.flag("keepdim");
  }
  std::vector<int64_t> sizes, kept_sizes, kept_strides;
  const std::vector<int64_t> st = strides_of(self);
  std::vector<int64_t> red_sizes, red_strides;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (reduced[d]) {
      if (keepdim) sizes.push_back(1);
      red_sizes.push_back(self.sizes[d]);
      red_strides.push_back(st[d]);
    } else {
      sizes.push_back(self.sizes[d]);
      kept_sizes.push_back(self.sizes[d]);
      kept_strides.push_back(st[d]);
    }
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, DType::kBool));
  // Every element as "non-zero" bytes, then an OR over the reduced positions of each out.
  std::vector<uint8_t> nz(static_cast<size_t>(self.numel()));
  convert_elements(self.data, self.dtype, nz.data(), DType::kBool, self.numel());
  auto* o = out.data_as<uint8_t>();
  std::memset(o, 0, static_cast<size_t>(out.numel()));
  const int64_t kept_count = out.numel();
  std::vector<int64_t> kp(kept_sizes.size(), 0);
  for (int64_t i = 0; i < kept_count; ++i) {
    int64_t base = 0;
    for (size_t d = 0; d < kp.size(); ++d)
      base += kp[d] * kept_strides[d];
    std::vector<int64_t> rp(red_sizes.size(), 0);
    const int64_t red_count =
        std::accumulate(red_sizes.begin(), red_sizes.end(), int64_t{1}, std::multiplies<>());
    for (int64_t j = 0; j < red_count && !o[i]; ++j) {
      int64_t off = base;
      for (size_t d = 0; d < rp.size(); ++d)
        off += rp[d] * red_strides[d];
      o[i] = nz[static_cast<size_t>(off)];
      for (size_t d = rp.size(); d-- > 0;) {
        if (++rp[d] < red_sizes[d]) break;
        rp[d] = 0;
      }
    }
    for (size_t d = kp.size(); d-- > 0;) {
      if (++kp[d] < kept_sizes[d]) break;
      kp[d] = 0;
    }
  }
  return Status();
}

// mean.dtype_out(self, *, dtype, out): the mean of every element, summed in double in order.
Status mean_all_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const DType to =
      opt_dtype_arg(args, static_cast<size_t>(ctx.schema->arg_index("dtype"))).value_or(self.dtype);
  if (!dtype_is_float(to)) return unsupported_dtype(ctx, "out", to, "a floating-point dtype");
  ETC_RETURN_IF_ERROR(check_out(ctx, out, {}, to));
  std::vector<double> v(static_cast<size_t>(self.numel()));
  convert_elements(self.data, self.dtype, v.data(), DType::kFloat64, self.numel());
  double sum = 0;
  for (double x : v)
    sum += x;
  const double mean = sum / static_cast<double>(self.numel());
  convert_elements(&mean, DType::kFloat64, out.data, out.dtype, 1);
  return Status();
}

// as_strided_copy.out(self, size, stride, storage_offset, *, out): the elements at
// storage_offset + sum(i * stride) of self's (contiguous) storage; every one must be in it.
Status as_strided_copy_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const std::vector<int64_t>& size = a.ints("size");
  const std::vector<int64_t>& stride = a.ints("stride");
  TensorView& out = a.out();
  const Value& offset_value = a["storage_offset"];
  const int64_t offset = offset_value.is_none() ? 0 : offset_value.i;
  if (size.size() != stride.size()) {
    return ctx.error("size " + shape_str(size) + " and stride " + shape_str(stride) +
                     " differ in length");
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, size, self.dtype));
  if (out.numel() == 0) return Status();
  int64_t last = offset;
  for (size_t d = 0; d < size.size(); ++d) {
    if (stride[d] < 0) return ctx.error("negative strides are not supported");
    last += (size[d] - 1) * stride[d];
  }
  if (offset < 0 || last >= self.numel()) {
    return ctx.error("size " + shape_str(size) + ", stride " + shape_str(stride) + " and offset " +
                     std::to_string(offset) + " reach past self's " + std::to_string(self.numel()) +
                     " elements");
  }
  const int64_t elem = dtype_size(self.dtype);
  strided_copy(static_cast<const char*>(self.data) + offset * elem, stride, out.data,
               strides_of(out), size, elem);
  return Status();
}

}  // namespace

Status register_movement_kernels(OperatorRegistry& r) {
  struct Kernel {
    const char* name;
    const char* schema;
    KernelFn fn;
  };
  const Kernel kernels[] = {
      {"aten::flip.out", "flip.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)",
       flip_kernel},
      {"aten::gather.out",
       "gather.out(Tensor self, int dim, Tensor index, *, bool sparse_grad=False, Tensor(a!) out) "
       "-> Tensor(a!)",
       gather_kernel},
      {"aten::index_select.out",
       "index_select.out(Tensor self, int dim, Tensor index, *, Tensor(a!) out) -> Tensor(a!)",
       index_select_kernel},
      {"aten::repeat.out",
       "repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out) -> Tensor(a!)", repeat_kernel},
      {"aten::diagonal_copy.out",
       "diagonal_copy.out(Tensor self, int offset=0, int dim1=0, int dim2=1, *, Tensor(a!) out) -> "
       "Tensor(a!)",
       diagonal_copy_kernel},
      {"aten::split_with_sizes_copy.out",
       "split_with_sizes_copy.out(Tensor self, SymInt[] split_sizes, int dim=0, *, Tensor(a!)[] "
       "out) -> ()",
       split_with_sizes_copy_kernel},
      {"aten::slice_scatter.out",
       "slice_scatter.out(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? "
       "end=None, SymInt step=1, *, Tensor(a!) out) -> Tensor(a!)",
       slice_scatter_kernel},
      {"aten::scatter.src_out",
       "scatter.src_out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> "
       "Tensor(a!)",
       scatter_kernel<Scatter::kSrc>},
      {"aten::scatter.value_out",
       "scatter.value_out(Tensor self, int dim, Tensor index, Scalar value, *, Tensor(a!) out) -> "
       "Tensor(a!)",
       scatter_kernel<Scatter::kValue>},
      {"aten::scatter_add.out",
       "scatter_add.out(Tensor self, int dim, Tensor index, Tensor src, *, Tensor(a!) out) -> "
       "Tensor(a!)",
       scatter_kernel<Scatter::kAdd>},
      {"aten::any.all_out", "any.all_out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
       any_kernel<false>},
      {"aten::any.dims_out",
       "any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out) -> "
       "Tensor(a!)",
       any_kernel<true>},
      {"aten::as_strided_copy.out",
       "as_strided_copy.out(Tensor self, SymInt[] size, SymInt[] stride, SymInt? "
       "storage_offset=None, *, Tensor(a!) out) -> Tensor(a!)",
       as_strided_copy_kernel},
      {"aten::mean.dtype_out",
       "mean.dtype_out(Tensor self, *, ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
       mean_all_kernel},
  };
  for (const Kernel& k : kernels)
    ETC_RETURN_IF_ERROR(r.add(k.name, k.schema, k.fn));
  return Status();
}

}  // namespace etc::rt::kernels
