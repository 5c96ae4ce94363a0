// Segment reductions: scatter_reduce.two with every reduce ATen has ("sum", "prod", "mean",
// "amax", "amin") and either include_self, and embedding_bag on top of it, decomposed onto
// ops ExecuTorch's portable kernel library has. Sums and means accumulate with index_put
// (deterministic on every device: the accumulating index_put runs on the host). Products, maxima
// and minima have no accumulating op, so the entries are grouped by destination (a topk of their
// linear positions), reduced within each group by an inclusive segmented scan (Hillis-Steele
// doubling: ceil(log2(M)) steps of shift, compare, combine), and each group's last entry is
// written; the other entries write a spare element past the end, so no two writes meet at a real
// element and the result does not depend on the order index_put applies them.
#include <algorithm>
#include <numeric>

#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {
namespace {

Result<ValueId> flat(TorchNode& n, ValueId v) {
  return n.emit(OpKind::Reshape, {{"self", v}, {"shape", std::vector<int64_t>{-1}}});
}

Result<ValueId> slice0(TorchNode& n, ValueId v, int64_t start, int64_t end) {
  return n.emit(
      OpKind::SliceTensor,
      {{"self", v}, {"dim", int64_t{0}}, {"start", start}, {"end", end}, {"step", int64_t{1}}});
}

Result<ValueId> cat0(TorchNode& n, ValueId a, ValueId b) {
  return n.emit(OpKind::Cat, {{"tensors", std::vector<ValueId>{a, b}}, {"dim", int64_t{0}}});
}

Result<ValueId> take(TorchNode& n, ValueId v, ValueId positions) {
  return n.emit(OpKind::IndexTensor, {{"self", v}, {"indices", std::vector<ValueId>{positions}}});
}

// Each element of `shape`'s row-major position, computed at run time (a cumulative sum of
// ones) rather than stored: self may be large.
Result<ValueId> linear_positions(TorchNode& n, const std::vector<int64_t>& shape) {
  const int64_t count =
      std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  ETC_ASSIGN_OR_RETURN(ValueId ones, n.emit(OpKind::Full, {{"size", std::vector<int64_t>{count}},
                                                           {"fill_value", Scalar{int64_t{1}}},
                                                           {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId run,
      n.emit(OpKind::Cumsum,
             {{"self", ones}, {"dim", int64_t{0}}, {"dtype", ArgValue(std::monostate{})}}));
  ETC_ASSIGN_OR_RETURN(ValueId pos,
                       n.emit(OpKind::SubScalar, {{"self", run}, {"other", Scalar{int64_t{1}}}}));
  return n.emit(OpKind::Reshape, {{"self", pos}, {"shape", shape}});
}

enum class Combine { kProd, kMax, kMin };

Result<ValueId> combine(TorchNode& n, Combine how, ValueId a, ValueId b) {
  switch (how) {
    case Combine::kProd:
      return n.emit(OpKind::MulTensor, {{"self", a}, {"other", b}});
    case Combine::kMax:
      return n.emit(OpKind::Maximum, {{"self", a}, {"other", b}});
    case Combine::kMin:
      return n.emit(OpKind::Minimum, {{"self", a}, {"other", b}});
  }
  return n.invalid("unknown combine");
}

// scatter_reduce with "prod", "amax" or "amin": `x` (self) with each addressed element
// replaced by the reduction of the values sent to it (and of itself with include_self).
// `positions` address x at every element of `values` (index_put's index tensors).
Result<ValueId> reduce_by_groups(TorchNode& n, ValueId x, const std::vector<ValueId>& positions,
                                 ValueId values, Combine how, bool include_self) {
  const std::vector<int64_t> in = n.sizes(x);
  const int64_t total = std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>());
  ETC_ASSIGN_OR_RETURN(ValueId table, linear_positions(n, in));
  // Each entry's destination as one number. Gathering it checks the index as index_put
  // would (a negative index counts from the end, one out of range is an error).
  ETC_ASSIGN_OR_RETURN(ValueId dest,
                       n.emit(OpKind::IndexTensor, {{"self", table}, {"indices", positions}}));
  ETC_ASSIGN_OR_RETURN(dest, flat(n, dest));
  ETC_ASSIGN_OR_RETURN(ValueId v, flat(n, values));
  const int64_t m = n.sizes(v)[0];
  if (m == 0) return x;
  if (total == 0)
    return n.invalid("scatter_reduce into an empty self: every index is out of range");
  // Grouped by destination: a topk of every entry, smallest first (ExecuTorch's portable
  // library has topk but not sort). etc's topk breaks ties by index, so a group's product
  // multiplies in index order, as ATen's loop does.
  ETC_ASSIGN_OR_RETURN(
      ValueId sorted,
      n.emit(
          OpKind::Topk,
          {{"self", dest}, {"k", m}, {"dim", int64_t{0}}, {"largest", false}, {"sorted", true}}));
  const ValueId order = n.last_outputs()[1];
  ETC_ASSIGN_OR_RETURN(v, take(n, v, order));
  // Inclusive segmented scan: after the step of width k, entry i holds the reduction of the
  // up to 2k entries of its group ending at i. Groups are contiguous, so entry i - k is in
  // i's group exactly when their destinations are equal.
  for (int64_t k = 1; k < m; k *= 2) {
    ETC_ASSIGN_OR_RETURN(ValueId pad, n.emit(OpKind::Full, {{"size", std::vector<int64_t>{k}},
                                                            {"fill_value", Scalar{int64_t{-1}}},
                                                            {"dtype", DType::kInt64}}));
    ETC_ASSIGN_OR_RETURN(ValueId head, slice0(n, sorted, 0, m - k));
    ETC_ASSIGN_OR_RETURN(ValueId prev_dest, cat0(n, pad, head));
    ETC_ASSIGN_OR_RETURN(ValueId same,
                         n.emit(OpKind::EqTensor, {{"self", sorted}, {"other", prev_dest}}));
    // Entries before k have no predecessor k back; any values fill them (unread: `same` is
    // false there).
    ETC_ASSIGN_OR_RETURN(ValueId fill, slice0(n, v, 0, k));
    ETC_ASSIGN_OR_RETURN(ValueId vhead, slice0(n, v, 0, m - k));
    ETC_ASSIGN_OR_RETURN(ValueId prev, cat0(n, fill, vhead));
    ETC_ASSIGN_OR_RETURN(ValueId both, combine(n, how, prev, v));
    ETC_ASSIGN_OR_RETURN(
        v, n.emit(OpKind::WhereSelf, {{"condition", same}, {"self", both}, {"other", v}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId xf, flat(n, x));
  if (include_self) {
    ETC_ASSIGN_OR_RETURN(ValueId own, take(n, xf, sorted));
    ETC_ASSIGN_OR_RETURN(v, combine(n, how, own, v));
  }
  // A group's last entry (the next destination differs) holds the group's reduction.
  ETC_ASSIGN_OR_RETURN(ValueId end, n.emit(OpKind::Full, {{"size", std::vector<int64_t>{1}},
                                                          {"fill_value", Scalar{int64_t{-1}}},
                                                          {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(ValueId tail, slice0(n, sorted, 1, m));
  ETC_ASSIGN_OR_RETURN(ValueId next_dest, cat0(n, tail, end));
  ETC_ASSIGN_OR_RETURN(ValueId last,
                       n.emit(OpKind::NeTensor, {{"self", sorted}, {"other", next_dest}}));
  ETC_ASSIGN_OR_RETURN(ValueId spare_at, n.emit(OpKind::FullLike, {{"self", sorted},
                                                                   {"fill_value", Scalar{total}},
                                                                   {"dtype", DType::kInt64}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId target,
      n.emit(OpKind::WhereSelf, {{"condition", last}, {"self", sorted}, {"other", spare_at}}));
  ETC_ASSIGN_OR_RETURN(ValueId spare, slice0(n, xf, 0, 1));
  ETC_ASSIGN_OR_RETURN(ValueId base, cat0(n, xf, spare));
  ETC_ASSIGN_OR_RETURN(ValueId written,
                       n.emit(OpKind::IndexPut, {{"self", base},
                                                 {"indices", std::vector<ValueId>{target}},
                                                 {"values", v},
                                                 {"accumulate", false}}));
  ETC_ASSIGN_OR_RETURN(written, slice0(n, written, 0, total));
  return n.emit(OpKind::Reshape, {{"self", written}, {"shape", in}});
}

// scatter_reduce with "sum" or "mean" through accumulating index_puts; without include_self
// the addressed elements are zeroed first. The mean divides by the count of values (plus one
// with include_self); integers divide rounding down, as ATen does, and an element no value
// reaches keeps self.
Result<ValueId> reduce_by_sums(TorchNode& n, ValueId x, const std::vector<ValueId>& positions,
                               ValueId values, bool mean, bool include_self) {
  ValueId base = x;
  if (!include_self) {
    ETC_ASSIGN_OR_RETURN(
        ValueId zeros,
        n.emit(OpKind::FullLike,
               {{"self", values}, {"fill_value", Scalar{int64_t{0}}}, {"dtype", n.dtype(x)}}));
    ETC_ASSIGN_OR_RETURN(
        base,
        n.emit(OpKind::IndexPut,
               {{"self", x}, {"indices", positions}, {"values", zeros}, {"accumulate", false}}));
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId sum,
      n.emit(OpKind::IndexPut,
             {{"self", base}, {"indices", positions}, {"values", values}, {"accumulate", true}}));
  if (!mean) return sum;
  ETC_ASSIGN_OR_RETURN(ValueId start, n.emit(OpKind::FullLike,
                                             {{"self", x},
                                              {"fill_value", Scalar{int64_t{include_self ? 1 : 0}}},
                                              {"dtype", n.dtype(x)}}));
  ETC_ASSIGN_OR_RETURN(ValueId ones, n.emit(OpKind::FullLike, {{"self", values},
                                                               {"fill_value", Scalar{int64_t{1}}},
                                                               {"dtype", n.dtype(x)}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId count,
      n.emit(OpKind::IndexPut,
             {{"self", start}, {"indices", positions}, {"values", ones}, {"accumulate", true}}));
  if (!include_self) {
    ETC_ASSIGN_OR_RETURN(
        ValueId none, n.emit(OpKind::EqScalar, {{"self", count}, {"other", Scalar{int64_t{0}}}}));
    ETC_ASSIGN_OR_RETURN(ValueId one, n.emit(OpKind::FullLike, {{"self", x},
                                                                {"fill_value", Scalar{int64_t{1}}},
                                                                {"dtype", n.dtype(x)}}));
    ETC_ASSIGN_OR_RETURN(
        count, n.emit(OpKind::WhereSelf, {{"condition", none}, {"self", one}, {"other", count}}));
  }
  if (dtype_is_float(n.dtype(x))) {
    return n.emit(OpKind::DivTensor, {{"self", sum}, {"other", count}});
  }
  return n.emit(OpKind::DivTensorMode,
                {{"self", sum}, {"other", count}, {"rounding_mode", std::string("floor")}});
}

}  // namespace

Result<ValueId> emit_scatter_reduce(TorchNode& n, ValueId x, const std::vector<ValueId>& positions,
                                    ValueId values, const std::string& reduce, bool include_self) {
  const DType dtype = n.dtype(x);
  if (reduce == "sum" || reduce == "mean") {
    if (reduce == "mean" && dtype == DType::kBool) {
      return n.invalid("scatter_reduce with reduce='mean' does not take bool tensors");
    }
    return reduce_by_sums(n, x, positions, values, reduce == "mean", include_self);
  }
  Combine how;
  if (reduce == "prod") {
    // On bools a product is a logical and: the minimum.
    how = dtype == DType::kBool ? Combine::kMin : Combine::kProd;
  } else if (reduce == "amax") {
    how = Combine::kMax;
  } else if (reduce == "amin") {
    how = Combine::kMin;
  } else {
    return n.invalid(
        "scatter_reduce's reduce must be one of 'sum', 'prod', 'mean', 'amax', "
        "'amin', got '" +
        reduce + "'");
  }
  if (dtype != DType::kBool) return reduce_by_groups(n, x, positions, values, how, include_self);
  // maximum and minimum take numbers: bools go through int32 (which the CUDA kernels take
  // too) and back.
  auto to = [&](ValueId v, DType d) { return n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", d}}); };
  ETC_ASSIGN_OR_RETURN(ValueId xb, to(x, DType::kInt32));
  ETC_ASSIGN_OR_RETURN(ValueId vb, to(values, DType::kInt32));
  ETC_ASSIGN_OR_RETURN(ValueId out, reduce_by_groups(n, xb, positions, vb, how, include_self));
  return to(out, DType::kBool);
}

namespace {

// _embedding_bag / embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx): the rows of weight that 1-D indices
// pick, reduced per bag (mode 0 sum, 1 mean, 2 max); bag b holds the indices from offsets[b]
// to the next offset (the last bag, with include_last_offset, every index from its offset on,
// as ATen's CPU kernel reads them). An empty bag gives zeros. Each index's bag is a running
// count of the offsets at or before it, so repeated offsets leave empty bags; indices before
// the first offset and those equal to padding_idx go to a spare row, dropped at the end.
// The other outputs, which the backward pass reads, are ATen's CPU kernel's: offset2bag (each
// index's bag; empty in sum mode without padding_idx), bag_size (the indices each bag counts;
// zeros in sum mode) and max_indices (in max mode, for each bag and column, the row the maximum
// came from, the first among equals; otherwise bag_size again). One deviation: ATen's max skips a
// NaN that is not its bag's first value; etc's maximum propagates every NaN (as torch.amax does).
Status convert_embedding_bag(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId weight, n.tensor("weight"));
  ETC_ASSIGN_OR_RETURN(ValueId indices, n.tensor("indices"));
  ETC_ASSIGN_OR_RETURN(ValueId offsets, n.tensor("offsets"));
  ETC_ASSIGN_OR_RETURN(int64_t mode, n.int_arg("mode", int64_t{0}));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> per_sample, n.optional_tensor("per_sample_weights"));
  ETC_ASSIGN_OR_RETURN(bool include_last, n.bool_arg("include_last_offset", false));
  std::optional<int64_t> padding_idx;
  if (n.has("padding_idx")) {
    ETC_ASSIGN_OR_RETURN(padding_idx, n.optional_int("padding_idx"));
  }
  const std::vector<int64_t> w = n.sizes(weight);
  const std::vector<int64_t> idx = n.sizes(indices);
  const std::vector<int64_t> off = n.sizes(offsets);
  if (w.size() != 2) return n.invalid("weight must be 2-D, got " + shape_to_string(w));
  if (idx.size() != 1 || off.size() != 1) {
    return n.invalid("indices and offsets must be 1-D, got " + shape_to_string(idx) + " and " +
                     shape_to_string(off));
  }
  if (mode < 0 || mode > 2) return n.invalid("mode must be 0 (sum), 1 (mean) or 2 (max)");
  if (per_sample && mode != 0) {
    return n.invalid("per_sample_weights are only taken with mode 0 (sum)");
  }
  if (padding_idx && *padding_idx < 0) *padding_idx += w[0];  // ATen counts it from the end
  const bool padded = padding_idx && *padding_idx >= 0 && *padding_idx < w[0];
  const int64_t m = idx[0];
  const int64_t bags = off[0] - (include_last ? 1 : 0);
  if (bags < 0) return n.invalid("include_last_offset needs at least one offset");
  const int64_t dim = w[1];
  auto int64 = [&](ValueId v) -> Result<ValueId> {
    if (n.dtype(v) == DType::kInt64) return v;
    return n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", DType::kInt64}});
  };
  auto full = [&](std::vector<int64_t> size, int64_t value, DType dtype) {
    return n.emit(OpKind::Full,
                  {{"size", std::move(size)}, {"fill_value", Scalar{value}}, {"dtype", dtype}});
  };
  auto full_like = [&](ValueId like, int64_t value) {
    return n.emit(OpKind::FullLike,
                  {{"self", like}, {"fill_value", Scalar{value}}, {"dtype", DType::kInt64}});
  };
  ETC_ASSIGN_OR_RETURN(indices, int64(indices));
  ETC_ASSIGN_OR_RETURN(offsets, int64(offsets));
  // starts[i]: how many bags start at index i (offsets equal to m start no index's bag: the
  // spare element m takes them).
  ETC_ASSIGN_OR_RETURN(ValueId zeros, full({m + 1}, 0, DType::kInt64));
  ETC_ASSIGN_OR_RETURN(ValueId ones, full_like(offsets, 1));
  ETC_ASSIGN_OR_RETURN(ValueId starts,
                       n.emit(OpKind::IndexPut, {{"self", zeros},
                                                 {"indices", std::vector<ValueId>{offsets}},
                                                 {"values", ones},
                                                 {"accumulate", true}}));
  ETC_ASSIGN_OR_RETURN(starts, slice0(n, starts, 0, m));
  ETC_ASSIGN_OR_RETURN(
      ValueId count,
      n.emit(OpKind::Cumsum,
             {{"self", starts}, {"dim", int64_t{0}}, {"dtype", ArgValue(std::monostate{})}}));
  ETC_ASSIGN_OR_RETURN(ValueId bag,
                       n.emit(OpKind::SubScalar, {{"self", count}, {"other", Scalar{int64_t{1}}}}));
  if (include_last && bags > 0) {
    ETC_ASSIGN_OR_RETURN(bag, n.emit(OpKind::Clamp, {{"self", bag},
                                                     {"min", ArgValue(std::monostate{})},
                                                     {"max", Scalar{bags - 1}}}));
  }
  const ValueId offset2bag = bag;
  // Indices before the first offset and padding go to the spare row `bags`.
  ETC_ASSIGN_OR_RETURN(ValueId spare, full_like(bag, bags));
  ETC_ASSIGN_OR_RETURN(ValueId outside,
                       n.emit(OpKind::LtScalar, {{"self", bag}, {"other", Scalar{int64_t{0}}}}));
  if (padded) {
    ETC_ASSIGN_OR_RETURN(ValueId pad, n.emit(OpKind::EqScalar,
                                             {{"self", indices}, {"other", Scalar{*padding_idx}}}));
    ETC_ASSIGN_OR_RETURN(outside, n.emit(OpKind::LogicalOr, {{"self", outside}, {"other", pad}}));
  }
  ETC_ASSIGN_OR_RETURN(
      bag, n.emit(OpKind::WhereSelf, {{"condition", outside}, {"self", spare}, {"other", bag}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId rows,
      n.emit(OpKind::IndexTensor, {{"self", weight}, {"indices", std::vector<ValueId>{indices}}}));
  if (per_sample) {
    ETC_ASSIGN_OR_RETURN(
        ValueId scale,
        n.emit(OpKind::Reshape, {{"self", *per_sample}, {"shape", std::vector<int64_t>{m, 1}}}));
    ETC_ASSIGN_OR_RETURN(rows, n.emit(OpKind::MulTensor, {{"self", rows}, {"other", scale}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId base, full({bags + 1, dim}, 0, n.dtype(weight)));
  ETC_ASSIGN_OR_RETURN(
      ValueId row_of,
      n.emit(OpKind::Reshape, {{"self", bag}, {"shape", std::vector<int64_t>{m, 1}}}));
  std::vector<int64_t> columns(static_cast<size_t>(dim));
  std::iota(columns.begin(), columns.end(), int64_t{0});
  const std::vector<ValueId> positions{row_of, index_constant(n, {1, dim}, columns)};
  static constexpr const char* kReduce[] = {"sum", "mean", "amax"};
  ETC_ASSIGN_OR_RETURN(ValueId reduced, emit_scatter_reduce(n, base, positions, rows, kReduce[mode],
                                                            /*include_self=*/false));
  ETC_ASSIGN_OR_RETURN(ValueId out, slice0(n, reduced, 0, bags));
  ETC_RETURN_IF_ERROR(n.set_output(0, out));
  if (n.num_outputs() < 4) return Status();
  // offset2bag.
  if (n.output_used(1)) {
    ValueId o2b = offset2bag;
    if (mode == 0 && !padded) {
      ETC_ASSIGN_OR_RETURN(o2b, full({0}, 0, DType::kInt64));
    }
    ETC_RETURN_IF_ERROR(n.set_output(1, o2b));
  }
  // bag_size: the indices each bag counts (not padding).
  ValueId bag_size;
  if (mode == 0) {
    ETC_ASSIGN_OR_RETURN(bag_size, full({bags}, 0, DType::kInt64));
  } else {
    ETC_ASSIGN_OR_RETURN(ValueId none, full({bags + 1}, 0, DType::kInt64));
    ETC_ASSIGN_OR_RETURN(ValueId each, full_like(bag, 1));
    ETC_ASSIGN_OR_RETURN(bag_size, n.emit(OpKind::IndexPut, {{"self", none},
                                                             {"indices", std::vector<ValueId>{bag}},
                                                             {"values", each},
                                                             {"accumulate", true}}));
    ETC_ASSIGN_OR_RETURN(bag_size, slice0(n, bag_size, 0, bags));
  }
  if (n.output_used(2)) ETC_RETURN_IF_ERROR(n.set_output(2, bag_size));
  if (!n.output_used(3)) return Status();
  if (mode != 2) return n.set_output(3, bag_size);  // ATen's kernel returns bag_size again
  // max_indices: for each bag and column the first entry holding the maximum (the least entry
  // position among those equal to it), mapped to its row of weight; 0 where none is (an empty
  // bag).
  ETC_ASSIGN_OR_RETURN(
      ValueId best,
      n.emit(OpKind::IndexTensor, {{"self", reduced}, {"indices", std::vector<ValueId>{bag}}}));
  ETC_ASSIGN_OR_RETURN(ValueId hit, n.emit(OpKind::EqTensor, {{"self", rows}, {"other", best}}));
  std::vector<int64_t> entry(static_cast<size_t>(m));
  std::iota(entry.begin(), entry.end(), int64_t{0});
  ETC_ASSIGN_OR_RETURN(ValueId none_at, full({m, dim}, m, DType::kInt64));
  ETC_ASSIGN_OR_RETURN(
      ValueId at,
      n.emit(OpKind::WhereSelf,
             {{"condition", hit}, {"self", index_constant(n, {m, 1}, entry)}, {"other", none_at}}));
  ETC_ASSIGN_OR_RETURN(ValueId first_base, full({bags + 1, dim}, m, DType::kInt64));
  ETC_ASSIGN_OR_RETURN(ValueId first, emit_scatter_reduce(n, first_base, positions, at, "amin",
                                                          /*include_self=*/true));
  ETC_ASSIGN_OR_RETURN(first, slice0(n, first, 0, bags));
  ETC_ASSIGN_OR_RETURN(ValueId zero_row, full({1}, 0, DType::kInt64));
  ETC_ASSIGN_OR_RETURN(ValueId row_at, cat0(n, indices, zero_row));
  ETC_ASSIGN_OR_RETURN(
      ValueId max_indices,
      n.emit(OpKind::IndexTensor, {{"self", row_at}, {"indices", std::vector<ValueId>{first}}}));
  return n.set_output(3, max_indices);
}

}  // namespace

void add_segment_converters(std::map<std::string, Converter>& t) {
  t["aten._embedding_bag.default"] = convert_embedding_bag;
  t["aten._embedding_bag_forward_only.default"] = convert_embedding_bag;
  t["aten.embedding_bag.default"] = convert_embedding_bag;
  t["aten.embedding_bag.padding_idx"] = convert_embedding_bag;
}

}  // namespace etc::torch_import
