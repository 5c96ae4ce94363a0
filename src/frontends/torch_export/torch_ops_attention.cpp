// The decoder ops of the torch.export op table (torch_ops.cpp has the rest): attention
// (scaled_dot_product_attention decomposed, grouped-query attention without copying the
// cache), embedding and advanced indexing, and the writes a KV cache is made of (index_put,
// index_copy, copy, in place or not).
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontends/torch_export/torch_node.h"
#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Status convert_embedding(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId w, n.tensor("weight"));
  ETC_ASSIGN_OR_RETURN(ValueId idx, n.tensor("indices"));
  ETC_ASSIGN_OR_RETURN(int64_t pad, n.int_arg("padding_idx", -1));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::Embedding, {{"weight", w}, {"indices", idx}, {"padding_idx", pad}}));
  return n.set_output(0, out);
}

// unbind(self, dim) -> Tensor[]: select(self, dim, i) for every i.
Status convert_unbind(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim_arg, n.int_arg("dim", 0));
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       n.wrap_dim(dim_arg, static_cast<int64_t>(n.sizes(x).size()), "dim"));
  const int64_t count = n.sizes(x)[static_cast<size_t>(dim)];
  for (int64_t i = 0; i < count; ++i) {
    if (!n.output_used(static_cast<int>(i))) continue;
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(OpKind::SelectInt, {{"self", x}, {"dim", dim}, {"index", i}}));
    ETC_RETURN_IF_ERROR(n.set_output(static_cast<int>(i), out));
  }
  return Status();
}

// index.Tensor(self, indices): advanced indexing (rope tables, mask rows by position).
Status convert_index(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> indices, n.optional_tensors("indices"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return n.set_output(0, out);
}

// index_put(self, indices, values, accumulate) as the node's output; the in-place form rebinds
// self, so later reads see the update.
Status emit_index_put(TorchNode& n, ValueId self, const std::vector<ValueId>& indices,
                      ValueId values, bool accumulate, bool in_place) {
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::IndexPut, {{"self", self},
                                                              {"indices", indices},
                                                              {"values", values},
                                                              {"accumulate", accumulate}}));
  if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", out));
  return n.set_output(0, out);
}

// index_put(self, indices, values, accumulate) and its in-place form (a KV-cache write in the
// training dialect).
// x[mask] = values (index_put with one bool mask over x's leading dims) when values has one
// row for all the selected elements (the usual `x[mask] = 0`): where(mask, values, x), or x
// plus where(mask, values, 0) accumulating. One row per selected element depends on how many
// the mask selects at run time: refused.
Status emit_masked_put(TorchNode& n, ValueId x, ValueId mask, ValueId values, bool accumulate,
                       bool in_place) {
  const std::vector<int64_t> xs = n.sizes(x), ms = n.sizes(mask), vs = n.sizes(values);
  if (ms.size() > xs.size() || !std::equal(ms.begin(), ms.end(), xs.begin())) {
    return n.invalid("the mask " + shape_to_string(ms) + " does not match the leading dims of " +
                     shape_to_string(xs));
  }
  const size_t rest = xs.size() - ms.size();
  if (vs.size() > rest + 1 || (vs.size() == rest + 1 && vs[0] != 1)) {
    return n.unsupported("index_put with a boolean mask and values " + shape_to_string(vs) +
                         " (one row per selected element: as many as the mask selects at run "
                         "time; etc needs static shapes)");
  }
  std::vector<int64_t> mask_shape = ms;
  mask_shape.resize(xs.size(), 1);
  ETC_ASSIGN_OR_RETURN(ValueId m, n.emit(OpKind::Reshape, {{"self", mask}, {"shape", mask_shape}}));
  if (n.dtype(values) != n.dtype(x)) {
    ETC_ASSIGN_OR_RETURN(values, n.emit(OpKind::ToCopy, {{"self", values}, {"dtype", n.dtype(x)}}));
  }
  ValueId out;
  if (accumulate) {
    ValueId zero = n.constant(KnownTensor{n.dtype(x), {}, {0.0}});
    ETC_ASSIGN_OR_RETURN(
        ValueId add,
        n.emit(OpKind::WhereSelf, {{"condition", m}, {"self", values}, {"other", zero}}));
    OpKind op = n.dtype(x) == DType::kBool ? OpKind::LogicalOr : OpKind::AddTensor;
    ETC_ASSIGN_OR_RETURN(out, n.emit(op, {{"self", x}, {"other", add}}));
  } else {
    ETC_ASSIGN_OR_RETURN(
        out, n.emit(OpKind::WhereSelf, {{"condition", m}, {"self", values}, {"other", x}}));
  }
  if (n.sizes(out) != xs) {
    return n.invalid("values " + shape_to_string(vs) + " do not broadcast to " +
                     shape_to_string(xs));
  }
  if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", out));
  return n.set_output(0, out);
}

Status convert_index_put(TorchNode& n, bool in_place) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> indices, n.optional_tensors("indices"));
  ETC_ASSIGN_OR_RETURN(ValueId values, n.tensor("values"));
  ETC_ASSIGN_OR_RETURN(bool accumulate, n.bool_arg("accumulate", false));
  if (indices.size() == 1 && indices[0].valid() && n.dtype(indices[0]) == DType::kBool) {
    return emit_masked_put(n, x, indices[0], values, accumulate, in_place);
  }
  return emit_index_put(n, x, indices, values, accumulate, in_place);
}

// index_copy(self, dim, index, source) = index_put(self, [None] * dim + [index], source), the
// decomposition PyTorch and ExecuTorch use; the index must be 1-D.
Status convert_index_copy(TorchNode& n, bool in_place) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim_arg, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(ValueId index, n.tensor("index"));
  ETC_ASSIGN_OR_RETURN(ValueId source, n.tensor("source"));
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       n.wrap_dim(dim_arg, static_cast<int64_t>(n.sizes(x).size()), "dim"));
  if (n.sizes(index).size() != 1) {
    return n.invalid("index_copy needs a 1-D index, got shape " + shape_to_string(n.sizes(index)));
  }
  std::vector<ValueId> indices(static_cast<size_t>(dim));
  indices.push_back(index);
  return emit_index_put(n, x, indices, source, false, in_place);
}

// copy(self, src) / copy_(self, src): src broadcast to self's shape in self's dtype (a
// buffer's write in the training dialect: `cache.copy_(new)`).
Status convert_copy(TorchNode& n, bool in_place) {
  ETC_ASSIGN_OR_RETURN(ValueId self, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId src, n.tensor("src"));
  ValueId v = src;
  if (n.sizes(v) != n.sizes(self)) {
    ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Expand, {{"self", v}, {"size", n.sizes(self)}}));
  }
  if (n.dtype(v) != n.dtype(self)) {
    ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", n.dtype(self)}}));
  }
  if (in_place) ETC_RETURN_IF_ERROR(n.rebind("self", v));
  return n.set_output(0, v);
}

// PyTorch's safe softmax of x along dim (its _safe_softmax, which the math path of
// scaled_dot_product_attention uses): softmax, then zeros in a row whose every value is -inf
// (where a plain softmax gives NaN), written as where(any(x != -inf, dim), softmax, 0), the
// form the CPU load planner runs as one kernel (kernels/safe_softmax.h). The softmax of x
// already in the out's dtype `dt`; zeros of that dtype.
Result<ValueId> safe_softmax(TorchNode& n, ValueId x, ValueId scores, int64_t dim, DType dt) {
  ETC_ASSIGN_OR_RETURN(
      ValueId attn, n.emit(OpKind::Softmax, {{"self", x}, {"dim", dim}, {"half_to_float", false}}));
  ETC_ASSIGN_OR_RETURN(ValueId masked,
                       n.emit(OpKind::EqScalar, {{"self", scores}, {"other", Scalar{-kInf}}}));
  ETC_ASSIGN_OR_RETURN(ValueId kept, n.emit(OpKind::LogicalNot, {{"self", masked}}));
  ETC_ASSIGN_OR_RETURN(ValueId any_kept,
                       n.emit(OpKind::AnyDim, {{"self", kept}, {"dim", dim}, {"keepdim", true}}));
  ValueId zero = n.constant(known_full(dt, {}, 0.0));
  return n.emit(OpKind::WhereSelf, {{"condition", any_kept}, {"self", attn}, {"other", zero}});
}

// _safe_softmax(self, dim, dtype=None): safe_softmax, the softmax in `dtype` where given (x
// converted first, as softmax.int does), the -inf test on x itself.
Status convert_safe_softmax(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
  ValueId in = x;
  if (d && *d != n.dtype(x)) {
    ETC_ASSIGN_OR_RETURN(in, n.emit(OpKind::ToCopy, {{"self", x}, {"dtype", *d}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, safe_softmax(n, in, x, dim, d.value_or(n.dtype(x))));
  return n.set_output(0, out);
}

// scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa):
// softmax(q @ k^T * scale + mask) @ v over the flattened batch dims. A row whose every score
// is masked gives 0, as PyTorch's kernels do (its _safe_softmax), where a plain softmax gives
// NaN: when the mask may mask a whole row, the weights go through
// where(any(scores != -inf, -1), softmax, 0) as in PyTorch's Core ATen decomposition.
// bf16 and fp16 attention runs in float32 and rounds once, at the output, as PyTorch's
// decomposition and its CPU kernels do: scores rounded to 8 mantissa bits before the softmax
// would put errors of several percent into the weights of a long context.
Status convert_sdpa(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId q, n.tensor("query"));
  ETC_ASSIGN_OR_RETURN(ValueId k, n.tensor("key"));
  ETC_ASSIGN_OR_RETURN(ValueId v, n.tensor("value"));
  const DType io_dtype = n.dtype(q);
  const bool widen = io_dtype == DType::kBFloat16 || io_dtype == DType::kFloat16;
  if (widen) {
    for (ValueId* x : {&q, &k, &v}) {
      ETC_ASSIGN_OR_RETURN(*x, n.emit(OpKind::ToCopy, {{"self", *x}, {"dtype", DType::kFloat32}}));
    }
  }
  ETC_ASSIGN_OR_RETURN(double dropout, n.float_arg("dropout_p", 0.0));
  ETC_ASSIGN_OR_RETURN(bool causal, n.bool_arg("is_causal", false));
  ETC_ASSIGN_OR_RETURN(bool gqa, n.bool_arg("enable_gqa", false));
  if (dropout != 0.0)
    return n.unsupported("dropout_p " + std::to_string(dropout) + " (inference needs 0)");
  std::vector<int64_t> qs = n.sizes(q), ks = n.sizes(k), vs = n.sizes(v);
  if (qs.size() < 2 || ks.size() != qs.size() || vs.size() != qs.size()) {
    return n.invalid("query, key and value must have the same rank (at least 2)");
  }
  size_t r = qs.size();
  // Grouped-query attention: each key/value head serves rep = Hq / Hk query heads (dim -3),
  // query head h reading key/value head h / rep (PyTorch's repeat_interleave). The query
  // heads of one group are adjacent, so q [.., Hk * rep, L, E] is q [.., Hk, rep * L, E]: the
  // group's rows attend to the same keys with no copy of the cache. A mask that differs per
  // head needs the keys repeated instead.
  int64_t rep = 1;
  const bool grouped = gqa && r >= 3 && ks[r - 3] != qs[r - 3] && ks[r - 3] > 0 &&
                       vs[r - 3] == ks[r - 3] && qs[r - 3] % ks[r - 3] == 0;
  bool per_head_mask = false;
  if (grouped && n.has("attn_mask")) {
    ETC_ASSIGN_OR_RETURN(const Entry* m, n.entry("attn_mask"));
    per_head_mask = m->shape.size() >= 3 && m->shape[m->shape.size() - 3] != 1;
  }
  if (grouped && !per_head_mask) {
    rep = qs[r - 3] / ks[r - 3];
  } else if (grouped) {
    const int64_t rep_kv = qs[r - 3] / ks[r - 3];
    auto repeat_heads = [&](ValueId x) -> Result<ValueId> {
      std::vector<int64_t> s = n.sizes(x);
      ETC_ASSIGN_OR_RETURN(ValueId u, n.emit(OpKind::Unsqueeze,
                                             {{"self", x}, {"dim", static_cast<int64_t>(r - 2)}}));
      std::vector<int64_t> expanded = s;
      expanded.insert(expanded.begin() + static_cast<long>(r - 2), rep_kv);
      ETC_ASSIGN_OR_RETURN(ValueId e, n.emit(OpKind::Expand, {{"self", u}, {"size", expanded}}));
      s[r - 3] *= rep_kv;
      return n.emit(OpKind::Reshape, {{"self", e}, {"shape", s}});
    };
    ETC_ASSIGN_OR_RETURN(k, repeat_heads(k));
    ETC_ASSIGN_OR_RETURN(v, repeat_heads(v));
    ks = n.sizes(k);
    vs = n.sizes(v);
  }
  // The batch dims are the keys' (the query's with Hq / rep heads).
  std::vector<int64_t> batch(ks.begin(), ks.end() - 2);
  std::vector<int64_t> q_batch(qs.begin(), qs.end() - 2);
  if (rep > 1) q_batch[r - 3] /= rep;
  if (q_batch != batch || !std::equal(batch.begin(), batch.end(), vs.begin())) {
    return n.unsupported(gqa ? "grouped-query attention (enable_gqa) with these shapes"
                             : "key/value batch dims that differ from the query's");
  }
  int64_t L = qs[r - 2], E = qs[r - 1], S = ks[r - 2], Ev = vs[r - 1];
  if (ks[r - 1] != E || vs[r - 2] != S) return n.invalid("query, key and value sizes do not agree");
  int64_t B = 1;
  for (int64_t d : batch)
    B *= d;
  double scale = 1.0 / std::sqrt(static_cast<double>(E));
  if (n.has("scale")) {
    ETC_ASSIGN_OR_RETURN(scale, n.float_arg("scale"));
  }

  ETC_ASSIGN_OR_RETURN(
      ValueId q3,
      n.emit(OpKind::Reshape, {{"self", q}, {"shape", std::vector<int64_t>{B, rep * L, E}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId k3, n.emit(OpKind::Reshape, {{"self", k}, {"shape", std::vector<int64_t>{B, S, E}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId kt,
      n.emit(OpKind::TransposeInt, {{"self", k3}, {"dim0", int64_t{1}}, {"dim1", int64_t{2}}}));
  ETC_ASSIGN_OR_RETURN(ValueId scores, n.emit(OpKind::Bmm, {{"self", q3}, {"mat2", kt}}));
  ETC_ASSIGN_OR_RETURN(scores,
                       n.emit(OpKind::MulScalar, {{"self", scores}, {"other", Scalar{scale}}}));
  // Scores [batch.., rep, L, S] when grouped: masks broadcast over the group as over heads.
  std::vector<int64_t> full = batch;
  if (rep > 1) full.push_back(rep);
  full.push_back(L);
  full.push_back(S);
  ETC_ASSIGN_OR_RETURN(scores, n.emit(OpKind::Reshape, {{"self", scores}, {"shape", full}}));
  if (causal) {
    // The additive causal mask, a constant (bounded like every value computed at export).
    ETC_RETURN_IF_ERROR(check_known_size(n, {L, S}));
    KnownTensor bias{n.dtype(q), {L, S}, {}};
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < S; ++j)
        bias.v.push_back(j <= i ? 0.0 : -kInf);
    }
    ETC_ASSIGN_OR_RETURN(
        scores, n.emit(OpKind::AddTensor, {{"self", scores}, {"other", n.constant(bias)}}));
  }
  bool may_mask_a_row = false;  // the causal mask alone always keeps key 0
  if (n.has("attn_mask")) {
    ETC_ASSIGN_OR_RETURN(const Entry* m, n.entry("attn_mask"));
    const bool boolean = m->dtype == DType::kBool;
    const std::optional<KnownTensor> known = n.known_value("attn_mask");
    may_mask_a_row = !known || std::any_of(known->v.begin(), known->v.end(), [&](double x) {
      return boolean ? x == 0.0 : x == -kInf;
    });
    ValueId bias;
    if (m->dtype == DType::kBool) {
      ETC_ASSIGN_OR_RETURN(ValueId mv, n.tensor("attn_mask"));
      ValueId zero = n.constant(known_full(n.dtype(q), {}, 0.0));
      ValueId ninf = n.constant(known_full(n.dtype(q), {}, -kInf));
      ETC_ASSIGN_OR_RETURN(
          bias, n.emit(OpKind::WhereSelf, {{"condition", mv}, {"self", zero}, {"other", ninf}}));
    } else {
      ETC_ASSIGN_OR_RETURN(bias, n.tensor("attn_mask"));
      if (n.dtype(bias) != n.dtype(q)) {
        ETC_ASSIGN_OR_RETURN(bias, n.emit(OpKind::ToCopy, {{"self", bias}, {"dtype", n.dtype(q)}}));
      }
    }
    if (rep > 1 && m->shape.size() >= 3) {  // [.., 1 (heads), L, S] -> [.., 1, 1 (group), L, S]
      ETC_ASSIGN_OR_RETURN(
          bias, n.emit(OpKind::Unsqueeze,
                       {{"self", bias}, {"dim", static_cast<int64_t>(m->shape.size() - 2)}}));
    }
    ETC_ASSIGN_OR_RETURN(scores, n.emit(OpKind::AddTensor, {{"self", scores}, {"other", bias}}));
  }
  ValueId attn;
  if (may_mask_a_row) {
    ETC_ASSIGN_OR_RETURN(attn, safe_softmax(n, scores, scores, -1, n.dtype(q)));
  } else {
    ETC_ASSIGN_OR_RETURN(
        attn, n.emit(OpKind::Softmax,
                     {{"self", scores}, {"dim", int64_t{-1}}, {"half_to_float", false}}));
  }
  ETC_ASSIGN_OR_RETURN(
      attn,
      n.emit(OpKind::Reshape, {{"self", attn}, {"shape", std::vector<int64_t>{B, rep * L, S}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId v3,
      n.emit(OpKind::Reshape, {{"self", v}, {"shape", std::vector<int64_t>{B, S, Ev}}}));
  ETC_ASSIGN_OR_RETURN(ValueId o3, n.emit(OpKind::Bmm, {{"self", attn}, {"mat2", v3}}));
  std::vector<int64_t> out_shape(qs.begin(), qs.end() - 2);
  out_shape.push_back(L);
  out_shape.push_back(Ev);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", o3}, {"shape", out_shape}}));
  if (widen) {
    ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::ToCopy, {{"self", out}, {"dtype", io_dtype}}));
  }
  return n.set_output(0, out);
}

}  // namespace

void add_attention_converters(std::map<std::string, Converter>& t) {
  t["aten.embedding.default"] = convert_embedding;
  t["aten.index.Tensor"] = convert_index;
  t["aten.unbind.int"] = convert_unbind;
  t["aten.copy.default"] = [](TorchNode& n) { return convert_copy(n, false); };
  t["aten.copy_.default"] = [](TorchNode& n) { return convert_copy(n, true); };
  t["aten.index_put.default"] = [](TorchNode& n) { return convert_index_put(n, false); };
  t["aten.index_put_.default"] = [](TorchNode& n) { return convert_index_put(n, true); };
  t["aten.index_copy.default"] = [](TorchNode& n) { return convert_index_copy(n, false); };
  t["aten.index_copy_.default"] = [](TorchNode& n) { return convert_index_copy(n, true); };
  t["aten.scaled_dot_product_attention.default"] = convert_sdpa;
  t["aten._safe_softmax.default"] = convert_safe_softmax;
}

}  // namespace etc::torch_import
