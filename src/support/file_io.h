// Reading whole files and memory-mapping them, with errors as Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "support/status.h"

namespace etc {

// An immutable byte buffer: either a read-only memory map of a file or owned bytes.
// Shared by everything that points into it (constants reference their weight file).
class Blob {
 public:
  virtual ~Blob() = default;
  virtual std::span<const uint8_t> bytes() const = 0;
};

// Maps `path` read-only. Empty files give an empty blob.
Result<std::shared_ptr<const Blob>> map_file(const std::string& path);

// Wraps owned bytes.
std::shared_ptr<const Blob> make_blob(std::string bytes);

Result<std::string> read_text_file(const std::string& path);

// Writes via a temporary file in the same folder and a rename, so a failed or interrupted
// write never leaves a partial file at `path`.
Status write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace etc
