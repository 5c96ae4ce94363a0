// A semantic diff of two programs: plans (inputs, outputs, values with dtype, sizes, device
// and allocation, instructions with operator names, delegates with compile specs and their
// subgraph summaries, buffers with devices) and constants compared by content fingerprint.
// Byte layout (segment offsets, header sizes, padding) is not compared: two files that run
// the same program are equivalent. Used by `etc diff` for golden-file CI.
#pragma once

#include <string>
#include <vector>

#include "format/pte_model.h"

namespace etc {

struct PteDifference {
  std::string path;  // "plans[0].values[3].device"
  std::string a;     // JSON text of the value in the first program ("(absent)" if missing)
  std::string b;
};

std::vector<PteDifference> diff_programs(const pte::File& a, const pte::File& b);
// "N difference(s):" and one line per difference (at most `limit`), or "equivalent".
std::string format_differences(const std::vector<PteDifference>& diffs, size_t limit = 50);
std::string differences_json(const std::vector<PteDifference>& diffs);

}  // namespace etc
