// Shared helpers of the CPU kernels: argument checking, conversion, strided copies.
#include "runtime/kernels/kernel_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "graph/tensor_spec.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/parallel.h"
#include "support/checked_math.h"

namespace etc::rt::kernels {
namespace {

// What a schema argument accepts, as ExecuTorch passes values: for the error message, and
// the check.
std::string arg_kind_text(const ArgSchema& a) {
  std::string t;
  switch (a.type) {
    case ArgType::kTensor:
      t = "a Tensor";
      break;
    case ArgType::kTensorList:
      t = "a TensorList";
      break;
    case ArgType::kOptionalTensorList:
      return "an OptionalTensorList";
    case ArgType::kScalar:
      t = a.optional ? "a Scalar" : "a Scalar (Int, Double or Bool)";
      break;
    case ArgType::kInt:
      t = "an Int";
      break;
    case ArgType::kIntList:
      t = "an IntList";
      break;
    case ArgType::kFloat:
      t = "a Double";
      break;
    case ArgType::kFloatList:
      t = "a DoubleList";
      break;
    case ArgType::kBool:
      t = "a Bool";
      break;
    case ArgType::kBoolList:
      t = "a BoolList";
      break;
    case ArgType::kString:
      t = "a String";
      break;
    case ArgType::kScalarType:
      t = "a ScalarType (Int)";
      break;
    case ArgType::kLayout:
    case ArgType::kDevice:
    case ArgType::kMemoryFormat:
      return "an Int or None";
  }
  return a.optional ? t + " or None" : t;
}

bool kind_matches(const ArgSchema& a, const Value& v) {
  using K = Value::Kind;
  if (v.kind == K::kNone && a.optional) return true;
  switch (a.type) {
    case ArgType::kTensor:
      return v.kind == K::kTensor;
    case ArgType::kTensorList:
      return v.kind == K::kTensorList;
    case ArgType::kOptionalTensorList:
      return v.kind == K::kOptionalTensorList;
    case ArgType::kScalar:
      return v.is_scalar();
    case ArgType::kInt:
    case ArgType::kScalarType:
      return v.kind == K::kInt;
    case ArgType::kIntList:
      return v.kind == K::kIntList;
    case ArgType::kFloat:  // an integral float may come as an Int
      return v.kind == K::kDouble || v.kind == K::kInt;
    case ArgType::kFloatList:
      return v.kind == K::kDoubleList;
    case ArgType::kBool:
      return v.kind == K::kBool;
    case ArgType::kBoolList:
      return v.kind == K::kBoolList;
    case ArgType::kString:
      return v.kind == K::kString;
    case ArgType::kLayout:
    case ArgType::kDevice:
    case ArgType::kMemoryFormat:
      return v.kind == K::kNone || v.kind == K::kInt;
  }
  return false;
}

// Sizes must be non-negative with a representable byte count, and a non-empty tensor
// needs memory: kernels index through data without further checks. `what()` names the
// tensor, made only for an error: every kernel call checks its arguments, and the names cost
// a heap allocation each.
template <typename What>
Status check_tensor(const KernelContext& ctx, const TensorView& t, const What& what) {
  for (int64_t s : t.sizes) {
    if (s < 0) return ctx.error(what() + " has a negative size in " + shape_str(t.sizes));
  }
  auto numel = checked_numel(t.sizes);
  if (!numel || !checked_mul(*numel, dtype_size(t.dtype))) {
    return ctx.error(what() + " with shape " + shape_str(t.sizes) + " is too large");
  }
  if (*numel > 0 && t.data == nullptr) return ctx.error(what() + " has no data");
  return Status();
}

// dst[i * dst_row + j] = src[i + j * src_col] for i < rows, j < cols (a transpose), in 32 x 32
// tiles: each tile reads and writes whole cache lines, where a walk along either side alone
// would touch a new line (and a new page, for wide matrices) every element on the other.
template <typename T>
void transpose_tiled(const T* __restrict src, int64_t src_col, T* __restrict dst, int64_t dst_row,
                     int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        T* d = dst + i * dst_row;
        const T* s = src + i;
        for (int64_t j = j0; j < j1; ++j)
          d[j] = s[j * src_col];
      }
    }
  }
}

template <typename T>
void strided_copy_typed(const T* src, std::span<const int64_t> src_strides, T* dst,
                        std::span<const int64_t> dst_strides, std::span<const int64_t> sizes) {
  // A transpose: dst's contiguous dim (a) is read with a stride, and src is contiguous along
  // another dim (b). Tiles over (b, a) for each index of the other dims.
  const size_t rank = sizes.size();
  size_t a = rank, b = rank;
  for (size_t d = 0; d < rank; ++d) {
    if (sizes[d] > 1 && dst_strides[d] == 1) a = d;
    if (sizes[d] > 1 && src_strides[d] == 1) b = d;
  }
  if (a < rank && b < rank && a != b && sizes[a] >= 16 && sizes[b] >= 16 && src_strides[a] != 0 &&
      dst_strides[b] != 0) {
    std::vector<int64_t> outer_sizes, outer_dst, outer_src;
    for (size_t d = 0; d < rank; ++d) {
      if (d == a || d == b) continue;
      outer_sizes.push_back(sizes[d]);
      outer_dst.push_back(dst_strides[d]);
      outer_src.push_back(src_strides[d]);
    }
    StridedLoop<2> outer(outer_sizes, {outer_dst, outer_src});
    outer.for_each_run([&](int64_t n, const auto& off, const auto& st) {
      for (int64_t r = 0; r < n; ++r) {
        transpose_tiled(src + off[1] + r * st[1], src_strides[a], dst + off[0] + r * st[0],
                        dst_strides[b], sizes[b], sizes[a]);
      }
    });
    return;
  }
  StridedLoop<2> loop(sizes, {dst_strides, src_strides});
  loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
    T* __restrict d = dst + off[0];
    const T* __restrict s = src + off[1];
    if (st[0] == 1 && st[1] == 1) {
      std::memmove(d, s, static_cast<size_t>(n) * sizeof(T));
    } else if (st[0] == 1 && st[1] == 0) {
      std::fill_n(d, n, s[0]);
    } else if (st[0] == 1) {
      for (int64_t i = 0; i < n; ++i)
        d[i] = s[i * st[1]];
    } else {
      for (int64_t i = 0; i < n; ++i)
        d[i * st[0]] = s[i * st[1]];
    }
  });
}

}  // namespace

void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  if (n <= 0) return;
  if (src_dtype == dst_dtype) {
    std::memmove(dst, src, static_cast<size_t>(n * dtype_size(src_dtype)));
    return;
  }
  visit_dtype(src_dtype, [&]<typename S>() {
    visit_dtype(dst_dtype, [&]<typename D>() {
      const S* __restrict s = static_cast<const S*>(src);
      D* __restrict d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i)
        d[i] = convert<D>(s[i]);
    });
  });
}

Status check_args(const KernelContext& ctx, std::span<Value*> args) {
  if (ctx.schema == nullptr)
    return internal_error(std::string(ctx.op) + ": kernel called without its schema");
  const OpSchema& schema = *ctx.schema;
  const size_t outs = schema.num_out_args();
  const size_t inputs = schema.args.size() - outs;
  const size_t want = schema.args.size() + 1;
  if (args.size() != want) {
    return ctx.error("expected " + std::to_string(want) + " arguments (" + std::to_string(inputs) +
                     " inputs, " + std::to_string(outs) + (outs == 1 ? " out" : " outs") +
                     " and the return value), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == nullptr) return ctx.error("argument " + std::to_string(i) + " is missing");
  }
  for (size_t i = 0; i < schema.args.size(); ++i) {
    const ArgSchema& spec = schema.args[i];
    const Value& v = *args[i];
    if (spec.is_out && spec.type == ArgType::kTensorList) {  // `Tensor(a!)[] out`
      if (v.kind != Value::Kind::kTensorList) {
        return ctx.error("out list '" + spec.name + "' (argument " + std::to_string(i) +
                         ") must be a TensorList, got " + value_kind_name(v.kind));
      }
      for (size_t j = 0; j < v.tensors.size(); ++j) {
        auto item = [&] { return "out list '" + spec.name + "' element " + std::to_string(j); };
        if (v.tensors[j] == nullptr) return ctx.error(item() + " is missing");
        ETC_RETURN_IF_ERROR(check_tensor(ctx, *v.tensors[j], item));
      }
      continue;
    }
    if (spec.is_out) {
      auto what = [&] { return "out tensor '" + spec.name + "'"; };
      if (v.kind != Value::Kind::kTensor) {
        return ctx.error(what() + " (argument " + std::to_string(i) + ") must be a Tensor, got " +
                         value_kind_name(v.kind));
      }
      ETC_RETURN_IF_ERROR(check_tensor(ctx, v.tensor, what));
      continue;
    }
    auto what = [&] { return "argument " + std::to_string(i) + " (" + spec.name + ")"; };
    if (!kind_matches(spec, v)) {
      return ctx.error(what() + " must be " + arg_kind_text(spec) + ", got " +
                       value_kind_name(v.kind));
    }
    if (v.kind == Value::Kind::kTensor) ETC_RETURN_IF_ERROR(check_tensor(ctx, v.tensor, what));
    if (v.kind == Value::Kind::kTensorList || v.kind == Value::Kind::kOptionalTensorList) {
      for (size_t j = 0; j < v.tensors.size(); ++j) {
        auto item = [&] { return what() + " element " + std::to_string(j); };
        if (v.tensors[j] == nullptr) {
          if (v.kind == Value::Kind::kOptionalTensorList) continue;  // None
          return ctx.error(item() + " is missing");
        }
        ETC_RETURN_IF_ERROR(check_tensor(ctx, *v.tensors[j], item));
      }
    }
    if (spec.type == ArgType::kScalarType && v.kind == Value::Kind::kInt &&
        !dtype_from_scalar_type(static_cast<int>(v.i))) {
      return ctx.error(what() + " is ScalarType " + std::to_string(v.i) +
                       ", which has no etc dtype");
    }
  }
  // The return value: the out tensor, or a TensorList of the outs; nothing is read of it
  // when the schema returns nothing (`-> ()`).
  const Value& ret = *args[schema.args.size()];
  const std::string at = " (argument " + std::to_string(schema.args.size()) + ")";
  const int results = schema.num_outputs;
  if (results == 1 && ret.kind != Value::Kind::kTensor) {
    return ctx.error("the return value" + at + " must be the out Tensor, got " +
                     value_kind_name(ret.kind));
  }
  if (results > 1 && (ret.kind != Value::Kind::kTensorList ||
                      ret.tensors.size() != static_cast<size_t>(results))) {
    return ctx.error("the return value" + at + " must be a TensorList of the " +
                     std::to_string(results) + " outs");
  }
  return Status();
}

size_t Args::index(std::string_view name) const {
  const int i = ctx_.schema == nullptr ? -1 : ctx_.schema->arg_index(name);
  if (i < 0 || static_cast<size_t>(i) >= args_.size()) {
    std::fprintf(
        stderr,
        "etc: internal error: kernel %.*s reads an argument '%.*s' its schema does not have\n",
        static_cast<int>(ctx_.op.size()), ctx_.op.data(), static_cast<int>(name.size()),
        name.data());
    std::abort();
  }
  return static_cast<size_t>(i);
}

const TensorView* Args::opt_tensor(std::string_view name) const {
  const Value& v = (*this)[name];
  return v.is_none() ? nullptr : &v.tensor;
}

const Value* Args::opt_scalar(std::string_view name) const {
  const Value& v = (*this)[name];
  return v.is_none() ? nullptr : &v;
}

TensorView& Args::out(size_t i) const {
  size_t seen = 0;
  if (ctx_.schema != nullptr) {
    for (size_t k = 0; k < ctx_.schema->args.size() && k < args_.size(); ++k) {
      if (ctx_.schema->args[k].is_out && seen++ == i) return args_[k]->tensor;
    }
  }
  std::fprintf(stderr, "etc: internal error: kernel %.*s reads out %zu its schema does not have\n",
               static_cast<int>(ctx_.op.size()), ctx_.op.data(), i);
  std::abort();
}

std::optional<DType> opt_dtype_arg(std::span<Value*> args, size_t i) {
  if (args[i]->is_none()) return std::nullopt;
  return dtype_from_scalar_type(static_cast<int>(args[i]->i));
}

std::string shape_str(std::span<const int64_t> sizes) {
  return shape_to_string(sizes);
}

Status check_out_shape(const KernelContext& ctx, TensorView& out, std::span<const int64_t> expected,
                       const char* name) {
  if (std::equal(out.sizes.begin(), out.sizes.end(), expected.begin(), expected.end()))
    return Status();
  if (out.capacity >= 0 && expected.size() == out.sizes.size()) {
    auto numel = checked_numel(expected);
    auto bytes = numel ? checked_mul(*numel, dtype_size(out.dtype)) : std::nullopt;
    if (bytes && *bytes <= out.capacity) {
      out.sizes.assign(expected.begin(), expected.end());
      return Status();
    }
    return ctx.error(std::string(name) + " needs shape " + shape_str(expected) +
                     ", past its bound " + shape_str(out.sizes) + " (" +
                     std::to_string(out.capacity) + " bytes planned)");
  }
  return ctx.error(std::string(name) + " has shape " + shape_str(out.sizes) + ", expected " +
                   shape_str(expected));
}

Status check_out_dtype(const KernelContext& ctx, const TensorView& out, DType expected,
                       const char* name) {
  if (out.dtype == expected) return Status();
  return ctx.error(std::string(name) + " has dtype " + std::string(dtype_name(out.dtype)) +
                   ", expected " + std::string(dtype_name(expected)));
}

Status check_out(const KernelContext& ctx, TensorView& out, std::span<const int64_t> expected_sizes,
                 DType expected_dtype, const char* name) {
  ETC_RETURN_IF_ERROR(check_out_dtype(ctx, out, expected_dtype, name));
  return check_out_shape(ctx, out, expected_sizes, name);
}

Result<DType> check_binary_math(const KernelContext& ctx, binary_math::Kind kind,
                                const TensorView& self, const TensorView* other,
                                const Value* scalar, TensorView& out) {
  using binary_math::Kind;
  using R = TypeOperand::Rank;
  auto rank = [](const TensorView& t) { return t.rank() > 0 ? R::kDims : R::kZeroDim; };
  DType common;
  std::vector<int64_t> sizes = self.sizes;
  if (other != nullptr) {
    auto b = broadcast_shapes(self.sizes, other->sizes);
    if (!b) {
      return ctx.error("self " + shape_str(self.sizes) + " and other " + shape_str(other->sizes) +
                       " cannot be broadcast together");
    }
    sizes = std::move(*b);
    common = result_type({{self.dtype, rank(self)}, {other->dtype, rank(*other)}});
  } else {
    const DType number = scalar->kind == Value::Kind::kDouble ? DType::kFloat32
                         : scalar->kind == Value::Kind::kBool ? DType::kBool
                                                              : DType::kInt64;
    common = result_type({{self.dtype, rank(self)}, {number, R::kNumber}});
  }
  DType result = common, compute = common;
  switch (kind) {
    case Kind::kCompare:
      result = DType::kBool;
      break;
    case Kind::kLogical:
      result = compute = DType::kBool;
      break;
    case Kind::kBitwise:
      if (dtype_is_float(common))
        return unsupported_dtype(ctx, "the operands' result", common, "an integer or bool dtype");
      break;
    case Kind::kArith:
      if (common == DType::kBool)
        return unsupported_dtype(ctx, "the operands' result", common, "a numeric dtype");
      break;
    case Kind::kFloat:
      if (!dtype_is_float(common)) result = compute = DType::kFloat32;
      break;
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, result));
  return compute;
}

Status check_unary_math(const KernelContext& ctx, unary_math::Kind kind, const TensorView& self,
                        TensorView& out) {
  using unary_math::Kind;
  DType result = self.dtype;
  switch (kind) {
    case Kind::kFloat:
      if (!dtype_is_float(self.dtype)) result = DType::kFloat32;
      break;
    case Kind::kNumeric:
      if (self.dtype == DType::kBool)
        return unsupported_dtype(ctx, "self", self.dtype, "a numeric dtype (not bool)");
      break;
    case Kind::kAny:
      break;
    case Kind::kIntegral:
      if (dtype_is_float(self.dtype))
        return unsupported_dtype(ctx, "self", self.dtype, "an integer or bool dtype");
      break;
    case Kind::kPredicate:
      result = DType::kBool;
      break;
  }
  return check_out(ctx, out, self.sizes, result);
}

Result<int64_t> wrap_dim(const KernelContext& ctx, const char* arg, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r) {
    return ctx.error(std::string(arg) + " " + std::to_string(dim) +
                     " is out of range for a tensor of rank " + std::to_string(rank));
  }
  return dim < 0 ? dim + r : dim;
}

Result<std::vector<bool>> reduced_dims(const KernelContext& ctx, const std::vector<int64_t>* dims,
                                       int64_t rank) {
  std::vector<bool> reduced(static_cast<size_t>(rank), dims == nullptr || dims->empty());
  if (dims == nullptr) return reduced;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t d : *dims) {
    ETC_ASSIGN_OR_RETURN(int64_t w, wrap_dim(ctx, "dim", d, rank));
    if (rank == 0) continue;
    if (seen[static_cast<size_t>(w)])
      return ctx.error("dim " + std::to_string(w) + " appears more than once");
    seen[static_cast<size_t>(w)] = true;
    reduced[static_cast<size_t>(w)] = true;
  }
  return reduced;
}

Result<std::vector<bool>> check_prod(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  std::vector<int64_t> dims{a.integer("dim")};
  ETC_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                       reduced_dims(ctx, &dims, static_cast<int64_t>(self.rank())));
  std::optional<DType> dtype = opt_dtype_arg(args, 3);
  const DType want = dtype.value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  std::vector<int64_t> sizes;
  for (size_t d = 0; d < self.rank(); ++d) {
    if (!reduced[d]) {
      sizes.push_back(self.sizes[d]);
    } else if (a.flag("keepdim")) {
      sizes.push_back(1);
    }
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(), sizes, want));
  return reduced;
}

Result<int64_t> check_cumsum(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  std::optional<DType> dtype = opt_dtype_arg(args, 2);
  const DType want = dtype.value_or(dtype_is_float(self.dtype) ? self.dtype : DType::kInt64);
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(), self.sizes, want));
  return dim;
}

Status check_group_norm(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& x = a.tensor("input");
  const TensorView* weight = a.opt_tensor("weight");
  const TensorView* bias = a.opt_tensor("bias");
  const int64_t n = a.integer("N"), c = a.integer("C"), hw = a.integer("HxW");
  const int64_t group = a.integer("group");
  if (!dtype_is_float(x.dtype)) {
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  }
  if (x.rank() < 2 || x.sizes[0] != n || x.sizes[1] != c || n * c * hw != x.numel()) {
    return ctx.error("input " + shape_str(x.sizes) + " is not [N=" + std::to_string(n) +
                     ", C=" + std::to_string(c) + ", HxW=" + std::to_string(hw) + "]");
  }
  if (group <= 0 || c % group != 0) {
    return ctx.error("C " + std::to_string(c) + " is not divisible into " + std::to_string(group) +
                     " groups");
  }
  for (const TensorView* t : {weight, bias}) {
    if (t != nullptr && (t->rank() != 1 || t->sizes[0] != c)) {
      return ctx.error(std::string(t == weight ? "weight " : "bias ") + shape_str(t->sizes) +
                       " must be [" + std::to_string(c) + "]");
    }
  }
  const std::vector<int64_t> stat{n, group};
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(0), x.sizes, x.dtype, "out0"));
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(1), stat, x.dtype, "out1"));
  return check_out(ctx, a.out(2), stat, x.dtype, "out2");
}

std::vector<int64_t> reduced_shape(std::span<const int64_t> sizes, const std::vector<bool>& reduced,
                                   bool keepdim) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d]) {
      out.push_back(sizes[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

namespace {

// The sizes of a reduction over the one dim `dim` (a 0-d tensor stays 0-d).
std::vector<int64_t> reduced_sizes(std::span<const int64_t> sizes, int64_t dim, bool keepdim) {
  std::vector<bool> reduced(sizes.size(), false);
  if (!sizes.empty()) reduced[static_cast<size_t>(dim)] = true;
  return reduced_shape(sizes, reduced, keepdim);
}

// The lanes of sort and topk, keeping the first k of each, with the outs checked.
Result<OrderedLanes> check_ordered(const KernelContext& ctx, const TensorView& self, int64_t dim,
                                   int64_t k, bool descending, TensorView& values,
                                   TensorView& indices) {
  OrderedLanes o;
  o.lanes = lanes_of(self.sizes, dim);
  o.k = k;
  o.descending = descending;
  std::vector<int64_t> sizes = self.sizes;
  if (!sizes.empty()) sizes[static_cast<size_t>(dim)] = k;
  ETC_RETURN_IF_ERROR(check_out(ctx, values, sizes, self.dtype, "values"));
  ETC_RETURN_IF_ERROR(check_out(ctx, indices, sizes, DType::kInt64, "indices"));
  return o;
}

}  // namespace

Result<VarReduction> check_var(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  if (!dtype_is_float(self.dtype)) {
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  }
  VarReduction v;
  ETC_ASSIGN_OR_RETURN(
      v.reduced, reduced_dims(ctx, opt_int_list_arg(args, 1), static_cast<int64_t>(self.rank())));
  const Value* correction = a.opt_scalar("correction");
  v.correction = correction != nullptr ? correction->scalar_as_double() : 1.0;
  ETC_RETURN_IF_ERROR(
      check_out(ctx, a.out(), reduced_shape(self.sizes, v.reduced, a.flag("keepdim")), self.dtype));
  return v;
}

Lanes lanes_of(std::span<const int64_t> sizes, int64_t dim) {
  Lanes l;
  for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
    if (d < dim) l.outer *= sizes[static_cast<size_t>(d)];
    if (d == dim) l.len = sizes[static_cast<size_t>(d)];
    if (d > dim) l.inner *= sizes[static_cast<size_t>(d)];
  }
  return l;
}

Result<Lanes> check_arg_reduce(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  const bool keepdim = a.flag("keepdim");
  const Value& dim_arg = a["dim"];
  Lanes l;
  std::vector<int64_t> sizes;
  if (dim_arg.is_none()) {  // the flattened input
    l.len = self.numel();
    sizes.assign(keepdim ? self.rank() : 0, 1);
  } else {
    ETC_ASSIGN_OR_RETURN(int64_t dim,
                         wrap_dim(ctx, "dim", dim_arg.i, static_cast<int64_t>(self.rank())));
    l = lanes_of(self.sizes, dim);
    sizes = reduced_sizes(self.sizes, dim, keepdim);
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, sizes, DType::kInt64));
  if (out.numel() != 0 && l.len == 0) {
    return ctx.error("cannot take the index of an extreme over an empty dim");
  }
  return l;
}

Result<Lanes> check_max_dim(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& values = a.out(0);
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const std::vector<int64_t> sizes = reduced_sizes(self.sizes, dim, a.flag("keepdim"));
  ETC_RETURN_IF_ERROR(check_out(ctx, values, sizes, self.dtype, "values"));
  ETC_RETURN_IF_ERROR(check_out(ctx, a.out(1), sizes, DType::kInt64, "indices"));
  const Lanes l = lanes_of(self.sizes, dim);
  if (values.numel() != 0 && l.len == 0) {
    return ctx.error("cannot reduce over dim " + std::to_string(dim) + " of size 0");
  }
  return l;
}

Result<OrderedLanes> check_sort(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  return check_ordered(ctx, self, dim, len, a.flag("descending"), a.out(0), a.out(1));
}

Result<OrderedLanes> check_topk(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  ETC_ASSIGN_OR_RETURN(int64_t dim,
                       wrap_dim(ctx, "dim", a.integer("dim"), static_cast<int64_t>(self.rank())));
  const int64_t len = self.rank() == 0 ? 1 : self.sizes[static_cast<size_t>(dim)];
  const int64_t k = a.integer("k");
  if (k < 0 || k > len) {
    return ctx.error("k " + std::to_string(k) + " is out of range for dim " + std::to_string(dim) +
                     " of size " + std::to_string(len));
  }
  return check_ordered(ctx, self, dim, k, a.flag("largest"), a.out(0), a.out(1));
}

Status unsupported_dtype(const KernelContext& ctx, const char* what, DType dtype,
                         const char* expected) {
  return ctx.error(std::string(what) + " has dtype " + std::string(dtype_name(dtype)) +
                   ", expected " + expected);
}

Status check_contiguous_dim_order(const KernelContext& ctx, const Value& dim_order, size_t rank) {
  if (dim_order.kind != Value::Kind::kIntList) return Status();  // None: keep the layout
  const std::vector<int64_t>& d = dim_order.ints;
  bool identity = d.size() == rank;
  for (size_t i = 0; identity && i < d.size(); ++i)
    identity = d[i] == static_cast<int64_t>(i);
  if (!identity) {
    return ctx.error("dim_order " + shape_str(d) +
                     " is not the contiguous order: etc runs contiguous tensors only");
  }
  return Status();
}

Result<std::array<int64_t, 2>> pair_arg(const KernelContext& ctx, const char* arg,
                                        const std::vector<int64_t>& v, int64_t fallback,
                                        bool allow_empty) {
  if (v.empty() && allow_empty) return std::array<int64_t, 2>{fallback, fallback};
  if (v.size() == 1) return std::array<int64_t, 2>{v[0], v[0]};
  if (v.size() != 2) {
    return ctx.error(std::string(arg) + " must have 1 or 2 values, got " +
                     std::to_string(v.size()));
  }
  return std::array<int64_t, 2>{v[0], v[1]};
}

std::vector<int64_t> broadcast_strides(std::span<const int64_t> in_sizes,
                                       std::span<const int64_t> out_sizes) {
  std::vector<int64_t> strides(out_sizes.size(), 0);
  std::vector<int64_t> in_strides = contiguous_strides(in_sizes);
  size_t lead = out_sizes.size() - in_sizes.size();
  for (size_t i = 0; i < in_sizes.size(); ++i) {
    if (in_sizes[i] != 1) strides[lead + i] = in_strides[i];
  }
  return strides;
}

void strided_copy(const void* src, std::span<const int64_t> src_strides, void* dst,
                  std::span<const int64_t> dst_strides, std::span<const int64_t> sizes,
                  int64_t elem_size) {
  switch (elem_size) {
    case 1:
      return strided_copy_typed(static_cast<const uint8_t*>(src), src_strides,
                                static_cast<uint8_t*>(dst), dst_strides, sizes);
    case 2:
      return strided_copy_typed(static_cast<const uint16_t*>(src), src_strides,
                                static_cast<uint16_t*>(dst), dst_strides, sizes);
    case 4:
      return strided_copy_typed(static_cast<const uint32_t*>(src), src_strides,
                                static_cast<uint32_t*>(dst), dst_strides, sizes);
    default:
      return strided_copy_typed(static_cast<const uint64_t*>(src), src_strides,
                                static_cast<uint64_t*>(dst), dst_strides, sizes);
  }
}

void fill_scalar(TensorView& out, const Value& scalar) {
  visit_dtype(out.dtype, [&]<typename T>() {
    T v = scalar.kind == Value::Kind::kDouble ? convert<T>(scalar.d)
          : scalar.kind == Value::Kind::kBool ? convert<T>(scalar.b)
                                              : convert<T>(scalar.i);
    std::fill_n(out.data_as<T>(), out.numel(), v);
  });
}

bool cat_skips(const TensorView& t) {
  return t.rank() == 1 && t.sizes[0] == 0;
}

Result<CatShape> check_cat(const KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const std::vector<TensorView*>& ts = args[0]->tensors;
  TensorView& out = args[2]->tensor;
  if (ts.empty()) return ctx.error("tensors must not be empty");
  CatShape shape;
  DType dtype = ts[0]->dtype;
  for (const TensorView* t : ts) {
    dtype = promote_types(dtype, t->dtype);
    if (shape.first == nullptr && !cat_skips(*t)) shape.first = t;
  }
  if (shape.first == nullptr) {
    shape.sizes = {0};
    ETC_RETURN_IF_ERROR(check_out(ctx, out, shape.sizes, dtype));
    return shape;
  }
  const TensorView& first = *shape.first;
  if (first.rank() == 0) return ctx.error("cannot concatenate zero-dimensional tensors");
  ETC_ASSIGN_OR_RETURN(shape.dim,
                       wrap_dim(ctx, "dim", args[1]->i, static_cast<int64_t>(first.rank())));
  const auto dim = static_cast<size_t>(shape.dim);
  shape.sizes = first.sizes;
  shape.sizes[dim] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorView& t = *ts[i];
    if (cat_skips(t)) continue;
    bool ok = t.rank() == first.rank();
    for (size_t d = 0; ok && d < t.rank(); ++d)
      ok = d == dim || t.sizes[d] == first.sizes[d];
    if (!ok) {
      return ctx.error("tensor " + std::to_string(i) + " " + shape_str(t.sizes) +
                       " does not match " + shape_str(first.sizes) + " outside dim " +
                       std::to_string(dim));
    }
    shape.sizes[dim] += t.sizes[dim];
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, shape.sizes, dtype));
  return shape;
}

Result<UpsampleShape> check_upsample2d(const KernelContext& ctx, std::span<Value*> args,
                                       bool bilinear) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& x = args[0]->tensor;
  const Value& sizes = *args[1];
  const Value& scales = *args[bilinear ? 3 : 2];
  TensorView& out = args[bilinear ? 4 : 3]->tensor;
  if (x.rank() != 4) return ctx.error("input must have rank 4, got " + shape_str(x.sizes));
  if (!dtype_is_float(x.dtype))
    return unsupported_dtype(ctx, "input", x.dtype, "a floating-point dtype");
  const bool by_size = sizes.kind == Value::Kind::kIntList;
  if (by_size == (scales.kind == Value::Kind::kDoubleList)) {
    return ctx.error("exactly one of output_size and scale_factors must be given");
  }
  UpsampleShape shape;
  shape.align_corners = bilinear && args[2]->b;
  std::vector<int64_t> expected = x.sizes;
  for (size_t i = 0; i < 2; ++i) {
    shape.in[i] = x.sizes[2 + i];
    if (by_size) {
      if (sizes.ints.size() != 2) return ctx.error("output_size must have two entries");
      shape.out[i] = sizes.ints[i];
    } else {
      if (scales.doubles.size() != 2 || !(scales.doubles[i] > 0) ||
          !std::isfinite(scales.doubles[i])) {
        return ctx.error("scale_factors must be two positive numbers");
      }
      shape.scale[i] = scales.doubles[i];
      shape.out[i] =
          static_cast<int64_t>(std::floor(static_cast<double>(shape.in[i]) * scales.doubles[i]));
    }
    if (shape.out[i] <= 0) return ctx.error("the output would be empty");
    expected[2 + i] = shape.out[i];
  }
  ETC_RETURN_IF_ERROR(check_out(ctx, out, expected, x.dtype));
  if (out.numel() > 0 && (shape.in[0] == 0 || shape.in[1] == 0)) {
    return ctx.error("input has an empty plane");
  }
  return shape;
}

namespace {

// o[i] = f(a[i], b[i]) where each of a, b is o itself or memory no other pointer overlaps
// (the load planner's guarantee): every case gets restrict pointers, so the loop vectorises
// without a run-time overlap check, which an in-place call (a == o) would fail. Inlined into
// each build of apply_epilogue, so the AVX2 build's loops are 8 wide (a separate function is
// compiled for any x86-64 only: 4-wide divisions).
template <typename F>
__attribute__((always_inline)) inline void binary_range(const float* a, const float* b, float* o,
                                                        int64_t n, F f) {
  if (a == o && b == o) {
    for (int64_t i = 0; i < n; ++i)
      o[i] = f(o[i], o[i]);
  } else if (a == o) {
    float* __restrict oo = o;
    const float* __restrict bb = b;
    for (int64_t i = 0; i < n; ++i)
      oo[i] = f(oo[i], bb[i]);
  } else if (b == o) {
    float* __restrict oo = o;
    const float* __restrict aa = a;
    for (int64_t i = 0; i < n; ++i)
      oo[i] = f(aa[i], oo[i]);
  } else {
    float* __restrict oo = o;
    const float* aa = a;
    const float* bb = b;  // a and b may be one tensor; neither overlaps o
    for (int64_t i = 0; i < n; ++i)
      oo[i] = f(aa[i], bb[i]);
  }
}

template <typename F>
__attribute__((always_inline)) inline void unary_range(const float* a, float* o, int64_t n, F f) {
  if (a == o) {
    float* __restrict oo = o;
    for (int64_t i = 0; i < n; ++i)
      oo[i] = f(oo[i]);
  } else {
    float* __restrict oo = o;
    const float* __restrict aa = a;
    for (int64_t i = 0; i < n; ++i)
      oo[i] = f(aa[i]);
  }
}

// One op of an epilogue over [begin, begin + n), which lies in one row of a broadcast
// operand's period.
__attribute__((always_inline)) inline void epilogue_op(const Epilogue::Op& op, int64_t begin,
                                                       int64_t n) {
  using Kind = Epilogue::Op::Kind;
  auto at = [begin](int64_t period) { return period > 0 ? begin % period : begin; };
  const float* a = static_cast<const float*>(op.a->data) + at(op.a_period);
  const float* b =
      op.b != nullptr ? static_cast<const float*>(op.b->data) + at(op.b_period) : nullptr;
  float* o = static_cast<float*>(op.out->data) + begin;
  const float s = op.scalar;
  auto run = [&](auto f) __attribute__((always_inline)) {
    if (b != nullptr) {
      binary_range(a, b, o, n, f);
    } else {
      unary_range(a, o, n, [f, s](float x) { return f(x, s); });
    }
  };
  switch (op.kind) {
    case Kind::kClamp: {
      const float lo = op.lo, hi = op.hi;
      unary_range(a, o, n, [lo, hi](float x) { return std::min(std::max(x, lo), hi); });
      break;
    }
    case Kind::kAdd:
      run([](float x, float y) { return x + y; });
      break;
    case Kind::kSub:
      run([](float x, float y) { return x - y; });
      break;
    case Kind::kMul:
      run([](float x, float y) { return x * y; });
      break;
    case Kind::kDiv:
      run([](float x, float y) { return x / y; });
      break;
    case Kind::kSigmoid:
      // The sigmoid kernel's own loop (its ISA builds), so the same bits as unfused.
      sigmoid_floats(a, o, n);
      break;
    case Kind::kGeluErf:
      gelu_erf_floats(a, o, n);  // the same for gelu
      break;
  }
}

// The whole chain runs over one chunk of kEpilogueChunk floats before the next, so that its
// operands and outs stay in L1 from one op to the next (a hardswish is four ops: over a whole
// 112x112 plane, each op streamed five planes through L2). Each op is elementwise on the same
// index and no out overlaps an operand the chain reads from outside (fuse_epilogues), so the
// order of chunks cannot change a result.
__attribute__((always_inline)) inline void epilogue_chunks(const Epilogue& e, int64_t begin,
                                                           int64_t end) {
  constexpr int64_t kEpilogueChunk = 512;
  // A broadcast row: chunks end at its period too (fuse_epilogues gives one period a chain).
  int64_t period = 0;
  for (const Epilogue::Op& op : e.ops)
    period = std::max({period, op.a_period, op.b_period});
  if (e.ops.size() == 1 && period == 0) {
    epilogue_op(e.ops[0], begin, end - begin);
    return;
  }
  for (int64_t c0 = begin; c0 < end;) {
    int64_t n = std::min(kEpilogueChunk, end - c0);
    if (period > 0) n = std::min(n, period - c0 % period);
    for (const Epilogue::Op& op : e.ops)
      epilogue_op(op, c0, n);
    c0 += n;
  }
}

__attribute__((target("avx512f,fma"))) void epilogue_avx512(const Epilogue& e, int64_t begin,
                                                            int64_t end) {
  epilogue_chunks(e, begin, end);
}
__attribute__((target("avx2"))) void epilogue_avx2(const Epilogue& e, int64_t begin, int64_t end) {
  epilogue_chunks(e, begin, end);
}
void epilogue_portable(const Epilogue& e, int64_t begin, int64_t end) {
  epilogue_chunks(e, begin, end);
}

}  // namespace

// TileEpilogue's loops, built per ISA below: per row, one loop the compiler vectorises, each
// element through the chain in registers.
struct TileEpilogueAccess {
  using Kind = Epilogue::Activation::Kind;

  template <Kind K>
  __attribute__((always_inline)) static inline void rows(const TileEpilogue& t, const float* src,
                                                         int64_t src_ld, int64_t at, int64_t ld,
                                                         int64_t rows, int64_t cols) {
    const float lo = t.lo_, hi = t.hi_, add = t.add_, div = t.div_;
    auto clamp = [lo, hi](float v) { return std::min(std::max(v, lo), hi); };
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = src + r * src_ld;
      float* o = t.t_ + at + r * ld;
      const float* e = t.e_ != nullptr ? t.e_ + at + r * ld : nullptr;
      // o is x (in place) or memory that neither x (the out, or the kernel's scratch) nor e
      // overlaps (fuse_epilogues): each element is read before it is written, so the loop
      // needs no overlap check.
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#else
#pragma GCC ivdep
#endif
      for (int64_t j = 0; j < cols; ++j) {
        const float v = x[j];
        float out;
        if constexpr (K == Kind::kClamp) {
          out = clamp(v);
        } else if constexpr (K == Kind::kHardSwishDivMul) {
          const float c = clamp(v + add) / div;
          out = v * c;
        } else if constexpr (K == Kind::kHardSwishMulDiv) {
          const float c = v * clamp(v + add);
          out = c / div;
        } else if constexpr (K == Kind::kHardSigmoid) {
          out = clamp(v + add) / div;
        } else if constexpr (K == Kind::kAddTensor) {
          out = v + e[j];
        } else if constexpr (K == Kind::kSiLU) {
          // The sigmoid kernel's expression, then the product the mul kernel takes.
          out = v * fast_sigmoidf(v);
        } else if constexpr (K == Kind::kGeluErf) {
          out = gelu_erff(v);  // the gelu kernel's expression
        } else {
          out = clamp(v + e[j]);
        }
        o[j] = out;
      }
    }
  }

  __attribute__((always_inline)) static inline void run(const TileEpilogue& t, const float* src,
                                                        int64_t src_ld, int64_t at, int64_t ld,
                                                        int64_t rows, int64_t cols) {
    switch (t.kind_) {
      case Kind::kClamp:
        return TileEpilogueAccess::rows<Kind::kClamp>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kHardSwishDivMul:
        return TileEpilogueAccess::rows<Kind::kHardSwishDivMul>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kHardSwishMulDiv:
        return TileEpilogueAccess::rows<Kind::kHardSwishMulDiv>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kHardSigmoid:
        return TileEpilogueAccess::rows<Kind::kHardSigmoid>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kAddTensor:
        return TileEpilogueAccess::rows<Kind::kAddTensor>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kAddTensorClamp:
        return TileEpilogueAccess::rows<Kind::kAddTensorClamp>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kSiLU:
        return TileEpilogueAccess::rows<Kind::kSiLU>(t, src, src_ld, at, ld, rows, cols);
      case Kind::kGeluErf:
        return TileEpilogueAccess::rows<Kind::kGeluErf>(t, src, src_ld, at, ld, rows, cols);
    }
  }
};

namespace {

__attribute__((target("avx512f,fma"))) void tile_epilogue_avx512(const TileEpilogue& t,
                                                                 const float* src, int64_t src_ld,
                                                                 int64_t at, int64_t ld,
                                                                 int64_t rows, int64_t cols) {
  TileEpilogueAccess::run(t, src, src_ld, at, ld, rows, cols);
}
// AVX2 with FMA, as the sigmoid and gelu kernels' AVX2 builds: fast_sigmoidf's and fast_erff's
// multiply-adds contract alike (kSiLU and kGeluErf give the unfused bits); the other kinds have
// no multiply-add to contract.
__attribute__((target("avx2,fma"))) void tile_epilogue_avx2(const TileEpilogue& t, const float* src,
                                                            int64_t src_ld, int64_t at, int64_t ld,
                                                            int64_t rows, int64_t cols) {
  TileEpilogueAccess::run(t, src, src_ld, at, ld, rows, cols);
}
void tile_epilogue_portable(const TileEpilogue& t, const float* src, int64_t src_ld, int64_t at,
                            int64_t ld, int64_t rows, int64_t cols) {
  TileEpilogueAccess::run(t, src, src_ld, at, ld, rows, cols);
}

}  // namespace

std::optional<Epilogue::Activation> match_activation(const Epilogue& e, const TensorView& y) {
  using OpKind = Epilogue::Op::Kind;
  using Kind = Epilogue::Activation::Kind;
  if (e.ops.empty() || e.ops.size() > 4 || y.data == nullptr || y.dtype != DType::kFloat32)
    return std::nullopt;
  // Each operand as what it holds: x (the out, not yet written over), t (the one region the
  // chain writes, once its first op has), e (one tensor from outside) or a scalar.
  enum Role : uint8_t { kX, kT, kE, kS };
  struct Step {
    OpKind kind;
    Role a, b;
    float scalar, lo, hi;
  };
  Epilogue::Activation act;
  act.x = &y;
  const TensorView* written = nullptr;
  std::vector<Step> steps;
  for (const Epilogue::Op& op : e.ops) {
    if (op.a_period != 0 || op.b_period != 0) return std::nullopt;
    auto role = [&](const TensorView* v) -> std::optional<Role> {
      if (v == nullptr) return kS;
      if (written != nullptr && v->data == written->data) return kT;
      if (v->data == y.data) return kX;
      if (act.e == nullptr || act.e->data == v->data) {
        act.e = v;
        return kE;
      }
      return std::nullopt;
    };
    const std::optional<Role> a = role(op.a), b = role(op.b);
    if (!a || !b) return std::nullopt;
    if (written != nullptr && op.out->data != written->data) return std::nullopt;
    if (act.e != nullptr && op.out->data == act.e->data) return std::nullopt;
    written = op.out;
    steps.push_back({op.kind, *a, *b, op.scalar, op.lo, op.hi});
  }
  act.t = written;
  auto is = [&](size_t i, OpKind kind, Role a, Role b) {
    return i < steps.size() && steps[i].kind == kind && steps[i].a == a && steps[i].b == b;
  };
  auto commutes = [&](size_t i, OpKind kind, Role a, Role b) {
    return is(i, kind, a, b) || is(i, kind, b, a);  // x + y and x * y are exact either way
  };
  const size_t n = steps.size();
  if (n == 1 && is(0, OpKind::kClamp, kX, kS)) {
    act.kind = Kind::kClamp;
    act.lo = steps[0].lo;
    act.hi = steps[0].hi;
  } else if ((n == 1 || (n == 2 && is(1, OpKind::kClamp, kT, kS))) &&
             commutes(0, OpKind::kAdd, kX, kE)) {
    act.kind = n == 1 ? Kind::kAddTensor : Kind::kAddTensorClamp;
    if (n == 2) {
      act.lo = steps[1].lo;
      act.hi = steps[1].hi;
    }
  } else if (n == 2 && is(0, OpKind::kSigmoid, kX, kS) && commutes(1, OpKind::kMul, kX, kT)) {
    act.kind = Kind::kSiLU;  // t = sigmoid(x), then t = x * t: x keeps the out's own values
    if (written->data == y.data) return std::nullopt;
  } else if (n == 1 && is(0, OpKind::kGeluErf, kX, kS)) {
    act.kind = Kind::kGeluErf;
  } else if (n >= 3 && is(0, OpKind::kAdd, kX, kS) && is(1, OpKind::kClamp, kT, kS)) {
    // (x + add) clamped; for hardswish out of place, so that x keeps the out's own values for
    // the product (in place, the product would read t: no activation).
    act.add = steps[0].scalar;
    act.lo = steps[1].lo;
    act.hi = steps[1].hi;
    if (n == 4 && written->data == y.data) return std::nullopt;
    if (n == 3 && is(2, OpKind::kDiv, kT, kS)) {
      act.kind = Kind::kHardSigmoid;
      act.div = steps[2].scalar;
    } else if (n == 4 && is(2, OpKind::kDiv, kT, kS) && commutes(3, OpKind::kMul, kX, kT)) {
      act.kind = Kind::kHardSwishDivMul;
      act.div = steps[2].scalar;
    } else if (n == 4 && commutes(2, OpKind::kMul, kX, kT) && is(3, OpKind::kDiv, kT, kS)) {
      act.kind = Kind::kHardSwishMulDiv;
      act.div = steps[3].scalar;
    } else {
      return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  return act;  // act.e is set only where a step's roles include e: the two adds
}

TileEpilogue TileEpilogue::of(const Epilogue::Activation& a) {
  TileEpilogue t;
  t.kind_ = a.kind;
  t.lo_ = a.lo;
  t.hi_ = a.hi;
  t.add_ = a.add;
  t.div_ = a.div;
  t.x_ = static_cast<const float*>(a.x->data);
  t.t_ = static_cast<float*>(a.t->data);
  t.e_ = a.e != nullptr ? static_cast<const float*>(a.e->data) : nullptr;
  t.fn_ = isa_build(tile_epilogue_avx512, tile_epilogue_avx2, tile_epilogue_portable);
  return t;
}

void TileEpilogue::run_on_tiles_of(GemmInit& init) const {
  init.tile_done = [](const void* ctx, const float* src, int64_t src_ld, const float* tile,
                      int64_t ld, int64_t rows, int64_t cols) {
    static_cast<const TileEpilogue*>(ctx)->run_from(src, src_ld, tile, ld, rows, cols);
  };
  init.tile_ctx = this;
  init.tile_scratch = out_unread_;
}

std::optional<TileEpilogue> TileEpilogue::make(const Epilogue& e) {
  if (!e.activation || e.after_inputs) return std::nullopt;
  TileEpilogue t = of(*e.activation);
  t.out_unread_ = e.out_unread && t.t_ != t.x_;
  return t;
}

void apply_epilogue_whole(const Epilogue& e, int64_t n) {
  parallel_for(n, int64_t{1} << 14,
               [&](int64_t begin, int64_t end) { apply_epilogue(e, begin, end); });
}

// Built three times, for AVX-512, AVX2 and any x86-64, chosen per call like the GEMM's
// micro-kernel (the CPU's features, capped by $ETC_MAX_ISA): 16- or 8-wide vectors for the
// divisions and compares. Each op is one rounding (no multiply-add to fuse), so every build
// gives the same bits.
void apply_epilogue(const Epilogue& e, int64_t begin, int64_t end) {
  if (e.activation) {
    if (end > begin) {
      const TileEpilogue t = TileEpilogue::of(*e.activation);
      t.run(t.x_ + begin, 0, 1, end - begin);
    }
    return;
  }
  isa_build(epilogue_avx512, epilogue_avx2, epilogue_portable)(e, begin, end);
}

Result<LayerNormDims> check_layer_norm(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& x = tensor_arg(args, 0);
  const std::vector<int64_t>& ns = args[1]->ints;
  if (ns.empty() || ns.size() > x.rank() ||
      !std::equal(ns.begin(), ns.end(), x.sizes.end() - static_cast<ptrdiff_t>(ns.size()))) {
    return ctx.error("normalized_shape " + shape_str(ns) +
                     " does not match the trailing dims of input " + shape_str(x.sizes));
  }
  for (const TensorView* t : {opt_tensor_arg(args, 2), opt_tensor_arg(args, 3)}) {
    if (t != nullptr && t->sizes != ns) {
      return ctx.error(std::string(t == opt_tensor_arg(args, 2) ? "weight " : "bias ") +
                       shape_str(t->sizes) + " must have the normalized shape " + shape_str(ns));
    }
  }
  const size_t axis = x.rank() - ns.size();
  std::vector<int64_t> stat(x.sizes.begin(), x.sizes.begin() + static_cast<ptrdiff_t>(axis));
  stat.resize(x.rank(), 1);
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 5), x.sizes, x.dtype, "out0"));
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 6), stat, x.dtype, "out1"));
  ETC_RETURN_IF_ERROR(check_out(ctx, out_arg(args, 7), stat, x.dtype, "out2"));
  LayerNormDims d{1, 1};
  for (size_t k = 0; k < x.rank(); ++k)
    (k < axis ? d.rows : d.cols) *= x.sizes[k];
  return d;
}

}  // namespace etc::rt::kernels
