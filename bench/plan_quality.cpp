// plan_quality: how close etc's memory plans come to the lower bound, side by side with
// ExecuTorch's greedy shared-object algorithm, on a suite of generated graphs (MLP chains,
// ResNets, transformer stacks, random DAGs of 10 to 10,000 nodes). Each graph goes through
// "dce,partition,propagate-devices,plan-memory" with --target cpu and --target cuda:0; for
// every planned buffer the tensors (16-byte aligned sizes and lifetimes, read back from the
// planned graph) are planned again directly with plan_greedy_by_size (ours) and
// plan_shared_objects (ExecuTorch's greedy), and compared with plan_lower_bound.
// Prints figures and ratios; never fails on them.
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "export/export_pipeline.h"
#include "graph/verifier.h"
#include "graph_builder.h"
#include "passes/memory_planner.h"

namespace etc::bench {
namespace {

constexpr const char* kPlanningPipeline = "dce,partition,propagate-devices,plan-memory";
constexpr int64_t kAlignment = 16;

struct Model {
  std::string name;
  std::function<Graph()> make;
};

std::vector<Model> suite() {
  std::vector<Model> models;
  models.push_back({"mlp-small", [] { return make_mlp("mlp-small", 32, {784, 512, 256, 10}); }});
  models.push_back({"mlp-wide", [] {
                      return make_mlp("mlp-wide", 128, {1024, 4096, 4096, 1024, 4096, 256, 1000});
                    }});
  models.push_back({"mlp-deep-32", [] {
                      Ints widths = {512};
                      const int64_t cycle[] = {1024, 2048, 768, 3072, 512, 1536, 256, 4096};
                      for (int i = 0; i < 32; ++i)
                        widths.push_back(cycle[i % 8]);
                      return make_mlp("mlp-deep-32", 64, widths);
                    }});
  models.push_back({"resnet18-ish", [] {
                      return make_resnet("resnet18-ish", 8, 224, {2, 2, 2, 2});
                    }});
  models.push_back({"resnet34-ish", [] {
                      return make_resnet("resnet34-ish", 4, 224, {3, 4, 6, 3});
                    }});
  models.push_back({"transformer-4x256",
                    [] { return make_transformer("transformer-4x256", 32, 64, 256, 4, 1024, 4); }});
  models.push_back({"bert-base-ish",
                    [] { return make_transformer("bert-base-ish", 8, 128, 768, 12, 3072, 12); }});
  models.push_back({"gpt2-ish-s1024",
                    [] { return make_transformer("gpt2-ish-s1024", 1, 1024, 768, 12, 3072, 12); }});
  const size_t dag_sizes[] = {10, 100, 1000, 10000};
  for (size_t n : dag_sizes) {
    std::string name = "random-dag-" + std::to_string(n);
    models.push_back(
        {name, [name, n] { return make_random_dag(name, n, static_cast<uint32_t>(1234 + n)); }});
  }
  return models;
}

std::string human_bytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

struct Row {
  std::string graph, target, buffer;
  size_t nodes = 0, tensors = 0;
  int64_t bound = 0, ours = 0, greedy = 0;
  double ours_ms = 0, greedy_ms = 0;
};

int run() {
  const PassRegistry registry = make_pass_registry();
  Result<Pipeline> pipeline = parse_pipeline(kPlanningPipeline, registry);
  if (!pipeline.ok()) die(pipeline.status().to_string());

  std::printf("plan_quality: pipeline \"%s\", alignment %lld bytes\n", kPlanningPipeline,
              static_cast<long long>(kAlignment));
  std::printf(
      "ours = plan_greedy_by_size (etc), greedy = plan_shared_objects (ExecuTorch's "
      "default), bound = plan_lower_bound (peak of simultaneously live bytes)\n\n");
  std::printf("%-18s %-6s %-6s %6s %7s %11s %11s %11s %9s %9s %9s %8s %8s\n", "graph", "target",
              "buffer", "nodes", "tensors", "bound", "ours", "greedy", "ours/bnd", "grdy/bnd",
              "ours/grd", "ours ms", "grdy ms");

  std::vector<Row> rows;
  int problems = 0;
  for (const Model& model : suite()) {
    for (Device target : {Device{}, Device{DeviceType::kCUDA, 0}}) {
      Graph g = model.make();
      const size_t nodes = g.order().size();
      if (Status s = verify_graph(g); !s.ok()) die(model.name + ": " + s.to_string());
      ExportOptions options;
      options.target = target;
      options.memory.alignment = kAlignment;
      ExportReport report;
      PassContext context{options, report};
      Result<PipelineResult> ran = run_pipeline(g, *pipeline, registry, context, {});
      if (!ran.ok()) die(model.name + ": " + ran.status().to_string());

      // The planned tensors of each buffer, in value order as plan-memory collects them.
      std::map<uint32_t, std::vector<PlanTensor>> buffers;
      for (size_t i = 0; i < g.value_slots(); ++i) {
        const Value& v = g.value(ValueId(static_cast<uint32_t>(i)));
        if (v.erased || !v.spec.is_planned()) continue;
        int64_t size = (v.spec.nbytes() + kAlignment - 1) / kAlignment * kAlignment;
        buffers[*v.spec.mem_id].push_back(
            PlanTensor{size, v.spec.lifetime.first, v.spec.lifetime.last});
      }
      for (const ExportReport::Buffer& buf : report.memory) {
        const std::vector<PlanTensor>& tensors = buffers[buf.mem_id];
        Row row;
        row.graph = model.name;
        row.target = to_string(target);
        row.buffer = to_string(buf.device);
        row.nodes = nodes;
        row.tensors = tensors.size();
        row.bound = plan_lower_bound(tensors);
        auto t0 = std::chrono::steady_clock::now();
        BufferPlan ours = plan_greedy_by_size(tensors);
        row.ours_ms = seconds_since(t0) * 1e3;
        t0 = std::chrono::steady_clock::now();
        BufferPlan greedy = plan_shared_objects(tensors);
        row.greedy_ms = seconds_since(t0) * 1e3;
        row.ours = ours.size;
        row.greedy = greedy.size;
        // Cross-checks against what the pass reported; a mismatch means this benchmark
        // rebuilt the tensors differently from plan-memory.
        for (const auto& [what, ok] : std::vector<std::pair<std::string, bool>>{
                 {"verify_plan(ours)", verify_plan(tensors, ours).ok()},
                 {"verify_plan(greedy)", verify_plan(tensors, greedy).ok()},
                 {"lower bound = report", row.bound == buf.lower_bound_bytes},
                 {"greedy = report baseline", row.greedy == buf.baseline_bytes},
                 {"min(ours, greedy) = report planned",
                  std::min(row.ours, row.greedy) == buf.planned_bytes},
                 {"tensor count = report", tensors.size() == buf.tensors}}) {
          if (!ok) {
            std::printf("  !! %s / %s / %s: check failed: %s\n", row.graph.c_str(),
                        row.target.c_str(), row.buffer.c_str(), what.c_str());
            ++problems;
          }
        }
        auto ratio = [](int64_t a, int64_t b) {
          return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 1.0;
        };
        std::printf("%-18s %-6s %-6s %6zu %7zu %11s %11s %11s %9.4f %9.4f %9.4f %8.2f %8.2f\n",
                    row.graph.c_str(), row.target.c_str(), row.buffer.c_str(), row.nodes,
                    row.tensors, human_bytes(row.bound).c_str(), human_bytes(row.ours).c_str(),
                    human_bytes(row.greedy).c_str(), ratio(row.ours, row.bound),
                    ratio(row.greedy, row.bound), ratio(row.ours, row.greedy), row.ours_ms,
                    row.greedy_ms);
        rows.push_back(row);
      }
    }
  }

  // Averages over rows with a non-empty buffer: all rows; rows with more than two tensors
  // (under --target cuda the host and device buffers of a fully delegated graph hold just
  // the input and output and their copies, which any algorithm plans optimally); and the
  // --target cpu rows, where the whole graph is planned on the host.
  struct Summary {
    double avg_ours = 0;
    size_t ours_worse = 0;
  };
  auto summarize = [&](const char* label, auto keep) {
    double sum_ours = 0, sum_greedy = 0, worst = 0;
    size_t n = 0, ours_worse = 0, ours_better = 0;
    for (const Row& r : rows) {
      if (r.bound == 0 || !keep(r)) continue;
      double o = static_cast<double>(r.ours) / static_cast<double>(r.bound);
      sum_ours += o;
      sum_greedy += static_cast<double>(r.greedy) / static_cast<double>(r.bound);
      worst = std::max(worst, o);
      ours_worse += r.ours > r.greedy;
      ours_better += r.ours < r.greedy;
      ++n;
    }
    Summary s{n ? sum_ours / static_cast<double>(n) : 0, ours_worse};
    std::printf(
        "%-28s rows %2zu  avg ours/bound %.4f  avg greedy/bound %.4f  max ours/bound "
        "%.4f  ours<greedy in %zu, ours>greedy in %zu\n",
        label, n, s.avg_ours, n ? sum_greedy / static_cast<double>(n) : 0, worst, ours_better,
        ours_worse);
    return s;
  };
  std::printf("\n");
  Summary all = summarize("all buffers:", [](const Row&) { return true; });
  Summary big = summarize("buffers with > 2 tensors:", [](const Row& r) { return r.tensors > 2; });
  summarize("--target cpu buffers:", [](const Row& r) { return r.target == "cpu"; });
  std::printf("target avg ours/bound <= 1.05: %s (all buffers %.4f, > 2 tensors %.4f)\n",
              all.avg_ours <= 1.05 && big.avg_ours <= 1.05 ? "HOLDS" : "MISSED", all.avg_ours,
              big.avg_ours);
  std::printf(
      "target ours never worse than greedy: %s (greedy_by_size alone is worse in %zu "
      "row%s; plan-memory keeps the smaller plan, so the planned buffer never is)\n",
      all.ours_worse == 0 ? "HOLDS" : "MISSED", all.ours_worse, all.ours_worse == 1 ? "" : "s");
  if (problems > 0) std::printf("%d cross-check(s) failed, see !! lines above\n", problems);
  return 0;
}

}  // namespace
}  // namespace etc::bench

int main() {
  return etc::bench::run();
}
