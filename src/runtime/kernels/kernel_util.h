// Helpers shared by the CPU kernels (private to src/runtime/kernels): dtype dispatch and
// element conversion, temporary buffers, iteration over broadcast / strided index spaces.
// The argument checks, which the CUDA delegate's kernels share, are in op_checks.h.
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
#include "runtime/kernels/op_checks.h"
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

// exp(z) for z <= 0 (a softmax's x - max, a sigmoid's -|x|, erf's -x^2), -inf or NaN, in
// float, written so that a loop over it vectorises (libm's expf is a call per element; the
// select needs -fno-trapping-math, set for this library): z = n ln2 + r with |r| <= ln2/2,
// n = round(z / ln2) read off the bits of z log2(e) + 1.5 * 2^23 + 127 (shifted into the
// exponent field they are 2^n, n in [-126, 0]: no float-to-int conversion, no clamping, one
// scale), exp(r) - 1 by r + r^2 p(r) (Cephes' expf coefficients), e = s + s (r + r^2 p(r)).
// Relative error within 2e-7 (tested); 0 below -87.34, where exp(z) is below FLT_MIN (no
// denormal results), 0 at -inf, NaN for NaN. Where a build fuses multiply-adds it fuses
// these: the softmax rows build it without FMA, with an AVX-512 twin that rounds each step
// (reduce_norm.cpp).
// Its constants, shared with its AVX-512 twin.
inline constexpr float kExpLog2e = 1.44269504088896341f;
inline constexpr float kExpMagic = 12583039.0f;  // 1.5 * 2^23 + 127
inline constexpr float kExpLn2Hi = 0.693359375f, kExpLn2Lo = -2.12194440e-4f;
inline constexpr float kExpPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                      4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
inline constexpr float kExpCutoff = -87.33654f;  // ln(FLT_MIN)
inline float fast_exp_nonpositive(float z) {
  const float t = z * kExpLog2e + kExpMagic;
  uint32_t t_bits;
  std::memcpy(&t_bits, &t, 4);
  const uint32_t s_bits = t_bits << 23;  // (n + 127) << 23: the bits above fall off
  float s;
  std::memcpy(&s, &s_bits, 4);
  const float fn = t - kExpMagic;
  const float r = (z - fn * kExpLn2Hi) - fn * kExpLn2Lo;
  float p = kExpPoly[0];
  p = p * r + kExpPoly[1];
  p = p * r + kExpPoly[2];
  p = p * r + kExpPoly[3];
  p = p * r + kExpPoly[4];
  p = p * r + kExpPoly[5];
  const float y = p * (r * r) + r;
  const float e = y * s + s;
  return z < kExpCutoff ? 0.0f : e;  // below ln(FLT_MIN): 2^n would not be a normal float
}

// sigmoid(x) = 1 / (1 + exp(-x)) in float, vectorisable (the sigmoid of SiLU layers was a
// fifth of efficientnet_b0's time with a general exp of twice the steps): with z = -|x|,
// e = fast_exp_nonpositive(z), f = e / (1 + e) = sigmoid(-|x|), and 1 - f for x > 0.
// Relative error at most 1.8e-7 (tested over every 389th float); 0 below -87.34 (no denormal
// results); 1 at +inf, 0 at -inf, NaN for NaN.
inline float fast_sigmoidf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits |= 0x80000000u;
  float z;
  std::memcpy(&z, &bits, 4);
  const float e = fast_exp_nonpositive(z);
  const float f = e / (1.0f + e);
  return x > 0.0f ? 1.0f - f : f;
}

// erf(x) in float, vectorisable as fast_exp_nonpositive (GELU's erf was 30% of all-MiniLM-L6-v2's
// time as a libm call per element): Abramowitz and Stegun 7.1.26, erf(|x|) = 1 - t (a1 + t (a2 +
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
  const float m = 1.0f - poly * fast_exp_nonpositive(-a * a);
  uint32_t out;
  std::memcpy(&out, &m, 4);
  out |= sign;
  float r;
  std::memcpy(&r, &out, 4);
  return r;
}

// gelu(x) with approximate 'none', as the gelu kernel computes float32 (and every epilogue that
// must give its bits): 0.5 x (1 + erf(x / sqrt(2))). NaN in, NaN out (fast_erff alone would
// not keep it).
inline float gelu_erff(float x) {
  return 0.5f * x * (1.0f + fast_erff(x * 0.70710678118654752440f));
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

// rows x len floats, each row replaced by its softmax exactly as the float _softmax kernel
// computes it over a last dim (rows split across threads).
void softmax_rows_in_place(float* x, int64_t rows, int64_t len);

// o[i] = 1 / (1 + exp(-x[i])) for i < n on this thread: the float sigmoid kernel's loop
// (fast_sigmoidf, built per ISA), for epilogues that must give its bits.
void sigmoid_floats(const float* x, float* o, int64_t n);
// o[i] = gelu(x[i]) (approximate 'none') as the gelu kernel computes float32, on this thread.
void gelu_erf_floats(const float* x, float* o, int64_t n);

// Runs `e` on flat elements [begin, end): the same arithmetic, element for element, as the
// relu/hardtanh/clamp and add/sub/mul/div kernels it stands for (alpha 1).
void apply_epilogue(const Epilogue& e, int64_t begin, int64_t end);
// The same over the whole out (n elements), split across threads: for kernels that cannot run
// it range by range as they go (an out of the chain lies over their input, or their ranges are
// not the out's).
void apply_epilogue_whole(const Epilogue& e, int64_t n);

// An epilogue run on rectangles of a kernel's out (a GEMM micro-tile, a strip of a first
// layer) right after the kernel wrote them, while they are in L1: for chains that are an
// Epilogue::Activation, each element through the chain in registers. What it saves is the
// chain's passes over the out through L2 (mobilenet_v3_small's hardswish: four ops over 16 x
// 112 x 112 floats after its first layer).
struct GemmInit;

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
  // Gives this chain to a GEMM as its tile work (init's tile_done, tile_ctx and tile_scratch):
  // run on each tile of C as the GEMM finishes it. This object must outlive the GEMM.
  void run_on_tiles_of(GemmInit& init) const;

 private:
  using Fn = void (*)(const TileEpilogue&, const float* src, int64_t src_ld, int64_t at, int64_t ld,
                      int64_t rows, int64_t cols);
  friend struct TileEpilogueAccess;
  friend void apply_epilogue(const Epilogue& e, int64_t begin, int64_t end);
  // The same over the whole out (n elements), split across threads: for kernels that cannot run
  // it range by range as they go (an out of the chain lies over their input, or their ranges are
  // not the out's).
  void apply_epilogue_whole(const Epilogue& e, int64_t n);
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
// The same for a channels-last [N, H, W, C] tensor x: acc[n * C + c] = the sum, in double, of
// channel c of image n over its `positions` positions, in float_row_sums' order (the bits of
// the same tensor's planes summed NCHW).
void channels_last_sums(const float* x, int64_t batch, int64_t positions, int64_t channels,
                        double* acc);

// Whether s holds one value per channel of an [N, C, H, W] tensor of sizes x: [N or 1, C, 1,
// 1] or [C, 1, 1], the same bytes whether that tensor is held NCHW or channels-last (a
// squeeze-and-excitation block's scales, convnext's layer scale).
inline bool is_channel_scale(const TensorView& s, std::span<const int64_t> x) {
  if (x.size() != 4) return false;
  if (s.rank() == 3) return s.sizes[0] == x[1] && s.sizes[1] == 1 && s.sizes[2] == 1;
  return s.rank() == 4 && (s.sizes[0] == x[0] || s.sizes[0] == 1) && s.sizes[1] == x[1] &&
         s.sizes[2] == 1 && s.sizes[3] == 1;
}

// ---- Registration --------------------------------------------------------------------

// Each file's registration function; register_cpu_kernels calls them all.
Status register_elementwise_kernels(OperatorRegistry& registry);
Status register_matmul_kernels(OperatorRegistry& registry);
Status register_int_mm_kernels(OperatorRegistry& registry);
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

}  // namespace etc::rt::kernels
