// Helpers shared by the CPU kernels (private to src/runtime/kernels): argument checking
// against a kernel's schema, dtype dispatch and element conversion, temporary buffers,
// and iteration over broadcast / strided index spaces.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "graph/binary_math.h"
#include "graph/dtype.h"
#include "graph/ops.h"
#include "graph/unary_math.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"
#include "support/half.h"
#include "support/wrapping_math.h"

namespace etc::rt::kernels {

// ---- Element types -------------------------------------------------------------------

// Storage types of the 16-bit floats; arithmetic happens in float after convert().
struct Half {
  uint16_t x;
};
struct BFloat16 {
  uint16_t x;
};

// exp(x) in float, written so that a loop over it vectorises (libm's expf is a call per
// element; the selects need -fno-trapping-math, set for this library): x = n ln2 + r with
// |r| <= ln2/2 (n rounded to nearest by adding and subtracting 1.5 * 2^23), exp(r) by a
// degree-6 polynomial (Cephes' expf coefficients), 2^n as two exponent-field halves so that
// results near the top of the range and denormal ones come out right. Relative error at
// most 2e-7 for normal results; 0 below -104 (exp(-inf) = 0), inf above 88.72, NaN for NaN
// (computed from 0, so that no NaN is converted to an integer).
inline float fast_expf(float x) {
  const float hi = 88.7228394f, lo = -104.0f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  xc = xc == xc ? xc : 0.0f;
  const float t = xc * 1.44269504088896341f;
  const float fn = (t + 12582912.0f) - 12582912.0f;
  const auto n = static_cast<int32_t>(fn);
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * (r * r) + r + 1.0f;
  const int32_t n1 = n / 2, n2 = n - n1;  // each in [-75, 64]
  const int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  const float y = e * s1 * s2;
  return x < lo ? 0.0f : (x > hi ? std::numeric_limits<float>::infinity() : (x == x ? y : x));
}

// erf(x) in float, vectorisable as fast_expf (GELU's erf was 30% of all-MiniLM-L6-v2's time
// as a libm call per element): Abramowitz and Stegun 7.1.26, erf(|x|) = 1 - t (a1 + t (a2 +
// ...)) e^-x^2 with t = 1 / (1 + p |x|), the sign put back by its bit; absolute error at most
// 1.5e-7 in exact arithmetic, 5e-7 as computed in float (tested). Not for NaN inputs (gives
// 1 with the NaN's sign bit).
inline float fast_erff(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const uint32_t sign = bits & 0x80000000u, abs_bits = bits & 0x7fffffffu;
  float a;
  std::memcpy(&a, &abs_bits, 4);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly =
      ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
       0.254829592f) *
      t;
  const float m = 1.0f - poly * fast_expf(-a * a);
  uint32_t out;
  std::memcpy(&out, &m, 4);
  out |= sign;
  float r;
  std::memcpy(&r, &out, 4);
  return r;
}

template <typename T>
inline constexpr bool kIsReducedFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
inline constexpr DType kDTypeOf = [] {
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kUInt8;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kInt8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kInt16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kInt32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kInt64;
  if constexpr (std::is_same_v<T, Half>) return DType::kFloat16;
  if constexpr (std::is_same_v<T, float>) return DType::kFloat32;
  if constexpr (std::is_same_v<T, double>) return DType::kFloat64;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::kBFloat16;
}();

// The type a kernel computes in for storage type T: float for the 16-bit floats, double
// for float64, int64 for integers and bool (as ATen's CPU kernels do for accuracy).
template <typename T>
using ComputeT = std::conditional_t<kIsReducedFloat<T> || std::is_same_v<T, float>, float,
                                    std::conditional_t<std::is_same_v<T, double>, double, int64_t>>;

// Element conversion with ATen's semantics: to bool is `!= 0`, float to integer truncates
// toward zero (through int64, so narrow integers wrap as on x86; NaN gives 0 and values
// beyond int64 saturate rather than being undefined behaviour).
template <typename To, typename From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<From, Half>) {
    return convert<To>(half_to_float(v.x));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return convert<To>(bfloat16_to_float(v.x));
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{float_to_bfloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To(0);
    constexpr auto kLo = static_cast<From>(std::numeric_limits<int64_t>::min());
    constexpr auto kHi = static_cast<From>(std::numeric_limits<int64_t>::max());
    int64_t t = v <= kLo   ? std::numeric_limits<int64_t>::min()
                : v >= kHi ? std::numeric_limits<int64_t>::max()
                           : static_cast<int64_t>(v);
    return static_cast<To>(t);
  } else {
    return static_cast<To>(v);
  }
}

// A Scalar argument in compute type C (integers exactly, floats through double).
template <typename C>
inline C scalar_to(const Value& v) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(v.scalar_as_double());
  } else {
    return static_cast<C>(v.scalar_as_int());
  }
}

// native_layer_norm.out's arguments, checked alike by every device's kernel: normalized_shape
// a suffix of the input's shape, weight and bias (when given) of that shape, the three outs
// (out0 the input's shape, out1 and out2 the leading dims then ones). Returns the rows
// normalized and the elements of each.
struct LayerNormDims {
  int64_t rows = 0, cols = 0;
};
Result<LayerNormDims> check_layer_norm(const KernelContext& ctx, std::span<Value*> args);

// o[i] = 1 / (1 + exp(-x[i])) for i < n on this thread: the float sigmoid kernel's loop
// (fast_expf, built per ISA), for epilogues that must give its bits.
void sigmoid_floats(const float* x, float* o, int64_t n);

// Runs `e` on flat elements [begin, end): the same arithmetic, element for element, as the
// relu/hardtanh/clamp and add/sub/mul/div kernels it stands for (alpha 1).
void apply_epilogue(const Epilogue& e, int64_t begin, int64_t end);

// An epilogue run on rectangles of a kernel's out (a GEMM micro-tile, a strip of a first
// layer) right after the kernel wrote them, while they are in L1: for chains that are an
// Epilogue::Activation, each element through the chain in registers. What it saves is the
// chain's passes over the out through L2 (mobilenet_v3_small's hardswish: four ops over 16 x
// 112 x 112 floats after its first layer).
class TileEpilogue {
 public:
  // nullopt where the chain is no Activation or must wait for the kernel's inputs
  // (Epilogue::after_inputs).
  static std::optional<TileEpilogue> make(const Epilogue& e);
  // The chain on out[r * ld + j] for r < rows, j < cols, from `tile` (inside the out).
  void run(const float* tile, int64_t ld, int64_t rows, int64_t cols) const {
    fn_(*this, tile, ld, tile - x_, ld, rows, cols);
  }
  // The same where the kernel kept the tile's values at src (row pitch src_ld) instead of
  // storing them at `tile` (out_unread).
  void run_from(const float* src, int64_t src_ld, const float* tile, int64_t ld, int64_t rows,
                int64_t cols) const {
    fn_(*this, src, src_ld, tile - x_, ld, rows, cols);
  }
  // Epilogue::out_unread: the kernel need not store its out where it runs this by tiles.
  bool out_unread() const { return out_unread_; }

 private:
  using Fn = void (*)(const TileEpilogue&, const float* src, int64_t src_ld, int64_t at, int64_t ld,
                      int64_t rows, int64_t cols);
  friend struct TileEpilogueAccess;
  friend void apply_epilogue(const Epilogue& e, int64_t begin, int64_t end);
  static TileEpilogue of(const Epilogue::Activation& a);
  Epilogue::Activation::Kind kind_ = Epilogue::Activation::Kind::kClamp;
  float lo_ = 0, hi_ = 0, add_ = 0, div_ = 1;
  const float* x_ = nullptr;  // the kernel's out
  float* t_ = nullptr;        // where the result goes (x_ itself for a chain in place)
  const float* e_ = nullptr;  // kAddTensor*: the tensor added
  bool out_unread_ = false;
  Fn fn_ = nullptr;
};

// Calls f.template operator()<T>() with T the storage type of `t`.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kUInt8:
      return f.template operator()<uint8_t>();
    case DType::kInt8:
      return f.template operator()<int8_t>();
    case DType::kInt16:
      return f.template operator()<int16_t>();
    case DType::kInt32:
      return f.template operator()<int32_t>();
    case DType::kInt64:
      return f.template operator()<int64_t>();
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kFloat32:
      return f.template operator()<float>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kBool:
      return f.template operator()<bool>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
  }
  return f.template operator()<float>();  // unreachable: the enum is closed
}

// As visit_dtype, for the floating-point dtypes only (others must be rejected before).
template <typename F>
decltype(auto) visit_float_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kFloat16:
      return f.template operator()<Half>();
    case DType::kFloat64:
      return f.template operator()<double>();
    case DType::kBFloat16:
      return f.template operator()<BFloat16>();
    default:
      return f.template operator()<float>();
  }
}

// Converts n contiguous elements between any two dtypes (a memmove when they are equal).
void convert_elements(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

// ---- Temporary buffers ---------------------------------------------------------------

// Uninitialised scratch memory for n elements of T (T is trivial).
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(int64_t n) : data_(new T[static_cast<size_t>(std::max<int64_t>(n, 1))]) {}
  T* data() const { return data_.get(); }
  T& operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

 private:
  std::unique_ptr<T[]> data_;
};

// A tensor's elements as T: the tensor's own memory when its dtype is T, else a converted
// copy. Lets kernels convert inputs to the computation's dtype once, up front.
template <typename T>
class ReadAs {
 public:
  explicit ReadAs(const TensorView& t) {
    if (t.dtype == kDTypeOf<T>) {
      ptr_ = t.data_as<const T>();
    } else {
      copy_ = Buffer<T>(t.numel());
      convert_elements(t.data, t.dtype, copy_.data(), kDTypeOf<T>, t.numel());
      ptr_ = copy_.data();
    }
  }
  const T* data() const { return ptr_; }

 private:
  const T* ptr_ = nullptr;
  Buffer<T> copy_;
};

// An out tensor written as T: the tensor's memory when its dtype is T, else a scratch
// buffer converted into the tensor by finish().
template <typename T>
class WriteAs {
 public:
  explicit WriteAs(TensorView& t) : out_(t) {
    if (t.dtype == kDTypeOf<T>) {
      ptr_ = t.data_as<T>();
    } else {
      copy_ = Buffer<T>(t.numel());
      ptr_ = copy_.data();
    }
  }
  T* data() const { return ptr_; }
  void finish() {
    if (out_.dtype != kDTypeOf<T>)
      convert_elements(ptr_, kDTypeOf<T>, out_.data, out_.dtype, out_.numel());
  }

 private:
  TensorView& out_;
  T* ptr_ = nullptr;
  Buffer<T> copy_;
};

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
// bmm.out(self, mat2, *, out): rank 3, equal batch sizes; out [batch, m, n].
Result<MatmulShape> check_bmm(const KernelContext& ctx, std::span<Value*> args);
// addmm.out(self, mat1, mat2, *, beta, alpha, out): as mm for mat1 @ mat2, self (the bias) of
// their dtype broadcasting to [m, n], integer beta and alpha for an integral out.
Result<MatmulShape> check_addmm(const KernelContext& ctx, std::span<Value*> args);
// linear(input[..., k], weight[n, k], bias?): one dtype, bias broadcasting to the out
// [..., n]; m is the product of input's leading dims.
Result<MatmulShape> check_linear(const KernelContext& ctx, std::span<Value*> args);

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
// Gives the elements added (negative: removed) in front of each dim.
Result<std::vector<int64_t>> check_constant_pad_nd(const KernelContext& ctx,
                                                   std::span<Value*> args);

// ---- Strided iteration ---------------------------------------------------------------

// Iterates over an index space shared by N operands, each with its own per-dim strides
// (in elements; 0 where an operand is broadcast). Dims of size 1 are dropped and adjacent
// dims merged where every operand allows it, so the innermost run, which the caller's
// loop body handles, is as long as possible.
template <size_t N>
class StridedLoop {
 public:
  using Offsets = std::array<int64_t, N>;

  StridedLoop(std::span<const int64_t> sizes,
              const std::array<std::span<const int64_t>, N>& strides) {
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) empty_ = true;
      if (sizes[d] == 1) continue;
      sizes_.push_back(sizes[d]);
      for (size_t k = 0; k < N; ++k)
        strides_[k].push_back(strides[k][d]);
    }
    // Merge each dim into the one before it where every operand's strides allow it.
    size_t out = 0;
    for (size_t d = 0; d < sizes_.size(); ++d) {
      if (out > 0) {
        bool mergeable = true;
        for (size_t k = 0; k < N; ++k)
          mergeable &= strides_[k][out - 1] == strides_[k][d] * sizes_[d];
        if (mergeable) {
          sizes_[out - 1] *= sizes_[d];
          for (size_t k = 0; k < N; ++k)
            strides_[k][out - 1] = strides_[k][d];
          continue;
        }
      }
      sizes_[out] = sizes_[d];
      for (size_t k = 0; k < N; ++k)
        strides_[k][out] = strides_[k][d];
      ++out;
    }
    sizes_.resize(out);
    for (size_t k = 0; k < N; ++k)
      strides_[k].resize(out);
  }

  // fn(n, offsets, inner_strides) for every innermost run of n elements.
  template <typename F>
  void for_each_run(F&& fn) const {
    if (empty_) return;
    Offsets zero{};
    if (sizes_.empty()) {
      fn(int64_t{1}, zero, zero);
      return;
    }
    const size_t inner = sizes_.size() - 1;
    Offsets inner_strides;
    for (size_t k = 0; k < N; ++k)
      inner_strides[k] = strides_[k][inner];
    std::vector<int64_t> index(inner, 0);
    Offsets off = zero;
    while (true) {
      fn(sizes_[inner], off, inner_strides);
      // Odometer over the outer dims.
      size_t d = inner;
      while (d > 0) {
        --d;
        ++index[d];
        for (size_t k = 0; k < N; ++k)
          off[k] += strides_[k][d];
        if (index[d] < sizes_[d]) break;
        for (size_t k = 0; k < N; ++k)
          off[k] -= strides_[k][d] * sizes_[d];
        index[d] = 0;
        if (d == 0) return;
      }
      if (inner == 0) return;
    }
  }

 private:
  std::vector<int64_t> sizes_;
  std::array<std::vector<int64_t>, N> strides_;
  bool empty_ = false;
};

// dst[Σ i·dst_strides] = src[Σ i·src_strides] over `sizes`, for elements of `elem_size`
// bytes (1, 2, 4 or 8). Strides are in elements.
void strided_copy(const void* src, std::span<const int64_t> src_strides, void* dst,
                  std::span<const int64_t> dst_strides, std::span<const int64_t> sizes,
                  int64_t elem_size);

// Fills a tensor with a Scalar value converted to its dtype (integers exactly).
void fill_scalar(TensorView& out, const Value& scalar);

// acc[i] = the sum, in double, of row i of x (`rows` rows of `count` contiguous floats), in a
// fixed order whatever the build and thread count (reduce_norm.cpp): global means (mean over
// H and W, adaptive average pooling to 1x1).
void float_row_sums(const float* x, int64_t rows, int64_t count, double* acc);

// ---- Registration --------------------------------------------------------------------

// Each file's registration function; register_cpu_kernels calls them all.
Status register_elementwise_kernels(OperatorRegistry& registry);
Status register_matmul_kernels(OperatorRegistry& registry);
Status register_conv_kernels(OperatorRegistry& registry);
Status register_pool_resize_kernels(OperatorRegistry& registry);
Status register_reduce_norm_kernels(OperatorRegistry& registry);
Status register_reduce_index_kernels(OperatorRegistry& registry);
Status register_shape_kernels(OperatorRegistry& registry);
Status register_index_kernels(OperatorRegistry& registry);
Status register_creation_kernels(OperatorRegistry& registry);
Status register_random_kernels(OperatorRegistry& registry);
Status register_movement_kernels(OperatorRegistry& registry);
Status register_data_dependent_kernels(OperatorRegistry& registry);

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
