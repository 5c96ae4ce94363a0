// ONNX's TfIdfVectorizer over integer tokens -> IR, following ONNX's reference (and ONNX
// Runtime): the n-grams of the pool are counted in each row, for every skip distance, by
// comparing gathered windows with the pool; the counts go to their output columns with a
// constant 0/1 matrix, and the mode weighs them.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {

// TfIdfVectorizer(X [C] or [B, C] of int32/int64; min_gram_length, max_gram_length,
// max_skip_count, mode, ngram_counts, ngram_indexes, pool_int64s, weights?) -> float32
// [max(ngram_indexes) + 1] per row. An n-gram of n >= 2 is counted once per skip distance
// 1 .. max_skip_count + 1 at which it occurs (its tokens that many positions apart);
// unigrams once.
Status convert_tfidf_vectorizer(NodeCtx& ctx) {
  const DType dt = ctx.dtype(0);
  if (dt != DType::kInt32 && dt != DType::kInt64)
    return ctx.unsupported("X of type " + std::string(dtype_name(dt)) + " (int32 and int64)");
  if (ctx.attr("pool_strings")) return ctx.unsupported("string pools (pool_strings)");
  const std::vector<int64_t> xs = ctx.shape(0);
  if (xs.size() != 1 && xs.size() != 2) return ctx.invalid("X must have shape [C] or [B, C]");
  ETC_ASSIGN_OR_RETURN(int64_t min_n, ctx.attr_int("min_gram_length", std::nullopt));
  ETC_ASSIGN_OR_RETURN(int64_t max_n, ctx.attr_int("max_gram_length", std::nullopt));
  ETC_ASSIGN_OR_RETURN(int64_t max_skip, ctx.attr_int("max_skip_count", std::nullopt));
  Result<std::string> mode = ctx.attr_string("mode", std::nullopt);
  if (!mode.ok()) return mode.status();
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> counts, ctx.attr_ints("ngram_counts", std::nullopt));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> indexes, ctx.attr_ints("ngram_indexes", std::nullopt));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> pool, ctx.attr_ints("pool_int64s", std::nullopt));
  ETC_ASSIGN_OR_RETURN(std::vector<float> weights, ctx.attr_floats("weights"));
  if (*mode != "TF" && *mode != "IDF" && *mode != "TFIDF")
    return ctx.invalid("mode must be TF, IDF or TFIDF, got '" + *mode + "'");
  if (min_n < 1 || max_n < min_n || max_skip < 0)
    return ctx.invalid("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0");
  if (indexes.empty()) return ctx.invalid("ngram_indexes is empty");
  int64_t out_size = 0;
  for (int64_t i : indexes) {
    if (i < 0) return ctx.invalid("ngram_indexes has a negative index");
    out_size = std::max(out_size, i + 1);
  }
  if (!weights.empty() && static_cast<int64_t>(weights.size()) < out_size) {
    return ctx.invalid("weights has " + std::to_string(weights.size()) +
                       " values, fewer than the output's " + std::to_string(out_size));
  }

  // The pool's n-grams by size: n-grams of size s start at ngram_counts[s - 1]. Each has
  // an id (its place in the pool) that ngram_indexes maps to an output column; an n-gram
  // listed twice counts for its last id only, as in the reference.
  struct Grams {
    int64_t n = 0;
    std::vector<int64_t> tokens;  // [m, n]
    std::vector<int64_t> ids;
  };
  std::vector<Grams> sizes;
  int64_t id = 0;
  const auto total = static_cast<int64_t>(pool.size());
  for (size_t s = 0; s < counts.size(); ++s) {
    const int64_t n = static_cast<int64_t>(s) + 1;
    const int64_t begin = counts[s], end = s + 1 < counts.size() ? counts[s + 1] : total;
    if (begin < 0 || end < begin || end > total)
      return ctx.invalid("ngram_counts must be non-decreasing offsets into pool_int64s");
    const int64_t m = (end - begin) / n;
    if (n >= min_n && n <= max_n && m > 0) {
      Grams g{n, {pool.begin() + begin, pool.begin() + begin + m * n}, {}};
      std::map<std::vector<int64_t>, int64_t> last;
      for (int64_t k = 0; k < m; ++k)
        last[{g.tokens.begin() + k * n, g.tokens.begin() + (k + 1) * n}] = id + k;
      for (int64_t k = 0; k < m; ++k) {
        const bool kept =
            last[{g.tokens.begin() + k * n, g.tokens.begin() + (k + 1) * n}] == id + k;
        g.ids.push_back(kept ? id + k : -1);
      }
      sizes.push_back(std::move(g));
    }
    id += m;
  }
  if (id > static_cast<int64_t>(indexes.size())) {
    return ctx.invalid("ngram_indexes has " + std::to_string(indexes.size()) +
                       " entries for the pool's " + std::to_string(id) + " n-grams");
  }

  const int64_t rows = xs.size() == 2 ? xs[0] : 1, len = xs.back();
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, {rows, len}));
  std::vector<ValueId> parts;
  std::vector<int64_t> part_ids;
  for (const Grams& g : sizes) {
    const int64_t m = static_cast<int64_t>(g.ids.size());
    // Every window of n tokens, `d` apart, for each skip distance d (unigrams once).
    std::vector<int64_t> idx;
    const int64_t distances = g.n == 1 ? 1 : max_skip + 1;
    for (int64_t d = 1; d <= distances; ++d) {
      for (int64_t i = 0; i + (g.n - 1) * d < len; ++i) {
        for (int64_t j = 0; j < g.n; ++j)
          idx.push_back(i + j * d);
      }
    }
    const int64_t windows = static_cast<int64_t>(idx.size()) / g.n;
    ValueId counted;
    if (windows == 0) {
      ETC_ASSIGN_OR_RETURN(
          counted, ctx.emit(OpKind::Zeros,
                            {{"size", std::vector<int64_t>{rows, m}}, {"dtype", DType::kFloat32}}));
    } else {
      std::vector<ValueId> indices(1);
      indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {windows, g.n}, idx)));
      ETC_ASSIGN_OR_RETURN(ValueId w,
                           ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
      ETC_ASSIGN_OR_RETURN(w, reshape(ctx, w, {rows, windows, 1, g.n}));
      ValueId grams = ctx.add_constant(host_from_ints(DType::kInt64, {1, 1, m, g.n}, g.tokens));
      // [rows, windows, m, n] token matches -> whole-window matches -> counts [rows, m].
      ETC_ASSIGN_OR_RETURN(ValueId eq, ctx.emit(OpKind::EqTensor, {{"self", w}, {"other", grams}}));
      ETC_ASSIGN_OR_RETURN(eq,
                           ctx.emit(OpKind::ToCopy, {{"self", eq}, {"dtype", DType::kFloat32}}));
      ETC_ASSIGN_OR_RETURN(
          ValueId hits,
          ctx.emit(OpKind::SumDimIntList,
                   {{"self", eq}, {"dim", std::vector<int64_t>{3}}, {"keepdim", false}}));
      ETC_ASSIGN_OR_RETURN(
          hits, ctx.emit(OpKind::EqScalar, {{"self", hits}, {"other", Scalar{double(g.n)}}}));
      ETC_ASSIGN_OR_RETURN(hits,
                           ctx.emit(OpKind::ToCopy, {{"self", hits}, {"dtype", DType::kFloat32}}));
      ETC_ASSIGN_OR_RETURN(
          counted,
          ctx.emit(OpKind::SumDimIntList,
                   {{"self", hits}, {"dim", std::vector<int64_t>{1}}, {"keepdim", false}}));
    }
    parts.push_back(counted);
    part_ids.insert(part_ids.end(), g.ids.begin(), g.ids.end());
  }
  ValueId y;
  const int64_t grams = static_cast<int64_t>(part_ids.size());
  if (grams == 0) {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Zeros, {{"size", std::vector<int64_t>{rows, out_size}},
                                                     {"dtype", DType::kFloat32}}));
  } else {
    ETC_ASSIGN_OR_RETURN(ValueId c,
                         parts.size() == 1
                             ? Result<ValueId>(parts[0])
                             : ctx.emit(OpKind::Cat, {{"tensors", parts}, {"dim", int64_t{1}}}));
    // Each kept n-gram's count to its output column.
    std::vector<double> to_out(static_cast<size_t>(grams * out_size), 0.0);
    for (int64_t k = 0; k < grams; ++k) {
      if (part_ids[k] >= 0) to_out[static_cast<size_t>(k * out_size + indexes[part_ids[k]])] = 1.0;
    }
    ValueId map = ctx.add_constant(host_from_doubles(DType::kFloat32, {grams, out_size}, to_out));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::Mm, {{"self", c}, {"mat2", map}}));
  }
  if (*mode == "IDF") {
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::GtScalar, {{"self", y}, {"other", Scalar{0.0}}}));
    ETC_ASSIGN_OR_RETURN(y, ctx.emit(OpKind::ToCopy, {{"self", y}, {"dtype", DType::kFloat32}}));
  }
  if (*mode != "TF" && !weights.empty()) {
    std::vector<double> w(weights.begin(), weights.begin() + out_size);
    ETC_ASSIGN_OR_RETURN(
        y,
        ctx.emit(OpKind::MulTensor,
                 {{"self", y},
                  {"other", ctx.add_constant(host_from_doubles(DType::kFloat32, {out_size}, w))}}));
  }
  if (xs.size() == 1) {
    ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, {out_size}));
  }
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
