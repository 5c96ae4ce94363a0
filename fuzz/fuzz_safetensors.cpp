// libFuzzer target: the safetensors header and layout validation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/json/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  etc::Result<etc::SafetensorsFile> f =
      etc::parse_safetensors(etc::make_blob(std::move(bytes)), "fuzz.safetensors");
  if (f.ok()) {
    for (const auto& [name, t] : f->tensors)
      (void)t.data.bytes();
  }
  return 0;
}
