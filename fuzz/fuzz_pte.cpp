// libFuzzer target: the .pte reader and validator, the dumps of whatever it accepts, and
// loading the accepted program into the runtime (CPU, CUDA memory emulated). Any crash,
// sanitizer report or abort is a bug; clean errors are the expected outcome.
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/pte_dump.h"
#include "format/pte_reader.h"
#include "runtime/method.h"
#include "runtime/runtime_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  etc::Result<etc::pte::File> file = etc::read_pte(etc::make_blob(std::move(bytes)), "fuzz.pte");
  if (!file.ok()) return 0;
  (void)etc::dump_text(*file);
  (void)etc::dump_json(*file);
  (void)etc::dump_dot(*file);
  // Loading allocates the planned buffers: skip programs that ask for more than 64 MiB
  // (a saturating sum: a plan may list many buffers).
  constexpr int64_t kLimit = int64_t{64} << 20;
  int64_t total = 0;
  for (const etc::pte::Plan& p : file->program.plans) {
    for (int64_t b : p.buffer_sizes)
      total = b > kLimit - total ? kLimit + 1 : total + b;
  }
  if (total > kLimit) return 0;
  // Delegates plan their own buffers (inside their blobs): the runtime's memory budget bounds
  // those too, so a claim no machine holds fails to load cleanly (out of memory, exit 4).
  auto runtime = etc::rt::make_cpu_runtime(8, size_t{64} << 20);
  if (!runtime.ok()) return 0;
  (void)etc::rt::Method::load(*file, 0, (*runtime)->env());
  return 0;
}
