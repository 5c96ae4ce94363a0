#include "runtime/method.h"

#include <algorithm>
#include <chrono>

#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "format/pte_reader.h"
#include "graph/tensor_spec.h"
#include "runtime/load_plan.h"

namespace etc::rt {
namespace {

constexpr size_t kHostAlignment = 64;
constexpr size_t kDeviceAlignment = 256;

Value to_runtime_value(const pte::Plan& plan, const pte::EValue& v) {
  Value out;
  switch (v.kind) {
    case pte::ValueKind::kNull:
      out.kind = Value::Kind::kNone;
      break;
    case pte::ValueKind::kInt:
      out.kind = Value::Kind::kInt;
      out.i = v.i;
      break;
    case pte::ValueKind::kBool:
      out.kind = Value::Kind::kBool;
      out.b = v.b;
      break;
    case pte::ValueKind::kDouble:
      out.kind = Value::Kind::kDouble;
      out.d = v.d;
      break;
    case pte::ValueKind::kString:
      out.kind = Value::Kind::kString;
      out.s = v.s;
      break;
    case pte::ValueKind::kIntList:
      out.kind = Value::Kind::kIntList;
      out.ints = plan.int_list(v);  // the reader checked every item is an Int value
      break;
    case pte::ValueKind::kDoubleList:
      out.kind = Value::Kind::kDoubleList;
      out.doubles = v.doubles;
      break;
    case pte::ValueKind::kBoolList:
      out.kind = Value::Kind::kBoolList;
      out.bools = v.bools;
      break;
    case pte::ValueKind::kTensorList:
      out.kind = Value::Kind::kTensorList;
      break;
    case pte::ValueKind::kOptionalTensorList:
      out.kind = Value::Kind::kOptionalTensorList;
      break;
    case pte::ValueKind::kTensor: {
      out.kind = Value::Kind::kTensor;
      out.tensor.dtype = *dtype_from_scalar_type(v.tensor.scalar_type);  // the reader checked it
      for (int32_t s : v.tensor.sizes)
        out.tensor.sizes.push_back(s);
      out.tensor.device = v.tensor.device;
      // Dynamic-bound: the serialized sizes are the upper bound; kernels resize within it.
      if (v.tensor.shape_dynamism == 1) out.tensor.capacity = out.tensor.nbytes();
      break;
    }
  }
  return out;
}

// " [1, 16, 48, 48] [16, 1, 3, 3] - [2, 2] ..." for a profile row: tensor shapes, int
// lists, ints; '-' for None; the trailing out argument left off.
std::string describe_args(std::span<Value* const> args) {
  std::string s;
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    const Value& v = *args[i];
    if (v.is_tensor()) {
      s += " " + shape_to_string(v.tensor.sizes);
    } else if (v.kind == Value::Kind::kIntList) {
      s += " " + shape_to_string(v.ints);
    } else if (v.kind == Value::Kind::kInt) {
      s += " " + std::to_string(v.i);
    } else if (v.is_none()) {
      s += " -";
    }
  }
  return s;
}

StepKind step_kind(pte::InstrKind k) {
  switch (k) {
    case pte::InstrKind::kKernel:
      return StepKind::kKernel;
    case pte::InstrKind::kDelegate:
      return StepKind::kDelegate;
    case pte::InstrKind::kMove:
      return StepKind::kMove;
    case pte::InstrKind::kJumpFalse:
      return StepKind::kJumpFalse;
    case pte::InstrKind::kFree:
      break;
  }
  return StepKind::kFree;
}

std::string op_name(const pte::Operator& o) {
  return o.name + (o.overload.empty() ? "" : "." + o.overload);
}

// " channels-last 0 9": the arguments a kernel reads or writes channels-last
// (KernelContext::channels_last_args), for profiles by shape; "" for none.
std::string describe_layout(uint64_t channels_last_args) {
  std::string out;
  for (size_t i = 0; i < 64; ++i) {
    if (((channels_last_args >> i) & 1) != 0) out += " " + std::to_string(i);
  }
  return out.empty() ? out : " channels-last" + out;
}

}  // namespace

Method::~Method() {
  delegates_.clear();  // handles may reference buffers: release them first
}

Result<std::unique_ptr<Method>> Method::load(const pte::File& file, size_t plan_index,
                                             const RuntimeEnv& env) {
  if (plan_index >= file.program.plans.size()) {
    return invalid_input("the program has no plan " + std::to_string(plan_index));
  }
  ConstantResolver constants =
      [&file](size_t index,
              const pte::Tensor& t) -> Result<std::optional<std::span<const uint8_t>>> {
    if (t.data_buffer_idx == 0) return std::optional<std::span<const uint8_t>>();
    std::span<const uint8_t> bytes = file.constant_bytes(t.data_buffer_idx);
    if (bytes.data() == nullptr) {
      return invalid_input("value " + std::to_string(index) + ": constant " +
                           std::to_string(t.data_buffer_idx) + " has no data");
    }
    return std::optional<std::span<const uint8_t>>(bytes);
  };
  return load_plan(file.program.plans[plan_index], constants, env, &file);
}

Result<std::unique_ptr<Method>> Method::load_plan(const pte::Plan& plan,
                                                  const ConstantResolver& constants,
                                                  const RuntimeEnv& env, const pte::File* file) {
  std::unique_ptr<Method> m(new Method());
  m->env_ = env;
  // Operators: resolve all, report every missing one at once.
  std::vector<const RegisteredKernel*> kernels(plan.operators.size(), nullptr);
  std::map<std::string, int> missing;
  for (size_t i = 0; i < plan.operators.size(); ++i) {
    kernels[i] = env.operators->find(op_name(plan.operators[i]));
    if (kernels[i] == nullptr) missing[op_name(plan.operators[i])] = 0;
  }
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      if (in.kind == pte::InstrKind::kKernel) {
        auto it = missing.find(op_name(plan.operators[static_cast<size_t>(in.index)]));
        if (it != missing.end()) ++it->second;
      }
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (const auto& [name, count] : missing) {
      list += (list.empty() ? "" : ", ") + name + " (" + std::to_string(count) + " call" +
              (count == 1 ? "" : "s") + ")";
    }
    return unsupported("plan '" + plan.name + "' calls operator" +
                       (missing.size() == 1 ? "" : "s") + " this runtime does not have: " + list);
  }
  // Planned buffers, once, on their devices.
  for (size_t id = 1; id < plan.buffer_sizes.size(); ++id) {
    Device d = plan.buffer_device(static_cast<uint32_t>(id));
    Result<DeviceBuffer> b =
        DeviceBuffer::allocate(*env.allocators, d, static_cast<size_t>(plan.buffer_sizes[id]),
                               d.is_cpu() ? kHostAlignment : kDeviceAlignment);
    if (!b.ok()) {
      return std::move(b).take_status().add_context(
          "while allocating buffer " + std::to_string(id) + " (" +
          std::to_string(plan.buffer_sizes[id]) + " bytes on " + to_string(d) + ")");
    }
    m->buffers_.push_back(std::move(b).value());
  }
  // Values. The table never grows after this, so pointers into it stay valid.
  std::vector<bool> constant(plan.values.size(), false);  // bound to the program's constants
  m->values_.reserve(plan.values.size());
  for (const pte::EValue& v : plan.values)
    m->values_.push_back(to_runtime_value(plan, v));
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const pte::EValue& ev = plan.values[i];
    Value& v = m->values_[i];
    if (ev.kind == pte::ValueKind::kTensorList || ev.kind == pte::ValueKind::kOptionalTensorList) {
      for (int32_t item : ev.items)
        v.tensors.push_back(item < 0 ? nullptr : &m->values_[static_cast<size_t>(item)].tensor);
      continue;
    }
    if (ev.kind != pte::ValueKind::kTensor) continue;
    const pte::Tensor& t = ev.tensor;
    if (!t.device.is_cpu()) {
      ETC_RETURN_IF_ERROR_CTX(
          env.allocators->for_device(t.device).take_status(),
          "value " + std::to_string(i) + " is a " + to_string(t.device) + " tensor");
    }
    if (t.allocation) {
      v.tensor.data = static_cast<char*>(m->buffers_[t.allocation->memory_id - 1].data()) +
                      t.allocation->offset;
      if (t.data_buffer_idx > 0) {
        // State (a mutable buffer): planned, starting from its initial value in the file
        // (copied into device memory for device state).
        std::span<const uint8_t> init =
            file == nullptr ? std::span<const uint8_t>() : file->mutable_bytes(t.data_buffer_idx);
        if (init.data() == nullptr || static_cast<int64_t>(init.size()) < v.tensor.nbytes()) {
          return invalid_input("value " + std::to_string(i) + ": initial state " +
                               std::to_string(t.data_buffer_idx) + " is missing or shorter than " +
                               v.tensor.describe());
        }
        m->states_.push_back(StateInit{v.tensor.data, t.device,
                                       init.subspan(0, static_cast<size_t>(v.tensor.nbytes())), 0});
      } else if (t.has_extra && !t.fully_qualified_name.empty()) {
        // A named mutable buffer without an initial value: it starts as zeros, at load and
        // after every reset, on every device (cudaMalloc does not zero).
        m->states_.push_back(
            StateInit{v.tensor.data, t.device, {}, static_cast<size_t>(v.tensor.nbytes())});
      }
    } else {
      ETC_ASSIGN_OR_RETURN(std::optional<std::span<const uint8_t>> bytes, constants(i, t));
      if (!bytes) continue;  // bound by the caller (inputs, outputs) before execute
      if (static_cast<int64_t>(bytes->size()) < v.tensor.nbytes()) {
        return invalid_input("value " + std::to_string(i) + ": constant has " +
                             std::to_string(bytes->size()) + " bytes, " + v.tensor.describe() +
                             " needs " + std::to_string(v.tensor.nbytes()));
      }
      // Constants are read-only: kernels never write their inputs.
      v.tensor.data = const_cast<uint8_t*>(bytes->data());
      constant[i] = true;
    }
  }
  // A value a move instruction may overwrite is not a constant for the kernels.
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      if (in.kind == pte::InstrKind::kMove && in.target >= 0 &&
          static_cast<size_t>(in.target) < constant.size())
        constant[static_cast<size_t>(in.target)] = false;
    }
  }
  (void)file;
  ETC_RETURN_IF_ERROR_CTX(m->reset_state(), "while setting the initial state");
  // Inputs and outputs.
  auto planned = [&plan](int32_t v) {
    const pte::EValue& ev = plan.values[static_cast<size_t>(v)];
    return ev.kind != pte::ValueKind::kTensor || ev.tensor.allocation.has_value() ||
           ev.tensor.data_buffer_idx > 0;
  };
  for (int32_t v : plan.inputs) {
    if (plan.values[static_cast<size_t>(v)].kind != pte::ValueKind::kTensor) {
      return unsupported("plan input value " + std::to_string(v) + " is not a tensor");
    }
    m->inputs_.push_back(static_cast<size_t>(v));
    m->input_planned_.push_back(planned(v));
    m->input_bounds_.push_back(m->values_[static_cast<size_t>(v)].tensor.sizes);
  }
  for (int32_t v : plan.outputs) {
    if (plan.values[static_cast<size_t>(v)].kind != pte::ValueKind::kTensor) {
      return unsupported("plan output value " + std::to_string(v) + " is not a tensor");
    }
    m->outputs_.push_back(static_cast<size_t>(v));
    m->output_planned_.push_back(planned(v));
  }
  // A planned input whose bytes overlap another planned tensor's is consumed by execution.
  auto planned_range = [&plan, &m](size_t v) -> std::optional<std::pair<uint64_t, uint64_t>> {
    const pte::EValue& ev = plan.values[v];
    if (ev.kind != pte::ValueKind::kTensor || !ev.tensor.allocation) return std::nullopt;
    uint64_t begin = ev.tensor.allocation->offset;
    return std::make_pair(begin, begin + static_cast<uint64_t>(m->values_[v].tensor.nbytes()));
  };
  for (size_t i = 0; i < m->inputs_.size(); ++i) {
    const size_t v = m->inputs_[i];
    bool consumed = false;
    if (auto r = planned_range(v); r && r->second > r->first) {
      const uint32_t mem = plan.values[v].tensor.allocation->memory_id;
      for (size_t o = 0; o < plan.values.size() && !consumed; ++o) {
        if (o == v) continue;
        auto q = planned_range(o);
        consumed = q && plan.values[o].tensor.allocation->memory_id == mem &&
                   q->first < r->second && r->first < q->second;
      }
    }
    m->input_consumed_.push_back(consumed);
    m->input_ready_.push_back(!m->input_planned_[i] || m->values_[v].tensor.nbytes() == 0);
    m->input_ever_set_.push_back(m->input_ready_.back());
  }
  // Int values a kernel writes at run time (the return value, always the last argument, of a
  // kernel returning an Int: aten::sym_size.int, ExecuTorch's executorch_prim scalar ops):
  // IntLists that hold them are re-read per call.
  std::vector<bool> computed_int(plan.values.size(), false);
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      if (in.kind != pte::InstrKind::kKernel || in.args.empty()) continue;
      const auto ret = static_cast<size_t>(in.args.back());
      if (plan.values[ret].kind == pte::ValueKind::kInt) computed_int[ret] = true;
    }
  }
  // Steps.
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      MethodStep s;
      s.kind = step_kind(in.kind);
      s.a = in.index;
      s.b = in.target;
      for (int32_t a : in.args) {
        s.args.push_back(&m->values_[static_cast<size_t>(a)]);
        const pte::EValue& ev = plan.values[static_cast<size_t>(a)];
        if (ev.kind != pte::ValueKind::kIntList) continue;
        MethodStep::IntListRefresh r{&m->values_[static_cast<size_t>(a)], {}};
        for (size_t k = 0; k < ev.int_items.size(); ++k) {
          const auto item = static_cast<size_t>(ev.int_items[k]);
          if (item < computed_int.size() && computed_int[item])
            r.items.emplace_back(k, &m->values_[item]);
        }
        if (!r.items.empty()) s.refresh.push_back(std::move(r));
      }
      for (size_t i = 0; i < in.args.size() && i < 64; ++i) {
        if (in.kind == pte::InstrKind::kKernel && constant[static_cast<size_t>(in.args[i])])
          s.constant_args |= uint64_t{1} << i;
      }
      if (in.kind == pte::InstrKind::kKernel) {
        s.kernel = kernels[static_cast<size_t>(in.index)];
        s.name = op_name(plan.operators[static_cast<size_t>(in.index)]);
      } else if (in.kind == pte::InstrKind::kDelegate) {
        const pte::Delegate& d = plan.delegates[static_cast<size_t>(in.index)];
        s.name = "delegate " + std::to_string(in.index) + " (" + d.id + ")";
        Backend* backend = env.backends == nullptr ? nullptr : env.backends->find(d.id);
        if (backend == nullptr) {
          return unsupported("the program needs backend '" + d.id +
                             "', which this runtime does not have");
        }
        if (file == nullptr) return unsupported("nested delegates are not supported");
        Result<std::unique_ptr<DelegateHandle>> h =
            backend->init(file->delegate_bytes(d), d.compile_specs, *file, env);
        if (!h.ok()) return std::move(h).take_status().add_context("while initialising " + s.name);
        s.delegate = m->delegates_.size();
        m->delegates_.push_back(std::move(h).value());
      }
      m->steps_.push_back(std::move(s));
    }
  }
  // The kernel library's own planning (epilogues, layouts, outs nothing reads).
  if (LoadPlanner planner = env.operators->load_planner(); planner != nullptr) {
    LoadPlanView view{m->steps_, m->values_, m->inputs_, m->outputs_, env.fuse_epilogues};
    planner(view);
  }
  return m;
}

size_t Method::channels_last_convolutions() const {
  return static_cast<size_t>(std::count_if(
      steps_.begin(), steps_.end(), [](const MethodStep& s) { return s.channels_last_args != 0; }));
}

std::string Method::describe_plan() const {
  std::string out;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const MethodStep& s = steps_[i];
    out += std::to_string(i) + " " + s.name + s.fused_names;
    if (s.fused) out += " fused";
    if (s.epilogue != nullptr) {
      out += " epilogue=" + std::to_string(s.epilogue->ops.size());
      if (s.epilogue->activation)
        out += " activation=" + std::to_string(static_cast<int>(s.epilogue->activation->kind));
      if (s.epilogue->after_inputs) out += " after_inputs";
      if (s.epilogue->out_unread) out += " out_unread";
    }
    if (s.unread_outs != 0) out += " unread=" + std::to_string(s.unread_outs);
    if (s.channels_last_args != 0) out += " channels_last=" + std::to_string(s.channels_last_args);
    out += "\n";
  }
  return out;
}

Status Method::check_binding(const TensorView& t, const void* data, const std::string& what) const {
  if (data == nullptr && t.nbytes() > 0) return invalid_input(what + ": null pointer");
  if (data == nullptr) return Status();
  if (t.device.is_cpu()) {
    for (DeviceType type : {DeviceType::kCUDA}) {
      const DeviceAllocator* a = env_.allocators->find(type);
      if (a == nullptr) continue;
      ETC_ASSIGN_OR_RETURN(bool on_device, a->owns(data));
      if (on_device) {
        return invalid_input(what + " is a CPU tensor but was given " +
                             std::string(device_type_name(type)) + " device memory");
      }
    }
    return Status();
  }
  ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, env_.allocators->for_device(t.device));
  ETC_ASSIGN_OR_RETURN(int index, a->device_of(data));
  if (index < 0) {
    return invalid_input(what + " is a " + to_string(t.device) +
                         " tensor but was given host memory; upload it to the device first (never "
                         "copied implicitly)");
  }
  if (index != t.device.index) {
    // Without peer access a kernel on t.device faults on it (and poisons the context).
    return invalid_input(
        what + " is a " + to_string(t.device) + " tensor but was given memory of " +
        to_string(Device{t.device.type, static_cast<int8_t>(index)}) + "; copy it to " +
        to_string(t.device) + " first (never copied implicitly)");
  }
  return Status();
}

Status Method::set_input(size_t i, const void* data, size_t bytes, std::span<const int64_t> sizes) {
  if (i >= inputs_.size()) {
    return invalid_input("input " + std::to_string(i) + " does not exist (" +
                         std::to_string(inputs_.size()) + " inputs)");
  }
  ETC_RETURN_IF_ERROR(resize_input(i, sizes));
  return set_input(i, data, bytes);
}

Status Method::resize_input(size_t i, std::span<const int64_t> sizes) {
  TensorView& t = values_[inputs_[i]].tensor;
  if (std::equal(t.sizes.begin(), t.sizes.end(), sizes.begin(), sizes.end())) return Status();
  const std::vector<int64_t>& bound = input_bounds_[i];
  bool fits = t.capacity >= 0 && sizes.size() == bound.size();
  for (size_t d = 0; fits && d < sizes.size(); ++d)
    fits = sizes[d] >= 0 && sizes[d] <= bound[d];
  if (!fits) {
    std::string want = "[";
    for (size_t d = 0; d < sizes.size(); ++d)
      want += (d ? ", " : "") + std::to_string(sizes[d]);
    want += "]";
    return invalid_input("input " + std::to_string(i) + " of shape " + want +
                         (t.capacity < 0 ? " does not match its static shape "
                                         : " is past its bound, each dim at most ") +
                         shape_to_string(bound));
  }
  t.sizes.assign(sizes.begin(), sizes.end());
  return Status();
}

Status Method::set_input(size_t i, const void* data, size_t bytes) {
  if (i >= inputs_.size()) {
    return invalid_input("input " + std::to_string(i) + " does not exist (" +
                         std::to_string(inputs_.size()) + " inputs)");
  }
  TensorView& t = values_[inputs_[i]].tensor;
  if (!input_planned_[i]) {
    return invalid_input("input " + std::to_string(i) + " (" + t.describe() +
                         ") is not planned: bind it with memory of its device instead of copying");
  }
  if (!t.device.is_cpu())
    return invalid_input("input " + std::to_string(i) + " is planned on " + to_string(t.device));
  if (static_cast<int64_t>(bytes) != t.nbytes()) {
    return invalid_input("input " + std::to_string(i) + " (" + t.describe() + ") needs " +
                         std::to_string(t.nbytes()) + " bytes, got " + std::to_string(bytes));
  }
  if (bytes > 0) std::memcpy(t.data, data, bytes);
  input_ready_[i] = true;
  input_ever_set_[i] = true;
  return Status();
}

Status Method::bind_input(size_t i, void* data) {
  if (i >= inputs_.size()) return invalid_input("input " + std::to_string(i) + " does not exist");
  if (input_planned_[i])
    return invalid_input("input " + std::to_string(i) + " is planned: use set_input");
  TensorView& t = values_[inputs_[i]].tensor;
  ETC_RETURN_IF_ERROR(check_binding(t, data, "input " + std::to_string(i)));
  t.data = data;
  return Status();
}

Status Method::bind_output(size_t i, void* data) {
  if (i >= outputs_.size()) return invalid_input("output " + std::to_string(i) + " does not exist");
  if (output_planned_[i])
    return invalid_input("output " + std::to_string(i) + " is planned: it cannot be rebound");
  TensorView& t = values_[outputs_[i]].tensor;
  ETC_RETURN_IF_ERROR(check_binding(t, data, "output " + std::to_string(i)));
  t.data = data;
  return Status();
}

bool Method::writes_state() const {
  if (!states_.empty()) return true;
  // A kernel that writes one of its inputs in place (a mutable argument before the outs, as
  // aten::copy_ and aten::index_put_ write a mutable buffer).
  return std::any_of(steps_.begin(), steps_.end(), [](const MethodStep& s) {
    const OpSchema* schema = s.kernel != nullptr ? s.kernel->call_schema() : nullptr;
    return s.kind == StepKind::kKernel && schema != nullptr &&
           std::any_of(schema->args.begin(), schema->args.end(),
                       [](const ArgSchema& a) { return a.is_out && !a.kwarg_only; });
  });
}

Status Method::reset_state() {
  for (const StateInit& s : states_) {
    if (s.zero_bytes > 0) {
      if (s.device.is_cpu()) {
        std::memset(s.data, 0, s.zero_bytes);
        continue;
      }
      ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, env_.allocators->for_device(s.device));
      ETC_RETURN_IF_ERROR(a->zero(s.data, s.zero_bytes, s.device.index));
      continue;
    }
    if (s.initial.empty()) continue;
    if (s.device.is_cpu()) {
      std::memcpy(s.data, s.initial.data(), s.initial.size());
      continue;
    }
    ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, env_.allocators->for_device(s.device));
    ETC_RETURN_IF_ERROR(
        a->copy_host_to_device(s.data, s.initial.data(), s.initial.size(), s.device.index));
  }
  return Status();
}

void Method::flush_profile() {
  for (const auto& [pc, ms] : profile_samples_) {
    const MethodStep& s = steps_[pc];
    const bool kernel = s.kind == StepKind::kKernel;
    OpTime& t = (*profile_)[!kernel             ? "delegate " + s.name
                            : profile_by_shape_ ? s.name + s.fused_names + describe_args(s.args) +
                                                      describe_layout(s.channels_last_args)
                                                : s.name + s.fused_names];
    ++t.calls;
    if (kernel) t.flops += kernel_flops(s.name, s.args);
    t.ms += ms;
  }
  profile_samples_.clear();
}

Status Method::execute() {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const TensorView& t = values_[inputs_[i]].tensor;
    if (t.data == nullptr && t.nbytes() > 0)
      return invalid_input("input " + std::to_string(i) + " is not bound");
    if (!input_ready_[i]) {
      return invalid_input("input " + std::to_string(i) + " (" + t.describe() + ") " +
                           (input_ever_set_[i]
                                ? "must be set again before each execution: the plan reuses its "
                                  "memory for other tensors after its last use"
                                : "was never set: call set_input before executing"));
    }
  }
  // Consumed inputs hold other tensors' bytes once this execution starts.
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (input_consumed_[i]) input_ready_[i] = false;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const TensorView& t = values_[outputs_[i]].tensor;
    if (t.data == nullptr && t.nbytes() > 0)
      return invalid_input("output " + std::to_string(i) + " is not bound");
  }
  struct FlushProfile {  // also when an instruction fails
    Method* m;
    ~FlushProfile() {
      if (m != nullptr) m->flush_profile();
    }
  } flush{profile_ != nullptr ? this : nullptr};
  for (size_t pc = 0; pc < steps_.size();) {
    MethodStep& s = steps_[pc];
    switch (s.kind) {
      case StepKind::kKernel:
      case StepKind::kDelegate: {
        const bool kernel = s.kind == StepKind::kKernel;
        if (s.fused) {  // done by the epilogue of the kernel before it
          ++pc;
          break;
        }
        const auto start =
            profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        Status st;
        for (const MethodStep::IntListRefresh& r : s.refresh) {
          for (const auto& [k, item] : r.items)
            r.list->ints[k] = item->i;
        }
        if (kernel) {
          KernelContext ctx{s.name,        env_.allocators,      env_.kernel_state,
                            &s.state,      s.constant_args,      s.epilogue.get(),
                            s.unread_outs, s.channels_last_args, s.kernel->call_schema()};
          ctx.instruction = static_cast<uint32_t>(pc);
          st = s.kernel->fn(ctx, s.args);
        } else {
          st = delegates_[s.delegate]->execute(s.args);
        }
        if (profile_) {
          profile_samples_.emplace_back(pc, std::chrono::duration<double, std::milli>(
                                                std::chrono::steady_clock::now() - start)
                                                .count());
        }
        if (!st.ok()) {
          return std::move(st).add_context("in instruction " + std::to_string(pc) + " (" + s.name +
                                           ")");
        }
        ++pc;
        break;
      }
      case StepKind::kMove:
        values_[static_cast<size_t>(s.b)] = values_[static_cast<size_t>(s.a)];
        ++pc;
        break;
      case StepKind::kJumpFalse: {
        const Value& c = values_[static_cast<size_t>(s.a)];
        bool cond = c.kind == Value::Kind::kBool ? c.b
                    : c.is_tensor() && c.tensor.dtype == DType::kBool && c.tensor.numel() == 1
                        ? *static_cast<const bool*>(c.tensor.data)
                        : true;
        pc = cond ? pc + 1 : static_cast<size_t>(s.b);
        break;
      }
      case StepKind::kFree:
        ++pc;  // memory is planned; nothing to free
        break;
    }
  }
  return Status();
}

Status BackendRegistry::add(const std::string& id, std::unique_ptr<Backend> backend) {
  if (!backends_.emplace(id, std::move(backend)).second)
    return internal_error("backend '" + id + "' is registered twice");
  return Status();
}

Backend* BackendRegistry::find(const std::string& id) const {
  auto it = backends_.find(id);
  return it == backends_.end() ? nullptr : it->second.get();
}

// ---- Delegate calls ----------------------------------------------------------------

Status bind_delegate_args(Method& m, std::span<Value*> args) {
  const size_t n_in = m.num_inputs(), n_out = m.num_outputs();
  if (args.size() != n_in + n_out) {
    return invalid_input("delegate takes " + std::to_string(n_in) + " inputs and " +
                         std::to_string(n_out) + " outputs, the call passes " +
                         std::to_string(args.size()) + " values");
  }
  for (size_t i = 0; i < n_in + n_out; ++i) {
    const Value& v = *args[i];
    const bool input = i < n_in;
    const size_t k = input ? i : i - n_in;
    const TensorView& want = input ? m.input(k) : m.output(k);
    const bool dynamic = want.capacity >= 0;
    const bool fits =
        v.is_tensor() && v.tensor.dtype == want.dtype &&
        (dynamic ? v.tensor.sizes.size() == want.sizes.size() : v.tensor.sizes == want.sizes);
    if (!fits) {
      return invalid_input(
          "delegate " + std::string(input ? "input " : "output ") + std::to_string(k) +
          " should be " + want.describe() + (dynamic ? " (dynamic-bound)" : "") + ", got " +
          (v.is_tensor() ? v.tensor.describe() : std::string(value_kind_name(v.kind))));
    }
    if (input && dynamic) ETC_RETURN_IF_ERROR(m.resize_input(k, v.tensor.sizes));
    ETC_RETURN_IF_ERROR(input ? m.bind_input(k, v.tensor.data) : m.bind_output(k, v.tensor.data));
  }
  return Status();
}

Status publish_delegate_outputs(const Method& m, std::span<Value*> args) {
  const size_t n_in = m.num_inputs();
  for (size_t k = 0; k < m.num_outputs(); ++k) {
    const TensorView& got = m.output(k);
    TensorView& caller = args[n_in + k]->tensor;
    if (caller.sizes == got.sizes) continue;
    if (caller.capacity < 0 || got.nbytes() > caller.capacity) {
      return internal_error("delegate output " + std::to_string(k) + " is " + got.describe() +
                            ", which does not fit the caller's " + caller.describe());
    }
    caller.sizes = got.sizes;
  }
  return Status();
}

}  // namespace etc::rt
