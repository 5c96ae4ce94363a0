#include "graph/dtype.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace etc {
namespace {

TEST_CASE("dtypes map to ExecuTorch ScalarType numbers") {
  CHECK(dtype_to_scalar_type(DType::kUInt8) == 0);
  CHECK(dtype_to_scalar_type(DType::kInt8) == 1);
  CHECK(dtype_to_scalar_type(DType::kInt16) == 2);
  CHECK(dtype_to_scalar_type(DType::kInt32) == 3);
  CHECK(dtype_to_scalar_type(DType::kInt64) == 4);
  CHECK(dtype_to_scalar_type(DType::kFloat16) == 5);
  CHECK(dtype_to_scalar_type(DType::kFloat32) == 6);
  CHECK(dtype_to_scalar_type(DType::kFloat64) == 7);
  CHECK(dtype_to_scalar_type(DType::kBool) == 11);
  CHECK(dtype_to_scalar_type(DType::kBFloat16) == 15);
  CHECK(dtype_from_scalar_type(15) == DType::kBFloat16);
  CHECK_FALSE(dtype_from_scalar_type(8).has_value());  // complex: not supported
}

TEST_CASE("dtype names, sizes and safetensors names round-trip") {
  for (DType t :
       {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kFloat16,
        DType::kFloat32, DType::kFloat64, DType::kBool, DType::kBFloat16}) {
    CHECK(dtype_from_name(dtype_name(t)) == t);
    CHECK(dtype_from_safetensors(dtype_safetensors_name(t)) == t);
  }
  CHECK(dtype_size(DType::kBFloat16) == 2);
  CHECK(dtype_size(DType::kInt64) == 8);
  CHECK(dtype_safetensors_name(DType::kFloat32) == "F32");
  CHECK_FALSE(dtype_from_name("float").has_value());
  CHECK(dtype_names() ==
        "uint8, int8, int16, int32, int64, float16, float32, float64, bool, bfloat16");
}

TEST_CASE("promote_types follows ATen") {
  CHECK(promote_types(DType::kBool, DType::kInt8) == DType::kInt8);
  CHECK(promote_types(DType::kUInt8, DType::kInt8) == DType::kInt16);
  CHECK(promote_types(DType::kUInt8, DType::kInt32) == DType::kInt32);
  CHECK(promote_types(DType::kInt16, DType::kInt64) == DType::kInt64);
  CHECK(promote_types(DType::kInt64, DType::kFloat16) == DType::kFloat16);
  CHECK(promote_types(DType::kFloat16, DType::kBFloat16) == DType::kFloat32);
  CHECK(promote_types(DType::kBFloat16, DType::kFloat64) == DType::kFloat64);
  CHECK(promote_types(DType::kFloat32, DType::kFloat16) == DType::kFloat32);
  CHECK(promote_types(DType::kBool, DType::kBool) == DType::kBool);
}

// One element of `to` converted from an int64 / a double, read back as int64 / double.
int64_t int_via(DType to, int64_t v) {
  uint8_t buf[8] = {};
  store_int_as(to, v, buf);
  return load_as_int64(to, buf);
}
int64_t cast_to_int(DType from, double v, DType to) {
  uint8_t in[8] = {}, out[8] = {};
  store_float_as(from, v, in);
  convert_element(from, in, to, out);
  return load_as_int64(to, out);
}

TEST_CASE("elements load and store as int64 with C++ cast and ATen cast semantics") {
  // Integers wrap as a cast would; bool is != 0.
  CHECK(int_via(DType::kInt8, 200) == -56);
  CHECK(int_via(DType::kUInt8, -1) == 255);
  CHECK(int_via(DType::kInt16, 70000) == 4464);
  CHECK(int_via(DType::kInt32, int64_t{1} << 33) == 0);
  CHECK(int_via(DType::kInt64, INT64_MIN) == INT64_MIN);
  CHECK(int_via(DType::kBool, -7) == 1);
  CHECK(int_via(DType::kBool, 0) == 0);
  // Integers into floats round to nearest: 2^24 + 1 is not a float32.
  CHECK(int_via(DType::kFloat32, (int64_t{1} << 24) + 1) == int64_t{1} << 24);
  CHECK(int_via(DType::kFloat64, (int64_t{1} << 40) + 1) == (int64_t{1} << 40) + 1);
  // Floats read as int64 truncate toward zero; NaN and infinities are 0; huge ones saturate.
  uint8_t f[8];
  store_float_as(DType::kFloat32, -2.75, f);
  CHECK(load_as_int64(DType::kFloat32, f) == -2);
  store_float_as(DType::kFloat64, std::numeric_limits<double>::quiet_NaN(), f);
  CHECK(load_as_int64(DType::kFloat64, f) == 0);
  store_float_as(DType::kFloat64, 1e300, f);
  CHECK(load_as_int64(DType::kFloat64, f) == INT64_MAX);
  // The cast: float to integer truncates, then wraps to the target; NaN is 0; beyond int64,
  // x86's integer indefinite; to bool is != 0 (NaN too).
  CHECK(cast_to_int(DType::kFloat32, 300.9, DType::kUInt8) == 44);
  CHECK(cast_to_int(DType::kFloat64, -1.5, DType::kInt32) == -1);
  CHECK(cast_to_int(DType::kFloat64, std::nan(""), DType::kInt64) == 0);
  CHECK(cast_to_int(DType::kFloat64, 1e19, DType::kInt64) == INT64_MIN);
  CHECK(cast_to_int(DType::kFloat64, 0.25, DType::kBool) == 1);
  CHECK(cast_to_int(DType::kFloat64, std::nan(""), DType::kBool) == 1);
  CHECK(cast_to_int(DType::kFloat64, -0.0, DType::kBool) == 0);
  // Between floats: round to nearest (bfloat16 keeps 8 bits of mantissa).
  uint8_t in[8] = {}, out[8] = {};
  store_float_as(DType::kFloat32, 1.0 + 1.0 / 256 + 1.0 / 1024, in);
  convert_element(DType::kFloat32, in, DType::kBFloat16, out);
  CHECK(load_as_double(DType::kBFloat16, out) == 1.0 + 1.0 / 128);
  // Integer to integer wraps; from bool is 0/1.
  const int32_t big = 0x12345678;
  std::memcpy(in, &big, 4);
  convert_element(DType::kInt32, in, DType::kInt8, out);
  CHECK(load_as_int64(DType::kInt8, out) == 0x78);
  in[0] = 5;
  convert_element(DType::kBool, in, DType::kFloat32, out);
  CHECK(load_as_double(DType::kFloat32, out) == 1.0);
}

}  // namespace
}  // namespace etc
