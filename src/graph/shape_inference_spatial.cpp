// Shape inference: convolution, pooling, resizing, sampling and the ONNX ops of data-dependent
// size.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/shape_inference_helpers.h"

namespace etc::infer {

// ---- Convolution and pooling ----------------------------------------------------------

Status infer_convolution(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& w = ctx.tensor("weight");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "weight", w, {4}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "weight", w, x.dtype));
  bool transposed = ctx.bool_arg("transposed");
  int64_t groups = ctx.int_arg("groups");
  if (groups <= 0)
    return ctx.error("groups", "groups must be positive, got " + std::to_string(groups));
  ETC_ASSIGN_OR_RETURN(auto stride, pair_arg(ctx, "stride", ctx.int_list("stride"), 1, false));
  ETC_ASSIGN_OR_RETURN(auto pad, pair_arg(ctx, "padding", ctx.int_list("padding"), 0, false));
  ETC_ASSIGN_OR_RETURN(auto dil, pair_arg(ctx, "dilation", ctx.int_list("dilation"), 1, false));
  ETC_ASSIGN_OR_RETURN(auto opad,
                       pair_arg(ctx, "output_padding", ctx.int_list("output_padding"), 0, true));
  for (int i = 0; i < 2; ++i) {
    if (stride[i] <= 0) return ctx.error("stride", "stride must be positive");
    if (dil[i] <= 0) return ctx.error("dilation", "dilation must be positive");
    if (pad[i] < 0) return ctx.error("padding", "padding must not be negative");
    if (opad[i] < 0 || (opad[i] > 0 && !transposed)) {
      return ctx.error("output_padding", "output_padding must be 0 unless transposed");
    }
  }
  int64_t c_in = x.sizes[1];
  int64_t c_out = 0;
  if (!transposed) {
    if (w.sizes[0] % groups != 0) {
      return ctx.error("weight", "out channels " + std::to_string(w.sizes[0]) +
                                     " are not divisible by groups " + std::to_string(groups));
    }
    const std::optional<int64_t> expected = checked_mul(w.sizes[1], groups);
    if (expected != c_in) {
      return ctx.error("weight", "weight " + w.type_string() +
                                     " with groups=" + std::to_string(groups) + " expects " +
                                     (expected ? std::to_string(*expected) : "more") +
                                     " input channels, but input " + x.type_string() + " has " +
                                     std::to_string(c_in));
    }
    c_out = w.sizes[0];
  } else {
    if (w.sizes[0] != c_in) {
      return ctx.error("weight", "transposed weight " + w.type_string() + " expects " +
                                     std::to_string(w.sizes[0]) + " input channels, but input " +
                                     x.type_string() + " has " + std::to_string(c_in));
    }
    if (c_in % groups != 0) {
      return ctx.error("groups", "input channels " + std::to_string(c_in) +
                                     " are not divisible by groups " + std::to_string(groups));
    }
    const std::optional<int64_t> channels = checked_mul(w.sizes[1], groups);
    if (!channels) {
      return ctx.error("groups", "weight " + w.type_string() + " with groups=" +
                                     std::to_string(groups) + " overflows a 64-bit size");
    }
    c_out = *channels;
  }
  if (const TensorSpec* b = ctx.optional_tensor("bias")) {
    if (b->rank() != 1 || b->sizes[0] != c_out) {
      return ctx.error("bias", "expected bias of shape [" + std::to_string(c_out) + "], got " +
                                   b->type_string());
    }
  }
  Sizes sizes{x.sizes[0], c_out, 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t in = x.sizes[2 + i];
    int64_t k = w.sizes[2 + i];
    int64_t o = 0;
    if (!transposed) {
      const std::optional<SlidingWindow> win = sliding_window(in, k, pad[i], stride[i], dil[i]);
      if (!win) return ctx.error("padding", "kernel extent or padding overflows a 64-bit size");
      if (win->count == 0) {
        return ctx.error("weight", "kernel of extent " + std::to_string(win->span) +
                                       " is larger than the padded input (" +
                                       std::to_string(win->padded) + ")");
      }
      o = win->count;
    } else {
      const std::optional<int64_t> extent =
          transposed_window_extent(in, k, pad[i], stride[i], dil[i], opad[i]);
      if (!extent)
        return ctx.error("padding", "transposed convolution output size overflows a 64-bit size");
      if (*extent <= 0) return ctx.error("padding", "transposed convolution output would be empty");
      o = *extent;
    }
    sizes[2 + i] = o;
  }
  out.push_back({x.dtype, sizes});
  return Status();
}

Status infer_max_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  return pool2d(ctx, out, /*with_dilation=*/true);
}

Status infer_max_pool2d_with_indices(const InferContext& ctx, std::vector<TensorType>& out) {
  ETC_RETURN_IF_ERROR(pool2d(ctx, out, /*with_dilation=*/true));
  out.push_back({DType::kInt64, out[0].sizes});
  return Status();
}

Status infer_avg_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  if (auto d = ctx.optional_int("divisor_override"); d && *d == 0) {
    return ctx.error("divisor_override", "divisor must not be zero");
  }
  return pool2d(ctx, out, /*with_dilation=*/false);
}

// Output size: output_size, or floor(input * scale) per spatial dim; exactly one is given.
Status infer_upsample2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const Sizes* os = ctx.optional_int_list("output_size");
  const std::vector<double>* scales = ctx.optional_float_list("scale_factors");
  if ((os == nullptr) == (scales == nullptr)) {
    return ctx.error("output_size", "exactly one of output_size and scale_factors must be given");
  }
  Sizes sizes = x.sizes;
  for (size_t i = 0; i < 2; ++i) {
    int64_t v;
    if (os != nullptr) {
      if (os->size() != 2) return ctx.error("output_size", "expected two sizes, got " + str(*os));
      v = (*os)[i];
    } else {
      if (scales->size() != 2 || !((*scales)[i] > 0) || !std::isfinite((*scales)[i])) {
        return ctx.error("scale_factors", "expected two positive scale factors");
      }
      v = static_cast<int64_t>(std::floor(static_cast<double>(x.sizes[2 + i]) * (*scales)[i]));
    }
    if (v <= 0) return ctx.error(os ? "output_size" : "scale_factors", "the output would be empty");
    sizes[2 + i] = v;
  }
  out.push_back({x.dtype, sizes});
  return Status();
}

// grid_sampler_2d: input [N, C, H, W], grid [N, H_out, W_out, 2] -> [N, C, H_out, W_out];
// interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection.
Status infer_grid_sampler_2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  const TensorSpec& grid = ctx.tensor("grid");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "input", x, {4}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "grid", grid, {4}));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "grid", grid, x.dtype));
  if (grid.sizes[0] != x.sizes[0] || grid.sizes[3] != 2) {
    return ctx.error("grid", "expected a grid of [" + std::to_string(x.sizes[0]) +
                                 ", H_out, W_out, 2] for input " + x.type_string() + ", got " +
                                 grid.type_string());
  }
  const int64_t mode = ctx.int_arg("interpolation_mode"), pad = ctx.int_arg("padding_mode");
  if (mode < 0 || mode > 2) {
    return ctx.error(
        "interpolation_mode",
        "expected 0 (bilinear), 1 (nearest) or 2 (bicubic), got " + std::to_string(mode));
  }
  if (pad < 0 || pad > 2) {
    return ctx.error("padding_mode", "expected 0 (zeros), 1 (border) or 2 (reflection), got " +
                                         std::to_string(pad));
  }
  out.push_back({x.dtype, {x.sizes[0], x.sizes[1], grid.sizes[1], grid.sizes[2]}});
  return Status();
}

// onnx::non_zero: [rank, numel] int64 at most (one column per non-zero element).
Status infer_onnx_non_zero(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "expected a tensor of rank 1 or more");
  out.push_back({DType::kInt64, {static_cast<int64_t>(self.rank()), self.numel()}, true});
  return Status();
}

// nonzero: [numel, rank] int64 at most (one row per non-zero element; a 0-d input has rank 0
// and at most one row).
Status infer_nonzero(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  out.push_back({DType::kInt64, {self.numel(), static_cast<int64_t>(self.rank())}, true});
  return Status();
}

// onnx::non_max_suppression: boxes [B, S, 4], scores [B, C, S] -> [B * C * min(max, S), 3]
// int64 at most (batch, class, box of each selected box).
Status infer_onnx_non_max_suppression(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& boxes = ctx.tensor("boxes");
  const TensorSpec& scores = ctx.tensor("scores");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "boxes", boxes, {3}));
  ETC_RETURN_IF_ERROR(require_rank(ctx, "scores", scores, {3}));
  ETC_RETURN_IF_ERROR(require_float(ctx, "boxes", boxes));
  ETC_RETURN_IF_ERROR(require_same_dtype(ctx, "scores", scores, boxes.dtype));
  if (boxes.sizes[2] != 4 || scores.sizes[0] != boxes.sizes[0] ||
      scores.sizes[2] != boxes.sizes[1]) {
    return ctx.error("scores", "expected boxes [B, S, 4] and scores [B, C, S], got " +
                                   boxes.type_string() + " and " + scores.type_string());
  }
  const int64_t max = ctx.int_arg("max_output_boxes_per_class");
  if (max < 0) return ctx.error("max_output_boxes_per_class", "must not be negative");
  const int64_t per_class = std::min(max, boxes.sizes[1]);
  out.push_back({DType::kInt64, {scores.sizes[0] * scores.sizes[1] * per_class, 3}});
  return Status();
}

// onnx::unique: Y has self's shape (flattened without an axis) with at most as many slices
// along the axis; indices and counts one per unique slice at most; inverse_indices one per
// slice of self.
Status infer_onnx_unique(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::optional<int64_t> axis = ctx.optional_int("axis");
  Sizes y{self.numel()};
  int64_t n = self.numel();
  if (axis) {
    const auto r = static_cast<int64_t>(self.rank());
    if (*axis < -r || *axis >= r)
      return ctx.error("axis", "out of range for " + self.type_string());
    const int64_t a = *axis < 0 ? *axis + r : *axis;
    y = self.sizes;
    n = self.sizes[static_cast<size_t>(a)];
  }
  out.push_back({self.dtype, y});
  out.push_back({DType::kInt64, {n}});
  out.push_back({DType::kInt64, {n}});
  out.push_back({DType::kInt64, {n}});
  return Status();
}

Status infer_adaptive_avg_pool2d(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_rank(ctx, "self", self, {3, 4}));
  const Sizes& os = ctx.int_list("output_size");
  if (os.size() != 2 || os[0] <= 0 || os[1] <= 0) {
    return ctx.error("output_size", "expected two positive sizes, got " + str(os));
  }
  Sizes sizes = self.sizes;
  sizes[sizes.size() - 2] = os[0];
  sizes[sizes.size() - 1] = os[1];
  out.push_back({self.dtype, sizes});
  return Status();
}

}  // namespace etc::infer
