// etc._etc: the native half of etc's Python package (python/etc/ is the other half; the
// public API and its documentation are there and in docs/python.md). It wraps the export
// library (export/export.h) and the runtime's session API (runtime/session.h) — the same
// calls `etc export` and `etc run` make — and adds no behaviour of its own beyond moving
// arrays across: inputs are read in place from the caller's buffers (DLPack or the buffer
// protocol), outputs are copied once, from the program's memory into arrays Python owns.
//
// Errors: every etc Status becomes an EtcError, which the translator registered below turns
// into the exception class etc._errors chooses (by the phase and the error code), carrying
// etc's located message, the CLI's exit code and the error's subjects (unsupported ops).
// The interpreter's lock is released while etc exports or runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/runtimes.h"
#include "export/export.h"
#include "export/export_pipeline.h"
#include "format/pte_reader.h"
#include "graph/dtype.h"
#include "graph/tensor_spec.h"
#include "runtime/kernels/parallel.h"
#include "runtime/method.h"
#include "runtime/session.h"
#include "support/file_io.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace etc::python {
namespace {

// A failed Status on its way to Python, with the phase it failed in ("export", "load",
// "run"): etc._errors picks the exception class from both.
struct EtcError {
  std::string phase;
  Status status;
};

[[noreturn]] void raise(const char* phase, Status s) {
  throw EtcError{phase, std::move(s)};
}
void check(const char* phase, Status s) {
  if (!s.ok()) raise(phase, std::move(s));
}
template <typename T>
T take(const char* phase, Result<T> r) {
  if (!r.ok()) raise(phase, std::move(r).take_status());
  return std::move(r).value();
}

// ---- dtypes ---------------------------------------------------------------------------

std::optional<DType> dtype_from_dlpack(nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return std::nullopt;
  switch (static_cast<Code>(t.code)) {
    case Code::Float:
      if (t.bits == 16) return DType::kFloat16;
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 64) return DType::kFloat64;
      break;
    case Code::Bfloat:
      if (t.bits == 16) return DType::kBFloat16;
      break;
    case Code::Int:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      break;
    case Code::UInt:
      if (t.bits == 8) return DType::kUInt8;
      break;
    case Code::Bool:
      if (t.bits == 8) return DType::kBool;
      break;
    default:
      break;
  }
  return std::nullopt;
}

// The DLPack dtype an output of `t` is handed back as. NumPy has no bfloat16: a bfloat16
// output goes out as its uint16 bit patterns and etc/_convert.py widens or views it.
nb::dlpack::dtype dlpack_of(DType t) {
  using Code = nb::dlpack::dtype_code;
  auto make = [](Code c, int bits) {
    return nb::dlpack::dtype{static_cast<uint8_t>(c), static_cast<uint8_t>(bits), 1};
  };
  switch (t) {
    case DType::kFloat16:
      return make(Code::Float, 16);
    case DType::kFloat32:
      return make(Code::Float, 32);
    case DType::kFloat64:
      return make(Code::Float, 64);
    case DType::kBFloat16:
      return make(Code::UInt, 16);
    case DType::kInt8:
      return make(Code::Int, 8);
    case DType::kInt16:
      return make(Code::Int, 16);
    case DType::kInt32:
      return make(Code::Int, 32);
    case DType::kInt64:
      return make(Code::Int, 64);
    case DType::kUInt8:
      return make(Code::UInt, 8);
    case DType::kBool:
      return make(Code::Bool, 8);
    default:
      return make(Code::UInt, static_cast<int>(dtype_size(t) * 8));
  }
}

std::string dlpack_name(nb::dlpack::dtype t) {
  static const char* kCodes[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  const char* code = t.code < 7 ? kCodes[t.code] : "dtype code ";
  return std::string(code) + std::to_string(t.bits) +
         (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

// An array Python owns, filled by `fill` (one copy from the program's memory).
template <typename Fill>
nb::object new_array(DType dtype, const std::vector<int64_t>& shape, Fill fill) {
  size_t n = static_cast<size_t>(dtype_size(dtype));
  std::vector<size_t> dims;
  for (int64_t d : shape) {
    dims.push_back(static_cast<size_t>(d));
    n *= static_cast<size_t>(d);
  }
  // 64-byte aligned, like NumPy's own large arrays; freed when the array is.
  void* data = std::aligned_alloc(64, std::max<size_t>(64, (n + 63) / 64 * 64));
  if (data == nullptr) throw std::bad_alloc();
  nb::capsule owner(data, [](void* p) noexcept { std::free(p); });
  fill(data);
  nb::ndarray<nb::numpy> a(data, dims.size(), dims.data(), owner, nullptr, dlpack_of(dtype));
  return a.cast(nb::rv_policy::reference);
}

// ---- export ---------------------------------------------------------------------------

// Progress on a terminal: one line, redrawn in place, shown once an export has taken a
// second (a short export prints nothing), cleared at the end.
class Progress {
 public:
  Progress(bool enabled, std::string model, size_t stages)
      : enabled_(enabled), model_(std::move(model)), stages_(stages) {}
  ~Progress() {
    if (drawn_) std::fprintf(stderr, "\r\033[K");
  }
  void stage(const std::string& name) {
    if (!enabled_) return;
    ++done_;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    if (s < 1.0) return;
    const size_t width = 24;
    const size_t filled = std::min(width, done_ * width / std::max<size_t>(stages_, 1));
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r\033[Ketc: exporting %s [%s] %s (%.1f s)", model_.c_str(), bar.c_str(),
                 name.c_str(), s);
    std::fflush(stderr);
    drawn_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool enabled_;
  std::string model_;
  size_t stages_, done_ = 0;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now();
};

nb::dict export_program(const std::string& model, const std::string& output,
                        const std::string& target, const std::string& io_device,
                        const std::map<std::string, std::vector<int64_t>>& input_shapes,
                        const std::vector<std::string>& absent_inputs, int64_t max_copies,
                        bool progress) {
  ExportRequest request;
  request.model = model;
  Result<Device> t = parse_device(target);
  if (!t.ok()) raise("export", Status(ErrorCode::kUsage, "target=: " + t.status().message()));
  request.options.target = *t;
  if (io_device == "host") {
    request.options.io_device = IoDevice::kHost;
  } else if (io_device == "device") {
    request.options.io_device = IoDevice::kDevice;
  } else {
    raise("export", Status(ErrorCode::kUsage,
                           "io_device= must be 'host' or 'device', got '" + io_device + "'"));
  }
  request.import.input_shapes = input_shapes;
  request.import.absent_inputs = {absent_inputs.begin(), absent_inputs.end()};
  request.max_copies = max_copies;
  size_t stages = 3;  // import, emit, write
  if (Result<Pipeline> p = parse_pipeline(request.passes, make_pass_registry()); p.ok())
    stages += p->passes.size();

  ExportResult result;
  uint64_t size = 0;
  {
    nb::gil_scoped_release unlocked;
    Progress bar(progress, model, stages);
    request.progress = [&bar](const std::string& stage) { bar.stage(stage); };
    result = take("export", export_model(request));
    bar.stage("write");
    size = take("export", write_program(result, output));
  }
  nb::dict d;
  d["path"] = output;
  d["size"] = size;
  d["report_json"] = result.report.to_json();
  d["summary"] = result.report.summary();
  d["dynamic_dims"] = result.dynamic_dims;
  return d;
}

// ---- running --------------------------------------------------------------------------

// A loaded program: the runtime it runs on, its forward method, and the IO memory kept
// across calls (the same pointers every call, so that CUDA graphs replay).
class Program {
 public:
  // From the file at `path`, or from `bytes` when given (then `path` is empty).
  static std::unique_ptr<Program> load(const std::string& path, std::optional<std::string> bytes,
                                       const std::string& device) {
    const bool from_bytes = bytes.has_value();
    auto p = std::make_unique<Program>();
    p->device_ = take("load", choose_device(device, "device=", &p->note_));
    {
      nb::gil_scoped_release unlocked;
      if (from_bytes) {
        p->file_ = take("load", read_pte(make_blob(std::move(*bytes)), "<bytes>"));
      } else {
        p->file_ = take("load", read_pte_file(path));
      }
      p->runtime_ = take("load", make_runtime(p->device_));
      p->env_ = p->runtime_->env();
      p->sync_ = device_sync(p->device_, *p->runtime_);
      Result<std::unique_ptr<rt::Method>> m = rt::Method::load(p->file_, 0, p->env_);
      if (!m.ok())
        raise("load", std::move(m).take_status().add_location(
                          Location{.file = from_bytes ? "<bytes>" : path}));
      p->method_ = std::move(m).value();
    }
    p->read_names();
    return p;
  }

  nb::list inputs() const {
    nb::list out;
    for (size_t i = 0; i < method_->num_inputs(); ++i) {
      const rt::TensorView& t = method_->input(i);
      nb::dict d;
      d["name"] = i < in_names_.size() ? in_names_[i] : "";
      d["dtype"] = std::string(dtype_name(t.dtype));
      d["shape"] = method_->input_bound(i);
      d["dynamic"] = method_->input_is_dynamic(i);
      d["device"] = to_string(t.device);
      out.append(d);
    }
    return out;
  }
  nb::list outputs() const {
    nb::list out;
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      const rt::TensorView& t = method_->output(i);
      nb::dict d;
      d["name"] = i < out_names_.size() ? out_names_[i] : "";
      d["dtype"] = std::string(dtype_name(t.dtype));
      d["shape"] = t.sizes;
      d["device"] = to_string(t.device);
      out.append(d);
    }
    return out;
  }

  // One call: `arrays` in input order (C-contiguous; etc/_convert.py made them so). Returns
  // the outputs as NumPy arrays (bfloat16 as uint16 bit patterns).
  nb::list run(const std::vector<nb::ndarray<nb::ro>>& arrays) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::vector<int64_t>> shapes(arrays.size());
    std::vector<rt::InputRef> refs;
    narrowed_.resize(arrays.size());
    if (arrays.size() != method_->num_inputs()) {
      raise("run", invalid_input("the program takes " + std::to_string(method_->num_inputs()) +
                                 " inputs, " + std::to_string(arrays.size()) + " given"));
    }
    for (size_t i = 0; i < arrays.size(); ++i) {
      const nb::ndarray<nb::ro>& a = arrays[i];
      const std::string name = input_name(i);
      if (a.device_type() != nb::device::cpu::value) {
        raise("run", invalid_input(name + " is in device memory (DLPack device type " +
                                   std::to_string(a.device_type()) +
                                   "); this program takes it in host memory: pass a CPU array"));
      }
      std::optional<DType> dt = dtype_from_dlpack(a.dtype());
      if (!dt) {
        raise("run", invalid_input(name + " has dtype " + dlpack_name(a.dtype()) +
                                   ", which etc has no type for"));
      }
      int64_t expect = 1;
      for (size_t d = a.ndim(); d-- > 0;) {
        shapes[i].insert(shapes[i].begin(), static_cast<int64_t>(a.shape(d)));
        if (a.shape(d) != 1 && a.stride(d) != expect)
          raise("run", internal_error(name + " reached the module not C-contiguous"));
        expect *= static_cast<int64_t>(a.shape(d));
      }
      const void* data = a.data();
      size_t nbytes = a.nbytes();
      // NumPy has no bfloat16: float32 feeds a bfloat16 input, rounded to nearest even as
      // `etc run` rounds a float32 .npy.
      if (*dt == DType::kFloat32 && method_->input(i).dtype == DType::kBFloat16) {
        std::string& narrowed = narrowed_[i];
        narrowed.assign(nbytes / 2, '\0');
        for (size_t k = 0; k < nbytes / 4; ++k) {
          float v = 0;
          std::memcpy(&v, static_cast<const char*>(data) + 4 * k, 4);
          store_float_as(DType::kBFloat16, v, narrowed.data() + 2 * k);
        }
        data = narrowed.data();
        nbytes = narrowed.size();
        dt = DType::kBFloat16;
        ++conversions_;
      }
      check("run", rt::check_input(*method_, i, *dt, shapes[i], name));
      refs.push_back(rt::InputRef{*dt, shapes[i], data, nbytes});
    }
    {
      nb::gil_scoped_release unlocked;
      check("run", method_->reset_state());
      check("run", rt::set_inputs(*method_, env_, refs, io_, &counts_));
      check("run", rt::bind_outputs(*method_, env_, io_));
      check("run", method_->execute());
      if (sync_) check("run", sync_());
    }
    return read_outputs();
  }

  // Greedy generation: `prompt` token ids, `steps` new tokens; `held` the program's other
  // inputs (index >= 2), the same every call. Returns (ids, logits rows).
  nb::tuple generate(nb::ndarray<nb::ro> prompt, int steps,
                     const std::vector<nb::ndarray<nb::ro>>& held) {
    std::lock_guard<std::mutex> lock(mu_);
    check("run", rt::check_decoder_signature(*method_));
    if (steps < 1) raise("run", Status(ErrorCode::kUsage, "steps must be >= 1"));
    std::optional<DType> pt = dtype_from_dlpack(prompt.dtype());
    if (prompt.device_type() != nb::device::cpu::value || !pt ||
        (*pt != DType::kInt64 && *pt != DType::kInt32) || prompt.ndim() < 1 || prompt.ndim() > 2 ||
        (prompt.ndim() == 2 && prompt.shape(0) != 1) || prompt.shape(prompt.ndim() - 1) < 1) {
      raise("run", invalid_input("the prompt must be int64 or int32 token ids of shape [n] or "
                                 "[1, n], n >= 1, in host memory"));
    }
    std::vector<int64_t> ids;
    const size_t n = prompt.shape(prompt.ndim() - 1);
    for (size_t k = 0; k < n; ++k) {
      const char* p = static_cast<const char*>(prompt.data()) + k * dtype_size(*pt);
      ids.push_back(static_cast<int64_t>(load_as_double(*pt, p)));
    }
    if (held.size() + 2 != method_->num_inputs()) {
      raise("run", invalid_input("the program takes " + std::to_string(method_->num_inputs() - 2) +
                                 " inputs besides the tokens and positions, " +
                                 std::to_string(held.size()) + " given"));
    }
    std::vector<rt::HostTensor> fixed(2);
    for (size_t i = 0; i < held.size(); ++i) {
      const nb::ndarray<nb::ro>& a = held[i];
      std::optional<DType> dt = dtype_from_dlpack(a.dtype());
      std::vector<int64_t> shape;
      for (size_t d = 0; d < a.ndim(); ++d)
        shape.push_back(static_cast<int64_t>(a.shape(d)));
      if (!dt || a.device_type() != nb::device::cpu::value)
        raise("run", invalid_input(input_name(i + 2) + " must be a host array of a dtype etc has"));
      check("run", rt::check_input(*method_, i + 2, *dt, shape, input_name(i + 2)));
      fixed.push_back(
          rt::HostTensor{*dt, shape, std::string(static_cast<const char*>(a.data()), a.nbytes())});
    }
    rt::Generation g;
    {
      nb::gil_scoped_release unlocked;
      g = take("run", rt::generate(*method_, env_, ids, steps, fixed, sync_));
    }
    const int64_t vocab = std::max<int64_t>(g.vocab, 1);
    nb::object out_ids =
        new_array(DType::kInt64, {static_cast<int64_t>(g.ids.size())},
                  [&](void* d) { std::memcpy(d, g.ids.data(), g.ids.size() * 8); });
    nb::object logits =
        new_array(DType::kFloat32, {static_cast<int64_t>(g.logits.size()) / vocab, vocab},
                  [&](void* d) { std::memcpy(d, g.logits.data(), g.logits.size() * 4); });
    return nb::make_tuple(out_ids, logits);
  }

  nb::dict stats() const {
    nb::dict d;
    d["inputs_copied"] = counts_.inputs_copied;
    d["input_bytes_copied"] = counts_.input_bytes_copied;
    d["inputs_uploaded"] = counts_.inputs_uploaded;
    d["outputs_copied"] = counts_.outputs_copied;
    d["output_bytes_copied"] = counts_.output_bytes_copied;
    d["conversions"] = conversions_;
    return d;
  }
  std::string device() const { return to_string(device_); }
  const std::string& note() const { return note_; }

 private:
  std::string input_name(size_t i) const {
    std::string s = "input " + std::to_string(i);
    if (i < in_names_.size() && !in_names_[i].empty()) s += " (" + in_names_[i] + ")";
    return s;
  }

  void read_names() {
    auto bytes = file_.named_bytes(std::string(pte::kIoNamesKey) + "forward");
    if (!bytes) return;
    nlohmann::json j = nlohmann::json::parse(bytes->begin(), bytes->end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return;
    for (const auto& n : j.value("inputs", nlohmann::json::array()))
      in_names_.push_back(n.is_string() ? n.get<std::string>() : "");
    for (const auto& n : j.value("outputs", nlohmann::json::array()))
      out_names_.push_back(n.is_string() ? n.get<std::string>() : "");
  }

  nb::list read_outputs() {
    nb::list out;
    for (size_t i = 0; i < method_->num_outputs(); ++i) {
      const rt::TensorView& t = method_->output(i);
      out.append(new_array(t.dtype, t.sizes, [&](void* dst) {
        check("run", rt::read_output(*method_, env_, i, dst, &counts_));
      }));
    }
    return out;
  }

  std::mutex mu_;  // one call at a time: a method's memory is not reentrant
  Device device_;
  std::string note_;
  pte::File file_;
  std::unique_ptr<rt::OwnedRuntime> runtime_;
  rt::RuntimeEnv env_;
  std::function<Status()> sync_;
  std::unique_ptr<rt::Method> method_;
  rt::IoBuffers io_;
  rt::CopyCounts counts_;
  uint64_t conversions_ = 0;
  std::vector<std::string> narrowed_;  // float32 inputs rounded for bfloat16 inputs
  std::vector<std::string> in_names_, out_names_;
};

}  // namespace
}  // namespace etc::python

NB_MODULE(_etc, m) {
  using etc::python::EtcError;
  using etc::python::Program;
  m.doc() = "etc's native module; use the etc package (import etc), not this.";
  m.attr("__version__") = ETC_VERSION;
  m.attr("cuda_built") = etc::cuda_built();

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const EtcError& e) {
      const etc::Status& s = e.status;
      nb::object make = nb::module_::import_("etc._errors").attr("_from_etc");
      nb::object exc = make(e.phase, etc::error_code_name(s.code()),
                            etc::error_code_exit_code(s.code()), s.to_string(), s.subjects());
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
    }
  });

  m.def("describe_runtimes", &etc::describe_runtimes);
  m.def("num_threads", &etc::rt::kernels::num_threads);
  m.def("set_num_threads", &etc::rt::kernels::set_num_threads, "n"_a);
  m.def("export_program", &etc::python::export_program, "model"_a, "output"_a, "target"_a,
        "io_device"_a, "input_shapes"_a, "absent_inputs"_a, "max_copies"_a, "progress"_a);

  nb::class_<Program>(m, "Program")
      .def_static(
          "load_file",
          [](const std::string& path, const std::string& device) {
            return Program::load(path, std::nullopt, device);
          },
          "path"_a, "device"_a)
      .def_static(
          "load_bytes",
          [](nb::bytes data, const std::string& device) {
            return Program::load("", std::string(data.c_str(), data.size()), device);
          },
          "data"_a, "device"_a)
      .def("inputs", &Program::inputs)
      .def("outputs", &Program::outputs)
      .def("run", &Program::run, "arrays"_a.noconvert())
      .def("generate", &Program::generate, "prompt"_a.noconvert(), "steps"_a, "held"_a.noconvert())
      .def("stats", &Program::stats)
      .def_prop_ro("device", &Program::device)
      .def_prop_ro("note", &Program::note);
}
