#include "runtime/npy.h"

#include <catch2/catch.hpp>

namespace etc::rt {
namespace {

TEST_CASE("npy round-trips every supported dtype and rank") {
  for (DType t : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt64, DType::kInt32,
                  DType::kInt16, DType::kInt8, DType::kUInt8, DType::kBool}) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {5}, {2, 3}, {0, 4}}) {
      int64_t n = 1;
      for (int64_t d : shape)
        n *= d;
      NpyArray a{t, shape, std::string(static_cast<size_t>(n * dtype_size(t)), '\x01')};
      std::string bytes = serialize_npy(a);
      CHECK((bytes.size() - a.data.size()) % 64 == 0);  // header padded as NumPy does
      Result<NpyArray> b = parse_npy(bytes, "x.npy");
      INFO(b.status().to_string());
      REQUIRE(b.ok());
      CHECK(b->dtype == t);
      CHECK(b->shape == shape);
      CHECK(b->data == a.data);
    }
  }
}

TEST_CASE("npy headers NumPy writes parse") {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) +
                      '\0' + header + std::string(24, '\0');
  Result<NpyArray> a = parse_npy(bytes, "np.npy");
  REQUIRE(a.ok());
  CHECK(a->shape == std::vector<int64_t>{2, 3});
}

TEST_CASE("bad npy files are rejected with the byte offset") {
  CHECK(parse_npy("hello", "x.npy").status().to_string() ==
        "x.npy: byte 0: npy: not a .npy file (magic \\x93NUMPY missing)");
  NpyArray a{DType::kFloat32, {2}, std::string(8, '\0')};
  std::string good = serialize_npy(a);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  CHECK(parse_npy(fortran, "x.npy").status().message() ==
        "npy: Fortran-order arrays are not supported (save with np.ascontiguousarray)");
  std::string big_endian = good;
  big_endian.replace(big_endian.find("<f4"), 3, ">f4");
  CHECK(
      parse_npy(big_endian, "x.npy").status().message().rfind("npy: unsupported dtype '>f4'", 0) ==
      0);
  CHECK(parse_npy(good.substr(0, good.size() - 1), "x.npy").status().message() ==
        "npy: data holds 7 bytes, shape [2] of float32 needs 8");
}

}  // namespace
}  // namespace etc::rt
