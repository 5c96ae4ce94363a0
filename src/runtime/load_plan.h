// What a kernel library sees of a method as it loads, and the hook through which it plans its
// own kernels' calls.
//
// Method::load resolves every instruction to a step, then hands the steps to the load planner
// of the registry its kernels came from (OperatorRegistry::set_load_planner). The planner may
// annotate kernel steps: an epilogue of the elementwise steps after a kernel (then marked
// fused), outs nothing reads, arguments held channels-last between the kernels that agree on
// it, state made before the first call. It never changes what the program computes, nor the
// .pte: ExecuTorch's runtime runs the same file without it. Method knows no operator; the CPU
// kernels' planner is kernels/load_plan.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/kernel.h"

namespace etc::rt {

// ExecuTorch's instruction kinds.
enum class StepKind : uint8_t { kKernel, kDelegate, kMove, kJumpFalse, kFree };

// One instruction of a loaded method.
struct MethodStep {
  StepKind kind = StepKind::kKernel;
  const RegisteredKernel* kernel = nullptr;  // kKernel: the kernel that runs it
  std::string name;                          // "aten::add.out", "delegate 0 (EtcCudaBackend)"
  size_t delegate = 0;                       // kDelegate: the method's handle
  std::vector<Value*> args;
  int32_t a = 0, b = 0;                // move/jump/free operands
  uint64_t constant_args = 0;          // KernelContext::constant_args
  std::unique_ptr<KernelState> state;  // KernelContext::state
  // IntList arguments with an item that a kernel computes at run time (ExecuTorch's
  // sym_size of a dynamic-bound tensor): the list's position k is re-read from the Int value
  // before the call.
  struct IntListRefresh {
    Value* list;
    std::vector<std::pair<size_t, const Value*>> items;
  };
  std::vector<IntListRefresh> refresh;

  // Set by the load planner.
  // This kernel applies these ops (the fused steps after it) to its out.
  std::unique_ptr<Epilogue> epilogue;
  std::string fused_names;          // " + aten::relu.out ...", for the profile
  bool fused = false;               // applied by an earlier kernel's epilogue: skipped
  uint64_t unread_outs = 0;         // KernelContext::unread_outs
  uint64_t channels_last_args = 0;  // KernelContext::channels_last_args

  // Whether the step calls op's out variant (ExecuTorch's "aten::relu.out").
  bool calls(OpKind op) const {
    return kind == StepKind::kKernel && kernel != nullptr && kernel->op == op &&
           kernel->out_variant;
  }
  // The schema of the step's arguments (null: not a kernel, or one no schema describes).
  const OpSchema* schema() const { return kernel != nullptr ? kernel->call_schema() : nullptr; }
};

// A method as its load planner sees it. The steps run in order, except where a kJumpFalse
// step jumps; a kMove step rebinds a value to another's bytes.
struct LoadPlanView {
  std::vector<MethodStep>& steps;
  const std::vector<Value>& values;  // never resized: pointers into it are stable
  // Method inputs and outputs (value indices): the caller may bind their memory, and reads the
  // outputs after the last step.
  std::span<const size_t> inputs, outputs;
  // RuntimeEnv::fuse_epilogues: false asks for every instruction to run as written.
  bool fuse = true;
};

}  // namespace etc::rt
