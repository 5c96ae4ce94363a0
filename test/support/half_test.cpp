#include "support/half.h"

#include <catch2/catch.hpp>
#include <limits>

namespace etc {
namespace {

TEST_CASE("float16 conversion matches IEEE binary16 encodings") {
  CHECK(float_to_half(0.0f) == 0x0000);
  CHECK(float_to_half(-0.0f) == 0x8000);
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);  // largest finite
  CHECK(float_to_half(65520.0f) == 0x7c00);  // rounds to infinity
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK((float_to_half(std::numeric_limits<float>::quiet_NaN()) & 0x7e00) == 0x7e00);
  CHECK(float_to_half(6.103515625e-05f) == 0x0400);        // smallest normal
  CHECK(float_to_half(5.960464477539063e-08f) == 0x0001);  // smallest subnormal
  CHECK(float_to_half(1.0f + 1.0f / 2048) == 0x3c00);      // tie rounds to even
  CHECK(float_to_half(1.0f + 3.0f / 2048) == 0x3c02);      // tie rounds to even (up)
}

TEST_CASE("float16 round-trips every finite half value") {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf/nan
    float f = half_to_float(static_cast<uint16_t>(h));
    REQUIRE(float_to_half(f) == h);
  }
}

TEST_CASE("bfloat16 conversion rounds to nearest even") {
  CHECK(float_to_bfloat16(1.0f) == 0x3f80);
  CHECK(bfloat16_to_float(0x3f80) == 1.0f);
  CHECK(float_to_bfloat16(1.00390625f) == 0x3f80);  // tie, stays even
  CHECK(float_to_bfloat16(1.01171875f) == 0x3f82);  // tie, rounds up to even
  CHECK((float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()) & 0x7fc0) == 0x7fc0);
}

}  // namespace
}  // namespace etc
