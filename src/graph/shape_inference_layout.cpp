// Shape inference: concatenation, padding, expansion, permutation, views, selection and slicing.
#include "graph/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graph/shape_inference_helpers.h"

namespace etc::infer {

// ---- Shape and layout ------------------------------------------------------------------

Status infer_cat(const InferContext& ctx, std::vector<TensorType>& out) {
  std::vector<const TensorSpec*> ts = ctx.tensor_list("tensors");
  if (ts.empty()) return ctx.error("tensors", "expected at least one tensor");
  // ATen skips legacy empty 1-d tensors of shape [0].
  const TensorSpec* first = nullptr;
  for (const TensorSpec* t : ts) {
    if (!(t->rank() == 1 && t->sizes[0] == 0)) {
      first = t;
      break;
    }
  }
  if (first == nullptr) {
    out.push_back({ts[0]->dtype, {0}});
    return Status();
  }
  if (first->rank() == 0)
    return ctx.error("tensors", "cannot concatenate zero-dimensional tensors");
  ETC_ASSIGN_OR_RETURN(
      int64_t dim, ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(first->rank())));
  Sizes sizes = first->sizes;
  sizes[dim] = 0;
  DType dtype = ts[0]->dtype;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorSpec* t = ts[i];
    dtype = promote_types(dtype, t->dtype);
    if (t->rank() == 1 && t->sizes[0] == 0) continue;
    if (t->rank() != first->rank()) {
      return ctx.error("tensors", "tensor " + std::to_string(i) + " " + t->type_string() +
                                      " has a different rank than " + first->type_string());
    }
    for (size_t d = 0; d < t->rank(); ++d) {
      if (static_cast<int64_t>(d) != dim && t->sizes[d] != first->sizes[d]) {
        return ctx.error("tensors", "tensor " + std::to_string(i) + " " + t->type_string() +
                                        " differs from " + first->type_string() + " in dim " +
                                        std::to_string(d));
      }
    }
    sizes[dim] += t->sizes[dim];
  }
  out.push_back({dtype, sizes});
  return Status();
}

Status infer_constant_pad_nd(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  const Sizes& pad = ctx.int_list("pad");
  if (pad.size() % 2 != 0 || pad.size() / 2 > self.rank()) {
    return ctx.error("pad", "expected an even number of pads, at most 2 per dim of " +
                                self.type_string() + ", got " + std::to_string(pad.size()));
  }
  Sizes sizes = self.sizes;
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    size_t d = self.rank() - 1 - i;  // pads run from the last dim backwards
    // A negative pad crops, at most the whole dim (ATen narrows by it).
    if (pad[2 * i] < -self.sizes[d] || pad[2 * i + 1] < -self.sizes[d]) {
      return ctx.error("pad", "pad crops more than dim " + std::to_string(d) + " of " +
                                  self.type_string() + " holds");
    }
    const std::optional<int64_t> padded = checked_add(sizes[d], pad[2 * i]);
    const std::optional<int64_t> both = padded ? checked_add(*padded, pad[2 * i + 1]) : padded;
    if (!both) {
      return ctx.error("pad", "padding dim " + std::to_string(d) + " overflows a 64-bit size");
    }
    sizes[d] = *both;
    if (sizes[d] < 0) {
      return ctx.error("pad", "padding makes dim " + std::to_string(d) + " negative");
    }
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_expand(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  Sizes size = ctx.int_list("size");
  if (size.size() < self.rank()) {
    return ctx.error("size", "cannot expand " + self.type_string() + " to fewer dims " + str(size));
  }
  size_t lead = size.size() - self.rank();
  for (size_t i = 0; i < size.size(); ++i) {
    if (i < lead) {
      if (size[i] < 0) return ctx.error("size", "-1 is not allowed for a new leading dim");
      continue;
    }
    int64_t have = self.sizes[i - lead];
    if (size[i] == -1) size[i] = have;
    if (have != size[i] && have != 1) {
      return ctx.error("size", "cannot expand " + self.type_string() + " to " +
                                   str(ctx.int_list("size")) + ": dim " + std::to_string(i) +
                                   " has size " + std::to_string(have));
    }
  }
  out.push_back({self.dtype, size});
  return Status();
}

Status infer_permute(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  const Sizes& dims = ctx.int_list("dims");
  int64_t rank = static_cast<int64_t>(self.rank());
  if (dims.size() != self.rank()) {
    return ctx.error("dims", "expected " + std::to_string(rank) + " dims for " +
                                 self.type_string() + ", got " + std::to_string(dims.size()));
  }
  std::vector<bool> seen(self.rank(), false);
  Sizes sizes;
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(int64_t w, ctx.wrap_dim("dims", d, rank));
    if (seen[w]) return ctx.error("dims", "dim " + std::to_string(w) + " appears more than once");
    seen[w] = true;
    sizes.push_back(self.sizes[w]);
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_reshape(const InferContext& ctx, std::vector<TensorType>& out) {
  return view_like(ctx, "shape", out);
}

Status infer_view(const InferContext& ctx, std::vector<TensorType>& out) {
  return view_like(ctx, "size", out);
}

Status infer_select(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "cannot select from a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  int64_t n = self.sizes[dim];
  int64_t index = ctx.int_arg("index");
  if (index < -n || index >= n) {
    return ctx.error("index", "index " + std::to_string(index) + " is out of range for dim " +
                                  std::to_string(dim) + " of size " + std::to_string(n));
  }
  Sizes sizes = self.sizes;
  sizes.erase(sizes.begin() + dim);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_slice(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  if (self.rank() == 0) return ctx.error("self", "cannot slice a zero-dimensional tensor");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  int64_t n = self.sizes[dim];
  int64_t step = ctx.int_arg("step");
  if (step <= 0)
    return ctx.error("step", "slice step must be positive, got " + std::to_string(step));
  // ATen clamps start and end into [0, n] after wrapping negatives once.
  auto clamp_index = [n](int64_t i) {
    if (i < 0) i += n;
    return std::clamp<int64_t>(i, 0, n);
  };
  int64_t start = clamp_index(ctx.optional_int("start").value_or(0));
  int64_t end = clamp_index(ctx.optional_int("end").value_or(n));
  Sizes sizes = self.sizes;
  sizes[dim] = end > start ? (end - start - 1) / step + 1 : 0;
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_squeeze_dim(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank())));
  Sizes sizes = self.sizes;
  if (self.rank() > 0 && sizes[dim] == 1) sizes.erase(sizes.begin() + dim);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_squeeze_dims(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  int64_t rank = static_cast<int64_t>(self.rank());
  std::vector<bool> drop(self.rank(), false);
  for (int64_t d : ctx.int_list("dim")) {
    ETC_ASSIGN_OR_RETURN(int64_t w, ctx.wrap_dim("dim", d, rank));
    if (rank > 0 && self.sizes[w] == 1) drop[w] = true;
  }
  Sizes sizes;
  for (size_t i = 0; i < self.rank(); ++i) {
    if (!drop[i]) sizes.push_back(self.sizes[i]);
  }
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_transpose(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  int64_t rank = static_cast<int64_t>(self.rank());
  ETC_ASSIGN_OR_RETURN(int64_t d0, ctx.wrap_dim("dim0", ctx.int_arg("dim0"), rank));
  ETC_ASSIGN_OR_RETURN(int64_t d1, ctx.wrap_dim("dim1", ctx.int_arg("dim1"), rank));
  Sizes sizes = self.sizes;
  if (rank > 0) std::swap(sizes[d0], sizes[d1]);
  out.push_back({self.dtype, sizes});
  return Status();
}

Status infer_unsqueeze(const InferContext& ctx, std::vector<TensorType>& out) {
  const TensorSpec& self = ctx.tensor("self");
  // Valid dims are [-(rank+1), rank].
  ETC_ASSIGN_OR_RETURN(
      int64_t dim, ctx.wrap_dim("dim", ctx.int_arg("dim"), static_cast<int64_t>(self.rank()) + 1));
  Sizes sizes = self.sizes;
  sizes.insert(sizes.begin() + dim, 1);
  out.push_back({self.dtype, sizes});
  return Status();
}

}  // namespace etc::infer
