// A program built from the runtime libraries alone (etc_runtime: the .pte reader, Method, the
// CPU kernels and the CPU reference delegate; no importer, pass or emitter): loads a .pte,
// sets its inputs from .npy files, runs it once and writes each output as OUT_DIR/output_<i>.npy.
// The architecture test runs it beside `etc run` to show that the runtime stands on its own,
// and reports its size.
//
//   runtime_only_runner PROGRAM.pte OUT_DIR [INPUT.npy ...]
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "format/pte_reader.h"
#include "runtime/method.h"
#include "runtime/npy.h"
#include "runtime/runtime_env.h"
#include "support/status.h"

namespace {

etc::Status run(int argc, char** argv) {
  if (argc < 3) {
    return etc::Status(etc::ErrorCode::kUsage,
                       "usage: runtime_only_runner PROGRAM.pte OUT_DIR [INPUT.npy ...]");
  }
  ETC_ASSIGN_OR_RETURN(etc::pte::File file, etc::read_pte_file(argv[1]));
  ETC_ASSIGN_OR_RETURN(std::unique_ptr<etc::rt::OwnedRuntime> runtime, etc::rt::make_cpu_runtime());
  ETC_ASSIGN_OR_RETURN(std::unique_ptr<etc::rt::Method> method,
                       etc::rt::Method::load(file, 0, runtime->env()));
  if (static_cast<size_t>(argc - 3) != method->num_inputs()) {
    return etc::invalid_input("the program takes " + std::to_string(method->num_inputs()) +
                              " inputs, " + std::to_string(argc - 3) + " given");
  }
  std::vector<std::vector<unsigned char>> bound;  // memory for inputs and outputs not planned
  for (size_t i = 0; i < method->num_inputs(); ++i) {
    ETC_ASSIGN_OR_RETURN(etc::rt::NpyArray a, etc::rt::read_npy(argv[3 + i]));
    if (!method->input(i).device.is_cpu())
      return etc::invalid_input("input " + std::to_string(i) + " lives on a device");
    if (!method->input_is_bound(i)) {
      ETC_RETURN_IF_ERROR(method->set_input(i, a.data.data(), a.data.size(), a.shape));
      continue;
    }
    ETC_RETURN_IF_ERROR(method->resize_input(i, a.shape));
    bound.emplace_back(a.data.begin(), a.data.end());
    ETC_RETURN_IF_ERROR(method->bind_input(i, bound.back().data()));
  }
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    if (!method->output_is_bound(i)) continue;
    bound.emplace_back(static_cast<size_t>(method->output(i).nbytes()));
    ETC_RETURN_IF_ERROR(method->bind_output(i, bound.back().data()));
  }
  ETC_RETURN_IF_ERROR(method->execute());
  for (size_t i = 0; i < method->num_outputs(); ++i) {
    const etc::rt::TensorView& t = method->output(i);
    if (!t.device.is_cpu())
      return etc::invalid_input("output " + std::to_string(i) + " lives on a device");
    etc::rt::NpyArray out{t.dtype, t.sizes, std::string(static_cast<size_t>(t.nbytes()), '\0')};
    if (!out.data.empty()) std::memcpy(out.data.data(), t.data, out.data.size());
    ETC_RETURN_IF_ERROR(
        etc::rt::write_npy(std::string(argv[2]) + "/output_" + std::to_string(i) + ".npy", out));
  }
  return etc::Status();
}

}  // namespace

int main(int argc, char** argv) {
  etc::Status s = run(argc, argv);
  if (s.ok()) return 0;
  std::fprintf(stderr, "runtime_only_runner: error: %s\n", s.to_string().c_str());
  return etc::error_code_exit_code(s.code());
}
