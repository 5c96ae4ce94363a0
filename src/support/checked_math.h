// Overflow-checked integer arithmetic for sizes and byte counts that come from user input.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace etc {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Product of non-negative dims; nullopt on overflow of int64.
inline std::optional<int64_t> checked_numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    auto r = checked_mul(n, d);
    if (!r) return std::nullopt;
    n = *r;
  }
  return n;
}

// One spatial dim of a sliding window (convolution, pooling) as ATen computes it, every step
// checked: kernel sizes, strides, paddings and dilations come from a user's program. Callers
// have checked in, pad >= 0 and stride, dilation >= 1.
struct SlidingWindow {
  int64_t span = 0;    // the window's extent, dilation * (k - 1) + 1
  int64_t padded = 0;  // in + 2 * pad
  int64_t count = 0;   // windows that fit: 0 when span > padded (the caller says so)
};

// nullopt when a step leaves int64. ceil_mode counts a last partial window, except one that
// starts inside the right padding (ATen's pooling_output_shape).
inline std::optional<SlidingWindow> sliding_window(int64_t in, int64_t k, int64_t pad,
                                                   int64_t stride, int64_t dilation,
                                                   bool ceil_mode = false) {
  const std::optional<int64_t> reach = checked_mul(dilation, k - 1);
  const std::optional<int64_t> span = reach ? checked_add(*reach, 1) : std::nullopt;
  const std::optional<int64_t> twice_pad = checked_mul(pad, 2);
  const std::optional<int64_t> padded = twice_pad ? checked_add(in, *twice_pad) : std::nullopt;
  if (!span || !padded) return std::nullopt;
  SlidingWindow w{*span, *padded, 0};
  const std::optional<int64_t> room = checked_sub(w.padded, w.span);
  if (!room) return std::nullopt;
  if (*room < 0) return w;
  w.count = *room / stride + 1;
  if (ceil_mode) {
    if (*room % stride != 0) ++w.count;
    // A start past int64 certainly lies beyond in + pad.
    const std::optional<int64_t> last_start = checked_mul(w.count - 1, stride);
    if (!last_start || *last_start >= in + pad) --w.count;
  }
  return w;
}

// A transposed convolution's output extent, (in - 1) * stride - 2 * pad + dilation * (k - 1) +
// output_padding + 1, nullopt when a step leaves int64.
inline std::optional<int64_t> transposed_window_extent(int64_t in, int64_t k, int64_t pad,
                                                       int64_t stride, int64_t dilation,
                                                       int64_t output_padding) {
  std::optional<int64_t> r = checked_mul(in - 1, stride);
  const std::optional<int64_t> twice_pad = checked_mul(pad, 2);
  const std::optional<int64_t> reach = checked_mul(dilation, k - 1);
  if (!r || !twice_pad || !reach) return std::nullopt;
  r = checked_sub(*r, *twice_pad);
  if (r) r = checked_add(*r, *reach);
  if (r) r = checked_add(*r, output_padding);
  if (r) r = checked_add(*r, 1);
  return r;
}

}  // namespace etc
