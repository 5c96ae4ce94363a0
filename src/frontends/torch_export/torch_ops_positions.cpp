// Decompositions that read or write a tensor at positions computed at import: im2col and
// col2im (F.unfold / F.fold: a gather from, or an accumulating index_put into, the padded
// image's flattened plane), pairwise distances (cdist, pdist: differences, then a p-norm over
// the last dim) and masked_scatter (the source's elements in order at the mask's true
// positions, through a running count of the mask) and grid_sampler_2d (gathers at the
// grid's points).
#include <cmath>
#include <limits>

#include "frontends/torch_export/torch_ops.h"
#include "graph/ops.h"

namespace etc::torch_import {
namespace {

// The sliding windows of im2col / col2im over an image of `height` x `width` (before padding).
struct Windows {
  int64_t kh = 0, kw = 0, dh = 0, dw = 0, ph = 0, pw = 0, sh = 0, sw = 0;
  int64_t padded_h = 0, padded_w = 0, out_h = 0, out_w = 0;

  // For each kernel offset k (row-major over kh x kw) and window l (row-major over out_h x
  // out_w): the flat position in the padded plane it reads.
  std::vector<int64_t> positions() const {
    std::vector<int64_t> p;
    p.reserve(static_cast<size_t>(kh * kw * out_h * out_w));
    for (int64_t ki = 0; ki < kh; ++ki) {
      for (int64_t kj = 0; kj < kw; ++kj) {
        for (int64_t oy = 0; oy < out_h; ++oy) {
          for (int64_t ox = 0; ox < out_w; ++ox)
            p.push_back((oy * sh + ki * dh) * padded_w + ox * sw + kj * dw);
        }
      }
    }
    return p;
  }
};

Result<Windows> windows(TorchNode& n, int64_t height, int64_t width) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> d, n.ints("dilation"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride"));
  auto two = [](std::vector<int64_t>& v) {
    if (v.size() == 1) v.push_back(v[0]);
    return v.size() == 2;
  };
  if (!two(k) || !two(d) || !two(p) || !two(s))
    return n.invalid("kernel_size, dilation, padding and stride take 1 or 2 values each");
  Windows w{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
  if (w.kh <= 0 || w.kw <= 0 || w.dh <= 0 || w.dw <= 0 || w.sh <= 0 || w.sw <= 0 || w.ph < 0 ||
      w.pw < 0) {
    return n.invalid("kernel_size, dilation and stride must be positive and padding not negative");
  }
  w.padded_h = height + 2 * w.ph;
  w.padded_w = width + 2 * w.pw;
  const int64_t span_h = w.dh * (w.kh - 1) + 1, span_w = w.dw * (w.kw - 1) + 1;
  if (span_h > w.padded_h || span_w > w.padded_w) {
    return n.invalid("a " + std::to_string(span_h) + "x" + std::to_string(span_w) +
                     " window does not fit the padded " + std::to_string(w.padded_h) + "x" +
                     std::to_string(w.padded_w) + " image");
  }
  w.out_h = (w.padded_h - span_h) / w.sh + 1;
  w.out_w = (w.padded_w - span_w) / w.sw + 1;
  ETC_RETURN_IF_ERROR(check_known_size(n, {w.kh * w.kw, w.out_h * w.out_w}));
  return w;
}

// im2col(self [N, C, H, W] or [C, H, W], kernel_size, dilation, padding, stride):
// [N, C * kh * kw, L], each column one window.
Status convert_im2col(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.size() != 3 && in.size() != 4)
    return n.invalid("im2col takes [C, H, W] or [N, C, H, W], not " + shape_to_string(in));
  const bool batched = in.size() == 4;
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(x, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", int64_t{0}}}));
  }
  const std::vector<int64_t> s = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(Windows w, windows(n, s[2], s[3]));
  if (w.ph != 0 || w.pw != 0) {
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::ConstantPadNd, {{"self", x},
                                          {"pad", std::vector<int64_t>{w.pw, w.pw, w.ph, w.ph}},
                                          {"value", Scalar{0.0}}}));
  }
  ETC_ASSIGN_OR_RETURN(
      x,
      n.emit(OpKind::Reshape,
             {{"self", x}, {"shape", std::vector<int64_t>{s[0], s[1], w.padded_h * w.padded_w}}}));
  const int64_t kernel = w.kh * w.kw, cols = w.out_h * w.out_w;
  ValueId pos = index_constant(n, {kernel, cols}, w.positions());
  ETC_ASSIGN_OR_RETURN(
      ValueId g,
      n.emit(OpKind::IndexTensor,
             {{"self", x}, {"indices", std::vector<ValueId>{ValueId{}, ValueId{}, pos}}}));
  std::vector<int64_t> shape{s[1] * kernel, cols};
  if (batched) shape.insert(shape.begin(), s[0]);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", g}, {"shape", shape}}));
  return n.set_output(0, out);
}

// col2im(self [N, C * kh * kw, L] or [C * kh * kw, L], output_size, kernel_size, dilation,
// padding, stride): [N, C, H, W], each column's values added back at its window's
// positions (F.fold), the padding cut off.
Status convert_col2im(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.size() != 2 && in.size() != 3) {
    return n.invalid("col2im takes [C * kh * kw, L] or [N, C * kh * kw, L], not " +
                     shape_to_string(in));
  }
  const bool batched = in.size() == 3;
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(x, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", int64_t{0}}}));
  }
  const std::vector<int64_t> s = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("output_size"));
  if (size.size() == 1) size.push_back(size[0]);
  if (size.size() != 2 || size[0] <= 0 || size[1] <= 0)
    return n.invalid("output_size must be two positive sizes");
  ETC_ASSIGN_OR_RETURN(Windows w, windows(n, size[0], size[1]));
  const int64_t kernel = w.kh * w.kw, cols = w.out_h * w.out_w;
  if (s[1] % kernel != 0) {
    return n.invalid("dim 1 of self (" + std::to_string(s[1]) +
                     ") is not a multiple of the kernel's " + std::to_string(kernel) + " elements");
  }
  if (s[2] != cols) {
    return n.invalid("self has " + std::to_string(s[2]) + " columns; the windows over " +
                     shape_to_string(size) + " are " + std::to_string(cols));
  }
  const int64_t batch = s[0], channels = s[1] / kernel;
  ETC_ASSIGN_OR_RETURN(
      x, n.emit(OpKind::Reshape,
                {{"self", x}, {"shape", std::vector<int64_t>{batch, channels, kernel, cols}}}));
  ETC_RETURN_IF_ERROR(check_known_size(n, {batch, channels, w.padded_h * w.padded_w}));
  ValueId zeros =
      n.constant(known_full(n.dtype(x), {batch, channels, w.padded_h * w.padded_w}, 0.0));
  ValueId pos = index_constant(n, {kernel, cols}, w.positions());
  ETC_ASSIGN_OR_RETURN(
      ValueId plane,
      n.emit(OpKind::IndexPut, {{"self", zeros},
                                {"indices", std::vector<ValueId>{ValueId{}, ValueId{}, pos}},
                                {"values", x},
                                {"accumulate", true}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId img,
      n.emit(OpKind::Reshape,
             {{"self", plane},
              {"shape", std::vector<int64_t>{batch, channels, w.padded_h, w.padded_w}}}));
  // The padding cut off.
  const int64_t crop[2][3] = {{2, w.ph, size[0]}, {3, w.pw, size[1]}};
  for (const auto& c : crop) {
    if (c[1] == 0) continue;
    ETC_ASSIGN_OR_RETURN(img, n.emit(OpKind::SliceTensor, {{"self", img},
                                                           {"dim", c[0]},
                                                           {"start", c[1]},
                                                           {"end", c[1] + c[2]},
                                                           {"step", int64_t{1}}}));
  }
  if (!batched) {
    ETC_ASSIGN_OR_RETURN(img, n.emit(OpKind::SqueezeDim, {{"self", img}, {"dim", int64_t{0}}}));
  }
  return n.set_output(0, img);
}

// The p-norm of `diff` over its last dim, as ATen's distance kernels define it: p = 0 counts
// the non-zero differences, p = inf takes the largest, else (sum |d|^p)^(1/p).
Result<ValueId> p_norm_last(TorchNode& n, ValueId diff, double p) {
  const int64_t last = static_cast<int64_t>(n.sizes(diff).size()) - 1;
  const std::vector<int64_t> dim{last};
  if (p == 0.0) {
    ETC_ASSIGN_OR_RETURN(ValueId nz,
                         n.emit(OpKind::NeScalar, {{"self", diff}, {"other", Scalar{0.0}}}));
    ETC_ASSIGN_OR_RETURN(nz, n.emit(OpKind::ToCopy, {{"self", nz}, {"dtype", n.dtype(diff)}}));
    return n.emit(OpKind::SumDimIntList, {{"self", nz}, {"dim", dim}, {"keepdim", false}});
  }
  ETC_ASSIGN_OR_RETURN(ValueId a, n.emit(OpKind::Abs, {{"self", diff}}));
  if (std::isinf(p)) {
    return n.emit(OpKind::Amax, {{"self", a}, {"dim", dim}, {"keepdim", false}});
  }
  if (p == 1.0)
    return n.emit(OpKind::SumDimIntList, {{"self", a}, {"dim", dim}, {"keepdim", false}});
  if (p == 2.0) {
    ETC_ASSIGN_OR_RETURN(ValueId sq, n.emit(OpKind::MulTensor, {{"self", diff}, {"other", diff}}));
    ETC_ASSIGN_OR_RETURN(ValueId sum, n.emit(OpKind::SumDimIntList,
                                             {{"self", sq}, {"dim", dim}, {"keepdim", false}}));
    return n.emit(OpKind::Sqrt, {{"self", sum}});
  }
  ETC_ASSIGN_OR_RETURN(ValueId pw,
                       n.emit(OpKind::PowTensorScalar, {{"self", a}, {"exponent", Scalar{p}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId sum, n.emit(OpKind::SumDimIntList, {{"self", pw}, {"dim", dim}, {"keepdim", false}}));
  return n.emit(OpKind::PowTensorScalar, {{"self", sum}, {"exponent", Scalar{1.0 / p}}});
}

Result<double> distance_p(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(double p, n.float_arg("p", 2.0));
  if (!(p >= 0)) return n.invalid("p must be a non-negative number");
  return p;
}

// _cdist_forward / cdist(x1 [.., P, M], x2 [.., R, M], p, compute_mode): [.., P, R], the
// p-norm distance of every pair of rows (the batch dims broadcast).
Status convert_cdist(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId a, n.tensor("x1"));
  ETC_ASSIGN_OR_RETURN(ValueId b, n.tensor("x2"));
  ETC_ASSIGN_OR_RETURN(double p, distance_p(n));
  const std::vector<int64_t> as = n.sizes(a);
  const std::vector<int64_t> bs = n.sizes(b);
  if (as.size() < 2 || bs.size() < 2) return n.invalid("cdist takes tensors of rank 2 or more");
  if (as.back() != bs.back()) {
    return n.invalid("x1 " + shape_to_string(as) + " and x2 " + shape_to_string(bs) +
                     " have rows of different lengths");
  }
  if (!dtype_is_float(n.dtype(a)) || n.dtype(a) != n.dtype(b))
    return n.invalid("cdist takes two floating-point tensors of one dtype");
  ETC_ASSIGN_OR_RETURN(
      ValueId a4,
      n.emit(OpKind::Unsqueeze, {{"self", a}, {"dim", static_cast<int64_t>(as.size()) - 1}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId b4,
      n.emit(OpKind::Unsqueeze, {{"self", b}, {"dim", static_cast<int64_t>(bs.size()) - 2}}));
  ETC_ASSIGN_OR_RETURN(ValueId diff, n.emit(OpKind::SubTensor, {{"self", a4}, {"other", b4}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, p_norm_last(n, diff, p));
  return n.set_output(0, out);
}

// _pdist_forward(self [N, M], p): the distances of the pairs of rows i < j, in row-major
// order ([N * (N - 1) / 2]).
Status convert_pdist(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(double p, distance_p(n));
  const std::vector<int64_t> s = n.sizes(x);
  if (s.size() != 2) return n.invalid("pdist takes [N, M], not " + shape_to_string(s));
  if (!dtype_is_float(n.dtype(x))) return n.invalid("pdist takes a floating-point tensor");
  std::vector<int64_t> first, second;
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t j = i + 1; j < s[0]; ++j) {
      first.push_back(i);
      second.push_back(j);
    }
  }
  const auto pairs = static_cast<int64_t>(first.size());
  ETC_RETURN_IF_ERROR(check_known_size(n, {pairs, s[1]}));
  ETC_ASSIGN_OR_RETURN(
      ValueId a,
      n.emit(OpKind::IndexTensor,
             {{"self", x}, {"indices", std::vector<ValueId>{index_constant(n, {pairs}, first)}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId b,
      n.emit(OpKind::IndexTensor,
             {{"self", x}, {"indices", std::vector<ValueId>{index_constant(n, {pairs}, second)}}}));
  ETC_ASSIGN_OR_RETURN(ValueId diff, n.emit(OpKind::SubTensor, {{"self", a}, {"other", b}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, p_norm_last(n, diff, p));
  return n.set_output(0, out);
}

// masked_scatter(self, mask, source): self with the mask's true positions (mask broadcast to
// self, in row-major order) taking source's elements one after another. The k-th true
// position takes source's element k: a running count of the mask, then a gather. ATen
// refuses a source with fewer elements than the mask selects; that count is known only at
// run time, and etc then repeats source's last element.
Status convert_masked_scatter(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId mask, n.tensor("mask"));
  ETC_ASSIGN_OR_RETURN(ValueId source, n.tensor("source"));
  if (n.dtype(mask) != DType::kBool) return n.invalid("mask must be a bool tensor");
  if (n.dtype(source) != n.dtype(x)) return n.invalid("source must have self's dtype");
  // self and mask broadcast together (the result has their common shape).
  const std::optional<std::vector<int64_t>> common = broadcast_shapes(n.sizes(x), n.sizes(mask));
  if (!common) {
    return n.invalid("mask " + shape_to_string(n.sizes(mask)) + " and self " +
                     shape_to_string(n.sizes(x)) + " do not broadcast");
  }
  const std::vector<int64_t> shape = *common;
  ETC_RETURN_IF_ERROR(check_known_size(n, shape));
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  const int64_t available = n.spec(source).numel();
  if (n.sizes(x) != shape) {
    ETC_ASSIGN_OR_RETURN(x, n.emit(OpKind::Expand, {{"self", x}, {"size", shape}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId m, n.emit(OpKind::Expand, {{"self", mask}, {"size", shape}}));
  ETC_ASSIGN_OR_RETURN(m,
                       n.emit(OpKind::Reshape, {{"self", m}, {"shape", std::vector<int64_t>{-1}}}));
  ETC_ASSIGN_OR_RETURN(ValueId flat,
                       n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{-1}}}));
  ValueId picked = flat;
  if (available > 0 && count > 0) {
    ETC_ASSIGN_OR_RETURN(
        ValueId k,
        n.emit(OpKind::Cumsum, {{"self", m}, {"dim", int64_t{0}}, {"dtype", DType::kInt64}}));
    ETC_ASSIGN_OR_RETURN(k,
                         n.emit(OpKind::SubScalar, {{"self", k}, {"other", Scalar{int64_t{1}}}}));
    ETC_ASSIGN_OR_RETURN(
        k, n.emit(OpKind::Clamp,
                  {{"self", k}, {"min", Scalar{int64_t{0}}}, {"max", Scalar{available - 1}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId src,
        n.emit(OpKind::Reshape, {{"self", source}, {"shape", std::vector<int64_t>{-1}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId taken,
        n.emit(OpKind::IndexTensor, {{"self", src}, {"indices", std::vector<ValueId>{k}}}));
    ETC_ASSIGN_OR_RETURN(
        picked, n.emit(OpKind::WhereSelf, {{"condition", m}, {"self", taken}, {"other", flat}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", picked}, {"shape", shape}}));
  return n.set_output(0, out);
}

// grid_sampler_2d's source coordinate along one dim of `size` for a grid value in [-1, 1]:
// unnormalized (the corner pixels' centres or edges at -1 and 1), then per padding mode
// clipped to the image (border) or reflected back into it and clipped (reflection).
Result<ValueId> grid_source(TorchNode& n, ValueId g, int64_t size, int64_t padding,
                            bool align_corners) {
  const auto s = static_cast<double>(size);
  auto lin = [&](ValueId v, double mul, double add) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::MulScalar, {{"self", v}, {"other", Scalar{mul}}}));
    return n.emit(OpKind::AddScalar, {{"self", v}, {"other", Scalar{add}}});
  };
  // align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2.
  ETC_ASSIGN_OR_RETURN(
      ValueId c, align_corners ? lin(g, (s - 1) / 2, (s - 1) / 2) : lin(g, s / 2, (s - 1) / 2));
  auto clip = [&](ValueId v) {
    return n.emit(OpKind::Clamp, {{"self", v}, {"min", Scalar{0.0}}, {"max", Scalar{s - 1}}});
  };
  if (padding == 1) return clip(c);
  if (padding == 2) {
    // Reflected over [low, high] (the centres, or the edges, of the end pixels): the distance
    // from low folded into the span, mirrored on odd folds.
    const double low = align_corners ? 0.0 : -0.5;
    const double span = align_corners ? s - 1 : s;
    if (span <= 0) {
      ETC_ASSIGN_OR_RETURN(ValueId z,
                           n.emit(OpKind::MulScalar, {{"self", c}, {"other", Scalar{0.0}}}));
      return z;
    }
    ETC_ASSIGN_OR_RETURN(ValueId d,
                         n.emit(OpKind::SubScalar, {{"self", c}, {"other", Scalar{low}}}));
    ETC_ASSIGN_OR_RETURN(d, n.emit(OpKind::Abs, {{"self", d}}));
    ETC_ASSIGN_OR_RETURN(ValueId extra,
                         n.emit(OpKind::FmodScalar, {{"self", d}, {"other", Scalar{span}}}));
    ETC_ASSIGN_OR_RETURN(ValueId flips,
                         n.emit(OpKind::DivScalar, {{"self", d}, {"other", Scalar{span}}}));
    ETC_ASSIGN_OR_RETURN(flips, n.emit(OpKind::Floor, {{"self", flips}}));
    ETC_ASSIGN_OR_RETURN(flips,
                         n.emit(OpKind::FmodScalar, {{"self", flips}, {"other", Scalar{2.0}}}));
    ETC_ASSIGN_OR_RETURN(ValueId even,
                         n.emit(OpKind::EqScalar, {{"self", flips}, {"other", Scalar{0.0}}}));
    ETC_ASSIGN_OR_RETURN(ValueId up,
                         n.emit(OpKind::AddScalar, {{"self", extra}, {"other", Scalar{low}}}));
    ETC_ASSIGN_OR_RETURN(ValueId down, lin(extra, -1.0, span + low));
    ETC_ASSIGN_OR_RETURN(
        ValueId r, n.emit(OpKind::WhereSelf, {{"condition", even}, {"self", up}, {"other", down}}));
    return clip(r);
  }
  return c;
}

// grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], interpolation_mode, padding_mode,
// align_corners) -> [N, C, Ho, Wo]: input sampled at the grid's (x, y) points, bilinear (0)
// or nearest (1, half to even), outside the image zeros (0), the border (1) or reflected (2).
// Each corner is a gather at clamped coordinates, weighted, and masked where it falls outside.
Status convert_grid_sampler_2d(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(ValueId grid, n.tensor("grid"));
  ETC_ASSIGN_OR_RETURN(int64_t mode, n.int_arg("interpolation_mode"));
  ETC_ASSIGN_OR_RETURN(int64_t padding, n.int_arg("padding_mode"));
  ETC_ASSIGN_OR_RETURN(bool align, n.bool_arg("align_corners"));
  const std::vector<int64_t> xs = n.sizes(x), gs = n.sizes(grid);
  if (xs.size() != 4 || gs.size() != 4 || gs[3] != 2 || gs[0] != xs[0]) {
    return n.invalid("grid_sampler_2d takes input [N, C, H, W] and grid [N, Ho, Wo, 2], not " +
                     shape_to_string(xs) + " and " + shape_to_string(gs));
  }
  if (mode == 2) return n.unsupported("grid_sampler_2d with bicubic interpolation");
  if (mode != 0 && mode != 1) return n.invalid("interpolation_mode must be 0, 1 or 2");
  if (padding < 0 || padding > 2) return n.invalid("padding_mode must be 0, 1 or 2");
  if (!dtype_is_float(n.dtype(x)) || n.dtype(grid) != n.dtype(x))
    return n.invalid("grid_sampler_2d takes a floating-point input and a grid of its dtype");
  const int64_t batch = xs[0], channels = xs[1], h = xs[2], w = xs[3];
  const DType dt = n.dtype(x);
  // The grid's x and y as [N, 1, Ho, Wo] (they broadcast over the channels).
  auto coord = [&](int64_t k) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(
        ValueId c, n.emit(OpKind::SelectInt, {{"self", grid}, {"dim", int64_t{3}}, {"index", k}}));
    return n.emit(OpKind::Unsqueeze, {{"self", c}, {"dim", int64_t{1}}});
  };
  ETC_ASSIGN_OR_RETURN(ValueId gx, coord(0));
  ETC_ASSIGN_OR_RETURN(ValueId gy, coord(1));
  ETC_ASSIGN_OR_RETURN(ValueId ix, grid_source(n, gx, w, padding, align));
  ETC_ASSIGN_OR_RETURN(ValueId iy, grid_source(n, gy, h, padding, align));
  std::vector<int64_t> bi(static_cast<size_t>(batch)), ci(static_cast<size_t>(channels));
  for (int64_t i = 0; i < batch; ++i)
    bi[static_cast<size_t>(i)] = i;
  for (int64_t i = 0; i < channels; ++i)
    ci[static_cast<size_t>(i)] = i;
  const ValueId batch_idx = index_constant(n, {batch, 1, 1, 1}, bi);
  const ValueId chan_idx = index_constant(n, {1, channels, 1, 1}, ci);
  // input at integer (py, px) (float tensors of whole numbers), 0 where outside the image.
  auto tap = [&](ValueId py, ValueId px) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(ValueId in_y0,
                         n.emit(OpKind::GeScalar, {{"self", py}, {"other", Scalar{0.0}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId in_y1,
        n.emit(OpKind::LeScalar, {{"self", py}, {"other", Scalar{static_cast<double>(h - 1)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId in_x0,
                         n.emit(OpKind::GeScalar, {{"self", px}, {"other", Scalar{0.0}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId in_x1,
        n.emit(OpKind::LeScalar, {{"self", px}, {"other", Scalar{static_cast<double>(w - 1)}}}));
    ETC_ASSIGN_OR_RETURN(ValueId inside,
                         n.emit(OpKind::LogicalAnd, {{"self", in_y0}, {"other", in_y1}}));
    ETC_ASSIGN_OR_RETURN(inside, n.emit(OpKind::LogicalAnd, {{"self", inside}, {"other", in_x0}}));
    ETC_ASSIGN_OR_RETURN(inside, n.emit(OpKind::LogicalAnd, {{"self", inside}, {"other", in_x1}}));
    auto index = [&](ValueId p, int64_t size) -> Result<ValueId> {
      ETC_ASSIGN_OR_RETURN(p,
                           n.emit(OpKind::Clamp, {{"self", p},
                                                  {"min", Scalar{0.0}},
                                                  {"max", Scalar{static_cast<double>(size - 1)}}}));
      return n.emit(OpKind::ToCopy, {{"self", p}, {"dtype", DType::kInt64}});
    };
    ETC_ASSIGN_OR_RETURN(ValueId yi, index(py, h));
    ETC_ASSIGN_OR_RETURN(ValueId xi, index(px, w));
    ETC_ASSIGN_OR_RETURN(
        ValueId v,
        n.emit(OpKind::IndexTensor,
               {{"self", x}, {"indices", std::vector<ValueId>{batch_idx, chan_idx, yi, xi}}}));
    ValueId zero = n.constant(KnownTensor{dt, {}, {0.0}});
    return n.emit(OpKind::WhereSelf, {{"condition", inside}, {"self", v}, {"other", zero}});
  };
  ValueId out;
  if (mode == 1) {
    ETC_ASSIGN_OR_RETURN(ValueId ry, n.emit(OpKind::Round, {{"self", iy}}));
    ETC_ASSIGN_OR_RETURN(ValueId rx, n.emit(OpKind::Round, {{"self", ix}}));
    ETC_ASSIGN_OR_RETURN(out, tap(ry, rx));
  } else {
    ETC_ASSIGN_OR_RETURN(ValueId y0, n.emit(OpKind::Floor, {{"self", iy}}));
    ETC_ASSIGN_OR_RETURN(ValueId x0, n.emit(OpKind::Floor, {{"self", ix}}));
    ETC_ASSIGN_OR_RETURN(ValueId y1,
                         n.emit(OpKind::AddScalar, {{"self", y0}, {"other", Scalar{1.0}}}));
    ETC_ASSIGN_OR_RETURN(ValueId x1,
                         n.emit(OpKind::AddScalar, {{"self", x0}, {"other", Scalar{1.0}}}));
    // Weights as ATen forms them: the opposite corner's distances.
    ETC_ASSIGN_OR_RETURN(ValueId wy1, n.emit(OpKind::SubTensor, {{"self", iy}, {"other", y0}}));
    ETC_ASSIGN_OR_RETURN(ValueId wy0, n.emit(OpKind::SubTensor, {{"self", y1}, {"other", iy}}));
    ETC_ASSIGN_OR_RETURN(ValueId wx1, n.emit(OpKind::SubTensor, {{"self", ix}, {"other", x0}}));
    ETC_ASSIGN_OR_RETURN(ValueId wx0, n.emit(OpKind::SubTensor, {{"self", x1}, {"other", ix}}));
    const std::pair<ValueId, ValueId> ys[2] = {{y0, wy0}, {y1, wy1}};
    const std::pair<ValueId, ValueId> xs2[2] = {{x0, wx0}, {x1, wx1}};
    bool first = true;
    for (const auto& [py, wy] : ys) {
      for (const auto& [px, wx] : xs2) {
        ETC_ASSIGN_OR_RETURN(ValueId v, tap(py, px));
        ETC_ASSIGN_OR_RETURN(ValueId wgt, n.emit(OpKind::MulTensor, {{"self", wy}, {"other", wx}}));
        ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::MulTensor, {{"self", v}, {"other", wgt}}));
        if (first) {
          out = v;
          first = false;
        } else {
          ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::AddTensor, {{"self", out}, {"other", v}}));
        }
      }
    }
  }
  return n.set_output(0, out);
}

}  // namespace

void add_position_converters(std::map<std::string, Converter>& t) {
  t["aten.im2col.default"] = convert_im2col;
  t["aten.col2im.default"] = convert_col2im;
  t["aten._cdist_forward.default"] = convert_cdist;
  t["aten.cdist.default"] = convert_cdist;
  t["aten._pdist_forward.default"] = convert_pdist;
  t["aten.pdist.default"] = convert_pdist;
  t["aten.masked_scatter.default"] = convert_masked_scatter;
  t["aten.grid_sampler_2d.default"] = convert_grid_sampler_2d;
  t["aten.grid_sampler.default"] = convert_grid_sampler_2d;
}

}  // namespace etc::torch_import
