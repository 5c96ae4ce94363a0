// The etc command-line tool. Subcommands parse their options here and call into the
// library; every error from the library is printed once, located, and mapped to the exit
// codes of the CLI contract (README.md): 0 ok, 1 invalid input or unsupported model,
// 2 usage, 3 --verify mismatch, 4 device unavailable, 70 internal error.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>

#include "graph/json_reader.h"
#include "graph/summary.h"
#include "support/logging.h"
#include "support/status.h"

#ifdef ETC_WITH_CUDA
#include "cuda_runtime/cuda_devices.h"
#endif

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitInternal = 70;

int report(const etc::Status& s) {
  std::fprintf(stderr, "etc: error: %s\n", s.to_string().c_str());
  return etc::error_code_exit_code(s.code());
}

std::string version_text() {
  std::string v = "etc " ETC_VERSION "\n";
#ifdef ETC_WITH_CUDA
  v += "CUDA support: built in (CUDA runtime " + etc::cuda::runtime_version_string() +
       ", architectures " ETC_CUDA_ARCHS ")\n";
  auto devices = etc::cuda::list_devices();
  if (!devices.ok()) {
    v += "CUDA devices: none usable (" + devices.status().message() + ")\n";
  } else if (devices->empty()) {
    v += "CUDA devices: none visible\n";
  } else {
    for (const auto& d : *devices) {
      v += "CUDA device " + std::to_string(d.index) + ": " + d.name + " (sm_" +
           std::to_string(d.major) + std::to_string(d.minor) + ", " +
           std::to_string(d.total_memory >> 20) + " MiB)\n";
    }
  }
#else
  v += "CUDA support: not built (CPU-only build)\n";
#endif
  return v;
}

int cmd_validate(const std::string& model) {
  etc::Result<etc::Graph> g = etc::load_graph_file(model);
  if (!g.ok()) return report(g.status());
  std::fputs(etc::format_summary(*g, etc::summarize(*g), model).c_str(), stdout);
  return 0;
}

int cmd_ops() {
  for (const etc::OpInfo& op : etc::all_ops()) {
    if (op.schema.ns != "aten") continue;  // compiler-inserted ops are not for input files
    std::string line = op.name + "(";
    for (size_t i = 0; i < op.schema.args.size(); ++i) {
      const etc::ArgSchema& a = op.schema.args[i];
      if (i > 0) line += ", ";
      line += std::string(etc::arg_type_name(a.type)) + (a.optional ? "? " : " ") + a.name;
      if (a.default_value) line += "=" + etc::arg_value_to_string(*a.default_value);
    }
    line += ") -> " + std::to_string(op.schema.num_outputs) + " tensor" +
            (op.schema.num_outputs > 1 ? "s" : "");
    std::puts(line.c_str());
  }
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"etc: an ahead-of-time compiler and runtime for ML programs on CPUs and CUDA GPUs"};
  app.require_subcommand(0, 1);
  bool show_version = false;
  int verbosity = 0;
  app.add_flag("--version", show_version, "Print the version and whether CUDA support is built in");
  app.add_flag("-v,--verbose", verbosity, "More logging on stderr (repeat for debug)");

  std::string validate_model;
  CLI::App* validate = app.add_subcommand("validate", "Check a model file and print a summary");
  validate->add_option("MODEL", validate_model, "Graph JSON file (etc.graph)")->required();

  CLI::App* ops = app.add_subcommand("ops", "List the supported operators with their ATen schemas");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  etc::init_logging(verbosity >= 2   ? etc::LogLevel::kDebug
                    : verbosity == 1 ? etc::LogLevel::kInfo
                                     : etc::LogLevel::kWarn);

  if (show_version) {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  if (validate->parsed()) return cmd_validate(validate_model);
  if (ops->parsed()) return cmd_ops();
  std::fputs(app.help().c_str(), stderr);
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "etc: internal error: uncaught exception: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "etc: internal error: uncaught exception\n");
  }
  return kExitInternal;
}
