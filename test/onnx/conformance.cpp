// ONNX conformance runner: imports each of ONNX's node tests (libonnx-testdata), compiles
// it with the export pipeline, runs it on the CPU runtime and compares every output with
// the reference outputs stored next to the model.
//
//   onnx_conformance DATA_DIR [--target cpu|cuda:N] [--filter SUBSTR] [--verbose]
//                    [--min-passed N] [--summary FILE.md]
//
// Tests whose inputs include parameters etc needs at export time (a Reshape's shape, a
// Resize's scales, Clip's bounds, a Loop's trip count) are retried with those inputs baked
// in as initializers, which is how real models carry them; such passes are counted
// separately (--verbose names the inputs baked). The inputs etc's error names are baked one
// at a time; where it names none, inputs 1.., then every input (a window function's size,
// Range's start: the program may have no inputs). Sequence and optional test data
// (SequenceProto, OptionalProto) are the program's tensors in order: a sequence's
// elements, an optional's value if it has one.
//
// A few tests' stored data contradict their model or ONNX's spec and reference
// implementation (wrong_reference_data() says how); their failures count as unsupported,
// with the reason. ONNX 1.12 stored bfloat16 data as UINT16 tensors: they are read as
// bfloat16 where the model declares that type.
//
// Each test ends as passed, unsupported (etc declined it with a clear "unsupported" error
// at import or export) or failed (anything else: a wrong value, shape or dtype, an
// invalid-input error on a valid model, a run-time error). Exit status 1 when any test
// failed or fewer than --min-passed passed, so a test that etc claims to handle can never
// silently regress.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "export/emitter.h"
#include "export/export_pipeline.h"
#include "format/pte_reader.h"
#include "format/pte_writer.h"
#include "frontends/onnx/onnx_reader.h"
#include "onnx.pb.h"
#include "runtime/method.h"
#include "runtime/runtime_env.h"
#include "support/file_io.h"

namespace fs = std::filesystem;
using namespace etc;

namespace {

enum class Outcome { kPassed, kUnsupported, kFailed };

struct TestResult {
  std::string name;
  Outcome outcome = Outcome::kPassed;
  bool constant_params = false;  // passed with some inputs as initializers
  std::vector<bool> baked;       // which inputs, when constant_params
  std::string baked_names;       // their names, for --verbose
  std::string detail;
};

// The model with the `baked` test inputs turned into initializers (sequences and
// optionals stay runtime inputs).
Result<Graph> import_with_constant_params(const fs::path& model_path, const fs::path& set,
                                          const OnnxImportOptions& options,
                                          const std::vector<bool>& baked) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(model_path.string()));
  onnx::ModelProto model;
  if (!model.ParseFromArray(blob->bytes().data(), static_cast<int>(blob->bytes().size()))) {
    return invalid_input("model does not parse");
  }
  std::vector<std::string> runtime_inputs;
  for (const auto& in : model.graph().input()) {
    bool is_init = false;
    for (const auto& t : model.graph().initializer())
      is_init = is_init || t.name() == in.name();
    if (!is_init) runtime_inputs.push_back(in.name());
  }
  std::vector<bool> tensor_input;
  for (const auto& in : model.graph().input())
    if (std::find(runtime_inputs.begin(), runtime_inputs.end(), in.name()) != runtime_inputs.end())
      tensor_input.push_back(in.type().has_tensor_type());
  for (size_t i = 0; i < runtime_inputs.size(); ++i) {
    if (i >= baked.size() || !baked[i] || !tensor_input[i]) continue;
    fs::path p = set / ("input_" + std::to_string(i) + ".pb");
    ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> tb, map_file(p.string()));
    onnx::TensorProto* t = model.mutable_graph()->add_initializer();
    if (!t->ParseFromArray(tb->bytes().data(), static_cast<int>(tb->bytes().size()))) {
      return invalid_input("test input does not parse", Location{.file = p.string()});
    }
    t->set_name(runtime_inputs[i]);
  }
  std::string bytes = model.SerializeAsString();
  return parse_onnx_model({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                          model_path.string(), model_path.parent_path().string(), options);
}

// The message on one line: the list that follows an error's first line (the op types a
// model uses that etc cannot import) stays in the reason, so refusals can be grouped.
std::string one_line(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += " |";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == '|' || out.back() == ' '))
    out.pop_back();
  return out;
}

// ONNX 1.12 stored the bfloat16 test data as UINT16 tensors (the bits, in int32_data or
// raw_data); `declared` (the model's element type for the tensor) says when to read them
// back as bfloat16.
Result<OnnxTensor> load_test_tensor(const fs::path& p, int declared) {
  if (declared == onnx::TensorProto::BFLOAT16) {
    ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(p.string()));
    onnx::TensorProto t;
    if (t.ParseFromArray(blob->bytes().data(), static_cast<int>(blob->bytes().size())) &&
        t.data_type() == onnx::TensorProto::UINT16) {
      OnnxTensor out{t.name(), DType::kBFloat16, {t.dims().begin(), t.dims().end()}, {}};
      int64_t n = 1;
      for (int64_t d : out.shape)
        n *= d;
      if (t.has_raw_data()) {
        out.bytes = t.raw_data();
      } else {
        for (int32_t v : t.int32_data()) {
          const auto bits = static_cast<uint16_t>(v);
          out.bytes.append(reinterpret_cast<const char*>(&bits), 2);
        }
      }
      if (static_cast<int64_t>(out.bytes.size()) != 2 * n)
        return invalid_input("bfloat16 data of the wrong size", Location{.file = p.string()});
      return out;
    }
  }
  return load_onnx_tensor_file(p.string());
}

// One input or output of a test: a tensor, or a sequence's tensors, or an optional's
// (none when absent), in the order the program has them.
struct TestValue {
  std::vector<OnnxTensor> tensors;
  bool structured = false;  // a sequence or optional
  bool absent = false;      // an optional without a value
};

// The fields of onnx-data.proto's SequenceProto and OptionalProto (the generated classes
// have onnx.proto's messages only): 2 elem_type, 3 tensor value(s), 5 sequence value(s).
struct StructuredProto {
  uint64_t elem_type = 0;
  std::vector<std::string> tensors, sequences;
};

bool parse_structured(const std::string& bytes, StructuredProto* out) {
  size_t at = 0;
  auto varint = [&](uint64_t* v) {
    *v = 0;
    for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
      const auto b = static_cast<uint8_t>(bytes[at++]);
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  while (at < bytes.size()) {
    uint64_t tag = 0, v = 0;
    if (!varint(&tag)) return false;
    const uint64_t field = tag >> 3, wire = tag & 7;
    if (wire == 0) {
      if (!varint(&v)) return false;
      if (field == 2) out->elem_type = v;
    } else if (wire == 2) {
      if (!varint(&v) || v > bytes.size() - at) return false;
      std::string part = bytes.substr(at, static_cast<size_t>(v));
      at += static_cast<size_t>(v);
      if (field == 3) out->tensors.push_back(std::move(part));
      if (field == 5) out->sequences.push_back(std::move(part));
    } else if (wire == 1 || wire == 5) {
      at += wire == 1 ? 8 : 4;
    } else {
      return false;
    }
  }
  return at == bytes.size();
}

// Reads a serialized value of `type` (a TensorProto, SequenceProto or OptionalProto).
Result<TestValue> load_value(const fs::path& p, const onnx::TypeProto& type) {
  TestValue v;
  if (!type.has_sequence_type() && !type.has_optional_type()) {
    const int declared = type.has_tensor_type() ? type.tensor_type().elem_type() : 0;
    ETC_ASSIGN_OR_RETURN(OnnxTensor t, load_test_tensor(p, declared));
    v.tensors.push_back(std::move(t));
    return v;
  }
  v.structured = true;
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(p.string()));
  std::string bytes(reinterpret_cast<const char*>(blob->bytes().data()), blob->bytes().size());
  auto tensor_of = [&](const std::string& b) {
    return parse_onnx_tensor({reinterpret_cast<const uint8_t*>(b.data()), b.size()}, p.string());
  };
  StructuredProto sp;
  if (!parse_structured(bytes, &sp))
    return invalid_input("not a SequenceProto or OptionalProto", Location{.file = p.string()});
  if (type.has_optional_type()) {
    if (sp.elem_type == 0) {  // UNDEFINED: no value
      v.absent = true;
      return v;
    }
    if (!sp.sequences.empty()) {
      StructuredProto seq;
      if (!parse_structured(sp.sequences[0], &seq))
        return invalid_input("not a SequenceProto", Location{.file = p.string()});
      sp = std::move(seq);
    }
  }
  for (const std::string& t : sp.tensors) {
    ETC_ASSIGN_OR_RETURN(OnnxTensor e, tensor_of(t));
    v.tensors.push_back(std::move(e));
  }
  return v;
}

std::vector<TestValue> load_values(const fs::path& dir, const std::string& prefix, Status* error,
                                   const std::vector<onnx::TypeProto>& types) {
  std::vector<TestValue> out;
  for (size_t i = 0;; ++i) {
    fs::path p = dir / (prefix + "_" + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    Result<TestValue> v = load_value(p, i < types.size() ? types[i] : onnx::TypeProto());
    if (!v.ok()) {
      *error = v.status();
      return {};
    }
    out.push_back(std::move(v).value());
  }
  return out;
}

// Compares one output; returns an empty string when it matches.
std::string compare(const rt::TensorView& got, const OnnxTensor& want) {
  if (got.dtype != want.dtype) {
    return "dtype " + std::string(dtype_name(got.dtype)) + ", expected " +
           std::string(dtype_name(want.dtype));
  }
  if (got.sizes != want.shape) {
    return "shape " + shape_to_string(got.sizes) + ", expected " + shape_to_string(want.shape);
  }
  const int64_t n = got.numel();
  const int64_t es = dtype_size(got.dtype);
  const auto* g = static_cast<const uint8_t*>(got.data);
  const auto* w = reinterpret_cast<const uint8_t*>(want.bytes.data());
  if (!dtype_is_float(got.dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(g + i * es, w + i * es, static_cast<size_t>(es)) != 0) {
        return "element " + std::to_string(i) + " differs";
      }
    }
    return "";
  }
  // ONNX's backend tests use rtol 1e-3, atol 1e-7; float16 needs more room.
  const double rtol = got.dtype == DType::kFloat32 || got.dtype == DType::kFloat64 ? 1e-3 : 1e-2;
  const double atol = got.dtype == DType::kFloat64   ? 1e-7
                      : got.dtype == DType::kFloat32 ? 1e-5
                                                     : 1e-3;
  for (int64_t i = 0; i < n; ++i) {
    const double a = load_as_double(got.dtype, g + i * es),
                 b = load_as_double(got.dtype, w + i * es);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(b) && a == b) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " +
             std::to_string(b);
    }
  }
  return "";
}

// Tests whose stored data contradict their own model or ONNX's operator spec and ONNX's
// reference implementation (onnx.reference.ReferenceEvaluator computes etc's values): a
// failure of these is reported as unsupported with the reason, never as passed.
const std::map<std::string, std::string>& wrong_reference_data() {
  static const std::string like = "input 'like' has shape [1] in the data, [3, 4] in the model";
  static const std::map<std::string, std::string> known = {
      {"test_adam_multiple",
       "the outputs were generated with epsilon=1e-2, which the node does not set (the "
       "default is 1e-6)"},
      {"test_castlike_BFLOAT16_to_FLOAT", like},
      {"test_castlike_BFLOAT16_to_FLOAT_expanded", like},
      {"test_castlike_FLOAT_to_BFLOAT16", like},
      {"test_castlike_FLOAT_to_BFLOAT16_expanded", like},
  };
  return known;
}

Outcome classify(const Status& s) {
  return s.code() == ErrorCode::kUnsupported ? Outcome::kUnsupported : Outcome::kFailed;
}

TestResult run_test(const fs::path& dir, const Device& target) {
  TestResult r;
  r.name = dir.filename().string();
  auto fail = [&](Outcome o, const std::string& why) {
    r.outcome = o;
    r.detail = one_line(why);
    return r;
  };
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return fail(Outcome::kFailed, "no test_data_set_* folder");

  // The model's declared types, for the test data of types ONNX 1.12 stored as others and
  // for sequences and optionals.
  std::vector<onnx::TypeProto> in_types, out_types;
  std::vector<std::string> in_names;
  {
    Result<std::shared_ptr<const Blob>> blob = map_file((dir / "model.onnx").string());
    onnx::ModelProto model;
    if (blob.ok() &&
        model.ParseFromArray((*blob)->bytes().data(), static_cast<int>((*blob)->bytes().size()))) {
      std::vector<std::string> inits;
      for (const auto& t : model.graph().initializer())
        inits.push_back(t.name());
      for (const auto& in : model.graph().input()) {
        if (std::find(inits.begin(), inits.end(), in.name()) != inits.end()) continue;
        in_types.push_back(in.type());
        in_names.push_back(in.name());
      }
      for (const auto& out : model.graph().output())
        out_types.push_back(out.type());
    }
  }
  Status err;
  std::vector<TestValue> inputs = load_values(sets[0], "input", &err, in_types);
  if (!err.ok()) return fail(Outcome::kUnsupported, err.to_string());
  // --input-shape for each input not baked (a sequence's elements as NAME.i), or absent
  // optionals.
  auto options_for = [&](const std::vector<bool>& baked) {
    OnnxImportOptions o;
    for (size_t i = 0; i < inputs.size() && i < in_names.size(); ++i) {
      const TestValue& v = inputs[i];
      if (!v.structured && i < baked.size() && baked[i]) continue;
      if (v.absent) o.absent_inputs.insert(in_names[i]);
      const bool seq = in_types[i].has_sequence_type() ||
                       (in_types[i].has_optional_type() &&
                        in_types[i].optional_type().elem_type().has_sequence_type());
      for (size_t k = 0; k < v.tensors.size(); ++k) {
        const std::string name = seq ? in_names[i] + "." + std::to_string(k) : in_names[i];
        if (!seq && v.tensors[k].name.empty()) continue;  // as the model declares it
        o.input_shapes[name] = v.tensors[k].shape;
      }
    }
    return o;
  };
  OnnxImportOptions options = options_for({});
  Result<Graph> graph = load_onnx_file((dir / "model.onnx").string(), options);
  // Parameters etc needs at export time are baked in as initializers: first the inputs etc
  // names, one at a time, so the others stay runtime inputs; where it names none (or a
  // tensor computed from inputs), inputs 1.. (input 0 is the data in most tests), then
  // every input (input 0 is a size, as for the window functions or ConstantOfShape),
  // leaving a program that may have no inputs. Sequences and optionals stay runtime inputs.
  auto needs_constants = [](const Status& s) {
    return s.code() == ErrorCode::kUnsupported &&
           s.message().find("known at export time") != std::string::npos;
  };
  // The graph input an error names as "(input N, 'NAME')", if any.
  auto named_input = [&](const Status& s) -> std::optional<size_t> {
    const std::string& m = s.message();
    for (size_t i = 0; i < in_names.size(); ++i) {
      if (m.find(", '" + in_names[i] + "')") != std::string::npos) return i;
    }
    return std::nullopt;
  };
  if (!graph.ok() && needs_constants(graph.status()) && sets.size() == 1 && !inputs.empty()) {
    auto accept = [&](Result<Graph>& retry, const std::vector<bool>& baked) {
      graph = std::move(retry);
      r.constant_params = true;
      r.baked = baked;
      for (size_t i = 0; i < baked.size() && i < in_names.size(); ++i) {
        if (baked[i] && !inputs[i].structured)
          r.baked_names += (r.baked_names.empty() ? "" : ", ") + in_names[i];
      }
    };
    std::vector<bool> baked(inputs.size(), false);
    Status last = graph.status();
    bool done = false;
    for (std::optional<size_t> i = named_input(last); i && !baked[*i]; i = named_input(last)) {
      baked[*i] = true;
      Result<Graph> retry =
          import_with_constant_params(dir / "model.onnx", sets[0], options_for(baked), baked);
      if (retry.ok() || retry.status().code() != ErrorCode::kUnsupported) {
        accept(retry, baked);
        done = true;
        break;
      }
      if (!needs_constants(retry.status())) break;
      last = retry.status();
    }
    for (size_t keep = inputs.size() > 1 ? 1 : 0; !done; --keep) {
      for (size_t i = 0; i < inputs.size(); ++i)
        baked[i] = i >= keep;
      Result<Graph> retry =
          import_with_constant_params(dir / "model.onnx", sets[0], options_for(baked), baked);
      if (retry.ok() || retry.status().code() != ErrorCode::kUnsupported) {
        accept(retry, baked);
        break;
      }
      if (keep == 0 || !needs_constants(retry.status())) break;
    }
  }
  if (!graph.ok()) return fail(classify(graph.status()), graph.status().to_string());

  ExportOptions export_options;
  export_options.target = target;
  PassRegistry registry = make_pass_registry();
  ExportReport report;
  PassContext ctx{export_options, report};
  Result<Pipeline> pipeline = parse_pipeline(kDefaultExportPipeline, registry);
  if (!pipeline.ok()) return fail(Outcome::kFailed, pipeline.status().to_string());
  Result<PipelineResult> compiled = run_pipeline(*graph, *pipeline, registry, ctx, {});
  if (!compiled.ok()) return fail(classify(compiled.status()), compiled.status().to_string());
  Result<pte::File> emitted = emit_program(*graph);
  if (!emitted.ok()) return fail(classify(emitted.status()), emitted.status().to_string());
  Result<std::string> bytes = write_pte(*emitted);
  if (!bytes.ok()) return fail(Outcome::kFailed, bytes.status().to_string());
  Result<pte::File> file = read_pte(make_blob(std::move(*bytes)), r.name + ".pte");
  if (!file.ok()) return fail(Outcome::kFailed, file.status().to_string());
  Result<std::unique_ptr<rt::OwnedRuntime>> runtime = rt::make_cpu_runtime();
  if (!runtime.ok()) return fail(Outcome::kFailed, runtime.status().to_string());
  Result<std::unique_ptr<rt::Method>> method = rt::Method::load(*file, 0, (*runtime)->env());
  if (!method.ok()) return fail(Outcome::kFailed, "load: " + method.status().to_string());
  rt::Method& m = **method;

  for (const fs::path& set : sets) {
    // The program's inputs: every tensor of the inputs not baked, in order.
    std::vector<TestValue> values = load_values(set, "input", &err, in_types);
    std::vector<OnnxTensor> feeds;
    for (size_t i = 0; i < values.size(); ++i) {
      if (r.constant_params && i < r.baked.size() && r.baked[i] && !values[i].structured) continue;
      for (OnnxTensor& t : values[i].tensors)
        feeds.push_back(std::move(t));
    }
    std::vector<TestValue> out_values = load_values(set, "output", &err, out_types);
    if (!err.ok()) return fail(Outcome::kUnsupported, err.to_string());
    std::vector<OnnxTensor> outputs;
    for (TestValue& v : out_values) {
      for (OnnxTensor& t : v.tensors)
        outputs.push_back(std::move(t));
    }
    if (feeds.size() != m.num_inputs() || outputs.size() != m.num_outputs()) {
      return fail(Outcome::kFailed, "the program has " + std::to_string(m.num_inputs()) +
                                        " inputs and " + std::to_string(m.num_outputs()) +
                                        " outputs; the test data " + std::to_string(feeds.size()) +
                                        " and " + std::to_string(outputs.size()));
    }
    for (size_t i = 0; i < feeds.size(); ++i) {
      const rt::TensorView& want = m.input(i);
      if (want.dtype != feeds[i].dtype || want.sizes != feeds[i].shape) {
        return fail(Outcome::kFailed, "input " + std::to_string(i) + " of " +
                                          set.filename().string() + " does not fit the program");
      }
      Status s = m.set_input(i, feeds[i].bytes.data(), feeds[i].bytes.size());
      if (!s.ok()) return fail(Outcome::kFailed, s.to_string());
    }
    Status s = m.execute();
    if (!s.ok()) return fail(Outcome::kFailed, "run: " + s.to_string());
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string diff = compare(m.output(i), outputs[i]);
      if (!diff.empty()) {
        return fail(Outcome::kFailed,
                    set.filename().string() + " output " + std::to_string(i) + ": " + diff);
      }
    }
  }
  return r;
}

// What a test exercises, for the per-op table: its model's op type, or the '+'-joined op
// types when it has several; tests of a function's expansion are grouped together.
std::string op_of(const fs::path& dir) {
  const std::string name = dir.filename().string();
  if (name.size() > 9 && name.compare(name.size() - 9, 9, "_expanded") == 0)
    return "(function expansions)";
  Result<std::shared_ptr<const Blob>> blob = map_file((dir / "model.onnx").string());
  onnx::ModelProto model;
  if (!blob.ok() ||
      !model.ParseFromArray((*blob)->bytes().data(), static_cast<int>((*blob)->bytes().size()))) {
    return "(unreadable)";
  }
  std::set<std::string> ops;
  for (const auto& n : model.graph().node())
    ops.insert(n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type()
                                                             : n.domain() + "::" + n.op_type());
  std::string label;
  for (const std::string& op : ops)
    label += (label.empty() ? "" : "+") + op;
  return label.empty() ? "(no nodes)" : label;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: onnx_conformance DATA_DIR [--target cpu|cuda:N] [--filter SUBSTR] "
                 "[--verbose] [--min-passed N] [--summary FILE.md]\n");
    return 2;
  }
  fs::path root = argv[1];
  std::string filter, summary_path;
  bool verbose = false;
  long min_passed = 0;
  Device target{DeviceType::kCPU, 0};
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "onnx_conformance: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--filter")
      filter = next();
    else if (a == "--verbose")
      verbose = true;
    else if (a == "--min-passed") {
      const std::string v = next();
      char* end = nullptr;
      min_passed = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || min_passed < 0) {
        std::fprintf(stderr,
                     "onnx_conformance: --min-passed needs a non-negative integer, got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (a == "--summary")
      summary_path = next();
    else if (a == "--target") {
      Result<Device> d = parse_device(next());
      if (!d.ok()) {
        std::fprintf(stderr, "onnx_conformance: %s\n", d.status().to_string().c_str());
        return 2;
      }
      target = *d;
    } else {
      std::fprintf(stderr, "onnx_conformance: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (!fs::is_directory(root)) {
    std::fprintf(stderr, "onnx_conformance: '%s' is not a folder (install libonnx-testdata)\n",
                 root.c_str());
    return 2;
  }
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root)) {
    if (fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos) {
      dirs.push_back(e.path());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  struct Counts {
    int passed = 0, unsupported = 0, failed = 0;
  };
  std::map<std::string, Counts> per_op;
  Counts total;
  int constant_params = 0;
  std::vector<TestResult> failures;
  for (const fs::path& d : dirs) {
    TestResult r = run_test(d, target);
    if (auto known = wrong_reference_data().find(r.name);
        known != wrong_reference_data().end() && r.outcome == Outcome::kFailed) {
      r.outcome = Outcome::kUnsupported;
      r.detail = "ONNX's reference data is wrong: " + known->second + " (" + r.detail + ")";
    }
    Counts& c = per_op[op_of(d)];
    switch (r.outcome) {
      case Outcome::kPassed:
        ++c.passed, ++total.passed;
        constant_params += r.constant_params;
        break;
      case Outcome::kUnsupported:
        ++c.unsupported, ++total.unsupported;
        break;
      case Outcome::kFailed:
        ++c.failed, ++total.failed;
        failures.push_back(r);
        break;
    }
    if (verbose || r.outcome == Outcome::kFailed) {
      const char* tag = r.outcome == Outcome::kPassed        ? "PASS"
                        : r.outcome == Outcome::kUnsupported ? "UNSUPPORTED"
                                                             : "FAIL";
      std::printf(
          "%-11s %s%s%s%s\n", tag, r.name.c_str(),
          r.constant_params ? (" (constant parameters: " + r.baked_names + ")").c_str() : "",
          r.detail.empty() ? "" : ": ", r.detail.c_str());
    }
  }
  std::printf(
      "\nONNX node tests in %s: %zu tests, %d passed (%d with constant parameters), %d "
      "unsupported, "
      "%d failed\n",
      root.c_str(), dirs.size(), total.passed, constant_params, total.unsupported, total.failed);
  if (!summary_path.empty()) {
    std::string md =
        "| tests | passed | unsupported | failed |\n|---|---|---|---|\n| " +
        std::to_string(dirs.size()) + " | " + std::to_string(total.passed) + " | " +
        std::to_string(total.unsupported) + " | " + std::to_string(total.failed) +
        " |\n\nPer op (ops with at least one passed test; the rest are unsupported):\n\n"
        "| op | passed | unsupported | failed |\n|---|---|---|---|\n";
    int hidden = 0;
    for (const auto& [op, c] : per_op) {
      if (c.passed == 0 && c.failed == 0) {
        hidden += c.unsupported;
        continue;
      }
      md += "| " + op + " | " + std::to_string(c.passed) + " | " + std::to_string(c.unsupported) +
            " | " + std::to_string(c.failed) + " |\n";
    }
    md += "\n" + std::to_string(hidden) + " more tests of ops etc does not support at all.\n";
    Status s =
        write_file_atomic(summary_path, {reinterpret_cast<const uint8_t*>(md.data()), md.size()});
    if (!s.ok()) std::fprintf(stderr, "onnx_conformance: %s\n", s.to_string().c_str());
  }
  if (total.failed > 0) {
    std::printf("FAILED: %d test(s) etc claims to support give wrong results or errors\n",
                total.failed);
    return 1;
  }
  if (total.passed < min_passed) {
    std::printf("FAILED: %d tests passed, fewer than --min-passed %ld\n", total.passed, min_passed);
    return 1;
  }
  return 0;
}
