#include "support/checked_math.h"

#include <catch2/catch.hpp>
#include <limits>
#include <random>

namespace etc {
namespace {

__extension__ using Wide = __int128;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

bool fits(Wide v) {
  return v >= kMin && v <= kMax;
}

// The window's dim computed in 128 bits, nullopt where a step leaves int64.
std::optional<SlidingWindow> wide_window(int64_t in, int64_t k, int64_t pad, int64_t stride,
                                         int64_t dilation, bool ceil_mode) {
  const Wide reach = Wide{dilation} * (k - 1), twice_pad = Wide{pad} * 2;
  const Wide span = reach + 1, padded = in + twice_pad;
  if (!fits(reach) || !fits(twice_pad) || !fits(span) || !fits(padded) || !fits(padded - span))
    return std::nullopt;
  SlidingWindow w{static_cast<int64_t>(span), static_cast<int64_t>(padded), 0};
  const Wide room = padded - span;
  if (room < 0) return w;
  Wide count = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  if (ceil_mode && (count - 1) * stride >= Wide{in} + pad) --count;
  w.count = static_cast<int64_t>(count);
  return w;
}

std::optional<int64_t> wide_transposed(int64_t in, int64_t k, int64_t pad, int64_t stride,
                                       int64_t dilation, int64_t output_padding) {
  const Wide scaled = Wide{in - 1} * stride, twice_pad = Wide{pad} * 2;
  const Wide reach = Wide{dilation} * (k - 1);
  if (!fits(scaled) || !fits(twice_pad) || !fits(reach)) return std::nullopt;
  Wide r = scaled - twice_pad;
  if (!fits(r)) return std::nullopt;
  for (Wide term : {reach, Wide{output_padding}, Wide{1}}) {
    r += term;
    if (!fits(r)) return std::nullopt;
  }
  return static_cast<int64_t>(r);
}

TEST_CASE("sliding windows count as ATen's pooling_output_shape") {
  const auto count = [](int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                        bool ceil_mode) {
    return sliding_window(in, k, pad, stride, dil, ceil_mode).value().count;
  };
  CHECK(count(7, 2, 0, 2, 1, false) == 3);
  CHECK(count(7, 2, 0, 2, 1, true) == 4);    // a last partial window
  CHECK(count(6, 3, 1, 2, 1, true) == 4);    // a last window starting inside the input
  CHECK(count(5, 2, 1, 2, 1, true) == 3);    // one starting in the right padding dropped
  CHECK(count(10, 3, 0, 1, 2, false) == 6);  // extent 5
  CHECK(count(5, 3, 1, 2, 1, false) == 3);
  const SlidingWindow w = sliding_window(4, 5, 0, 1, 1).value();
  CHECK(w.count == 0);
  CHECK(w.span == 5);
  CHECK(w.padded == 4);
  CHECK(transposed_window_extent(10, 2, 0, 2, 1, 0) == 20);
  CHECK(transposed_window_extent(5, 3, 1, 2, 1, 1) == 10);
}

TEST_CASE("sliding windows past int64 are nullopt, never wrapped") {
  const int64_t big = int64_t{1} << 62;
  CHECK_FALSE(sliding_window(5, 3, 5800203835558658049, 1, 1));  // fuzz_pte's padding
  CHECK_FALSE(sliding_window(5, 3, 0, 1, big));                  // dilation * (k - 1)
  CHECK_FALSE(sliding_window(kMax, 1, 1, 1, 1));                 // in + 2 * pad
  CHECK(sliding_window(big, 1, big / 4, 1, 1).value().count == big + big / 2);
  CHECK_FALSE(transposed_window_extent(3, 3, 0, big, 1, 0));
  CHECK_FALSE(transposed_window_extent(3, 3, 0, 1, 1, kMax));
  // A ceil-mode window's start past int64 starts past the input: dropped, not wrapped.
  CHECK(sliding_window(kMax - 10, 1, 0, kMax / 2 + 1, 1, true).value().count == 2);
}

TEST_CASE("sliding windows agree with 128-bit arithmetic at int64's ends") {
  std::mt19937_64 rng(7);
  const int64_t edges[] = {0,
                           1,
                           2,
                           3,
                           7,
                           1 << 20,
                           int64_t{1} << 31,
                           int64_t{1} << 61,
                           int64_t{1} << 62,
                           (int64_t{1} << 62) + 1,
                           kMax / 2,
                           kMax - 1,
                           kMax};
  auto pick = [&](int64_t lo) {
    const uint64_t r = rng();
    int64_t v = r % 3 == 0   ? static_cast<int64_t>(rng() >> 1)
                : r % 3 == 1 ? static_cast<int64_t>(rng() % 64)
                             : edges[rng() % 13];
    return v < lo ? lo : v;
  };
  size_t overflowed = 0, counted = 0;
  for (int i = 0; i < 200000; ++i) {
    const int64_t in = pick(0), k = pick(0), pad = pick(0), stride = pick(1), dil = pick(1),
                  opad = pick(0);
    const bool ceil_mode = (i & 1) != 0;
    INFO(in << " " << k << " " << pad << " " << stride << " " << dil << " " << ceil_mode);
    const std::optional<SlidingWindow> got = sliding_window(in, k, pad, stride, dil, ceil_mode);
    const std::optional<SlidingWindow> want = wide_window(in, k, pad, stride, dil, ceil_mode);
    REQUIRE(got.has_value() == want.has_value());
    if (got) {
      REQUIRE(got->span == want->span);
      REQUIRE(got->padded == want->padded);
      REQUIRE(got->count == want->count);
      counted += got->count > 0 ? 1 : 0;
    } else {
      ++overflowed;
    }
    REQUIRE(transposed_window_extent(in, k, pad, stride, dil, opad) ==
            wide_transposed(in, k, pad, stride, dil, opad));
  }
  CHECK(overflowed > 10000);
  CHECK(counted > 10000);
}

}  // namespace
}  // namespace etc
