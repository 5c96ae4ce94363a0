// etc's CPU kernels as an ExecuTorch kernel library (src/executorch/kernels.cpp), called as
// ExecuTorch's Method calls a kernel: looked up in ExecuTorch's registry by name, given a
// KernelRuntimeContext and the instruction's EValues. Linked against the wheel's
// libexecutorch.so alone (no other kernel library), so every lookup finds etc's kernel.
#include <catch2/catch.hpp>

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/exec_aten/util/tensor_util.h>
#include <executorch/runtime/kernel/kernel_runtime_context.h>
#include <executorch/runtime/kernel/operator_registry.h>
#include <executorch/runtime/platform/runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "executorch/etc_executorch.h"

namespace {

namespace et = ::executorch::runtime;
using et::Error;
using et::EValue;
using ::executorch::aten::ScalarType;
using ::executorch::aten::SizesType;
using ::executorch::aten::Tensor;
using ::executorch::aten::TensorImpl;
using ::executorch::aten::TensorShapeDynamism;

// A float tensor over `data` (owned by the caller), with its sizes, dim order and strides.
struct FloatTensor {
  std::vector<SizesType> sizes;
  std::vector<uint8_t> dim_order;
  std::vector<int32_t> strides;
  std::unique_ptr<TensorImpl> impl;
  FloatTensor(std::vector<SizesType> s, float* data,
              TensorShapeDynamism dynamism = TensorShapeDynamism::STATIC,
              std::vector<uint8_t> order = {})
      : sizes(std::move(s)), dim_order(std::move(order)) {
    if (dim_order.empty()) {
      for (size_t d = 0; d < sizes.size(); ++d)
        dim_order.push_back(static_cast<uint8_t>(d));
    }
    // Strides from the dim order: the last dim in memory order has stride 1.
    strides.assign(sizes.size(), 1);
    int32_t step = 1;
    for (size_t k = dim_order.size(); k-- > 0;) {
      strides[dim_order[k]] = step;
      step *= sizes[dim_order[k]];
    }
    impl = std::make_unique<TensorImpl>(ScalarType::Float, static_cast<ssize_t>(sizes.size()),
                                        sizes.data(), data, dim_order.data(), strides.data(),
                                        dynamism);
  }
  Tensor tensor() const { return Tensor(impl.get()); }
};

et::OpFunction kernel(const char* name) {
  et::Result<et::OpFunction> fn = et::get_op_function_from_registry(name);
  REQUIRE(fn.ok());
  return *fn;
}

// Calls `name` with `args` as one instruction; the context's failure state.
Error call(const char* name, std::vector<EValue*> args) {
  et::KernelRuntimeContext ctx;
  kernel(name)(ctx, {args.data(), args.size()});
  return ctx.failure_state();
}

size_t registered() {
  static const size_t n = [] {
    et::runtime_init();
    size_t count = 0;
    REQUIRE(etc::executorch_plugin::register_kernels_with_executorch(&count) == Error::Ok);
    return count;
  }();
  return n;
}

TEST_CASE("etc's kernels register under ExecuTorch's names, once") {
  const size_t n = registered();
  CHECK(n > 150);  // the out variants of the op table and the in-place forms
  size_t again = 0;
  CHECK(etc::executorch_plugin::register_kernels_with_executorch(&again) == Error::Ok);
  CHECK(again == n);
  for (const char* name :
       {"aten::add.out", "aten::convolution.out", "aten::_softmax.out", "aten::cat.out",
        "aten::index_put_", "aten::mm.out", "et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"}) {
    INFO(name);
    CHECK(et::registry_has_op_function(name));
  }
}

TEST_CASE("a kernel computes in ExecuTorch's tensors, in place") {
  registered();
  std::vector<float> a{1, 2, 3, 4, 5, 6}, b{10, 20, 30, 40, 50, 60}, out(6, -1);
  FloatTensor ta({2, 3}, a.data()), tb({2, 3}, b.data()), to({2, 3}, out.data());
  EValue ea(ta.tensor()), eb(tb.tensor()), alpha(int64_t{2}), eo(to.tensor());
  // add.out(self, other, alpha, out) -> out: the out and the return value are one EValue.
  REQUIRE(call("aten::add.out", {&ea, &eb, &alpha, &eo, &eo}) == Error::Ok);
  CHECK(out == std::vector<float>{21, 42, 63, 84, 105, 126});
  // A list argument: cat([a, b], dim 0) into [4, 3].
  std::vector<float> cat_out(12, -1);
  FloatTensor tc({4, 3}, cat_out.data());
  EValue w0(ta.tensor()), w1(tb.tensor());
  EValue* wrapped[] = {&w0, &w1};
  Tensor unwrapped[] = {ta.tensor(), tb.tensor()};
  et::BoxedEvalueList<Tensor> list(wrapped, unwrapped, 2);
  EValue el(&list), dim(int64_t{0}), ec(tc.tensor());
  REQUIRE(call("aten::cat.out", {&el, &dim, &ec, &ec}) == Error::Ok);
  CHECK(cat_out == std::vector<float>{1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60});
}

TEST_CASE("a dynamic-bound out shrinks and grows back within the bound it was loaded at") {
  registered();
  // ExecuTorch loads a dynamic-bound tensor at its upper bound: [4, 2] here.
  std::vector<float> x(8), out(8, -1);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i) - 3.5f;
  FloatTensor to({4, 2}, out.data(), TensorShapeDynamism::DYNAMIC_BOUND);
  EValue eo(to.tensor());
  auto relu = [&](SizesType rows) {
    FloatTensor tx({rows, 2}, x.data());
    EValue ex(tx.tensor());
    return call("aten::relu.out", {&ex, &eo, &eo});
  };
  REQUIRE(relu(4) == Error::Ok);  // first call: at its bound
  REQUIRE(relu(1) == Error::Ok);
  CHECK(eo.toTensor().size(0) == 1);
  REQUIRE(relu(4) == Error::Ok);  // back to the bound the out had first
  CHECK(eo.toTensor().size(0) == 4);
  CHECK(out == std::vector<float>{0, 0, 0, 0, 0.5f, 1.5f, 2.5f, 3.5f});
  // Past the bound: refused, nothing written past the tensor's memory.
  std::vector<float> big(10, 1.0f);
  FloatTensor tx({5, 2}, big.data());
  EValue ex(tx.tensor());
  CHECK(call("aten::relu.out", {&ex, &eo, &eo}) != Error::Ok);
}

TEST_CASE("a dynamic-bound out over other memory starts again from its current size") {
  registered();
  // The same TensorImpl, EValue and argument array (as a method loaded where a destroyed one
  // was may have them), its memory now a smaller buffer: the bound learnt over the old
  // memory must not let the kernel write past the new one.
  std::vector<float> x(8, 1.0f), big(8, -1.0f), small(4, -1.0f);
  FloatTensor to({4, 2}, big.data(), TensorShapeDynamism::DYNAMIC_BOUND);
  FloatTensor tx({4, 2}, x.data());
  EValue ex(tx.tensor()), eo(to.tensor());
  std::vector<EValue*> args{&ex, &eo, &eo};
  auto relu = [&] {
    et::KernelRuntimeContext ctx;
    kernel("aten::relu.out")(ctx, {args.data(), args.size()});
    return ctx.failure_state();
  };
  REQUIRE(relu() == Error::Ok);  // learns 32 bytes over `big`
  to.impl->set_data(small.data());
  const SizesType two[] = {2, 2};
  REQUIRE(et::resize_tensor(to.tensor(), {two, 2}) == Error::Ok);  // 16 bytes over `small`
  CHECK(relu() != Error::Ok);  // [4, 2] does not fit what is known to be there
  CHECK(small == std::vector<float>(4, -1.0f));
}

TEST_CASE("what etc's kernels cannot take fails the call with a reason, never a crash") {
  registered();
  std::vector<float> x(24, 1.0f), out(24, -1.0f);
  // A channels-last input (dim order 0, 2, 3, 1): etc's kernels take contiguous tensors.
  FloatTensor tx({1, 2, 3, 4}, x.data(), TensorShapeDynamism::STATIC, {0, 2, 3, 1});
  FloatTensor to({1, 2, 3, 4}, out.data());
  EValue ex(tx.tensor()), eo(to.tensor());
  CHECK(call("aten::relu.out", {&ex, &eo, &eo}) == Error::NotSupported);
  CHECK(out == std::vector<float>(24, -1.0f));
  // An out of the wrong shape (static): etc's kernel refuses it.
  FloatTensor tx2({2, 3}, x.data()), bad({3, 2}, out.data());
  EValue ex2(tx2.tensor()), eb(bad.tensor());
  CHECK(call("aten::relu.out", {&ex2, &eb, &eb}) == Error::InvalidArgument);
  // Too few arguments for the schema.
  CHECK(call("aten::relu.out", {&ex2}) != Error::Ok);
}

// A DataLoader over bytes the test owns (released buffers leave them in place).
class BytesLoader final : public et::DataLoader {
 public:
  explicit BytesLoader(std::vector<float>& bytes) : bytes_(bytes) {}
  et::Result<et::FreeableBuffer> load(size_t offset, size_t size,
                                      const SegmentInfo& /*info*/) const override {
    if (offset + size > bytes_.size() * sizeof(float)) return Error::InvalidArgument;
    return et::FreeableBuffer(reinterpret_cast<const char*>(bytes_.data()) + offset, size, nullptr);
  }
  et::Result<size_t> size() const override { return bytes_.size() * sizeof(float); }

 private:
  std::vector<float>& bytes_;
};

// out = a [2, 3] @ b [3, 2], by hand.
std::vector<float> matmul(const std::vector<float>& a, const float* b) {
  std::vector<float> out(4, 0.0f);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        out[i * 2 + j] += a[i * 3 + k] * b[k * 2 + j];
  return out;
}

TEST_CASE("weights in constant segments are packed once, and dropped with their segment") {
  registered();
  // A program's constant segment, as ExecuTorch loads it through the tracking loader.
  std::vector<float> file{1, 2, 3, 4, 5, 6};
  BytesLoader inner(file);
  std::unique_ptr<et::DataLoader> loader = etc::executorch_plugin::constant_tracking_loader(inner);
  const et::DataLoader::SegmentInfo constant(et::DataLoader::SegmentInfo::Type::Constant);
  std::vector<float> a{1, 0, 2, -1, 3, 1}, out(4, -1);
  FloatTensor ta({2, 3}, a.data()), to({2, 2}, out.data());
  EValue ea(ta.tensor()), eo(to.tensor());
  // One instruction, mm.out(a, b, out) -> out: ExecuTorch keeps its argument array and its
  // EValues in place (a reloaded program's may land at the same addresses: eb is one EValue
  // throughout, so that only the segment's release tells the kernel).
  EValue eb;
  std::vector<EValue*> args{&ea, &eb, &eo, &eo};
  auto mm = [&] {
    et::KernelRuntimeContext ctx;
    kernel("aten::mm.out")(ctx, {args.data(), args.size()});
    return ctx.failure_state();
  };
  {
    et::Result<et::FreeableBuffer> segment = loader->load(0, 24, constant);
    REQUIRE(segment.ok());
    auto* b = static_cast<float*>(const_cast<void*>(segment->data()));
    FloatTensor tb({3, 2}, b);
    eb = EValue(tb.tensor());
    REQUIRE(mm() == Error::Ok);
    CHECK(out == matmul(a, file.data()));
    // A constant never changes while the program holds it: the packed copy is what the
    // kernel reads from now on (this write is the test's, to see that it is).
    const std::vector<float> packed_result = out;
    b[0] = 100;
    REQUIRE(mm() == Error::Ok);
    CHECK(out == packed_result);
  }
  // The segment is released; the same memory comes back holding other values (a program
  // loaded again): the instruction must not read the weights it packed before.
  file = {6, 5, 4, 3, 2, 1};
  et::Result<et::FreeableBuffer> again = loader->load(0, 24, constant);
  REQUIRE(again.ok());
  REQUIRE(again->data() == static_cast<const void*>(file.data()));
  FloatTensor tb({3, 2}, file.data());
  eb = EValue(tb.tensor());
  REQUIRE(mm() == Error::Ok);
  CHECK(out == matmul(a, file.data()));
  // Memory outside constant segments is read at every call.
  std::vector<float> activation{1, 1, 1, 1, 1, 1};
  FloatTensor tv({3, 2}, activation.data());
  eb = EValue(tv.tensor());
  REQUIRE(mm() == Error::Ok);
  CHECK(out == matmul(a, activation.data()));
  activation[0] = 7;
  REQUIRE(mm() == Error::Ok);
  CHECK(out == matmul(a, activation.data()));
}

}  // namespace
