// Writing .pte bytes: the Program as a FlatBuffer with identifier "ET12", then — when any
// segment holds data — the 32-byte "eh00" extended header after the identifier, padding to
// the segment base, and the segments. The segment base is aligned to the segment alignment
// in absolute file offset, so every segment (and every 16-byte-aligned constant in the
// constant segment) is aligned in the file and can be used in place from a memory map.
// The output is a pure function of the File: no pointers, clocks or hash orders.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "format/pte_model.h"
#include "support/status.h"

namespace etc {

Result<std::string> write_pte(const pte::File& file,
                              uint64_t segment_alignment = pte::kDefaultSegmentAlignment);

// The same bytes, streamed into `path` through a temporary file (weights are copied from
// where they are, never gathered in memory). `check`, if set, is called with the finished
// temporary's path before it is renamed into place; an error leaves no file at `path`.
// Returns the file's size.
Result<uint64_t> write_pte_file(const pte::File& file, const std::string& path,
                                const std::function<Status(const std::string&)>& check = {},
                                uint64_t segment_alignment = pte::kDefaultSegmentAlignment);

// The CUDA delegate's processed blob (schema/etc_delegate.fbs): `plan` plus the named-data
// keys of its constants, as (value index, key) pairs.
inline constexpr uint32_t kDelegateFormatVersion = 1;
std::string serialize_delegate_program(
    const pte::Plan& plan, const std::vector<std::pair<int32_t, std::string>>& constants);

}  // namespace etc
