// Helpers for the CPU kernel tests: argument Values built from std::vector storage, kernel
// calls by name through a registry filled by register_cpu_kernels, results read back as
// doubles, deterministic random inputs, and comparison with dtype-aware tolerances.
//
// Tests compute their references with naive loops in double from the inputs as the kernel
// sees them (read back after rounding to the input dtype).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "graph/tensor_spec.h"
#include "runtime/kernel.h"
#include "runtime/kernels/conv.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/parallel.h"
#include "runtime/tensor.h"

namespace etc::rt::test {

using Sizes = std::vector<int64_t>;

// Caps the float kernels' vector builds for a scope (set_gemm_isa: what an AVX2-only or an
// older x86-64 CPU runs), and restores kAuto at its end.
struct IsaScope {
  explicit IsaScope(kernels::GemmIsa isa) { kernels::set_gemm_isa(isa); }
  ~IsaScope() { kernels::set_gemm_isa(kernels::GemmIsa::kAuto); }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;
};

// The kernels' thread count for a scope: the default count again at its end, also when a
// REQUIRE fails.
struct ThreadsScope {
  explicit ThreadsScope(int n) { kernels::set_num_threads(n); }
  ~ThreadsScope() { kernels::set_num_threads(0); }
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;
};

// The registry with every CPU kernel (filled once).
const OperatorRegistry& cpu_registry();

// The values of one kernel call; pointers stay valid as long as the Call lives.
class Call {
 public:
  explicit Call(std::string op) : op_(std::move(op)) {}

  // A tensor of `dtype` holding `data` converted to it (data.size() must be the numel).
  Value* tensor(DType dtype, const Sizes& sizes, const std::vector<double>& data);
  // A tensor of random values: integers in [lo, hi] for integer dtypes, 0/1 for bool.
  Value* random(DType dtype, const Sizes& sizes, uint32_t seed, double lo = -1, double hi = 1);
  // An out tensor, filled with a garbage pattern so that unwritten elements show.
  Value* out(DType dtype, const Sizes& sizes);
  Value* i(int64_t v);
  Value* d(double v);
  Value* b(bool v);
  Value* none();
  Value* ints(const std::vector<int64_t>& v);
  Value* doubles(const std::vector<double>& v);
  Value* str(const std::string& s);
  Value* dtype(DType t);  // a ScalarType? argument
  Value* list(std::initializer_list<Value*> tensors);
  // An OptionalTensorList (Tensor?[]); nullptr elements are None.
  Value* opt_list(std::initializer_list<Value*> tensors);

  // Runs the op with `inputs`, then `outs`, then the return value (the out, or a
  // TensorList of the outs). Fails the test if the op is not registered.
  Status run(std::initializer_list<Value*> inputs, std::initializer_list<Value*> outs);
  Status run(const std::vector<Value*>& inputs, std::initializer_list<Value*> outs);
  // Runs with exactly `args` (for argument-count and kind errors).
  Status run_raw(std::vector<Value*> args);
  // Later runs keep a state slot, as a loaded method's instruction does, and mark the
  // arguments of `constant_args` (bit i: argument i) as program constants.
  void keep_state(uint64_t constant_args) {
    keep_state_ = true;
    constant_args_ = constant_args;
  }
  const KernelState* state() const { return state_.get(); }
  // Later runs hand the kernel this epilogue (it must outlive them).
  void set_epilogue(const Epilogue* e) { epilogue_ = e; }
  // Later runs hold the arguments of `args` channels-last (KernelContext::channels_last_args).
  void set_channels_last(uint64_t args) { channels_last_args_ = args; }
  // Later runs are instruction `i` of a method (KernelContext::instruction).
  void set_instruction(uint32_t i) { instruction_ = i; }

 private:
  Value* add(Value v);
  std::string op_;
  bool keep_state_ = false;
  uint64_t constant_args_ = 0;
  const Epilogue* epilogue_ = nullptr;
  uint64_t channels_last_args_ = 0;
  uint32_t instruction_ = 0;
  std::unique_ptr<KernelState> state_;
  std::deque<Value> values_;
  std::deque<std::vector<uint64_t>> storage_;  // uint64 keeps every dtype aligned
};

// A tensor's elements as doubles.
std::vector<double> read(const Value* v);

int64_t numel(const Sizes& s);
// The row-major multi-index of `flat` in `sizes`.
Sizes unravel(int64_t flat, const Sizes& sizes);
// The flat index into a tensor of `in_sizes` broadcast to out's `index` (right-aligned).
int64_t broadcast_index(const Sizes& index, const Sizes& in_sizes);

// `v` rounded/converted as storing it in `dtype` would (integers truncate toward zero and
// wrap, bool is != 0, floats round to nearest even).
double cast_to(DType dtype, double v);

std::vector<double> random_values(size_t n, uint32_t seed, double lo = -1, double hi = 1);

struct Tolerance {
  double rtol;
  double atol;
};
// Elementwise accuracy one rounding to `dtype` allows (exact for integers).
Tolerance tolerance_for(DType dtype);

// Requires |got - want| <= atol + rtol * |want| everywhere (NaNs and infinities must
// match exactly); reports the first mismatch with its index.
void require_close(const std::vector<double>& got, const std::vector<double>& want, Tolerance tol);
inline void require_close(const std::vector<double>& got, const std::vector<double>& want,
                          DType dtype) {
  require_close(got, want, tolerance_for(dtype));
}

// Whether got and want hold the same values bit for bit, a NaN matching any NaN (a NaN's sign
// and payload follow which operand of an instruction the compiler put first, not the
// function); reports the first difference with its index.
bool same_bits(const std::vector<double>& got, const std::vector<double>& want);

// Convolutions through oneDNN on or off for a scope (as before at its end): the tests of
// etc's own convolution paths turn it off, so that they test those paths in every build.
class OnednnScope {
 public:
  explicit OnednnScope(bool on) : saved_(kernels::onednn_conv_enabled()) {
    kernels::set_onednn_conv_enabled(on);
  }
  ~OnednnScope() { kernels::set_onednn_conv_enabled(saved_); }
  OnednnScope(const OnednnScope&) = delete;
  OnednnScope& operator=(const OnednnScope&) = delete;

 private:
  bool saved_;
};

inline const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                               DType::kBFloat16};

}  // namespace etc::rt::test
