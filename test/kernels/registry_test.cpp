// register_cpu_kernels: every portable out-variant name ExecuTorch's programs call is
// registered (op_table_test.cpp checks the op table's), and the argument checks shared by
// all kernels report exact messages.
#include <algorithm>

#include "graph/ops.h"
#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

const char* const kPortableNames[] = {
    "aten::add.out",
    "aten::sub.out",
    "aten::mul.out",
    "aten::div.out",
    "aten::add.Scalar_out",
    "aten::sub.Scalar_out",
    "aten::mul.Scalar_out",
    "aten::div.Scalar_out",
    "aten::pow.Tensor_Scalar_out",
    "aten::where.self_out",
    "aten::neg.out",
    "aten::relu.out",
    "aten::clamp.out",
    "aten::hardtanh.out",
    "aten::exp.out",
    "aten::log.out",
    "aten::rsqrt.out",
    "aten::sigmoid.out",
    "aten::sqrt.out",
    "aten::tanh.out",
    "aten::gelu.out",
    "aten::addmm.out",
    "aten::bmm.out",
    "aten::mm.out",
    "aten::convolution.out",
    "aten::max_pool2d_with_indices.out",
    "aten::avg_pool2d.out",
    "aten::_adaptive_avg_pool2d.out",
    "aten::amax.out",
    "aten::mean.out",
    "aten::sum.IntList_out",
    "aten::_softmax.out",
    "aten::_log_softmax.out",
    "aten::native_layer_norm.out",
    "aten::_native_batch_norm_legit_no_training.out",
    "aten::cat.out",
    "aten::clone.out",
    "aten::constant_pad_nd.out",
    "aten::expand_copy.out",
    "aten::permute_copy.out",
    "aten::select_copy.int_out",
    "aten::slice_copy.Tensor_out",
    "aten::squeeze_copy.dim_out",
    "aten::squeeze_copy.dims_out",
    "aten::transpose_copy.int_out",
    "aten::unsqueeze_copy.out",
    "aten::view_copy.out",
    "aten::_to_copy.out",
    "aten::embedding.out",
    "aten::index.Tensor_out",
    "aten::index_put.out",
    "aten::index_put_",
    "aten::copy_",
    "aten::full.out",
    "aten::ones.out",
    "aten::zeros.out",
    // What ExecuTorch's programs for PyTorch's decompositions call (masks, positions,
    // safe softmax).
    "aten::eq.Scalar_out",
    "aten::le.Scalar_out",
    "aten::logical_not.out",
    "aten::logical_and.out",
    "aten::any.out",
    "aten::arange.start_out",
    "aten::full_like.out",
    "aten::scalar_tensor.out",
};

TEST_CASE("every portable out-variant kernel is registered") {
  for (const char* name : kPortableNames) {
    INFO(name);
    CHECK(cpu_registry().find(name) != nullptr);
  }
}

TEST_CASE("registering the kernels twice fails") {
  OperatorRegistry r;
  REQUIRE(register_cpu_kernels(r).ok());
  Status again = register_cpu_kernels(r);
  REQUIRE_FALSE(again.ok());
  // The first kernel registered (the binary math table's first op) is named.
  CHECK(again.message() == "kernel 'aten::eq.Tensor_out' is registered twice");
}

TEST_CASE("argument count errors") {
  Call c("aten::add.out");
  Value* a = c.random(DType::kFloat32, {2}, 1);
  Value* out = c.out(DType::kFloat32, {2});
  Status s = c.run_raw({a, a, out, out});
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() ==
        "aten::add.out: expected 5 arguments (3 inputs, 1 out and the return value), got 4");

  Call ln("aten::native_layer_norm.out");
  Status s2 = ln.run_raw({});
  CHECK(s2.message() ==
        "aten::native_layer_norm.out: expected 9 arguments (5 inputs, 3 outs and the return "
        "value), got 0");
}

TEST_CASE("argument kind errors") {
  Call c("aten::add.out");
  Value* a = c.random(DType::kFloat32, {2}, 1);
  Value* out = c.out(DType::kFloat32, {2});
  Status s = c.run({a, c.i(3), c.i(1)}, {out});
  CHECK(s.message() == "aten::add.out: argument 1 (other) must be a Tensor, got Int");

  Status s2 = c.run({a, a, c.none()}, {out});
  CHECK(s2.message() ==
        "aten::add.out: argument 2 (alpha) must be a Scalar (Int, Double or Bool), got None");

  Status s3 = c.run_raw({a, a, c.i(1), c.i(0), out});
  CHECK(s3.message() == "aten::add.out: out tensor 'out' (argument 3) must be a Tensor, got Int");

  Status s4 = c.run_raw({a, a, c.i(1), out, c.none()});
  CHECK(s4.message() ==
        "aten::add.out: the return value (argument 4) must be the out Tensor, got None");

  Call ln("aten::native_layer_norm.out");
  Value* x = ln.random(DType::kFloat32, {2, 4}, 2);
  Value* o0 = ln.out(DType::kFloat32, {2, 4});
  Value* o1 = ln.out(DType::kFloat32, {2, 1});
  Value* o2 = ln.out(DType::kFloat32, {2, 1});
  Status s5 = ln.run_raw({x, ln.ints({4}), ln.none(), ln.none(), ln.d(1e-5), o0, o1, o2, o0});
  CHECK(s5.message() ==
        "aten::native_layer_norm.out: the return value (argument 8) must be a TensorList of the "
        "3 outs");

  Call td("aten::_to_copy.out");
  Value* t = td.random(DType::kFloat32, {2}, 3);
  Status s6 = td.run({t, td.i(99), td.none(), td.none(), td.none(), td.b(false), td.none()},
                     {td.out(DType::kFloat32, {2})});
  CHECK(s6.message() ==
        "aten::_to_copy.out: argument 1 (dtype) is ScalarType 99, which has no etc dtype");
}

TEST_CASE("tensors without data or with negative sizes are rejected") {
  Call c("aten::neg.out");
  Value* a = c.random(DType::kFloat32, {2}, 1);
  a->tensor.data = nullptr;
  Value* out = c.out(DType::kFloat32, {2});
  CHECK(c.run({a}, {out}).message() == "aten::neg.out: argument 0 (self) has no data");

  Value* b = c.random(DType::kFloat32, {2}, 1);
  b->tensor.sizes = {-2};
  CHECK(c.run({b}, {out}).message() ==
        "aten::neg.out: argument 0 (self) has a negative size in [-2]");

  // An empty tensor needs no memory.
  Value* e = c.tensor(DType::kFloat32, {0, 3}, {});
  e->tensor.data = nullptr;
  Value* eo = c.out(DType::kFloat32, {0, 3});
  eo->tensor.data = nullptr;
  CHECK(c.run({e}, {eo}).ok());
}

TEST_CASE("wrong out shapes and dtypes are reported") {
  Call c("aten::mm.out");
  Value* a = c.random(DType::kFloat32, {2, 4}, 1);
  Value* b = c.random(DType::kFloat32, {4, 3}, 2);
  CHECK(c.run({a, b}, {c.out(DType::kFloat32, {2, 2})}).message() ==
        "aten::mm.out: out has shape [2, 2], expected [2, 3]");
  CHECK(c.run({a, b}, {c.out(DType::kFloat64, {2, 3})}).message() ==
        "aten::mm.out: out has dtype float64, expected float32");

  Call e("aten::exp.out");
  Value* x = e.random(DType::kInt32, {3}, 3, 0, 5);
  CHECK(e.run({x}, {e.out(DType::kInt32, {3})}).message() ==
        "aten::exp.out: out has dtype int32, expected a floating-point dtype");
}

}  // namespace
}  // namespace etc::rt::test
