// ONNX's element gathers and scatters, one-hot encodings, masks and index-built layouts ->
// IR. None of them needs an op of its own: GatherElements, GatherND and the scatters are
// index.Tensor / index_put with constant aranges for the dims the ONNX op walks in step;
// OneHot, Hardmax and Trilu compare positions (eq, where); Tile, DepthToSpace and
// SpaceToDepth are reshape / expand / permute; Einsum a product and a sum.
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"
#include "frontends/onnx/onnx_shapes.h"

namespace etc::onnx_import {
namespace {

Status check_index_type(NodeCtx& ctx, int i, const char* what) {
  if (ctx.dtype(i) != DType::kInt64 && ctx.dtype(i) != DType::kInt32)
    return ctx.invalid(std::string(what) + " must be int64 or int32");
  return Status();
}

// The index list that walks every dim of `shape` in step with the output, except `axis`,
// which takes `index` (GatherElements / ScatterElements): out[i0.., iA, ..] =
// data[i0.., index[i0.., iA, ..], ..]. The constant aranges broadcast to `shape`.
std::vector<ValueId> elementwise_indices(NodeCtx& ctx, const std::vector<int64_t>& shape,
                                         int64_t axis, ValueId index) {
  const auto r = static_cast<int64_t>(shape.size());
  std::vector<ValueId> indices;
  for (int64_t d = 0; d < r; ++d)
    indices.push_back(d == axis ? index : arange_along(ctx, shape[static_cast<size_t>(d)], d, r));
  return indices;
}

Result<int64_t> element_axis(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  if (r == 0) return ctx.invalid("data must have rank 1 or more");
  if (ctx.rank(1) != r) {
    return ctx.invalid("indices of rank " + std::to_string(ctx.rank(1)) + " for data of rank " +
                       std::to_string(r) + " (they must agree)");
  }
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", 0));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  return ctx.wrap_axis(axis, r);
}

// The components of ND indices [..., k] (index k along the last dim), each of shape [...].
Result<std::vector<ValueId>> nd_components(NodeCtx& ctx, ValueId index, int64_t k) {
  const int64_t last = ctx.rank(1) - 1;
  std::vector<ValueId> parts;
  for (int64_t j = 0; j < k; ++j) {
    ETC_ASSIGN_OR_RETURN(
        ValueId c, ctx.emit(OpKind::SelectInt, {{"self", index}, {"dim", last}, {"index", j}}));
    parts.push_back(c);
  }
  return parts;
}

// The value of an optional 'reduction' attribute as index_put's accumulate flag.
Result<bool> accumulate_of(NodeCtx& ctx) {
  Result<std::string> reduction = ctx.attr_string("reduction", "none");
  if (!reduction.ok()) return reduction.status();
  if (*reduction == "none") return false;
  if (*reduction == "add") return true;
  return ctx.unsupported("reduction '" + *reduction +
                         "' (only 'none', 'add' and, with indices known at export time, 'mul')");
}

// A scatter with reduction 'mul' whose index tuples (into data, non-negative) are known at
// export time: data times a tensor of ones with the updates (viewed as [tuples, rest...],
// `rows_shape`) put at the tuples. Tuples that repeat multiply each of their updates in:
// the updates go in layers, each tuple at most once per layer (index_put without
// accumulation keeps one value per index).
Status scatter_mul(NodeCtx& ctx, const std::vector<std::vector<int64_t>>& tuples,
                   const std::vector<int64_t>& rows_shape) {
  std::map<std::vector<int64_t>, int64_t> seen;
  std::vector<std::vector<int64_t>> rows_of_layer;
  std::vector<std::vector<std::vector<int64_t>>> tuples_of_layer;
  for (size_t j = 0; j < tuples.size(); ++j) {
    const auto layer = static_cast<size_t>(seen[tuples[j]]++);
    if (layer == rows_of_layer.size()) {
      rows_of_layer.emplace_back();
      tuples_of_layer.emplace_back();
    }
    rows_of_layer[layer].push_back(static_cast<int64_t>(j));
    tuples_of_layer[layer].push_back(tuples[j]);
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId updates, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(updates, reshape(ctx, updates, rows_shape));
  ETC_ASSIGN_OR_RETURN(ValueId ones,
                       ctx.emit(OpKind::FullLike, {{"self", x}, {"fill_value", Scalar{1.0}}}));
  const size_t k = tuples.empty() ? 0 : tuples[0].size();
  for (size_t layer = 0; layer < rows_of_layer.size(); ++layer) {
    const auto n = static_cast<int64_t>(rows_of_layer[layer].size());
    ValueId rows = ctx.add_constant(host_from_ints(DType::kInt64, {n}, rows_of_layer[layer]));
    ETC_ASSIGN_OR_RETURN(ValueId values,
                         ctx.emit(OpKind::IndexTensor,
                                  {{"self", updates}, {"indices", std::vector<ValueId>{rows}}}));
    std::vector<ValueId> indices;
    for (size_t d = 0; d < k; ++d) {
      std::vector<int64_t> component;
      for (const auto& t : tuples_of_layer[layer])
        component.push_back(t[d]);
      indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {n}, component)));
    }
    ETC_ASSIGN_OR_RETURN(ValueId factor, ctx.emit(OpKind::IndexPut, {{"self", ones},
                                                                     {"indices", indices},
                                                                     {"values", values},
                                                                     {"accumulate", false}}));
    ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", factor}}));
  }
  return ctx.set_output(0, x);
}

// `t[d]` checked against dim d of data and made non-negative.
Status wrap_index(NodeCtx& ctx, int64_t& i, size_t d) {
  const int64_t n = ctx.shape(0)[d];
  if (i < -n || i >= n) {
    return ctx.invalid("index " + std::to_string(i) + " is out of range for dim " +
                       std::to_string(d) + " of size " + std::to_string(n));
  }
  if (i < 0) i += n;
  return Status();
}

bool is_mul_reduction(NodeCtx& ctx) {
  Result<std::string> r = ctx.attr_string("reduction", "none");
  return r.ok() && *r == "mul";
}

}  // namespace

// GatherElements(data, indices; axis): index.Tensor with the indices on `axis` and aranges
// on the other dims.
Status convert_gather_elements(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_index_type(ctx, 1, "indices"));
  ETC_ASSIGN_OR_RETURN(int64_t axis, element_axis(ctx));
  for (int64_t d = 0; d < ctx.rank(0); ++d) {
    if (d != axis && ctx.shape(1)[d] > ctx.shape(0)[d]) {
      return ctx.invalid("indices " + shape_to_string(ctx.shape(1)) + " are larger than data " +
                         shape_to_string(ctx.shape(0)) + " outside axis " + std::to_string(axis));
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  std::vector<ValueId> indices = elementwise_indices(ctx, ctx.shape(1), axis, idx);
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return ctx.set_output(0, y);
}

// ScatterElements(data, indices, updates; axis, reduction) and Scatter (its opset 9-10
// name): index_put of updates at the same index list as GatherElements; reduction 'add'
// accumulates.
Status convert_scatter_elements(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_index_type(ctx, 1, "indices"));
  ETC_ASSIGN_OR_RETURN(int64_t axis, element_axis(ctx));
  if (ctx.shape(2) != ctx.shape(1)) {
    return ctx.invalid("updates " + shape_to_string(ctx.shape(2)) +
                       " must have the indices' shape " + shape_to_string(ctx.shape(1)));
  }
  if (ctx.dtype(2) != ctx.dtype(0)) return ctx.invalid("updates must have data's type");
  if (is_mul_reduction(ctx)) {
    // Each element of indices names data at its own position, `axis` replaced.
    ETC_ASSIGN_OR_RETURN(const HostTensor* idx,
                         ctx.require_constant(1, "the indices of a 'mul' reduction"));
    const std::vector<int64_t> flat = idx->ints();
    const std::vector<int64_t>& shape = ctx.shape(1);
    std::vector<std::vector<int64_t>> tuples;
    std::vector<int64_t> pos(shape.size(), 0);
    for (int64_t v : flat) {
      tuples.push_back(pos);
      tuples.back()[static_cast<size_t>(axis)] = v;
      ETC_RETURN_IF_ERROR(
          wrap_index(ctx, tuples.back()[static_cast<size_t>(axis)], static_cast<size_t>(axis)));
      for (size_t d = shape.size(); d-- > 0;) {
        if (++pos[d] < shape[d]) break;
        pos[d] = 0;
      }
    }
    return scatter_mul(ctx, tuples, {static_cast<int64_t>(tuples.size())});
  }
  ETC_ASSIGN_OR_RETURN(bool accumulate, accumulate_of(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId updates, ctx.input(2));
  std::vector<ValueId> indices = elementwise_indices(ctx, ctx.shape(1), axis, idx);
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::IndexPut, {{"self", x},
                                                              {"indices", indices},
                                                              {"values", updates},
                                                              {"accumulate", accumulate}}));
  return ctx.set_output(0, y);
}

// GatherND(data, indices [..., k]; batch_dims): index.Tensor with the k index components
// after aranges for the batch dims.
Status convert_gather_nd(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_index_type(ctx, 1, "indices"));
  ETC_ASSIGN_OR_RETURN(int64_t b, ctx.attr_int("batch_dims", 0));
  const int64_t r = ctx.rank(0), q = ctx.rank(1);
  if (q < 1) return ctx.invalid("indices must have rank 1 or more");
  const int64_t k = ctx.shape(1).back();
  if (b < 0 || b >= std::min(r, q) || k < 1 || b + k > r) {
    return ctx.invalid("batch_dims " + std::to_string(b) + " and index length " +
                       std::to_string(k) + " do not fit data of rank " + std::to_string(r) +
                       " and indices of rank " + std::to_string(q));
  }
  for (int64_t d = 0; d < b; ++d) {
    if (ctx.shape(0)[d] != ctx.shape(1)[d])
      return ctx.invalid("the batch dims of data and indices differ");
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  std::vector<ValueId> indices;
  for (int64_t d = 0; d < b; ++d)
    indices.push_back(arange_along(ctx, ctx.shape(0)[d], d, q - 1));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> parts, nd_components(ctx, idx, k));
  indices.insert(indices.end(), parts.begin(), parts.end());
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return ctx.set_output(0, y);
}

// ScatterND(data, indices [..., k], updates; reduction): index_put with the k index
// components.
Status convert_scatter_nd(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_index_type(ctx, 1, "indices"));
  const int64_t r = ctx.rank(0), q = ctx.rank(1);
  if (q < 1) return ctx.invalid("indices must have rank 1 or more");
  const int64_t k = ctx.shape(1).back();
  if (k < 1 || k > r) {
    return ctx.invalid("index length " + std::to_string(k) + " for data of rank " +
                       std::to_string(r));
  }
  if (ctx.dtype(2) != ctx.dtype(0)) return ctx.invalid("updates must have data's type");
  std::vector<int64_t> want(ctx.shape(1).begin(), ctx.shape(1).end() - 1);
  want.insert(want.end(), ctx.shape(0).begin() + k, ctx.shape(0).end());
  if (ctx.shape(2) != want) {
    return ctx.invalid("updates " + shape_to_string(ctx.shape(2)) + " must have shape " +
                       shape_to_string(want));
  }
  if (is_mul_reduction(ctx)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* idx,
                         ctx.require_constant(1, "the indices of a 'mul' reduction"));
    const std::vector<int64_t> flat = idx->ints();
    std::vector<std::vector<int64_t>> tuples;
    for (size_t j = 0; j + static_cast<size_t>(k) <= flat.size(); j += static_cast<size_t>(k)) {
      tuples.emplace_back(flat.begin() + static_cast<int64_t>(j),
                          flat.begin() + static_cast<int64_t>(j) + k);
      for (size_t d = 0; d < static_cast<size_t>(k); ++d)
        ETC_RETURN_IF_ERROR(wrap_index(ctx, tuples.back()[d], d));
    }
    std::vector<int64_t> rows_shape{static_cast<int64_t>(tuples.size())};
    rows_shape.insert(rows_shape.end(), ctx.shape(0).begin() + k, ctx.shape(0).end());
    return scatter_mul(ctx, tuples, rows_shape);
  }
  ETC_ASSIGN_OR_RETURN(bool accumulate, accumulate_of(ctx));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId updates, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> indices, nd_components(ctx, idx, k));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::IndexPut, {{"self", x},
                                                              {"indices", indices},
                                                              {"values", updates},
                                                              {"accumulate", accumulate}}));
  return ctx.set_output(0, y);
}

// OneHot(indices, depth, values [off, on]; axis=-1): where(indices (negative ones + depth,
// as int64) == arange(depth) along the new axis, on, off).
Status convert_one_hot(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* dt, ctx.require_constant(1, "depth"));
  if (dt->numel() != 1) return ctx.invalid("depth must hold one value");
  const auto depth = static_cast<int64_t>(dt->doubles()[0]);
  if (depth < 1) return ctx.invalid("depth must be positive, got " + std::to_string(depth));
  if (ctx.shape(2) != std::vector<int64_t>{2})
    return ctx.invalid("values must hold two elements [off, on]");
  if (ctx.dtype(0) == DType::kBool) return ctx.invalid("indices must be numbers");
  const int64_t r = ctx.rank(0) + 1;
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", -1));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  ETC_ASSIGN_OR_RETURN(ValueId idx, ctx.input(0));
  if (ctx.dtype(0) != DType::kInt64) {
    ETC_ASSIGN_OR_RETURN(idx, ctx.emit(OpKind::ToCopy, {{"self", idx}, {"dtype", DType::kInt64}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId neg,
                       ctx.emit(OpKind::LtScalar, {{"self", idx}, {"other", Scalar{int64_t{0}}}}));
  ETC_ASSIGN_OR_RETURN(ValueId wrapped,
                       ctx.emit(OpKind::AddScalar, {{"self", idx}, {"other", Scalar{depth}}}));
  ETC_ASSIGN_OR_RETURN(
      idx, ctx.emit(OpKind::WhereSelf, {{"condition", neg}, {"self", wrapped}, {"other", idx}}));
  ETC_ASSIGN_OR_RETURN(idx, ctx.emit(OpKind::Unsqueeze, {{"self", idx}, {"dim", axis}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId hot,
      ctx.emit(OpKind::EqTensor, {{"self", idx}, {"other", arange_along(ctx, depth, axis, r)}}));
  ETC_ASSIGN_OR_RETURN(ValueId values, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(
      ValueId off,
      ctx.emit(OpKind::SelectInt, {{"self", values}, {"dim", int64_t{0}}, {"index", int64_t{0}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId on,
      ctx.emit(OpKind::SelectInt, {{"self", values}, {"dim", int64_t{0}}, {"index", int64_t{1}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", hot}, {"self", on}, {"other", off}}));
  return ctx.set_output(0, y);
}

// Trilu(x, k=0; upper=1): where(a constant mask of the last two dims, x, 0).
Status convert_trilu(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  if (r < 2) return ctx.invalid("input must have rank 2 or more");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "k"));
    if (t->numel() != 1) return ctx.invalid("k must hold one value");
    k = t->ints()[0];
  }
  ETC_ASSIGN_OR_RETURN(int64_t upper, ctx.attr_int("upper", 1));
  const int64_t n = ctx.shape(0)[r - 2], m = ctx.shape(0)[r - 1];
  std::vector<int64_t> keep(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j)
      keep[static_cast<size_t>(i * m + j)] = upper ? j - i >= k : j - i <= k;
  }
  ValueId mask = ctx.add_constant(host_from_ints(DType::kBool, {n, m}, keep));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(
      ValueId y, ctx.emit(OpKind::WhereSelf, {{"condition", mask},
                                              {"self", x},
                                              {"other", scalar_constant(ctx, ctx.dtype(0), 0)}}));
  return ctx.set_output(0, y);
}

// EyeLike(x; dtype, k): a constant (only x's shape matters).
Status convert_eye_like(NodeCtx& ctx) {
  if (ctx.rank(0) != 2) return ctx.invalid("input must be a matrix");
  DType dtype = ctx.dtype(0);
  if (ctx.attr("dtype")) {
    ETC_ASSIGN_OR_RETURN(int64_t to, ctx.attr_int("dtype", std::nullopt));
    std::optional<DType> dt = dtype_from_onnx(static_cast<int32_t>(to));
    if (!dt) return ctx.unsupported("dtype " + onnx_dtype_name(static_cast<int32_t>(to)));
    dtype = *dt;
  }
  ETC_ASSIGN_OR_RETURN(int64_t k, ctx.attr_int("k", 0));
  const int64_t n = ctx.shape(0)[0], m = ctx.shape(0)[1];
  std::vector<int64_t> v(static_cast<size_t>(n * m), 0);
  for (int64_t i = 0; i < n; ++i) {
    if (k >= -i && k < m - i) v[static_cast<size_t>(i * m + i + k)] = 1;
  }
  ValueId eye = ctx.add_constant(host_from_ints(dtype, {n, m}, v));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Clone, {{"self", eye}}));
  return ctx.set_output(0, y);
}

// Tile(x, repeats): x viewed as [1, d0, 1, d1, ...], expanded to [r0, d0, r1, d1, ...] and
// viewed as [r0 * d0, r1 * d1, ...].
Status convert_tile(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(1, "repeats"));
  const std::vector<int64_t> repeats = t->ints();
  const std::vector<int64_t>& in = ctx.shape(0);
  if (repeats.size() != in.size()) {
    return ctx.invalid("repeats has " + std::to_string(repeats.size()) +
                       " entries for an input of rank " + std::to_string(in.size()));
  }
  std::vector<int64_t> split, expanded, out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) return ctx.invalid("repeats must not be negative");
    split.insert(split.end(), {1, in[d]});
    expanded.insert(expanded.end(), {repeats[d], in[d]});
    out.push_back(repeats[d] * in[d]);
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, split));
  ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::Expand, {{"self", x}, {"size", expanded}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, reshape(ctx, x, out));
  return ctx.set_output(0, y);
}

namespace {

Result<int64_t> block_size(NodeCtx& ctx) {
  if (ctx.rank(0) != 4) return ctx.invalid("input must be NCHW (rank 4)");
  ETC_ASSIGN_OR_RETURN(int64_t b, ctx.attr_int("blocksize", std::nullopt));
  // (At most 2^20, so that blocksize² cannot overflow.)
  if (b < 1 || b > (int64_t{1} << 20))
    return ctx.invalid("blocksize must lie in [1, 2^20], got " + std::to_string(b));
  return b;
}

Status rearrange(NodeCtx& ctx, std::vector<int64_t> split, std::vector<int64_t> perm,
                 std::vector<int64_t> out) {
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, std::move(split)));
  ETC_ASSIGN_OR_RETURN(x, permute(ctx, x, std::move(perm)));
  ETC_ASSIGN_OR_RETURN(ValueId y, reshape(ctx, x, std::move(out)));
  return ctx.set_output(0, y);
}

}  // namespace

// DepthToSpace(x; blocksize, mode DCR|CRD): reshape, permute, reshape.
Status convert_depth_to_space(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t b, block_size(ctx));
  Result<std::string> mode = ctx.attr_string("mode", "DCR");
  if (!mode.ok()) return mode.status();
  const std::vector<int64_t>& s = ctx.shape(0);
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (c % (b * b) != 0) {
    return ctx.invalid(std::to_string(c) + " channels are not a multiple of blocksize² (" +
                       std::to_string(b * b) + ")");
  }
  const int64_t c2 = c / (b * b);
  if (*mode == "DCR")
    return rearrange(ctx, {n, b, b, c2, h, w}, {0, 3, 4, 1, 5, 2}, {n, c2, h * b, w * b});
  if (*mode == "CRD")
    return rearrange(ctx, {n, c2, b, b, h, w}, {0, 1, 4, 2, 5, 3}, {n, c2, h * b, w * b});
  return ctx.invalid("mode must be 'DCR' or 'CRD', got '" + *mode + "'");
}

// SpaceToDepth(x; blocksize): reshape, permute, reshape.
Status convert_space_to_depth(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t b, block_size(ctx));
  const std::vector<int64_t>& s = ctx.shape(0);
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (h % b != 0 || w % b != 0) {
    return ctx.invalid("spatial dims " + std::to_string(h) + "x" + std::to_string(w) +
                       " are not multiples of blocksize " + std::to_string(b));
  }
  return rearrange(ctx, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                   {n, c * b * b, h / b, w / b});
}

// Hardmax(x; axis): 1 where argmax (the first of equal maxima) along axis, else 0; before
// opset 13 over the flattened 2-d view, as Softmax.
Status convert_hardmax(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  const int64_t r = ctx.rank(0);
  if (r == 0) return ctx.invalid("input must have rank 1 or more");
  ETC_ASSIGN_OR_RETURN(int64_t axis, ctx.attr_int("axis", ctx.opset() < 13 ? 1 : -1));
  ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
  axis = ctx.wrap_axis(axis, r);
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  std::vector<int64_t> shape = ctx.shape(0);
  if (ctx.opset() < 13) {
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < r; ++d)
      (d < axis ? a : b) *= ctx.shape(0)[d];
    ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, {a, b}));
    shape = {a, b};
    axis = 1;
  }
  const auto rank = static_cast<int64_t>(shape.size());
  ETC_ASSIGN_OR_RETURN(ValueId arg,
                       ctx.emit(OpKind::Argmax, {{"self", x}, {"dim", axis}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId hot,
      ctx.emit(OpKind::EqTensor,
               {{"self", arg},
                {"other", arange_along(ctx, shape[static_cast<size_t>(axis)], axis, rank)}}));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::ToCopy, {{"self", hot}, {"dtype", ctx.dtype(0)}}));
  if (ctx.opset() < 13) {
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, ctx.shape(0)));
  }
  return ctx.set_output(0, y);
}

// Compress(x, condition; axis): the positions where the condition (known at export time: it
// sets the output's shape) is true, by index.Tensor; without an axis, of x flattened.
Status convert_compress(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* c, ctx.require_constant(1, "condition"));
  if (c->shape.size() != 1) return ctx.invalid("condition must be 1-d");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  std::vector<int64_t> shape = ctx.shape(0);
  int64_t axis = 0;
  if (ctx.attr("axis")) {
    const int64_t r = ctx.rank(0);
    ETC_ASSIGN_OR_RETURN(axis, ctx.attr_int("axis", std::nullopt));
    ETC_RETURN_IF_ERROR(ctx.check_axis(axis, r, "axis"));
    axis = ctx.wrap_axis(axis, r);
  } else {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    shape = {n};
    ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, shape));
  }
  const std::vector<int64_t> cond = c->ints();
  if (static_cast<int64_t>(cond.size()) > shape[static_cast<size_t>(axis)]) {
    return ctx.invalid("condition has " + std::to_string(cond.size()) +
                       " entries for a dim of size " +
                       std::to_string(shape[static_cast<size_t>(axis)]));
  }
  std::vector<int64_t> kept;
  for (size_t i = 0; i < cond.size(); ++i) {
    if (cond[i] != 0) kept.push_back(static_cast<int64_t>(i));
  }
  std::vector<ValueId> indices(static_cast<size_t>(axis));
  indices.push_back(
      ctx.add_constant(host_from_ints(DType::kInt64, {static_cast<int64_t>(kept.size())}, kept)));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return ctx.set_output(0, y);
}

// ReverseSequence(x, sequence_lens; batch_axis=1, time_axis=0): along the time axis, the
// first sequence_lens[b] steps of batch b reversed, the rest kept; one constant index per
// (time, batch) position (the lengths are known at export time) and an arange for the batch.
Status convert_reverse_sequence(NodeCtx& ctx) {
  const int64_t r = ctx.rank(0);
  if (r < 2) return ctx.invalid("input must have rank 2 or more");
  ETC_ASSIGN_OR_RETURN(int64_t batch_axis, ctx.attr_int("batch_axis", 1));
  ETC_ASSIGN_OR_RETURN(int64_t time_axis, ctx.attr_int("time_axis", 0));
  if (!((batch_axis == 0 && time_axis == 1) || (batch_axis == 1 && time_axis == 0)))
    return ctx.invalid("batch_axis and time_axis must be 0 and 1 (either way round)");
  ETC_ASSIGN_OR_RETURN(const HostTensor* l, ctx.require_constant(1, "sequence_lens"));
  const int64_t nb = ctx.shape(0)[static_cast<size_t>(batch_axis)];
  const int64_t nt = ctx.shape(0)[static_cast<size_t>(time_axis)];
  const std::vector<int64_t> lens = l->ints();
  if (static_cast<int64_t>(lens.size()) != nb)
    return ctx.invalid("sequence_lens must have one entry per batch");
  // Index tensors over the first two dims, in their order.
  std::vector<int64_t> time(static_cast<size_t>(nb * nt)), batch(static_cast<size_t>(nb * nt));
  const int64_t n0 = time_axis == 0 ? nt : nb, n1 = time_axis == 0 ? nb : nt;
  for (int64_t i = 0; i < n0; ++i) {
    for (int64_t j = 0; j < n1; ++j) {
      const int64_t t = time_axis == 0 ? i : j, b = time_axis == 0 ? j : i;
      const int64_t len = lens[static_cast<size_t>(b)];
      if (len < 0 || len > nt) return ctx.invalid("sequence_lens must lie in [0, time steps]");
      time[static_cast<size_t>(i * n1 + j)] = t < len ? len - 1 - t : t;
      batch[static_cast<size_t>(i * n1 + j)] = b;
    }
  }
  std::vector<ValueId> indices(2);
  indices[static_cast<size_t>(time_axis)] =
      ctx.add_constant(host_from_ints(DType::kInt64, {n0, n1}, time));
  indices[static_cast<size_t>(batch_axis)] =
      ctx.add_constant(host_from_ints(DType::kInt64, {n0, n1}, batch));
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return ctx.set_output(0, y);
}

namespace {

// One einsum operand's labels: letters as their character codes, the dims of an ellipsis as
// kEllipsis + k (k counted so that ellipses align to the right, as they broadcast).
constexpr int kEllipsis = 256;

Result<std::vector<int>> einsum_labels(NodeCtx& ctx, const std::string& term, int64_t rank,
                                       int64_t ellipsis_rank) {
  std::vector<int> labels;
  const size_t dots = term.find("...");
  int64_t letters = 0;
  for (char c : term) {
    if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
  }
  if (dots != std::string::npos && term.find("...", dots + 3) != std::string::npos)
    return ctx.invalid("a term has more than one ellipsis: '" + term + "'");
  // rank < 0: the output, whose ellipsis has every ellipsis dim.
  const int64_t e = dots == std::string::npos ? 0 : rank < 0 ? ellipsis_rank : rank - letters;
  if (rank >= 0 && (e < 0 || (dots == std::string::npos && letters != rank))) {
    return ctx.invalid("term '" + term + "' does not match an input of rank " +
                       std::to_string(rank));
  }
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t k = 0; k < e; ++k)
        labels.push_back(kEllipsis + static_cast<int>(ellipsis_rank - e + k));
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
      labels.push_back(static_cast<unsigned char>(term[i]));
    } else {
      return ctx.invalid("unexpected character '" + std::string(1, term[i]) + "' in term '" + term +
                         "'");
    }
  }
  return labels;
}

}  // namespace

// Einsum(inputs...; equation): each operand's repeated labels taken as a diagonal
// (index.Tensor with one arange on both dims), every operand permuted and viewed onto all
// the labels (output labels first), the broadcast product, and a sum over the labels the
// output does not keep. (No GEMM: the product holds every label's dim at once.)
Status convert_einsum(NodeCtx& ctx) {
  Result<std::string> eq = ctx.attr_string("equation", std::nullopt);
  if (!eq.ok()) return eq.status();
  std::string equation;
  for (char c : *eq) {
    if (c != ' ') equation += c;
  }
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const int n = ctx.num_inputs();
  if (static_cast<int>(terms.size()) != n) {
    return ctx.invalid("the equation has " + std::to_string(terms.size()) + " terms for " +
                       std::to_string(n) + " inputs");
  }
  for (int i = 0; i < n; ++i) {
    if (!dtype_is_float(ctx.dtype(i))) return ctx.unsupported("integer inputs");
    if (ctx.dtype(i) != ctx.dtype(0)) return ctx.invalid("inputs have different types");
  }
  // The ellipsis covers the most dims any operand gives it.
  int64_t ellipsis_rank = 0;
  for (int i = 0; i < n; ++i) {
    int64_t letters = 0;
    for (char c : terms[static_cast<size_t>(i)]) {
      if (std::isalpha(static_cast<unsigned char>(c))) ++letters;
    }
    if (terms[static_cast<size_t>(i)].find("...") != std::string::npos)
      ellipsis_rank = std::max(ellipsis_rank, ctx.rank(i) - letters);
  }
  std::vector<std::vector<int>> labels;
  std::map<int, int> count;
  for (int i = 0; i < n; ++i) {
    ETC_ASSIGN_OR_RETURN(std::vector<int> l, einsum_labels(ctx, terms[static_cast<size_t>(i)],
                                                           ctx.rank(i), ellipsis_rank));
    for (int label : l)
      ++count[label];
    labels.push_back(std::move(l));
  }
  std::vector<int> out;
  if (arrow != std::string::npos) {
    ETC_ASSIGN_OR_RETURN(out, einsum_labels(ctx, equation.substr(arrow + 2), -1, ellipsis_rank));
    if (out.size() != std::set<int>(out.begin(), out.end()).size())
      return ctx.invalid("the output repeats a label");
    for (int label : out) {
      if (!count.count(label)) return ctx.invalid("an output label is in no input");
    }
  } else {  // implicit: the ellipsis, then the letters used once, in alphabetical order
    for (int64_t k = 0; k < ellipsis_rank; ++k)
      out.push_back(kEllipsis + static_cast<int>(k));
    for (const auto& [label, c] : count) {
      if (label < kEllipsis && c == 1) out.push_back(label);
    }
  }
  std::vector<int> all = out;
  for (const auto& l : labels) {
    for (int label : l) {
      if (std::find(all.begin(), all.end(), label) == all.end()) all.push_back(label);
    }
  }
  const auto na = static_cast<int64_t>(all.size());
  std::map<int, int64_t> size_of;
  ValueId product{};
  bool first = true;
  for (int i = 0; i < n; ++i) {
    std::vector<int> l = labels[static_cast<size_t>(i)];
    std::vector<int64_t> shape = ctx.shape(i);
    ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
    // Diagonals: move two equal labels last, index both with one arange.
    for (bool again = true; again;) {
      again = false;
      for (size_t p = 0; p < l.size() && !again; ++p) {
        for (size_t q = p + 1; q < l.size() && !again; ++q) {
          if (l[p] != l[q]) continue;
          if (shape[p] != shape[q]) return ctx.invalid("a repeated label has two sizes");
          std::vector<int64_t> perm;
          std::vector<int> nl;
          std::vector<int64_t> ns;
          for (size_t k = 0; k < l.size(); ++k) {
            if (k != p && k != q) {
              perm.push_back(static_cast<int64_t>(k));
              nl.push_back(l[k]);
              ns.push_back(shape[k]);
            }
          }
          perm.push_back(static_cast<int64_t>(p));
          perm.push_back(static_cast<int64_t>(q));
          ETC_ASSIGN_OR_RETURN(v, permute(ctx, v, perm));
          std::vector<ValueId> indices(nl.size());
          ValueId ar = arange_along(ctx, shape[p], 0, 1);
          indices.push_back(ar);
          indices.push_back(ar);
          ETC_ASSIGN_OR_RETURN(v,
                               ctx.emit(OpKind::IndexTensor, {{"self", v}, {"indices", indices}}));
          nl.push_back(l[p]);
          ns.push_back(shape[p]);
          l = nl;
          shape = ns;
          again = true;
        }
      }
    }
    // Permute to the order of `all` and view with a 1 for every label it lacks.
    std::vector<int64_t> perm, view;
    for (int label : all) {
      auto it = std::find(l.begin(), l.end(), label);
      if (it == l.end()) {
        view.push_back(1);
        continue;
      }
      const auto k = static_cast<size_t>(it - l.begin());
      perm.push_back(static_cast<int64_t>(k));
      view.push_back(shape[k]);
      if (shape[k] != 1) {
        auto [known, inserted] = size_of.emplace(label, shape[k]);
        if (!inserted && known->second != shape[k]) {
          return ctx.invalid("label sizes differ between inputs (" + std::to_string(known->second) +
                             " and " + std::to_string(shape[k]) + ")");
        }
      }
    }
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k)
      identity = identity && perm[k] == static_cast<int64_t>(k);
    if (!identity) {
      ETC_ASSIGN_OR_RETURN(v, permute(ctx, v, perm));
    }
    if (static_cast<int64_t>(perm.size()) != na) {
      ETC_ASSIGN_OR_RETURN(v, reshape(ctx, v, view));
    }
    if (first) {
      product = v;
      first = false;
    } else {
      ETC_ASSIGN_OR_RETURN(product, ctx.emit(OpKind::MulTensor, {{"self", product}, {"other", v}}));
    }
  }
  std::vector<int64_t> summed;
  for (auto d = static_cast<int64_t>(out.size()); d < na; ++d)
    summed.push_back(d);
  ValueId y = product;
  if (!summed.empty()) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::SumDimIntList,
                                     {{"self", product}, {"dim", summed}, {"keepdim", false}}));
  }
  // A lone operand's dims may broadcast from 1 in the output of a product.
  std::vector<int64_t> want;
  want.reserve(out.size());
  for (int label : out)
    want.push_back(size_of.count(label) ? size_of[label] : 1);
  if (ctx.sizes_of(y) != want) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Expand, {{"self", y}, {"size", want}}));
  }
  if (n == 1 && y == product && summed.empty()) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Clone, {{"self", y}}));
  }
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
