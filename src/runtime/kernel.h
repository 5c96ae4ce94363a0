// Kernels and the operator registry.
//
// A kernel implements one operator of the op table (graph/ops.def) in one of its two forms,
// named as ExecuTorch names them: the out variant ("aten::add.out", host programs: the
// portable out-variant kernels) or the functional form ("aten::add.Tensor", etc's IR ops as
// they appear inside delegate subgraphs). The registry is keyed by operator: it derives both
// names and both call schemas from the table. Its arguments are the instruction's values in
// ExecuTorch's convention: every schema argument in order (defaults materialised; an out
// variant's outs are among them), for the functional form then the out tensor(s), then the
// return value (the out again, or a TensorList of the outs). Out tensors are already
// allocated with their final sizes; kernels check them and fail with a Status, never abort.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op_schema.h"
#include "graph/ops.h"
#include "runtime/tensor.h"
#include "support/status.h"

namespace etc::rt {

class DeviceAllocatorRegistry;

// What a kernel derives once from arguments that never change (constants) and keeps with
// its instruction for the method's lifetime: packed weights. The kernel owns the type.
struct KernelState {
  virtual ~KernelState() = default;
};

// The state of type S in `slot` if it was made for `key`, else a new one from make() (a
// std::unique_ptr<S>), stored in the slot with that key. S has a `Key key` member whose ==
// tells whether the state still fits the call (the constant's address and shape).
template <typename S, typename Make>
const S& cached_kernel_state(std::unique_ptr<KernelState>& slot, const typename S::Key& key,
                             Make&& make) {
  auto* s = dynamic_cast<S*>(slot.get());
  if (s == nullptr || !(s->key == key)) {
    std::unique_ptr<S> fresh = make();
    fresh->key = key;
    s = fresh.get();
    slot = std::move(fresh);
  }
  return *s;
}

// Elementwise instructions a kernel runs on the part of its float32 out it has just
// finished, in order, instead of their own passes over memory: the chain of elementwise
// instructions right after it in the program (the load planner builds it). Every tensor has the
// kernel out's shape; each op reads its operands and writes its out at the same flat
// indices, so running the chain range by range gives the bits of running each instruction
// whole. The planner guarantees that the outs are the kernel's out or memory that no
// operand and no other out overlaps.
struct Epilogue {
  struct Op {
    // kSigmoid: out = 1 / (1 + exp(-a)), as the sigmoid kernel computes it (b is null);
    // kGeluErf: out = gelu(a) (approximate 'none'), as the gelu kernel computes it.
    enum class Kind : uint8_t { kClamp, kAdd, kSub, kMul, kDiv, kSigmoid, kGeluErf };
    Kind kind = Kind::kClamp;
    const TensorView* a = nullptr;  // first operand
    const TensorView* b = nullptr;  // second operand; null: `scalar`
    float scalar = 0;
    // kClamp: min(max(a, lo), hi), which keeps NaN (relu: lo = 0, hi = +inf).
    float lo = 0, hi = 0;
    const TensorView* out = nullptr;
    // > 0: that operand is a row of this many elements broadcast along the out's last dim
    // (a matrix product's bias): element i reads it at i % period.
    int64_t a_period = 0, b_period = 0;
  };
  std::vector<Op> ops;
  // An out overlaps one of the kernel's inputs: run the chain only once the kernel has read
  // all of them (over the whole out at the end), not range by range as it goes.
  bool after_inputs = false;
  // The chain when it is one activation or residual add (kernels::match_activation, set by
  // the load planner): then each element goes through it in registers, read once and its
  // result stored once, instead of op by op over memory. The same ops in the same order, so
  // the same bits.
  struct Activation {
    enum class Kind : uint8_t {
      kClamp,            // t = clamp(x): relu, hardtanh, clamp
      kHardSwishDivMul,  // t = x * (clamp(x + add) / div)
      kHardSwishMulDiv,  // t = (x * clamp(x + add)) / div
      kHardSigmoid,      // t = clamp(x + add) / div
      kAddTensor,        // t = x + e (a residual add)
      kAddTensorClamp,   // t = clamp(x + e)
      kSiLU,             // t = x * sigmoid(x): SiLU as sigmoid then mul (torch's silu)
      kGeluErf,          // t = gelu(x), approximate 'none' (a transformer's MLP)
    };
    Kind kind = Kind::kClamp;
    float lo = 0, hi = 0, add = 0, div = 1;
    const TensorView* x = nullptr;  // the kernel's out
    const TensorView* t = nullptr;  // where the chain's result goes (x for a chain in place)
    const TensorView* e = nullptr;  // kAddTensor*: the tensor added
  };
  std::optional<Activation> activation;
  // No instruction after the chain reads the kernel's out, and no caller sees it (the planner
  // checks): where the activation writes elsewhere (Activation::t), a kernel that runs it on
  // each tile may keep the tile in a scratch buffer and never store its own values.
  bool out_unread = false;
};

struct KernelContext {
  std::string_view op;  // "aten::add.out", for error messages
  // For the et_copy kernels: how to reach device memory. Other kernels ignore it.
  const DeviceAllocatorRegistry* allocators = nullptr;
  // Per-runtime state of a device backend's kernels (the CUDA delegate's stream and cuBLAS
  // handle); RuntimeEnv::kernel_state. CPU kernels ignore it.
  void* backend_state = nullptr;
  // The instruction's state slot; null when the caller keeps none (tests, delegates).
  std::unique_ptr<KernelState>* state = nullptr;
  // Bit i set: argument i is a constant of the program, whose bytes never change.
  uint64_t constant_args = 0;
  bool is_constant(size_t i) const { return i < 64 && ((constant_args >> i) & 1) != 0; }
  // Ops to apply to the out before returning (null: none). A kernel given one must apply it.
  const Epilogue* epilogue = nullptr;
  // Bit i set: argument i is an out that no later instruction reads and no caller sees
  // (max_pool2d_with_indices' indices, most of the time); the kernel may leave it unwritten.
  uint64_t unread_outs = 0;
  bool is_unread(size_t i) const { return i < 64 && ((unread_outs >> i) & 1) != 0; }
  // Bit i set: argument i, a 4-d float tensor, is held channels-last ([N, H, W, C] in memory;
  // its sizes stay [N, C, H, W]). Set at load on the convolutions of a channels-last chain
  // (kernels/load_plan.h), whose readers and writers all agree; 0 everywhere else.
  uint64_t channels_last_args = 0;
  bool is_channels_last(size_t i) const { return i < 64 && ((channels_last_args >> i) & 1) != 0; }
  // The schema of `args` (RegisteredKernel::schema): what kernels::check_args checks them
  // against and what arguments are read by name through. Null for the few kernels whose
  // values no schema describes.
  const OpSchema* schema = nullptr;
  // The instruction's position in its method (0 when the caller has none): a per-instruction
  // seed for the random kernels, the same in every method loaded from the program.
  uint32_t instruction = 0;
  // An invalid-input error naming the op: "aten::add.out: <message>".
  Status error(const std::string& message) const;
};

using KernelFn = Status (*)(KernelContext& ctx, std::span<Value*> args);

// Floating-point operations of one call (a multiply-add counts 2) for the kernels whose work
// is arithmetic-bound: convolution, mm, bmm, addmm, linear. 0 for every other op, and for
// arguments that are not what the op takes (the kernel reports those).
double kernel_flops(std::string_view op, std::span<Value* const> args);

// The functional schema as its kernel is called: the results appended as `Tensor(a!) out`
// arguments (out0, out1, ... for several).
OpSchema functional_call_schema(const OpSchema& functional);

// index_put_, the in-place form ExecuTorch's programs update a KV cache with.
inline constexpr const char* kIndexPutInPlaceSchema =
    "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, bool accumulate=False) -> "
    "Tensor(a!)";

// Which forms of an op one kernel function serves.
enum class KernelForms : uint8_t {
  kOut = 1,         // the out variant ("aten::add.out")
  kFunctional = 2,  // the functional form ("aten::add.Tensor")
  kBoth = 3,        // both, when their arguments are the same (the registry checks)
};

// One registered kernel: its function and the schema of the values it is called with.
struct RegisteredKernel {
  std::string name;  // "aten::add.out"
  KernelFn fn = nullptr;
  // The out variant's or in-place form's schema, or the functional schema with one
  // `Tensor(a!) out` per result appended (out0, out1, ... for several); nullopt for a kernel
  // whose values no schema describes (aten::sym_size.int returns an Int).
  std::optional<OpSchema> schema;
  std::optional<OpKind> op;  // the op of the table it runs; nullopt outside the table
  bool out_variant = false;
  const OpSchema* call_schema() const { return schema ? &*schema : nullptr; }
};

// A kernel library's planning over a method it is loaded for (runtime/load_plan.h).
struct LoadPlanView;
using LoadPlanner = void (*)(LoadPlanView& method);

class OperatorRegistry {
 public:
  // Registers `fn` for `op` under the names of `forms` (kBoth: the out variant's where the op
  // has one, and the functional form's). A second registration of a name fails, and so do
  // forms the op does not have or kBoth over forms whose arguments differ.
  Status add(OpKind op, KernelFn fn, KernelForms forms = KernelForms::kBoth);
  // A kernel outside the op table, declared here by its schema ("aten::copy_(Tensor(a!)
  // self, Tensor src, bool non_blocking=False) -> Tensor(a!)") and registered under `name`
  // (ExecuTorch writes in-place ops without an overload: "aten::copy_").
  Status add(const std::string& name, std::string_view schema, KernelFn fn);
  // A kernel no schema describes; it checks its own arguments.
  Status add(const std::string& name, KernelFn fn);
  const RegisteredKernel* find(std::string_view name) const;
  std::vector<std::string> names() const;
  // The planner Method::load runs over the steps of a method whose kernels come from this
  // registry (null: none; the kernels run as the program names them).
  void set_load_planner(LoadPlanner planner) { planner_ = planner; }
  LoadPlanner load_planner() const { return planner_; }

 private:
  Status insert(RegisteredKernel k);
  std::map<std::string, RegisteredKernel, std::less<>> kernels_;
  LoadPlanner planner_ = nullptr;
};

// Registers every CPU kernel (portable out-variants, IR ops, et_copy is registered by the
// runtime with the device allocator registry).
Status register_cpu_kernels(OperatorRegistry& registry);

}  // namespace etc::rt
