// Elementwise kernels: add/sub/mul/div (tensor and scalar forms) with numpy broadcasting,
// pow, where, and the unary ops and activations.
//
// Type promotion was resolved by the compiler: the out's dtype is the computation's dtype.
// Inputs of another dtype are converted to it first (as ATen's TensorIterator casts to the
// common dtype), then each element is computed in ComputeT (float for the 16-bit floats).
// The loops are plain contiguous loops so that GCC vectorises the float32 paths.
#include <algorithm>
#include <cmath>

#include "graph/ops.h"
#include "graph/unary_math.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::kernels {
namespace {

// out = f(a, b) elementwise, a and b broadcast to out's shape; all three of type O.
// Elementwise loops split into ranges of at least this many elements per thread (smaller
// tensors are not worth waking a thread for).
constexpr int64_t kElementGrain = 1 << 15;
// For functions that cost tens of cycles per element (exp, erf, tanh: gelu, sigmoid, silu),
// a thread pays for itself on far fewer elements.
constexpr int64_t kTranscendentalGrain = 1 << 12;
// Broadcasting loops split from this many elements per thread.
constexpr int64_t kBroadcastGrain = 1 << 13;

// out = f(a, b) over `sizes` with the given strides (b and a broadcast where theirs are 0).
template <typename O, typename F>
void strided_binary(const O* a, const O* b, O* out, std::span<const int64_t> sizes,
                    std::span<const int64_t> so, std::span<const int64_t> sa,
                    std::span<const int64_t> sb, F f) {
  using C = ComputeT<O>;
  StridedLoop<3> loop(sizes, {so, sa, sb});
  loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
    O* o = out + off[0];
    const O* x = a + off[1];
    const O* y = b + off[2];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = convert<O>(f(convert<C>(x[i]), convert<C>(y[i])));
    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
      C xv = convert<C>(x[0]);
      for (int64_t i = 0; i < n; ++i)
        o[i] = convert<O>(f(xv, convert<C>(y[i])));
    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
      C yv = convert<C>(y[0]);
      for (int64_t i = 0; i < n; ++i)
        o[i] = convert<O>(f(convert<C>(x[i]), yv));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        o[i * st[0]] = convert<O>(f(convert<C>(x[i * st[1]]), convert<C>(y[i * st[2]])));
      }
    }
  });
}

template <typename O, typename F>
void binary_loop(const O* a, std::span<const int64_t> a_sizes, const O* b,
                 std::span<const int64_t> b_sizes, O* out, std::span<const int64_t> out_sizes,
                 F f) {
  using C = ComputeT<O>;
  auto same = [&](std::span<const int64_t> s) {
    return std::equal(s.begin(), s.end(), out_sizes.begin(), out_sizes.end());
  };
  if (same(a_sizes) && same(b_sizes)) {  // no broadcasting: one contiguous loop
    int64_t n = 1;
    for (int64_t s : out_sizes)
      n *= s;
    parallel_for(n, kElementGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = convert<O>(f(convert<C>(a[i]), convert<C>(b[i])));
    });
    return;
  }
  std::vector<int64_t> so = contiguous_strides(out_sizes);
  std::vector<int64_t> sa = broadcast_strides(a_sizes, out_sizes);
  std::vector<int64_t> sb = broadcast_strides(b_sizes, out_sizes);
  // Split across threads along the outermost dim of more than one element (a
  // squeeze-excitation scale [1, C, 1, 1] * [1, C, H, W]: by channels), each part a strided
  // loop of its own over a slice of the out; every element is computed as serially.
  if (out_sizes.empty()) return strided_binary<O>(a, b, out, out_sizes, so, sa, sb, f);
  size_t d = 0;
  while (d + 1 < out_sizes.size() && out_sizes[d] == 1)
    ++d;
  parallel_for(out_sizes[d], std::max<int64_t>(1, kBroadcastGrain / std::max<int64_t>(so[d], 1)),
               [&](int64_t r0, int64_t r1) {
                 std::vector<int64_t> sizes(out_sizes.begin(), out_sizes.end());
                 sizes[d] = r1 - r0;
                 strided_binary<O>(a + r0 * sa[d], b + r0 * sb[d], out + r0 * so[d], sizes, so, sa,
                                   sb, f);
               });
}

// out = f(x) elementwise over n contiguous elements.
template <typename O, typename F>
void map_loop(const O* x, O* out, int64_t n, F f, int64_t grain = kElementGrain) {
  using C = ComputeT<O>;
  parallel_for(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      out[i] = convert<O>(f(convert<C>(x[i])));
  });
}

// map_loop for the transcendental functions (kTranscendentalGrain).
template <typename O, typename F>
void map_loop_heavy(const O* x, O* out, int64_t n, F f) {
  map_loop(x, out, n, f, kTranscendentalGrain);
}

// The float transcendental functions etc computes with its own vectorisable formulas
// (fast_sigmoidf, fast_erff), each loop built for AVX-512, AVX2/FMA and any x86-64 and chosen
// per call as the GEMM's micro-kernel is: the one build for any x86-64 ran GELU 4 floats at
// a time (all-MiniLM-L6-v2: 0.11 ms per [24, 1536] layer, 13% of the model). The AVX2 and
// AVX-512 builds fuse the same multiply-adds (equal bits); the portable build rounds each.
enum class FloatMap { kGeluErf, kSigmoid, kSilu };

__attribute__((always_inline)) inline void float_map_body(FloatMap f, const float* x, float* o,
                                                          int64_t n) {
  switch (f) {
    case FloatMap::kGeluErf:
      for (int64_t i = 0; i < n; ++i)
        o[i] = gelu_erff(x[i]);
      return;
    case FloatMap::kSigmoid:  // within 1.8e-7 relative
      for (int64_t i = 0; i < n; ++i)
        o[i] = fast_sigmoidf(x[i]);
      return;
    case FloatMap::kSilu:  // the bits of sigmoid, then mul
      for (int64_t i = 0; i < n; ++i)
        o[i] = x[i] * fast_sigmoidf(x[i]);
      return;
  }
}

__attribute__((target("avx512f,fma"))) void float_map_avx512(FloatMap f, const float* x, float* o,
                                                             int64_t n) {
  float_map_body(f, x, o, n);
}
__attribute__((target("avx2,fma"))) void float_map_avx2(FloatMap f, const float* x, float* o,
                                                        int64_t n) {
  float_map_body(f, x, o, n);
}
void float_map_portable(FloatMap f, const float* x, float* o, int64_t n) {
  float_map_body(f, x, o, n);
}

void float_map(FloatMap f, const float* x, float* o, int64_t n) {
  auto* run = isa_build(float_map_avx512, float_map_avx2, float_map_portable);
  parallel_for(n, kTranscendentalGrain,
               [&](int64_t begin, int64_t end) { run(f, x + begin, o + begin, end - begin); });
}

}  // namespace

void sigmoid_floats(const float* x, float* o, int64_t n) {
  isa_build(float_map_avx512, float_map_avx2, float_map_portable)(FloatMap::kSigmoid, x, o, n);
}

void gelu_erf_floats(const float* x, float* o, int64_t n) {
  isa_build(float_map_avx512, float_map_avx2, float_map_portable)(FloatMap::kGeluErf, x, o, n);
}

// ---- Argument checks shared with the CUDA kernels -------------------------------------

Status check_arith(const KernelContext& ctx, std::span<Value*> args, ArithOp op,
                   bool scalar_other) {
  const bool has_alpha = op == ArithOp::kAdd || op == ArithOp::kSub;
  const TensorView& self = tensor_arg(args, 0);
  const TensorView* other = scalar_other ? nullptr : &tensor_arg(args, 1);
  const Value* alpha = has_alpha ? args[2] : nullptr;
  TensorView& out = out_arg(args, has_alpha ? 3 : 2);
  std::vector<int64_t> expected = self.sizes;
  if (other != nullptr) {
    auto b = broadcast_shapes(self.sizes, other->sizes);
    if (!b) {
      return ctx.error("self " + shape_str(self.sizes) + " and other " + shape_str(other->sizes) +
                       " cannot be broadcast together");
    }
    expected = std::move(*b);
  }
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, expected));
  if (op == ArithOp::kDiv && !dtype_is_float(out.dtype)) {
    return unsupported_dtype(ctx, "out", out.dtype,
                             "a floating-point dtype (div is true division)");
  }
  if (op == ArithOp::kSub && out.dtype == DType::kBool) {
    return ctx.error("subtraction of bool tensors is not supported (out has dtype bool)");
  }
  if (alpha != nullptr && dtype_is_integral(out.dtype) && alpha->kind == Value::Kind::kDouble) {
    return ctx.error("alpha " + std::to_string(alpha->d) +
                     " must be an integer for an out of dtype " +
                     std::string(dtype_name(out.dtype)));
  }
  return Status();
}

Status check_pow_tensor_scalar(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& self = tensor_arg(args, 0);
  const Value& exponent = *args[1];
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, self.sizes));
  if (out.dtype == DType::kBool) {
    return unsupported_dtype(ctx, "out", out.dtype, "a numeric dtype");
  }
  if (dtype_is_integral(out.dtype) && exponent.scalar_as_int() < 0) {
    return ctx.error("integers to negative integer powers are not allowed (exponent " +
                     std::to_string(exponent.scalar_as_int()) + ")");
  }
  return Status();
}

Status check_where(const KernelContext& ctx, std::span<Value*> args) {
  const TensorView& cond = tensor_arg(args, 0);
  const TensorView& self = tensor_arg(args, 1);
  const TensorView& other = tensor_arg(args, 2);
  TensorView& out = out_arg(args, 3);
  if (cond.dtype != DType::kBool && cond.dtype != DType::kUInt8) {
    return unsupported_dtype(ctx, "condition", cond.dtype, "bool or uint8");
  }
  auto ab = broadcast_shapes(self.sizes, other.sizes);
  auto all = ab ? broadcast_shapes(cond.sizes, *ab) : std::nullopt;
  if (!all) {
    return ctx.error("condition " + shape_str(cond.sizes) + ", self " + shape_str(self.sizes) +
                     " and other " + shape_str(other.sizes) + " cannot be broadcast together");
  }
  return check_out_shape(ctx, out, *all);
}

Status check_unary_map(const KernelContext& ctx, const TensorView& self, TensorView& out,
                       bool float_only) {
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, self.sizes));
  if (float_only) {
    if (!dtype_is_float(out.dtype))
      return unsupported_dtype(ctx, "out", out.dtype, "a floating-point dtype");
  } else if (out.dtype == DType::kBool) {
    return unsupported_dtype(ctx, "out", out.dtype, "a numeric dtype (not bool)");
  }
  return Status();
}

Status check_clamp(const KernelContext& ctx, std::span<Value*> args) {
  if (args[1]->is_none() && args[2]->is_none()) {
    return ctx.error("at least one of 'min' or 'max' must not be None");
  }
  return Status();
}

Result<GeluApprox> check_gelu(const KernelContext& ctx, std::span<Value*> args) {
  const std::string& approx = args[1]->s;
  if (approx == "none") return GeluApprox::kErf;
  if (approx == "tanh") return GeluApprox::kTanh;
  return ctx.error("approximate must be 'none' or 'tanh', got '" + approx + "'");
}

Result<DivMode> check_div_mode(const KernelContext& ctx, std::span<Value*> args) {
  const Value& mode = Args(ctx, args)["rounding_mode"];
  if (mode.is_none()) return DivMode::kTrue;
  if (mode.s == "trunc") return DivMode::kTrunc;
  if (mode.s == "floor") return DivMode::kFloor;
  return ctx.error("rounding_mode must be None, 'trunc' or 'floor', got '" + mode.s + "'");
}

namespace {

// ---- Binary arithmetic ---------------------------------------------------------------

using BinaryOp = ArithOp;

template <typename O>
void binary_typed(BinaryOp op, const TensorView& a, const TensorView* b, const Value* b_scalar,
                  const Value* alpha_value, TensorView& out) {
  using C = ComputeT<O>;
  ReadAs<O> ra(a);
  const C alpha = alpha_value != nullptr ? scalar_to<C>(*alpha_value) : C(1);
  auto run = [&](auto f) {
    if (b != nullptr) {
      ReadAs<O> rb(*b);
      binary_loop<O>(ra.data(), a.sizes, rb.data(), b->sizes, out.data_as<O>(), out.sizes, f);
    } else {
      // The scalar stays in compute precision (ATen's opmath), not rounded to O first.
      const C y = scalar_to<C>(*b_scalar);
      map_loop<O>(ra.data(), out.data_as<O>(), out.numel(), [&](C x) { return f(x, y); });
    }
  };
  switch (op) {
    case BinaryOp::kAdd:
      return run([alpha](C x, C y) { return wrapping_add(x, wrapping_mul(alpha, y)); });
    case BinaryOp::kSub:
      return run([alpha](C x, C y) { return wrapping_sub(x, wrapping_mul(alpha, y)); });
    case BinaryOp::kMul:
      return run([](C x, C y) { return wrapping_mul(x, y); });
    case BinaryOp::kDiv:
      if constexpr (std::is_floating_point_v<C>) return run([](C x, C y) { return x / y; });
      return;
  }
}

// add/sub/mul/div, Tensor or Scalar `other`; alpha only for add and sub.
Status binary_kernel(KernelContext& ctx, std::span<Value*> args, BinaryOp op, bool scalar_other) {
  const bool has_alpha = op == BinaryOp::kAdd || op == BinaryOp::kSub;
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  const TensorView* other = scalar_other ? nullptr : &tensor_arg(args, 1);
  const Value* alpha = has_alpha ? args[2] : nullptr;
  TensorView& out = out_arg(args, has_alpha ? 3 : 2);
  ETC_RETURN_IF_ERROR(check_arith(ctx, args, op, scalar_other));
  if (out.numel() == 0) return Status();
  const Value* scalar = scalar_other ? args[1] : nullptr;
  visit_dtype(out.dtype,
              [&]<typename O>() { binary_typed<O>(op, self, other, scalar, alpha, out); });
  return Status();
}

Status add_tensor(KernelContext& ctx, std::span<Value*> args) {
  if (ctx.is_channels_last(3)) {
    // A sum of two channels-last tensors of a chain (kernels/load_plan.h) into a third, all
    // of one size: element i of each is the same position and channel, so the sum of their
    // bytes is the sum in either layout. The load planner sets this only for such sizes.
    ETC_RETURN_IF_ERROR(check_args(ctx, args));
    const TensorView& self = tensor_arg(args, 0);
    const TensorView& other = tensor_arg(args, 1);
    const TensorView& out = out_arg(args, 3);
    if (!ctx.is_channels_last(0) || !ctx.is_channels_last(1) || self.rank() != 4 ||
        self.sizes != out.sizes || other.sizes != out.sizes) {
      return internal_error(std::string(ctx.op) +
                            ": a channels-last sum takes two tensors of its out's sizes, "
                            "channels-last too");
    }
  }
  return binary_kernel(ctx, args, BinaryOp::kAdd, false);
}
Status sub_tensor(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kSub, false);
}
// self * other where one is a channels-last [N, C, H, W] tensor of a chain
// (kernels/load_plan.h) and the other one value per channel ([N or 1, C, 1, 1] or [C, 1, 1],
// the same bytes in either layout): a squeeze-and-excitation block's scaling, convnext's layer
// scale, out channels-last too. The load planner sets this only for float32 tensors of those
// shapes.
Status channels_last_channel_scale(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  const TensorView& other = tensor_arg(args, 1);
  TensorView& out = out_arg(args, 2);
  const bool self_big = ctx.is_channels_last(0);
  const TensorView& x = self_big ? self : other;
  const TensorView& s = self_big ? other : self;
  const bool planned = self.dtype == DType::kFloat32 && other.dtype == DType::kFloat32 &&
                       out.dtype == DType::kFloat32 && x.rank() == 4 && out.sizes == x.sizes &&
                       is_channel_scale(s, x.sizes) && ctx.is_channels_last(self_big ? 0 : 1);
  if (!planned) {
    return internal_error(std::string(ctx.op) +
                          ": a channels-last product takes a float32 [N, C, H, W] tensor and "
                          "[N, C, 1, 1] or [C, 1, 1] scales");
  }
  const int64_t channels = x.sizes[1], positions = x.sizes[2] * x.sizes[3];
  const float* xv = x.data_as<const float>();
  const float* sv = s.data_as<const float>();
  float* y = out.data_as<float>();
  const int64_t rows = x.sizes[0] * positions;
  // Scales per image ([N, C, 1, 1] with N > 1), else one row of them for every position.
  const bool per_image = s.rank() == 4 && s.sizes[0] != 1;
  parallel_for(rows, std::max<int64_t>(1, (int64_t{1} << 14) / channels),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const float* scale = sv + (per_image ? r / positions : 0) * channels;
                   const float* from = xv + r * channels;
                   float* to = y + r * channels;
                   if (self_big) {
                     for (int64_t c = 0; c < channels; ++c)
                       to[c] = from[c] * scale[c];
                   } else {
                     for (int64_t c = 0; c < channels; ++c)
                       to[c] = scale[c] * from[c];
                   }
                 }
               });
  return Status();
}

Status mul_tensor(KernelContext& ctx, std::span<Value*> args) {
  if (ctx.is_channels_last(2)) return channels_last_channel_scale(ctx, args);
  return binary_kernel(ctx, args, BinaryOp::kMul, false);
}
Status div_tensor(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kDiv, false);
}
Status add_scalar(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kAdd, true);
}
Status sub_scalar(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kSub, true);
}
Status mul_scalar(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kMul, true);
}
Status div_scalar(KernelContext& ctx, std::span<Value*> args) {
  return binary_kernel(ctx, args, BinaryOp::kDiv, true);
}

// ---- pow(Tensor, Scalar) -------------------------------------------------------------

int64_t int_pow(int64_t base, int64_t exp) {
  // Repeated squaring in unsigned arithmetic: wraps like ATen instead of overflowing.
  uint64_t result = 1;
  auto b = static_cast<uint64_t>(base);
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

Status pow_tensor_scalar(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  const Value& exponent = *args[1];
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_pow_tensor_scalar(ctx, args));
  if (out.numel() == 0) return Status();
  visit_dtype(out.dtype, [&]<typename O>() {
    using C = ComputeT<O>;
    ReadAs<O> in(self);
    const O* x = in.data();
    O* o = out.data_as<O>();
    const int64_t n = out.numel();
    const C e = scalar_to<C>(exponent);
    if constexpr (std::is_floating_point_v<C>) {
      if (e == C(2)) return map_loop(x, o, n, [](C v) { return v * v; });
      if (e == C(1)) return map_loop(x, o, n, [](C v) { return v; });
      if (e == C(0.5)) return map_loop(x, o, n, [](C v) { return std::sqrt(v); });
      return map_loop(x, o, n, [e](C v) { return std::pow(v, e); });
    } else {
      return map_loop(x, o, n, [e](C v) { return int_pow(v, e); });
    }
  });
  return Status();
}

// ---- where ---------------------------------------------------------------------------

template <typename O>
void where_typed(const TensorView& cond, const TensorView& a, const TensorView& b,
                 TensorView& out) {
  ReadAs<O> ra(a), rb(b);
  const auto* c = cond.data_as<const uint8_t>();  // bool and uint8 are both one byte
  const O* x = ra.data();
  const O* y = rb.data();
  O* o = out.data_as<O>();
  std::vector<int64_t> so = contiguous_strides(out.sizes);
  std::vector<int64_t> sc = broadcast_strides(cond.sizes, out.sizes);
  std::vector<int64_t> sa = broadcast_strides(a.sizes, out.sizes);
  std::vector<int64_t> sb = broadcast_strides(b.sizes, out.sizes);
  StridedLoop<4> loop(out.sizes, {so, sc, sa, sb});
  loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
    const uint8_t* pc = c + off[1];
    const O* px = x + off[2];
    const O* py = y + off[3];
    O* po = o + off[0];
    if (st[0] == 1 && st[1] == 1 && st[2] == 1 && st[3] == 1) {
      for (int64_t i = 0; i < n; ++i)
        po[i] = pc[i] != 0 ? px[i] : py[i];
    } else {
      for (int64_t i = 0; i < n; ++i)
        po[i * st[0]] = pc[i * st[1]] != 0 ? px[i * st[2]] : py[i * st[3]];
    }
  });
}

Status where_self(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& cond = tensor_arg(args, 0);
  const TensorView& self = tensor_arg(args, 1);
  const TensorView& other = tensor_arg(args, 2);
  TensorView& out = out_arg(args, 3);
  ETC_RETURN_IF_ERROR(check_where(ctx, args));
  if (out.numel() == 0) return Status();
  visit_dtype(out.dtype, [&]<typename O>() { where_typed<O>(cond, self, other, out); });
  return Status();
}

// ---- eq.Scalar and logical_not: bool results ----------------------------------------

// eq.Scalar and le.Scalar: self <op> other in the promoted compute type (a float scalar
// against an integer tensor compares as double; NaN compares false).
template <typename Cmp>
Status compare_scalar(KernelContext& ctx, std::span<Value*> args, Cmp cmp) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  const Value& other = *args[1];
  TensorView& out = out_arg(args, 2);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, DType::kBool));
  auto* o = out.data_as<uint8_t>();
  const int64_t n = self.numel();
  const bool float_other = other.kind == Value::Kind::kDouble;
  visit_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    using C = ComputeT<T>;
    if (std::is_floating_point_v<C> || float_other) {
      const double y = other.scalar_as_double();
      for (int64_t i = 0; i < n; ++i)
        o[i] = cmp(static_cast<double>(convert<C>(x[i])), y) ? 1 : 0;
    } else {
      const int64_t y = other.scalar_as_int();
      for (int64_t i = 0; i < n; ++i)
        o[i] = cmp(static_cast<int64_t>(convert<C>(x[i])), y) ? 1 : 0;
    }
  });
  return Status();
}

Status eq_scalar(KernelContext& ctx, std::span<Value*> args) {
  return compare_scalar(ctx, args, [](auto x, auto y) { return x == y; });
}

Status logical_not(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = tensor_arg(args, 0);
  TensorView& out = out_arg(args, 1);
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, DType::kBool));
  auto* o = out.data_as<uint8_t>();
  const int64_t n = self.numel();
  visit_dtype(self.dtype, [&]<typename T>() {
    const T* x = self.data_as<const T>();
    using C = ComputeT<T>;
    for (int64_t i = 0; i < n; ++i)
      o[i] = convert<C>(x[i]) == C(0) ? 1 : 0;
  });
  return Status();
}

// ---- Unary ops -----------------------------------------------------------------------

enum class UnaryOp {
  kNeg,
  kRelu,
  kClamp,  // also hardtanh
  kExp,
  kLog,
  kRsqrt,
  kSigmoid,
  kSqrt,
  kTanh,
  kErf,
  kGeluErf,
  kGeluTanh,
  kHardsigmoid,
  kHardswish,
  kSilu,
};

bool unary_is_float_only(UnaryOp op) {
  return op != UnaryOp::kNeg && op != UnaryOp::kRelu && op != UnaryOp::kClamp;
}

struct UnaryArgs {
  UnaryOp op{};
  const Value* lo = nullptr;  // clamp bounds; nullptr = unbounded
  const Value* hi = nullptr;
};

template <typename O>
void unary_typed(const UnaryArgs& u, const TensorView& self, TensorView& out) {
  using C = ComputeT<O>;
  ReadAs<O> in(self);
  const O* x = in.data();
  O* o = out.data_as<O>();
  const int64_t n = out.numel();
  switch (u.op) {
    case UnaryOp::kNeg:
      return map_loop(x, o, n, [](C v) { return wrapping_neg(v); });
    // `v < 0 ? 0 : v` keeps NaN, as ATen's relu does.
    case UnaryOp::kRelu:
      return map_loop(x, o, n, [](C v) { return v < C(0) ? C(0) : v; });
    case UnaryOp::kClamp: {
      // Unbounded sides are infinite for floats so that infinities pass through.
      const C lo = u.lo                          ? scalar_to<C>(*u.lo)
                   : std::is_floating_point_v<C> ? -std::numeric_limits<C>::infinity()
                                                 : std::numeric_limits<C>::lowest();
      const C hi = u.hi                          ? scalar_to<C>(*u.hi)
                   : std::is_floating_point_v<C> ? std::numeric_limits<C>::infinity()
                                                 : std::numeric_limits<C>::max();
      return map_loop(x, o, n, [lo, hi](C v) { return std::min(std::max(v, lo), hi); });
    }
    default:
      break;
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (u.op) {
      case UnaryOp::kExp:
        return map_loop_heavy(x, o, n, [](C v) { return std::exp(v); });
      case UnaryOp::kLog:
        return map_loop_heavy(x, o, n, [](C v) { return std::log(v); });
      case UnaryOp::kRsqrt:
        return map_loop_heavy(x, o, n, [](C v) { return C(1) / std::sqrt(v); });
      case UnaryOp::kSigmoid:
        if constexpr (std::is_same_v<O, float>) {
          return float_map(FloatMap::kSigmoid, x, o, n);
        } else {
          return map_loop_heavy(x, o, n, [](C v) { return C(1) / (C(1) + std::exp(-v)); });
        }
      case UnaryOp::kSqrt:
        return map_loop_heavy(x, o, n, [](C v) { return std::sqrt(v); });
      case UnaryOp::kTanh:
        return map_loop_heavy(x, o, n, [](C v) { return std::tanh(v); });
      case UnaryOp::kErf:
        return map_loop_heavy(x, o, n, [](C v) { return std::erf(v); });
      case UnaryOp::kGeluErf:
        if constexpr (std::is_same_v<O, float>) {
          return float_map(FloatMap::kGeluErf, x, o, n);
        } else {
          return map_loop_heavy(x, o, n, [](C v) {
            return C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752440)));
          });
        }
      case UnaryOp::kGeluTanh:
        return map_loop_heavy(x, o, n, [](C v) {
          const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
          return C(0.5) * v * (C(1) + std::tanh(k * (v + C(0.044715) * v * v * v)));
        });
      case UnaryOp::kHardsigmoid:
        return map_loop_heavy(x, o, n,
                              [](C v) { return std::min(std::max(v + C(3), C(0)), C(6)) / C(6); });
      case UnaryOp::kHardswish:
        return map_loop_heavy(
            x, o, n, [](C v) { return v * std::min(std::max(v + C(3), C(0)), C(6)) / C(6); });
      case UnaryOp::kSilu:
        if constexpr (std::is_same_v<O, float>) {
          return float_map(FloatMap::kSilu, x, o, n);
        } else {
          return map_loop_heavy(x, o, n, [](C v) { return v / (C(1) + std::exp(-v)); });
        }
      default:
        break;
    }
  }
}

Status run_unary(KernelContext& ctx, const UnaryArgs& u, const TensorView& self, TensorView& out) {
  ETC_RETURN_IF_ERROR(check_unary_map(ctx, self, out, unary_is_float_only(u.op)));
  if (out.numel() == 0) return Status();
  if (unary_is_float_only(u.op)) {
    visit_float_dtype(out.dtype, [&]<typename O>() { unary_typed<O>(u, self, out); });
  } else {
    visit_dtype(out.dtype, [&]<typename O>() {
      if constexpr (!std::is_same_v<O, bool>) unary_typed<O>(u, self, out);
    });
  }
  return Status();
}

template <UnaryOp kOp>
Status unary_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return run_unary(ctx, UnaryArgs{kOp}, tensor_arg(args, 0), out_arg(args, 1));
}

Status clamp_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(check_clamp(ctx, args));
  UnaryArgs u{UnaryOp::kClamp, args[1]->is_none() ? nullptr : args[1],
              args[2]->is_none() ? nullptr : args[2]};
  return run_unary(ctx, u, tensor_arg(args, 0), out_arg(args, 3));
}

Status hardtanh_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return run_unary(ctx, UnaryArgs{UnaryOp::kClamp, args[1], args[2]}, tensor_arg(args, 0),
                   out_arg(args, 3));
}

Status gelu_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const GeluApprox approx, check_gelu(ctx, args));
  UnaryArgs u{approx == GeluApprox::kErf ? UnaryOp::kGeluErf : UnaryOp::kGeluTanh};
  return run_unary(ctx, u, tensor_arg(args, 0), out_arg(args, 2));
}

// ---- The unary math ops (graph/unary_math.def) ------------------------------------------

// out = Op(self) for every element, in the out's dtype: floats compute in float (double for
// float64), integers in int64, bool as bool; predicates read self's own type.
template <typename Op>
Status unary_math_kernel(KernelContext& ctx, std::span<Value*> args) {
  using unary_math::Kind;
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  ETC_RETURN_IF_ERROR(check_unary_math(ctx, Op::kKind, self, out));
  const int64_t n = out.numel();
  if (n == 0) return Status();
  if constexpr (Op::kKind == Kind::kPredicate) {
    auto* o = out.data_as<bool>();
    visit_dtype(self.dtype, [&]<typename T>() {
      const T* x = self.data_as<const T>();
      using C = std::conditional_t<kIsReducedFloat<T>, float, T>;
      parallel_for(n, kElementGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          o[i] = Op::apply(convert<C>(x[i]));
      });
    });
  } else {
    visit_dtype(out.dtype, [&]<typename O>() {
      constexpr bool kFloatOut = std::is_floating_point_v<O> || kIsReducedFloat<O>;
      constexpr bool kBoolOut = std::is_same_v<O, bool>;
      // Dtypes the op refused above (or whose out it never has) are not built.
      if constexpr ((Op::kKind != Kind::kFloat || kFloatOut) &&
                    (Op::kKind != Kind::kNumeric || !kBoolOut) &&
                    (Op::kKind != Kind::kIntegral || !kFloatOut)) {
        ReadAs<O> in(self);  // kFloat: integers and bool converted to the float out
        const O* x = in.data();
        O* o = out.data_as<O>();
        if constexpr (std::is_same_v<O, bool>) {
          parallel_for(n, kElementGrain, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
              o[i] = static_cast<bool>(Op::apply(x[i]));
          });
        } else {
          using C = ComputeT<O>;
          map_loop_heavy(x, o, n, [](C v) { return static_cast<C>(Op::apply(v)); });
        }
      }
    });
  }
  return Status();
}

// ---- The binary math ops (graph/binary_math.def) -----------------------------------------

// Integer division, fmod and remainder by zero are errors, as in ATen: checked on the
// divisor's values before computing. (A tensor exponent may be negative: ATen's integer pow
// gives 1 or -1 for a base of 1 or -1 and 0 otherwise, as binary_math::binary::pow.)
template <typename Fn>
Status check_integer_operand(const KernelContext& ctx, DType compute, const TensorView* other,
                             const Value* scalar) {
  constexpr bool kDivides =
      std::is_same_v<Fn, binary_math::Fmod> || std::is_same_v<Fn, binary_math::Remainder> ||
      std::is_same_v<Fn, binary_math::DivTrunc> || std::is_same_v<Fn, binary_math::DivFloor>;
  if constexpr (!kDivides) {
    return Status();
  } else {
    if (dtype_is_float(compute)) return Status();
    const char* what = "integer division by zero";
    if (scalar != nullptr) return scalar->scalar_as_int() == 0 ? ctx.error(what) : Status();
    std::vector<int64_t> v(static_cast<size_t>(other->numel()));
    convert_elements(other->data, other->dtype, v.data(), DType::kInt64, other->numel());
    for (int64_t x : v)
      if (x == 0) return ctx.error(what);
    return Status();
  }
}

// out = Fn(self, other) elementwise, other a tensor (broadcast) or a number; both operands
// converted to the compute dtype first, then computed in ComputeT (the number stays in that
// precision, ATen's opmath), results stored in the out's dtype. The operands are the first
// two arguments (pow names its second `exponent`).
template <typename Fn, binary_math::Form kForm>
Status binary_math_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const TensorView& self = args[0]->tensor;
  const TensorView* other = kForm == binary_math::Form::kTensor ? &args[1]->tensor : nullptr;
  const Value* scalar = kForm == binary_math::Form::kScalar ? args[1] : nullptr;
  TensorView& out = Args(ctx, args).out();
  ETC_ASSIGN_OR_RETURN(DType compute, check_binary_math(ctx, Fn::kKind, self, other, scalar, out));
  if (out.numel() == 0) return Status();
  ETC_RETURN_IF_ERROR(check_integer_operand<Fn>(ctx, compute, other, scalar));
  visit_dtype(compute, [&]<typename T>() {
    constexpr bool kBoolCompute = std::is_same_v<T, bool>;
    using C = std::conditional_t<kBoolCompute, bool, ComputeT<T>>;
    // Functions that do not take this compute type are refused by check_binary_math.
    if constexpr ((Fn::kKind == binary_math::Kind::kBitwise && !std::is_integral_v<C>) ||
                  (Fn::kKind == binary_math::Kind::kLogical && !kBoolCompute) ||
                  (Fn::kKind == binary_math::Kind::kFloat && !std::is_floating_point_v<C>) ||
                  (Fn::kKind == binary_math::Kind::kArith && kBoolCompute)) {
      return;
    } else {
      ReadAs<T> a(self);
      std::optional<ReadAs<T>> b;
      if (other != nullptr) b.emplace(*other);
      const C y = scalar != nullptr
                      ? (kBoolCompute ? C(scalar->scalar_as_double() != 0) : scalar_to<C>(*scalar))
                      : C();
      const std::vector<int64_t> out_strides = contiguous_strides(out.sizes);
      const std::vector<int64_t> a_strides = broadcast_strides(self.sizes, out.sizes);
      const std::vector<int64_t> b_strides = other != nullptr
                                                 ? broadcast_strides(other->sizes, out.sizes)
                                                 : std::vector<int64_t>(out.sizes.size(), 0);
      auto run = [&]<typename O>() {
        O* o = out.data_as<O>();
        const T* x = a.data();
        const T* z = b ? b->data() : nullptr;
        StridedLoop<3> loop(out.sizes, {out_strides, a_strides, b_strides});
        loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
          for (int64_t i = 0; i < n; ++i) {
            const C xv = convert<C>(x[off[1] + i * st[1]]);
            const C yv = z != nullptr ? convert<C>(z[off[2] + i * st[2]]) : y;
            o[off[0] + i * st[0]] = convert<O>(static_cast<C>(Fn::apply(xv, yv)));
          }
        });
      };
      if constexpr (Fn::kKind == binary_math::Kind::kCompare ||
                    Fn::kKind == binary_math::Kind::kLogical) {
        bool* o = out.data_as<bool>();
        const T* x = a.data();
        const T* z = b ? b->data() : nullptr;
        StridedLoop<3> loop(out.sizes, {out_strides, a_strides, b_strides});
        loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
          for (int64_t i = 0; i < n; ++i) {
            const C xv = convert<C>(x[off[1] + i * st[1]]);
            const C yv = z != nullptr ? convert<C>(z[off[2] + i * st[2]]) : y;
            o[off[0] + i * st[0]] = Fn::apply(xv, yv);
          }
        });
      } else {
        run.template operator()<T>();
      }
    }
  });
  return Status();
}

// div.out_mode / div.Scalar_mode_out: true division without a rounding mode (as div.out),
// else binary_math.def's truncating or flooring division.
template <binary_math::Form kForm>
Status div_mode_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_ASSIGN_OR_RETURN(const DivMode mode, check_div_mode(ctx, args));
  switch (mode) {
    case DivMode::kTrue:
      return binary_math_kernel<binary_math::TrueDiv, kForm>(ctx, args);
    case DivMode::kTrunc:
      return binary_math_kernel<binary_math::DivTrunc, kForm>(ctx, args);
    case DivMode::kFloor:
      return binary_math_kernel<binary_math::DivFloor, kForm>(ctx, args);
  }
  return internal_error("div: unknown rounding mode");
}

// clamp.Tensor_out(self, min?, max?, *, out): maximum with min, then minimum with max, all
// broadcast and computed in the operands' result type (NaN anywhere stays NaN), as ATen.
// ExecuTorch's programs call it; etc's importer writes maximum and minimum.
Status clamp_tensor_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  const TensorView* lo = a.opt_tensor("min");
  const TensorView* hi = a.opt_tensor("max");
  TensorView& out = a.out();
  if (lo == nullptr && hi == nullptr) return ctx.error("at least one of min and max must be given");
  using R = TypeOperand::Rank;
  auto rank = [](const TensorView& t) { return t.rank() > 0 ? R::kDims : R::kZeroDim; };
  const TensorView& b0 = lo != nullptr ? *lo : *hi;
  const TensorView& b1 = hi != nullptr ? *hi : *lo;
  const DType common =
      result_type({{self.dtype, rank(self)}, {b0.dtype, rank(b0)}, {b1.dtype, rank(b1)}});
  if (common == DType::kBool)
    return unsupported_dtype(ctx, "the result", common, "a numeric dtype");
  std::optional<std::vector<int64_t>> sizes = broadcast_shapes(self.sizes, b0.sizes);
  if (sizes) sizes = broadcast_shapes(*sizes, b1.sizes);
  if (!sizes) return ctx.error("self, min and max cannot be broadcast together");
  ETC_RETURN_IF_ERROR(check_out(ctx, out, *sizes, common));
  if (out.numel() == 0) return Status();
  visit_dtype(common, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = ComputeT<T>;
      ReadAs<T> x(self), l(b0), h(b1);
      const std::vector<int64_t> so = contiguous_strides(out.sizes);
      const std::vector<int64_t> sx = broadcast_strides(self.sizes, out.sizes);
      const std::vector<int64_t> sl = broadcast_strides(b0.sizes, out.sizes);
      const std::vector<int64_t> sh = broadcast_strides(b1.sizes, out.sizes);
      T* o = out.data_as<T>();
      StridedLoop<4> loop(out.sizes, {so, sx, sl, sh});
      loop.for_each_run([&](int64_t n, const auto& off, const auto& st) {
        for (int64_t i = 0; i < n; ++i) {
          C v = convert<C>(x.data()[off[1] + i * st[1]]);
          if (lo != nullptr)
            v = binary_math::binary::maximum(v, convert<C>(l.data()[off[2] + i * st[2]]));
          if (hi != nullptr)
            v = binary_math::binary::minimum(v, convert<C>(h.data()[off[3] + i * st[3]]));
          o[off[0] + i * st[0]] = convert<T>(v);
        }
      });
    }
  });
  return Status();
}

// leaky_relu.out(self, negative_slope, *, out) and elu.out(self, alpha, scale, input_scale,
// *, out), ATen's formulas in the float compute type (etc's importer writes them with
// comparisons and where; ExecuTorch's programs call these).
template <bool kElu>
Status activation_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const TensorView& self = a.tensor("self");
  TensorView& out = a.out();
  if (!dtype_is_float(self.dtype))
    return unsupported_dtype(ctx, "self", self.dtype, "a floating-point dtype");
  ETC_RETURN_IF_ERROR(check_out(ctx, out, self.sizes, self.dtype));
  visit_float_dtype(self.dtype, [&]<typename T>() {
    using C = ComputeT<T>;
    const T* x = self.data_as<const T>();
    T* o = out.data_as<T>();
    if constexpr (kElu) {
      const C negcoef = scalar_to<C>(a["alpha"]) * scalar_to<C>(a["scale"]);
      const C poscoef = scalar_to<C>(a["scale"]), inscale = scalar_to<C>(a["input_scale"]);
      for (int64_t i = 0; i < out.numel(); ++i) {
        const C v = convert<C>(x[i]);
        o[i] = convert<T>(v <= C(0) ? std::expm1(v * inscale) * negcoef : v * poscoef);
      }
    } else {
      const C slope = scalar_to<C>(a["negative_slope"]);
      for (int64_t i = 0; i < out.numel(); ++i) {
        const C v = convert<C>(x[i]);
        o[i] = convert<T>(v > C(0) ? v : v * slope);
      }
    }
  });
  return Status();
}

// pow.Scalar_out(self, exponent, *, out): a number to tensor powers, in the result type of the
// number and the exponent (ExecuTorch's programs call it; etc's importer makes the number a
// 0-d constant of pow.Tensor_Tensor).
Status pow_scalar_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  const Args a(ctx, args);
  const Value& base = a["self"];
  const TensorView& exponent = a.tensor("exponent");
  TensorView& out = a.out();
  using R = TypeOperand::Rank;
  const DType number = base.kind == Value::Kind::kDouble ? DType::kFloat32
                       : base.kind == Value::Kind::kBool ? DType::kBool
                                                         : DType::kInt64;
  const DType common = result_type(
      {{exponent.dtype, exponent.rank() > 0 ? R::kDims : R::kZeroDim}, {number, R::kNumber}});
  if (common == DType::kBool)
    return unsupported_dtype(ctx, "the result", common, "a numeric dtype");
  ETC_RETURN_IF_ERROR(check_out(ctx, out, exponent.sizes, common));
  if (out.numel() == 0) return Status();
  ETC_RETURN_IF_ERROR(check_integer_operand<binary_math::Pow>(ctx, common, &exponent, nullptr));
  visit_dtype(common, [&]<typename T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      using C = ComputeT<T>;
      const C b = scalar_to<C>(base);
      ReadAs<T> e(exponent);
      T* o = out.data_as<T>();
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = convert<T>(binary_math::binary::pow(b, convert<C>(e.data()[i])));
    }
  });
  return Status();
}

}  // namespace

Status register_elementwise_kernels(OperatorRegistry& r) {
#define ETC_BINARY_FN(fn, kind, expr)
#define ETC_BINARY_OP(op, fn, form, onnx) \
  ETC_RETURN_IF_ERROR(                    \
      r.add(OpKind::op, binary_math_kernel<binary_math::fn, binary_math::Form::form>));
#include "graph/binary_math.def"
#undef ETC_BINARY_OP
#undef ETC_BINARY_FN
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivTensorMode, div_mode_kernel<binary_math::Form::kTensor>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivScalarMode, div_mode_kernel<binary_math::Form::kScalar>));
  // Out variants ExecuTorch's programs call that etc's importer writes with other ops.
  ETC_RETURN_IF_ERROR(r.add("aten::clamp.Tensor_out",
                            "clamp.Tensor_out(Tensor self, Tensor? min=None, Tensor? max=None, *, "
                            "Tensor(a!) out) -> Tensor(a!)",
                            clamp_tensor_kernel));
  ETC_RETURN_IF_ERROR(r.add("aten::leaky_relu.out",
                            "leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) "
                            "out) -> Tensor(a!)",
                            activation_kernel<false>));
  ETC_RETURN_IF_ERROR(r.add("aten::elu.out",
                            "elu.out(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar "
                            "input_scale=1, *, Tensor(a!) out) -> Tensor(a!)",
                            activation_kernel<true>));
  ETC_RETURN_IF_ERROR(
      r.add("aten::pow.Scalar_out",
            "pow.Scalar_out(Scalar self, Tensor exponent, *, Tensor(a!) out) -> Tensor(a!)",
            pow_scalar_kernel));
#define ETC_UNARY_MATH(op, kind, onnx, expr) \
  ETC_RETURN_IF_ERROR(r.add(OpKind::op, unary_math_kernel<unary_math::op>));
#include "graph/unary_math.def"
#undef ETC_UNARY_MATH
  ETC_RETURN_IF_ERROR(r.add(OpKind::AddTensor, add_tensor));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SubTensor, sub_tensor));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MulTensor, mul_tensor));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivTensor, div_tensor));
  ETC_RETURN_IF_ERROR(r.add(OpKind::AddScalar, add_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::SubScalar, sub_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::MulScalar, mul_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::DivScalar, div_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::PowTensorScalar, pow_tensor_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::WhereSelf, where_self));
  ETC_RETURN_IF_ERROR(r.add(OpKind::EqScalar, eq_scalar));
  ETC_RETURN_IF_ERROR(r.add(OpKind::LogicalNot, logical_not));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Neg, unary_kernel<UnaryOp::kNeg>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Relu, unary_kernel<UnaryOp::kRelu>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Clamp, clamp_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Hardtanh, hardtanh_kernel));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Exp, unary_kernel<UnaryOp::kExp>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Log, unary_kernel<UnaryOp::kLog>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Rsqrt, unary_kernel<UnaryOp::kRsqrt>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Erf, unary_kernel<UnaryOp::kErf>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sigmoid, unary_kernel<UnaryOp::kSigmoid>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Sqrt, unary_kernel<UnaryOp::kSqrt>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Tanh, unary_kernel<UnaryOp::kTanh>));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Gelu, gelu_kernel));
  // IR-only activations: ExecuTorch's portable library has no out-variants for them.
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Hardsigmoid, unary_kernel<UnaryOp::kHardsigmoid>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(
      r.add(OpKind::Hardswish, unary_kernel<UnaryOp::kHardswish>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Silu, unary_kernel<UnaryOp::kSilu>, KernelForms::kFunctional));
  return Status();
}

}  // namespace etc::rt::kernels
