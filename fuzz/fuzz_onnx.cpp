// libFuzzer target: the ONNX importer (protobuf parsing, initializers, export-time shape
// evaluation, every converter, the verifier). Inputs get a fixed static shape when their
// dims are symbolic; external data resolves in an empty folder.
#include <cstddef>
#include <cstdint>

#include "frontends/onnx/onnx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)etc::parse_onnx_model({data, size}, "fuzz.onnx", "/nonexistent-etc-fuzz-dir", {});
  return 0;
}
