// The composite ops of the default export (torch.export's TRAINING dialect keeps them; Core
// ATen decomposes them): each decomposes here onto the op table's ops, as ATen's own
// composite implementation computes it. square, softplus, baddbmm, rms_norm,
// repeat_interleave with a number of repeats, _weight_norm, histc, the aliases
// (min.other, max.other, multiply, broadcast_to, reshape_as, empty_like, empty_permuted,
// concat), tril/triu, index_fill and index_add, nan_to_num, transformers' grouped matrix product of
// the mixture-of-experts layers, and the in-place forms of functional ops.
#include <cmath>
#include <limits>

#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {
namespace {

// square(self) = pow(self, 2), which gives ATen's dtypes (bool squares to int64).
Status convert_square(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::PowTensorScalar,
                                           {{"self", x}, {"exponent", Scalar{int64_t{2}}}}));
  return n.set_output(0, out);
}

// softplus(self, beta=1, threshold=20) = self where self * beta > threshold, else
// log1p(exp(self * beta)) / beta.
Status convert_softplus(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  if (!dtype_is_float(n.dtype(x))) return n.invalid("softplus takes a floating-point tensor");
  ETC_ASSIGN_OR_RETURN(Scalar beta, n.scalar("beta", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(Scalar threshold, n.scalar("threshold", Scalar{int64_t{20}}));
  ValueId bx = x;
  if (beta.to_double() != 1.0) {
    ETC_ASSIGN_OR_RETURN(bx, n.emit(OpKind::MulScalar, {{"self", x}, {"other", beta}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId big, n.emit(OpKind::GtScalar, {{"self", bx}, {"other", threshold}}));
  ETC_ASSIGN_OR_RETURN(ValueId e, n.emit(OpKind::Exp, {{"self", bx}}));
  ETC_ASSIGN_OR_RETURN(ValueId soft, n.emit(OpKind::Log1p, {{"self", e}}));
  if (beta.to_double() != 1.0) {
    ETC_ASSIGN_OR_RETURN(soft, n.emit(OpKind::DivScalar, {{"self", soft}, {"other", beta}}));
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::WhereSelf, {{"condition", big}, {"self", x}, {"other", soft}}));
  return n.set_output(0, out);
}

// baddbmm(self, batch1, batch2, beta=1, alpha=1) = beta * self + alpha * bmm(batch1, batch2);
// with beta 0, self is not read (its NaNs do not propagate), as in ATen.
Status convert_baddbmm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId self, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId b1, n.tensor("batch1"));
  ETC_ASSIGN_OR_RETURN(ValueId b2, n.tensor("batch2"));
  ETC_ASSIGN_OR_RETURN(Scalar beta, n.scalar("beta", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(Scalar alpha, n.scalar("alpha", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(ValueId prod, n.emit(OpKind::Bmm, {{"self", b1}, {"mat2", b2}}));
  if (alpha.to_double() != 1.0) {
    ETC_ASSIGN_OR_RETURN(prod, n.emit(OpKind::MulScalar, {{"self", prod}, {"other", alpha}}));
  }
  if (beta.to_double() == 0.0) {
    // self is not read, but must still broadcast to the product's shape.
    const std::vector<int64_t> ps = n.sizes(prod);
    const std::vector<int64_t> ss = n.sizes(self);
    bool fits = ss.size() <= ps.size();
    for (size_t i = 0; fits && i < ss.size(); ++i) {
      int64_t s = ss[ss.size() - 1 - i];
      fits = s == 1 || s == ps[ps.size() - 1 - i];
    }
    if (!fits) {
      return n.invalid("self " + shape_to_string(ss) + " does not broadcast to the product's " +
                       shape_to_string(ps));
    }
    return n.set_output(0, prod);
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::AddTensor, {{"self", prod}, {"other", self}, {"alpha", beta}}));
  return n.set_output(0, out);
}

// rms_norm(input, normalized_shape, weight=None, eps=None): as ATen's composite, in the
// input's op-math type (float32 for half and bfloat16), eps defaulting to that type's
// machine epsilon: input * rsqrt(mean(input², last dims) + eps), back in the input's dtype,
// times weight.
Status convert_rms_norm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> normalized, n.ints("normalized_shape"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> weight, n.optional_tensor("weight"));
  DType in = n.dtype(x);
  if (!dtype_is_float(in)) return n.invalid("rms_norm takes a floating-point input");
  const std::vector<int64_t> sizes = n.sizes(x);
  if (normalized.size() > sizes.size() ||
      !std::equal(normalized.begin(), normalized.end(), sizes.end() - normalized.size())) {
    return n.invalid("normalized_shape " + shape_to_string(normalized) +
                     " is not the trailing shape of the input " + shape_to_string(sizes));
  }
  DType math = in == DType::kFloat16 || in == DType::kBFloat16 ? DType::kFloat32 : in;
  double eps = math == DType::kFloat64 ? std::numeric_limits<double>::epsilon()
                                       : std::numeric_limits<float>::epsilon();
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> eps_arg, n.optional_scalar("eps"));
  if (eps_arg) eps = eps_arg->to_double();
  if (math != in) {
    ETC_ASSIGN_OR_RETURN(x, n.emit(OpKind::ToCopy, {{"self", x}, {"dtype", math}}));
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < normalized.size(); ++i)
    dims.push_back(static_cast<int64_t>(sizes.size() - normalized.size() + i));
  ETC_ASSIGN_OR_RETURN(
      ValueId sq, n.emit(OpKind::PowTensorScalar, {{"self", x}, {"exponent", Scalar{int64_t{2}}}}));
  ETC_ASSIGN_OR_RETURN(ValueId ms,
                       n.emit(OpKind::MeanDim, {{"self", sq}, {"dim", dims}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(ms, n.emit(OpKind::AddScalar, {{"self", ms}, {"other", Scalar{eps}}}));
  ETC_ASSIGN_OR_RETURN(ValueId r, n.emit(OpKind::Rsqrt, {{"self", ms}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::MulTensor, {{"self", x}, {"other", r}}));
  if (math != in) {
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::ToCopy, {{"self", out}, {"dtype", in}}));
  }
  if (weight) {
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::MulTensor, {{"self", out}, {"other", *weight}}));
  }
  return n.set_output(0, out);
}

// repeat_interleave.self_int(self, repeats, dim=None, *, output_size=None): each element
// repeated `repeats` times along dim (of the flattened input when dim is None), as an
// unsqueeze, an expand and a reshape.
Status convert_repeat_interleave(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t repeats, n.int_arg("repeats"));
  if (repeats < 0) return n.invalid("repeats must be non-negative, not " + std::to_string(repeats));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> dim_arg, n.optional_int("dim"));
  int64_t dim = 0;
  if (!dim_arg) {
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{-1}}}));
  } else {
    int64_t rank = static_cast<int64_t>(n.sizes(x).size());
    ETC_ASSIGN_OR_RETURN(dim, n.wrap_dim(*dim_arg, std::max<int64_t>(rank, 1), "dim"));
    if (rank == 0) {
      ETC_ASSIGN_OR_RETURN(
          x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{1}}}));
    }
  }
  std::vector<int64_t> sizes = n.sizes(x);
  if (auto out_size = n.optional_int("output_size"); out_size.ok() && *out_size) {
    if (**out_size != sizes[dim] * repeats) {
      return n.invalid("output_size " + std::to_string(**out_size) + " is not " +
                       std::to_string(sizes[dim] * repeats) + " (the size times repeats)");
    }
  }
  ETC_ASSIGN_OR_RETURN(ValueId u, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", dim + 1}}));
  std::vector<int64_t> expanded = sizes;
  expanded.insert(expanded.begin() + dim + 1, repeats);
  ETC_ASSIGN_OR_RETURN(ValueId e, n.emit(OpKind::Expand, {{"self", u}, {"size", expanded}}));
  std::vector<int64_t> merged = sizes;
  merged[dim] *= repeats;
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", e}, {"shape", merged}}));
  return n.set_output(0, out);
}

// _weight_norm(v, g, dim=0) = v * (g / norm_except_dim(v, 2, dim)): the 2-norm over every
// dim but `dim` (over all of v when dim is -1), kept as size-1 dims.
Status convert_weight_norm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId v, n.tensor("v"));
  ETC_ASSIGN_OR_RETURN(ValueId g, n.tensor("g"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim", 0));
  if (!dtype_is_float(n.dtype(v))) return n.invalid("_weight_norm takes a floating-point v");
  int64_t rank = static_cast<int64_t>(n.sizes(v).size());
  std::vector<int64_t> dims;
  if (dim != -1) {
    ETC_ASSIGN_OR_RETURN(dim, n.wrap_dim(dim, rank, "dim"));
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim) dims.push_back(d);
  }
  ETC_ASSIGN_OR_RETURN(ValueId sq, n.emit(OpKind::MulTensor, {{"self", v}, {"other", v}}));
  ValueId norm = sq;
  if (!dims.empty()) {
    ETC_ASSIGN_OR_RETURN(
        norm, n.emit(OpKind::SumDimIntList, {{"self", sq}, {"dim", dims}, {"keepdim", true}}));
  }
  ETC_ASSIGN_OR_RETURN(norm, n.emit(OpKind::Sqrt, {{"self", norm}}));
  ETC_ASSIGN_OR_RETURN(ValueId scale, n.emit(OpKind::DivTensor, {{"self", g}, {"other", norm}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::MulTensor, {{"self", v}, {"other", scale}}));
  return n.set_output(0, out);
}

// histc(self, bins=100, min=0, max=0): the counts of self's elements in `bins` equal bins
// over [min, max], in self's dtype. An element's bin is floor((x - min) * bins / (max - min))
// as ATen computes it, max itself in the last bin; elements outside [min, max] and NaN are
// not counted. With min == max ATen takes the data's own range, which is known only at run
// time: refused.
Status convert_histc(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  DType d = n.dtype(x);
  if (!dtype_is_float(d)) return n.invalid("histc takes a floating-point tensor");
  ETC_ASSIGN_OR_RETURN(int64_t bins, n.int_arg("bins", 100));
  ETC_ASSIGN_OR_RETURN(Scalar lo_s, n.scalar("min", Scalar{int64_t{0}}));
  ETC_ASSIGN_OR_RETURN(Scalar hi_s, n.scalar("max", Scalar{int64_t{0}}));
  double lo = lo_s.to_double(), hi = hi_s.to_double();
  if (bins <= 0) return n.invalid("bins must be positive, not " + std::to_string(bins));
  if (!std::isfinite(lo) || !std::isfinite(hi)) return n.invalid("min and max must be finite");
  if (lo > hi) return n.invalid("max must be larger than min");
  if (lo == hi) {
    return n.unsupported("histc with min == max (the range of the data, known only at run time)");
  }
  ETC_ASSIGN_OR_RETURN(
      x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{-1, 1}}}));
  ETC_ASSIGN_OR_RETURN(ValueId ge, n.emit(OpKind::GeScalar, {{"self", x}, {"other", Scalar{lo}}}));
  ETC_ASSIGN_OR_RETURN(ValueId le, n.emit(OpKind::LeScalar, {{"self", x}, {"other", Scalar{hi}}}));
  ETC_ASSIGN_OR_RETURN(ValueId inside, n.emit(OpKind::LogicalAnd, {{"self", ge}, {"other", le}}));
  ETC_ASSIGN_OR_RETURN(ValueId pos,
                       n.emit(OpKind::SubScalar, {{"self", x}, {"other", Scalar{lo}}}));
  ETC_ASSIGN_OR_RETURN(pos, n.emit(OpKind::MulScalar,
                                   {{"self", pos}, {"other", Scalar{static_cast<double>(bins)}}}));
  ETC_ASSIGN_OR_RETURN(pos, n.emit(OpKind::DivScalar, {{"self", pos}, {"other", Scalar{hi - lo}}}));
  ETC_ASSIGN_OR_RETURN(pos, n.emit(OpKind::Floor, {{"self", pos}}));
  ETC_ASSIGN_OR_RETURN(pos,
                       n.emit(OpKind::Clamp, {{"self", pos},
                                              {"min", Scalar{0.0}},
                                              {"max", Scalar{static_cast<double>(bins - 1)}}}));
  ETC_ASSIGN_OR_RETURN(pos, n.emit(OpKind::ToCopy, {{"self", pos}, {"dtype", DType::kInt64}}));
  std::vector<int64_t> ids(static_cast<size_t>(bins));
  for (int64_t i = 0; i < bins; ++i)
    ids[static_cast<size_t>(i)] = i;
  ValueId edges = index_constant(n, {bins}, ids);
  ETC_ASSIGN_OR_RETURN(ValueId hit, n.emit(OpKind::EqTensor, {{"self", pos}, {"other", edges}}));
  ETC_ASSIGN_OR_RETURN(hit, n.emit(OpKind::LogicalAnd, {{"self", hit}, {"other", inside}}));
  ETC_ASSIGN_OR_RETURN(hit, n.emit(OpKind::ToCopy, {{"self", hit}, {"dtype", d}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::SumDimIntList,
                          {{"self", hit}, {"dim", std::vector<int64_t>{0}}, {"keepdim", false}}));
  return n.set_output(0, out);
}

// transformers.grouped_mm_fallback(input [S, K], weight [E, K, N], offs [E]): the rows of
// input sorted by expert, offs the cumulative row counts; row s belongs to the first group
// g with s < offs[g] and is multiplied by weight[g]; rows past the last offset stay zero.
// Decomposed as a gather of each row's expert matrix and a batched product.
Status convert_grouped_mm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(ValueId w, n.tensor("weight"));
  ETC_ASSIGN_OR_RETURN(ValueId offs, n.tensor("offs"));
  const std::vector<int64_t> xs = n.sizes(x);
  const std::vector<int64_t> ws = n.sizes(w);
  const std::vector<int64_t> os = n.sizes(offs);
  if (xs.size() != 2 || ws.size() != 3 || os.size() != 1)
    return n.invalid("grouped_mm takes input [S, K], weight [E, K, N] and offs [E]");
  if (xs[1] != ws[1] || os[0] != ws[0]) {
    return n.invalid("grouped_mm of input " + shape_to_string(xs) + ", weight " +
                     shape_to_string(ws) + " and offs " + shape_to_string(os) +
                     ": the sizes do not agree");
  }
  if (dtype_is_float(n.dtype(offs)) || n.dtype(offs) == DType::kBool)
    return n.invalid("offs must be an integer tensor");
  int64_t rows = xs[0], experts = ws[0];
  std::vector<int64_t> row_ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    row_ids[static_cast<size_t>(i)] = i;
  // group[s] = the number of offsets <= s.
  ValueId r = index_constant(n, {rows, 1}, row_ids);
  ETC_ASSIGN_OR_RETURN(ValueId passed, n.emit(OpKind::LeTensor, {{"self", offs}, {"other", r}}));
  // Counted in float32 (exact to 2^24 experts), which the CUDA delegate sums.
  ETC_ASSIGN_OR_RETURN(passed,
                       n.emit(OpKind::ToCopy, {{"self", passed}, {"dtype", DType::kFloat32}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId group,
      n.emit(OpKind::SumDimIntList,
             {{"self", passed}, {"dim", std::vector<int64_t>{1}}, {"keepdim", false}}));
  ETC_ASSIGN_OR_RETURN(group, n.emit(OpKind::ToCopy, {{"self", group}, {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(ValueId valid,
                       n.emit(OpKind::LtScalar, {{"self", group}, {"other", Scalar{experts}}}));
  ETC_ASSIGN_OR_RETURN(
      group, n.emit(OpKind::Clamp,
                    {{"self", group}, {"min", Scalar{int64_t{0}}}, {"max", Scalar{experts - 1}}}));
  ETC_ASSIGN_OR_RETURN(ValueId wg, n.emit(OpKind::IndexTensor,
                                          {{"self", w}, {"indices", std::vector<ValueId>{group}}}));
  ETC_ASSIGN_OR_RETURN(ValueId x3, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", int64_t{1}}}));
  ETC_ASSIGN_OR_RETURN(ValueId y, n.emit(OpKind::Bmm, {{"self", x3}, {"mat2", wg}}));
  ETC_ASSIGN_OR_RETURN(y, n.emit(OpKind::SqueezeDim, {{"self", y}, {"dim", int64_t{1}}}));
  ETC_ASSIGN_OR_RETURN(ValueId keep,
                       n.emit(OpKind::Unsqueeze, {{"self", valid}, {"dim", int64_t{1}}}));
  ValueId zero = n.constant(KnownTensor{n.dtype(y), {}, {0.0}});
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::WhereSelf, {{"condition", keep}, {"self", y}, {"other", zero}}));
  return n.set_output(0, out);
}

// broadcast_to(self, size) is expand; reshape_as(self, other) a reshape to other's shape.
Status convert_broadcast_to(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("size"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Expand, {{"self", x}, {"size", size}}));
  return n.set_output(0, out);
}
Status convert_reshape_as(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(const Entry* other, n.entry("other"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::Reshape, {{"self", x}, {"shape", other->shape}}));
  return n.set_output(0, out);
}

// tril(self, diagonal=0) / triu(self, diagonal=0): self where column - row <= diagonal
// (tril) or >= diagonal (triu) over the last two dims, else 0; the mask is known at export
// time.
Converter triangle(bool upper) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(int64_t diagonal, n.int_arg("diagonal", 0));
    const std::vector<int64_t> s = n.sizes(x);
    if (s.size() < 2) return n.invalid("self must have at least 2 dims, not " + shape_to_string(s));
    const int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
    ETC_RETURN_IF_ERROR(check_known_size(n, {rows, cols}));
    KnownTensor mask{DType::kBool, {rows, cols}, {}};
    mask.v.reserve(static_cast<size_t>(rows * cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c)
        mask.v.push_back(upper ? (c - r >= diagonal) : (c - r <= diagonal));
    }
    ValueId zero = n.constant(KnownTensor{n.dtype(x), {}, {0.0}});
    ETC_ASSIGN_OR_RETURN(
        ValueId out,
        n.emit(OpKind::WhereSelf, {{"condition", n.constant(mask)}, {"self", x}, {"other", zero}}));
    return n.set_output(0, out);
  };
}

// index_fill.int_Scalar(self, dim, index, value) and index_add(self, dim, index, source,
// alpha=1): index_put at [None] * dim + [index] of the value (a 0-d tensor of self's dtype)
// or of alpha * source, accumulating for index_add.
Result<std::pair<ValueId, std::vector<ValueId>>> index_along(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim_arg, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(ValueId index, n.tensor("index"));
  const int64_t rank = static_cast<int64_t>(n.sizes(x).size());
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.wrap_dim(dim_arg, std::max<int64_t>(rank, 1), "dim"));
  if (rank == 0) return n.unsupported("indexing a 0-d tensor along a dim");
  if (n.sizes(index).size() > 1) {
    return n.invalid("index must be 0-d or 1-D, not " + shape_to_string(n.sizes(index)));
  }
  if (dtype_is_float(n.dtype(index)) || n.dtype(index) == DType::kBool)
    return n.invalid("index must be an integer tensor");
  std::vector<ValueId> indices(static_cast<size_t>(dim));
  indices.push_back(index);
  return std::make_pair(x, indices);
}
Status convert_index_fill(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(auto xi, index_along(n));
  ETC_ASSIGN_OR_RETURN(Scalar value, n.scalar("value"));
  ValueId v = n.constant(KnownTensor{n.dtype(xi.first), {}, {value.to_double()}});
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::IndexPut,
             {{"self", xi.first}, {"indices", xi.second}, {"values", v}, {"accumulate", false}}));
  return n.set_output(0, out);
}
Status convert_index_add(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(auto xi, index_along(n));
  ETC_ASSIGN_OR_RETURN(ValueId source, n.tensor("source"));
  ETC_ASSIGN_OR_RETURN(Scalar alpha, n.scalar("alpha", Scalar{int64_t{1}}));
  if (alpha.to_double() != 1.0) {
    ETC_ASSIGN_OR_RETURN(source, n.emit(OpKind::MulScalar, {{"self", source}, {"other", alpha}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::IndexPut, {{"self", xi.first},
                                                              {"indices", xi.second},
                                                              {"values", source},
                                                              {"accumulate", true}}));
  return n.set_output(0, out);
}

// avg_pool1d / adaptive_avg_pool1d: the 2-D pools over [.., C, 1, L] (a kernel of height 1).
Result<ValueId> with_unit_height(TorchNode& n, ValueId x) {
  const int64_t rank = static_cast<int64_t>(n.sizes(x).size());
  if (rank != 2 && rank != 3) {
    return n.invalid("a 1-D pool takes [C, L] or [N, C, L], not " + shape_to_string(n.sizes(x)));
  }
  return n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", rank - 1}});
}
Status convert_avg_pool1d(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding", std::vector<int64_t>{0}));
  ETC_ASSIGN_OR_RETURN(bool ceil, n.bool_arg("ceil_mode", false));
  ETC_ASSIGN_OR_RETURN(bool count_pad, n.bool_arg("count_include_pad", true));
  if (k.size() != 1 || s.size() > 1 || p.size() != 1) {
    return n.invalid("avg_pool1d takes one kernel size, stride and padding");
  }
  const int64_t rank = static_cast<int64_t>(n.sizes(x).size());
  ETC_ASSIGN_OR_RETURN(ValueId x2, with_unit_height(n, x));
  std::vector<int64_t> stride2 =
      s.empty() ? std::vector<int64_t>{1, k[0]} : std::vector<int64_t>{1, s[0]};
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       n.emit(OpKind::AvgPool2d, {{"self", x2},
                                                  {"kernel_size", std::vector<int64_t>{1, k[0]}},
                                                  {"stride", stride2},
                                                  {"padding", std::vector<int64_t>{0, p[0]}},
                                                  {"ceil_mode", ceil},
                                                  {"count_include_pad", count_pad},
                                                  {"divisor_override", std::monostate{}}}));
  ETC_ASSIGN_OR_RETURN(y, n.emit(OpKind::SqueezeDim, {{"self", y}, {"dim", rank - 1}}));
  return n.set_output(0, y);
}
Status convert_adaptive_avg_pool1d(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("output_size"));
  if (size.size() != 1) return n.invalid("adaptive_avg_pool1d takes one output size");
  const int64_t rank = static_cast<int64_t>(n.sizes(x).size());
  ETC_ASSIGN_OR_RETURN(ValueId x2, with_unit_height(n, x));
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       n.emit(OpKind::AdaptiveAvgPool2d,
                              {{"self", x2}, {"output_size", std::vector<int64_t>{1, size[0]}}}));
  ETC_ASSIGN_OR_RETURN(y, n.emit(OpKind::SqueezeDim, {{"self", y}, {"dim", rank - 1}}));
  return n.set_output(0, y);
}

// maximum / minimum of two bool tensors are logical_or / logical_and (the op table's
// maximum and minimum take numbers); anything else goes to `numeric`.
Converter bool_extremum(Converter numeric, OpKind logical) {
  return [=](TorchNode& n) -> Status {
    if (n.is_tensor("self") && n.is_tensor("other")) {
      ETC_ASSIGN_OR_RETURN(const Entry* a, n.entry("self"));
      ETC_ASSIGN_OR_RETURN(const Entry* b, n.entry("other"));
      if (a->dtype == DType::kBool && b->dtype == DType::kBool) {
        ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
        ETC_ASSIGN_OR_RETURN(ValueId y, n.tensor("other"));
        ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(logical, {{"self", x}, {"other", y}}));
        return n.set_output(0, out);
      }
    }
    return numeric(n);
  };
}

// nan_to_num(self, nan=None, posinf=None, neginf=None): NaN becomes `nan` (0 by default),
// +inf `posinf` and -inf `neginf` (by default the dtype's greatest and least finite values);
// integers and bools have none of them and come back unchanged.
Status convert_nan_to_num(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const DType dtype = n.dtype(x);
  if (!dtype_is_float(dtype)) return n.set_output(0, x);
  double finite = std::numeric_limits<float>::max();
  if (dtype == DType::kFloat64) finite = std::numeric_limits<double>::max();
  if (dtype == DType::kFloat16) finite = 65504.0;
  if (dtype == DType::kBFloat16) finite = 3.3895313892515355e38;  // 0x7f7f
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> nan, n.optional_scalar("nan"));
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> posinf, n.optional_scalar("posinf"));
  ETC_ASSIGN_OR_RETURN(std::optional<Scalar> neginf, n.optional_scalar("neginf"));
  struct Swap {
    OpKind test;
    std::optional<Scalar> arg;
    Scalar to;
  };
  const double inf = std::numeric_limits<double>::infinity();
  ValueId out = x;
  for (const Swap& s :
       {Swap{OpKind::Isnan, nan, Scalar{0.0}}, Swap{OpKind::EqScalar, posinf, Scalar{finite}},
        Swap{OpKind::EqScalar, neginf, Scalar{-finite}}}) {
    const bool positive = s.to.to_double() > 0;
    ValueId hit;
    if (s.test == OpKind::Isnan) {
      ETC_ASSIGN_OR_RETURN(hit, n.emit(OpKind::Isnan, {{"self", x}}));
    } else {
      ETC_ASSIGN_OR_RETURN(
          hit, n.emit(OpKind::EqScalar, {{"self", x}, {"other", Scalar{positive ? inf : -inf}}}));
    }
    ETC_ASSIGN_OR_RETURN(
        ValueId value,
        n.emit(OpKind::FullLike,
               {{"self", x}, {"fill_value", s.arg.value_or(s.to)}, {"dtype", dtype}}));
    ETC_ASSIGN_OR_RETURN(
        out, n.emit(OpKind::WhereSelf, {{"condition", hit}, {"self", value}, {"other", out}}));
  }
  return n.set_output(0, out);
}

// The in-place form of a functional converter (masked_fill_, scatter_, clamp_, ...): the
// functional result, cast back to self's dtype as PyTorch's in-place ops do, becomes self's
// new value (and, through a view, its base's). Self cannot grow by broadcasting.
Converter in_place(Converter functional) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
    const DType dtype = self->dtype;
    const std::vector<int64_t> shape = self->shape;
    ETC_RETURN_IF_ERROR(functional(n));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.output_value(0));
    if (n.sizes(out) != shape) {
      return n.invalid("the result's shape " + shape_to_string(n.sizes(out)) + " is not self's " +
                       shape_to_string(shape) + " (an in-place op cannot broadcast self)");
    }
    if (n.dtype(out) != dtype) {
      ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::ToCopy, {{"self", out}, {"dtype", dtype}}));
    }
    return n.rebind("self", out);
  };
}

// The result of an op that writes its argument `arg` (out=, resize_), cast to the argument's
// dtype: the argument's tensor and the node's output (its alias) read it from here on. A
// program input passed as the argument cannot be updated: when nothing else reads the input
// the node's output is the result, otherwise the op is refused.
Status write_result(TorchNode& n, std::string_view arg, ValueId result, DType dtype) {
  if (n.is_placeholder(arg)) {
    if (n.read_elsewhere(arg)) {
      return n.unsupported(std::string(arg) +
                           " is a program input that is read again after this write (a "
                           "mutated input is not supported)");
    }
    if (n.dtype(result) != dtype) {
      return n.unsupported(std::string(arg) +
                           " is a program input of another dtype than the result");
    }
    return Status();
  }
  if (n.dtype(result) != dtype) {
    ETC_ASSIGN_OR_RETURN(result, n.emit(OpKind::ToCopy, {{"self", result}, {"dtype", dtype}}));
  }
  return n.rebind(arg, result);
}

// The out= form of a functional converter (atan2.out, add.out, ...): the functional result,
// cast to out's dtype as ATen's out variants write it, becomes out's new value. ATen resizes
// an out of another shape; etc takes out of the result's shape only.
Converter out_variant(Converter functional) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(const Entry* out_entry, n.entry("out"));
    const DType dtype = out_entry->dtype;
    const std::vector<int64_t> shape = out_entry->shape;
    ETC_RETURN_IF_ERROR(functional(n));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.output_value(0));
    if (n.sizes(out) != shape) {
      return n.unsupported("out has shape " + shape_to_string(shape) + ", the result " +
                           shape_to_string(n.sizes(out)) + " (etc does not resize out)");
    }
    return write_result(n, "out", out, dtype);
  };
}

// resize_(self, size, memory_format): self's first prod(size) elements (row-major) in the new
// shape. Growing would expose uninitialised memory: refused.
Status convert_resize(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("size"));
  int64_t count = 1;
  for (int64_t d : size) {
    if (d < 0) return n.invalid("size " + shape_to_string(size) + " has a negative dim");
    count *= d;
  }
  const int64_t numel = n.spec(x).numel();
  if (count > numel) {
    return n.unsupported("resize_ grows self from " + std::to_string(numel) + " to " +
                         std::to_string(count) + " elements (the new ones are uninitialised)");
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId flat, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{numel}}}));
  if (count < numel) {
    ETC_ASSIGN_OR_RETURN(flat, n.emit(OpKind::SliceTensor, {{"self", flat},
                                                            {"dim", int64_t{0}},
                                                            {"start", int64_t{0}},
                                                            {"end", count},
                                                            {"step", int64_t{1}}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", flat}, {"shape", size}}));
  ETC_RETURN_IF_ERROR(n.set_output(0, out));
  return write_result(n, "self", out, n.dtype(x));
}

// diff(self, n=1, dim=-1, prepend=None, append=None): prepend and append joined to self
// along dim, then n times the difference of neighbours, x[1:] - x[:-1] (!= for bool, as
// ATen's logical_xor). An order past the length leaves the dim empty.
Status convert_diff(TorchNode& node) {
  ETC_ASSIGN_OR_RETURN(ValueId x, node.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t order, node.int_arg("n", 1));
  ETC_ASSIGN_OR_RETURN(int64_t dim, node.int_arg("dim", -1));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> prepend, node.optional_tensor("prepend"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> append, node.optional_tensor("append"));
  const auto rank = static_cast<int64_t>(node.sizes(x).size());
  if (rank == 0) return node.invalid("diff expects a tensor of rank 1 or more, got a 0-d one");
  if (order < 0) return node.invalid("order n must be non-negative, got " + std::to_string(order));
  ETC_ASSIGN_OR_RETURN(dim, node.wrap_dim(dim, rank, "dim"));
  if (prepend || append) {
    std::vector<ValueId> parts;
    if (prepend) parts.push_back(*prepend);
    parts.push_back(x);
    if (append) parts.push_back(*append);
    ETC_ASSIGN_OR_RETURN(x, node.emit(OpKind::Cat, {{"tensors", parts}, {"dim", dim}}));
  }
  const bool is_bool = node.dtype(x) == DType::kBool;
  for (int64_t k = 0; k < order; ++k) {
    const int64_t len = node.sizes(x)[static_cast<size_t>(dim)];
    if (len == 0) break;
    ETC_ASSIGN_OR_RETURN(ValueId hi, node.emit(OpKind::SliceTensor, {{"self", x},
                                                                     {"dim", dim},
                                                                     {"start", int64_t{1}},
                                                                     {"end", len},
                                                                     {"step", int64_t{1}}}));
    ETC_ASSIGN_OR_RETURN(ValueId lo, node.emit(OpKind::SliceTensor, {{"self", x},
                                                                     {"dim", dim},
                                                                     {"start", int64_t{0}},
                                                                     {"end", len - 1},
                                                                     {"step", int64_t{1}}}));
    ETC_ASSIGN_OR_RETURN(x, node.emit(is_bool ? OpKind::NeTensor : OpKind::SubTensor,
                                      {{"self", hi}, {"other", lo}}));
  }
  return node.set_output(0, x);
}

}  // namespace

void add_composite_converters(std::map<std::string, Converter>& t) {
  t["aten.diff.default"] = convert_diff;
  t["aten.square.default"] = convert_square;
  t["aten.softplus.default"] = convert_softplus;
  t["aten.baddbmm.default"] = convert_baddbmm;
  t["aten.rms_norm.default"] = convert_rms_norm;
  t["aten.repeat_interleave.self_int"] = convert_repeat_interleave;
  t["aten._weight_norm.default"] = convert_weight_norm;
  t["aten.histc.default"] = convert_histc;
  t["transformers.grouped_mm_fallback.default"] = convert_grouped_mm;
  t["aten.broadcast_to.default"] = convert_broadcast_to;
  t["aten.reshape_as.default"] = convert_reshape_as;
  t["aten.avg_pool1d.default"] = convert_avg_pool1d;
  t["aten.adaptive_avg_pool1d.default"] = convert_adaptive_avg_pool1d;
  t["aten.tril.default"] = triangle(false);
  t["aten.triu.default"] = triangle(true);
  t["aten.index_fill.int_Scalar"] = convert_index_fill;
  t["aten.index_add.default"] = convert_index_add;
  t["aten.nan_to_num.default"] = convert_nan_to_num;
  t["aten.resize_.default"] = convert_resize;
  t["aten.maximum.default"] = bool_extremum(t.at("aten.maximum.default"), OpKind::LogicalOr);
  t["aten.minimum.default"] = bool_extremum(t.at("aten.minimum.default"), OpKind::LogicalAnd);
  // Aliases of ops the table already has.
  t["aten.min.other"] = t.at("aten.minimum.default");
  t["aten.max.other"] = t.at("aten.maximum.default");
  t["aten.multiply.Tensor"] = t.at("aten.mul.Tensor");
  t["aten.multiply.Scalar"] = t.at("aten.mul.Scalar");
  t["aten.empty_like.default"] = t.at("aten.zeros_like.default");
  t["aten.empty_permuted.default"] = t.at("aten.empty.memory_format");
  t["aten.concat.default"] = t.at("aten.cat.default");
  // In-place forms of functional ops the table has (those that already have one keep it).
  for (const char* functional : {"aten.masked_fill.Scalar",   "aten.masked_fill.Tensor",
                                 "aten.scatter.src",          "aten.scatter.value",
                                 "aten.scatter_add.default",  "aten.scatter_reduce.two",
                                 "aten.clamp.default",        "aten.clamp.Tensor",
                                 "aten.clamp_min.default",    "aten.clamp_max.default",
                                 "aten.add.Scalar",           "aten.sub.Scalar",
                                 "aten.mul.Scalar",           "aten.div.Scalar",
                                 "aten.div.Tensor_mode",      "aten.div.Scalar_mode",
                                 "aten.neg.default",          "aten.exp.default",
                                 "aten.sigmoid.default",      "aten.tanh.default",
                                 "aten.gelu.default",         "aten.leaky_relu.default",
                                 "aten.elu.default",          "aten.abs.default",
                                 "aten.sqrt.default",         "aten.rsqrt.default",
                                 "aten.pow.Tensor_Scalar",    "aten.pow.Tensor_Tensor",
                                 "aten.floor_divide.default", "aten.fmod.Scalar",
                                 "aten.remainder.Scalar",     "aten.tril.default",
                                 "aten.triu.default",         "aten.cumsum.default",
                                 "aten.log.default",          "aten.floor.default",
                                 "aten.round.default",        "aten.reciprocal.default",
                                 "aten.square.default",       "aten.index_fill.int_Scalar",
                                 "aten.index_add.default",    "aten.logical_not.default",
                                 "aten.bitwise_and.Tensor",   "aten.bitwise_or.Tensor",
                                 "aten.nan_to_num.default"}) {
    std::string name(functional);
    const size_t dot = name.find('.', 5);  // after "aten."
    std::string in_place_name = name.substr(0, dot) + "_" + name.substr(dot);
    if (!t.count(in_place_name)) t[in_place_name] = in_place(t.at(name));
  }
  // out= forms (NAME.out) of the single-output functional ops NAME.default and NAME.Tensor.
  std::vector<std::pair<std::string, Converter>> outs;
  for (const auto& [name, converter] : t) {
    for (const char* overload : {".default", ".Tensor"}) {
      const std::string suffix(overload);
      if (name.size() <= suffix.size() ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      std::string out_name = name.substr(0, name.size() - suffix.size()) + ".out";
      if (!t.count(out_name)) outs.emplace_back(std::move(out_name), out_variant(converter));
    }
  }
  for (auto& [name, converter] : outs)
    t.emplace(std::move(name), std::move(converter));
}

}  // namespace etc::torch_import
