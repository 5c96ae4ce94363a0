// The etc command-line tool. Subcommands parse their options here and call into the
// library; every error from the library is printed once, located, and mapped to the exit
// codes of the CLI contract (README.md): 0 ok, 1 invalid input or unsupported model,
// 2 usage, 3 --verify mismatch, 4 device unavailable, 70 internal error.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "backends/cuda/cuda_capability.h"
#include "backends/runtimes.h"
#include "export/export.h"
#include "export/export_pipeline.h"
#include "format/pte_diff.h"
#include "format/pte_dump.h"
#include "format/pte_reader.h"
#include "frontends/frontends.h"
#include "frontends/onnx/onnx_reader.h"
#include "frontends/torch_export/torch_import.h"
#include "graph/printer.h"
#include "graph/summary.h"
#include "run_command.h"
#include "runtime/kernel.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "support/file_io.h"
#include "support/logging.h"
#include "support/status.h"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitInternal = 70;

int report(const etc::Status& s) {
  std::fprintf(stderr, "etc: error: %s\n", s.to_string().c_str());
  return etc::error_code_exit_code(s.code());
}

std::string version_text() {
  return "etc " ETC_VERSION "\n" + etc::describe_runtimes();
}

etc::Status usage(std::string message) {
  return etc::Status(etc::ErrorCode::kUsage, std::move(message));
}

int cmd_validate(const std::string& model, const std::vector<std::string>& input_shapes,
                 const std::vector<std::string>& absent_inputs) {
  etc::ImportRequest request;
  request.absent_inputs = {absent_inputs.begin(), absent_inputs.end()};
  etc::Result<std::map<std::string, std::vector<int64_t>>> shapes =
      etc::parse_input_shapes(input_shapes);
  if (!shapes.ok()) return report(shapes.status());
  request.input_shapes = std::move(*shapes);
  etc::Result<etc::DynamicPoints> dyn = etc::dynamic_points(model, request);
  if (!dyn.ok()) return report(dyn.status());
  request.symbol_values = dyn->upper;
  etc::ModelFormat format{};
  etc::Result<etc::Graph> g = etc::import_model(model, request, &format);
  if (!g.ok()) return report(g.status());
  if (!dyn->text.empty())
    std::printf("dynamic dims: %s; checked at the upper bound\n", dyn->text.c_str());
  std::fputs(
      etc::format_summary(*g, etc::summarize(*g), model, etc::model_format_name(format)).c_str(),
      stdout);
  return 0;
}

struct ExportArgs {
  std::string model;
  std::string output;
  std::string target = "cuda:0";
  std::string io_device = "host";
  std::string report;
  int64_t max_copies = -1;
  bool verify_each = false;
  std::string print_ir_after;
  std::string passes = etc::kDefaultExportPipeline;
  bool time_passes = false;
  size_t min_partition_size = 1;
  std::vector<std::string> exclude_ops;
  std::vector<std::string> input_shapes;
  std::vector<std::string> absent_inputs;
};

etc::Status write_text(const std::string& path, const std::string& text) {
  return etc::write_file_atomic(path, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

etc::Status run_export(const ExportArgs& a) {
  etc::ExportRequest request;
  request.model = a.model;
  etc::Result<etc::Device> target = etc::parse_device(a.target);
  if (!target.ok()) return usage("--target: " + target.status().message());
  request.options.target = *target;
  if (a.io_device == "host") {
    request.options.io_device = etc::IoDevice::kHost;
  } else if (a.io_device == "device") {
    request.options.io_device = etc::IoDevice::kDevice;
  } else {
    return usage("--io-device must be 'host' or 'device', got '" + a.io_device + "'");
  }
  request.options.partition.min_partition_size = a.min_partition_size;
  request.options.partition.excluded_ops = a.exclude_ops;
  for (const std::string& op : a.exclude_ops) {
    if (!etc::op_from_name(op))
      return usage("--exclude-ops: unknown op '" + op + "' (see 'etc ops')");
  }
  if (!a.print_ir_after.empty() && a.print_ir_after != "all" &&
      etc::make_pass_registry().find(a.print_ir_after) == nullptr) {
    return usage("--print-ir-after: unknown pass '" + a.print_ir_after + "'");
  }
  ETC_ASSIGN_OR_RETURN(request.import.input_shapes, etc::parse_input_shapes(a.input_shapes));
  request.import.absent_inputs = {a.absent_inputs.begin(), a.absent_inputs.end()};
  request.passes = a.passes;
  request.run.verify_each = a.verify_each;
  request.run.print_ir_after = a.print_ir_after;
  request.run.time_passes = a.time_passes;
  request.max_copies = a.max_copies;

  ETC_ASSIGN_OR_RETURN(etc::ExportResult result, etc::export_model(request));
  std::fputs(result.ir_dumps.c_str(), stderr);
  std::fputs(result.timing_table.c_str(), stderr);
  if (!result.dynamic_dims.empty()) {
    std::fprintf(stderr, "dynamic dims: %s; memory planned for the upper bound\n",
                 result.dynamic_dims.c_str());
  }
  ETC_ASSIGN_OR_RETURN(uint64_t size, etc::write_program(result, a.output));
  if (!a.report.empty()) ETC_RETURN_IF_ERROR(write_text(a.report, result.report.to_json()));
  std::fputs(result.report.summary().c_str(), stderr);
  std::printf("wrote %s (%llu bytes)\n", a.output.c_str(), static_cast<unsigned long long>(size));
  return etc::Status();
}

int cmd_inspect(const std::string& path, const std::string& format) {
  etc::Result<etc::pte::File> file = etc::read_pte_file(path);
  if (!file.ok()) return report(file.status());
  std::string out = format == "json"  ? etc::dump_json(*file)
                    : format == "dot" ? etc::dump_dot(*file)
                                      : etc::dump_text(*file);
  std::fputs(out.c_str(), stdout);
  return 0;
}

// Exit 0 when the programs are equivalent, 1 when they differ (or cannot be read).
int cmd_diff(const std::string& a, const std::string& b, bool json) {
  etc::Result<etc::pte::File> fa = etc::read_pte_file(a);
  if (!fa.ok()) return report(fa.status());
  etc::Result<etc::pte::File> fb = etc::read_pte_file(b);
  if (!fb.ok()) return report(fb.status());
  std::vector<etc::PteDifference> diffs = etc::diff_programs(*fa, *fb);
  std::fputs((json ? etc::differences_json(diffs) : etc::format_differences(diffs)).c_str(),
             stdout);
  return diffs.empty() ? 0 : 1;
}

int cmd_onnx_ops() {
  for (const std::string& op : etc::supported_onnx_ops())
    std::puts(op.c_str());
  return 0;
}

int cmd_torch_ops() {
  for (const std::string& op : etc::supported_torch_ops())
    std::puts(op.c_str());
  return 0;
}

// One schema as JSON: each argument's name, type, optional/kwarg-only/out marks, list length
// and default, for tools that compare the table with PyTorch's (test/torch/schema_test.py).
nlohmann::json schema_json(const etc::OpSchema& s) {
  nlohmann::json args = nlohmann::json::array();
  for (const etc::ArgSchema& a : s.args) {
    nlohmann::json j = {{"name", a.name},         {"type", std::string(etc::arg_type_name(a.type))},
                        {"optional", a.optional}, {"kwarg_only", a.kwarg_only},
                        {"out", a.is_out},        {"length", a.fixed_length}};
    if (a.default_value) j["default"] = etc::arg_value_to_string(*a.default_value);
    args.push_back(std::move(j));
  }
  return {{"namespace", s.ns},
          {"name", s.name},
          {"overload", s.overload},
          {"args", std::move(args)},
          {"results", s.num_outputs}};
}

// `etc ops --json`: the whole op table, and the CPU runtime's kernels outside it (the
// out variants ExecuTorch's programs call that etc's IR decomposes) with their schemas, for
// tools.
int cmd_ops_json() {
  nlohmann::json ops = nlohmann::json::array();
  for (const etc::OpInfo& op : etc::all_ops()) {
    const char* host = op.host_form == etc::HostForm::kOutVariant   ? "out_variant"
                       : op.host_form == etc::HostForm::kDecomposed ? "decomposed"
                                                                    : "none";
    ops.push_back({{"name", op.name},
                   {"schema", schema_json(op.schema)},
                   {"out_variant", op.out_schema ? schema_json(*op.out_schema) : nlohmann::json()},
                   {"host", host},
                   {"cuda", etc::cuda_may_delegate(op.kind)}});
  }
  nlohmann::json runtime = nlohmann::json::array();
  etc::rt::OperatorRegistry registry;
  if (etc::Status s = etc::rt::register_cpu_kernels(registry); !s.ok()) return report(s);
  for (const std::string& name : registry.names()) {
    const etc::rt::RegisteredKernel* k = registry.find(name);
    if (k->op || !k->schema) continue;
    runtime.push_back({{"name", name}, {"schema", schema_json(*k->schema)}});
  }
  nlohmann::json out = {{"ops", std::move(ops)}, {"runtime_kernels", std::move(runtime)}};
  std::puts(out.dump(1).c_str());
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
  std::vector<std::string> validate_shapes;
  std::vector<std::string> validate_absent;
  CLI::App* validate = app.add_subcommand("validate", "Check a model file and print a summary");
  validate
      ->add_option("MODEL", validate_model,
                   "etc.graph JSON, ONNX model or torch.export archive (.pt2)")
      ->required();
  validate->add_option(
      "--input-shape", validate_shapes,
      "NAME=AxBxC: sizes for an ONNX or torch.export input with symbolic dims (repeatable)");
  validate->add_option("--absent-input", validate_absent,
                       "NAME: an ONNX optional input given as absent (repeatable)");

  bool ops_onnx = false;
  CLI::App* ops = app.add_subcommand("ops", "List the supported operators with their ATen schemas");
  ops->add_flag("--onnx", ops_onnx, "List the ONNX op types the importer converts instead");
  bool ops_torch = false;
  ops->add_flag("--torch", ops_torch,
                "List the ATen targets the torch.export importer converts instead");
  bool ops_json = false;
  ops->add_flag("--json", ops_json,
                "The op table as JSON: schemas, out variants, host form, CUDA capability");

  ExportArgs ex;
  CLI::App* exp = app.add_subcommand("export", "Compile a model into an ExecuTorch .pte program");
  exp->add_option("MODEL", ex.model, "etc.graph JSON, ONNX model or torch.export archive (.pt2)")
      ->required();
  exp->add_option(
      "--input-shape", ex.input_shapes,
      "NAME=AxBxC: sizes for an ONNX or torch.export input with symbolic dims (repeatable)");
  exp->add_option("--absent-input", ex.absent_inputs,
                  "NAME: an ONNX optional input given as absent (repeatable)");
  exp->add_option("-o,--output", ex.output, "Output .pte file")->required();
  exp->add_option("--target", ex.target, "Delegate device: cuda[:N] or cpu (no delegation)")
      ->capture_default_str();
  exp->add_option("--io-device", ex.io_device,
                  "Where graph inputs/outputs of delegates live: host or device")
      ->capture_default_str();
  exp->add_option("--report", ex.report, "Write a JSON report of partitions, copies and memory");
  exp->add_option("--max-copies", ex.max_copies, "Fail if more host<->device copies are needed");
  exp->add_flag("--verify-each", ex.verify_each, "Verify the IR after every pass");
  exp->add_option("--print-ir-after", ex.print_ir_after,
                  "Print the IR after PASS, or after all passes");
  exp->add_option("--passes", ex.passes, "Comma-separated pass pipeline")->capture_default_str();
  exp->add_flag("--time-passes", ex.time_passes, "Print how long each pass took");
  exp->add_option("--min-partition-size", ex.min_partition_size,
                  "Smaller delegate groups stay on the host")
      ->capture_default_str();
  exp->add_option("--exclude-ops", ex.exclude_ops, "Ops never delegated (comma-separated names)")
      ->delimiter(',');

  etc::RunArgs ra;
  double rtol = -1, atol = -1;
  CLI::App* runc = app.add_subcommand("run", "Run a .pte program on the CPU or a GPU");
  runc->add_option("FILE", ra.file, ".pte file")->required();
  runc->add_option("--device", ra.device, "auto, cpu or cuda[:N]")->capture_default_str();
  runc->add_option("--input", ra.inputs, "NAME=FILE.npy or INDEX=FILE.npy (repeatable)");
  runc->add_option("--seed", ra.seed, "Seed for random inputs not given with --input")
      ->capture_default_str();
  runc->add_option("--output-dir", ra.output_dir,
                   "Write outputs as DIR/output_<i>.npy (bfloat16 as float32: NumPy has no "
                   "bfloat16; a float32 .npy also feeds a bfloat16 input)");
  runc->add_flag("--verify", ra.verify,
                 "Compare every output with the CPU reference (exit 3 on mismatch)");
  runc->add_option("--rtol", rtol, "Relative tolerance for --verify (default by dtype)");
  runc->add_option("--atol", atol, "Absolute tolerance for --verify (default by dtype)");
  runc->add_option("--warmup", ra.warmup, "Untimed runs before timing")->capture_default_str();
  runc->add_option("--iterations", ra.iterations, "Timed runs")->capture_default_str();
  runc->add_flag("--json", ra.json, "Print a machine-readable result");
  runc->add_flag("--profile", ra.profile,
                 "Time every instruction in one extra run; table on stderr");
  runc->add_flag("--no-fusion", ra.no_fusion,
                 "Run every instruction as written: no activations or residual adds applied "
                 "as a convolution's epilogue (for comparisons)");
  runc->add_flag("--profile-shapes", ra.profile_shapes,
                 "As --profile, a row per operator and argument shapes");
  runc->add_option("--profile-runs", ra.profile_runs,
                   "With --profile or --profile-shapes: profile N runs, each row's time the "
                   "median of its N (the table's total: their sum)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  runc->add_option("--threads", ra.threads,
                   "CPU kernel threads (default: $ETC_NUM_THREADS, else every core)");
  runc->add_option("--prompt", ra.prompt,
                   "Generate: a decoder's prompt token ids (int64 .npy, [n] or [1, n])");
  runc->add_option("--steps", ra.steps, "Generate: how many tokens (greedy), with --prompt");
  runc->add_flag("--cuda-graphs", ra.cuda_graphs,
                 "With --device cuda: capture each CUDA delegate as a CUDA graph and replay it");

  std::string diff_a, diff_b;
  bool diff_json = false;
  CLI::App* diffc = app.add_subcommand(
      "diff", "Compare two .pte programs semantically (exit 0 equivalent, 1 different)");
  diffc->add_option("A", diff_a, "first .pte")->required();
  diffc->add_option("B", diff_b, "second .pte")->required();
  diffc->add_flag("--json", diff_json, "Machine-readable differences");

  std::string inspect_file, inspect_format = "text";
  CLI::App* insp = app.add_subcommand("inspect", "Print a .pte program (text, json or dot)");
  insp->add_option("FILE", inspect_file, ".pte file")->required();
  insp->add_option("--format", inspect_format, "text, json or dot")
      ->check(CLI::IsMember({"text", "json", "dot"}))
      ->capture_default_str();

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

  if (const char* cap = std::getenv("ETC_MAX_ISA");
      cap != nullptr && *cap != '\0' && !etc::rt::kernels::parse_max_isa(cap).has_value()) {
    return report(
        usage(std::string("$ETC_MAX_ISA is '") + cap + "': expected avx512, avx2 or portable"));
  }
  if (show_version) {
    std::fputs(version_text().c_str(), stdout);
    return 0;
  }
  if (validate->parsed()) return cmd_validate(validate_model, validate_shapes, validate_absent);
  if (ops->parsed()) {
    return ops_onnx    ? cmd_onnx_ops()
           : ops_torch ? cmd_torch_ops()
           : ops_json  ? cmd_ops_json()
                       : cmd_ops();
  }
  if (exp->parsed()) {
    etc::Status s = run_export(ex);
    return s.ok() ? 0 : report(s);
  }
  if (insp->parsed()) return cmd_inspect(inspect_file, inspect_format);
  if (diffc->parsed()) return cmd_diff(diff_a, diff_b, diff_json);
  if (runc->parsed()) {
    if (rtol >= 0) ra.rtol = rtol;
    if (atol >= 0) ra.atol = atol;
    etc::Status s = etc::run_program(ra);
    return s.ok() ? 0 : report(s);
  }
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
