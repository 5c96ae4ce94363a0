// libFuzzer target: the etc.graph JSON reader (parsing, scheduling, shape inference, the
// verifier). Weight files are resolved in an empty folder, so only inline constants load.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "frontends/json/json_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)etc::parse_graph_json(text, "fuzz.json", "/nonexistent-etc-fuzz-dir");
  return 0;
}
