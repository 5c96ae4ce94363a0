// Reductions, index reductions, scans, sorts and the normalisations with statistics of
// the batch: the ATen ops map to the op table's (amin, prod, var, argmax, max.dim, cumsum,
// sort, topk, native_group_norm), and the forms around them decompose here: prod over all
// dims, var.dim, std, max.default / min.default, group_norm, instance_norm and batch norm
// with the batch's statistics (_native_batch_norm_legit.no_stats).
#include "frontends/torch_export/torch_ops.h"

namespace etc::torch_import {
namespace {

Status convert_amin(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dim, n.ints("dim", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::Amin, {{"self", x}, {"dim", dim}, {"keepdim", keepdim}}));
  return n.set_output(0, out);
}

ArgValue dtype_or_none(std::optional<DType> d) {
  return d ? ArgValue(*d) : ArgValue(std::monostate{});
}

// prod.dim_int, and prod.default as the product of the flattened input.
Status convert_prod(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> dtype, n.dtype_arg("dtype"));
  int64_t dim = 0;
  bool keepdim = false;
  if (n.has("dim")) {
    ETC_ASSIGN_OR_RETURN(dim, n.int_arg("dim"));
    ETC_ASSIGN_OR_RETURN(keepdim, n.bool_arg("keepdim", false));
  } else {
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{-1}}}));
  }
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::ProdDimInt,
             {{"self", x}, {"dim", dim}, {"keepdim", keepdim}, {"dtype", dtype_or_none(dtype)}}));
  return n.set_output(0, out);
}

// var / std: var.correction(self, dim?, *, correction?, keepdim), var.dim(self, dim,
// unbiased, keepdim) and var.default(self, unbiased) as var.correction; std the square root.
Converter variance(bool std_dev) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dim, n.ints("dim", std::vector<int64_t>{}));
    ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
    Scalar correction{int64_t{1}};
    if (n.has("correction")) {
      ETC_ASSIGN_OR_RETURN(correction, n.scalar("correction"));
    } else if (n.has("unbiased")) {
      ETC_ASSIGN_OR_RETURN(bool unbiased, n.bool_arg("unbiased"));
      correction = Scalar{int64_t{unbiased ? 1 : 0}};
    }
    ETC_ASSIGN_OR_RETURN(
        ValueId out,
        n.emit(OpKind::VarCorrection,
               {{"self", x}, {"dim", dim}, {"correction", correction}, {"keepdim", keepdim}}));
    if (std_dev) {
      ETC_ASSIGN_OR_RETURN(out, n.emit(OpKind::Sqrt, {{"self", out}}));
    }
    return n.set_output(0, out);
  };
}

Converter arg_reduce(OpKind op) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::optional<int64_t> dim, n.optional_int("dim"));
    ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
    ArgValue d = dim ? ArgValue(*dim) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", x}, {"dim", d}, {"keepdim", keepdim}}));
    return n.set_output(0, out);
  };
}

// max.dim / min.dim: values and indices; values alone (nothing reads the indices) are
// amax / amin over the dim, which the CUDA delegate runs. max.default / min.default (the
// greatest element) are amax / amin over every dim.
Converter extreme(bool is_max) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    const OpKind values_op = is_max ? OpKind::Amax : OpKind::Amin;
    if (!n.has("dim")) {
      ETC_ASSIGN_OR_RETURN(
          ValueId out,
          n.emit(values_op, {{"self", x}, {"dim", std::vector<int64_t>{}}, {"keepdim", false}}));
      return n.set_output(0, out);
    }
    ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
    ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
    if (!n.output_used(1)) {
      ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(values_op, {{"self", x},
                                                           {"dim", std::vector<int64_t>{dim}},
                                                           {"keepdim", keepdim}}));
      return n.set_output(0, out);
    }
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(is_max ? OpKind::MaxDim : OpKind::MinDim,
                                             {{"self", x}, {"dim", dim}, {"keepdim", keepdim}}));
    ETC_RETURN_IF_ERROR(n.set_output(0, out));
    return n.set_output(1, n.last_outputs()[1]);
  };
}

Status convert_cumsum(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
  ETC_ASSIGN_OR_RETURN(std::optional<DType> dtype, n.dtype_arg("dtype"));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::Cumsum, {{"self", x}, {"dim", dim}, {"dtype", dtype_or_none(dtype)}}));
  return n.set_output(0, out);
}

// sort.default and sort.stable (etc's sort is always stable).
Status convert_sort(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim", int64_t{-1}));
  ETC_ASSIGN_OR_RETURN(bool descending, n.bool_arg("descending", false));
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::Sort, {{"self", x}, {"dim", dim}, {"descending", descending}}));
  ETC_RETURN_IF_ERROR(n.set_output(0, out));
  return n.set_output(1, n.last_outputs()[1]);
}

Status convert_topk(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(int64_t k, n.int_arg("k"));
  ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim", int64_t{-1}));
  ETC_ASSIGN_OR_RETURN(bool largest, n.bool_arg("largest", true));
  ETC_ASSIGN_OR_RETURN(bool sorted, n.bool_arg("sorted", true));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::Topk,
             {{"self", x}, {"k", k}, {"dim", dim}, {"largest", largest}, {"sorted", sorted}}));
  ETC_RETURN_IF_ERROR(n.set_output(0, out));
  return n.set_output(1, n.last_outputs()[1]);
}

// native_group_norm(input, weight, bias, N, C, HxW, group, eps), and group_norm(input,
// num_groups, weight, bias, eps, cudnn_enabled) with N, C and HxW from the input's sizes.
Status convert_group_norm(TorchNode& n) {
  const bool native = n.has("group");
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps", 1e-5));
  const std::vector<int64_t>& sizes = n.sizes(x);
  if (sizes.size() < 2) return n.invalid("group_norm needs an input of rank 2 or more");
  int64_t hw = 1;
  for (size_t d = 2; d < sizes.size(); ++d)
    hw *= sizes[d];
  int64_t group = 0;
  if (native) {
    ETC_ASSIGN_OR_RETURN(group, n.int_arg("group"));
  } else {
    ETC_ASSIGN_OR_RETURN(group, n.int_arg("num_groups"));
  }
  auto opt = [](std::optional<ValueId> v) { return v ? ArgValue(*v) : ArgValue(std::monostate{}); };
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::NativeGroupNorm, {{"input", x},
                                                                     {"weight", opt(w)},
                                                                     {"bias", opt(b)},
                                                                     {"N", sizes[0]},
                                                                     {"C", sizes[1]},
                                                                     {"HxW", hw},
                                                                     {"group", group},
                                                                     {"eps", eps}}));
  ETC_RETURN_IF_ERROR(n.set_output(0, out));
  if (native) {
    for (int i = 1; i < 3; ++i) {
      if (n.output_used(i)) ETC_RETURN_IF_ERROR(n.set_output(i, n.last_outputs()[i]));
    }
  }
  return Status();
}

// Normalisation with the statistics of the input itself over `dims` (biased variance):
// (x - mean) / sqrt(var + eps) * weight + bias, weight and bias per channel (dim 1). Gives
// the output, and the mean and 1 / sqrt(var + eps) with the reduced dims kept.
struct BatchStats {
  ValueId out, mean, invstd, var;  // var: the biased variance
};
Result<BatchStats> normalize_by_own_stats(TorchNode& n, ValueId x, const std::vector<int64_t>& dims,
                                          std::optional<ValueId> weight,
                                          std::optional<ValueId> bias, double eps) {
  const std::vector<int64_t> sizes = n.sizes(x);
  if (sizes.size() < 2) return n.invalid("batch and instance norm need an input of rank 2 or more");
  BatchStats s;
  ETC_ASSIGN_OR_RETURN(
      s.mean, n.emit(OpKind::MeanDim,
                     {{"self", x}, {"dim", dims}, {"keepdim", true}, {"dtype", std::monostate{}}}));
  ETC_ASSIGN_OR_RETURN(
      s.var,
      n.emit(OpKind::VarCorrection,
             {{"self", x}, {"dim", dims}, {"correction", Scalar{int64_t{0}}}, {"keepdim", true}}));
  ETC_ASSIGN_OR_RETURN(ValueId shifted,
                       n.emit(OpKind::AddScalar, {{"self", s.var}, {"other", Scalar{eps}}}));
  ETC_ASSIGN_OR_RETURN(s.invstd, n.emit(OpKind::Rsqrt, {{"self", shifted}}));
  ETC_ASSIGN_OR_RETURN(ValueId centred,
                       n.emit(OpKind::SubTensor, {{"self", x}, {"other", s.mean}}));
  ETC_ASSIGN_OR_RETURN(s.out, n.emit(OpKind::MulTensor, {{"self", centred}, {"other", s.invstd}}));
  // weight and bias [C] as [C, 1, ...] against [N, C, ...].
  std::vector<int64_t> per_channel(sizes.size() - 1, 1);
  per_channel[0] = sizes[1];
  if (weight) {
    ETC_ASSIGN_OR_RETURN(ValueId w,
                         n.emit(OpKind::Reshape, {{"self", *weight}, {"shape", per_channel}}));
    ETC_ASSIGN_OR_RETURN(s.out, n.emit(OpKind::MulTensor, {{"self", s.out}, {"other", w}}));
  }
  if (bias) {
    ETC_ASSIGN_OR_RETURN(ValueId b,
                         n.emit(OpKind::Reshape, {{"self", *bias}, {"shape", per_channel}}));
    ETC_ASSIGN_OR_RETURN(s.out, n.emit(OpKind::AddTensor, {{"self", s.out}, {"other", b}}));
  }
  return s;
}

// _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps): batch
// norm with the batch's statistics (over every dim but the channels); outputs 1 and 2 are
// the per-channel mean and invstd.
Status convert_batch_norm_no_stats(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps"));
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < static_cast<int64_t>(n.sizes(x).size()); ++d)
    dims.push_back(d);
  ETC_ASSIGN_OR_RETURN(BatchStats s, normalize_by_own_stats(n, x, dims, w, b, eps));
  ETC_RETURN_IF_ERROR(n.set_output(0, s.out));
  const std::vector<int64_t> c{n.sizes(x)[1]};
  const ValueId stats[2] = {s.mean, s.invstd};
  for (int i = 1; i < 3; ++i) {
    if (!n.output_used(i)) continue;
    ETC_ASSIGN_OR_RETURN(ValueId v,
                         n.emit(OpKind::Reshape, {{"self", stats[i - 1]}, {"shape", c}}));
    ETC_RETURN_IF_ERROR(n.set_output(i, v));
  }
  return Status();
}

}  // namespace

// Batch norm in training mode: the batch's statistics normalise, and the running ones move
// toward them (running = (1 - momentum) running + momentum batch, the variance unbiased, as
// ATen updates them). Three forms:
//   _native_batch_norm_legit_functional (Core ATen): outputs out, mean, invstd and the new
//     running mean and variance (the program writes them to its buffers, etc's state);
//   _native_batch_norm_legit(..., training=True): out, mean, invstd; the running statistics
//     are updated in place;
//   batch_norm(..., training=True) (the default export): out; in place too.
// An in-place update of a program input or buffer that nothing else reads is dropped: the
// outputs do not depend on it, and the default export does not declare the buffers it
// writes (its signature has no buffer mutation for them). One that is read again is refused.
Status convert_batch_norm_training(TorchNode& n, bool functional) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> running_mean, n.optional_tensor("running_mean"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> running_var, n.optional_tensor("running_var"));
  ETC_ASSIGN_OR_RETURN(double momentum, n.float_arg("momentum", 0.1));
  ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps", 1e-5));
  const std::vector<int64_t> sizes = n.sizes(x);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < static_cast<int64_t>(sizes.size()); ++d)
    dims.push_back(d);
  ETC_ASSIGN_OR_RETURN(BatchStats s, normalize_by_own_stats(n, x, dims, w, b, eps));
  ETC_RETURN_IF_ERROR(n.set_output(0, s.out));
  const std::vector<int64_t> c{sizes[1]};
  auto per_channel = [&](ValueId v) {
    return n.emit(OpKind::Reshape, {{"self", v}, {"shape", c}});
  };
  if (n.num_outputs() >= 3) {
    const ValueId stats[2] = {s.mean, s.invstd};
    for (int i = 1; i < 3; ++i) {
      if (!n.output_used(i)) continue;
      ETC_ASSIGN_OR_RETURN(ValueId v, per_channel(stats[i - 1]));
      ETC_RETURN_IF_ERROR(n.set_output(i, v));
    }
  }
  int64_t count = 1;  // values per channel
  for (int64_t d : dims)
    count *= sizes[static_cast<size_t>(d)];
  // (1 - momentum) running + momentum batch, in the running statistic's dtype.
  auto moved = [&](ValueId running, ValueId batch) -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(batch, per_channel(batch));
    if (n.dtype(batch) != n.dtype(running)) {
      ETC_ASSIGN_OR_RETURN(batch,
                           n.emit(OpKind::ToCopy, {{"self", batch}, {"dtype", n.dtype(running)}}));
    }
    ETC_ASSIGN_OR_RETURN(
        ValueId kept,
        n.emit(OpKind::MulScalar, {{"self", running}, {"other", Scalar{1.0 - momentum}}}));
    ETC_ASSIGN_OR_RETURN(ValueId moving,
                         n.emit(OpKind::MulScalar, {{"self", batch}, {"other", Scalar{momentum}}}));
    return n.emit(OpKind::AddTensor,
                  {{"self", kept}, {"other", moving}, {"alpha", Scalar{int64_t{1}}}});
  };
  // The unbiased variance: biased * count / (count - 1) (NaN for one value, as in ATen).
  auto unbiased = [&]() -> Result<ValueId> {
    ETC_ASSIGN_OR_RETURN(ValueId scaled,
                         n.emit(OpKind::MulScalar,
                                {{"self", s.var}, {"other", Scalar{static_cast<double>(count)}}}));
    return n.emit(OpKind::DivScalar,
                  {{"self", scaled}, {"other", Scalar{static_cast<double>(count - 1)}}});
  };
  if (functional) {
    if (!running_mean || !running_var) {
      return n.invalid("_native_batch_norm_legit_functional needs running statistics");
    }
    ETC_ASSIGN_OR_RETURN(ValueId new_mean, moved(*running_mean, s.mean));
    ETC_ASSIGN_OR_RETURN(ValueId var, unbiased());
    ETC_ASSIGN_OR_RETURN(ValueId new_var, moved(*running_var, var));
    if (n.output_used(3)) ETC_RETURN_IF_ERROR(n.set_output(3, new_mean));
    if (n.output_used(4)) ETC_RETURN_IF_ERROR(n.set_output(4, new_var));
    return Status();
  }
  for (const char* arg : {"running_mean", "running_var"}) {
    if (!n.is_tensor(arg)) continue;  // None: nothing to update
    if (!n.is_placeholder(arg)) {
      return n.unsupported(std::string("batch norm in training mode updating ") + arg +
                           " in place, which is computed in the program (etc updates "
                           "program buffers only)");
    }
    if (n.read_elsewhere(arg)) {
      return n.unsupported(std::string("batch norm in training mode updates ") + arg +
                           " in place and the program reads it again; export the model in "
                           "eval mode, or with ep.run_decompositions() (Core ATen declares the "
                           "update)");
    }
  }
  return Status();
}

namespace {

// instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
// eps, cudnn_enabled): each sample and channel by its own statistics (over the spatial
// dims). Without use_input_stats, the running statistics: batch norm in eval mode.
Status convert_instance_norm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(bool use_input_stats, n.bool_arg("use_input_stats"));
  if (!use_input_stats) {
    return n.unsupported("instance_norm with running statistics (use_input_stats=False)");
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps"));
  std::vector<int64_t> dims;
  for (int64_t d = 2; d < static_cast<int64_t>(n.sizes(x).size()); ++d)
    dims.push_back(d);
  if (dims.empty()) return n.invalid("instance_norm needs an input with spatial dims");
  ETC_ASSIGN_OR_RETURN(BatchStats s, normalize_by_own_stats(n, x, dims, w, b, eps));
  return n.set_output(0, s.out);
}

}  // namespace

void add_reduce_converters(std::map<std::string, Converter>& t) {
  t["aten.amin.default"] = convert_amin;
  t["aten.prod.default"] = convert_prod;
  t["aten.prod.dim_int"] = convert_prod;
  t["aten.var.correction"] = variance(false);
  t["aten.var.dim"] = variance(false);
  t["aten.var.default"] = variance(false);
  t["aten.std.correction"] = variance(true);
  t["aten.std.dim"] = variance(true);
  t["aten.std.default"] = variance(true);
  t["aten.argmax.default"] = arg_reduce(OpKind::Argmax);
  t["aten.argmin.default"] = arg_reduce(OpKind::Argmin);
  t["aten.max.dim"] = extreme(true);
  t["aten.min.dim"] = extreme(false);
  t["aten.max.default"] = extreme(true);
  t["aten.min.default"] = extreme(false);
  t["aten.cumsum.default"] = convert_cumsum;
  t["aten.sort.default"] = convert_sort;
  t["aten.sort.stable"] = convert_sort;
  t["aten.topk.default"] = convert_topk;
  t["aten.native_group_norm.default"] = convert_group_norm;
  t["aten.group_norm.default"] = convert_group_norm;
  t["aten._native_batch_norm_legit.no_stats"] = convert_batch_norm_no_stats;
  t["aten._native_batch_norm_legit_functional.default"] = [](TorchNode& n) {
    return convert_batch_norm_training(n, true);
  };
  t["aten.instance_norm.default"] = convert_instance_norm;
}

}  // namespace etc::torch_import
