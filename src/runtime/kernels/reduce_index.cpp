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
  ETC_ASSIGN_OR_RETURN(Lanes l, check_arg_reduce(ctx, args));
  TensorView& out = Args(ctx, args).out();
  if (out.numel() == 0) return Status();
  extreme_along<kMax>(args[0]->tensor, l, nullptr, out.data_as<int64_t>());
  return Status();
}

// max.dim_max / min.dim_min(self, int dim, bool keepdim=False, *, values, indices).
template <bool kMax>
Status max_dim_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(Lanes l, check_max_dim(ctx, args));
  const Args a(ctx, args);
  TensorView& values = a.out(0);
  if (values.numel() == 0) return Status();
  extreme_along<kMax>(args[0]->tensor, l, &values, a.out(1).data_as<int64_t>());
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

// The first k of each lane's order into values and indices (lanes of length k), as
// check_sort / check_topk describe them.
Status ordered(KernelContext& ctx, std::span<Value*> args, const OrderedLanes& o) {
  const TensorView& self = args[0]->tensor;
  const Args a(ctx, args);
  TensorView& values = a.out(0);
  TensorView& indices = a.out(1);
  if (values.numel() == 0) return Status();
  const Lanes& l = o.lanes;
  Lanes out = l;
  out.len = o.k;
  visit_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    T* v = values.data_as<T>();
    int64_t* ix = indices.data_as<int64_t>();
    std::vector<int64_t> idx;
    for (int64_t lane = 0; lane < l.count(); ++lane) {
      order_lane(x, l, lane, o.descending, o.k, idx);
      for (int64_t j = 0; j < o.k; ++j) {
        v[out.at(lane, j)] = x[l.at(lane, idx[static_cast<size_t>(j)])];
        ix[out.at(lane, j)] = idx[static_cast<size_t>(j)];
      }
    }
  });
  return Status();
}

// sort.values(self, int dim=-1, bool descending=False, *, values, indices): stable.
Status sort_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(OrderedLanes o, check_sort(ctx, args));
  return ordered(ctx, args, o);
}

// topk.values(self, k, int dim=-1, bool largest=True, bool sorted=True, *, values, indices):
// the k largest (smallest) in order, ties by index; unsorted output is sorted too.
Status topk_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_ASSIGN_OR_RETURN(OrderedLanes o, check_topk(ctx, args));
  return ordered(ctx, args, o);
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
