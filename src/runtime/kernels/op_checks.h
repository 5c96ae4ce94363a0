// How a kernel checks its call, for the CPU kernels and the CUDA delegate's kernels alike:
// check_args against the op's schema (from the op table), the arguments read by their schema
// names (Args), the out's sizes and dtype (a dynamic-bound out resized, as ExecuTorch's
// resize_tensor), and one checker per op for what the schema cannot say (broadcasting, a
// convolution's geometry, a permutation's dims, ...), which also gives the sizes the kernel
// works with. Both backends call the same checker, so a bad call gets the same error on
// either. The checkers are defined beside the CPU kernel of their op (elementwise.cpp,
// matmul.cpp, conv.cpp, ...) and in kernel_util.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/binary_math.h"
#include "graph/dtype.h"
#include "graph/ops.h"
#include "graph/unary_math.h"
#include "graph/weight_only.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace etc::rt::kernels {

// ---- Arguments -----------------------------------------------------------------------

// Checks an instruction's values against the kernel's schema (ctx.schema, from the op table
// through the registry): the count (the schema's arguments, then the return value), each
// input's kind, every tensor's sizes and data pointer, the outs, and the return value (the
// out tensor, or a TensorList of the outs). One checker for every CPU and CUDA kernel.
Status check_args(const KernelContext& ctx, std::span<Value*> args);

// A call's arguments read by their schema's names, after check_args:
//   const Args a(ctx, args);
//   const TensorView& self = a.tensor("self");
//   TensorView& out = a.out();
// A name the schema does not have is a bug in the kernel (it aborts with the name, as the
// op table's own lookups do); what the values hold was checked against the schema.
class Args {
 public:
  Args(const KernelContext& ctx, std::span<Value*> args) : ctx_(ctx), args_(args) {}
  const Value& operator[](std::string_view name) const { return *args_[index(name)]; }
  const TensorView& tensor(std::string_view name) const { return (*this)[name].tensor; }
  // nullptr for None.
  const TensorView* opt_tensor(std::string_view name) const;
  const Value* opt_scalar(std::string_view name) const;
  int64_t integer(std::string_view name) const { return (*this)[name].i; }
  bool flag(std::string_view name) const { return (*this)[name].b; }
  double real(std::string_view name) const { return (*this)[name].scalar_as_double(); }
  const std::string& string(std::string_view name) const { return (*this)[name].s; }
  const std::vector<int64_t>& ints(std::string_view name) const { return (*this)[name].ints; }
  // The i-th out of the schema (`Tensor(a!) out`).
  TensorView& out(size_t i = 0) const;

 private:
  size_t index(std::string_view name) const;
  const KernelContext& ctx_;
  std::span<Value*> args_;
};

// Accessors for arguments already validated by check_args.
inline const TensorView& tensor_arg(std::span<Value*> args, size_t i) {
  return args[i]->tensor;
}
inline TensorView& out_arg(std::span<Value*> args, size_t i) {
  return args[i]->tensor;
}
inline const TensorView* opt_tensor_arg(std::span<Value*> args, size_t i) {
  return args[i]->is_none() ? nullptr : &args[i]->tensor;
}
inline std::optional<int64_t> opt_int_arg(std::span<Value*> args, size_t i) {
  if (args[i]->is_none()) return std::nullopt;
  return args[i]->i;
}
inline const std::vector<int64_t>* opt_int_list_arg(std::span<Value*> args, size_t i) {
  return args[i]->is_none() ? nullptr : &args[i]->ints;
}
inline double float_arg(std::span<Value*> args, size_t i) {
  return args[i]->scalar_as_double();
}
std::optional<DType> opt_dtype_arg(std::span<Value*> args, size_t i);

// ---- Shapes --------------------------------------------------------------------------

std::string shape_str(std::span<const int64_t> sizes);

// "<name> has shape [2, 4], expected [2, 3]" unless out.sizes == expected.
// A dynamic-bound out tensor (capacity >= 0) is resized to `expected` when that fits its
// capacity and rank, as ExecuTorch's kernels resize_tensor; a static one must match.
Status check_out_shape(const KernelContext& ctx, TensorView& out, std::span<const int64_t> expected,
                       const char* name = "out");
// "<name> has dtype int32, expected float32" unless out.dtype == expected.
Status check_out_dtype(const KernelContext& ctx, const TensorView& out, DType expected,
                       const char* name = "out");
Status check_out(const KernelContext& ctx, TensorView& out, std::span<const int64_t> expected_sizes,
                 DType expected_dtype, const char* name = "out");

// The dtype rules of a unary math op (graph/unary_math.def) of kind `kind`, for the CPU and
// CUDA kernels alike: self's dtype is one the kind takes, and out has self's sizes and the
// result's dtype (float32 for the integers of a float op, bool for a predicate).
Status check_unary_math(const KernelContext& ctx, unary_math::Kind kind, const TensorView& self,
                        TensorView& out);

// The dtype rules of a binary math op (graph/binary_math.def) of kind `kind` for the CPU and
// CUDA kernels alike: `other` is a tensor (broadcast) or, when null, `scalar` a number. Checks
// the operands' dtypes and the out's sizes and dtype, and gives the dtype the op computes in
// (the operands' result type for comparisons, bool for logical ops, the out's otherwise).
Result<DType> check_binary_math(const KernelContext& ctx, binary_math::Kind kind,
                                const TensorView& self, const TensorView* other,
                                const Value* scalar, TensorView& out);

// Wraps a possibly negative dim into [0, rank); an error names the argument otherwise.
// A rank of 0 accepts dims -1 and 0 (as ATen).
Result<int64_t> wrap_dim(const KernelContext& ctx, const char* arg, int64_t dim, int64_t rank);

// The dims a reduction covers (None or [] = all); duplicates are errors.
Result<std::vector<bool>> reduced_dims(const KernelContext& ctx, const std::vector<int64_t>* dims,
                                       int64_t rank);

// prod.int_out(self, int dim, bool keepdim=False, *, ScalarType? dtype=None, out) for the CPU
// and CUDA kernels alike: the reduced dims, with out checked (int64 for integer and bool
// inputs unless a dtype is given, as ATen's prod).
Result<std::vector<bool>> check_prod(const KernelContext& ctx, std::span<Value*> args);

// cumsum.out(self, int dim, *, ScalarType? dtype=None, out) for the CPU and CUDA kernels
// alike: the wrapped dim, with out checked (self's sizes; int64 for integer and bool inputs
// unless a dtype is given, as ATen's cumsum).
Result<int64_t> check_cumsum(const KernelContext& ctx, std::span<Value*> args);

// native_group_norm.out(input, weight?, bias?, N, C, HxW, group, eps, *, out0, out1, out2)
// for the CPU and CUDA kernels alike: a float input [N, C, ...] of N * C * HxW elements, C
// divisible into `group` groups, weight and bias [C], outs [N, C, ...], [N, group] twice.
Status check_group_norm(const KernelContext& ctx, std::span<Value*> args);

// var.correction_out(self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False,
// out) for the CPU and CUDA kernels alike: a float self, the reduced dims (None or [] = all)
// and the correction (1 when None), with out checked (self's dtype, the reduced sizes).
struct VarReduction {
  std::vector<bool> reduced;
  double correction = 1;
};
Result<VarReduction> check_var(const KernelContext& ctx, std::span<Value*> args);

// A contiguous tensor viewed around one dim as [outer, len, inner]: `outer * inner` lanes of
// `len` elements, stride `inner` (a 0-d tensor is one lane of one element). The index
// reductions, cumsum, sort and topk work lane by lane, on the CPU and CUDA alike.
struct Lanes {
  int64_t outer = 1, len = 1, inner = 1;
  // The offset of element j of lane `lane`.
  int64_t at(int64_t lane, int64_t j) const {
    return (lane / inner * len + j) * inner + lane % inner;
  }
  int64_t count() const { return outer * inner; }
};
Lanes lanes_of(std::span<const int64_t> sizes, int64_t dim);

// argmax.out / argmin.out(self, int? dim=None, bool keepdim=False, *, out) for the CPU and
// CUDA kernels alike: the lanes (dim None: the flattened input, one lane), with out checked
// (int64, the reduced sizes). A non-empty out over an empty dim is an error.
Result<Lanes> check_arg_reduce(const KernelContext& ctx, std::span<Value*> args);

// max.dim_max / min.dim_min(self, int dim, bool keepdim=False, *, values, indices) likewise:
// values of self's dtype, indices int64.
Result<Lanes> check_max_dim(const KernelContext& ctx, std::span<Value*> args);

// sort.values(self, dim, descending, *, values, indices) and topk.values(self, k, dim,
// largest, sorted, *, values, indices) for the CPU and CUDA kernels alike: the lanes, how many
// of each lane's ordered elements the outs keep (sort: all; topk: k, in range), and the order
// (descending for sort's flag and topk's largest), with the outs checked (self's sizes with k
// along the dim; self's dtype and int64).
struct OrderedLanes {
  Lanes lanes;
  int64_t k = 0;
  bool descending = false;
};
Result<OrderedLanes> check_sort(const KernelContext& ctx, std::span<Value*> args);
Result<OrderedLanes> check_topk(const KernelContext& ctx, std::span<Value*> args);

// "self has dtype int32, which aten::exp.out does not support" style errors.
Status unsupported_dtype(const KernelContext& ctx, const char* what, DType dtype,
                         const char* expected);

// A dim_order argument (int[]?, ExecuTorch's dim-order ops): None or the contiguous order
// 0..rank-1; etc's tensors are contiguous, so any other order is an error.
Status check_contiguous_dim_order(const KernelContext& ctx, const Value& dim_order, size_t rank);

// 1 or 2 values -> 2 values (an empty list gives `fallback` twice when allowed).
Result<std::array<int64_t, 2>> pair_arg(const KernelContext& ctx, const char* arg,
                                        const std::vector<int64_t>& v, int64_t fallback,
                                        bool allow_empty);

// Strides (in elements) of a contiguous tensor of `in_sizes` read as broadcast to
// `out_sizes` (right-aligned; size-1 and missing dims get stride 0).
std::vector<int64_t> broadcast_strides(std::span<const int64_t> in_sizes,
                                       std::span<const int64_t> out_sizes);

// native_layer_norm.out's arguments, checked alike by every device's kernel: normalized_shape
// a suffix of the input's shape, weight and bias (when given) of that shape, the three outs
// (out0 the input's shape, out1 and out2 the leading dims then ones). Returns the rows
// normalized and the elements of each.
struct LayerNormDims {
  int64_t rows = 0, cols = 0;
};
Result<LayerNormDims> check_layer_norm(const KernelContext& ctx, std::span<Value*> args);

// ---- Argument checks shared by the CPU kernels and the CUDA wrappers ----------------------

// cat.out(Tensor[] tensors, int dim, *, Tensor(a!) out): every argument checked as ATen
// does, out included, before anything is written. `first` is the first input that is not a
// legacy empty 1-d [0] tensor (those are skipped); null when there is none (out is [0]).
struct CatShape {
  const TensorView* first = nullptr;
  int64_t dim = 0;
  std::vector<int64_t> sizes;  // of out
};
bool cat_skips(const TensorView& t);
Result<CatShape> check_cat(const KernelContext& ctx, std::span<Value*> args);

// upsample_nearest2d.vec / upsample_bilinear2d.vec(..., *, Tensor(a!) out): rank-4 float
// input, exactly one of output_size and scale_factors, out checked.
struct UpsampleShape {
  int64_t in[2] = {}, out[2] = {};
  std::optional<double> scale[2];  // given scale factors, else output sizes
  bool align_corners = false;
};
Result<UpsampleShape> check_upsample2d(const KernelContext& ctx, std::span<Value*> args,
                                       bool bilinear);

// ---- Elementwise argument checks (elementwise.cpp), for the CPU and CUDA kernels alike ----
// Each runs after check_args and gives the same error for the same bad call on every device.

// add/sub/mul/div .out and .Scalar_out (other a tensor or, with scalar_other, a number; alpha
// for add and sub): self and other broadcast together, out of the broadcast sizes, div into a
// floating-point out, no bool subtraction, an integer alpha for an integral out.
enum class ArithOp { kAdd, kSub, kMul, kDiv };
Status check_arith(const KernelContext& ctx, std::span<Value*> args, ArithOp op, bool scalar_other);

// pow.Tensor_Scalar_out(self, exponent, *, out): out of self's sizes and a numeric dtype, no
// negative exponent for an integral out.
Status check_pow_tensor_scalar(const KernelContext& ctx, std::span<Value*> args);

// where.self_out(condition, self, other, *, out): a bool or uint8 condition, the three
// broadcast together into out's sizes.
Status check_where(const KernelContext& ctx, std::span<Value*> args);

// The unary maps (neg, relu, clamp, exp, ..., gelu): out of self's sizes, a floating-point
// dtype when `float_only`, else any numeric dtype but bool.
Status check_unary_map(const KernelContext& ctx, const TensorView& self, TensorView& out,
                       bool float_only);

// clamp.out(self, min?, max?, *, out): at least one bound given.
Status check_clamp(const KernelContext& ctx, std::span<Value*> args);

// gelu.out(self, *, approximate, out): 'none' (erf) or 'tanh'.
enum class GeluApprox { kErf, kTanh };
Result<GeluApprox> check_gelu(const KernelContext& ctx, std::span<Value*> args);

// div.out_mode / div.Scalar_mode_out: rounding_mode None (true division), 'trunc' or 'floor'.
enum class DivMode { kTrue, kTrunc, kFloor };
Result<DivMode> check_div_mode(const KernelContext& ctx, std::span<Value*> args);

// ---- Matrix products (matmul.cpp), for the CPU and CUDA kernels alike -------------------

// out[b] (m x n) = self[b] (m x k) @ mat2[b] (k x n); batch 1 but for bmm.
struct MatmulShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
};
// mm.out(self, mat2, *, out): two matrices of one dtype whose inner dims agree; out [m, n].
Result<MatmulShape> check_mm(const KernelContext& ctx, std::span<Value*> args);
// _int_mm.out(self, mat2, *, out): uint8 or int8 self [m, k], int8 mat2 [k, n]; out int32.
Result<MatmulShape> check_int_mm(const KernelContext& ctx, std::span<Value*> args);
// bmm.out(self, mat2, *, out): rank 3, equal batch sizes; out [batch, m, n].
Result<MatmulShape> check_bmm(const KernelContext& ctx, std::span<Value*> args);
// addmm.out(self, mat1, mat2, *, beta, alpha, out): as mm for mat1 @ mat2, self (the bias) of
// their dtype broadcasting to [m, n], integer beta and alpha for an integral out.
Result<MatmulShape> check_addmm(const KernelContext& ctx, std::span<Value*> args);
// linear(input[..., k], weight[n, k], bias?): one dtype, bias broadcasting to the out
// [..., n]; m is the product of input's leading dims.
Result<MatmulShape> check_linear(const KernelContext& ctx, std::span<Value*> args);
// etc::weight_only_linear.out(input, weight, scale, zero_point?, group_size, bias?, *, out):
// graph/weight_only.h's rule, out [..., n] of input's dtype; m is the product of input's
// leading dims.
struct WeightOnlyShape {
  weight_only::Geometry g;
  int64_t m = 0;
};
Result<WeightOnlyShape> check_weight_only_linear(const KernelContext& ctx, std::span<Value*> args);

// ---- Convolution and pooling (conv.cpp, pool_resize.cpp) --------------------------------

// One 2-d convolution's sizes (NCHW input, [C_out, C_in / groups, KH, KW] weight).
struct ConvGeometry {
  int64_t batch, c_in, h, w;
  int64_t c_out, kh, kw;
  int64_t oh, ow;
  int64_t groups;
  std::array<int64_t, 2> stride, pad, dil;
};
// convolution.out(input, weight, bias?, stride, padding, dilation, transposed,
// output_padding, groups, *, out) with rank-4 input and weight (the CPU kernel reads the 1-d
// form as 2-d first): one dtype (float or int64), positive groups, stride and dilation,
// padding not negative, output_padding only when transposed, a weight that fits the input
// and groups, bias [C_out], a kernel within the padded input; out checked.
Result<ConvGeometry> check_convolution(const KernelContext& ctx, std::span<Value*> args);

// A 2-d pooling window over the last two dims of a rank-3 or rank-4 self.
struct PoolGeometry {
  std::array<int64_t, 2> kernel{}, stride{}, pad{}, dil{};
  bool ceil_mode = false;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t planes = 0;  // N*C (or C for a rank-3 input)
  std::vector<int64_t> out_sizes;
};
// max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode, *, out) and
// max_pool2d_with_indices.out (`with_indices`: the int64 indices out too): self not bool,
// positive kernel_size, stride (empty: the kernel size) and dilation, padding within half
// the kernel, a window that fits the padded input (ATen's output size); outs checked.
Result<PoolGeometry> check_max_pool2d(const KernelContext& ctx, std::span<Value*> args,
                                      bool with_indices);
// avg_pool2d.out(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override?, *, out): a float or int64 self, divisor_override not 0, the window as
// max_pool2d's (no dilation); out checked.
Result<PoolGeometry> check_avg_pool2d(const KernelContext& ctx, std::span<Value*> args);
// _adaptive_avg_pool2d.out(self, output_size, *, out): a float rank-3 or rank-4 self, two
// positive output sizes; out checked. Gives in/out sizes and planes (no window).
Result<PoolGeometry> check_adaptive_avg_pool2d(const KernelContext& ctx, std::span<Value*> args);

// ---- Gathers and indexing (creation.cpp, index.cpp) -------------------------------------

// embedding.out(weight, indices, padding_idx, scale_grad_by_freq, sparse, *, out): a rank-2
// weight, int64 or int32 indices, out [*indices, weight.size(1)] of weight's dtype.
Status check_embedding(const KernelContext& ctx, std::span<Value*> args);
// etc::unpack_int4: packed uint8 [..., ceil(size / 2)], out int8 [..., size].
Status check_unpack_int4(const KernelContext& ctx, std::span<Value*> args);

// index_put.out(self, indices, values, accumulate, *, out) and the in-place index_put_ (its
// return value must be self): values of self's dtype broadcasting to self[indices], out of
// self's shape. Gives the plan of self[indices].
Result<IndexPlan> check_index_put(const KernelContext& ctx, std::span<Value*> args, bool in_place);

// ---- Layout ops (shape_ops.cpp), for the CPU and CUDA kernels alike ----------------------

// out = self read from `offset` with `strides` (in elements) over out's sizes.
struct StridedView {
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};
// permute_copy.out(self, dims, *, out): dims a permutation of self's dims; out checked.
Result<StridedView> check_permute(const KernelContext& ctx, std::span<Value*> args);
// select_copy.int_out(self, dim, index, *, out): a dim of self, index in [-size, size).
Result<StridedView> check_select(const KernelContext& ctx, std::span<Value*> args);
// slice_copy.Tensor_out(self, dim, start?, end?, step, *, out): a positive step; start and
// end wrapped once and clamped, as ATen.
Result<StridedView> check_slice(const KernelContext& ctx, std::span<Value*> args);
// constant_pad_nd.out(self, pad, value, *, out): an even pad list of at most 2 per dim,
// (before, after) pairs from the last dim backwards, no dim made negative; out checked.
// Gives what the kernel copies after filling out with the value: the part of self the
// cropping leaves (`region`; empty for a self of rank 1 or more when nothing is left), read at
// `in_offset` of self and written at `out_offset` of out (elements; both contiguous, with
// `in_strides`/`out_strides`).
struct PadCopy {
  std::vector<int64_t> region, in_strides, out_strides;
  int64_t in_offset = 0, out_offset = 0;
};
Result<PadCopy> check_constant_pad_nd(const KernelContext& ctx, std::span<Value*> args);

// `self[indices]` (index.Tensor, index_put) planned from the index tensors' shapes (each int64
// or int32; a null entry is None): plan_index's result, or its error for this kernel.
Result<IndexPlan> index_plan(const KernelContext& ctx, const TensorView& self,
                             const Value& indices);

// Output sizes of the layout ops from the actual input sizes, shared by the CPU and CUDA
// kernels (so a dynamic-bound tensor is resized the same way on both):
//   view/reshape: `size` may hold one -1, inferred from self's element count (`arg` names
//   the argument in messages); squeeze.dim / squeeze.dims drop the named dims of size 1;
//   unsqueeze inserts a 1 at `dim` in [-(rank + 1), rank]; expand: `size` may be longer than
//   self's rank (new leading dims, never -1), -1 keeps self's dim, others must match or
//   broadcast a 1.
Result<std::vector<int64_t>> view_sizes(const KernelContext& ctx, const TensorView& self,
                                        std::span<const int64_t> size, const char* arg);
Result<std::vector<int64_t>> squeeze_dim_sizes(const KernelContext& ctx, const TensorView& self,
                                               int64_t dim);
Result<std::vector<int64_t>> squeeze_dims_sizes(const KernelContext& ctx, const TensorView& self,
                                                std::span<const int64_t> dims);
Result<std::vector<int64_t>> unsqueeze_sizes(const KernelContext& ctx, const TensorView& self,
                                             int64_t dim);
Result<std::vector<int64_t>> expand_sizes(const KernelContext& ctx, const TensorView& self,
                                          std::span<const int64_t> size);

// The sizes of a reduction over the `reduced` dims (kept as 1 with keepdim).
std::vector<int64_t> reduced_shape(std::span<const int64_t> sizes, const std::vector<bool>& reduced,
                                   bool keepdim);

}  // namespace etc::rt::kernels
