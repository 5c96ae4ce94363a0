#include "frontends/json/safetensors.h"

#include <catch2/catch.hpp>
#include <cstring>

namespace etc {
namespace {

std::string le_floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.begin(), s.size());
  return s;
}

Result<SafetensorsFile> parse(std::string bytes) {
  return parse_safetensors(make_blob(std::move(bytes)), "w.st");
}

// A file with a hand-written header (length prefix computed).
std::string with_header(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST_CASE("safetensors round-trips tensors and exposes zero-copy windows") {
  std::string bytes = write_safetensors({{"b", DType::kFloat32, {2}, le_floats({1.5f, -2.0f})},
                                         {"a", DType::kInt64, {1}, std::string(8, '\x01')}});
  Result<SafetensorsFile> f = parse(bytes);
  REQUIRE(f.ok());
  REQUIRE(f->tensors.size() == 2);
  const SafetensorsTensor& b = f->tensors.at("b");
  CHECK(b.dtype == DType::kFloat32);
  CHECK(b.shape == std::vector<int64_t>{2});
  REQUIRE(b.data.size == 8);
  float v[2];
  std::memcpy(v, b.data.bytes().data(), 8);
  CHECK(v[0] == 1.5f);
  CHECK(v[1] == -2.0f);
  CHECK(f->tensors.at("a").data.bytes()[0] == 1);
  CHECK((8 + b.data.offset) % 8 == 0);  // header padded: data starts 8-aligned
}

TEST_CASE("metadata is ignored, an empty file of tensors is fine") {
  Result<SafetensorsFile> f = parse(with_header(R"({"__metadata__": {"format": "pt"}})", ""));
  REQUIRE(f.ok());
  CHECK(f->tensors.empty());
}

TEST_CASE("malformed safetensors files are rejected with the byte offset") {
  auto msg = [](std::string bytes) {
    Result<SafetensorsFile> f = parse(std::move(bytes));
    REQUIRE_FALSE(f.ok());
    return f.status().to_string();
  };
  CHECK(msg("abc") ==
        "w.st: byte 0: safetensors: file is 3 bytes, too short for the 8-byte header length");
  CHECK(msg(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8) + "{}") ==
        "w.st: byte 0: safetensors: header length 9223372036854775807 is larger than 100 MB");
  CHECK(msg(std::string("\x10\0\0\0\0\0\0\0", 8) + "{}") ==
        "w.st: byte 0: safetensors: header length 16 runs past the end of the file (10 bytes)");
  CHECK(msg(with_header("{not json", ""))
            .rfind("w.st: byte 8: safetensors: header is not valid JSON", 0) == 0);
  CHECK(msg(with_header("[]", "")) == "w.st: byte 8: safetensors: header is not a JSON object");
  CHECK(msg(with_header(R"({"t": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}})",
                        std::string(8, '\0'))) ==
        "w.st: byte 8: safetensors: tensor 't': unsupported dtype \"C64\"");
  CHECK(msg(with_header(R"({"t": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
                        std::string(4, '\0'))) ==
        "w.st: byte 8: safetensors: tensor 't': shape entries must be non-negative integers");
  CHECK(msg(with_header(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 16]}})",
                        std::string(8, '\0'))) ==
        "w.st: byte 8: safetensors: tensor 't': data_offsets [0, 16] lie outside the data section "
        "of 8 bytes");
  CHECK(msg(with_header(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
                        std::string(8, '\0'))) ==
        "w.st: byte 8: safetensors: tensor 't': shape [3] of float32 needs 12 bytes but "
        "data_offsets span 8");
  CHECK(msg(with_header(
            R"({"t": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})",
            std::string(8, '\0'))) ==
        "w.st: byte 8: safetensors: tensor 't': shape [4611686018427387904, 4] of float32 needs "
        "too many bytes but "
        "data_offsets span 8");
  CHECK(msg(with_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                           "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                        std::string(8, '\0')))
            .find("tensor data ranges overlap") != std::string::npos);
}

}  // namespace
}  // namespace etc
