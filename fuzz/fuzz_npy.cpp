// libFuzzer target: the .npy reader used by `etc run --input`.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  etc::Result<etc::rt::NpyArray> a = etc::rt::parse_npy(bytes, "fuzz.npy");
  if (a.ok()) (void)etc::rt::serialize_npy(*a);
  return 0;
}
