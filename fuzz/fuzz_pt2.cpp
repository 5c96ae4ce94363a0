// libFuzzer target: the torch.export importer (zip reading with minizip, the program's JSON,
// weights and their tensor_meta, the signature, every converter, export-time evaluation,
// the verifier). Inputs with symbolic dims are refused (no --input-shape).
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/torch_export/torch_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto blob = etc::make_blob(std::string(reinterpret_cast<const char*>(data), size));
  (void)etc::parse_torch_export(std::move(blob), "fuzz.pt2", {});
  return 0;
}
