// A loaded execution plan, ready to run: values materialised (planned tensors pointing into
// buffers allocated once on their devices, constants pointing into the mapped file),
// operators resolved to kernels, delegates initialised. Nothing is allocated per run.
//
// Inputs are either copied into their planned host memory (set_input) or, when the plan
// leaves them unplanned, bound by pointer (bind_input) — host memory for CPU tensors, memory
// from the device's allocator for device tensors; the wrong kind is an error, never a silent
// copy. Unplanned outputs (a delegate's, or device-resident graph outputs) are bound likewise.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "format/pte_model.h"
#include "runtime/backend.h"
#include "runtime/device_allocator.h"
#include "runtime/kernel.h"
#include "runtime/load_plan.h"

namespace etc::rt {

// For an unplanned tensor value: its constant bytes (from the constant segment, or a
// delegate's named data), nullopt if it is not a constant (then the caller binds it), or an
// error.
using ConstantResolver = std::function<Result<std::optional<std::span<const uint8_t>>>(
    size_t value_index, const pte::Tensor&)>;

class Method {
 public:
  // Loads plan `plan_index` of `file`. Every operator missing from env.operators is listed in
  // one kUnsupported error; device memory that cannot be had is kDeviceUnavailable.
  static Result<std::unique_ptr<Method>> load(const pte::File& file, size_t plan_index,
                                              const RuntimeEnv& env);
  // Loads an arbitrary plan (a delegate's) with its own constant resolver.
  static Result<std::unique_ptr<Method>> load_plan(const pte::Plan& plan,
                                                   const ConstantResolver& constants,
                                                   const RuntimeEnv& env, const pte::File* file);

  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;
  ~Method();

  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  const TensorView& input(size_t i) const { return values_[inputs_[i]].tensor; }
  const TensorView& output(size_t i) const { return values_[outputs_[i]].tensor; }
  // True when the caller must bind the input/output by pointer (not planned).
  bool input_is_bound(size_t i) const { return !input_planned_[i]; }
  bool output_is_bound(size_t i) const { return !output_planned_[i]; }

  // Copies host bytes into planned input i (host memory only). Every planned input is set
  // before the first execution. An input whose planned memory the plan gives to other tensors
  // after its last use (as ExecuTorch plans inputs) is consumed by an execution and set again
  // before the next; execute() refuses otherwise.
  Status set_input(size_t i, const void* data, size_t bytes);
  // The same for a dynamic-bound input given at `sizes` (each dim within its bound; a
  // static input must be given at its shape).
  Status set_input(size_t i, const void* data, size_t bytes, std::span<const int64_t> sizes);
  // Resizes dynamic-bound input i (before bind_input, or set_input without sizes).
  Status resize_input(size_t i, std::span<const int64_t> sizes);
  // Input i's upper bound (its static shape for a static input).
  const std::vector<int64_t>& input_bound(size_t i) const { return input_bounds_[i]; }
  bool input_is_dynamic(size_t i) const { return values_[inputs_[i]].tensor.capacity >= 0; }
  // True when input i's planned memory is reused within an execution (set it every time).
  bool input_is_consumed(size_t i) const { return input_consumed_[i]; }
  // Points an unplanned input/output at caller memory of the tensor's device.
  Status bind_input(size_t i, void* data);
  Status bind_output(size_t i, void* data);

  // Runs every instruction once.
  Status execute();

  // Time spent per kernel (by operator name) and per delegate, summed over executions.
  struct OpTime {
    uint64_t calls = 0;
    double ms = 0;
    double flops = 0;  // multiply-adds count 2 (convolutions and matrix products; 0 for others)
  };
  using Profile = std::map<std::string, OpTime>;
  // Collect per-instruction times into `profile` (nullptr: stop). Adds a clock read per
  // instruction, so leave it off when timing the whole method.
  // With by_shape, rows are keyed by the operator and its arguments' shapes and lists
  // ("aten::convolution.out [1,16,48,48] [16,1,3,3] ... [2,2]"), to find the costly calls.
  void set_profile(Profile* profile, bool by_shape = false) {
    profile_ = profile;
    profile_by_shape_ = by_shape;
  }

  const std::vector<Value>& values() const { return values_; }
  // The convolutions (and max poolings) that read or write a channels-last tensor (set by the
  // kernels' load planner).
  size_t channels_last_convolutions() const;
  // The load-time plan, a line per instruction: its name, the instructions its epilogue runs
  // ("+ aten::relu.out"), the activation that chain was matched as, the unread outs and the
  // channels-last arguments (bit masks), "fused" for an instruction an epilogue runs. For tests
  // and for comparing plans.
  std::string describe_plan() const;

  // State buffers (ExecuTorch's mutable buffers with an initial value, or named in
  // ExtraTensorInfo without one: a KV cache, a step counter). Their planned bytes persist
  // across executions; load() starts them at their initial values (zeros for the named ones),
  // and reset_state() puts them back there (a new sequence).
  size_t num_states() const { return states_.size(); }
  // Whether the program writes state: state with an initial value, or a mutable buffer
  // written in place or copied back (ExecuTorch's own programs keep no initial value; their
  // buffers start as the planned memory's zeros).
  bool writes_state() const;
  // Device state is copied in through its device's allocator (an error if that fails).
  Status reset_state();

 private:
  Method() = default;
  Status check_binding(const TensorView& t, const void* data, const std::string& what) const;
  // The run's (step, ms) samples into profile_: the rows' keys (shapes) and FLOP are made after
  // the run, so that making them neither adds to any instruction's time nor evicts the cache
  // lines the next instruction reads.
  void flush_profile();

  RuntimeEnv env_;
  Profile* profile_ = nullptr;
  bool profile_by_shape_ = false;
  std::vector<std::pair<size_t, double>> profile_samples_;
  std::vector<Value> values_;
  std::vector<DeviceBuffer> buffers_;
  std::vector<MethodStep> steps_;
  std::vector<std::unique_ptr<DelegateHandle>> delegates_;
  std::vector<size_t> inputs_, outputs_;
  std::vector<bool> input_planned_, output_planned_;
  // Per input: its planned bytes are shared with another tensor; it holds the caller's data.
  std::vector<bool> input_consumed_, input_ready_, input_ever_set_;
  std::vector<std::vector<int64_t>> input_bounds_;
  struct StateInit {
    void* data = nullptr;              // the state's planned memory
    Device device;                     // where it is planned
    std::span<const uint8_t> initial;  // its initial bytes, in the program file
    size_t zero_bytes = 0;             // or, without initial bytes: this many zeros
  };
  std::vector<StateInit> states_;
};

// A delegate's side of a call (the args DelegateCall passes: inputs, then outputs) for the
// method that runs its subgraph: checks each tensor's dtype and shape against m's (a
// dynamic-bound input is resized to the caller's sizes within its bound; a dynamic-bound
// output needs the same rank) and binds the pointers (bind_* check device memory).
Status bind_delegate_args(Method& m, std::span<Value*> args);
// After m.execute(): the caller's dynamic-bound outputs take m's actual output sizes.
Status publish_delegate_outputs(const Method& m, std::span<Value*> args);

}  // namespace etc::rt
