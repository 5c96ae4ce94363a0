#include "graph/dtype.h"

#include <catch2/catch.hpp>

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

}  // namespace
}  // namespace etc
