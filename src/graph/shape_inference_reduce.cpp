// Shape inference: reductions, sorting, softmax and normalisation.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/shape_inference_helpers.h"

namespace etc::infer {

// ---- Reductions and normalisation ------------------------------------------------------

Status infer_amax(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &ctx.int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_any_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::vector<int64_t> dims{ctx.int_arg("dim")};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, ctx.bool_arg("keepdim"), &sizes));
  // ATen: bool for every input but uint8, which stays uint8.
  out.push_back({self.dtype == DType::kUInt8 ? DType::kUInt8 : DType::kBool, sizes});
  return Status();
}

Status infer_mean_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  DType dtype = ctx.dtype_arg("dtype").value_or(self.dtype);
  if (!dtype_is_float(dtype)) {
    return ctx.error("self",
                     "mean needs a floating-point input or dtype, got " + self.type_string());
  }
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

Status infer_sum_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  // ATen sums integers and bools in int64 unless a dtype is given.
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

// prod.dim_int: integers and bools multiply in int64 unless a dtype is given, as sum.
Status infer_prod(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  std::vector<int64_t> dims{ctx.int_arg("dim")};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, ctx.bool_arg("keepdim"), &sizes));
  out.push_back({dtype, sizes});
  return Status();
}

// var.correction: floats only, the input's dtype.
Status infer_var(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self));
  Sizes sizes;
  ETC_RETURN_IF_ERROR(
      reduce(ctx, self, ctx.optional_int_list("dim"), ctx.bool_arg("keepdim"), &sizes));
  out.push_back({self.dtype, sizes});
  return Status();
}

// One dim reduced (`dim` wrapped; a 0-d input takes 0 or -1 and stays 0-d): the sizes left.
Result<Sizes> reduce_one(const InferContext& ctx, const TensorSpec& self, int64_t dim,
                         bool keepdim) {
  std::vector<int64_t> dims{dim};
  Sizes sizes;
  ETC_RETURN_IF_ERROR(reduce(ctx, self, &dims, keepdim, &sizes));
  return sizes;
}

// argmax / argmin: int64 indices; without a dim, of the flattened input (every dim reduced).
Status infer_arg_reduce(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  std::optional<int64_t> dim = ctx.optional_int("dim");
  Sizes sizes;
  if (dim) {
    ETC_ASSIGN_OR_RETURN(sizes, reduce_one(ctx, self, *dim, ctx.bool_arg("keepdim")));
  } else {
    ETC_RETURN_IF_ERROR(reduce(ctx, self, nullptr, ctx.bool_arg("keepdim"), &sizes));
  }
  out.push_back({DType::kInt64, sizes});
  return Status();
}

// max.dim / min.dim: the values (the input's dtype) and their int64 indices.
Status infer_max_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(Sizes sizes,
                       reduce_one(ctx, self, ctx.int_arg("dim"), ctx.bool_arg("keepdim")));
  out.push_back({self.dtype, sizes});
  out.push_back({DType::kInt64, sizes});
  return Status();
}

// cumsum: the input's sizes; integers and bools add in int64 unless a dtype is given.
Status infer_cumsum(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  DType dtype =
      ctx.dtype_arg("dtype").value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  out.push_back({dtype, self.sizes});
  return Status();
}

// sort: values and int64 indices of the input's sizes.
Status infer_sort(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  out.push_back({self.dtype, self.sizes});
  out.push_back({DType::kInt64, self.sizes});
  return Status();
}

// topk: k values along `dim` (0 <= k <= its size) and their int64 indices.
Status infer_topk(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  const int64_t k = ctx.int_arg("k");
  const int64_t size = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  if (k < 0 || k > size) {
    return ctx.error("k", "k " + std::to_string(k) + " is out of range for dim " +
                              std::to_string(dim) + " of size " + std::to_string(size));
  }
  Sizes sizes = self.sizes;
  if (self.rank() > 0) sizes[static_cast<size_t>(dim)] = k;
  out.push_back({self.dtype, sizes});
  out.push_back({DType::kInt64, sizes});
  return Status();
}

Status infer_softmax(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_RETURN_IF_ERROR(require_float(ctx, "self", self));
  ETC_RETURN_IF_ERROR(
      ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())).take_status());
  bool half_to_float = ctx.bool_arg("half_to_float");
  if (half_to_float && self.dtype != DType::kFloat16) {
    return ctx.error("half_to_float",
                     "half_to_float needs a float16 input, got " + self.type_string());
  }
  out.push_back({half_to_float ? DType::kFloat32 : self.dtype, self.sizes});
  return Status();
}

Status infer_layer_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const Sizes& ns = ctx.int_list("normalized_shape");
  if (ns.empty() || ns.size() > x.rank()) {
    return ctx.error("normalized_shape",
                     "normalized_shape " + str(ns) + " does not fit input " + x.type_string());
  }
  size_t axis = x.rank() - ns.size();
  if (!std::equal(ns.begin(), ns.end(), x.sizes.begin() + static_cast<ptrdiff_t>(axis))) {
    return ctx.error("normalized_shape", "normalized_shape " + str(ns) +
                                             " does not match the trailing dims of input " +
                                             x.type_string());
  }
  for (const char* name : {"weight", "bias"}) {
    if (const TensorSpec* t = ctx.optional_tensor(name); t && t->sizes != ns) {
      return ctx.error(name, std::string(name) + " " + t->type_string() +
                                 " must have the normalized shape " + str(ns));
    }
  }
  Sizes stat(x.sizes.begin(), x.sizes.begin() + static_cast<ptrdiff_t>(axis));
  stat.resize(x.rank(), 1);
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, stat});
  out.push_back({x.dtype, stat});
  return Status();
}

// native_group_norm: input [N, C, *] with N, C and HxW (the product of the rest) as given;
// mean and rstd [N, group].
Status infer_group_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  const int64_t n = ctx.int_arg("N"), c = ctx.int_arg("C"), hw = ctx.int_arg("HxW");
  const int64_t group = ctx.int_arg("group");
  if (x.rank() < 2 || x.sizes[0] != n || x.sizes[1] != c) {
    return ctx.error("input", "input " + x.type_string() + " is not [N=" + std::to_string(n) +
                                  ", C=" + std::to_string(c) + ", ...]");
  }
  int64_t rest = 1;
  for (size_t d = 2; d < x.rank(); ++d)
    rest *= x.sizes[d];
  if (rest != hw) {
    return ctx.error("HxW", "HxW " + std::to_string(hw) + " is not the product of input " +
                                x.type_string() + "'s spatial dims");
  }
  if (group <= 0 || c % group != 0) {
    return ctx.error("group", "C " + std::to_string(c) + " is not divisible into " +
                                  std::to_string(group) + " groups");
  }
  for (const char* name : {"weight", "bias"}) {
    if (const TensorSpec* t = ctx.optional_tensor(name); t && t->sizes != Sizes{c}) {
      return ctx.error(name, std::string(name) + " " + t->type_string() + " must be [" +
                                 std::to_string(c) + "]");
    }
  }
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, Sizes{n, group}});
  out.push_back({x.dtype, Sizes{n, group}});
  return Status();
}

Status infer_batch_norm(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& x = ctx.tensor("input");
  ETC_RETURN_IF_ERROR(require_float(ctx, "input", x));
  if (x.rank() < 2)
    return ctx.error("input", "expected a tensor of rank 2 or more, got " + x.type_string());
  int64_t c = x.sizes[1];
  for (const char* name : {"weight", "bias", "running_mean", "running_var"}) {
    const TensorSpec* t = ctx.optional_tensor(name);
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c)) {
      return ctx.error(name, std::string("expected shape [") + std::to_string(c) +
                                 "] (the channel count), got " + t->type_string());
    }
  }
  out.push_back({x.dtype, x.sizes});
  out.push_back({x.dtype, {0}});  // no statistics are saved outside training
  out.push_back({x.dtype, {0}});
  return Status();
}

}  // namespace etc::infer
