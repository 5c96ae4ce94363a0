// export_scaling: how the export pipeline's time and peak memory grow with graph size, and
// the JSON reader's throughput. Graphs of 10^3..10^6 nodes repeat a small transformer block
// (graph_builder.h: make_scaling_graph; tiny tensors, so memory is the IR's). Each size runs
// in a forked child so its peak RSS (VmHWM) is its own: the child builds the graph through
// the Graph API (timed), verifies it (timed), then runs kDefaultExportPipeline with
// --target cuda:0 and time_passes, one pass per run_pipeline call so that each pass's time
// reaches the parent at once. Two patterns: every node CUDA-capable (one delegate), and a
// host-only op every few blocks (many delegates and host<->device copies). A stage past the
// limit is killed and reported with the pass it was in, and the pattern stops growing.
// Then the JSON reader: the 10^4 and 10^5-node graphs are written as etc.graph JSON and
// parse_graph_json (which also schedules and verifies) is timed, in MB/s.
//
// Usage: export_scaling [--max-nodes N] [--limit-s S] [--host-every K]
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "export/emitter.h"
#include "export/export_pipeline.h"
#include "format/pte_writer.h"
#include "frontends/json/json_reader.h"
#include "graph/verifier.h"
#include "graph_builder.h"
#include "support/base64.h"

namespace etc::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The second pattern: a host-only op every this many blocks.
constexpr size_t kDefaultHostEvery = 4;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A field of /proc/self/status in KiB (VmHWM: peak resident set, VmRSS: current).
long proc_status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':')
      return std::strtol(line.c_str() + n + 1, nullptr, 10);
  }
  return -1;
}

// ---- etc.graph JSON writer (docs/graph-format.md) ------------------------------------------

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
}

void json_double(std::string& out, double d) {
  if (std::isnan(d)) {
    out += "\"nan\"";
    return;
  }
  if (std::isinf(d)) {
    out += d > 0 ? "\"inf\"" : "\"-inf\"";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  out += buf;
  if (std::strpbrk(buf, ".e") == nullptr) out += ".0";
}

void json_shape(std::string& out, const std::vector<int64_t>& sizes) {
  out += '[';
  for (size_t i = 0; i < sizes.size(); ++i)
    out += (i ? "," : "") + std::to_string(sizes[i]);
  out += ']';
}

void json_arg(std::string& out, const Graph& g, const ArgValue& a) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          out += "null";
        } else if constexpr (std::is_same_v<T, ValueId>) {
          json_string(out, g.value(v).name);
        } else if constexpr (std::is_same_v<T, std::vector<ValueId>>) {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i) out += ',';
            json_string(out, g.value(v[i]).name);
          }
          out += ']';
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (const auto* i = std::get_if<int64_t>(&v.v)) {
            out += std::to_string(*i);
          } else if (const auto* b = std::get_if<bool>(&v.v)) {
            out += *b ? "true" : "false";
          } else {
            json_double(out, std::get<double>(v.v));
          }
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out += std::to_string(v);
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          json_shape(out, v);
        } else if constexpr (std::is_same_v<T, double>) {
          json_double(out, v);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i) {
            if (i) out += ',';
            json_double(out, v[i]);
          }
          out += ']';
        } else if constexpr (std::is_same_v<T, bool>) {
          out += v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          out += '[';
          for (size_t i = 0; i < v.size(); ++i)
            out += std::string(i ? "," : "") + (v[i] ? "true" : "false");
          out += ']';
        } else if constexpr (std::is_same_v<T, std::string>) {
          json_string(out, v);
        } else {
          static_assert(std::is_same_v<T, DType>);
          json_string(out, dtype_name(v));
        }
      },
      a);
}

void json_decl(std::string& out, const Value& v) {
  out += "{\"name\":";
  json_string(out, v.name);
  out += ",\"dtype\":";
  json_string(out, dtype_name(v.spec.dtype));
  out += ",\"shape\":";
  json_shape(out, v.spec.sizes);
}

// One line per input, constant and node; constants carry base64 bytes.
std::string graph_to_json(const Graph& g) {
  std::string out = "{\"format\":\"etc.graph\",\"version\":1,\"name\":";
  json_string(out, g.name);
  out += ",\n\"inputs\":[";
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    out += i ? ",\n" : "\n";
    json_decl(out, g.value(g.inputs()[i]));
    out += '}';
  }
  out += "],\n\"constants\":[";
  for (size_t i = 0; i < g.constants().size(); ++i) {
    const Value& c = g.value(g.constants()[i]);
    out += i ? ",\n" : "\n";
    json_decl(out, c);
    std::span<const uint8_t> bytes = c.spec.constant.bytes();
    out +=
        ",\"data\":\"" +
        base64_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size())) +
        "\"}";
  }
  out += "],\n\"nodes\":[";
  bool first = true;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    const OpSchema& schema = op_info(n.op).schema;
    out += first ? "\n" : ",\n";
    first = false;
    out += "{\"name\":";
    json_string(out, n.name);
    out += ",\"op\":";
    json_string(out, op_info(n.op).name);
    out += ",\"args\":{";
    for (size_t i = 0; i < n.args.size(); ++i) {
      if (i) out += ',';
      json_string(out, schema.args[i].name);
      out += ':';
      json_arg(out, g, n.args[i]);
    }
    out += "},\"outputs\":[";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) out += ',';
      json_string(out, g.value(n.outputs[i]).name);
    }
    out += "]}";
  }
  out += "],\n\"outputs\":[";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    if (i) out += ',';
    json_string(out, g.value(g.outputs()[i]).name);
  }
  out += "]}\n";
  return out;
}

// ---- Child processes ------------------------------------------------------------------------
// A child writes "key value..." lines to a pipe as it goes. The parent gives each stage
// (building, verifying, the pipeline, writing or parsing JSON) `limit_s` seconds; a child
// past it is killed and reported with the stage, and for the pipeline, the pass, it was in.

void send(int fd, const std::string& line) {
  std::string l = line + "\n";
  const char* p = l.data();
  size_t left = l.size();
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w <= 0) _exit(3);
    p += w;
    left -= static_cast<size_t>(w);
  }
}

std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Builds, verifies and exports one graph. The pipeline is kDefaultExportPipeline, run with
// run_pipeline one pass at a time (same registry, context and options; run_pipeline itself
// is just this loop) so each pass's time reaches the parent as soon as it is known and a
// pass that runs past the limit can be named.
void pipeline_child(int fd, size_t nodes, size_t host_every) {
  auto t = Clock::now();
  Graph g = make_scaling_graph(nodes, host_every);
  send(fd, "built " + num(seconds_since(t)) + " " + std::to_string(g.order().size()) + " " +
               std::to_string(g.value_slots()) + " " + std::to_string(proc_status_kib("VmRSS")));
  t = Clock::now();
  if (Status s = verify_graph(g); !s.ok()) {
    send(fd, "error verify_graph: " + s.to_string());
    return;
  }
  send(fd, "verified " + num(seconds_since(t)));
  const PassRegistry registry = make_pass_registry();
  Result<Pipeline> pipeline = parse_pipeline(kDefaultExportPipeline, registry);
  if (!pipeline.ok()) {
    send(fd, "error " + pipeline.status().to_string());
    return;
  }
  ExportOptions options;  // --target cuda:0
  ExportReport report;
  PassContext context{options, report};
  PipelineRunOptions run_options;
  run_options.time_passes = true;
  double total = 0;
  for (const std::string& pass : pipeline->passes) {
    t = Clock::now();
    Result<PipelineResult> ran = run_pipeline(g, Pipeline{{pass}}, registry, context, run_options);
    total += seconds_since(t);
    if (!ran.ok()) {
      send(fd, "error run_pipeline: " + ran.status().to_string());
      return;
    }
    send(fd, "pass " + pass + " " + num(ran->timings.at(0).seconds) + " " +
                 std::to_string(proc_status_kib("VmHWM")));
  }
  // Serialisation, timed like passes: the emitter (graph -> program) and the writer (bytes).
  t = Clock::now();
  Result<pte::File> file = emit_program(g);
  double emit_s = seconds_since(t);
  if (!file.ok()) {
    send(fd, "error emit_program: " + file.status().to_string());
    return;
  }
  send(fd, "pass emit " + num(emit_s) + " " + std::to_string(proc_status_kib("VmHWM")));
  t = Clock::now();
  Result<std::string> bytes = write_pte(*file);
  double write_s = seconds_since(t);
  if (!bytes.ok()) {
    send(fd, "error write_pte: " + bytes.status().to_string());
    return;
  }
  send(fd, "pass write " + num(write_s) + " " + std::to_string(proc_status_kib("VmHWM")));
  total += emit_s + write_s;
  send(fd, "ran " + num(total) + " " + std::to_string(proc_status_kib("VmHWM")) + " " +
               std::to_string(report.partitions.size()) + " " +
               std::to_string(report.copies.size()) + " " + std::to_string(g.order().size()));
}

void json_child(int fd, size_t nodes, size_t host_every) {
  std::string text;
  {
    Graph g = make_scaling_graph(nodes, host_every);
    auto t = Clock::now();
    text = graph_to_json(g);
    send(fd, "written " + num(seconds_since(t)) + " " + std::to_string(text.size()) + " " +
                 std::to_string(g.order().size()));
  }
  auto t = Clock::now();
  Result<Graph> g = parse_graph_json(text, "scaling.json", ".");
  const double parse_s = seconds_since(t);
  if (!g.ok()) {
    send(fd, "error parse_graph_json: " + g.status().to_string());
    return;
  }
  send(fd, "parsed " + num(parse_s) + " " + std::to_string(g->order().size()) + " " +
               std::to_string(proc_status_kib("VmHWM")));
}

struct ChildResult {
  std::vector<std::string> lines;
  bool timed_out = false;
  std::string crashed;  // the signal, if the child died of one
};

// Forks `body` and collects its lines. Every line except "pass ..." starts a new stage with
// a fresh `limit_s`; a stage past its limit gets the child killed.
template <typename Body>
ChildResult run_child(Body body, double limit_s) {
  std::fflush(stdout);
  int fds[2];
  if (pipe(fds) != 0) die("pipe failed");
  pid_t pid = fork();
  if (pid < 0) die("fork failed");
  if (pid == 0) {
    close(fds[0]);
    body(fds[1]);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  std::string partial;
  auto stage_start = Clock::now();
  for (;;) {
    double left_ms = (limit_s - seconds_since(stage_start)) * 1e3;
    if (left_ms <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min(left_ms, 1000.0)) + 1) <= 0) continue;
    char buf[4096];
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;  // the child finished (or died)
    partial.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
      result.lines.push_back(partial.substr(0, nl));
      partial.erase(0, nl + 1);
      if (result.lines.back().compare(0, 5, "pass ") != 0) stage_start = Clock::now();
    }
  }
  if (result.timed_out) kill(pid, SIGKILL);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!result.timed_out && WIFSIGNALED(status)) {
    result.crashed = std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  } else if (!result.timed_out && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    result.lines.push_back("error child exited with status " + std::to_string(status));
  }
  return result;
}

const std::string* find_line(const std::vector<std::string>& lines, const std::string& key) {
  for (const std::string& l : lines) {
    if (l.compare(0, key.size() + 1, key + " ") == 0) return &l;
  }
  return nullptr;
}

const std::string* find_error(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    if (l.compare(0, 6, "error ") == 0) return &l;
  }
  return nullptr;
}

// What the parent knows about one size; a stopped size has the passes that finished, then
// the one that was still running (seconds = -1).
struct SizeResult {
  size_t nodes = 0, values = 0, delegates = 0, copies = 0;
  double build_s = 0, verify_s = 0, pipeline_s = 0;
  double built_mib = 0, peak_mib = 0;
  bool stopped = false;
  std::vector<std::pair<std::string, double>> passes;
};

SizeResult parse_result(const ChildResult& child, const std::vector<std::string>& pipeline) {
  SizeResult r;
  if (const std::string* l = find_line(child.lines, "built")) {
    long kib = 0;
    std::istringstream(l->substr(6)) >> r.build_s >> r.nodes >> r.values >> kib;
    r.built_mib = static_cast<double>(kib) / 1024;
  }
  if (const std::string* l = find_line(child.lines, "verified"))
    r.verify_s = std::stod(l->substr(9));
  std::map<std::string, int> seen;
  auto label = [&](const std::string& pass) {
    int k = ++seen[pass];
    return k > 1 ? pass + " (" + std::to_string(k) + ")" : pass;
  };
  for (const std::string& l : child.lines) {
    if (l.compare(0, 5, "pass ") != 0) continue;
    std::istringstream in(l.substr(5));
    std::string name;
    double s = 0;
    long peak_kib = 0;
    in >> name >> s >> peak_kib;
    r.passes.emplace_back(label(name), s);
    r.peak_mib = static_cast<double>(peak_kib) / 1024;
  }
  const std::string* ran = find_line(child.lines, "ran");
  if (ran == nullptr) {
    r.stopped = true;
    if (r.passes.size() < pipeline.size())
      r.passes.emplace_back(label(pipeline[r.passes.size()]), -1);
    for (const auto& [name, s] : r.passes)
      r.pipeline_s += std::max(s, 0.0);
    return r;
  }
  long peak_kib = 0;
  size_t final_nodes = 0;
  std::istringstream(ran->substr(4)) >> r.pipeline_s >> peak_kib >> r.delegates >> r.copies >>
      final_nodes;
  r.peak_mib = static_cast<double>(peak_kib) / 1024;
  return r;
}

void print_pass_table(const std::vector<SizeResult>& results, double limit_s) {
  std::printf(
      "\nper-pass seconds (growth vs the previous size in parentheses; \"> s (killed)\": still "
      "running when the limit ran out):\n%-22s",
      "pass");
  for (const SizeResult& r : results)
    std::printf(" %18zu", r.nodes);
  std::printf("\n");
  for (size_t p = 0; p < results[0].passes.size(); ++p) {
    std::printf("%-22s", results[0].passes[p].first.c_str());
    for (size_t i = 0; i < results.size(); ++i) {
      char cell[48] = "-";
      if (p < results[i].passes.size()) {
        double s = results[i].passes[p].second;
        double prev =
            i > 0 && p < results[i - 1].passes.size() ? results[i - 1].passes[p].second : -1;
        if (s < 0) {
          std::snprintf(cell, sizeof cell, "> %.1f (killed)",
                        std::max(0.0, limit_s - results[i].pipeline_s));
        } else if (prev < 1e-3) {
          std::snprintf(cell, sizeof cell, "%.4f", s);
        } else {
          std::snprintf(cell, sizeof cell, "%.4f (%.1fx)", s, s / prev);
        }
      }
      std::printf(" %18s", cell);
    }
    std::printf("\n");
  }
}

void run_pattern(const std::vector<size_t>& sizes, size_t host_every, double limit_s) {
  const PassRegistry registry = make_pass_registry();
  const std::vector<std::string> pipeline =
      parse_pipeline(kDefaultExportPipeline, registry)->passes;
  if (host_every == 0) {
    std::printf("\n== pattern: every node CUDA-capable (one delegate) ==\n");
  } else {
    std::printf(
        "\n== pattern: a host-only float64 round trip every %zu blocks (many delegates "
        "and copies) ==\n",
        host_every);
  }
  std::printf("%9s %8s %8s %11s %8s %8s %8s %11s %9s %7s %10s\n", "nodes", "values", "build s",
              "RSS built", "verify s", "pipe s", "us/node", "peak RSS", "delegates", "copies",
              "pipe ratio");
  std::vector<SizeResult> results;
  for (size_t target : sizes) {
    ChildResult child;
    // A crash is a bug in etc (reported as such); the size is retried with one more block,
    // a slightly different graph, so it still gets a measurement.
    for (int attempt = 0; attempt < 3; ++attempt) {
      child = run_child([&](int fd) { pipeline_child(fd, target, host_every); }, limit_s);
      if (child.crashed.empty()) break;
      SizeResult partial = parse_result(child, pipeline);
      std::printf("%9zu  CRASHED with signal %s in %s; retrying with one more block\n",
                  partial.nodes ? partial.nodes : target, child.crashed.c_str(),
                  find_line(child.lines, "verified")
                      ? ("pass '" + partial.passes.back().first + "'").c_str()
                      : "building or verifying the graph");
      target += kScalingBlockNodes;
    }
    if (const std::string* error = find_error(child.lines)) {
      std::printf("%9zu  %s; not growing further\n", target, error->c_str());
      break;
    }
    if (!child.crashed.empty()) {
      std::printf("%9zu  crashed again; not growing further\n", target);
      break;
    }
    SizeResult r = parse_result(child, pipeline);
    if (r.stopped) {
      const char* stage = find_line(child.lines, "verified") ? nullptr
                          : find_line(child.lines, "built")  ? "verify_graph"
                                                             : "building the graph";
      if (stage != nullptr) {
        std::printf("%9zu  STOPPED: %s ran past the %g s limit; not growing further\n",
                    r.nodes ? r.nodes : target, stage, limit_s);
      } else {
        std::printf(
            "%9zu  STOPPED: the pipeline ran past the %g s limit, killed in pass '%s'; "
            "not growing further\n",
            r.nodes, limit_s, r.passes.back().first.c_str());
        std::printf(
            "%9s  (build %.3f s, RSS built %.1f MiB, verify %.3f s; the passes before '%s' "
            "took %.3f s, peak RSS by then %.1f MiB)\n",
            "", r.build_s, r.built_mib, r.verify_s, r.passes.back().first.c_str(), r.pipeline_s,
            r.peak_mib);
        results.push_back(std::move(r));
      }
      break;
    }
    char ratio[32] = "-";
    if (!results.empty() && results.back().pipeline_s > 0) {
      std::snprintf(ratio, sizeof ratio, "%.1fx", r.pipeline_s / results.back().pipeline_s);
    }
    std::printf("%9zu %8zu %8.3f %7.1f MiB %8.3f %8.3f %8.2f %7.1f MiB %9zu %7zu %10s\n", r.nodes,
                r.values, r.build_s, r.built_mib, r.verify_s, r.pipeline_s,
                r.pipeline_s / static_cast<double>(r.nodes) * 1e6, r.peak_mib, r.delegates,
                r.copies, ratio);
    results.push_back(std::move(r));
  }
  if (!results.empty()) print_pass_table(results, limit_s);
}

void run_json(const std::vector<size_t>& sizes, size_t host_every, double limit_s) {
  std::printf("\n== JSON reader: parse_graph_json (parse, schedule, verify) ==\n");
  std::printf("%9s %9s %9s %9s %9s %11s %11s\n", "nodes", "JSON MB", "write s", "parse s", "MB/s",
              "nodes/s", "peak RSS");
  for (size_t target : sizes) {
    ChildResult child = run_child([&](int fd) { json_child(fd, target, host_every); }, limit_s);
    const std::string* written = find_line(child.lines, "written");
    const std::string* parsed = find_line(child.lines, "parsed");
    if (const std::string* error = find_error(child.lines)) {
      std::printf("%9zu  %s\n", target, error->c_str());
      return;
    }
    if (!written || !parsed) {
      std::printf("%9zu  %s %s\n", target, written ? "parsing" : "writing",
                  child.timed_out ? "ran past the limit" : ("crashed: " + child.crashed).c_str());
      return;
    }
    double write_s = 0, parse_s = 0;
    size_t bytes = 0, nodes = 0;
    long peak_kib = 0;
    std::istringstream(written->substr(8)) >> write_s >> bytes >> nodes;
    std::istringstream(parsed->substr(7)) >> parse_s >> nodes >> peak_kib;
    const double mb = static_cast<double>(bytes) / 1e6;
    std::printf("%9zu %9.2f %9.3f %9.3f %9.1f %11.0f %7.1f MiB\n", nodes, mb, write_s, parse_s,
                mb / parse_s, static_cast<double>(nodes) / parse_s,
                static_cast<double>(peak_kib) / 1024);
  }
}

int run(int argc, char** argv) {
  size_t max_nodes = 1000000;
  double limit_s = 60;
  long host_every = -1;  // -1: both patterns
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--max-nodes") {
      max_nodes = std::strtoull(next(), nullptr, 10);
    } else if (a == "--limit-s") {
      limit_s = std::strtod(next(), nullptr);
    } else if (a == "--host-every") {
      host_every = std::strtol(next(), nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: export_scaling [--max-nodes N] [--limit-s S] [--host-every K]\n"
                   "  --max-nodes N   largest graph (default 1000000; sizes 10^3, 10^4, ...)\n"
                   "  --limit-s S     seconds allowed per stage of one size (default 60)\n"
                   "  --host-every K  only the pattern with a host op every K blocks (0: none)\n");
      return 2;
    }
  }
  std::vector<size_t> sizes;
  for (size_t n = 1000; n <= max_nodes; n *= 10)
    sizes.push_back(n);
  std::printf("export_scaling: %s, --target cuda:0, up to %zu nodes, %g s limit per stage\n",
              kDefaultExportPipeline, max_nodes, limit_s);
  std::printf(
      "build = the Graph API, verify = verify_graph, pipe = run_pipeline (sum over the "
      "passes), peak RSS = the size's own process (VmHWM),\npipe ratio = pipe s / the "
      "previous size's (nodes grow 10x: linear is ~10x)\n");
  if (host_every < 0) {
    run_pattern(sizes, 0, limit_s);
    run_pattern(sizes, kDefaultHostEvery, limit_s);
  } else {
    run_pattern(sizes, static_cast<size_t>(host_every), limit_s);
  }
  std::vector<size_t> json_sizes;
  for (size_t n : {size_t{10000}, size_t{100000}})
    if (n <= max_nodes) json_sizes.push_back(n);
  if (!json_sizes.empty())
    run_json(json_sizes, host_every < 0 ? kDefaultHostEvery : static_cast<size_t>(host_every),
             limit_s);
  return 0;
}

}  // namespace
}  // namespace etc::bench

int main(int argc, char** argv) {
  return etc::bench::run(argc, argv);
}
