// Building JSON pointers (RFC 6901) for diagnostics: "/nodes/17/args/other".
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace etc {

// Returns `base` with one more reference token, escaped ('~' -> "~0", '/' -> "~1").
std::string json_pointer_append(std::string_view base, std::string_view token);
std::string json_pointer_append(std::string_view base, size_t index);

}  // namespace etc
