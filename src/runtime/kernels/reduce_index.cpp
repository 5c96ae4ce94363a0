// Ops along one dim that give positions or running values: argmax / argmin, max.dim /
// min.dim, cumsum, sort and topk.
//
// Each views its contiguous input as [outer, len, inner] around the dim and works on the
// `outer * inner` lanes of `len` elements (stride `inner`). The order of values is ATen's:
// NaN is above every number (max and argmax pick it, the first one; sort puts it last going
// up), ties go to the lower index, and sorts are stable.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/kernels/kernel_util.h"
#include "support/wrapping_math.h"

namespace etc::rt::kernels {
namespace {

// [outer, len, inner] around `dim` of `sizes` (a 0-d tensor is one lane of one element).
struct Lanes {
  int64_t outer = 1, len = 1, inner = 1;
  int64_t at(int64_t lane, int64_t j) const {
    return (lane / inner * len + j) * inner + lane % inner;
  }
  int64_t count() const { return outer * inner; }
};

Lanes lanes_of(std::span<const int64_t> sizes, int64_t dim) {
  Lanes l;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) l.outer *= sizes[static_cast<size_t>(d)];
    if (d == dim) l.len = sizes[static_cast<size_t>(d)];
    if (d > dim) l.inner *= sizes[static_cast<size_t>(d)];
  }
  return l;
}

// Whether a comes before b in ascending order: numbers by value, NaN above all (two NaNs are
// equivalent, so a stable sort keeps them in order).
template <typename C>
bool ascending(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

// The sizes of a reduction over `dim` (0-d stays 0-d).
std::vector<int64_t> reduce_one(std::span<const int64_t> sizes, int64_t dim, bool keepdim) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d != dim) {
      out.push_back(sizes[static_cast<size_t>(d)]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

// The index of the greatest (kMax) or least element of each lane: the first NaN if there is
// one, else the first of the extreme values. Writes values (if given) and indices.
template <bool kMax>
void extreme_along(const TensorView& self, const Lanes& l, TensorView* values, int64_t* indices) {
  visit_dtype(self.dtype, [&]<typename T>() {
    using C = std::conditional_t<std::is_same_v<T, bool>, int64_t, ComputeT<T>>;
    const T* x = self.data_as<const T>();
    T* v = values != nullptr ? values->data_as<T>() : nullptr;
    for (int64_t lane = 0; lane < l.count(); ++lane) {
      int64_t best = 0;
      C bv = convert<C>(x[l.at(lane, 0)]);
      for (int64_t j = 1; j < l.len; ++j) {
        const C c = convert<C>(x[l.at(lane, j)]);
        bool better = kMax ? c > bv : c < bv;
        if constexpr (std::is_floating_point_v<C>) {
          if (std::isnan(bv)) break;  // the first NaN is the extreme either way
          better = better || std::isnan(c);
        }
        if (better) {
          best = j;
          bv = c;
        }
      }
      indices[lane] = best;
      if (v != nullptr) v[lane] = x[l.at(lane, best)];
    }
  });
}

// argmax.out / argmin.out(self, int? dim=None, bool keepdim=False, *, out).
template <bool kMax>
Status arg_reduce_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const bool keepdim = a.flag("keepdim");
  const Value& dim_arg = a["dim"];
  const auto rank = static_cast<int64_t>(self.rank());
  Lanes l;
  std::vector<int64_t> sizes;
  if (dim_arg.is_none()) {  // the flattened input
    l.len = self.numel();
    sizes.assign(keepdim ? self.rank() : 0, 1);
  } else {
    ETC_ASSIGN_OR_RETURN(int64_t dim, wrap_dim(ctx, "dim", dim_arg.i, rank));
    l = lanes_of(self.sizes, dim);
    sizes = reduce_one(self.sizes, dim, keepdim);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, DType::kInt64));
  if (out.numel() == 0) return Status();
  if (l.len == 0) return ctx.error("cannot take the index of an extreme over an empty dim");
  extreme_along<kMax>(self, l, nullptr, out.data_as<int64_t>());
  return Status();
}

// max.dim_max / min.dim_min(self, int dim, bool keepdim=False, *, values, indices).
template <bool kMax>
Status max_dim_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& values = a.out(0);
  TensorView& indices = a.out(1);
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const std::vector<int64_t> sizes = reduce_one(self.sizes, dim, a.flag("keepdim"));
  ETC_RETURN_IF_ERROR(check_out(ctx, values, sizes, self.dtype, "values"));
  ETC_RETURN_IF_ERROR(check_out(ctx, indices, sizes, DType::kInt64, "indices"));
  const Lanes l = lanes_of(self.sizes, dim);
  if (values.numel() == 0) return Status();
  if (l.len == 0) return ctx.error("cannot reduce over dim " + std::to_string(dim) + " of size 0");
  extreme_along<kMax>(self, l, &values, indices.data_as<int64_t>());
  return Status();
}

// cumsum.out(self, int dim, *, ScalarType? dtype=None, out): floats add in double, integers
// and bools in int64 (wrapping), each running sum rounded to the out's dtype.
Status cumsum_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(int64_t dim, check_cumsum(ctx, args));
  const TensorView& self = args[0]->tensor;
  TensorView& out = Args(ctx, args).out();
  const DType want = out.dtype;
  if (out.numel() == 0) return Status();
  const Lanes l = lanes_of(self.sizes, dim);
  auto run = [&]<typename Acc>() {
    visit_dtype(self.dtype, [&]<typename T>() {
      const T* x = self.data_as<const T>();
      visit_dtype(want, [&]<typename O>() {
        O* o = out.data_as<O>();
        for (int64_t lane = 0; lane < l.count(); ++lane) {
          Acc s = 0;
          for (int64_t j = 0; j < l.len; ++j) {
            const int64_t at = l.at(lane, j);
            if constexpr (std::is_integral_v<Acc>) {
              s = wrapping_add(s, convert<Acc>(x[at]));
            } else {
              s += convert<Acc>(x[at]);
            }
            o[at] = convert<O>(s);
          }
        }
      });
    });
  };
  if (dtype_is_float(want)) {
    run.template operator()<double>();
  } else {
    run.template operator()<int64_t>();
  }
  return Status();
}

// The positions of each lane in the order a stable sort gives (descending: the reverse
// order, NaN first, equal values still in index order), the first `k` of them.
template <typename T>
void order_lane(const T* x, const Lanes& l, int64_t lane, bool descending, int64_t k,
                std::vector<int64_t>& idx) {
  using C = std::conditional_t<std::is_same_v<T, bool>, int64_t, ComputeT<T>>;
  idx.resize(static_cast<size_t>(l.len));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  auto less = [&](int64_t i, int64_t j) {
    const C a = convert<C>(x[l.at(lane, i)]), b = convert<C>(x[l.at(lane, j)]);
    return descending ? ascending(b, a) : ascending(a, b);
  };
  if (k < l.len) {
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int64_t i, int64_t j) {
      // partial_sort is not stable: break ties by index.
      return less(i, j) || (!less(j, i) && i < j);
    });
  } else {
    std::stable_sort(idx.begin(), idx.end(), less);
  }
}

// The first k of each lane's order into values and indices (lanes of length k).
Status ordered(KernelContext& ctx, const TensorView& self, int64_t dim, bool descending, int64_t k,
               TensorView& values, TensorView& indices) {
  const Lanes l = lanes_of(self.sizes, dim);
  std::vector<int64_t> sizes = self.sizes;
  if (!sizes.empty()) sizes[static_cast<size_t>(dim)] = k;
  ETC_RETURN_IF_ERROR(check_out(ctx, values, sizes, self.dtype, "values"));
  ETC_RETURN_IF_ERROR(check_out(ctx, indices, sizes, DType::kInt64, "indices"));
  if (values.numel() == 0) return Status();
  Lanes o = l;
  o.len = k;
  visit_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    T* v = values.data_as<T>();
    int64_t* ix = indices.data_as<int64_t>();
    std::vector<int64_t> idx;
    for (int64_t lane = 0; lane < l.count(); ++lane) {
      order_lane(x, l, lane, descending, k, idx);
      for (int64_t j = 0; j < k; ++j) {
        v[o.at(lane, j)] = x[l.at(lane, idx[static_cast<size_t>(j)])];
        ix[o.at(lane, j)] = idx[static_cast<size_t>(j)];
      }
    }
  });
  return Status();
}

// sort.values(self, int dim=-1, bool descending=False, *, values, indices): stable.
Status sort_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  return ordered(ctx, self, dim, a.flag("descending"), len, a.out(0), a.out(1));
}

// topk.values(self, k, int dim=-1, bool largest=True, bool sorted=True, *, values, indices):
// the k largest (smallest) in order, ties by index; unsorted output is sorted too.
Status topk_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  const int64_t k = a.integer("k");
  if (k < 0 || k > len) {
    return ctx.error("k " + std::to_string(k) + " is out of range for dim " + std::to_string(dim) +
                     " of size " + std::to_string(len));
  }
  return ordered(ctx, self, dim, a.flag("largest"), k, a.out(0), a.out(1));
}

}  // namespace

Status register_reduce_index_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Argmax, arg_reduce_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Argmin, arg_reduce_kernel<false>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MaxDim, max_dim_kernel<true>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MinDim, max_dim_kernel<false>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Cumsum, cumsum_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sort, sort_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Topk, topk_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
