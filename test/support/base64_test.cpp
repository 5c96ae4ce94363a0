#include "support/base64.h"

#include <catch2/catch.hpp>

namespace etc {
namespace {

TEST_CASE("base64 round-trips the RFC 4648 test vectors") {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "Zg=="},
                                                         {"fo", "Zm8="},
                                                         {"foo", "Zm9v"},
                                                         {"foob", "Zm9vYg=="},
                                                         {"fooba", "Zm9vYmE="},
                                                         {"foobar", "Zm9vYmFy"}};
  for (auto [plain, encoded] : vectors) {
    CHECK(base64_encode(plain) == encoded);
    Result<std::string> d = base64_decode(encoded);
    REQUIRE(d.ok());
    CHECK(*d == plain);
  }
}

TEST_CASE("base64 round-trips every byte value") {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all += static_cast<char>(i);
  Result<std::string> d = base64_decode(base64_encode(all));
  REQUIRE(d.ok());
  CHECK(*d == all);
}

TEST_CASE("malformed base64 is rejected with the offset") {
  CHECK(base64_decode("abc").status().message() == "base64 text length 3 is not a multiple of 4");
  CHECK(base64_decode("ab!d").status().message() == "invalid base64 character at offset 2");
  CHECK(base64_decode("a===").status().message() == "invalid base64 character at offset 1");
  CHECK(base64_decode("ab=c").status().message() == "invalid base64 character at offset 2");
  CHECK(base64_decode("Zg==Zg==").status().message() == "invalid base64 character at offset 2");
}

}  // namespace
}  // namespace etc
