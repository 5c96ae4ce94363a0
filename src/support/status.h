// Status and Result<T>: the one error vocabulary of etc.
//
// Every fallible function in src/ returns a Status or a Result<T>; no exception escapes
// src/ (third-party exceptions are caught where the third-party call is made). A Status
// carries a code from error_codes.def, a message, a Location saying where in the user's
// input the problem is, a trail of context added on the way up ("while loading ...") and
// optional further diagnostics when one check reports several problems at once.
//
// An OK Status holds no allocation, so returning Status{} on the success path is free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace etc {

enum class ErrorCode : uint8_t {
  kOk = 0,
#define ETC_ERROR_CODE(name, text, group, exit_code) name,
#include "support/error_codes.def"
#undef ETC_ERROR_CODE
};

enum class ErrorGroup : uint8_t { kNone, kUser, kInternal };

const char* error_code_name(ErrorCode code);
ErrorGroup error_code_group(ErrorCode code);
// The etc CLI's exit code for an error of this kind (0 for kOk).
int error_code_exit_code(ErrorCode code);

// Where in the user's input a problem is. All parts are optional; to_string() prints the
// ones that are set, most general first: "model.json:3:14: /nodes/2/args/other (node "fc1")".
struct Location {
  std::string file;
  int line = 0;                         // 1-based; 0 = unknown
  int column = 0;                       // 1-based; 0 = unknown
  std::string pointer;                  // JSON pointer (RFC 6901) into `file`
  std::string node;                     // IR node name
  std::optional<uint64_t> byte_offset;  // for binary files

  bool empty() const;
  std::string to_string() const;
};

class [[nodiscard]] Status {
 public:
  Status() noexcept {}  // OK
  Status(ErrorCode code, std::string message, Location location = {});

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept;
  Status& operator=(Status&&) noexcept;
  ~Status();

  static Status ok_status() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  ErrorCode code() const;
  const std::string& message() const;
  const Location& location() const;
  // Context lines, innermost first.
  const std::vector<std::string>& context() const;
  // Further diagnostics reported together with this one.
  const std::vector<Status>& related() const;
  // What the error is about, by name, for tools that act on it (the operators an import
  // could not convert); the message says the same in words.
  const std::vector<std::string>& subjects() const;
  Status& set_subjects(std::vector<std::string> subjects) &;
  Status set_subjects(std::vector<std::string> subjects) &&;

  // Adds a line of context ("while loading weights from w.safetensors"). No-op when OK.
  Status& add_context(std::string context) &;
  // On a temporary these return the Status by value, so that `auto&& s = f().add_context(..)`
  // (ETC_RETURN_IF_ERROR) never binds a reference to a destroyed temporary.
  Status add_context(std::string context) &&;
  // Fills the parts of the location that are not set yet. No-op when OK.
  Status& add_location(const Location& outer) &;
  Status add_location(const Location& outer) &&;
  // Attaches another error reported at the same time. No-op when this is OK.
  void add_related(Status other);

  // "<location>: <message>" followed by one indented line per related error and context.
  std::string to_string() const;

 private:
  struct Rep;
  struct RepDeleter {
    void operator()(Rep* rep) const noexcept;
  };
  std::unique_ptr<Rep, RepDeleter> rep_;
};

// Shorthands for the common codes.
Status invalid_input(std::string message, Location location = {});
Status unsupported(std::string message, Location location = {});
Status not_found(std::string message, Location location = {});
Status internal_error(std::string message, Location location = {});

// A value or the Status saying why there is none. Move-only when T is.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<1>, std::move(value)) {}        // NOLINT: implicit
  Result(Status status) : v_(std::in_place_index<0>, std::move(status)) {  // NOLINT: implicit
    if (std::get<0>(v_).ok()) {
      v_.template emplace<0>(internal_error("Result<T> constructed from an OK status"));
    }
  }

  bool ok() const { return v_.index() == 1; }
  const Status& status() const& {
    static const Status kOk;
    return ok() ? kOk : std::get<0>(v_);
  }
  Status take_status() && { return ok() ? Status() : std::move(std::get<0>(v_)); }

  T& value() & { return std::get<1>(v_); }
  const T& value() const& { return std::get<1>(v_); }
  T&& value() && { return std::get<1>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

namespace internal {
inline Status to_status(Status s) {
  return s;
}
template <typename T>
Status to_status(Result<T>&& r) {
  return std::move(r).take_status();
}
}  // namespace internal

}  // namespace etc

#define ETC_CONCAT_INNER(a, b) a##b
#define ETC_CONCAT(a, b) ETC_CONCAT_INNER(a, b)

// Returns the Status of `expr` (a Status or Result) from the enclosing function if it failed.
#define ETC_RETURN_IF_ERROR(expr)                                                     \
  do {                                                                                \
    auto&& etc_status_ = (expr);                                                      \
    if (!etc_status_.ok()) return ::etc::internal::to_status(std::move(etc_status_)); \
  } while (0)

// Like ETC_RETURN_IF_ERROR, adding a line of context to the error.
#define ETC_RETURN_IF_ERROR_CTX(expr, ctx)                                        \
  do {                                                                            \
    auto&& etc_status_ = (expr);                                                  \
    if (!etc_status_.ok())                                                        \
      return ::etc::internal::to_status(std::move(etc_status_)).add_context(ctx); \
  } while (0)

// `lhs = value of rexpr`, or return its Status from the enclosing function.
#define ETC_ASSIGN_OR_RETURN(lhs, rexpr) \
  ETC_ASSIGN_OR_RETURN_IMPL(ETC_CONCAT(etc_result_, __LINE__), lhs, rexpr)
#define ETC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr)    \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return std::move(tmp).take_status(); \
  lhs = std::move(tmp).value()
