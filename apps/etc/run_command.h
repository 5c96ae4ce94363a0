// `etc run`: loads a .pte, binds inputs (from .npy files or seeded random data), runs it on
// the requested device, writes and summarises the outputs, and with --verify compares them
// with the CPU reference run.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/status.h"

namespace etc {

struct RunArgs {
  std::string file;
  std::string device = "auto";
  std::vector<std::string> inputs;  // NAME=FILE.npy or INDEX=FILE.npy
  uint64_t seed = 0;
  std::string output_dir;
  bool verify = false;
  std::optional<double> rtol, atol;
  int warmup = 0;
  int iterations = 1;
  bool json = false;
  bool no_fusion = false;       // run every instruction as written (no epilogue fusion)
  bool profile_shapes = false;  // --profile with a row per operator and argument shapes
  bool profile = false;         // one extra run timing every instruction; a table on stderr
  int profile_runs = 1;         // profiled runs; each row the median of its times over them
  int threads = 0;              // CPU kernel threads; 0: $ETC_NUM_THREADS or all cores
  bool cuda_graphs = false;     // capture each CUDA delegate once, replay it afterwards
  // Generation (a decoder with state): the prompt's token ids, and how many tokens to
  // generate greedily, feeding each back in.
  std::string prompt;
  int steps = 0;
};

// Returns the process exit code's Status: OK, or an error (kVerifyMismatch for --verify).
Status run_program(const RunArgs& args);

}  // namespace etc
