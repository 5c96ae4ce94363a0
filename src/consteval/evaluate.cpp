#include "consteval/evaluate.h"

#include <cstring>
#include <functional>
#include <memory>

#include "runtime/kernel.h"

namespace etc {
namespace {

// The CPU kernels, registered once for the process (never destroyed: evaluation may run
// from static destructors' callers), and whether registering them succeeded.
struct CpuKernels {
  rt::OperatorRegistry registry;
  Status registered;
};
const CpuKernels& cpu_kernels() {
  static const CpuKernels* kernels = [] {
    auto* k = new CpuKernels();
    k->registered = rt::register_cpu_kernels(k->registry);
    return k;
  }();
  return *kernels;
}

// Ops whose result is not a function of their arguments: evaluating them once at export
// would freeze what the program draws anew on every run.
bool is_random(OpKind op) {
  return op == OpKind::Rand || op == OpKind::Randn || op == OpKind::Randperm;
}

// The memory kernels read and write: each tensor's bytes at an address aligned as the
// runtime aligns its buffers (a constant's bytes may be a window into an archive at any
// offset), and the outputs, which become the results' blobs.
class Buffers {
 public:
  explicit Buffers(WritableArena* arena) : arena_(arena) {}
  // A view of `spec`'s constant bytes, copied when they are not aligned to their element
  // (kernels read elements as their C++ type; their SIMD loads need no more).
  rt::TensorView input(const TensorSpec& spec) {
    rt::TensorView t;
    t.dtype = spec.dtype;
    t.sizes = spec.sizes;
    std::span<const uint8_t> bytes = spec.constant.bytes();
    const auto align = static_cast<uintptr_t>(dtype_size(spec.dtype));
    if (reinterpret_cast<uintptr_t>(bytes.data()) % align == 0) {
      t.data = const_cast<uint8_t*>(bytes.data());  // kernels do not write their inputs
    } else {
      uint8_t* data = nullptr;
      keep_.push_back(make_writable_blob(std::max<size_t>(bytes.size(), 1), &data));
      if (!bytes.empty()) std::memcpy(data, bytes.data(), bytes.size());
      t.data = data;
    }
    return t;
  }
  // A fresh output of `spec`'s sizes; its bytes become result `ConstantData`.
  rt::TensorView output(const TensorSpec& spec, ConstantData* result) {
    rt::TensorView t;
    t.dtype = spec.dtype;
    t.sizes = spec.sizes;
    const auto size = static_cast<size_t>(spec.nbytes());
    uint8_t* data = nullptr;
    if (arena_ != nullptr && size > 0) {
      // Never handed out before: fresh pages of an anonymous mapping, zero.
      WritableArena::Piece piece = arena_->allocate(size);
      result->blob = std::move(piece.blob);
      result->offset = piece.offset;
      data = piece.data;
    } else {
      result->blob = make_writable_blob(std::max<size_t>(size, 1), &data);
      result->offset = 0;
      if (size > 0) std::memset(data, 0, size);  // the bytes are the same on every export
    }
    result->size = size;
    t.data = data;
    return t;
  }

 private:
  WritableArena* arena_;
  std::vector<std::shared_ptr<const Blob>> keep_;
};

// A non-tensor argument as the kernel's value (a Scalar as its int, double or bool).
rt::Value plain_value(const ArgValue& a) {
  rt::Value v;
  if (const auto* sc = std::get_if<Scalar>(&a)) {
    return plain_value(std::visit([](auto x) { return ArgValue(x); }, sc->v));
  }
  if (const auto* n = std::get_if<int64_t>(&a)) {
    v.kind = rt::Value::Kind::kInt;
    v.i = *n;
  } else if (const auto* il = std::get_if<std::vector<int64_t>>(&a)) {
    v.kind = rt::Value::Kind::kIntList;
    v.ints = *il;
  } else if (const auto* d = std::get_if<double>(&a)) {
    v.kind = rt::Value::Kind::kDouble;
    v.d = *d;
  } else if (const auto* dl = std::get_if<std::vector<double>>(&a)) {
    v.kind = rt::Value::Kind::kDoubleList;
    v.doubles = *dl;
  } else if (const auto* b = std::get_if<bool>(&a)) {
    v.kind = rt::Value::Kind::kBool;
    v.b = *b;
  } else if (const auto* bl = std::get_if<std::vector<bool>>(&a)) {
    v.kind = rt::Value::Kind::kBoolList;
    v.bools = *bl;
  } else if (const auto* str = std::get_if<std::string>(&a)) {
    v.kind = rt::Value::Kind::kString;
    v.s = *str;
  } else if (const auto* dt = std::get_if<DType>(&a)) {
    v.kind = rt::Value::Kind::kInt;                         // a ScalarType, as programs carry it
    v.i = static_cast<uint8_t>(dtype_to_scalar_type(*dt));  // 0..max
  } else {
    v.kind = rt::Value::Kind::kNone;  // None (tensors are handled by the caller)
  }
  return v;
}

Result<std::vector<ConstantData>> run_kernel(OpKind op, std::span<const ArgValue> args,
                                             const KnownSpecOf& spec_of,
                                             std::span<const TensorSpec> outputs,
                                             WritableArena* arena) {
  const OpInfo& info = op_info(op);
  if (std::string why = why_not_evaluable(op); !why.empty())
    return invalid_input(info.name + " cannot be evaluated at export time: " + why);
  const rt::RegisteredKernel* kernel = cpu_kernels().registry.find(info.kernel_name);
  const OpSchema& schema = info.schema;
  if (args.size() != schema.args.size()) {
    return internal_error(info.name + ": " + std::to_string(args.size()) + " arguments for " +
                          std::to_string(schema.args.size()) + " in its schema");
  }
  for (const TensorSpec& o : outputs) {
    if (o.dynamism != ShapeDynamism::kStatic)
      return invalid_input(info.name + ": its result's sizes are not static");
  }
  // The kernel's values, in ExecuTorch's calling convention for a functional form: the
  // schema's arguments, the outs, the return value (the out, or a list of the outs).
  // Values are held by pointer: lists point at the tensors of other values.
  std::vector<std::unique_ptr<rt::Value>> values;
  auto add = [&values](rt::Value v) {
    values.push_back(std::make_unique<rt::Value>(std::move(v)));
    return values.back().get();
  };
  Buffers buffers(arena);
  auto tensor_value = [&](ValueId id) -> Result<rt::Value*> {
    const TensorSpec* spec = id.valid() ? spec_of(id) : nullptr;
    if (spec == nullptr) return invalid_input(info.name + ": a tensor argument is not known");
    if (spec->dynamism != ShapeDynamism::kStatic)
      return invalid_input(info.name + ": a tensor argument's sizes are not static");
    rt::Value v;
    v.kind = rt::Value::Kind::kTensor;
    v.tensor = buffers.input(*spec);
    return add(std::move(v));
  };
  std::vector<rt::Value*> call;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    rt::Value v;
    if (const auto* id = std::get_if<ValueId>(&a)) {
      ETC_ASSIGN_OR_RETURN(rt::Value * t, tensor_value(*id));
      call.push_back(t);
      continue;
    }
    if (const auto* ids = std::get_if<std::vector<ValueId>>(&a)) {
      const bool optional = schema.args[i].type == ArgType::kOptionalTensorList;
      v.kind = optional ? rt::Value::Kind::kOptionalTensorList : rt::Value::Kind::kTensorList;
      for (ValueId t : *ids) {
        if (!t.valid() && optional) {
          v.tensors.push_back(nullptr);
          continue;
        }
        ETC_ASSIGN_OR_RETURN(rt::Value * item, tensor_value(t));
        v.tensors.push_back(&item->tensor);
      }
    } else {
      v = plain_value(a);
    }
    call.push_back(add(std::move(v)));
  }
  std::vector<ConstantData> results(outputs.size());
  std::vector<rt::Value*> outs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    rt::Value v;
    v.kind = rt::Value::Kind::kTensor;
    v.tensor = buffers.output(outputs[i], &results[i]);
    outs.push_back(add(std::move(v)));
    call.push_back(outs.back());
  }
  if (outs.size() == 1) {
    call.push_back(outs[0]);
  } else {
    rt::Value list;
    list.kind = rt::Value::Kind::kTensorList;
    for (rt::Value* o : outs)
      list.tensors.push_back(&o->tensor);
    call.push_back(add(std::move(list)));
  }
  rt::KernelContext ctx;
  ctx.op = kernel->name;
  ctx.schema = kernel->call_schema();
  ETC_RETURN_IF_ERROR(kernel->fn(ctx, call));
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outs[i]->tensor.sizes != outputs[i].sizes) {
      return internal_error(info.name + ": the kernel resized output " + std::to_string(i) +
                            " that shape inference sized");
    }
  }
  return results;
}

}  // namespace

std::string why_not_evaluable(OpKind op) {
  if (is_random(op)) return "a random op draws anew on every run";
  const CpuKernels& k = cpu_kernels();
  if (!k.registered.ok()) return "the CPU kernels did not register: " + k.registered.message();
  const OpInfo& info = op_info(op);
  if (info.kernel_name.empty() || k.registry.find(info.kernel_name) == nullptr)
    return "no CPU kernel runs its functional form";
  return "";
}

bool keeps_program_small(int64_t input_bytes, int64_t output_bytes) {
  constexpr int64_t kMaxGrowth = int64_t{64} * 1024;
  return output_bytes <= input_bytes + kMaxGrowth;
}

Result<std::vector<ConstantData>> evaluate_node(const Graph& graph, const Node& node,
                                                WritableArena* arena) {
  KnownSpecOf spec_of = [&graph](ValueId id) -> const TensorSpec* {
    const Value& v = graph.value(id);
    return v.kind == ValueKind::kConstant ? &v.spec : nullptr;
  };
  std::vector<TensorSpec> outputs;
  for (ValueId o : node.outputs)
    outputs.push_back(graph.value(o).spec);
  return run_kernel(node.op, node.args, spec_of, outputs, arena);
}

Result<std::vector<ConstantData>> evaluate_op(OpKind op, std::span<const ArgValue> args,
                                              const KnownSpecOf& known,
                                              std::span<const TensorSpec> outputs,
                                              WritableArena* arena) {
  return run_kernel(op, args, known, outputs, arena);
}

Result<std::vector<ValueId>> add_evaluated(Graph& graph, OpKind op, std::span<const ArgValue> args,
                                           std::span<const std::string> names,
                                           std::span<const TensorSpec> specs) {
  KnownSpecOf spec_of = [&graph](ValueId v) -> const TensorSpec* {
    const Value& value = graph.value(v);
    return value.kind == ValueKind::kConstant ? &value.spec : nullptr;
  };
  ETC_ASSIGN_OR_RETURN(std::vector<ConstantData> results,
                       run_kernel(op, args, spec_of, specs, nullptr));
  std::vector<ValueId> ids;
  for (size_t i = 0; i < specs.size(); ++i) {
    TensorSpec spec = specs[i];
    spec.is_const = true;
    spec.constant = std::move(results[i]);
    ids.push_back(graph.add_constant(names[i], std::move(spec)));
  }
  return ids;
}

}  // namespace etc
