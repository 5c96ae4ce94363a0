#include "support/json_pointer.h"

namespace etc {

std::string json_pointer_append(std::string_view base, std::string_view token) {
  std::string out(base);
  out += '/';
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_pointer_append(std::string_view base, size_t index) {
  return std::string(base) + "/" + std::to_string(index);
}

}  // namespace etc
