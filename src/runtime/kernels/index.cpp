// Advanced indexing and state write-back: index.Tensor, index_put (out-of-place and, as
// ExecuTorch's reinplaced KV-cache update, in place), and copy_ (a mutable buffer's write
// back at the end of an execution).
//
// Both index kernels walk `self[indices]` the same way: the result's dims are the index
// tensors' broadcast shape B plus the dims no index selects (see plan_index), and the dims
// after the last indexed one form a contiguous block of self that is copied whole.
#include <algorithm>
#include <cstring>

#include "graph/ops.h"
#include "runtime/kernels/kernel_util.h"

namespace etc::rt::kernels {
namespace {

// `self[indices]` laid out for copying: for each position of the result's head (every dim
// but the trailing block), the element offset in self; the trailing block is `block`
// contiguous elements of both self and the result.
struct IndexWalk {
  IndexPlan plan;
  int64_t block = 1;                 // elements per trailing block
  std::vector<int64_t> head;         // the result's head dims
  std::vector<int64_t> head_stride;  // per head dim: self stride (sliced dims), 0 for B dims
  std::vector<int> head_b_dim;       // per head dim: its index in B, or -1
  // Per indexed dim: the index tensor, its self stride and size, and its strides over B.
  struct Indexed {
    const TensorView* index;
    int64_t self_stride, self_size;
    std::vector<int64_t> b_strides;
  };
  std::vector<Indexed> indexed;
};

// The walk of a plan made by index_plan for these indices.
IndexWalk make_walk(const TensorView& self, const Value& indices, IndexPlan plan) {
  IndexWalk w;
  w.plan = std::move(plan);
  const std::vector<int64_t> strides = contiguous_strides(self.sizes);
  if (w.plan.indexed.empty()) {
    w.block = self.numel();
    return w;
  }
  const auto last = static_cast<size_t>(w.plan.indexed.back());
  size_t tail_rank = self.rank() - last - 1;
  for (size_t d = last + 1; d < self.rank(); ++d)
    w.block *= self.sizes[d];
  const size_t head_rank = w.plan.result.size() - tail_rank;
  // Sliced dims of self in order: they fill the result around B.
  std::vector<size_t> sliced;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (std::find(w.plan.indexed.begin(), w.plan.indexed.end(), static_cast<int>(d)) ==
        w.plan.indexed.end())
      sliced.push_back(d);
  }
  size_t next_sliced = 0;
  const size_t b_begin = w.plan.b_position, b_end = b_begin + w.plan.broadcast.size();
  for (size_t r = 0; r < head_rank; ++r) {
    w.head.push_back(w.plan.result[r]);
    if (r >= b_begin && r < b_end) {
      w.head_stride.push_back(0);
      w.head_b_dim.push_back(static_cast<int>(r - b_begin));
    } else {
      w.head_stride.push_back(strides[sliced[next_sliced++]]);
      w.head_b_dim.push_back(-1);
    }
  }
  for (int d : w.plan.indexed) {
    const TensorView* t = indices.tensors[static_cast<size_t>(d)];
    w.indexed.push_back({t, strides[static_cast<size_t>(d)], self.sizes[static_cast<size_t>(d)],
                         broadcast_strides(t->sizes, w.plan.broadcast)});
  }
  return w;
}

Result<IndexWalk> make_walk(const KernelContext& ctx, const TensorView& self,
                            const Value& indices) {
  ETC_ASSIGN_OR_RETURN(IndexPlan plan, index_plan(ctx, self, indices));
  return make_walk(self, indices, std::move(plan));
}

int64_t index_value(const TensorView& t, int64_t i) {
  return t.dtype == DType::kInt64 ? t.data_as<const int64_t>()[i]
                                  : static_cast<int64_t>(t.data_as<const int32_t>()[i]);
}

// Calls fn(result_block, self_offset) for every head position, in the result's order, with
// the element offset of the block in self; an index out of range is an error.
template <typename Fn>
Status walk(const KernelContext& ctx, const IndexWalk& w, Fn fn) {
  std::vector<int64_t> pos(w.head.size(), 0);
  int64_t count = 1;
  for (int64_t s : w.head)
    count *= s;
  std::vector<int64_t> b_pos(w.plan.broadcast.size(), 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (size_t r = 0; r < pos.size(); ++r) {
      if (w.head_b_dim[r] >= 0) {
        b_pos[static_cast<size_t>(w.head_b_dim[r])] = pos[r];
      } else {
        offset += pos[r] * w.head_stride[r];
      }
    }
    for (size_t k = 0; k < w.indexed.size(); ++k) {
      const IndexWalk::Indexed& ix = w.indexed[k];
      int64_t e = 0;
      for (size_t b = 0; b < b_pos.size(); ++b)
        e += b_pos[b] * ix.b_strides[b];
      int64_t i = index_value(*ix.index, e);
      if (i < -ix.self_size || i >= ix.self_size) {
        return ctx.error("index " + std::to_string(i) + " is out of range for dim " +
                         std::to_string(w.plan.indexed[k]) + " of size " +
                         std::to_string(ix.self_size));
      }
      if (i < 0) i += ix.self_size;
      offset += i * ix.self_stride;
    }
    fn(n, offset);
    for (size_t r = pos.size(); r-- > 0;) {  // odometer
      if (++pos[r] < w.head[r]) break;
      pos[r] = 0;
    }
  }
  return Status();
}

// index.Tensor_out(self, indices, *, out)
Status index_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 2);
  ETC_ASSIGN_OR_RETURN(IndexWalk w, make_walk(ctx, self, *args[1]));
  ETC_RETURN_IF_ERROR(check_out(ctx, out, w.plan.result, self.dtype));
  if (out.numel() == 0) return Status();
  const auto esize = static_cast<int64_t>(dtype_size(self.dtype));
  const auto* src = static_cast<const char*>(self.data);
  auto* dst = static_cast<char*>(out.data);
  const auto block_bytes = static_cast<size_t>(w.block * esize);
  if (w.indexed.size() == 1 && w.indexed[0].index->rank() == 1) {
    // One 1-D index (a gather along one dim: positions, columns): out[o, l, :] =
    // self[o, index[l], :], the index read and checked once instead of per block.
    const IndexWalk::Indexed& ix = w.indexed[0];
    const int64_t count = ix.index->numel();
    std::vector<int64_t> rows(static_cast<size_t>(count));
    for (int64_t l = 0; l < count; ++l) {
      int64_t i = index_value(*ix.index, l);
      if (i < -ix.self_size || i >= ix.self_size) {
        return ctx.error("index " + std::to_string(i) + " is out of range for dim " +
                         std::to_string(w.plan.indexed[0]) + " of size " +
                         std::to_string(ix.self_size));
      }
      rows[static_cast<size_t>(l)] = (i < 0 ? i + ix.self_size : i) * ix.self_stride;
    }
    const int64_t outer = out.numel() / (count * w.block);
    const int64_t outer_stride = ix.self_size * ix.self_stride;
    for (int64_t o = 0; o < outer; ++o) {
      char* d = dst + o * count * w.block * esize;
      const char* s = src + o * outer_stride * esize;
      if (w.block == 1 && esize == 4) {
        for (int64_t l = 0; l < count; ++l)
          std::memcpy(d + l * 4, s + rows[static_cast<size_t>(l)] * 4, 4);
        continue;
      }
      for (int64_t l = 0; l < count; ++l)
        std::memcpy(d + l * block_bytes, s + rows[static_cast<size_t>(l)] * esize, block_bytes);
    }
    return Status();
  }
  return walk(ctx, w, [&](int64_t n, int64_t offset) {
    std::memcpy(dst + n * w.block * esize, src + offset * esize, block_bytes);
  });
}

template <typename T>
void add_block(char* dst, const char* src, int64_t n, int64_t src_stride) {
  auto* d = reinterpret_cast<T*>(dst);
  const auto* s = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      d[i] = d[i] || s[i * src_stride];  // ATen's sum of bools saturates: logical or
    } else if constexpr (std::is_integral_v<T>) {
      // Integers wrap as ATen's do (no signed overflow).
      using U = std::make_unsigned_t<T>;
      d[i] = static_cast<T>(static_cast<U>(d[i]) + static_cast<U>(s[i * src_stride]));
    } else {
      d[i] += s[i * src_stride];
    }
  }
}

// The dtypes index_put accumulates in (ATen's, less the half-precision floats).
bool accumulates(DType d) {
  switch (d) {
    case DType::kFloat32:
    case DType::kFloat64:
    case DType::kInt64:
    case DType::kInt32:
    case DType::kInt16:
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

void add_elems(DType dtype, char* dst, const char* src, int64_t n, int64_t src_stride) {
  switch (dtype) {
    case DType::kFloat32:
      return add_block<float>(dst, src, n, src_stride);
    case DType::kFloat64:
      return add_block<double>(dst, src, n, src_stride);
    case DType::kInt64:
      return add_block<int64_t>(dst, src, n, src_stride);
    case DType::kInt32:
      return add_block<int32_t>(dst, src, n, src_stride);
    case DType::kInt16:
      return add_block<int16_t>(dst, src, n, src_stride);
    case DType::kInt8:
      return add_block<int8_t>(dst, src, n, src_stride);
    case DType::kUInt8:
      return add_block<uint8_t>(dst, src, n, src_stride);
    case DType::kBool:
      return add_block<bool>(dst, src, n, src_stride);
    default:
      return;  // refused by accumulates()
  }
}

// Writes `values` (broadcast to self[indices]) into out = self (already copied, or the same
// storage), adding when `accumulate`.
Status put_values(const KernelContext& ctx, const IndexWalk& w, const TensorView& values,
                  bool accumulate, TensorView& out) {
  const auto esize = static_cast<int64_t>(dtype_size(out.dtype));
  if (accumulate && !accumulates(out.dtype)) {
    return unsupported_dtype(ctx, "self (with accumulate=True)", out.dtype,
                             "float32, float64, an integer dtype or bool");
  }
  const std::vector<int64_t> vstrides = broadcast_strides(values.sizes, w.plan.result);
  // Values' stride over the head dims, and over the block (1 when values fill the block
  // contiguously, 0 when broadcast along it, else element by element).
  const size_t head_rank = w.head.size();
  bool block_contiguous = true, block_broadcast = true;
  {
    int64_t expect = 1;
    for (size_t r = w.plan.result.size(); r-- > head_rank;) {
      block_contiguous = block_contiguous && vstrides[r] == expect;
      block_broadcast = block_broadcast && vstrides[r] == 0;
      expect *= w.plan.result[r];
    }
  }
  std::vector<int64_t> head_pos(head_rank, 0);
  std::vector<int64_t> tail_sizes(w.plan.result.begin() + static_cast<long>(head_rank),
                                  w.plan.result.end());
  std::vector<int64_t> tail_vstrides(vstrides.begin() + static_cast<long>(head_rank),
                                     vstrides.end());
  auto* dst = static_cast<char*>(out.data);
  const auto* src = static_cast<const char*>(values.data);
  int64_t n_seen = -1;
  return walk(ctx, w, [&](int64_t n, int64_t offset) {
    // Head position of block n (the walk goes in order, so advance an odometer).
    if (n_seen >= 0) {
      for (size_t r = head_rank; r-- > 0;) {
        if (++head_pos[r] < w.head[r]) break;
        head_pos[r] = 0;
      }
    }
    n_seen = n;
    int64_t vbase = 0;
    for (size_t r = 0; r < head_rank; ++r)
      vbase += head_pos[r] * vstrides[r];
    char* d = dst + offset * esize;
    const char* s = src + vbase * esize;
    if (!accumulate && block_contiguous) {
      std::memcpy(d, s, static_cast<size_t>(w.block * esize));
      return;
    }
    if (accumulate && (block_contiguous || block_broadcast)) {
      add_elems(out.dtype, d, s, w.block, block_contiguous ? 1 : 0);
      return;
    }
    // General broadcast inside the block: element by element.
    std::vector<int64_t> t(tail_sizes.size(), 0);
    for (int64_t e = 0; e < w.block; ++e) {
      int64_t vo = 0;
      for (size_t k = 0; k < t.size(); ++k)
        vo += t[k] * tail_vstrides[k];
      if (accumulate) {
        add_elems(out.dtype, d + e * esize, s + vo * esize, 1, 0);
      } else {
        std::memcpy(d + e * esize, s + vo * esize, static_cast<size_t>(esize));
      }
      for (size_t k = t.size(); k-- > 0;) {
        if (++t[k] < tail_sizes[k]) break;
        t[k] = 0;
      }
    }
  });
}

// index_put.out(self, indices, values, accumulate, *, out) and ExecuTorch's in-place
// index_put_(self, indices, values, accumulate) -> self. `out` may be self's own storage
// (etc plans a KV-cache update in place); the copy is skipped then.
template <bool kInPlace>
Status index_put_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  TensorView& self = args[0]->tensor;
  const TensorView& values = tensor_arg(args, 2);
  TensorView& out = kInPlace ? self : out_arg(args, 4);
  ETC_ASSIGN_OR_RETURN(IndexPlan plan, check_index_put(ctx, args, kInPlace));
  const IndexWalk w = make_walk(self, *args[1], std::move(plan));
  if (out.data != self.data && self.nbytes() > 0)
    std::memcpy(out.data, self.data, static_cast<size_t>(self.nbytes()));
  return put_values(ctx, w, values, args[3]->b, out);
}

// copy_(self, src, non_blocking) -> self: src (broadcast, converted) written into self.
Status copy_inplace_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  TensorView& self = args[0]->tensor;
  const TensorView& src = tensor_arg(args, 1);
  if (!args[3]->is_tensor() || args[3]->tensor.data != self.data) {
    return ctx.error("the return value (argument 3) must be self");
  }
  auto b = broadcast_shapes(src.sizes, self.sizes);
  if (!b || *b != self.sizes) {
    return ctx.error("src of shape " + shape_str(src.sizes) + " does not broadcast to self's " +
                     shape_str(self.sizes));
  }
  if (src.data == self.data) return Status();
  if (src.sizes == self.sizes) {
    convert_elements(src.data, src.dtype, self.data, self.dtype, self.numel());
    return Status();
  }
  // Broadcast: element by element through the source's strides.
  const std::vector<int64_t> strides = broadcast_strides(src.sizes, self.sizes);
  const auto in_size = static_cast<int64_t>(dtype_size(src.dtype));
  const auto out_size = static_cast<int64_t>(dtype_size(self.dtype));
  std::vector<int64_t> pos(self.rank(), 0);
  for (int64_t n = 0; n < self.numel(); ++n) {
    int64_t o = 0;
    for (size_t r = 0; r < pos.size(); ++r)
      o += pos[r] * strides[r];
    convert_elements(static_cast<const char*>(src.data) + o * in_size, src.dtype,
                     static_cast<char*>(self.data) + n * out_size, self.dtype, 1);
    for (size_t r = pos.size(); r-- > 0;) {
      if (++pos[r] < self.sizes[r]) break;
      pos[r] = 0;
    }
  }
  return Status();
}

}  // namespace

Result<IndexPlan> check_index_put(const KernelContext& ctx, std::span<Value*> args, bool in_place) {
  TensorView& self = args[0]->tensor;
  const TensorView& values = tensor_arg(args, 2);
  if (in_place && (!args[4]->is_tensor() || args[4]->tensor.data != self.data))
    return ctx.error("the return value (argument 4) must be self");
  ETC_ASSIGN_OR_RETURN(IndexPlan plan, index_plan(ctx, self, *args[1]));
  if (values.dtype != self.dtype) {
    return ctx.error("values are " + values.describe() + ", self is " + self.describe() +
                     "; index_put needs one dtype");
  }
  auto b = broadcast_shapes(values.sizes, plan.result);
  if (!b || *b != plan.result) {
    return ctx.error("values of shape " + shape_str(values.sizes) +
                     " do not broadcast to the indexed shape " + shape_str(plan.result));
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, in_place ? self : out_arg(args, 4), self.sizes, self.dtype));
  return plan;
}

Result<IndexPlan> index_plan(const KernelContext& ctx, const TensorView& self,
                             const Value& indices) {
  std::vector<std::optional<std::vector<int64_t>>> shapes;
  for (size_t d = 0; d < indices.tensors.size(); ++d) {
    const TensorView* t = indices.tensors[d];
    if (t == nullptr) {
      shapes.emplace_back();
      continue;
    }
    if (t->dtype != DType::kInt64 && t->dtype != DType::kInt32) {
      return unsupported_dtype(ctx, ("index " + std::to_string(d)).c_str(), t->dtype,
                               "int64 or int32");
    }
    shapes.emplace_back(t->sizes);
  }
  Result<IndexPlan> plan = plan_index(self.sizes, shapes);
  if (!plan.ok()) return ctx.error(plan.status().message());
  return std::move(plan).value();
}

Status register_index_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::IndexTensor, index_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::IndexPut, index_put_kernel<false>));
  // The in-place forms ExecuTorch's programs use for state: KV-cache updates and copy-back.
  ETC_RETURN_IF_ERROR(r.add("aten::index_put_", kIndexPutInPlaceSchema, index_put_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add(
      "aten::copy_", "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
      copy_inplace_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
