// Base64 (RFC 4648, standard alphabet, '=' padding) for inline weights in graph JSON.
#pragma once

#include <string>
#include <string_view>

#include "support/status.h"

namespace etc {

std::string base64_encode(std::string_view bytes);
// Decodes `text`; on malformed input the error names the character offset.
Result<std::string> base64_decode(std::string_view text);

}  // namespace etc
