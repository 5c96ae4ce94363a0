#include "support/status.h"

#include <catch2/catch.hpp>

namespace etc {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_input("value must be positive, got " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  ETC_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

Status check_twice(int v) {
  ETC_RETURN_IF_ERROR_CTX(parse_positive(v), "while checking " + std::to_string(v));
  return Status();
}

TEST_CASE("an OK status has no message and code kOk") {
  Status s;
  CHECK(s.ok());
  CHECK(s.code() == ErrorCode::kOk);
  CHECK(s.message().empty());
  CHECK(s.to_string() == "ok");
}

TEST_CASE("error codes map to the CLI exit codes and groups") {
  CHECK(error_code_exit_code(ErrorCode::kOk) == 0);
  CHECK(error_code_exit_code(ErrorCode::kInvalidInput) == 1);
  CHECK(error_code_exit_code(ErrorCode::kUnsupported) == 1);
  CHECK(error_code_exit_code(ErrorCode::kNotFound) == 1);
  CHECK(error_code_exit_code(ErrorCode::kUsage) == 2);
  CHECK(error_code_exit_code(ErrorCode::kVerifyMismatch) == 3);
  CHECK(error_code_exit_code(ErrorCode::kDeviceUnavailable) == 4);
  CHECK(error_code_exit_code(ErrorCode::kInternal) == 70);
  CHECK(error_code_group(ErrorCode::kUnsupported) == ErrorGroup::kUser);
  CHECK(error_code_group(ErrorCode::kInternal) == ErrorGroup::kInternal);
  CHECK(std::string(error_code_name(ErrorCode::kDeviceUnavailable)) == "device unavailable");
}

TEST_CASE("Result carries a value or the error, and macros propagate it") {
  Result<int> ok = doubled(21);
  REQUIRE(ok.ok());
  CHECK(*ok == 42);
  Result<int> bad = doubled(-1);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == ErrorCode::kInvalidInput);
  CHECK(bad.status().message() == "value must be positive, got -1");
}

TEST_CASE("a Result built from an OK status becomes an internal error") {
  Result<int> r{Status()};
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::kInternal);
}

TEST_CASE("context accumulates as a trail, innermost first") {
  Status s = check_twice(0);
  REQUIRE_FALSE(s.ok());
  s.add_context("while loading model.json");
  CHECK(
      s.to_string() ==
      "value must be positive, got 0\n  note: while checking 0\n  note: while loading model.json");
}

TEST_CASE("locations print file, line, column, byte offset, pointer and node") {
  Location loc{.file = "m.json", .pointer = "/nodes/3/args/other", .node = "add_1"};
  CHECK(loc.to_string() == "m.json: /nodes/3/args/other (node \"add_1\")");
  CHECK(Location{.file = "m.json", .line = 3, .column = 14}.to_string() == "m.json:3:14");
  CHECK(Location{.file = "w.safetensors", .byte_offset = 8}.to_string() == "w.safetensors: byte 8");
  CHECK(Location{.pointer = "/outputs/0"}.to_string() == "/outputs/0");
  CHECK(Location{}.empty());
  Status s = invalid_input("bad", loc);
  CHECK(s.to_string() == "m.json: /nodes/3/args/other (node \"add_1\"): bad");
}

TEST_CASE("add_location fills only the missing parts") {
  Status s = invalid_input("oops", Location{.pointer = "/a"});
  s.add_location(Location{.file = "f.json", .pointer = "/ignored", .node = "n"});
  CHECK(s.location().file == "f.json");
  CHECK(s.location().pointer == "/a");
  CHECK(s.location().node == "n");
}

TEST_CASE("related errors print one per line after the first") {
  Status s = invalid_input("first", Location{.pointer = "/x"});
  s.add_related(invalid_input("second", Location{.pointer = "/y"}));
  s.add_related(Status());  // OK statuses are not added
  CHECK(s.related().size() == 1);
  CHECK(s.to_string() == "/x: first\n/y: second");
}

TEST_CASE("Status copies deeply and moves cheaply") {
  Status a = not_found("missing");
  Status b = a;
  b.add_context("extra");
  CHECK(a.context().empty());
  CHECK(b.context().size() == 1);
  Status c = std::move(b);
  CHECK(c.code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace etc
