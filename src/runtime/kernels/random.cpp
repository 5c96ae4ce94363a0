// Random numbers: rand.out (uniform in [0, 1)), randn.out (standard normal), randperm.out (a
// permutation of 0..n-1). Each instruction owns a generator (its KernelContext state slot)
// seeded from its position in the method, so a program's numbers differ from call to call and
// from instruction to instruction, and repeat in every method loaded from it (the CPU
// reference of `etc run --verify` draws the same numbers). Kernels called without a slot
// (tests) share one process-wide generator.
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>

#include "graph/dtype.h"
#include "runtime/kernels/kernel_util.h"

namespace etc::rt::kernels {
namespace {

struct RandomState final : KernelState {
  explicit RandomState(uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
};

// SplitMix64 of `x`: well-spread seeds for consecutive instructions.
uint64_t seed_of(uint64_t x) {
  uint64_t z = (x + 1) * 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Runs `draw` with the instruction's generator (made on first use), or the shared one.
template <typename F>
void with_generator(KernelContext& ctx, F&& draw) {
  if (ctx.state != nullptr) {
    auto* s = dynamic_cast<RandomState*>(ctx.state->get());
    if (s == nullptr) {
      auto fresh = std::make_unique<RandomState>(seed_of(ctx.instruction));
      s = fresh.get();
      *ctx.state = std::move(fresh);
    }
    draw(s->rng);
    return;
  }
  static std::mutex mutex;
  static std::mt19937_64 shared(seed_of(~uint64_t{0}));
  std::lock_guard<std::mutex> lock(mutex);
  draw(shared);
}

// Bits of precision of the float dtype's significand (values k * 2^-bits are exact in it).
int mantissa_bits(DType t) {
  switch (t) {
    case DType::kFloat16:
      return 11;
    case DType::kBFloat16:
      return 8;
    case DType::kFloat64:
      return 53;
    default:
      return 24;
  }
}

// A uniform value in [0, 1) with `bits` random bits: exact in any float dtype of at least
// that precision, so rounding to the dtype never gives 1.
double uniform(std::mt19937_64& rng, int bits) {
  return std::ldexp(static_cast<double>(rng() >> (64 - bits)), -bits);
}

Status check_float_out(const KernelContext& ctx, const TensorView& out) {
  if (!dtype_is_float(out.dtype)) {
    return ctx.error("out must be a floating tensor, got " + std::string(dtype_name(out.dtype)));
  }
  return Status();
}

// rand (uniform in [0, 1)) or randn (standard normal) into `out` of `size`.
Status fill_random(KernelContext& ctx, const std::vector<int64_t>& size, bool normal,
                   TensorView& out) {
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, size));
  ETC_RETURN_IF_ERROR(check_float_out(ctx, out));
  const int64_t elem = dtype_size(out.dtype);
  auto* o = static_cast<uint8_t*>(out.data);
  if (!normal) {
    const int bits = mantissa_bits(out.dtype);
    with_generator(ctx, [&](std::mt19937_64& rng) {
      for (int64_t i = 0; i < out.numel(); ++i)
        store_float_as(out.dtype, uniform(rng, bits), o + i * elem);
    });
    return Status();
  }
  with_generator(ctx, [&](std::mt19937_64& rng) {
    // Box-Muller, one pair per two values; u1 in (0, 1] keeps the logarithm finite.
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    for (int64_t i = 0; i < out.numel(); i += 2) {
      const double u1 = 1.0 - uniform(rng, 53), u2 = uniform(rng, 53);
      const double r = std::sqrt(-2.0 * std::log(u1));
      store_float_as(out.dtype, r * std::cos(kTwoPi * u2), o + i * elem);
      if (i + 1 < out.numel())
        store_float_as(out.dtype, r * std::sin(kTwoPi * u2), o + (i + 1) * elem);
    }
  });
  return Status();
}

// A random permutation of 0..n-1 into `out`.
Status fill_randperm(KernelContext& ctx, int64_t n, TensorView& out) {
  if (n < 0) return ctx.error("n must be non-negative, got " + std::to_string(n));
  ETC_RETURN_IF_ERROR(check_out_shape(ctx, out, std::vector<int64_t>{n}));
  if (out.dtype == DType::kBool && n > 2)
    return ctx.error("a bool out cannot hold 0.." + std::to_string(n - 1));
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  with_generator(ctx, [&](std::mt19937_64& rng) {
    // Fisher-Yates, with an unbiased draw of j in [0, i].
    for (int64_t i = n - 1; i > 0; --i) {
      std::uniform_int_distribution<int64_t> pick(0, i);
      std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(pick(rng))]);
    }
  });
  visit_dtype(out.dtype, [&]<typename T>() {
    T* o = out.data_as<T>();
    for (int64_t i = 0; i < n; ++i)
      o[i] = convert<T>(perm[static_cast<size_t>(i)]);
  });
  return Status();
}

// Out forms: (size or n, out).
template <bool kNormal>
Status rand_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill_random(ctx, args[0]->ints, kNormal, out_arg(args, 1));
}

Status randperm_out_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  return fill_randperm(ctx, args[0]->i, out_arg(args, 1));
}

// The IR's functional forms (size or n, dtype, layout, device, pin_memory, out): the out
// carries the dtype the export chose.
Status check_dtype_arg(const KernelContext& ctx, std::span<Value*> args) {
  const std::optional<DType> d = opt_dtype_arg(args, 1);
  if (d && *d != out_arg(args, 5).dtype) {
    return ctx.error("out is " + std::string(dtype_name(out_arg(args, 5).dtype)) + ", dtype says " +
                     std::string(dtype_name(*d)));
  }
  return Status();
}

template <bool kNormal>
Status rand_default_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(check_dtype_arg(ctx, args));
  return fill_random(ctx, args[0]->ints, kNormal, out_arg(args, 5));
}

Status randperm_default_kernel(KernelContext& ctx, std::span<Value*> args) {
  ETC_RETURN_IF_ERROR(check_args(ctx, args));
  ETC_RETURN_IF_ERROR(check_dtype_arg(ctx, args));
  return fill_randperm(ctx, args[0]->i, out_arg(args, 5));
}

}  // namespace

Status register_random_kernels(OperatorRegistry& r) {
  ETC_RETURN_IF_ERROR(r.add(OpKind::Rand, rand_out_kernel<false>, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Randn, rand_out_kernel<true>, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Randperm, randperm_out_kernel, KernelForms::kOut));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Rand, rand_default_kernel<false>, KernelForms::kFunctional));
  ETC_RETURN_IF_ERROR(r.add(OpKind::Randn, rand_default_kernel<true>, KernelForms::kFunctional));
  return r.add(OpKind::Randperm, randperm_default_kernel, KernelForms::kFunctional);
}

}  // namespace etc::rt::kernels
