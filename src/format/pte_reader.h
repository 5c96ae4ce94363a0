// Reading .pte files written by etc or by ExecuTorch, in two layers of checks:
// 1. structure: identifier, extended header fields inside the file, the FlatBuffers
//    verifier over the program region;
// 2. meaning: every index in range (values, operators, delegates, segments, buffers,
//    constants), tensor sizes whose byte counts do not overflow, planned tensors inside
//    their buffer and on the buffer's device, constants inside their segment and on the
//    CPU, device types and indices valid, segments inside the file.
// Every failure is an invalid-input error naming the file and where — a byte offset, or
// the plan, value index and field. Files without an extended header and files with the
// deprecated inline constant_buffer are read too.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/pte_model.h"
#include "support/file_io.h"
#include "support/status.h"

namespace etc {

Result<pte::File> read_pte(const std::shared_ptr<const Blob>& blob, const std::string& path);
Result<pte::File> read_pte_file(const std::string& path);

// The CUDA delegate's processed blob (etc_delegate.fbs), validated like a plan.
struct DelegateProgram {
  uint32_t version = 0;
  pte::Plan plan;
  std::vector<std::pair<int32_t, std::string>> constants;  // (value index, named-data key)
};
Result<DelegateProgram> read_delegate_program(std::span<const uint8_t> bytes,
                                              const std::string& where);

}  // namespace etc
