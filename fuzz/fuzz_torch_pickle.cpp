// libFuzzer target: the restricted torch.save pickle reader (torchao's subclass weights):
// any bytes give a weight or an error, never a crash, a hang or a leak.
#include <cstddef>
#include <cstdint>
#include <span>

#include "frontends/torch_export/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)etc::torch_import::parse_weight_pickle(std::span<const uint8_t>(data, size), "fuzz.pkl");
  return 0;
}
