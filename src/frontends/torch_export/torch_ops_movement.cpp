// Data movement that real exporters emit, decomposed at import into the IR's ops where that
// is exact: splits (split, split_with_sizes, chunk), stack, unflatten, narrow, the dtype
// conversions (to.*, type_as), and the gathers and scatters that advanced indexing
// expresses with index tensors computed here (index_select, gather, flip, repeat, diagonal,
// the reflection and replication pads, scatter, scatter_add, select_scatter, slice_scatter).
// Every element of a result is an element of an input (or the scattered value): no
// arithmetic, so the decompositions give ATen's bits.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <numeric>

#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {

ValueId index_constant(TorchNode& n, std::vector<int64_t> shape,
                       const std::vector<int64_t>& values) {
  KnownTensor t{DType::kInt64, std::move(shape), {}};
  t.v.assign(values.begin(), values.end());
  return n.constant(t);
}

namespace {

// `x` indexed along `dim` by the 1-D `positions` (index.Tensor with None before dim): the
// dim's length becomes positions' length, the other dims stay.
Result<ValueId> take_along(TorchNode& n, ValueId x, int64_t dim,
                           const std::vector<int64_t>& positions) {
  std::vector<ValueId> indices(static_cast<size_t>(dim));  // invalid ids: None
  indices.push_back(index_constant(n, {static_cast<int64_t>(positions.size())}, positions));
  return n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}});
}

Result<int64_t> dim_arg(TorchNode& n, const char* arg, int64_t rank,
                        std::optional<int64_t> fallback = std::nullopt) {
  ETC_ASSIGN_OR_RETURN(int64_t d, n.int_arg(arg, fallback));
  return n.wrap_dim(d, rank, arg);
}

// ---- Splits, stack, views -----------------------------------------------------------------

// The node's outputs as slices of self along dim with these lengths.
Status emit_splits(TorchNode& n, int64_t dim, const std::vector<int64_t>& lengths) {
  if (static_cast<int>(lengths.size()) != n.num_tensor_outputs()) {
    return n.invalid("splits into " + std::to_string(lengths.size()) + " pieces, the program has " +
                     std::to_string(n.num_tensor_outputs()) + " outputs");
  }
  int64_t start = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int64_t end = start + lengths[i];
    if (n.output_used(static_cast<int>(i))) {
      ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
      ETC_ASSIGN_OR_RETURN(
          ValueId out,
          n.emit(
              OpKind::SliceTensor,
              {{"self", x}, {"dim", dim}, {"start", start}, {"end", end}, {"step", int64_t{1}}}));
      ETC_RETURN_IF_ERROR(n.set_output(static_cast<int>(i), out));
    }
    start = end;
  }
  return Status();
}

// split.Tensor(self, split_size, dim): pieces of split_size, the last one shorter (ATen's
// count: at least one piece).
Status convert_split(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  if (self->shape.empty()) return n.invalid("splitting a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(self->shape.size()), 0));
  ETC_ASSIGN_OR_RETURN(int64_t size, n.int_arg("split_size"));
  const int64_t len = self->shape[static_cast<size_t>(dim)];
  if (size < 0 || (size == 0 && len != 0)) return n.invalid("split_size must be positive");
  const int64_t count = size == 0 ? 1 : std::max<int64_t>((len + size - 1) / size, 1);
  std::vector<int64_t> lengths(static_cast<size_t>(count), size);
  lengths.back() = len - size * (count - 1);
  return emit_splits(n, dim, lengths);
}

// split_with_sizes(self, split_sizes, dim).
Status convert_split_with_sizes(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  if (self->shape.empty()) return n.invalid("splitting a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(self->shape.size()), 0));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> lengths, n.ints("split_sizes"));
  const int64_t len = self->shape[static_cast<size_t>(dim)];
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l < 0) return n.invalid("split_sizes " + shape_to_string(lengths) + " has a negative size");
    total += l;
  }
  if (total != len) {
    return n.invalid("split_sizes " + shape_to_string(lengths) + " do not add up to " +
                     std::to_string(len) + ", the size of dim " + std::to_string(dim));
  }
  return emit_splits(n, dim, lengths);
}

// chunk(self, chunks, dim): pieces of ceil(len / chunks) (ATen's split of that size).
Status convert_chunk(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  if (self->shape.empty()) return n.invalid("splitting a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(self->shape.size()), 0));
  ETC_ASSIGN_OR_RETURN(int64_t chunks, n.int_arg("chunks"));
  if (chunks <= 0) return n.invalid("chunks must be positive");
  const int64_t len = self->shape[static_cast<size_t>(dim)];
  const int64_t size = (len + chunks - 1) / chunks;
  if (size == 0) return emit_splits(n, dim, std::vector<int64_t>(static_cast<size_t>(chunks), 0));
  const int64_t count = std::max<int64_t>((len + size - 1) / size, 1);
  std::vector<int64_t> lengths(static_cast<size_t>(count), size);
  lengths.back() = len - size * (count - 1);
  return emit_splits(n, dim, lengths);
}

// stack(tensors, dim): each unsqueezed at dim, then cat.
Status convert_stack(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(std::vector<const Entry*> parts, n.tensor_entries("tensors"));
  if (parts.empty()) return n.invalid("stack of no tensors");
  const auto rank = static_cast<int64_t>(parts[0]->shape.size());
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", rank + 1, 0));
  for (const Entry* e : parts) {
    if (e->shape != parts[0]->shape) {
      return n.invalid("stack of tensors of different shapes (" + shape_to_string(parts[0]->shape) +
                       " and " + shape_to_string(e->shape) + ")");
    }
  }
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> xs, n.tensors("tensors"));
  std::vector<ValueId> unsqueezed;
  for (ValueId x : xs) {
    ETC_ASSIGN_OR_RETURN(ValueId u, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", dim}}));
    unsqueezed.push_back(u);
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Cat, {{"tensors", unsqueezed}, {"dim", dim}}));
  return n.set_output(0, out);
}

// unflatten.int(self, dim, sizes): dim split into sizes (one may be -1).
Status convert_unflatten(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.empty()) return n.invalid("unflatten of a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(in.size())));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, n.ints("sizes"));
  const int64_t len = in[static_cast<size_t>(dim)];
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) {
      infer = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return n.invalid("sizes " + shape_to_string(sizes) + " has a negative size");
    } else {
      known *= sizes[i];
    }
  }
  if (infer >= 0 && known != 0 && len % known == 0) sizes[static_cast<size_t>(infer)] = len / known;
  if (infer >= 0 ? (known == 0 || len % known != 0) : known != len) {
    return n.invalid("sizes " + shape_to_string(sizes) + " do not unflatten dim " +
                     std::to_string(dim) + " of size " + std::to_string(len));
  }
  std::vector<int64_t> shape(in.begin(), in.begin() + dim);
  shape.insert(shape.end(), sizes.begin(), sizes.end());
  shape.insert(shape.end(), in.begin() + dim + 1, in.end());
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", x}, {"shape", shape}}));
  return n.set_output(0, out);
}

// narrow(self, dim, start, length): a slice.
Status convert_narrow(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.empty()) return n.invalid("narrow of a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(in.size())));
  ETC_ASSIGN_OR_RETURN(int64_t start, n.int_arg("start"));
  ETC_ASSIGN_OR_RETURN(int64_t length, n.int_arg("length"));
  const int64_t len = in[static_cast<size_t>(dim)];
  if (start < 0) start += len;
  if (start < 0 || length < 0 || start + length > len) {
    return n.invalid("narrow of " + std::to_string(length) + " from " + std::to_string(start) +
                     " is outside dim " + std::to_string(dim) + " of size " + std::to_string(len));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::SliceTensor, {{"self", x},
                                                                 {"dim", dim},
                                                                 {"start", start},
                                                                 {"end", start + length},
                                                                 {"step", int64_t{1}}}));
  return n.set_output(0, out);
}

// to.device (the device is the program's to decide: a dtype conversion), to.dtype_layout,
// to.other and type_as (other's dtype).
Status convert_to(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  DType to = self->dtype;
  if (n.has("other")) {
    ETC_ASSIGN_OR_RETURN(const Entry* other, n.entry("other"));
    to = other->dtype;
  } else {
    ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
    to = d.value_or(self->dtype);
  }
  return cast_to(n, to);
}

// swapaxes / swapdims(self, a, b): transpose.
Converter swap(const char* a_arg, const char* b_arg) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(int64_t a, n.int_arg(a_arg));
    ETC_ASSIGN_OR_RETURN(int64_t b, n.int_arg(b_arg));
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(OpKind::TransposeInt, {{"self", x}, {"dim0", a}, {"dim1", b}}));
    return n.set_output(0, out);
  };
}

// numpy_T (x.T): every dim reversed.
Status convert_numpy_t(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const auto rank = static_cast<int64_t>(n.sizes(x).size());
  if (rank < 2) return n.set_output(0, x);
  std::vector<int64_t> perm;
  for (int64_t d = rank - 1; d >= 0; --d)
    perm.push_back(d);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Permute, {{"self", x}, {"dims", perm}}));
  return n.set_output(0, out);
}

// movedim.int / movedim.intlist(self, source, destination): a permute.
Status convert_movedim(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const auto rank = static_cast<int64_t>(n.sizes(x).size());
  if (rank == 0) return n.set_output(0, x);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> src, n.ints("source"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dst, n.ints("destination"));
  if (src.size() != dst.size()) return n.invalid("source and destination differ in length");
  std::vector<int64_t> perm(static_cast<size_t>(rank), -1);
  std::vector<bool> used(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < src.size(); ++i) {
    ETC_ASSIGN_OR_RETURN(int64_t s, n.wrap_dim(src[i], rank, "source"));
    ETC_ASSIGN_OR_RETURN(int64_t d, n.wrap_dim(dst[i], rank, "destination"));
    if (perm[static_cast<size_t>(d)] >= 0 || used[static_cast<size_t>(s)])
      return n.invalid("source and destination must not repeat a dim");
    perm[static_cast<size_t>(d)] = s;
    used[static_cast<size_t>(s)] = true;
  }
  int64_t next = 0;
  for (int64_t& p : perm) {
    if (p >= 0) continue;
    while (used[static_cast<size_t>(next)])
      ++next;
    p = next;
    used[static_cast<size_t>(next)] = true;
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Permute, {{"self", x}, {"dims", perm}}));
  return n.set_output(0, out);
}

// roll(self, shifts, dims): each dim indexed by its positions rotated; no dims: the tensor
// flattened, rolled and reshaped back.
Status convert_roll(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shifts, n.ints("shifts"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.ints("dims", std::vector<int64_t>{}));
  if (in.empty()) return n.set_output(0, x);  // rolling a 0-d tensor is the tensor
  auto rolled = [&](ValueId v, int64_t dim, int64_t len, int64_t shift) -> Result<ValueId> {
    if (len == 0) return v;
    std::vector<int64_t> p(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      p[static_cast<size_t>(i)] = ((i - shift) % len + len) % len;
    return take_along(n, v, dim, p);
  };
  if (dims.empty()) {
    if (shifts.size() != 1) return n.invalid("roll without dims takes one shift");
    const int64_t numel = std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>());
    ETC_ASSIGN_OR_RETURN(
        ValueId flat,
        n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{numel}}}));
    ETC_ASSIGN_OR_RETURN(ValueId r, rolled(flat, 0, numel, shifts[0]));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", r}, {"shape", in}}));
    return n.set_output(0, out);
  }
  if (shifts.size() != dims.size()) return n.invalid("shifts and dims differ in length");
  for (size_t i = 0; i < dims.size(); ++i) {
    ETC_ASSIGN_OR_RETURN(int64_t d, n.wrap_dim(dims[i], static_cast<int64_t>(in.size()), "dims"));
    ETC_ASSIGN_OR_RETURN(x, rolled(x, d, in[static_cast<size_t>(d)], shifts[i]));
  }
  return n.set_output(0, x);
}

// matmul(self, other) with NumPy's rules: 1-D operands gain a dim (dropped again), a 2-D
// other folds self's leading dims into one mm, and otherwise the batch dims broadcast and
// one bmm runs over them.
Status convert_matmul(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId a, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId b, n.tensor("other"));
  std::vector<int64_t> as = n.sizes(a), bs = n.sizes(b);
  if (as.empty() || bs.empty()) return n.invalid("matmul of a 0-d tensor");
  const bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  const int64_t rows = as[as.size() - 2], k = as.back(), cols = bs.back();
  if (bs[bs.size() - 2] != k) {
    return n.invalid("matmul of " + shape_to_string(n.sizes(a)) + " and " +
                     shape_to_string(n.sizes(b)) + ": the inner sizes differ");
  }
  std::vector<int64_t> a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  std::optional<std::vector<int64_t>> batch = broadcast_shapes(a_batch, b_batch);
  if (!batch) return n.invalid("matmul's batch dims do not broadcast");
  std::vector<int64_t> out_shape = *batch;
  if (!a_vec) out_shape.push_back(rows);
  if (!b_vec) out_shape.push_back(cols);
  const int64_t B = std::accumulate(batch->begin(), batch->end(), int64_t{1}, std::multiplies<>());
  auto reshape = [&](ValueId v, std::vector<int64_t> s) -> Result<ValueId> {
    if (n.sizes(v) == s) return v;
    return n.emit(OpKind::Reshape, {{"self", v}, {"shape", std::move(s)}});
  };
  ValueId p;
  if (b_batch.empty()) {  // [..., rows, k] x [k, cols]: one mm over B * rows rows
    ETC_ASSIGN_OR_RETURN(ValueId a2, reshape(a, {B * rows, k}));
    ETC_ASSIGN_OR_RETURN(ValueId b2, reshape(b, {k, cols}));
    ETC_ASSIGN_OR_RETURN(p, n.emit(OpKind::Mm, {{"self", a2}, {"mat2", b2}}));
  } else {
    auto batched = [&](ValueId v, std::vector<int64_t> s, int64_t r, int64_t c) -> Result<ValueId> {
      std::vector<int64_t> full = *batch;
      full.insert(full.end(), {r, c});
      ETC_ASSIGN_OR_RETURN(v, reshape(v, std::move(s)));
      if (n.sizes(v) != full) {
        ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::Expand, {{"self", v}, {"size", full}}));
      }
      return reshape(v, {B, r, c});
    };
    ETC_ASSIGN_OR_RETURN(ValueId a3, batched(a, as, rows, k));
    ETC_ASSIGN_OR_RETURN(ValueId b3, batched(b, bs, k, cols));
    ETC_ASSIGN_OR_RETURN(p, n.emit(OpKind::Bmm, {{"self", a3}, {"mat2", b3}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId out, reshape(p, out_shape));
  return n.set_output(0, out);
}

// masked_fill.Scalar / .Tensor(self, mask, value): where(mask, value, self), the value in
// self's dtype (as ATen casts it).
Status convert_masked_fill(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(const Entry* self, n.entry("self"));
  ValueId value;
  if (n.is_tensor("value")) {
    ETC_ASSIGN_OR_RETURN(const Entry* v, n.entry("value"));
    if (!v->shape.empty()) return n.invalid("masked_fill's value must be a 0-d tensor");
    ETC_ASSIGN_OR_RETURN(value, n.tensor("value"));
    if (v->dtype != self->dtype) {
      ETC_ASSIGN_OR_RETURN(value,
                           n.emit(OpKind::ToCopy, {{"self", value}, {"dtype", self->dtype}}));
    }
  } else {
    ETC_ASSIGN_OR_RETURN(Scalar s, n.scalar("value"));
    value = n.constant(known_full(self->dtype, {}, s.to_double()));
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId m, n.tensor("mask"));
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::WhereSelf, {{"condition", m}, {"self", value}, {"other", x}}));
  return n.set_output(0, out);
}

// fill_.Scalar / fill_.Tensor(self, value) and zero_(self), in place: every element the
// value (a 0-d tensor broadcast, in self's dtype). A write into a view reaches the tensors it
// views through rebind.
Converter fill_in_place(bool zero) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    const DType dtype = n.dtype(x);
    ValueId out;
    if (!zero && n.is_tensor("value")) {
      ETC_ASSIGN_OR_RETURN(ValueId v, n.tensor("value"));
      if (!n.sizes(v).empty()) return n.invalid("fill_'s value must be a 0-d tensor");
      if (n.dtype(v) != dtype) {
        ETC_ASSIGN_OR_RETURN(v, n.emit(OpKind::ToCopy, {{"self", v}, {"dtype", dtype}}));
      }
      ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::Expand, {{"self", v}, {"size", n.sizes(x)}}));
      ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::Clone, {{"self", out}}));
    } else {
      Scalar s{int64_t{0}};
      if (!zero) {
        ETC_ASSIGN_OR_RETURN(s, n.scalar("value"));
      }
      ETC_ASSIGN_OR_RETURN(
          out, n.emit(OpKind::FullLike, {{"self", x}, {"fill_value", s}, {"dtype", dtype}}));
    }
    ETC_RETURN_IF_ERROR(n.rebind("self", out));
    return n.set_output(0, out);
  };
}

// ---- einsum ------------------------------------------------------------------------------

// One operand of an einsum: its value and one label per dim.
struct EinsumTerm {
  ValueId v;
  std::string labels;
};

// Sums `t` over the labels not in `keep`.
Result<EinsumTerm> einsum_sum_out(TorchNode& n, EinsumTerm t, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string left;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.find(t.labels[i]) == std::string::npos) {
      dims.push_back(static_cast<int64_t>(i));
    } else {
      left += t.labels[i];
    }
  }
  if (dims.empty()) return t;
  ETC_ASSIGN_OR_RETURN(
      ValueId s, n.emit(OpKind::SumDimIntList, {{"self", t.v}, {"dim", dims}, {"keepdim", false}}));
  return EinsumTerm{s, left};
}

// `t` permuted to the labels of `order` (which holds exactly t's labels).
Result<ValueId> einsum_permute(TorchNode& n, const EinsumTerm& t, const std::string& order) {
  std::vector<int64_t> perm;
  bool identity = true;
  for (size_t i = 0; i < order.size(); ++i) {
    perm.push_back(static_cast<int64_t>(t.labels.find(order[i])));
    identity = identity && perm.back() == static_cast<int64_t>(i);
  }
  if (identity) return t.v;
  return n.emit(OpKind::Permute, {{"self", t.v}, {"dims", perm}});
}

// a and b contracted over their shared labels not in `keep`, as one bmm: a as [batch, left,
// contracted], b as [batch, contracted, right]; the result's labels are batch, left, right.
Result<EinsumTerm> einsum_pair(TorchNode& n, EinsumTerm a, EinsumTerm b, const std::string& keep) {
  std::string batch, left, right, sum;
  for (char c : a.labels) {
    const bool in_b = b.labels.find(c) != std::string::npos;
    const bool kept = keep.find(c) != std::string::npos;
    (in_b ? (kept ? batch : sum) : left) += c;
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) right += c;
  std::map<char, int64_t> size;
  for (const EinsumTerm* t : {&a, &b}) {
    const std::vector<int64_t>& s = n.sizes(t->v);
    for (size_t i = 0; i < t->labels.size(); ++i) {
      auto [it, fresh] = size.emplace(t->labels[i], s[i]);
      if (!fresh && it->second != s[i]) {
        return n.unsupported(std::string("label '") + t->labels[i] + "' has sizes " +
                             std::to_string(it->second) + " and " + std::to_string(s[i]) +
                             " (etc does not broadcast einsum operands)");
      }
    }
  }
  auto prod = [&](const std::string& ls) {
    int64_t p = 1;
    for (char c : ls)
      p *= size[c];
    return p;
  };
  ETC_ASSIGN_OR_RETURN(ValueId ap, einsum_permute(n, a, batch + left + sum));
  ETC_ASSIGN_OR_RETURN(ValueId bp, einsum_permute(n, b, batch + sum + right));
  const int64_t B = prod(batch), L = prod(left), C = prod(sum), R = prod(right);
  ETC_ASSIGN_OR_RETURN(
      ValueId a3,
      n.emit(OpKind::Reshape, {{"self", ap}, {"shape", std::vector<int64_t>{B, L, C}}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId b3,
      n.emit(OpKind::Reshape, {{"self", bp}, {"shape", std::vector<int64_t>{B, C, R}}}));
  ETC_ASSIGN_OR_RETURN(ValueId p, n.emit(OpKind::Bmm, {{"self", a3}, {"mat2", b3}}));
  std::vector<int64_t> shape;
  const std::string labels = batch + left + right;
  for (char c : labels)
    shape.push_back(size[c]);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", p}, {"shape", shape}}));
  return EinsumTerm{out, labels};
}

// einsum(equation, tensors): operands multiplied pairwise, left to right, as batched matrix
// products (labels in neither the output nor a later operand are summed as early as
// possible). Repeated labels in one operand (diagonals) and "..." are refused by name.
Status convert_einsum(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(std::string eq, n.string_arg("equation", std::nullopt));
  ETC_ASSIGN_OR_RETURN(std::vector<ValueId> xs, n.tensors("tensors"));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos)
    return n.unsupported("einsum with '...' (write the dims out)");
  const size_t arrow = eq.find("->");
  std::vector<std::string> ins;
  std::string lhs = eq.substr(0, arrow);
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    ins.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (ins.size() != xs.size() || xs.empty()) {
    return n.invalid("einsum '" + eq + "' has " + std::to_string(ins.size()) + " operands, " +
                     std::to_string(xs.size()) + " tensors are given");
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {  // implicit output: the labels seen once, sorted
    std::map<char, int> seen;
    for (const std::string& s : ins) {
      for (char c : s)
        ++seen[c];
    }
    for (auto [c, k] : seen)
      if (k == 1) out += c;
  }
  std::vector<EinsumTerm> terms;
  for (size_t i = 0; i < ins.size(); ++i) {
    const std::string& s = ins[i];
    if (s.size() != n.sizes(xs[i]).size()) {
      return n.invalid("einsum operand " + std::to_string(i) + " '" + s + "' does not match its " +
                       std::to_string(n.sizes(xs[i]).size()) + " dims");
    }
    for (size_t k = 0; k < s.size(); ++k) {
      if (!std::isalpha(static_cast<unsigned char>(s[k])))
        return n.invalid("einsum label '" + std::string(1, s[k]) + "' is not a letter");
      if (s.find(s[k], k + 1) != std::string::npos)
        return n.unsupported("einsum operand '" + s + "' repeats a label (a diagonal)");
    }
    terms.push_back(EinsumTerm{xs[i], s});
  }
  // The labels still needed after operand i: the output's and those of later operands.
  auto needed_after = [&](size_t i) {
    std::string keep = out;
    for (size_t j = i + 1; j < terms.size(); ++j)
      keep += terms[j].labels;
    return keep;
  };
  ETC_ASSIGN_OR_RETURN(
      EinsumTerm acc,
      einsum_sum_out(n, terms[0], needed_after(0) + (terms.size() > 1 ? terms[1].labels : "")));
  for (size_t i = 1; i < terms.size(); ++i) {
    const std::string keep = needed_after(i);
    ETC_ASSIGN_OR_RETURN(EinsumTerm b, einsum_sum_out(n, terms[i], keep + acc.labels));
    ETC_ASSIGN_OR_RETURN(acc, einsum_sum_out(n, acc, keep + b.labels));
    ETC_ASSIGN_OR_RETURN(acc, einsum_pair(n, acc, b, keep));
  }
  ETC_ASSIGN_OR_RETURN(acc, einsum_sum_out(n, acc, out));
  for (char c : out) {
    if (acc.labels.find(c) == std::string::npos)
      return n.invalid(std::string("einsum output label '") + c + "' is in no operand");
  }
  ETC_ASSIGN_OR_RETURN(ValueId result, einsum_permute(n, acc, out));
  return n.set_output(0, result);
}

// ---- Gathers: index.Tensor with index tensors made here --------------------------------------

// index_select(self, dim, index): index.Tensor with index at dim (a 0-d index keeps the dim,
// of size 1).
Status convert_index_select(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const bool scalar = n.sizes(x).empty();
  // A 0-d self is indexed as a 1-element vector; the result is 0-d again.
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       dim_arg(n, "dim", scalar ? 1 : static_cast<int64_t>(n.sizes(x).size())));
  ETC_ASSIGN_OR_RETURN(ValueId index, n.tensor("index"));
  if (n.sizes(index).size() > 1) {
    return n.invalid("index_select needs a 0-d or 1-D index, got " +
                     shape_to_string(n.sizes(index)));
  }
  if (scalar) {
    if (n.spec(index).numel() != 1) {
      return n.invalid("index_select of a 0-d tensor takes one index, got " +
                       shape_to_string(n.sizes(index)));
    }
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{1}}}));
    ETC_ASSIGN_OR_RETURN(
        index, n.emit(OpKind::Reshape, {{"self", index}, {"shape", std::vector<int64_t>{1}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId picked,
        n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", std::vector<ValueId>{index}}}));
    ETC_ASSIGN_OR_RETURN(
        picked, n.emit(OpKind::Reshape, {{"self", picked}, {"shape", std::vector<int64_t>{}}}));
    return n.set_output(0, picked);
  }
  if (n.sizes(index).empty()) {
    ETC_ASSIGN_OR_RETURN(
        index, n.emit(OpKind::Reshape, {{"self", index}, {"shape", std::vector<int64_t>{1}}}));
  }
  std::vector<ValueId> indices(static_cast<size_t>(dim));
  indices.push_back(index);
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  return n.set_output(0, out);
}

}  // namespace

// For gather and scatter: index tensors that address self at every position of `shape`,
// `index` (a tensor of that shape) at dim and the position itself elsewhere (an arange of
// each dim's length, shaped to broadcast against the others).
std::vector<ValueId> positions_with(TorchNode& n, const std::vector<int64_t>& shape, int64_t dim,
                                    ValueId index) {
  std::vector<ValueId> indices;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (static_cast<int64_t>(d) == dim) {
      indices.push_back(index);
      continue;
    }
    std::vector<int64_t> s(shape.size(), 1);
    s[d] = shape[d];
    std::vector<int64_t> values(static_cast<size_t>(shape[d]));
    std::iota(values.begin(), values.end(), int64_t{0});
    indices.push_back(index_constant(n, s, values));
  }
  return indices;
}

namespace {

// Checks gather/scatter's index against self: the same rank, and no larger than self along
// the dims other than dim (ATen's rule).
Status check_scatter_index(TorchNode& n, const std::vector<int64_t>& self,
                           const std::vector<int64_t>& index, int64_t dim) {
  if (index.size() != self.size()) {
    return n.invalid("index " + shape_to_string(index) + " must have the rank of self " +
                     shape_to_string(self));
  }
  for (size_t d = 0; d < self.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && index[d] > self[d]) {
      return n.invalid("index " + shape_to_string(index) + " is larger than self " +
                       shape_to_string(self) + " outside dim " + std::to_string(dim));
    }
  }
  return Status();
}

// gather(self, dim, index): out[p] = self[p with p[dim] = index[p]].
Status convert_gather(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const bool scalar = n.sizes(x).empty();
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       dim_arg(n, "dim", scalar ? 1 : static_cast<int64_t>(n.sizes(x).size())));
  ETC_ASSIGN_OR_RETURN(ValueId index, n.tensor("index"));
  const std::vector<int64_t> shape = n.sizes(index);
  if (scalar) {
    // A 0-d self: its one element for each index (at most one), in the index's shape.
    if (shape.size() > 1 || n.spec(index).numel() > 1) {
      return n.invalid("gather of a 0-d tensor takes a 0-d or 1-element index, got " +
                       shape_to_string(shape));
    }
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{1}}}));
    ETC_ASSIGN_OR_RETURN(
        index, n.emit(OpKind::Reshape, {{"self", index}, {"shape", std::vector<int64_t>{-1}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId picked,
        n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", std::vector<ValueId>{index}}}));
    ETC_ASSIGN_OR_RETURN(picked, n.emit(OpKind::Reshape, {{"self", picked}, {"shape", shape}}));
    return n.set_output(0, picked);
  }
  ETC_RETURN_IF_ERROR(check_scatter_index(n, n.sizes(x), shape, dim));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::IndexTensor,
                              {{"self", x}, {"indices", positions_with(n, shape, dim, index)}}));
  return n.set_output(0, out);
}

// flip(self, dims): each dim indexed by its positions in reverse.
Status convert_flip(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.ints("dims"));
  std::vector<bool> seen(in.size(), false);
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(int64_t w, n.wrap_dim(d, static_cast<int64_t>(in.size()), "dims"));
    if (in.empty()) continue;  // flipping a 0-d tensor is the tensor
    if (seen[static_cast<size_t>(w)])
      return n.invalid("dims lists dim " + std::to_string(w) + " twice");
    seen[static_cast<size_t>(w)] = true;
    std::vector<int64_t> rev(static_cast<size_t>(in[static_cast<size_t>(w)]));
    for (size_t i = 0; i < rev.size(); ++i)
      rev[i] = static_cast<int64_t>(rev.size() - 1 - i);
    ETC_ASSIGN_OR_RETURN(x, take_along(n, x, w, rev));
  }
  return n.set_output(0, x);
}

// repeat(self, repeats): self (with leading 1s to len(repeats) dims) as [1, s0, 1, s1, ...],
// expanded to [r0, s0, r1, s1, ...] and merged pairwise.
Status convert_repeat(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  std::vector<int64_t> in = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, n.ints("repeats"));
  if (repeats.size() < in.size()) {
    return n.invalid("repeats " + shape_to_string(repeats) + " has fewer dims than self " +
                     shape_to_string(in));
  }
  in.insert(in.begin(), repeats.size() - in.size(), 1);
  std::vector<int64_t> pairs, expanded, out_shape;
  for (size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) return n.invalid("repeats " + shape_to_string(repeats) + " is negative");
    pairs.insert(pairs.end(), {1, in[d]});
    expanded.insert(expanded.end(), {repeats[d], in[d]});
    out_shape.push_back(repeats[d] * in[d]);
  }
  ETC_ASSIGN_OR_RETURN(ValueId p, n.emit(OpKind::Reshape, {{"self", x}, {"shape", pairs}}));
  ETC_ASSIGN_OR_RETURN(ValueId e, n.emit(OpKind::Expand, {{"self", p}, {"size", expanded}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", e}, {"shape", out_shape}}));
  return n.set_output(0, out);
}

// diagonal(self, offset, dim1, dim2): the two dims indexed by their diagonal's positions,
// and the diagonal moved last (where ATen puts it).
Status convert_diagonal(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  const auto rank = static_cast<int64_t>(in.size());
  if (rank < 2) return n.invalid("diagonal needs at least 2 dims, got " + shape_to_string(in));
  ETC_ASSIGN_OR_RETURN(int64_t offset, n.int_arg("offset", 0));
  ETC_ASSIGN_OR_RETURN(int64_t d1, dim_arg(n, "dim1", rank, 0));
  ETC_ASSIGN_OR_RETURN(int64_t d2, dim_arg(n, "dim2", rank, 1));
  if (d1 == d2) return n.invalid("dim1 and dim2 are both " + std::to_string(d1));
  const int64_t r0 = std::max<int64_t>(-offset, 0), c0 = std::max<int64_t>(offset, 0);
  const int64_t len = std::max<int64_t>(
      0, std::min(in[static_cast<size_t>(d1)] - r0, in[static_cast<size_t>(d2)] - c0));
  std::vector<int64_t> rows(static_cast<size_t>(len)), cols(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) {
    rows[static_cast<size_t>(i)] = r0 + i;
    cols[static_cast<size_t>(i)] = c0 + i;
  }
  std::vector<ValueId> indices(static_cast<size_t>(std::max(d1, d2) + 1));
  indices[static_cast<size_t>(d1)] = index_constant(n, {len}, rows);
  indices[static_cast<size_t>(d2)] = index_constant(n, {len}, cols);
  ETC_ASSIGN_OR_RETURN(ValueId g, n.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  // index.Tensor puts the diagonal where the two dims were when they are adjacent, else
  // first; ATen puts it last.
  const int64_t at = std::abs(d1 - d2) == 1 ? std::min(d1, d2) : 0;
  if (at == rank - 2) return n.set_output(0, g);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (d != at) dims.push_back(d);
  dims.push_back(at);
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Permute, {{"self", g}, {"dims", dims}}));
  return n.set_output(0, out);
}

enum class PadMode { kReflect, kReplicate, kCircular };

// The positions of a dim of length len that a pad of `before` and `after` reads: reflected
// at the edges (the edge not repeated), the edge replicated, or wrapped around; a negative
// pad crops.
Result<std::vector<int64_t>> pad_positions(TorchNode& n, int64_t len, int64_t before, int64_t after,
                                           PadMode mode) {
  // A negative pad crops: the positions start (or end) inside the dim.
  if (len + before + after < 0) {
    return n.invalid("padding (" + std::to_string(before) + ", " + std::to_string(after) +
                     ") leaves a dim of size " + std::to_string(len) + " with a negative size");
  }
  if (len == 0) return n.invalid("padding of an empty dim");
  const int64_t most = std::max(before, after);
  if ((mode == PadMode::kReflect && most >= len) || (mode == PadMode::kCircular && most > len)) {
    return n.invalid("padding " + std::to_string(most) + " is too large for a dim of size " +
                     std::to_string(len));
  }
  std::vector<int64_t> p;
  for (int64_t o = -before; o < len + after; ++o) {
    int64_t i = o;
    if (mode == PadMode::kReflect) {
      if (i < 0) i = -i;
      if (i >= len) i = 2 * (len - 1) - i;
    } else if (mode == PadMode::kReplicate) {
      i = std::clamp<int64_t>(i, 0, len - 1);
    } else {
      i = (i % len + len) % len;
    }
    p.push_back(i);
  }
  return p;
}

// `padding` pairs (before, after) from the last dim backwards, each dim indexed by its
// padded positions.
Status pad_by_positions(TorchNode& n, const std::vector<int64_t>& padding, PadMode mode) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (padding.size() % 2 != 0 || padding.size() / 2 > in.size()) {
    return n.invalid("padding " + shape_to_string(padding) + " does not fit " +
                     shape_to_string(in));
  }
  for (size_t k = 0; k < padding.size() / 2; ++k) {
    const auto dim = static_cast<int64_t>(in.size() - 1 - k);
    ETC_ASSIGN_OR_RETURN(
        std::vector<int64_t> p,
        pad_positions(n, in[static_cast<size_t>(dim)], padding[2 * k], padding[2 * k + 1], mode));
    ETC_ASSIGN_OR_RETURN(x, take_along(n, x, dim, p));
  }
  return n.set_output(0, x);
}

// reflection_pad{1,2,3}d / replication_pad{1,2,3}d(self, padding).
Converter pad(PadMode mode, size_t dims) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> padding, n.ints("padding"));
    if (padding.size() != 2 * dims) {
      return n.invalid("padding " + shape_to_string(padding) + " must have " +
                       std::to_string(2 * dims) + " entries");
    }
    return pad_by_positions(n, padding, mode);
  };
}

// pad(self, pad, mode, value): F.pad as the default export keeps it.
Status convert_pad(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> padding, n.ints("pad"));
  ETC_ASSIGN_OR_RETURN(std::string mode, n.string_arg("mode", std::string("constant")));
  if (mode == "reflect") return pad_by_positions(n, padding, PadMode::kReflect);
  if (mode == "replicate") return pad_by_positions(n, padding, PadMode::kReplicate);
  if (mode == "circular") return pad_by_positions(n, padding, PadMode::kCircular);
  if (mode != "constant") return n.invalid("unknown padding mode '" + mode + "'");
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(double value, n.float_arg("value", 0.0));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::ConstantPadNd, {{"self", x}, {"pad", padding}, {"value", Scalar{value}}}));
  return n.set_output(0, out);
}

// as_strided(self, size, stride, storage_offset): the elements at storage offset
// storage_offset + sum(i * stride) for every position i of size. Where each of self's
// elements sat in storage comes from PyTorch's layout of self (its eager strides): the result
// is self reshaped when it reads self's elements in order, else index.Tensor over self
// flattened. Offsets that hold none of self's elements are refused.
Status convert_as_strided(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  ETC_ASSIGN_OR_RETURN(TorchNode::EagerLayout layout, n.eager_layout("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("size"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> stride, n.ints("stride"));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> offset_arg, n.optional_int("storage_offset"));
  if (size.size() != stride.size()) {
    return n.invalid("size " + shape_to_string(size) + " and stride " + shape_to_string(stride) +
                     " differ in length");
  }
  if (layout.strides.size() != in.size())
    return n.unsupported("self's recorded layout does not match its shape");
  ETC_RETURN_IF_ERROR(check_known_size(n, size));
  ETC_RETURN_IF_ERROR(check_known_size(n, in));
  // Storage offset -> self's flat (row-major) index.
  std::map<int64_t, int64_t> where;
  const int64_t numel = std::accumulate(in.begin(), in.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> pos(in.size(), 0);
  for (int64_t flat = 0; flat < numel; ++flat) {
    int64_t off = layout.storage_offset;
    for (size_t d = 0; d < in.size(); ++d)
      off += pos[d] * layout.strides[d];
    where.emplace(off, flat);
    for (size_t d = pos.size(); d-- > 0;) {
      if (++pos[d] < in[d]) break;
      pos[d] = 0;
    }
  }
  const int64_t base = offset_arg.value_or(layout.storage_offset);
  const int64_t count = std::accumulate(size.begin(), size.end(), int64_t{1}, std::multiplies<>());
  std::vector<int64_t> index(static_cast<size_t>(count));
  std::vector<int64_t> at(size.size(), 0);
  bool in_order = count == numel;
  for (int64_t k = 0; k < count; ++k) {
    int64_t off = base;
    for (size_t d = 0; d < size.size(); ++d)
      off += at[d] * stride[d];
    auto it = where.find(off);
    if (it == where.end()) {
      return n.unsupported("as_strided reads storage offset " + std::to_string(off) +
                           ", which holds none of self's elements");
    }
    index[static_cast<size_t>(k)] = it->second;
    in_order = in_order && it->second == k;
    for (size_t d = at.size(); d-- > 0;) {
      if (++at[d] < size[d]) break;
      at[d] = 0;
    }
  }
  if (in_order) {
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Reshape, {{"self", x}, {"shape", size}}));
    return n.set_output(0, out);
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId flat, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{numel}}}));
  std::vector<ValueId> indices{index_constant(n, size, index)};
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::IndexTensor, {{"self", flat}, {"indices", indices}}));
  return n.set_output(0, out);
}

// ---- Scatters: index_put with index tensors made here ----------------------------------------

// scatter(self, dim, index, src | value), scatter_add, scatter_reduce.two with "sum": self
// with the addressed elements set (or added to, in a deterministic order).
Converter scatter(bool accumulate) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    // A 0-d self (and its 0-d or 1-element index and src) scatters as a 1-element vector.
    const bool scalar = n.sizes(x).empty();
    auto as_vector = [&](ValueId v) {
      return n.emit(OpKind::Reshape, {{"self", v}, {"shape", std::vector<int64_t>{-1}}});
    };
    if (scalar) {
      ETC_ASSIGN_OR_RETURN(x, as_vector(x));
    }
    const std::vector<int64_t> in = n.sizes(x);
    ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(in.size())));
    ETC_ASSIGN_OR_RETURN(ValueId index, n.tensor("index"));
    if (scalar) {
      if (n.sizes(index).size() > 1 || n.spec(index).numel() > 1) {
        return n.invalid("scatter into a 0-d tensor takes a 0-d or 1-element index, got " +
                         shape_to_string(n.sizes(index)));
      }
      ETC_ASSIGN_OR_RETURN(index, as_vector(index));
    }
    const std::vector<int64_t> shape = n.sizes(index);
    ETC_RETURN_IF_ERROR(check_scatter_index(n, in, shape, dim));
    std::optional<std::string> reduce;
    bool include_self = true;
    if (n.has("reduce")) {
      ETC_ASSIGN_OR_RETURN(reduce, n.string_arg("reduce", std::nullopt));
      ETC_ASSIGN_OR_RETURN(include_self, n.bool_arg("include_self", true));
    }
    ValueId values;
    if (n.is_tensor("src")) {
      // The src elements at the index's positions (src may be larger).
      ETC_ASSIGN_OR_RETURN(values, n.tensor("src"));
      if (scalar && n.sizes(values).empty()) {
        ETC_ASSIGN_OR_RETURN(values, as_vector(values));
      }
      const std::vector<int64_t> src = n.sizes(values);
      if (src.size() != shape.size()) return n.invalid("src must have the rank of index");
      for (size_t d = 0; d < shape.size(); ++d) {
        if (src[d] < shape[d])
          return n.invalid("src is smaller than index along dim " + std::to_string(d));
        if (src[d] == shape[d]) continue;
        ETC_ASSIGN_OR_RETURN(values, n.emit(OpKind::SliceTensor, {{"self", values},
                                                                  {"dim", static_cast<int64_t>(d)},
                                                                  {"start", int64_t{0}},
                                                                  {"end", shape[d]},
                                                                  {"step", int64_t{1}}}));
      }
    } else {
      ETC_ASSIGN_OR_RETURN(Scalar v, n.scalar("value"));
      ETC_ASSIGN_OR_RETURN(
          values,
          n.emit(OpKind::FullLike, {{"self", index}, {"fill_value", v}, {"dtype", n.dtype(x)}}));
    }
    ValueId out;
    if (reduce) {
      ETC_ASSIGN_OR_RETURN(out, emit_scatter_reduce(n, x, positions_with(n, shape, dim, index),
                                                    values, *reduce, include_self));
    } else {
      ETC_ASSIGN_OR_RETURN(
          out, n.emit(OpKind::IndexPut, {{"self", x},
                                         {"indices", positions_with(n, shape, dim, index)},
                                         {"values", values},
                                         {"accumulate", accumulate}}));
    }
    if (scalar) {
      ETC_ASSIGN_OR_RETURN(
          out, n.emit(OpKind::Reshape, {{"self", out}, {"shape", std::vector<int64_t>{}}}));
    }
    return n.set_output(0, out);
  };
}

// select_scatter(self, src, dim, index): src written at position index of dim.
Status convert_select_scatter(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.empty()) return n.invalid("select_scatter into a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(in.size())));
  ETC_ASSIGN_OR_RETURN(int64_t index, n.int_arg("index"));
  const int64_t len = in[static_cast<size_t>(dim)];
  if (index < -len || index >= len) {
    return n.invalid("index " + std::to_string(index) + " is outside dim " + std::to_string(dim) +
                     " of size " + std::to_string(len));
  }
  if (index < 0) index += len;
  ETC_ASSIGN_OR_RETURN(ValueId src, n.tensor("src"));
  ETC_ASSIGN_OR_RETURN(ValueId values, n.emit(OpKind::Unsqueeze, {{"self", src}, {"dim", dim}}));
  std::vector<ValueId> indices(static_cast<size_t>(dim));
  indices.push_back(index_constant(n, {1}, {index}));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::IndexPut,
             {{"self", x}, {"indices", indices}, {"values", values}, {"accumulate", false}}));
  return n.set_output(0, out);
}

// slice_scatter(self, src, dim, start, end, step): src written at the slice's positions.
Status convert_slice_scatter(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const std::vector<int64_t> in = n.sizes(x);
  if (in.empty()) return n.invalid("slice_scatter into a 0-d tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim, dim_arg(n, "dim", static_cast<int64_t>(in.size()), 0));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> start, n.optional_int("start"));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> end, n.optional_int("end"));
  ETC_ASSIGN_OR_RETURN(int64_t step, n.int_arg("step", 1));
  if (step <= 0) return n.invalid("step must be positive");
  const int64_t len = in[static_cast<size_t>(dim)];
  auto clamp = [len](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + len : v, 0, len); };
  const int64_t s = clamp(start.value_or(0)), e = std::max(s, clamp(end.value_or(len)));
  std::vector<int64_t> positions;
  for (int64_t i = s; i < e; i += step)
    positions.push_back(i);
  ETC_ASSIGN_OR_RETURN(ValueId src, n.tensor("src"));
  std::vector<ValueId> indices(static_cast<size_t>(dim));
  indices.push_back(index_constant(n, {static_cast<int64_t>(positions.size())}, positions));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::IndexPut,
             {{"self", x}, {"indices", indices}, {"values", src}, {"accumulate", false}}));
  return n.set_output(0, out);
}

}  // namespace

void add_movement_converters(std::map<std::string, Converter>& t) {
  t["aten.as_strided.default"] = convert_as_strided;
  t["aten.einsum.default"] = convert_einsum;
  t["aten.matmul.default"] = convert_matmul;
  t["aten.roll.default"] = convert_roll;
  t["aten.masked_fill.Scalar"] = convert_masked_fill;
  t["aten.masked_fill.Tensor"] = convert_masked_fill;
  t["aten.fill_.Scalar"] = fill_in_place(false);
  t["aten.fill_.Tensor"] = fill_in_place(false);
  t["aten.zero_.default"] = fill_in_place(true);
  t["aten.swapaxes.default"] = swap("axis0", "axis1");
  t["aten.swapdims.default"] = swap("dim0", "dim1");
  t["aten.movedim.int"] = convert_movedim;
  t["aten.numpy_T.default"] = convert_numpy_t;
  t["aten.movedim.intlist"] = convert_movedim;
  t["aten.split.Tensor"] = convert_split;
  t["aten.split_with_sizes.default"] = convert_split_with_sizes;
  t["aten.chunk.default"] = convert_chunk;
  t["aten.stack.default"] = convert_stack;
  t["aten.unflatten.int"] = convert_unflatten;
  t["aten.narrow.default"] = convert_narrow;
  t["aten.to.device"] = convert_to;
  t["aten.to.dtype_layout"] = convert_to;
  t["aten.to.other"] = convert_to;
  t["aten.type_as.default"] = convert_to;
  t["aten.index_select.default"] = convert_index_select;
  t["aten.gather.default"] = convert_gather;
  t["aten.flip.default"] = convert_flip;
  t["aten.repeat.default"] = convert_repeat;
  t["aten.diagonal.default"] = convert_diagonal;
  t["aten.pad.default"] = convert_pad;
  t["aten.reflection_pad1d.default"] = pad(PadMode::kReflect, 1);
  t["aten.reflection_pad2d.default"] = pad(PadMode::kReflect, 2);
  t["aten.reflection_pad3d.default"] = pad(PadMode::kReflect, 3);
  t["aten.replication_pad1d.default"] = pad(PadMode::kReplicate, 1);
  t["aten.replication_pad2d.default"] = pad(PadMode::kReplicate, 2);
  t["aten.replication_pad3d.default"] = pad(PadMode::kReplicate, 3);
  t["aten.scatter.src"] = scatter(false);
  t["aten.scatter.value"] = scatter(false);
  t["aten.scatter_add.default"] = scatter(true);
  t["aten.scatter_reduce.two"] = scatter(false);
  t["aten.select_scatter.default"] = convert_select_scatter;
  t["aten.slice_scatter.default"] = convert_slice_scatter;
}

}  // namespace etc::torch_import
