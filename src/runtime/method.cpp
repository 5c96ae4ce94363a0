#include "runtime/method.h"

#include <algorithm>
#include <chrono>

#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "format/pte_reader.h"
#include "graph/tensor_spec.h"
#include "runtime/kernels/conv.h"

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

std::string op_name(const pte::Operator& o) {
  return o.name + (o.overload.empty() ? "" : "." + o.overload);
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
  // Int values a kernel writes at run time (the return value of aten::sym_size.int and of
  // ExecuTorch's executorch_prim scalar ops): IntLists that hold them are re-read per call.
  std::vector<bool> computed_int(plan.values.size(), false);
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      if (in.kind != pte::InstrKind::kKernel || in.args.empty()) continue;
      const std::string name = op_name(plan.operators[static_cast<size_t>(in.index)]);
      const auto ret = static_cast<size_t>(in.args.back());
      if ((name == "aten::sym_size.int" || name.rfind("executorch_prim::", 0) == 0) &&
          plan.values[ret].kind == pte::ValueKind::kInt)
        computed_int[ret] = true;
    }
  }
  // Steps.
  for (const pte::Chain& c : plan.chains) {
    for (const pte::Instruction& in : c.instructions) {
      Step s;
      s.kind = in.kind;
      s.a = in.index;
      s.b = in.target;
      for (int32_t a : in.args) {
        s.args.push_back(&m->values_[static_cast<size_t>(a)]);
        const pte::EValue& ev = plan.values[static_cast<size_t>(a)];
        if (ev.kind != pte::ValueKind::kIntList) continue;
        Step::IntListRefresh r{&m->values_[static_cast<size_t>(a)], {}};
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
        s.kernel = kernels[static_cast<size_t>(in.index)]->fn;
        s.schema = kernels[static_cast<size_t>(in.index)]->call_schema();
        s.name = op_name(plan.operators[static_cast<size_t>(in.index)]);
      } else if (in.kind == pte::InstrKind::kDelegate) {
        const pte::Delegate& d = plan.delegates[static_cast<size_t>(in.index)];
        s.name = "delegate " + std::to_string(in.index) + " (" + d.id + ")";
        Backend* backend = env.backends == nullptr ? nullptr : env.backends->find(d.id);
        if (backend == nullptr)
          return unsupported("the program needs backend '" + d.id +
                             "', which this runtime does not have");
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
  m->find_unread_outs();  // before plan_channels_last, which keeps pools without indices
  if (env.fuse_epilogues) {
    m->fuse_epilogues();
    if (kernels::onednn_conv_enabled()) m->plan_channels_last();
  }
  return m;
}

namespace {

bool overlaps(const TensorView& a, const TensorView& b) {
  const auto* a0 = static_cast<const char*>(a.data);
  const auto* b0 = static_cast<const char*>(b.data);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// One elementwise instruction read as an epilogue op: its operands (tensors or a scalar), its
// bounds, its out. Only float32 arithmetic with alpha 1, whose kernels round once per
// element, so that the epilogue's arithmetic is the kernel's.
struct ElementwiseStep {
  Epilogue::Op::Kind kind;
  const Value* a = nullptr;
  const Value* b = nullptr;  // null: scalar
  float scalar = 0, lo = 0, hi = 0;
  const Value* out = nullptr;
};

std::optional<ElementwiseStep> read_elementwise(const std::string& name,
                                                std::span<Value* const> args) {
  using Kind = Epilogue::Op::Kind;
  const float inf = std::numeric_limits<float>::infinity();
  auto scalar = [](const Value* v) -> std::optional<float> {
    if (!v->is_scalar()) return std::nullopt;
    return static_cast<float>(v->scalar_as_double());
  };
  auto alpha_one = [](const Value* v) { return v->is_scalar() && v->scalar_as_double() == 1.0; };
  ElementwiseStep e{Kind::kClamp};
  if (name == "aten::relu.out" && args.size() >= 2) {
    e = {Kind::kClamp, args[0], nullptr, 0, 0.0f, inf, args[1]};
  } else if (name == "aten::sigmoid.out" && args.size() >= 2) {
    e = {Kind::kSigmoid, args[0], nullptr, 0, 0, 0, args[1]};
  } else if ((name == "aten::hardtanh.out" || name == "aten::clamp.out") && args.size() >= 4) {
    const bool hardtanh = name == "aten::hardtanh.out";
    if (hardtanh && (args[1]->is_none() || args[2]->is_none())) return std::nullopt;
    const std::optional<float> lo = args[1]->is_none() ? -inf : scalar(args[1]);
    const std::optional<float> hi = args[2]->is_none() ? inf : scalar(args[2]);
    if (!lo || !hi) return std::nullopt;
    e = {Kind::kClamp, args[0], nullptr, 0, *lo, *hi, args[3]};
  } else {
    static const std::map<std::string, std::pair<Kind, bool>, std::less<>> kBinary = {
        {"aten::add.out", {Kind::kAdd, true}},
        {"aten::sub.out", {Kind::kSub, true}},
        {"aten::mul.out", {Kind::kMul, false}},
        {"aten::div.out", {Kind::kDiv, false}},
        {"aten::add.Scalar_out", {Kind::kAdd, true}},
        {"aten::sub.Scalar_out", {Kind::kSub, true}},
        {"aten::mul.Scalar_out", {Kind::kMul, false}},
        {"aten::div.Scalar_out", {Kind::kDiv, false}}};
    auto it = kBinary.find(name);
    if (it == kBinary.end()) return std::nullopt;
    const auto [kind, has_alpha] = it->second;
    const size_t out_at = has_alpha ? 3 : 2;
    if (args.size() <= out_at || (has_alpha && !alpha_one(args[2]))) return std::nullopt;
    e = {kind, args[0], nullptr, 0, 0, 0, args[out_at]};
    if (args[1]->is_tensor()) {
      e.b = args[1];
    } else {
      const std::optional<float> s = scalar(args[1]);
      if (!s) return std::nullopt;
      e.scalar = *s;
    }
  }
  if (!e.a->is_tensor() || !e.out->is_tensor()) return std::nullopt;
  return e;
}

}  // namespace

std::vector<bool> Method::io_values() const {
  std::vector<bool> io(values_.size(), false);
  for (size_t v : inputs_)
    io[v] = true;
  for (size_t v : outputs_)
    io[v] = true;
  return io;
}

bool Method::writes(const Step& s, const Value* u) {
  if (s.kind != pte::InstrKind::kKernel || s.args.empty()) return false;
  const Value* ret = s.args.back();
  return u == ret ||
         std::find(ret->tensors.begin(), ret->tensors.end(), &u->tensor) != ret->tensors.end();
}

bool Method::unread_after(size_t after, const TensorView& t) const {
  if (t.data == nullptr || t.nbytes() == 0) return false;
  // The bytes of t not yet written anew, as [begin, end) ranges.
  using Range = std::pair<const char*, const char*>;
  auto range = [](const TensorView& v) {
    const auto* v0 = static_cast<const char*>(v.data);
    return Range{v0, v0 + v.nbytes()};
  };
  std::vector<Range> live{range(t)};
  auto touches = [&live](const Range& r) {
    return std::any_of(live.begin(), live.end(),
                       [&r](const Range& l) { return r.first < l.second && l.first < r.second; });
  };
  auto written = [&live](const Range& r) {
    std::vector<Range> rest;
    for (const Range& l : live) {
      if (r.second <= l.first || l.second <= r.first) {
        rest.push_back(l);
        continue;
      }
      if (l.first < r.first) rest.emplace_back(l.first, r.first);
      if (r.second < l.second) rest.emplace_back(r.second, l.second);
    }
    live = std::move(rest);
  };
  for (size_t j = after + 1; j < steps_.size(); ++j) {
    const Step& s = steps_[j];
    if (s.kind == pte::InstrKind::kJumpFalse || s.kind == pte::InstrKind::kMove) return false;
    // A kernel's outs: its return value, or the tensors of a returned list, written after its
    // reads. Any other argument over the live bytes (an input, a list item, a delegate's
    // argument) reads them.
    const bool kernel = s.kind == pte::InstrKind::kKernel && !s.args.empty();
    std::vector<Range> outs;
    for (const Value* u : s.args) {
      const bool outs_list = kernel && u == s.args.back() && !u->is_tensor();
      for (const TensorView* v : u->tensors) {
        if (v == nullptr || v->data == nullptr || v->nbytes() == 0) continue;
        if (outs_list) {
          outs.push_back(range(*v));
        } else if (touches(range(*v))) {
          return false;
        }
      }
      if (!u->is_tensor() || u->tensor.data == nullptr || u->tensor.nbytes() == 0) continue;
      if (writes(s, u)) {
        outs.push_back(range(u->tensor));
      } else if (touches(range(u->tensor))) {
        return false;
      }
    }
    for (const Range& r : outs)
      written(r);
    if (live.empty()) return true;
  }
  for (size_t k : outputs_) {
    if (values_[k].is_tensor() && values_[k].tensor.data != nullptr &&
        values_[k].tensor.nbytes() > 0 && touches(range(values_[k].tensor)))
      return false;
  }
  return true;
}

void Method::find_unread_outs() {
  // Only max_pool2d_with_indices' indices (argument 7): a program that pools for inference
  // never reads them, and they cost as much as the pooling.
  const std::vector<bool> io = io_values();
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    if (s.kind != pte::InstrKind::kKernel || s.name != "aten::max_pool2d_with_indices.out" ||
        s.args.size() < 8 || !s.args[7]->is_tensor())
      continue;
    const Value* indices = s.args[7];
    if (io[static_cast<size_t>(indices - values_.data())] || indices->tensor.data == nullptr)
      continue;
    // Read: any other instruction naming it, or an int64 tensor over its bytes (a view). An
    // out another kernel writes there does not read it: the plan gives every pooling's
    // indices, dead as soon as they are written, the same bytes (googlenet's 13 pools each
    // computed indices for that alone, 40% of its time).
    bool read = false;
    for (size_t j = 0; j < steps_.size() && !read; ++j) {
      if (j == i) continue;
      const Step& other = steps_[j];
      for (size_t k = 0; k < other.args.size(); ++k) {
        const Value* a = other.args[k];
        const bool is_kernel = other.kind == pte::InstrKind::kKernel;
        if (is_kernel && k + 1 == other.args.size()) continue;  // the return value: its outs
        if (is_kernel && other.schema != nullptr && k < other.schema->args.size() &&
            other.schema->args[k].is_out)
          continue;  // written, not read (an input in another position is still seen)
        auto over = [&](const TensorView* t) {
          return t != nullptr && t->dtype == DType::kInt64 && t->data != nullptr &&
                 overlaps(*t, indices->tensor);
        };
        const bool same = a == indices;
        bool alias = a->is_tensor() && over(&a->tensor);
        if (!a->is_tensor()) {
          for (const TensorView* t : a->tensors)
            alias = alias || over(t);  // a list's tensors (cat of the indices)
        }
        if (same || alias) {
          read = true;
          break;
        }
      }
    }
    if (!read) s.unread_outs |= uint64_t{1} << 7;
  }
}

void Method::fuse_epilogues() {
  // A jump could land between a kernel and the instructions fused into it.
  for (const Step& s : steps_) {
    if (s.kind == pte::InstrKind::kJumpFalse) return;
  }
  // Method inputs and outputs may be rebound to caller memory: never part of a chain.
  const std::vector<bool> io = io_values();
  // A matrix product's out is read through views of other shapes (mm's [24, 384] as [1, 24,
  // 384]): there the operands need the out's element count only (planned tensors are
  // contiguous), and a row of the out's last dim may be broadcast (the bias of a linear
  // layer). A convolution's need its shape.
  bool by_count = false;
  auto plain = [&](const Value* v, const TensorView& like) {
    const TensorView& t = v->tensor;
    return v->is_tensor() && !io[static_cast<size_t>(v - values_.data())] &&
           t.dtype == DType::kFloat32 &&
           (by_count ? t.numel() == like.numel() : t.sizes == like.sizes) && t.capacity < 0 &&
           t.data != nullptr && t.device.is_cpu();
  };
  // A row broadcast along like's last dim: its period, else 0.
  auto row_of = [&](const Value* v, const TensorView& like) -> int64_t {
    const TensorView& t = v->tensor;
    if (!by_count || !v->is_tensor() || t.rank() != 1 || like.rank() < 2 ||
        t.sizes[0] != like.sizes.back() || t.sizes[0] <= 0 || t.dtype != DType::kFloat32 ||
        t.capacity >= 0 || t.data == nullptr || !t.device.is_cpu())
      return 0;
    return t.sizes[0];
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    // convolution.out: 9 arguments, the out, the return value; mm.out: 2, the out, the return
    // value.
    if (s.kind != pte::InstrKind::kKernel) continue;
    size_t out_at = 0;
    if (s.name == "aten::convolution.out" && s.args.size() >= 10) {
      out_at = 9;
    } else if (s.name == "aten::mm.out" && s.args.size() >= 3) {
      out_at = 2;
    } else if (s.name == "aten::_native_batch_norm_legit_no_training.out" && s.args.size() >= 11) {
      out_at = 7;  // out0; a batch norm before a convolution (densenet's) and its relu
    } else {
      continue;
    }
    by_count = out_at == 2;
    if (!plain(s.args[out_at], s.args[out_at]->tensor)) continue;
    const TensorView& y = s.args[out_at]->tensor;
    std::vector<const TensorView*> chain{&y};  // memory the chain writes
    std::vector<const TensorView*> external;   // operands from outside the chain
    auto in_chain = [&](const TensorView& t) {
      return std::any_of(chain.begin(), chain.end(),
                         [&](const TensorView* c) { return c->data == t.data; });
    };
    auto overlaps_any = [&](const TensorView& t, const std::vector<const TensorView*>& set) {
      return std::any_of(set.begin(), set.end(),
                         [&](const TensorView* c) { return overlaps(*c, t); });
    };
    auto epilogue = std::make_unique<Epilogue>();
    size_t last = i;  // the chain's last step
    for (size_t j = i + 1; j < steps_.size() && steps_[j].kind == pte::InstrKind::kKernel; ++j) {
      const std::optional<ElementwiseStep> e = read_elementwise(steps_[j].name, steps_[j].args);
      if (!e || !plain(e->out, y)) break;
      // Each operand the out's shape, or (a matrix product's) a broadcast row.
      const int64_t a_period = plain(e->a, y) ? 0 : row_of(e->a, y);
      const int64_t b_period = e->b == nullptr || plain(e->b, y) ? 0 : row_of(e->b, y);
      if ((a_period == 0 && !plain(e->a, y)) ||
          (e->b != nullptr && b_period == 0 && !plain(e->b, y)))
        break;
      // Operands: chain memory, or memory the chain never writes (a broadcast row is never
      // the chain's).
      bool reads_chain = false, ok = true;
      std::vector<const TensorView*> fresh;
      for (const Value* operand : {e->a, e->b}) {
        if (operand == nullptr) continue;
        const bool row = operand == e->a ? a_period > 0 : b_period > 0;
        if (!row && in_chain(operand->tensor)) {
          reads_chain = true;
        } else if (overlaps_any(operand->tensor, chain)) {
          ok = false;
        } else {
          fresh.push_back(&operand->tensor);
        }
      }
      // The out: chain memory, or memory that no operand so far overlaps. Over one of the
      // kernel's inputs, the chain waits until the kernel has read them.
      const TensorView& out = e->out->tensor;
      bool after_inputs = false;
      if (!in_chain(out)) {
        ok = ok && !overlaps_any(out, chain) && !overlaps_any(out, external) &&
             !overlaps_any(out, fresh);
        for (size_t a = 0; a < out_at; ++a)
          after_inputs =
              after_inputs || (s.args[a]->is_tensor() && overlaps(s.args[a]->tensor, out));
      }
      if (!ok || !reads_chain) break;
      epilogue->ops.push_back(Epilogue::Op{e->kind, &e->a->tensor,
                                           e->b != nullptr ? &e->b->tensor : nullptr, e->scalar,
                                           e->lo, e->hi, &out, a_period, b_period});
      epilogue->after_inputs = epilogue->after_inputs || after_inputs;
      external.insert(external.end(), fresh.begin(), fresh.end());
      if (!in_chain(out)) chain.push_back(&out);
      steps_[j].fused = true;
      s.fused_names += " + " + steps_[j].name;
      last = j;
    }
    if (!epilogue->ops.empty()) {
      epilogue->activation = kernels::match_activation(*epilogue, y);
      epilogue->out_unread =
          epilogue->activation && epilogue->activation->t->data != y.data && unread_after(last, y);
      s.epilogue = std::move(epilogue);
    }
  }
}

size_t Method::channels_last_convolutions() const {
  return static_cast<size_t>(std::count_if(
      steps_.begin(), steps_.end(), [](const Step& s) { return s.channels_last_args != 0; }));
}

void Method::plan_channels_last() {
  // Without jumps the steps run in order: a tensor lives from the step that writes it until
  // a step writes its bytes anew.
  // A move rebinds a value to another's bytes, which no step names: none of that either.
  for (const Step& s : steps_) {
    if (s.kind == pte::InstrKind::kJumpFalse || s.kind == pte::InstrKind::kMove) return;
  }
  const std::vector<bool> io = io_values();
  auto index_of = [&](const Value* v) { return static_cast<size_t>(v - values_.data()); };
  std::map<const TensorView*, const Value*> by_tensor;
  for (const Value& v : values_)
    by_tensor[&v.tensor] = &v;
  // A convolution that can run on oneDNN with channels-last tensors, and what it writes (its
  // out, its epilogue's outs) and reads through its epilogue (operands from outside).
  struct Group {
    size_t step = 0;
    std::vector<const Value*> writes, operands;
    bool channels_last = true;
    // A max pooling (its out at argument 6) rather than a convolution (argument 9): it reads
    // and writes one layout, its input's.
    bool pool = false;
    size_t out_arg = 9;
  };
  std::vector<Group> groups;
  std::map<const Value*, size_t> writer;  // value -> its group
  std::vector<int64_t> group_of_step(steps_.size(), -1);
  auto usable = [&](const Value* v) {
    return v->is_tensor() && !io[index_of(v)] && v->tensor.capacity < 0 &&
           v->tensor.data != nullptr && v->tensor.device.is_cpu();
  };
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (s.kind != pte::InstrKind::kKernel || s.fused || s.name != "aten::convolution.out" ||
        ((s.constant_args >> 1) & 1) == 0)
      continue;
    const std::optional<kernels::ConvGeometry> g = kernels::float_conv2d_geometry(s.args);
    // Not 1x1 convolutions of fewer than 16 input channels (etc's kernel ran PP-OCR's 12 ->
    // 96 layer, 64x80, in 0.07 ms, oneDNN in 0.17), nor grouped ones of fewer than 32 channels
    // (the PP-OCR classifier's 8-24 channel depthwise layers: 5-10% slower in all), nor
    // ungrouped ones under 2 M multiply-adds (mobilenet_v3_small's 16 -> 16 and 24 -> 88 1x1
    // layers ran 2.5-3.5x slower on oneDNN at 2 threads: its fixed cost per band).
    // A first layer reading a method input (NCHW, never in a chain) runs etc's direct loop
    // into a channels-last out (channels_last_convolution): no oneDNN state to make for it.
    if (!g || !usable(s.args[9]) || s.args[0]->tensor.capacity >= 0 ||
        (g->kh * g->kw == 1 && g->c_in < 16) || (g->groups > 1 && g->c_out < 32) ||
        (g->groups == 1 &&
         g->batch * g->oh * g->ow * g->c_out * g->c_in * g->kh * g->kw < (int64_t{1} << 21)))
      continue;
    const bool direct_first_layer = io[index_of(s.args[0])] && kernels::few_input_channels_conv(*g);
    if (!direct_first_layer && !kernels::prepare_onednn_conv(s.args, *g, steps_[i].state)) continue;
    Group group;
    group.step = i;
    group.writes.push_back(s.args[9]);
    bool ok = true;
    if (s.epilogue != nullptr) {
      auto add = [&](std::vector<const Value*>& to, const TensorView* t) {
        auto it = by_tensor.find(t);
        if (it == by_tensor.end() || !usable(it->second)) {
          ok = false;
          return;
        }
        if (std::find(to.begin(), to.end(), it->second) == to.end()) to.push_back(it->second);
      };
      for (const Epilogue::Op& op : s.epilogue->ops)
        add(group.writes, op.out);
      for (const Epilogue::Op& op : s.epilogue->ops) {
        for (const TensorView* t : {op.a, op.b}) {
          if (t == nullptr) continue;
          auto it = by_tensor.find(t);
          if (it != by_tensor.end() &&
              std::find(group.writes.begin(), group.writes.end(), it->second) != group.writes.end())
            continue;
          add(group.operands, t);
        }
      }
    }
    if (!ok) continue;
    for (const Value* v : group.writes) {
      if (writer.count(v) != 0) ok = false;  // written by two convolutions: leave both
    }
    if (!ok) continue;
    group_of_step[i] = static_cast<int64_t>(groups.size());
    for (const Value* v : group.writes)
      writer[v] = groups.size();
    groups.push_back(std::move(group));
  }
  // Max poolings whose indices nothing reads, of 4-d float tensors (resnet18's pooling between
  // its first convolution and its first stage): channels-last where their input is (the
  // kernel takes 16 channels of a pixel per vector: no stride-2 shuffles).
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    if (s.kind != pte::InstrKind::kKernel || s.fused ||
        s.name != "aten::max_pool2d_with_indices.out" || s.args.size() != 9 ||
        ((s.unread_outs >> 7) & 1) == 0 || !usable(s.args[0]) || !usable(s.args[6]) ||
        s.args[0]->tensor.dtype != DType::kFloat32 || s.args[0]->tensor.rank() != 4 ||
        s.args[6]->tensor.dtype != DType::kFloat32 || writer.count(s.args[6]) != 0)
      continue;
    Group group;
    group.step = i;
    group.pool = true;
    group.out_arg = 6;
    group.writes.push_back(s.args[6]);
    group_of_step[i] = static_cast<int64_t>(groups.size());
    writer[s.args[6]] = groups.size();
    groups.push_back(std::move(group));
  }
  if (groups.empty()) return;

  // Who reads each written tensor. The convolutions of groups may read one as their input
  // (argument 0); an epilogue may read one as an operand if its own group agrees on the
  // layout; anything else (another kernel, a delegate, an alias of its memory while it
  // lives) keeps the tensor NCHW.
  std::vector<std::pair<size_t, size_t>> agree;  // groups that must share a layout
  size_t owner = 0;                              // the kernel whose epilogue a fused step is
  for (size_t j = 0; j < steps_.size(); ++j) {
    const Step& s = steps_[j];
    if (!s.fused) owner = j;
    const int64_t own = group_of_step[owner];
    for (size_t a = 0; a < s.args.size(); ++a) {
      // A list of tensors (cat, stack, index) reads its items as NCHW; a kernel's returned
      // list is its outs (a group's own pooling out among them).
      const bool outs_list = !s.fused && s.kind == pte::InstrKind::kKernel &&
                             a + 1 == s.args.size() && !s.args[a]->is_tensor() && own >= 0 &&
                             static_cast<size_t>(own) < groups.size() &&
                             groups[static_cast<size_t>(own)].pool;
      for (const TensorView* t : outs_list ? std::vector<TensorView*>{} : s.args[a]->tensors) {
        auto item = t == nullptr ? by_tensor.end() : by_tensor.find(t);
        if (item == by_tensor.end()) continue;
        auto w = writer.find(item->second);
        if (w != writer.end()) groups[w->second].channels_last = false;
      }
      auto it = writer.find(s.args[a]);
      if (it == writer.end()) continue;
      Group& g = groups[it->second];
      if (own == static_cast<int64_t>(it->second)) {
        // Its own convolution names it as its out (and return value), its epilogue as operand
        // or out.
        if (s.fused || a >= g.out_arg) continue;
        g.channels_last = false;  // also the convolution's input: in place
      } else if (!s.fused && own >= 0 && a == 0) {
        // The input of another oneDNN convolution, or of a pooling, whose out then takes its
        // layout.
        if (groups[static_cast<size_t>(own)].pool)
          agree.emplace_back(it->second, static_cast<size_t>(own));
      } else if (s.fused && own >= 0) {
        agree.emplace_back(it->second, static_cast<size_t>(own));
      } else {
        g.channels_last = false;
      }
    }
  }
  // Other values over a written tensor's memory (views the program reads it through, which
  // assume NCHW), from the group's step until a kernel writes that memory anew (its out, the
  // last argument: the planner reuses the bytes for another tensor).
  // And a method output over it that no kernel writes anew after it (a caller reads it as
  // NCHW).
  for (Group& g : groups) {
    for (const Value* v : g.writes) {
      bool reused = false;
      for (size_t j = g.step + 1; j < steps_.size() && !reused && g.channels_last; ++j) {
        const Step& s = steps_[j];
        // A kernel's outs: its return value, or the tensors of a returned list (max
        // pooling's values and indices), written after its reads.
        const bool kernel = s.kind == pte::InstrKind::kKernel && !s.fused;
        for (const Value* u : s.args) {
          const bool outs_list = kernel && u == s.args.back() && !u->is_tensor();
          for (const TensorView* t : u->tensors) {  // list items over it: read as NCHW
            if (t != nullptr && t->data != nullptr && t->nbytes() > 0 && overlaps(*t, v->tensor)) {
              if (outs_list) {
                reused = true;
              } else {
                g.channels_last = false;
              }
            }
          }
          if (!u->is_tensor() || u->tensor.data == nullptr || u->tensor.nbytes() == 0 ||
              std::find(g.writes.begin(), g.writes.end(), u) != g.writes.end() ||
              !overlaps(u->tensor, v->tensor))
            continue;
          if (kernel && writes(s, u)) {
            reused = true;  // after this step's reads, checked in this loop too
          } else {
            g.channels_last = false;
          }
        }
      }
      for (size_t k : outputs_) {
        const Value& o = values_[k];
        if (!reused && o.is_tensor() && o.tensor.data != nullptr && o.tensor.nbytes() > 0 &&
            overlaps(o.tensor, v->tensor))
          g.channels_last = false;
      }
    }
    // An epilogue operand from outside every group is NCHW: the group's layout must be too.
    for (const Value* v : g.operands) {
      if (writer.count(v) == 0) g.channels_last = false;
    }
    // So is a pooling's input that no group writes.
    if (g.pool && writer.count(steps_[g.step].args[0]) == 0) g.channels_last = false;
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [a, b] : agree) {
      if (groups[a].channels_last != groups[b].channels_last) {
        groups[a].channels_last = groups[b].channels_last = false;
        changed = true;
      }
    }
  }
  for (const Group& g : groups) {
    Step& s = steps_[g.step];
    if (g.channels_last) s.channels_last_args |= uint64_t{1} << g.out_arg;
    auto in = writer.find(s.args[0]);
    if (in != writer.end() && groups[in->second].channels_last)
      s.channels_last_args |= uint64_t{1} << 0;
  }
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
  if (i >= inputs_.size())
    return invalid_input("input " + std::to_string(i) + " does not exist (" +
                         std::to_string(inputs_.size()) + " inputs)");
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
  if (i >= inputs_.size())
    return invalid_input("input " + std::to_string(i) + " does not exist (" +
                         std::to_string(inputs_.size()) + " inputs)");
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
  return std::any_of(steps_.begin(), steps_.end(), [](const Step& s) {
    return s.kind == pte::InstrKind::kKernel &&
           (s.name == "aten::copy_" || s.name == "aten::index_put_");
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
  for (size_t pc = 0; pc < steps_.size();) {
    Step& s = steps_[pc];
    switch (s.kind) {
      case pte::InstrKind::kKernel:
      case pte::InstrKind::kDelegate: {
        const bool kernel = s.kind == pte::InstrKind::kKernel;
        if (s.fused) {  // done by the epilogue of the kernel before it
          ++pc;
          break;
        }
        const auto start =
            profile_ ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
        Status st;
        for (const Step::IntListRefresh& r : s.refresh) {
          for (const auto& [k, item] : r.items)
            r.list->ints[k] = item->i;
        }
        if (kernel) {
          KernelContext ctx{s.name,        env_.allocators,      env_.kernel_state,
                            &s.state,      s.constant_args,      s.epilogue.get(),
                            s.unread_outs, s.channels_last_args, s.schema};
          ctx.instruction = static_cast<uint32_t>(pc);
          st = s.kernel(ctx, s.args);
        } else {
          st = delegates_[s.delegate]->execute(s.args);
        }
        if (profile_) {
          OpTime& t =
              (*profile_)[!kernel             ? "delegate " + s.name
                          : profile_by_shape_ ? s.name + s.fused_names + describe_args(s.args)
                                              : s.name + s.fused_names];
          ++t.calls;
          if (kernel) t.flops += kernel_flops(s.name, s.args);
          t.ms +=
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();
        }
        if (!st.ok())
          return std::move(st).add_context("in instruction " + std::to_string(pc) + " (" + s.name +
                                           ")");
        ++pc;
        break;
      }
      case pte::InstrKind::kMove:
        values_[static_cast<size_t>(s.b)] = values_[static_cast<size_t>(s.a)];
        ++pc;
        break;
      case pte::InstrKind::kJumpFalse: {
        const Value& c = values_[static_cast<size_t>(s.a)];
        bool cond = c.kind == Value::Kind::kBool ? c.b
                    : c.is_tensor() && c.tensor.dtype == DType::kBool && c.tensor.numel() == 1
                        ? *static_cast<const bool*>(c.tensor.data)
                        : true;
        pc = cond ? pc + 1 : static_cast<size_t>(s.b);
        break;
      }
      case pte::InstrKind::kFree:
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

// ---- et_copy kernels -----------------------------------------------------------------

namespace {

Status copy_kernel(KernelContext& ctx, std::span<Value*> args, bool to_device) {
  if (args.size() != 3 || !args[0]->is_tensor() || !args[1]->is_tensor()) {
    return ctx.error("expected (self, out, return), got " + std::to_string(args.size()) +
                     " arguments");
  }
  const TensorView& src = args[0]->tensor;
  TensorView& dst = args[1]->tensor;
  // A dynamic-bound destination takes the source's actual sizes (within its bound).
  const bool resizable =
      dst.capacity >= 0 && src.sizes.size() == dst.sizes.size() && src.nbytes() <= dst.capacity;
  if (src.dtype != dst.dtype || (src.sizes != dst.sizes && !resizable)) {
    return ctx.error("source " + src.describe() + " and destination " + dst.describe() + " differ");
  }
  dst.sizes = src.sizes;
  const TensorView& device_side = to_device ? dst : src;
  const TensorView& host_side = to_device ? src : dst;
  if (device_side.device.is_cpu() || !host_side.device.is_cpu()) {
    return ctx.error(std::string("expected a ") +
                     (to_device ? "host source and a device destination"
                                : "device source and a host destination") +
                     ", got " + src.describe() + " -> " + dst.describe());
  }
  if (ctx.allocators == nullptr) return ctx.error("no device allocators are available");
  ETC_ASSIGN_OR_RETURN(DeviceAllocator * a, ctx.allocators->for_device(device_side.device));
  size_t bytes = static_cast<size_t>(src.nbytes());
  return to_device ? a->copy_host_to_device(dst.data, src.data, bytes, dst.device.index)
                   : a->copy_device_to_host(dst.data, src.data, bytes, src.device.index);
}

Status h2d_copy(KernelContext& ctx, std::span<Value*> args) {
  return copy_kernel(ctx, args, true);
}
Status d2h_copy(KernelContext& ctx, std::span<Value*> args) {
  return copy_kernel(ctx, args, false);
}

}  // namespace

Status register_copy_kernels(OperatorRegistry& registry) {
  ETC_RETURN_IF_ERROR(registry.add(OpKind::H2DCopy, &h2d_copy, KernelForms::kOut));
  return registry.add(OpKind::D2HCopy, &d2h_copy, KernelForms::kOut);
}

}  // namespace etc::rt
