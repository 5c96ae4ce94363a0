// Pipelines of passes as data. A PassRegistry maps names to passes (filled by explicit
// register_* calls, never by static constructors); a Pipeline is a list of names that
// prints as "a,b,c" and parses back from that string, so any run can be reproduced with
// --passes. The PassManager runs a pipeline, verifying the IR after each pass when asked,
// dumping it after chosen passes and timing each pass.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "passes/pass.h"

namespace etc {

struct PassInfo {
  std::string name;
  std::string description;
  PassFn run = nullptr;
};

class PassRegistry {
 public:
  // Fails on a duplicate name.
  Status add(PassInfo info);
  const PassInfo* find(std::string_view name) const;
  const std::vector<PassInfo>& passes() const { return passes_; }

 private:
  std::vector<PassInfo> passes_;
};

struct Pipeline {
  std::vector<std::string> passes;
  std::string to_string() const;  // "a,b,c"
};

// Parses "a,b,c" against `registry`; unknown names are errors listing the known ones.
Result<Pipeline> parse_pipeline(std::string_view text, const PassRegistry& registry);

struct PipelineRunOptions {
  bool verify_each = false;    // run the verifier after every pass
  std::string print_ir_after;  // a pass name, "all", or empty
  bool time_passes = false;
  // Called before each pass with its name, for a front end that shows progress.
  std::function<void(const std::string& pass)> before_pass;
};

struct PassTiming {
  std::string pass;
  double seconds = 0;
  bool changed = false;
};

struct PipelineResult {
  std::vector<PassTiming> timings;
  std::string ir_dumps;  // what --print-ir-after asked for, in order
  // The timing table for --time-passes.
  std::string timing_table() const;
};

// Runs `pipeline` on `graph`. A failing pass, or a verifier failure after a pass, stops the
// run; the error says which pass. Verifier failures after a pass are internal errors (the
// pass broke an invariant), except that the input is verified before the first pass.
Result<PipelineResult> run_pipeline(Graph& graph, const Pipeline& pipeline,
                                    const PassRegistry& registry, PassContext& context,
                                    const PipelineRunOptions& options);

}  // namespace etc
