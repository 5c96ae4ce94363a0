// Conversions between float and the 16-bit float formats (IEEE binary16 and bfloat16),
// round-to-nearest-even, NaN preserved as a quiet NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace etc {

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t mag = x & 0x7fffffff;
  if (mag > 0x7f800000) return sign | 0x7e00;   // NaN
  if (mag >= 0x477ff000) return sign | 0x7c00;  // rounds to or beyond infinity
  if (mag < 0x38800000) {                       // half subnormal or zero: units of 2^-24
    float scaled = std::fabs(f) * 16777216.0f;  // exact: a power-of-two scale
    return sign |
           static_cast<uint16_t>(std::nearbyint(scaled));  // 1024 encodes the smallest normal
  }
  uint32_t h = (mag - 0x38000000) >> 13;
  uint32_t rem = mag & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return sign | static_cast<uint16_t>(h);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t man = h & 0x3ff;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);
    return sign ? -f : f;
  }
  uint32_t bits =
      exp == 31 ? (sign | 0x7f800000 | (man << 13)) : (sign | ((exp + 112) << 23) | (man << 13));
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bfloat16(float f) {
  if (std::isnan(f)) return std::signbit(f) ? 0xffc0 : 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

inline float bfloat16_to_float(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace etc
