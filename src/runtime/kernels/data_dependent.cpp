// Kernels of ops whose output sizes depend on the data (aten::nonzero, onnx::non_zero,
// onnx::non_max_suppression, onnx::unique): each output is planned at its upper bound
// (dynamic-bound) and resized to what the data gives, as ExecuTorch's kernels resize_tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "runtime/kernels/kernel_util.h"

namespace etc::rt::kernels {
namespace {

// The row-major positions of self's non-zero elements (a NaN is non-zero), and a writer of
// their indices: index d of the k-th into out[k * k_step + d * d_step].
struct NonZero {
  std::vector<int64_t> hits;
  explicit NonZero(const TensorView& self) {
    const int64_t es = dtype_size(self.dtype);
    const auto* p = static_cast<const uint8_t*>(self.data);
    for (int64_t i = 0; i < self.numel(); ++i) {
      if (load_as_double(self.dtype, p + i * es) != 0) hits.push_back(i);
    }
  }
  int64_t count() const { return static_cast<int64_t>(hits.size()); }
  void write(const TensorView& self, int64_t* out, int64_t k_step, int64_t d_step) const {
    const std::vector<int64_t> strides = contiguous_strides(self.sizes);
    for (size_t k = 0; k < hits.size(); ++k) {
      for (size_t d = 0; d < self.rank(); ++d) {
        out[static_cast<int64_t>(k) * k_step + static_cast<int64_t>(d) * d_step] =
            hits[k] / strides[d] % self.sizes[d];
      }
    }
  }
};

// ONNX's NonZero: [rank, count] int64, one column per non-zero element.
Status non_zero_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const auto rank = static_cast<int64_t>(self.rank());
  if (rank == 0) return ctx.error("self must have rank 1 or more");
  const NonZero nz(self);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, std::vector<int64_t>{rank, nz.count()}, DType::kInt64));
  nz.write(self, out.data_as<int64_t>(), 1, nz.count());
  return Status();
}

// ATen's nonzero: [count, rank] int64, one row per non-zero element, in row-major order (a
// 0-d input gives [0 or 1, 0]).
Status nonzero_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const auto rank = static_cast<int64_t>(self.rank());
  const NonZero nz(self);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, std::vector<int64_t>{nz.count(), rank}, DType::kInt64));
  nz.write(self, out.data_as<int64_t>(), rank, 1);
  return Status();
}

// ONNX's NonMaxSuppression, as ONNX Runtime: per batch and class, the boxes scoring above
// the threshold in decreasing score (ties: lower index first), each kept unless its IoU
// with a kept box exceeds iou_threshold, at most max_output_boxes_per_class.
struct Box {
  double x0, y0, x1, y1;
};

Box box_at(const double* b, bool center) {
  if (center) {
    return {b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2};
  }
  // [y1, x1, y2, x2], either corner first.
  return {std::min(b[1], b[3]), std::min(b[0], b[2]), std::max(b[1], b[3]), std::max(b[0], b[2])};
}

bool overlaps(const Box& a, const Box& b, double threshold) {
  const double w = std::min(a.x1, b.x1) - std::max(a.x0, b.x0);
  const double h = std::min(a.y1, b.y1) - std::max(a.y0, b.y0);
  if (w <= 0 || h <= 0) return false;
  const double inter = w * h;
  const double area_a = (a.x1 - a.x0) * (a.y1 - a.y0), area_b = (b.x1 - b.x0) * (b.y1 - b.y0);
  const double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

Status non_max_suppression_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& boxes = a.tensor("boxes");
  const TensorView& scores = a.tensor("scores");
  TensorView& out = a.out();
  if (boxes.rank() != 3 || scores.rank() != 3 || boxes.sizes[2] != 4 ||
      scores.sizes[0] != boxes.sizes[0] || scores.sizes[2] != boxes.sizes[1]) {
    return ctx.error("expected boxes [B, S, 4] and scores [B, C, S], got " +
                     shape_str(boxes.sizes) + " and " + shape_str(scores.sizes));
  }
  const int64_t max_out = a.integer("max_output_boxes_per_class");
  const double iou = a.real("iou_threshold");
  const Value* score_threshold = a.opt_scalar("score_threshold");
  const bool center = a.flag("center_point_box");
  const int64_t batches = boxes.sizes[0], spatial = boxes.sizes[1], classes = scores.sizes[1];
  std::vector<double> bx(static_cast<size_t>(boxes.numel())),
      sc(static_cast<size_t>(scores.numel()));
  convert_elements(boxes.data, boxes.dtype, bx.data(), DType::kFloat64, boxes.numel());
  convert_elements(scores.data, scores.dtype, sc.data(), DType::kFloat64, scores.numel());
  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = sc.data() + (b * classes + c) * spatial;
      order.clear();
      for (int64_t i = 0; i < spatial; ++i) {
        if (score_threshold == nullptr || s[i] > score_threshold->scalar_as_double())
          order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box box = box_at(bx.data() + (b * spatial + i) * 4, center);
        bool suppressed = false;
        for (const Box& k : kept)
          suppressed = suppressed || overlaps(k, box, iou);
        if (suppressed) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  const auto count = static_cast<int64_t>(selected.size() / 3);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, std::vector<int64_t>{count, 3}, DType::kInt64));
  std::copy(selected.begin(), selected.end(), out.data_as<int64_t>());
  return Status();
}

// ONNX's Unique: the distinct slices of self along `axis` (elements when none), sorted or
// in order of first occurrence, with each one's first index and count and, for every
// slice of self, the index of its unique slice.
Status unique_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const bool sorted = a.flag("sorted");
  TensorView& y = a.out(0);
  TensorView& first = a.out(1);
  TensorView& inverse = a.out(2);
  TensorView& counts = a.out(3);
  const auto rank = static_cast<int64_t>(self.rank());
  int64_t axis = -1;
  if (!a["axis"].is_none()) {
    ETC_ASSIGN_OR_RETURN(axis, wrap_dim(ctx, "axis", a.integer("axis"), rank));
  }
  // Slices: n of them, each `inner` runs of `run` elements `stride` apart.
  const int64_t n = axis < 0 ? self.numel() : self.sizes[static_cast<size_t>(axis)];
  int64_t outer = 1, run = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= self.sizes[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; axis >= 0 && d < rank; ++d)
    run *= self.sizes[static_cast<size_t>(d)];
  const int64_t es = dtype_size(self.dtype);
  const auto* src = static_cast<const uint8_t*>(self.data);
  // Slice k's elements as doubles (an int64 as its exact value too, for equality).
  auto element = [&](int64_t k, int64_t j) {
    const int64_t o = j / run, r = j % run;
    return src + ((o * n + k) * run + r) * es;
  };
  const int64_t slice = outer * run;
  auto less = [&](int64_t p, int64_t q) {
    for (int64_t j = 0; j < slice; ++j) {
      const uint8_t* x = element(p, j);
      const uint8_t* z = element(q, j);
      if (self.dtype == DType::kInt64) {
        int64_t u, v;
        std::memcpy(&u, x, 8);
        std::memcpy(&v, z, 8);
        if (u != v) return u < v;
      } else {
        const double u = load_as_double(self.dtype, x), v = load_as_double(self.dtype, z);
        if (u != v) return u < v;
      }
    }
    return false;
  };
  auto same = [&](int64_t p, int64_t q) {
    for (int64_t j = 0; j < slice; ++j) {
      if (std::memcmp(element(p, j), element(q, j), static_cast<size_t>(es)) != 0) return false;
    }
    return true;
  };
  // Group equal slices: sort the indices (stably, so each group starts at its first).
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t{0});
  std::stable_sort(idx.begin(), idx.end(), less);
  std::vector<int64_t> group_first, group_count, group_of(static_cast<size_t>(n));
  for (size_t i = 0; i < idx.size(); ++i) {
    if (i == 0 || !same(idx[i - 1], idx[i])) {
      group_first.push_back(idx[i]);
      group_count.push_back(0);
    }
    group_of[static_cast<size_t>(idx[i])] = static_cast<int64_t>(group_first.size()) - 1;
    ++group_count.back();
  }
  const auto m = static_cast<int64_t>(group_first.size());
  // The output order of the groups: sorted (as grouped) or by first occurrence.
  std::vector<int64_t> order(static_cast<size_t>(m)), rank_of(static_cast<size_t>(m));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (!sorted) {
    std::sort(order.begin(), order.end(),
              [&](int64_t p, int64_t q) { return group_first[p] < group_first[q]; });
  }
  for (int64_t i = 0; i < m; ++i)
    rank_of[static_cast<size_t>(order[i])] = i;
  std::vector<int64_t> ysizes{m};
  if (axis >= 0) {
    ysizes = self.sizes;
    ysizes[static_cast<size_t>(axis)] = m;
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, y, ysizes, self.dtype, "Y"));
  ETC_RETURN_IF_ERROR(check_out(ctx, first, std::vector<int64_t>{m}, DType::kInt64, "indices"));
  ETC_RETURN_IF_ERROR(
      check_out(ctx, inverse, std::vector<int64_t>{n}, DType::kInt64, "inverse_indices"));
  ETC_RETURN_IF_ERROR(check_out(ctx, counts, std::vector<int64_t>{m}, DType::kInt64, "counts"));
  auto* dst = static_cast<uint8_t*>(y.data);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t g = order[static_cast<size_t>(i)];
    first.data_as<int64_t>()[i] = group_first[static_cast<size_t>(g)];
    counts.data_as<int64_t>()[i] = group_count[static_cast<size_t>(g)];
    for (int64_t j = 0; j < slice; ++j) {
      const int64_t o = j / run, r = j % run;
      std::memcpy(dst + ((o * m + i) * run + r) * es, element(group_first[g], j),
                  static_cast<size_t>(es));
    }
  }
  for (int64_t k = 0; k < n; ++k)
    inverse.data_as<int64_t>()[k] = rank_of[static_cast<size_t>(group_of[static_cast<size_t>(k)])];
  return Status();
}

}  // namespace

Status register_data_dependent_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Nonzero, nonzero_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::OnnxNonZero, non_zero_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::OnnxNonMaxSuppression, non_max_suppression_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::OnnxUnique, unique_kernel));
  return Status();
}

}  // namespace etc::rt::kernels
