#include "run_command.h"

#include "runtime/kernels/gemm.h"
#include "runtime/kernels/parallel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/runtimes.h"
#include "format/pte_reader.h"
#include "graph/tensor_spec.h"
#include "runtime/method.h"
#include "runtime/npy.h"
#include "runtime/runtime_env.h"
#include "runtime/session.h"

#ifdef ETC_WITH_CUDA
#include "backends/cuda/runtime/cuda_runtime_env.h"  // graph_counts
#endif

namespace etc {
namespace {

// The runtime's session API (runtime/session.h) does the running; this file parses, prints
// and compares.
using rt::check_decoder_signature;
using rt::generate;
using rt::Generation;
using rt::HostTensor;
using rt::IoBuffers;
using rt::last_rows;
using rt::run_method;
using rt::Timings;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Tolerance {
  double atol, rtol;
};

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::kFloat16:
      return {1e-3, 1e-3};
    case DType::kBFloat16:
      return {1e-2, 1e-2};
    case DType::kFloat32:
      return {1e-4, 1e-5};
    case DType::kFloat64:
      return {1e-8, 1e-10};
    default:
      return {0, 0};
  }
}

std::string random_bytes(DType t, int64_t n, std::mt19937_64& rng) {
  std::string out(static_cast<size_t>(n * dtype_size(t)), '\0');
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  for (int64_t i = 0; i < n; ++i) {
    char* p = out.data() + i * dtype_size(t);
    double v = uni(rng);
    if (dtype_is_float(t)) {
      store_float_as(t, v, p);
      continue;
    }
    switch (t) {
      case DType::kBool:
        *p = v > 0;
        break;
      default: {
        // Small non-negative integers: valid as indices for most tables.
        int64_t k = static_cast<int64_t>(rng() % 2);
        std::memcpy(p, &k, static_cast<size_t>(dtype_size(t)));
      }
    }
  }
  return out;
}

// Input and output names stored by etc export, if the program has them.
std::pair<std::vector<std::string>, std::vector<std::string>> io_names(const pte::File& file) {
  auto bytes = file.named_bytes(std::string(pte::kIoNamesKey) + "forward");
  if (!bytes) return {};
  nlohmann::json j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {};
  std::vector<std::string> in, out;
  for (const auto& n : j.value("inputs", nlohmann::json::array())) {
    if (n.is_string()) in.push_back(n.get<std::string>());
  }
  for (const auto& n : j.value("outputs", nlohmann::json::array())) {
    if (n.is_string()) out.push_back(n.get<std::string>());
  }
  return {in, out};
}

Result<std::vector<HostTensor>> prepare_inputs(const RunArgs& args, const rt::Method& m,
                                               const std::vector<std::string>& names) {
  std::vector<std::optional<HostTensor>> given(m.num_inputs());
  for (const std::string& spec : args.inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(ErrorCode::kUsage,
                    "--input expects NAME=FILE.npy or INDEX=FILE.npy, got '" + spec + "'");
    }
    std::string key = spec.substr(0, eq), path = spec.substr(eq + 1);
    size_t index = 0;
    bool numeric = std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (numeric) {
      index = std::stoul(key);
    } else {
      auto it = std::find(names.begin(), names.end(), key);
      if (it == names.end()) {
        std::string list;
        for (const auto& n : names)
          list += (list.empty() ? "" : ", ") + n;
        return Status(ErrorCode::kUsage,
                      "--input: the program has no input named '" + key + "'" +
                          (names.empty() ? " (it stores no input names: use the index)"
                                         : " (inputs: " + list + ")"));
      }
      index = static_cast<size_t>(it - names.begin());
    }
    if (index >= m.num_inputs()) {
      return Status(ErrorCode::kUsage, "--input: input index " + key +
                                           " is out of range (the program has " +
                                           std::to_string(m.num_inputs()) + " inputs)");
    }
    ETC_ASSIGN_OR_RETURN(rt::NpyArray a, rt::read_npy(path));
    const rt::TensorView& want = m.input(index);
    const std::vector<int64_t>& bound = m.input_bound(index);
    bool fits = a.shape == bound;
    if (m.input_is_dynamic(index) && a.shape.size() == bound.size()) {
      fits = true;  // dynamic-bound: each dim at most its bound
      for (size_t d = 0; d < bound.size(); ++d)
        fits = fits && a.shape[d] <= bound[d];
    }
    // NumPy has no bfloat16: a float32 file feeds a bfloat16 input, rounded to nearest even.
    if (want.dtype == DType::kBFloat16 && a.dtype == DType::kFloat32 && fits) {
      std::string narrowed(a.data.size() / 2, '\0');
      for (size_t k = 0; k < a.data.size() / 4; ++k) {
        float v = 0;
        std::memcpy(&v, a.data.data() + 4 * k, 4);
        store_float_as(DType::kBFloat16, v, narrowed.data() + 2 * k);
      }
      std::fprintf(stderr, "etc: input %s: float32 %s rounded to bfloat16 (nearest even)\n",
                   key.c_str(), path.c_str());
      a.dtype = DType::kBFloat16;
      a.data = std::move(narrowed);
    }
    if (a.dtype != want.dtype || !fits) {
      return invalid_input("input " + key + " must be " + std::string(dtype_name(want.dtype)) +
                               shape_to_string(bound) +
                               (m.input_is_dynamic(index) ? " or smaller (dynamic-bound)" : "") +
                               ", but " + path + " holds " + std::string(dtype_name(a.dtype)) +
                               shape_to_string(a.shape),
                           Location{.file = path});
    }
    given[index] = HostTensor{a.dtype, a.shape, std::move(a.data)};
  }
  std::mt19937_64 rng(args.seed);
  std::vector<HostTensor> out;
  for (size_t i = 0; i < m.num_inputs(); ++i) {
    if (given[i]) {
      out.push_back(std::move(*given[i]));
    } else {
      const rt::TensorView& t = m.input(i);
      out.push_back(HostTensor{t.dtype, t.sizes, random_bytes(t.dtype, t.numel(), rng)});
    }
  }
  return out;
}

struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::string fnv(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

struct Comparison {
  double max_abs = 0, max_rel = 0;
  int64_t mismatches = 0;
};

Comparison compare(const HostTensor& got, const HostTensor& want, Tolerance tol) {
  Comparison c;
  int64_t n = static_cast<int64_t>(got.bytes.size()) / dtype_size(got.dtype);
  for (int64_t i = 0; i < n; ++i) {
    double a = load_as_double(got.dtype, got.bytes.data() + i * dtype_size(got.dtype));
    double b = load_as_double(want.dtype, want.bytes.data() + i * dtype_size(want.dtype));
    if (a == b || (std::isnan(a) && std::isnan(b))) continue;  // equal infinities match too
    double abs = std::fabs(a - b);
    double rel = abs / std::max(std::fabs(b), 1e-30);
    if (std::isnan(abs)) abs = rel = INFINITY;
    c.max_abs = std::max(c.max_abs, abs);
    if (b != 0) c.max_rel = std::max(c.max_rel, rel);
    if (abs > tol.atol + tol.rtol * std::fabs(b)) ++c.mismatches;
  }
  return c;
}

// With --cuda-graphs on a CUDA device: how many graphs the delegates captured and how many
// calls replayed one (the device check asserts the replays); null otherwise.
nlohmann::json graph_counts_json(const RunArgs& args, Device device,
                                 const rt::OwnedRuntime& runtime) {
#ifdef ETC_WITH_CUDA
  if (args.cuda_graphs && device.type == DeviceType::kCUDA) {
    const cuda::GraphCountsSummary c = cuda::graph_counts(runtime);
    return {{"captures", c.captures},
            {"replays", c.replays},
            {"plain_runs", c.plain},
            {"failed_captures", c.failed}};
  }
#endif
  (void)args;
  (void)device;
  (void)runtime;
  return nullptr;
}

Status run_generation(const RunArgs& args, const pte::File& file, rt::Method& method,
                      const rt::RuntimeEnv& env, Device device, double load_seconds,
                      const std::function<Status()>& sync, const rt::OwnedRuntime& runtime) {
  if (args.steps < 1) return Status(ErrorCode::kUsage, "--steps must be >= 1");
  if (args.prompt.empty()) return Status(ErrorCode::kUsage, "--steps needs --prompt FILE.npy");
  ETC_RETURN_IF_ERROR(check_decoder_signature(method).add_location(Location{.file = args.file}));
  auto [in_names, out_names] = io_names(file);
  for (const std::string& spec : args.inputs) {
    const std::string key = spec.substr(0, spec.find('='));
    if (key == "0" || key == "1" ||
        (in_names.size() >= 2 && (key == in_names[0] || key == in_names[1]))) {
      return Status(ErrorCode::kUsage,
                    "--input " + key +
                        ": the token ids and positions come from --prompt and the "
                        "generated tokens; --input sets the other inputs");
    }
  }
  ETC_ASSIGN_OR_RETURN(std::vector<HostTensor> fixed, prepare_inputs(args, method, in_names));
  ETC_ASSIGN_OR_RETURN(rt::NpyArray p, rt::read_npy(args.prompt));
  if ((p.dtype != DType::kInt64 && p.dtype != DType::kInt32) || p.shape.empty() ||
      p.shape.size() > 2 || (p.shape.size() == 2 && p.shape[0] != 1) || p.shape.back() < 1) {
    return invalid_input(
        "the prompt must be int64 or int32 token ids of shape [n] or [1, n], n "
        ">= 1; " +
            args.prompt + " holds " + std::string(dtype_name(p.dtype)) + shape_to_string(p.shape),
        Location{.file = args.prompt});
  }
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < p.shape.back(); ++i) {
    prompt.push_back(
        static_cast<int64_t>(load_as_double(p.dtype, p.data.data() + i * dtype_size(p.dtype))));
  }
  std::unique_ptr<rt::OwnedRuntime> ref_rt;
  std::unique_ptr<rt::Method> ref;
  rt::RuntimeEnv ref_env;
  std::vector<float> ref_logits;
  if (args.verify) {
    ETC_ASSIGN_OR_RETURN(ref_rt, rt::make_cpu_runtime());
    ref_env = ref_rt->env();
    ref_env.fuse_epilogues = false;  // the reference runs every instruction as written
    ETC_ASSIGN_OR_RETURN(ref, rt::Method::load(file, 0, ref_env));
  }
  // --warmup N: N untimed generations first (the first call packs the weights).
  for (int w = 0; w < args.warmup; ++w) {
    ETC_RETURN_IF_ERROR(
        generate(method, env, prompt, args.steps, fixed, sync, nullptr, nullptr, nullptr)
            .take_status());
  }
  // --iterations N: N timed generations (the same tokens each time); the prefill and the
  // per-token times are medians over all of them, the outputs the last one's.
  std::vector<double> prefills, decodes;
  Generation g;
  for (int it = 0; it < args.iterations; ++it) {
    const bool last = it + 1 == args.iterations;
    ETC_ASSIGN_OR_RETURN(
        g, generate(method, env, prompt, args.steps, fixed, sync, last ? ref.get() : nullptr,
                    last && ref ? &ref_env : nullptr, &ref_logits));
    double total = 0;
    for (double s : g.prefill)
      total += s;
    prefills.push_back(total);
    decodes.insert(decodes.end(), g.decode.begin(), g.decode.end());
  }
  Comparison cmp;
  bool mismatch = false;
  if (args.verify) {
    Tolerance tol = default_tolerance(DType::kFloat32);
    tol.atol = args.atol.value_or(1e-3);
    tol.rtol = args.rtol.value_or(1e-3);
    HostTensor got{
        DType::kFloat32,
        {},
        std::string(reinterpret_cast<const char*>(g.logits.data()), g.logits.size() * 4)};
    HostTensor want{
        DType::kFloat32,
        {},
        std::string(reinterpret_cast<const char*>(ref_logits.data()), ref_logits.size() * 4)};
    cmp = compare(got, want, tol);
    mismatch = cmp.mismatches > 0;
  }
  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    std::string ids(reinterpret_cast<const char*>(g.ids.data()), g.ids.size() * 8);
    ETC_RETURN_IF_ERROR(
        rt::write_npy(args.output_dir + "/generated_ids.npy",
                      rt::NpyArray{DType::kInt64, {static_cast<int64_t>(g.ids.size())}, ids}));
    std::string logits(reinterpret_cast<const char*>(g.logits.data()), g.logits.size() * 4);
    const auto rows = static_cast<int64_t>(g.logits.size()) / std::max<int64_t>(g.vocab, 1);
    ETC_RETURN_IF_ERROR(rt::write_npy(args.output_dir + "/logits.npy",
                                      rt::NpyArray{DType::kFloat32, {rows, g.vocab}, logits}));
    for (size_t i = 0; i < g.last.size(); ++i) {
      ETC_RETURN_IF_ERROR(
          rt::write_npy(args.output_dir + "/output_" + std::to_string(i) + ".npy",
                        rt::NpyArray{g.last[i].dtype, g.last[i].shape, g.last[i].bytes}));
    }
  }
  const double prefill = stats(prefills).median;
  Stats decode = stats(decodes);
  const double tokens_per_s = decode.median > 0 ? 1.0 / decode.median : 0.0;
  if (args.json) {
    nlohmann::json j;
    j["file"] = args.file;
    j["device"] = to_string(device);
    j["prompt_tokens"] = prompt.size();
    j["generated_ids"] = g.ids;
    j["cpu_threads"] = rt::kernels::num_threads();
    j["timing_ms"] = {{"load", load_seconds * 1e3},
                      {"prefill_total", prefill * 1e3},
                      {"decode_median", decode.median * 1e3},
                      {"decode_min", decode.min * 1e3},
                      {"decode_max", decode.max * 1e3}};
    j["decode_tokens_per_second"] = tokens_per_s;
    if (nlohmann::json counts = graph_counts_json(args, device, runtime); !counts.is_null())
      j["cuda_graphs"] = counts;
    if (args.verify) {
      j["verified"] = !mismatch;
      j["max_abs_error"] = cmp.max_abs;
      j["mismatches"] = cmp.mismatches;
    }
    std::puts(j.dump(2).c_str());
  } else {
    std::string ids;
    for (int64_t id : g.ids)
      ids += (ids.empty() ? "" : " ") + std::to_string(id);
    std::printf("generated %zu tokens on %s after a %zu-token prompt: %s\n", g.ids.size(),
                to_string(device).c_str(), prompt.size(), ids.c_str());
    std::printf(
        "timing (ms): load %.3f; prefill %.3f (%zu calls); decode per token median %.3f "
        "(%.3f-%.3f), %.1f tokens/s\n",
        load_seconds * 1e3, prefill * 1e3, g.prefill.size(), decode.median * 1e3, decode.min * 1e3,
        decode.max * 1e3, tokens_per_s);
    if (args.verify) {
      std::printf("verify: %s (logits of %zu calls, max abs error %.3g, %lld mismatches)\n",
                  mismatch ? "MISMATCH" : "every step matches the CPU reference",
                  g.logits.size() / static_cast<size_t>(std::max<int64_t>(g.vocab, 1)), cmp.max_abs,
                  static_cast<long long>(cmp.mismatches));
    }
  }
  if (mismatch)
    return Status(ErrorCode::kVerifyMismatch, "generation differs from the CPU reference");
  return Status();
}

}  // namespace

Status run_program(const RunArgs& args) {
  std::string note;
  ETC_ASSIGN_OR_RETURN(Device device, choose_device(args.device, "--device", &note));
  if (!note.empty() && !args.json) std::fprintf(stderr, "etc: %s\n", note.c_str());
  if (args.iterations < 1 || args.warmup < 0)
    return Status(ErrorCode::kUsage, "--iterations must be >= 1 and --warmup >= 0");
  if (args.threads < 0) return Status(ErrorCode::kUsage, "--threads must be >= 1 (0: all cores)");
  rt::kernels::set_num_threads(args.threads);
  auto t_load = Clock::now();
  ETC_ASSIGN_OR_RETURN(pte::File file, read_pte_file(args.file));
  ETC_ASSIGN_OR_RETURN(std::unique_ptr<rt::OwnedRuntime> runtime,
                       make_runtime(device, RuntimeOptions{.cuda_graphs = args.cuda_graphs}));
  rt::RuntimeEnv env = runtime->env();
  env.fuse_epilogues = !args.no_fusion;
  std::function<Status()> sync = device_sync(device, *runtime);
  Result<std::unique_ptr<rt::Method>> loaded = rt::Method::load(file, 0, env);
  if (!loaded.ok())
    return std::move(loaded).take_status().add_location(Location{.file = args.file});
  std::unique_ptr<rt::Method> method = std::move(loaded).value();
  Timings timings;
  timings.load = seconds_since(t_load);
  if (args.steps != 0 || !args.prompt.empty())
    return run_generation(args, file, *method, env, device, timings.load, sync, *runtime);
  auto [in_names, out_names] = io_names(file);
  ETC_ASSIGN_OR_RETURN(std::vector<HostTensor> inputs, prepare_inputs(args, *method, in_names));
  ETC_ASSIGN_OR_RETURN(
      std::vector<HostTensor> outputs,
      run_method(*method, env, inputs, args.warmup, args.iterations, &timings, sync));
  if (args.profile || args.profile_shapes) {
    // One profile per run; a row's time is the median of its runs' (one run of a noisy
    // machine puts a layer anywhere in its spread), its calls and work those of one run.
    std::vector<rt::Method::Profile> runs(static_cast<size_t>(std::max(1, args.profile_runs)));
    for (rt::Method::Profile& profile : runs) {
      method->set_profile(&profile, args.profile_shapes);
      Timings ignored;
      Status st = run_method(*method, env, inputs, 0, 1, &ignored, sync).take_status();
      method->set_profile(nullptr);
      ETC_RETURN_IF_ERROR(st);
    }
    rt::Method::Profile profile = runs.front();
    for (auto& [name, t] : profile) {
      std::vector<double> ms;
      for (const rt::Method::Profile& r : runs) {
        auto it = r.find(name);
        ms.push_back(it == r.end() ? 0.0 : it->second.ms);
      }
      t.ms = stats(std::move(ms)).median;  // as the run's timings
    }
    std::vector<std::pair<std::string, rt::Method::OpTime>> rows(profile.begin(), profile.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0, flops = 0, flop_ms = 0;
    for (const auto& r : rows) {
      total += r.second.ms;
      flops += r.second.flops;
      if (r.second.flops > 0) flop_ms += r.second.ms;
    }
    std::fprintf(stderr,
                 "profile (%s, %.3f ms in instructions; convolutions and matrix products: "
                 "%.4g GFLOP, %.4g GFLOP/s in those ops, %.4g GFLOP/s over the run):\n",
                 runs.size() == 1 ? "one run"
                                  : ("medians of " + std::to_string(runs.size()) + " runs").c_str(),
                 total, flops / 1e9, flop_ms > 0 ? flops / 1e6 / flop_ms : 0.0,
                 total > 0 ? flops / 1e6 / total : 0.0);
    for (const auto& [name, t] : rows) {
      char rate[48] = "";
      if (t.flops > 0 && t.ms > 0)
        std::snprintf(rate, sizeof rate, " %.4g GFLOP/s", t.flops / 1e6 / t.ms);
      std::fprintf(stderr, "  %9.3f ms %5.1f%% %5llu x  %s%s\n", t.ms,
                   total > 0 ? 100 * t.ms / total : 0.0, static_cast<unsigned long long>(t.calls),
                   name.c_str(), rate);
    }
  }

  if (!args.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.output_dir, ec);
    for (size_t i = 0; i < outputs.size(); ++i) {
      rt::NpyArray a{outputs[i].dtype, outputs[i].shape, outputs[i].bytes};
      ETC_RETURN_IF_ERROR(
          rt::write_npy(args.output_dir + "/output_" + std::to_string(i) + ".npy", a));
    }
  }
  // --verify: the same program and inputs through the CPU reference.
  std::vector<Comparison> comparisons;
  bool mismatch = false;
  if (args.verify) {
    ETC_ASSIGN_OR_RETURN(std::unique_ptr<rt::OwnedRuntime> ref_rt, rt::make_cpu_runtime());
    rt::RuntimeEnv ref_env = ref_rt->env();
    ref_env.fuse_epilogues = false;  // the reference runs every instruction as written
    ETC_ASSIGN_OR_RETURN(std::unique_ptr<rt::Method> ref, rt::Method::load(file, 0, ref_env));
    ETC_ASSIGN_OR_RETURN(std::vector<HostTensor> expected,
                         run_method(*ref, ref_env, inputs, 0, 1, nullptr));
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tolerance tol = default_tolerance(outputs[i].dtype);
      if (args.atol) tol.atol = *args.atol;
      if (args.rtol) tol.rtol = *args.rtol;
      comparisons.push_back(compare(outputs[i], expected[i], tol));
      mismatch |= comparisons.back().mismatches > 0;
    }
  }
  Stats h2d = stats(timings.h2d), compute = stats(timings.compute), d2h = stats(timings.d2h);
  if (args.json) {
    nlohmann::json j;
    j["file"] = args.file;
    j["device"] = to_string(device);
    j["outputs"] = nlohmann::json::array();
    for (size_t i = 0; i < outputs.size(); ++i) {
      nlohmann::json o{{"index", i},
                       {"name", i < out_names.size() ? out_names[i] : ""},
                       {"dtype", std::string(dtype_name(outputs[i].dtype))},
                       {"shape", outputs[i].shape},
                       {"fnv1a64", fnv(outputs[i].bytes)}};
      if (args.verify) {
        o["max_abs_error"] = comparisons[i].max_abs;
        o["max_rel_error"] = comparisons[i].max_rel;
        o["mismatches"] = comparisons[i].mismatches;
      }
      j["outputs"].push_back(o);
    }
    j["cpu_threads"] = rt::kernels::num_threads();
    j["cpu_gemm_kernel"] = rt::kernels::gemm_float_kernel_name();
    j["timing_ms"] = {{"load", timings.load * 1e3},
                      {"h2d_median", h2d.median * 1e3},
                      {"compute_median", compute.median * 1e3},
                      {"compute_min", compute.min * 1e3},
                      {"compute_max", compute.max * 1e3},
                      {"d2h_median", d2h.median * 1e3},
                      {"iterations", args.iterations}};
    if (args.verify) j["verified"] = !mismatch;
    if (nlohmann::json counts = graph_counts_json(args, device, *runtime); !counts.is_null())
      j["cuda_graphs"] = counts;
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("ran %s on %s: %zu input%s, %zu output%s\n", args.file.c_str(),
                to_string(device).c_str(), inputs.size(), inputs.size() == 1 ? "" : "s",
                outputs.size(), outputs.size() == 1 ? "" : "s");
    for (size_t i = 0; i < outputs.size(); ++i) {
      const HostTensor& o = outputs[i];
      std::string values;
      int64_t n = static_cast<int64_t>(o.bytes.size()) / dtype_size(o.dtype);
      for (int64_t k = 0; k < std::min<int64_t>(n, 6); ++k) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.6g", k ? ", " : "",
                      load_as_double(o.dtype, o.bytes.data() + k * dtype_size(o.dtype)));
        values += buf;
      }
      std::printf("  output %zu%s: %s%s [%s%s] fnv1a64=%s\n", i,
                  i < out_names.size() ? (" (" + out_names[i] + ")").c_str() : "",
                  std::string(dtype_name(o.dtype)).c_str(), shape_to_string(o.shape).c_str(),
                  values.c_str(), n > 6 ? ", ..." : "", fnv(o.bytes).c_str());
      if (args.verify) {
        std::printf("    verify: max abs error %.3g, max rel error %.3g, %lld mismatches\n",
                    comparisons[i].max_abs, comparisons[i].max_rel,
                    static_cast<long long>(comparisons[i].mismatches));
      }
    }
    std::printf(
        "timing (ms): load %.3f; per run (median of %d, min-max): h2d %.3f, compute %.3f "
        "(%.3f-%.3f), d2h %.3f\n",
        timings.load * 1e3, args.iterations, h2d.median * 1e3, compute.median * 1e3,
        compute.min * 1e3, compute.max * 1e3, d2h.median * 1e3);
    if (args.verify)
      std::printf("verify: %s\n", mismatch ? "MISMATCH" : "all outputs match the CPU reference");
  }
  if (mismatch)
    return Status(ErrorCode::kVerifyMismatch, "outputs differ from the CPU reference (see above)");
  return Status();
}

}  // namespace etc
