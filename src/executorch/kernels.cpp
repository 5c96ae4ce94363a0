// etc's CPU kernels as an ExecuTorch kernel library (etc_executorch.h,
// register_kernels_with_executorch).
//
// ExecuTorch calls a kernel as void(KernelRuntimeContext&, et::Span<EValue*>): a plain function
// pointer, no closure. Each etc kernel gets one of kMaxKernels trampolines, trampoline<I>
// calling the I-th registered kernel. The arguments are the instruction's values in the same
// convention as etc's own runtime (every schema argument in order, the outs among them, then
// the return value), so the adapter only translates ExecuTorch's EValues into etc's
// rt::Values: tensors become views of the same memory, nothing is copied.
//
// Per instruction (ExecuTorch keeps each instruction's argument array for the method's
// lifetime; its address is the instruction's identity) the adapter keeps the translated values,
// the kernel's state (weights it packed) and the largest size each dynamic-bound tensor has
// had, which is its bound: ExecuTorch loads a dynamic-bound tensor at its upper bound and only
// the instruction writing it resizes it.
//
// Constants: a kernel packs a weight once only when told it is a program constant, and nothing
// in ExecuTorch's call says so. constant_tracking_loader wraps the application's DataLoader
// and records the memory of every constant segment ExecuTorch loads, for as long as ExecuTorch
// keeps it; a tensor inside such memory is a constant. When one is released, every state
// packed before is dropped (other memory may take its address).
#include <executorch/runtime/core/device_allocator.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/log.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executorch/et_tensors.h"
#include "executorch/etc_executorch.h"
#include "runtime/copy_kernels.h"
#include "runtime/device_allocator.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace etc::executorch_plugin {
namespace {

namespace et = ::executorch::runtime;
using et::Error;
using et::EValue;
using et::KernelRuntimeContext;
using et_interop::resize_to_view;
using et_interop::TensorBounds;
using et_interop::view_of;
using ::executorch::aten::Tensor;

// Trampolines available: more than etc registers (the test checks the margin).
constexpr size_t kMaxKernels = 768;

// One instruction's translated arguments, rebuilt on every call into the same storage.
struct Instruction {
  std::vector<rt::Value> values;  // one per distinct EValue
  std::vector<rt::Value*> args;   // the call's arguments (a repeated EValue: the same Value)
  std::deque<rt::TensorView> list_items;  // the tensors of tensor lists
  std::vector<const EValue*> seen;        // the distinct EValues, in order
  std::unique_ptr<rt::KernelState> state;
  uint64_t state_generation = 0;  // ConstantMemory::generation when `state` was made
  // Whose entry this is: the kernel and the argument EValues it was made for. ExecuTorch's
  // memory is reused (a method destroyed, another loaded in its place): a call whose kernel
  // or arguments differ is another instruction, and finds everything forgotten.
  size_t kernel = SIZE_MAX;
  std::vector<const EValue*> identity;
  TensorBounds bounds;  // of its dynamic-bound tensors
};

// etc's view of ExecuTorch's device allocator registry, for the et_copy kernels: the copies
// go through whatever allocator ExecuTorch has for CUDA (etc's, when the plugin registered
// it; another library's otherwise), the one that gave the device tensors their memory.
class ExecuTorchCudaMemory final : public rt::DeviceAllocator {
 public:
  DeviceType type() const override { return DeviceType::kCUDA; }
  // ExecuTorch's allocators do not say how many devices there are: the allocator checks.
  int device_count() const override { return 128; }
  Result<void*> allocate(size_t, size_t, int8_t) override {
    return Status(ErrorCode::kInternal, "the kernel library allocates no device memory");
  }
  void deallocate(void*, int8_t) override {}
  Status copy_host_to_device(void* dst, const void* src, size_t bytes, int8_t index) override {
    ETC_ASSIGN_OR_RETURN(et::DeviceAllocator * a, allocator());
    return check(a->copy_host_to_device(dst, src, bytes, index), "to");
  }
  Status copy_device_to_host(void* dst, const void* src, size_t bytes, int8_t index) override {
    ETC_ASSIGN_OR_RETURN(et::DeviceAllocator * a, allocator());
    return check(a->copy_device_to_host(dst, src, bytes, index), "from");
  }
  Result<bool> owns(const void*) const override {
    return Status(ErrorCode::kUnsupported, "ExecuTorch's allocators do not say what they own");
  }
  Result<int> device_of(const void*) const override {
    return Status(ErrorCode::kUnsupported, "ExecuTorch's allocators do not say what they own");
  }

 private:
  static Result<et::DeviceAllocator*> allocator() {
    et::DeviceAllocator* a = et::get_device_allocator(et::etensor::DeviceType::CUDA);
    if (a == nullptr) {
      return Status(ErrorCode::kDeviceUnavailable,
                    "no DeviceAllocator for CUDA is registered with ExecuTorch (register_with_"
                    "executorch registers etc's)");
    }
    return a;
  }
  static Status check(Error e, const char* direction) {
    if (e == Error::Ok) return Status();
    return Status(ErrorCode::kDeviceUnavailable,
                  std::string("ExecuTorch's CUDA allocator failed copying ") + direction +
                      " the device (ExecuTorch error " + std::to_string(static_cast<int>(e)) + ")");
  }
};

struct Library {
  rt::OperatorRegistry registry;
  rt::DeviceAllocatorRegistry allocators;            // for the et_copy kernels
  std::vector<const rt::RegisteredKernel*> kernels;  // by trampoline index
  std::vector<::executorch::ET_RUNTIME_NAMESPACE::Kernel> registered;
  size_t count = 0;
  Error result = Error::Ok;
  std::mutex mu;  // guards `instructions` (methods may run on several threads)
  std::unordered_map<const EValue* const*, std::unique_ptr<Instruction>> instructions;
};

Library& library() {
  static Library* lib = new Library();  // never destroyed: ExecuTorch holds its kernels for good
  return *lib;
}

// The constant segments ExecuTorch holds, loaded through constant_tracking_loader.
struct ConstantMemory {
  struct Span {
    std::uintptr_t end = 0;
    int holders = 0;  // segments loaded over the same bytes (one buffer, two programs)
  };
  std::mutex mu;
  std::map<std::uintptr_t, Span> spans;  // by begin
  uint64_t generation = 0;               // bumped when a segment is released
};

ConstantMemory& constant_memory() {
  static ConstantMemory* m = new ConstantMemory();  // never destroyed, as the library
  return *m;
}

// Bit i set: argument i is a tensor lying wholly in a constant segment (the first 64). Also
// the current generation.
uint64_t constant_args(const std::vector<rt::Value*>& args, uint64_t& generation) {
  ConstantMemory& cm = constant_memory();
  std::lock_guard<std::mutex> lock(cm.mu);
  generation = cm.generation;
  uint64_t bits = 0;
  if (cm.spans.empty()) return bits;
  for (size_t i = 0; i < args.size() && i < 64; ++i) {
    const rt::Value& v = *args[i];
    if (!v.is_tensor() || v.tensor.data == nullptr || v.tensor.nbytes() <= 0) continue;
    const auto begin = reinterpret_cast<std::uintptr_t>(v.tensor.data);
    const auto end = begin + static_cast<std::uintptr_t>(v.tensor.nbytes());
    auto it = cm.spans.upper_bound(begin);
    if (it == cm.spans.begin()) continue;
    --it;
    if (it->first <= begin && end <= it->second.end) bits |= uint64_t{1} << i;
  }
  return bits;
}

class ConstantTrackingLoader final : public et::DataLoader {
 public:
  explicit ConstantTrackingLoader(et::DataLoader& inner) : inner_(inner) {}

  et::Result<et::FreeableBuffer> load(size_t offset, size_t size,
                                      const SegmentInfo& info) const override {
    et::Result<et::FreeableBuffer> loaded = inner_.load(offset, size, info);
    if (!loaded.ok() || info.segment_type != SegmentInfo::Type::Constant || loaded->size() == 0)
      return loaded;
    // data_safe: a buffer of another core's memory (held as an integer address) is passed on
    // untracked, where data() would stop the process.
    et::Result<const void*> where = loaded->data_safe();
    if (!where.ok() || *where == nullptr) return loaded;
    // The inner buffer moves into the context of the one returned, whose release forgets
    // the span before releasing it.
    const void* data = *where;
    auto* held = new et::FreeableBuffer(std::move(*loaded));
    const size_t n = held->size();
    ConstantMemory& cm = constant_memory();
    {
      std::lock_guard<std::mutex> lock(cm.mu);
      const auto begin = reinterpret_cast<std::uintptr_t>(data);
      ConstantMemory::Span& span = cm.spans[begin];
      span.end = std::max(span.end, begin + n);
      ++span.holders;
    }
    return et::FreeableBuffer(data, n, &release, held);
  }
  et::Error load_into(size_t offset, size_t size, const SegmentInfo& info,
                      void* buffer) const override {
    return inner_.load_into(offset, size, info, buffer);
  }
  et::Result<size_t> size() const override { return inner_.size(); }

 private:
  static void release(void* context, void* data, size_t /*size*/) {
    ConstantMemory& cm = constant_memory();
    {
      std::lock_guard<std::mutex> lock(cm.mu);
      auto it = cm.spans.find(reinterpret_cast<std::uintptr_t>(data));
      if (it != cm.spans.end() && --it->second.holders == 0) cm.spans.erase(it);
      ++cm.generation;
    }
    delete static_cast<et::FreeableBuffer*>(context);  // releases the inner buffer
  }
  et::DataLoader& inner_;
};

// ExecuTorch's value as etc's; an empty string or why not.
std::string translate(const EValue& e, Instruction& ins, bool host_only, rt::Value& v) {
  using Kind = rt::Value::Kind;
  v.tensors.clear();
  if (e.isNone()) {
    v.kind = Kind::kNone;
  } else if (e.isInt()) {
    v.kind = Kind::kInt;
    v.i = e.toInt();
  } else if (e.isDouble()) {
    v.kind = Kind::kDouble;
    v.d = e.toDouble();
  } else if (e.isBool()) {
    v.kind = Kind::kBool;
    v.b = e.toBool();
  } else if (e.isString()) {
    v.kind = Kind::kString;
    v.s = std::string(e.toString());
  } else if (e.isIntList()) {
    et::Result<::executorch::aten::ArrayRef<int64_t>> ints = e.tryToIntList();
    if (!ints.ok()) return "an int list ExecuTorch could not read";
    v.kind = Kind::kIntList;
    v.ints.assign(ints->begin(), ints->end());
  } else if (e.isDoubleList()) {
    v.kind = Kind::kDoubleList;
    const auto d = e.toDoubleList();
    v.doubles.assign(d.begin(), d.end());
  } else if (e.isBoolList()) {
    v.kind = Kind::kBoolList;
    const auto b = e.toBoolList();
    v.bools.assign(b.begin(), b.end());
  } else if (e.isTensor()) {
    v.kind = Kind::kTensor;
    return view_of(e.toTensor(), ins.bounds, host_only, v.tensor);
  } else if (e.isTensorList()) {
    v.kind = Kind::kTensorList;
    for (const Tensor& t : e.toTensorList()) {
      rt::TensorView& item = ins.list_items.emplace_back();
      if (std::string why = view_of(t, ins.bounds, host_only, item); !why.empty()) return why;
      v.tensors.push_back(&item);
    }
  } else if (e.isListOptionalTensor()) {
    v.kind = Kind::kOptionalTensorList;
    for (const std::optional<Tensor>& t : e.toListOptionalTensor()) {
      if (!t) {
        v.tensors.push_back(nullptr);
        continue;
      }
      rt::TensorView& item = ins.list_items.emplace_back();
      if (std::string why = view_of(*t, ins.bounds, host_only, item); !why.empty()) return why;
      v.tensors.push_back(&item);
    }
  } else {
    return "a value of EValue tag " + std::to_string(static_cast<int>(e.tag));
  }
  return {};
}

Error resize_outs(et::Span<EValue*> args, const std::vector<rt::Value*>& values) {
  for (size_t i = 0; i < args.size(); ++i) {
    const EValue& e = *args[i];
    const rt::Value& v = *values[i];
    if (e.isTensor()) {
      if (Error err = resize_to_view(e.toTensor(), v.tensor); err != Error::Ok) return err;
    } else if (e.isTensorList()) {
      const auto list = e.toTensorList();
      for (size_t k = 0; k < list.size() && k < v.tensors.size(); ++k) {
        if (Error err = resize_to_view(list[k], *v.tensors[k]); err != Error::Ok) return err;
      }
    }
  }
  return Error::Ok;
}

// The call fails: etc's reason in ExecuTorch's log, its code in the context. `why` names the
// op already when etc's kernel gave it.
void fail(KernelRuntimeContext& ctx, const std::string& op, const std::string& why, Error e) {
  if (why.compare(0, op.size(), op) == 0) {
    ET_LOG(Error, "etc: %s", why.c_str());
  } else {
    ET_LOG(Error, "etc: %s: %s", op.c_str(), why.c_str());
  }
  ctx.fail(e);
}

void call(size_t index, KernelRuntimeContext& ctx, et::Span<EValue*> args) {
  Library& lib = library();
  const rt::RegisteredKernel& k = *lib.kernels[index];
  Instruction* ins = nullptr;
  {
    std::lock_guard<std::mutex> lock(lib.mu);
    std::unique_ptr<Instruction>& slot = lib.instructions[args.data()];
    if (!slot) slot = std::make_unique<Instruction>();
    ins = slot.get();
  }
  if (ins->kernel != index ||
      !std::equal(ins->identity.begin(), ins->identity.end(), args.begin(), args.end())) {
    ins->kernel = index;
    ins->identity.assign(args.begin(), args.end());
    ins->state.reset();
    ins->bounds.clear();
  }
  // The distinct EValues, in order of first appearance (the out and the return value are
  // often one EValue: one etc Value, as etc's own runtime has it).
  ins->list_items.clear();
  ins->args.clear();
  ins->values.resize(args.size());
  // Only the copies between host and device touch device memory.
  const bool host_only = !(k.op == OpKind::H2DCopy || k.op == OpKind::D2HCopy);
  std::vector<const EValue*>& seen = ins->seen;
  seen.clear();
  for (EValue* e : args) {
    if (e == nullptr) return fail(ctx, k.name, "a null argument", Error::InvalidArgument);
    size_t at = 0;
    while (at < seen.size() && seen[at] != e)
      ++at;
    if (at == seen.size()) {
      seen.push_back(e);
      if (std::string why = translate(*e, *ins, host_only, ins->values[at]); !why.empty()) {
        return fail(ctx, k.name, "argument " + std::to_string(ins->args.size()) + " is " + why,
                    Error::NotSupported);
      }
    }
    ins->args.push_back(&ins->values[at]);
  }
  rt::KernelContext kc;
  kc.op = k.name;
  kc.schema = k.call_schema();
  kc.allocators = &lib.allocators;
  uint64_t generation = 0;
  kc.constant_args = constant_args(ins->args, generation);
  if (generation != ins->state_generation) {
    ins->state.reset();  // packed from memory that may since hold something else
    ins->state_generation = generation;
  }
  kc.state = &ins->state;
  const Status s = k.fn(kc, ins->args);
  if (!s.ok()) {
    return fail(ctx, k.name, s.to_string(),
                s.code() == ErrorCode::kUnsupported ? Error::NotSupported : Error::InvalidArgument);
  }
  if (Error e = resize_outs(args, ins->args); e != Error::Ok)
    return fail(ctx, k.name, "resizing an out to the sizes the kernel gave it", e);
}

template <size_t I>
void trampoline(KernelRuntimeContext& ctx, et::Span<EValue*> args) {
  call(I, ctx, args);
}

template <size_t... I>
constexpr std::array<et::OpFunction, sizeof...(I)> make_trampolines(std::index_sequence<I...>) {
  return {&trampoline<I>...};
}

constexpr std::array<et::OpFunction, kMaxKernels> kTrampolines =
    make_trampolines(std::make_index_sequence<kMaxKernels>{});

// Whether ExecuTorch's programs call a kernel by this name: out variants and the kernels
// outside the op table (in-place forms); functional forms appear only inside etc's delegates.
bool program_facing(const rt::RegisteredKernel& k) {
  return k.out_variant || !k.op;
}

Error register_once() {
  Library& lib = library();
  Status s = rt::register_cpu_kernels(lib.registry);
  if (s.ok()) s = rt::register_copy_kernels(lib.registry);
  if (s.ok()) s = lib.allocators.add(std::make_unique<ExecuTorchCudaMemory>());
  if (!s.ok()) {
    ET_LOG(Error, "etc: registering etc's CPU kernels: %s", s.to_string().c_str());
    return Error::Internal;
  }
  // The names already registered (registry_has_op_function would log every miss as an error).
  std::set<std::string_view> taken;
  for (const auto& kernel : et::get_registered_kernels())
    taken.insert(kernel.name_);
  for (const std::string& name : lib.registry.names()) {
    const rt::RegisteredKernel* k = lib.registry.find(name);
    if (!program_facing(*k) || taken.count(k->name) != 0) continue;
    if (lib.kernels.size() == kMaxKernels) {
      ET_LOG(Error, "etc: more than %zu kernels to register; raise kMaxKernels", kMaxKernels);
      return Error::Internal;
    }
    lib.registered.emplace_back(k->name.c_str(), kTrampolines[lib.kernels.size()]);
    lib.kernels.push_back(k);
  }
  lib.count = lib.kernels.size();
  if (lib.registered.empty()) return Error::Ok;
  return et::register_kernels({lib.registered.data(), lib.registered.size()});
}

}  // namespace

std::unique_ptr<et::DataLoader> constant_tracking_loader(et::DataLoader& inner) {
  return std::make_unique<ConstantTrackingLoader>(inner);
}

Error register_kernels_with_executorch(size_t* registered) {
  static std::once_flag once;
  std::call_once(once, [] { library().result = register_once(); });
  if (registered != nullptr) *registered = library().count;
  return library().result;
}

}  // namespace etc::executorch_plugin
