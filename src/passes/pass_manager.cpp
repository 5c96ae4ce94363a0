#include "passes/pass_manager.h"

#include <cstdio>

#include "graph/printer.h"
#include "graph/verifier.h"

namespace etc {

Status PassRegistry::add(PassInfo info) {
  if (find(info.name) != nullptr)
    return internal_error("pass '" + info.name + "' is registered twice");
  passes_.push_back(std::move(info));
  return Status();
}

const PassInfo* PassRegistry::find(std::string_view name) const {
  for (const PassInfo& p : passes_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string Pipeline::to_string() const {
  std::string s;
  for (const std::string& p : passes)
    s += (s.empty() ? "" : ",") + p;
  return s;
}

Result<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry) {
  Pipeline p;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view name = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!name.empty() && name.front() == ' ')
      name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ')
      name.remove_suffix(1);
    if (name.empty())
      return Status(ErrorCode::kUsage, "empty pass name in pipeline '" + std::string(text) + "'");
    if (registry.find(name) == nullptr) {
      std::string known;
      for (const PassInfo& info : registry.passes())
        known += (known.empty() ? "" : ", ") + info.name;
      return Status(ErrorCode::kUsage,
                    "unknown pass '" + std::string(name) + "' (known passes: " + known + ")");
    }
    p.passes.emplace_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return p;
}

std::string PipelineResult::timing_table() const {
  double total = 0;
  for (const PassTiming& t : timings)
    total += t.seconds;
  std::string out = "pass                      time (ms)   share  changed\n";
  char line[128];
  for (const PassTiming& t : timings) {
    std::snprintf(line, sizeof line, "%-24s %10.3f  %5.1f%%  %s\n", t.pass.c_str(), t.seconds * 1e3,
                  total > 0 ? 100.0 * t.seconds / total : 0.0, t.changed ? "yes" : "no");
    out += line;
  }
  std::snprintf(line, sizeof line, "%-24s %10.3f\n", "total", total * 1e3);
  return out + line;
}

Result<PipelineResult> run_pipeline(Graph& graph, const Pipeline& pipeline,
                                    const PassRegistry& registry, PassContext& context,
                                    const PipelineRunOptions& options) {
  PipelineResult result;
  if (options.verify_each) {
    ETC_RETURN_IF_ERROR_CTX(verify_graph(graph), "while verifying the input graph");
  }
  for (const std::string& name : pipeline.passes) {
    const PassInfo* pass = registry.find(name);
    if (pass == nullptr) return internal_error("pass '" + name + "' is not registered");
    if (options.before_pass) options.before_pass(name);
    auto start = std::chrono::steady_clock::now();
    Result<bool> changed = pass->run(graph, context);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!changed.ok())
      return std::move(changed).take_status().add_context("in pass '" + name + "'");
    result.timings.push_back(PassTiming{name, seconds, *changed});
    if (options.verify_each) {
      Status s = verify_graph(graph);
      if (!s.ok()) {
        return Status(ErrorCode::kInternal,
                      "the IR is invalid after pass '" + name + "': " + s.to_string());
      }
    }
    if (options.print_ir_after == "all" || options.print_ir_after == name) {
      result.ir_dumps +=
          "// ----- IR after " + name + (*changed ? "" : " (unchanged)") + " -----\n";
      if (*changed || options.print_ir_after == name) result.ir_dumps += print_graph(graph);
    }
  }
  return result;
}

}  // namespace etc
