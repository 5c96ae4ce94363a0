// A zip archive held in memory (a mapped file), read with minizip: the entries' names, and
// each entry's bytes — a window into the archive for stored entries (no copy), inflated
// into a new buffer for deflated ones. Every size and offset is checked against the
// archive's own size, and CRC-32s are checked when an entry is read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/tensor_spec.h"
#include "support/file_io.h"
#include "support/status.h"

namespace etc::torch_import {

struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint32_t crc = 0;
  uint64_t data_offset = 0;  // of the (compressed) bytes in the archive
};

class ZipArchive {
 public:
  // Reads the central directory. `file` names the archive in errors.
  static Result<ZipArchive> open(std::shared_ptr<const Blob> blob, std::string file);

  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // The entry's bytes, CRC-checked. Stored entries share the archive's blob.
  Result<ConstantData> read(const ZipEntry& entry) const;
  Result<std::string> read_text(const ZipEntry& entry) const;
  const std::string& file() const { return file_; }
  Location at(const std::string& entry, std::optional<uint64_t> offset = std::nullopt) const;

 private:
  std::shared_ptr<const Blob> blob_;
  std::string file_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t> index_;
};

// Whether the bytes start like a zip archive (a local file header or an empty archive).
bool looks_like_zip(std::span<const uint8_t> bytes);

}  // namespace etc::torch_import
