// Shape and dtype inference, op by op: at least one case per op in ops.def, plus the
// errors users hit most.
#include <catch2/catch.hpp>
#include <limits>

#include "graph/op_tester.h"

namespace etc {
namespace {

using testing::i64;
using testing::ints;
using testing::none;
using testing::OpTester;
using testing::T;
constexpr DType f32 = DType::kFloat32;
constexpr DType f16 = DType::kFloat16;
constexpr DType i32 = DType::kInt32;
constexpr DType i64t = DType::kInt64;
constexpr DType b8 = DType::kBool;

TEST_CASE("binary ops broadcast and promote") {
  OpTester t;
  auto a = t.in(f32, {2, 1, 4});
  auto b = t.in(f32, {3, 1});
  for (OpKind op : {OpKind::AddTensor, OpKind::SubTensor, OpKind::MulTensor}) {
    CHECK(t.one(op, {{"self", a}, {"other", b}}) == T(f32, {2, 3, 4}));
  }
  auto ia = t.in(i32, {4});
  auto ib = t.in(i64t, {4});
  CHECK(t.one(OpKind::AddTensor, {{"self", ia}, {"other", ib}}) == T(i64t, {4}));
  CHECK(t.one(OpKind::DivTensor, {{"self", ia}, {"other", ib}}) == T(f32, {4}));  // true division
  // A zero-dim float64 tensor does not widen a float32 tensor with dims.
  auto zd = t.in(DType::kFloat64, {});
  CHECK(t.one(OpKind::MulTensor, {{"self", a}, {"other", zd}}) == T(f32, {2, 1, 4}));
  // ... but it does lift an integer tensor to its float type.
  CHECK(t.one(OpKind::MulTensor, {{"self", ia}, {"other", zd}}) == T(DType::kFloat64, {4}));
  CHECK(t.error(OpKind::AddTensor, {{"self", a}, {"other", t.in(f32, {3, 5})}}) ==
        "/nodes/0/args/other (node \"n\"): aten.add.Tensor: shapes [2, 1, 4] and [3, 5] cannot be "
        "broadcast together");
}

TEST_CASE("tensor-scalar ops take the scalar's category into account") {
  OpTester t;
  auto i = t.in(i32, {3});
  auto f = t.in(f16, {3});
  auto b = t.in(b8, {3});
  CHECK(t.one(OpKind::AddScalar, {{"self", i}, {"other", Scalar{int64_t{2}}}}) == T(i32, {3}));
  CHECK(t.one(OpKind::AddScalar, {{"self", i}, {"other", Scalar{0.5}}}) == T(f32, {3}));
  CHECK(t.one(OpKind::SubScalar, {{"self", f}, {"other", Scalar{0.5}}}) == T(f16, {3}));
  CHECK(t.one(OpKind::MulScalar, {{"self", b}, {"other", Scalar{int64_t{3}}}}) == T(i64t, {3}));
  CHECK(t.one(OpKind::DivScalar, {{"self", i}, {"other", Scalar{int64_t{2}}}}) == T(f32, {3}));
  CHECK(t.one(OpKind::PowTensorScalar, {{"self", f}, {"exponent", Scalar{2.0}}}) == T(f16, {3}));
  CHECK(t.one(OpKind::PowTensorScalar, {{"self", i}, {"exponent", Scalar{int64_t{2}}}}) ==
        T(i32, {3}));
}

TEST_CASE("where broadcasts all three and needs a bool condition") {
  OpTester t;
  auto c = t.in(b8, {2, 1});
  auto x = t.in(f32, {1, 3});
  auto y = t.in(f32, {});
  CHECK(t.one(OpKind::WhereSelf, {{"condition", c}, {"self", x}, {"other", y}}) == T(f32, {2, 3}));
  CHECK(t.error(OpKind::WhereSelf, {{"condition", x}, {"self", x}, {"other", y}}) ==
        "/nodes/0/args/condition (node \"n\"): aten.where.self: expected a bool condition, got "
        "float32[1, 3]");
}

TEST_CASE("unary ops keep shapes, float ops lift integers, float-only ops reject them") {
  OpTester t;
  auto x = t.in(f16, {2, 3});
  auto i = t.in(i32, {5});
  for (OpKind op : {OpKind::Neg, OpKind::Relu, OpKind::Clamp, OpKind::Hardtanh, OpKind::Clone}) {
    CHECK(t.one(op, {{"self", x}}) == T(f16, {2, 3}));
    CHECK(t.one(op, {{"self", i}}) == T(i32, {5}));
  }
  for (OpKind op : {OpKind::Exp, OpKind::Log, OpKind::Rsqrt, OpKind::Sigmoid, OpKind::Sqrt,
                    OpKind::Tanh, OpKind::Erf}) {
    CHECK(t.one(op, {{"self", x}}) == T(f16, {2, 3}));
    CHECK(t.one(op, {{"self", i}}) == T(f32, {5}));
  }
  for (OpKind op : {OpKind::Gelu, OpKind::Hardsigmoid, OpKind::Hardswish, OpKind::Silu}) {
    CHECK(t.one(op, {{"self", x}}) == T(f16, {2, 3}));
    CHECK(t.error(op, {{"self", i}}).find("expected a floating-point tensor, got int32[5]") !=
          std::string::npos);
  }
  CHECK(t.one(OpKind::Clamp, {{"self", x}, {"min", Scalar{0.0}}, {"max", none()}}) ==
        T(f16, {2, 3}));
  CHECK(t.one(OpKind::Gelu, {{"self", x}, {"approximate", std::string("tanh")}}) == T(f16, {2, 3}));
  CHECK(t.error(OpKind::Gelu, {{"self", x}, {"approximate", std::string("erf")}}) ==
        "/nodes/0/args/approximate (node \"n\"): aten.gelu.default: expected 'none' or 'tanh', got "
        "'erf'");
}

TEST_CASE("_int_mm: uint8 or int8 by int8, int32 sums") {
  OpTester t;
  const DType u8 = DType::kUInt8, i8 = DType::kInt8;
  CHECK(t.one(OpKind::IntMm, {{"self", t.in(u8, {4, 8})}, {"mat2", t.in(i8, {8, 3})}}) ==
        T(i32, {4, 3}));
  CHECK(t.one(OpKind::IntMm, {{"self", t.in(i8, {1, 8})}, {"mat2", t.in(i8, {8, 5})}}) ==
        T(i32, {1, 5}));
  CHECK(t.error(OpKind::IntMm, {{"self", t.in(f32, {4, 8})}, {"mat2", t.in(i8, {8, 3})}}) ==
        "/nodes/0/args/self (node \"n\"): aten._int_mm.default: expected a uint8 or int8 "
        "matrix, got float32[4, 8]");
  CHECK(t.error(OpKind::IntMm, {{"self", t.in(u8, {4, 8})}, {"mat2", t.in(u8, {8, 3})}})
            .find("expected dtype int8") != std::string::npos);
  CHECK(t.error(OpKind::IntMm, {{"self", t.in(u8, {4, 8})}, {"mat2", t.in(i8, {7, 3})}})
            .find("inner dimensions 8 and 7 differ") != std::string::npos);
}

TEST_CASE("mm, addmm, bmm and linear check inner dimensions") {
  OpTester t;
  auto a = t.in(f32, {4, 8});
  auto b = t.in(f32, {8, 3});
  CHECK(t.one(OpKind::Mm, {{"self", a}, {"mat2", b}}) == T(f32, {4, 3}));
  CHECK(t.error(OpKind::Mm, {{"self", a}, {"mat2", a}}) ==
        "/nodes/0/args/mat2 (node \"n\"): aten.mm.default: cannot multiply float32[4, 8] by "
        "float32[4, 8] "
        "(inner dimensions 8 and 4 differ)");
  CHECK(t.error(OpKind::Mm, {{"self", a}, {"mat2", t.in(f16, {8, 3})}})
            .find("expected dtype float32") != std::string::npos);
  CHECK(t.one(OpKind::Addmm, {{"self", t.in(f32, {3})}, {"mat1", a}, {"mat2", b}}) ==
        T(f32, {4, 3}));
  CHECK(t.error(OpKind::Addmm, {{"self", t.in(f32, {5})}, {"mat1", a}, {"mat2", b}})
            .find("cannot be broadcast") != std::string::npos);
  CHECK(t.one(OpKind::Bmm, {{"self", t.in(f32, {2, 4, 8})}, {"mat2", t.in(f32, {2, 8, 5})}}) ==
        T(f32, {2, 4, 5}));
  CHECK(t.error(OpKind::Bmm, {{"self", t.in(f32, {2, 4, 8})}, {"mat2", t.in(f32, {3, 8, 5})}})
            .find("batch sizes differ") != std::string::npos);
  auto x = t.in(f32, {2, 7, 8});
  auto w = t.in(f32, {16, 8});
  CHECK(t.one(OpKind::Linear, {{"input", x}, {"weight", w}}) == T(f32, {2, 7, 16}));
  CHECK(t.one(OpKind::Linear, {{"input", x}, {"weight", w}, {"bias", t.in(f32, {16})}}) ==
        T(f32, {2, 7, 16}));
  CHECK(t.error(OpKind::Linear, {{"input", x}, {"weight", t.in(f32, {16, 9})}}) ==
        "/nodes/0/args/weight (node \"n\"): aten.linear.default: input float32[2, 7, 8] has 8 "
        "features but weight "
        "float32[16, 9] expects 9");
  CHECK(t.error(OpKind::Linear, {{"input", x}, {"weight", w}, {"bias", t.in(f32, {15})}})
            .find("does not broadcast") != std::string::npos);
}

TEST_CASE("convolution: stride, padding, dilation, groups and transposed") {
  OpTester t;
  auto x = t.in(f32, {1, 4, 10, 12});
  auto conv = [&](ValueId w, std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d,
                  bool tr, int64_t g) {
    return t.infer(OpKind::Convolution, {{"input", x},
                                         {"weight", w},
                                         {"bias", none()},
                                         {"stride", ints(s)},
                                         {"padding", ints(p)},
                                         {"dilation", ints(d)},
                                         {"transposed", tr},
                                         {"output_padding", ints({0, 0})},
                                         {"groups", i64(g)}});
  };
  auto r = conv(t.in(f32, {8, 4, 3, 3}), {1, 1}, {1, 1}, {1, 1}, false, 1);
  REQUIRE(r.ok());
  CHECK((*r)[0] == T(f32, {1, 8, 10, 12}));
  r = conv(t.in(f32, {8, 4, 3, 3}), {2, 2}, {0, 0}, {2, 2}, false, 1);  // extent 5
  REQUIRE(r.ok());
  CHECK((*r)[0] == T(f32, {1, 8, 3, 4}));
  r = conv(t.in(f32, {4, 1, 3, 3}), {1}, {1}, {1}, false, 4);  // depthwise, single-int lists
  REQUIRE(r.ok());
  CHECK((*r)[0] == T(f32, {1, 4, 10, 12}));
  r = conv(t.in(f32, {4, 2, 2, 2}), {2, 2}, {0, 0}, {1, 1}, true,
           1);  // transposed: C_in=4 -> C_out=2
  REQUIRE(r.ok());
  CHECK((*r)[0] == T(f32, {1, 2, 20, 24}));
  r = conv(t.in(f32, {8, 3, 3, 3}), {1, 1}, {1, 1}, {1, 1}, false, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "aten.convolution.default: weight float32[8, 3, 3, 3] with groups=1 expects 3 input "
        "channels, but input "
        "float32[1, 4, 10, 12] has 4");
  r = conv(t.in(f32, {8, 4, 11, 3}), {1, 1}, {0, 0}, {1, 1}, false, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "aten.convolution.default: kernel of extent 11 is larger than the padded input (10)");
  r = conv(t.in(f32, {8, 4, 3, 3}), {1, 1}, {int64_t{1} << 62, 0}, {1, 1}, false, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "aten.convolution.default: kernel extent or padding overflows a 64-bit size");
  r = conv(t.in(f32, {4, 2, 2, 2}), {int64_t{1} << 62, 1}, {0, 0}, {1, 1}, true, 1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "aten.convolution.default: transposed convolution output size overflows a 64-bit size");
}

TEST_CASE("pooling: max_pool2d, avg_pool2d and adaptive_avg_pool2d") {
  OpTester t;
  auto x = t.in(f32, {1, 3, 7, 7});
  CHECK(t.one(OpKind::MaxPool2d, {{"self", x}, {"kernel_size", ints({2, 2})}}) ==
        T(f32, {1, 3, 3, 3}));
  CHECK(t.one(OpKind::MaxPool2d, {{"self", x}, {"kernel_size", ints({2})}, {"ceil_mode", true}}) ==
        T(f32, {1, 3, 4, 4}));
  CHECK(t.one(OpKind::MaxPool2d, {{"self", x},
                                  {"kernel_size", ints({3, 3})},
                                  {"stride", ints({1, 1})},
                                  {"padding", ints({1, 1})}}) == T(f32, {1, 3, 7, 7}));
  Result<std::vector<TensorType>> mpi =
      t.infer(OpKind::MaxPool2dWithIndices, {{"self", x}, {"kernel_size", ints({2, 2})}});
  REQUIRE(mpi.ok());
  CHECK(*mpi == std::vector<TensorType>{T(f32, {1, 3, 3, 3}), T(i64t, {1, 3, 3, 3})});
  CHECK(t.one(OpKind::AvgPool2d,
              {{"self", x}, {"kernel_size", ints({3, 3})}, {"stride", ints({2, 2})}}) ==
        T(f32, {1, 3, 3, 3}));
  CHECK(t.one(OpKind::AvgPool2d, {{"self", t.in(f32, {3, 8, 8})}, {"kernel_size", ints({2, 2})}}) ==
        T(f32, {3, 4, 4}));
  CHECK(t.error(OpKind::MaxPool2d,
                {{"self", x}, {"kernel_size", ints({2, 2})}, {"padding", ints({2, 2})}})
            .find("padding must be between 0 and half the kernel size") != std::string::npos);
  CHECK(t.error(OpKind::MaxPool2d, {{"self", t.in(f32, {7, 7})}, {"kernel_size", ints({2, 2})}})
            .find("expected a tensor of rank 3 or 4, got float32[7, 7]") != std::string::npos);
  CHECK(t.one(OpKind::AdaptiveAvgPool2d, {{"self", x}, {"output_size", ints({1, 1})}}) ==
        T(f32, {1, 3, 1, 1}));
  CHECK(t.error(OpKind::AdaptiveAvgPool2d, {{"self", x}, {"output_size", ints({0, 1})}})
            .find("expected two positive sizes") != std::string::npos);
}

TEST_CASE("upsampling: nearest and bilinear by size or scale factor") {
  OpTester t;
  auto x = t.in(f32, {1, 3, 5, 7});
  const ArgValue none = std::monostate{};
  CHECK(t.one(OpKind::UpsampleNearest2d,
              {{"input", x}, {"output_size", ints({10, 3})}, {"scale_factors", none}}) ==
        T(f32, {1, 3, 10, 3}));
  // floor(input * scale), as PyTorch and ONNX compute it.
  CHECK(t.one(OpKind::UpsampleNearest2d, {{"input", x},
                                          {"output_size", none},
                                          {"scale_factors", std::vector<double>{2.5, 0.5}}}) ==
        T(f32, {1, 3, 12, 3}));
  CHECK(t.one(OpKind::UpsampleBilinear2d, {{"input", x},
                                           {"output_size", ints({2, 2})},
                                           {"align_corners", true},
                                           {"scale_factors", none}}) == T(f32, {1, 3, 2, 2}));
  CHECK(t.error(OpKind::UpsampleNearest2d,
                {{"input", x}, {"output_size", none}, {"scale_factors", none}})
            .find("exactly one of output_size and scale_factors") != std::string::npos);
  CHECK(t.error(OpKind::UpsampleNearest2d, {{"input", x},
                                            {"output_size", ints({2, 2})},
                                            {"scale_factors", std::vector<double>{2, 2}}})
            .find("exactly one of output_size and scale_factors") != std::string::npos);
  CHECK(t.error(OpKind::UpsampleNearest2d, {{"input", t.in(f32, {3, 5, 7})},
                                            {"output_size", ints({2, 2})},
                                            {"scale_factors", none}})
            .find("rank") != std::string::npos);
  CHECK(
      t.error(OpKind::UpsampleNearest2d,
              {{"input", x}, {"output_size", none}, {"scale_factors", std::vector<double>{0.1, 1}}})
          .find("the output would be empty") != std::string::npos);
}

TEST_CASE("eq.Scalar, logical_not and any.dim give bool") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 4});
  CHECK(t.one(OpKind::EqScalar, {{"self", x}, {"other", Scalar{-1.0}}}) ==
        T(DType::kBool, {2, 3, 4}));
  CHECK(t.one(OpKind::LogicalNot, {{"self", t.in(i32, {5})}}) == T(DType::kBool, {5}));
  CHECK(t.one(OpKind::AnyDim, {{"self", x}, {"dim", int64_t{-1}}}) == T(DType::kBool, {2, 3}));
  CHECK(t.one(OpKind::AnyDim, {{"self", x}, {"dim", int64_t{1}}, {"keepdim", true}}) ==
        T(DType::kBool, {2, 1, 4}));
  CHECK(t.one(OpKind::AnyDim, {{"self", t.in(DType::kUInt8, {3})}, {"dim", int64_t{0}}}) ==
        T(DType::kUInt8, {}));
  CHECK(t.error(OpKind::AnyDim, {{"self", x}, {"dim", int64_t{3}}}).find("out of range") !=
        std::string::npos);
}

TEST_CASE("reductions: amax, mean.dim, sum.dim_IntList") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 4});
  CHECK(t.one(OpKind::Amax, {{"self", x}, {"dim", ints({-1})}}) == T(f32, {2, 3}));
  CHECK(t.one(OpKind::Amax, {{"self", x}, {"dim", ints({})}, {"keepdim", true}}) ==
        T(f32, {1, 1, 1}));
  CHECK(t.one(OpKind::MeanDim, {{"self", x}, {"dim", ints({1, 2})}, {"keepdim", true}}) ==
        T(f32, {2, 1, 1}));
  CHECK(t.one(OpKind::MeanDim, {{"self", x}, {"dim", none()}}) == T(f32, {}));
  CHECK(t.one(OpKind::MeanDim, {{"self", x}, {"dim", ints({0})}, {"dtype", DType::kFloat64}}) ==
        T(DType::kFloat64, {3, 4}));
  CHECK(t.error(OpKind::MeanDim, {{"self", t.in(i32, {3})}, {"dim", ints({0})}})
            .find("mean needs a floating-point") != std::string::npos);
  CHECK(t.one(OpKind::SumDimIntList, {{"self", t.in(i32, {3, 2})}, {"dim", ints({0})}}) ==
        T(i64t, {2}));
  CHECK(t.one(OpKind::SumDimIntList, {{"self", x}, {"dim", ints({0, -1})}}) == T(f32, {3}));
  CHECK(t.error(OpKind::SumDimIntList, {{"self", x}, {"dim", ints({1, -2})}}) ==
        "/nodes/0/args/dim (node \"n\"): aten.sum.dim_IntList: dim 1 appears more than once");
  CHECK(t.error(OpKind::SumDimIntList, {{"self", x}, {"dim", ints({3})}}) ==
        "/nodes/0/args/dim (node \"n\"): aten.sum.dim_IntList: dim 3 is out of range for a tensor "
        "of rank 3 "
        "(expected -3 to 2)");
}

TEST_CASE("softmax, log_softmax, layer norm and batch norm") {
  OpTester t;
  auto x = t.in(f32, {2, 5, 8});
  for (OpKind op : {OpKind::Softmax, OpKind::LogSoftmax}) {
    CHECK(t.one(op, {{"self", x}, {"dim", i64(-1)}, {"half_to_float", false}}) ==
          T(f32, {2, 5, 8}));
  }
  CHECK(t.one(OpKind::Softmax,
              {{"self", t.in(f16, {4})}, {"dim", i64(0)}, {"half_to_float", true}}) == T(f32, {4}));
  CHECK(t.error(OpKind::Softmax, {{"self", x}, {"dim", i64(0)}, {"half_to_float", true}})
            .find("half_to_float needs a float16 input") != std::string::npos);

  Result<std::vector<TensorType>> ln =
      t.infer(OpKind::NativeLayerNorm, {{"input", x},
                                        {"normalized_shape", ints({8})},
                                        {"weight", t.in(f32, {8})},
                                        {"bias", t.in(f32, {8})},
                                        {"eps", 1e-5}});
  REQUIRE(ln.ok());
  CHECK(*ln == std::vector<TensorType>{T(f32, {2, 5, 8}), T(f32, {2, 5, 1}), T(f32, {2, 5, 1})});
  CHECK(t.error(OpKind::NativeLayerNorm, {{"input", x},
                                          {"normalized_shape", ints({5, 7})},
                                          {"weight", none()},
                                          {"bias", none()},
                                          {"eps", 1e-5}})
            .find("does not match the trailing dims") != std::string::npos);

  auto img = t.in(f32, {1, 3, 4, 4});
  auto c = t.in(f32, {3});
  Result<std::vector<TensorType>> bn =
      t.infer(OpKind::NativeBatchNormNoTraining, {{"input", img},
                                                  {"weight", c},
                                                  {"bias", c},
                                                  {"running_mean", c},
                                                  {"running_var", c},
                                                  {"momentum", 0.1},
                                                  {"eps", 1e-5}});
  REQUIRE(bn.ok());
  CHECK(*bn == std::vector<TensorType>{T(f32, {1, 3, 4, 4}), T(f32, {0}), T(f32, {0})});
  CHECK(t.error(OpKind::NativeBatchNormNoTraining, {{"input", img},
                                                    {"weight", c},
                                                    {"bias", c},
                                                    {"running_mean", t.in(f32, {4})},
                                                    {"running_var", c},
                                                    {"momentum", 0.1},
                                                    {"eps", 1e-5}})
            .find("running_mean (node \"n\"): aten._native_batch_norm_legit_no_training.default: "
                  "expected shape [3]") != std::string::npos);
}

TEST_CASE("cat concatenates along a dim and checks the others") {
  OpTester t;
  auto a = t.in(f32, {2, 3});
  auto b = t.in(f32, {2, 5});
  CHECK(t.one(OpKind::Cat, {{"tensors", std::vector<ValueId>{a, b}}, {"dim", i64(1)}}) ==
        T(f32, {2, 8}));
  CHECK(t.one(OpKind::Cat, {{"tensors", std::vector<ValueId>{a, a}}}) == T(f32, {4, 3}));
  CHECK(t.one(OpKind::Cat, {{"tensors", std::vector<ValueId>{a, t.in(f32, {0})}}}) ==
        T(f32, {2, 3}));
  CHECK(t.error(OpKind::Cat, {{"tensors", std::vector<ValueId>{a, b}}}) ==
        "/nodes/0/args/tensors (node \"n\"): aten.cat.default: tensor 1 float32[2, 5] differs from "
        "float32[2, 3] in "
        "dim 1");
  CHECK(t.error(OpKind::Cat, {{"tensors", std::vector<ValueId>{}}})
            .find("expected at least one tensor") != std::string::npos);
}

TEST_CASE("view and reshape infer -1 and check element counts") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 4});
  CHECK(t.one(OpKind::View, {{"self", x}, {"size", ints({6, -1})}}) == T(f32, {6, 4}));
  CHECK(t.one(OpKind::Reshape, {{"self", x}, {"shape", ints({24})}}) == T(f32, {24}));
  CHECK(t.error(OpKind::View, {{"self", x}, {"size", ints({5, -1})}}) ==
        "/nodes/0/args/size (node \"n\"): aten.view.default: shape [5, -1] is invalid for an input "
        "of 24 elements");
  CHECK(t.error(OpKind::Reshape, {{"self", x}, {"shape", ints({-1, -1})}})
            .find("only one dimension can be -1") != std::string::npos);
  CHECK(t.error(OpKind::View, {{"self", x}, {"size", ints({4, 5})}})
            .find("has 20 elements but the input") != std::string::npos);
}

TEST_CASE("permute, transpose, unsqueeze, squeeze, expand") {
  OpTester t;
  auto x = t.in(f32, {2, 1, 4});
  CHECK(t.one(OpKind::Permute, {{"self", x}, {"dims", ints({2, 0, 1})}}) == T(f32, {4, 2, 1}));
  CHECK(t.error(OpKind::Permute, {{"self", x}, {"dims", ints({0, 0, 1})}})
            .find("dim 0 appears more than once") != std::string::npos);
  CHECK(t.error(OpKind::Permute, {{"self", x}, {"dims", ints({0, 1})}}).find("expected 3 dims") !=
        std::string::npos);
  CHECK(t.one(OpKind::TransposeInt, {{"self", x}, {"dim0", i64(0)}, {"dim1", i64(-1)}}) ==
        T(f32, {4, 1, 2}));
  CHECK(t.one(OpKind::Unsqueeze, {{"self", x}, {"dim", i64(-1)}}) == T(f32, {2, 1, 4, 1}));
  CHECK(t.one(OpKind::Unsqueeze, {{"self", x}, {"dim", i64(0)}}) == T(f32, {1, 2, 1, 4}));
  CHECK(t.one(OpKind::SqueezeDim, {{"self", x}, {"dim", i64(1)}}) == T(f32, {2, 4}));
  CHECK(t.one(OpKind::SqueezeDim, {{"self", x}, {"dim", i64(0)}}) ==
        T(f32, {2, 1, 4}));  // not size 1: no-op
  CHECK(t.one(OpKind::SqueezeDims, {{"self", x}, {"dim", ints({0, 1})}}) == T(f32, {2, 4}));
  CHECK(t.one(OpKind::Expand, {{"self", x}, {"size", ints({3, 2, 5, -1})}}) ==
        T(f32, {3, 2, 5, 4}));
  CHECK(
      t.error(OpKind::Expand, {{"self", x}, {"size", ints({3, 5, 4})}}).find("dim 0 has size 2") !=
      std::string::npos);
}

TEST_CASE("slice and select") {
  OpTester t;
  auto x = t.in(f32, {10, 4});
  CHECK(
      t.one(OpKind::SliceTensor,
            {{"self", x}, {"dim", i64(0)}, {"start", i64(2)}, {"end", i64(9)}, {"step", i64(3)}}) ==
      T(f32, {3, 4}));
  CHECK(t.one(OpKind::SliceTensor, {{"self", x}, {"dim", i64(0)}, {"start", i64(-3)}}) ==
        T(f32, {3, 4}));
  CHECK(t.one(OpKind::SliceTensor, {{"self", x}, {"dim", i64(1)}, {"end", i64(100)}}) ==
        T(f32, {10, 4}));
  CHECK(t.one(OpKind::SliceTensor, {{"self", x}, {"start", i64(8)}, {"end", i64(2)}}) ==
        T(f32, {0, 4}));
  CHECK(
      t.one(OpKind::SliceTensor,
            {{"self", x}, {"start", i64(1)}, {"step", i64(std::numeric_limits<int64_t>::max())}}) ==
      T(f32, {1, 4}));  // end - start + step - 1 left int64
  CHECK(t.error(OpKind::SliceTensor, {{"self", x}, {"step", i64(0)}})
            .find("slice step must be positive") != std::string::npos);
  CHECK(t.one(OpKind::SelectInt, {{"self", x}, {"dim", i64(1)}, {"index", i64(-1)}}) ==
        T(f32, {10}));
  CHECK(t.error(OpKind::SelectInt, {{"self", x}, {"dim", i64(1)}, {"index", i64(4)}}) ==
        "/nodes/0/args/index (node \"n\"): aten.select.int: index 4 is out of range for dim 1 of "
        "size 4");
}

TEST_CASE("_to_copy, embedding, constant_pad_nd") {
  OpTester t;
  auto x = t.in(f32, {2, 3});
  CHECK(t.one(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kFloat16}}) == T(f16, {2, 3}));
  CHECK(t.one(OpKind::ToCopy, {{"self", x}}) == T(f32, {2, 3}));
  auto w = t.in(f32, {100, 16});
  CHECK(t.one(OpKind::Embedding, {{"weight", w}, {"indices", t.in(i64t, {2, 7})}}) ==
        T(f32, {2, 7, 16}));
  CHECK(t.error(OpKind::Embedding, {{"weight", w}, {"indices", t.in(f32, {2})}})
            .find("expected int64 or int32") != std::string::npos);
  // etc::unpack_int4: uint8 [..., ceil(size / 2)] -> int8 [..., size].
  auto packed = t.in(DType::kUInt8, {5, 2, 4});
  CHECK(t.one(OpKind::UnpackInt4, {{"packed", packed}, {"size", i64(8)}}) ==
        T(DType::kInt8, {5, 2, 8}));
  CHECK(t.one(OpKind::UnpackInt4, {{"packed", packed}, {"size", i64(7)}}) ==
        T(DType::kInt8, {5, 2, 7}));
  CHECK(t.error(OpKind::UnpackInt4, {{"packed", packed}, {"size", i64(9)}})
            .find("9 values do not pack into the last dim of uint8[5, 2, 4] (ceil(size / 2) "
                  "bytes)") != std::string::npos);
  CHECK(t.error(OpKind::UnpackInt4, {{"packed", t.in(DType::kInt8, {4})}, {"size", i64(8)}})
            .find("expected uint8 (two 4-bit values a byte), got int8[4]") != std::string::npos);
  // etc::weight_only_linear (graph/weight_only.h): out is input's leading dims then N.
  {
    const DType bf = DType::kBFloat16;
    auto x3 = t.in(bf, {2, 5, 64});
    auto w4 = t.in(DType::kUInt8, {24, 32});
    auto s = t.in(bf, {24, 2});
    CHECK(t.one(OpKind::WeightOnlyLinear,
                {{"input", x3}, {"weight", w4}, {"scale", s}, {"group_size", i64(32)}}) ==
          T(bf, {2, 5, 24}));
    CHECK(t.one(OpKind::WeightOnlyLinear, {{"input", x3},
                                           {"weight", t.in(DType::kInt8, {24, 64})},
                                           {"scale", s},
                                           {"group_size", i64(32)},
                                           {"zero_point", t.in(DType::kInt8, {24, 2})},
                                           {"bias", t.in(bf, {24})}}) == T(bf, {2, 5, 24}));
    // 4-bit rows of an odd length take ceil(K / 2) bytes.
    CHECK(t.one(OpKind::WeightOnlyLinear, {{"input", t.in(f32, {3, 51})},
                                           {"weight", t.in(DType::kUInt8, {7, 26})},
                                           {"scale", t.in(f32, {7, 3})},
                                           {"group_size", i64(17)}}) == T(f32, {3, 7}));
    auto err = [&](std::initializer_list<std::pair<std::string_view, ArgValue>> args) {
      return t.error(OpKind::WeightOnlyLinear, args);
    };
    CHECK(err({{"input", x3}, {"weight", w4}, {"scale", s}, {"group_size", i64(24)}})
              .find("24 does not divide the 64 input features") != std::string::npos);
    CHECK(err({{"input", x3},
               {"weight", t.in(DType::kUInt8, {24, 64})},
               {"scale", s},
               {"group_size", i64(32)}})
              .find("holds rows of 64 bytes; 64 input features take 32") != std::string::npos);
    CHECK(
        err({{"input", x3}, {"weight", w4}, {"scale", t.in(f32, {24, 2})}, {"group_size", i64(32)}})
            .find("expected bfloat16 (the input's dtype), got float32") != std::string::npos);
    CHECK(
        err({{"input", x3}, {"weight", w4}, {"scale", t.in(bf, {24, 1})}, {"group_size", i64(32)}})
            .find("expected [24, 2] (out features, groups), got [24, 1]") != std::string::npos);
    CHECK(err({{"input", x3},
               {"weight", w4},
               {"scale", s},
               {"group_size", i64(32)},
               {"zero_point", t.in(DType::kInt32, {24, 2})}})
              .find("expected int8 or bfloat16 (the input's dtype), got int32") !=
          std::string::npos);
    CHECK(err({{"input", x3},
               {"weight", w4},
               {"scale", s},
               {"group_size", i64(32)},
               {"bias", t.in(bf, {1, 24})}})
              .find("expected [24], got [1, 24]") != std::string::npos);
    CHECK(err({{"input", t.in(DType::kInt32, {2, 64})},
               {"weight", w4},
               {"scale", t.in(DType::kInt32, {24, 2})},
               {"group_size", i64(32)}})
              .find("expected float32, float16 or bfloat16, got int32") != std::string::npos);
    CHECK(err({{"input", x3},
               {"weight", t.in(DType::kInt16, {24, 64})},
               {"scale", s},
               {"group_size", i64(32)}})
              .find("expected int8, or uint8 (4-bit values two a byte), got int16") !=
          std::string::npos);
  }
  auto img = t.in(f32, {1, 3, 4, 4});
  CHECK(t.one(OpKind::ConstantPadNd, {{"self", img}, {"pad", ints({1, 2, 0, 3})}}) ==
        T(f32, {1, 3, 7, 7}));
  CHECK(t.one(OpKind::ConstantPadNd, {{"self", img}, {"pad", ints({-1, -1})}}) ==
        T(f32, {1, 3, 4, 2}));
  CHECK(t.error(OpKind::ConstantPadNd, {{"self", img}, {"pad", ints({1})}})
            .find("expected an even number") != std::string::npos);
  CHECK(t.error(OpKind::ConstantPadNd, {{"self", img}, {"pad", ints({-5, 6})}})
            .find("pad crops more than dim 3 of float32[1, 3, 4, 4] holds") != std::string::npos);
  CHECK(t.error(OpKind::ConstantPadNd,
                {{"self", img}, {"pad", ints({std::numeric_limits<int64_t>::max(), 1})}})
            .find("padding dim 3 overflows a 64-bit size") != std::string::npos);
}

TEST_CASE("advanced indexing: index.Tensor and index_put") {
  OpTester t;
  using Ids = std::vector<ValueId>;
  const ValueId none;
  auto x = t.in(f32, {4, 5, 6, 7});
  auto i3 = t.in(i64t, {3});
  auto j23 = t.in(i64t, {2, 3});
  // One index: its shape replaces the dim.
  CHECK(t.one(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{none, i3}}}) ==
        T(f32, {4, 3, 6, 7}));
  // Adjacent indices broadcast together and stay in place.
  CHECK(t.one(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{none, j23, i3}}}) ==
        T(f32, {4, 2, 3, 7}));
  // Separated by a slice: the broadcast dims go first (NumPy's rule).
  CHECK(t.one(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{i3, none, i3}}}) ==
        T(f32, {3, 5, 7}));
  CHECK(t.one(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{}}}) == T(f32, {4, 5, 6, 7}));
  CHECK(t.error(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{i3, i3, i3, i3, i3}}})
            .find("too many indices (5) for a tensor of rank 4") != std::string::npos);
  CHECK(t.error(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{t.in(i64t, {2}), i3}}})
            .find("does not broadcast") != std::string::npos);
  CHECK(t.error(OpKind::IndexTensor, {{"self", x}, {"indices", Ids{t.in(DType::kBool, {4})}}})
            .find("boolean mask") != std::string::npos);
  // index_put keeps self's type; values broadcast to the indexed shape.
  auto cache = t.in(f32, {1, 2, 16, 8});
  auto pos = t.in(i64t, {1});
  CHECK(t.one(OpKind::IndexPut, {{"self", cache},
                                 {"indices", Ids{none, none, pos}},
                                 {"values", t.in(f32, {1, 2, 1, 8})}}) == T(f32, {1, 2, 16, 8}));
  CHECK(t.one(OpKind::IndexPut,
              {{"self", cache}, {"indices", Ids{none, none, pos}}, {"values", t.in(f32, {8})}}) ==
        T(f32, {1, 2, 16, 8}));
  CHECK(t.error(OpKind::IndexPut, {{"self", cache},
                                   {"indices", Ids{none, none, pos}},
                                   {"values", t.in(f32, {1, 2, 3, 8})}})
            .find("do not broadcast to the indexed shape [1, 2, 1, 8]") != std::string::npos);
  CHECK(t.error(OpKind::IndexPut, {{"self", cache},
                                   {"indices", Ids{none, none, pos}},
                                   {"values", t.in(i64t, {1, 2, 1, 8})}})
            .find("index_put needs one dtype") != std::string::npos);
}

TEST_CASE("full, zeros and ones") {
  OpTester t;
  // full_like: self's shape, the dtype given or self's.
  auto like = t.in(f32, {3, 5});
  CHECK(t.one(OpKind::FullLike, {{"self", like}, {"fill_value", Scalar{-1.0}}}) == T(f32, {3, 5}));
  CHECK(t.one(OpKind::FullLike,
              {{"self", like}, {"fill_value", Scalar{int64_t{0}}}, {"dtype", DType::kBool}}) ==
        T(DType::kBool, {3, 5}));
  CHECK(t.one(OpKind::Full, {{"size", ints({2, 2})}, {"fill_value", Scalar{1.5}}}) ==
        T(f32, {2, 2}));
  CHECK(t.one(OpKind::Full, {{"size", ints({3})}, {"fill_value", Scalar{int64_t{7}}}}) ==
        T(i64t, {3}));
  CHECK(t.one(OpKind::Full, {{"size", ints({3})}, {"fill_value", Scalar{true}}}) == T(b8, {3}));
  CHECK(t.one(OpKind::Zeros, {{"size", ints({4})}}) == T(f32, {4}));
  CHECK(t.one(OpKind::Ones, {{"size", ints({1, 2})}, {"dtype", DType::kInt8}}) ==
        T(DType::kInt8, {1, 2}));
  CHECK(t.error(OpKind::Zeros, {{"size", ints({-1})}}).find("negative size -1") !=
        std::string::npos);
  CHECK(t.error(OpKind::Zeros, {{"size", ints({int64_t{1} << 40, int64_t{1} << 40})}})
            .find("is too large") != std::string::npos);
}

TEST_CASE("random numbers: rand and randn are floats of size, randperm n integers") {
  OpTester t;
  for (OpKind op : {OpKind::Rand, OpKind::Randn}) {
    CHECK(t.one(op, {{"size", ints({2, 3})}}) == T(f32, {2, 3}));
    CHECK(t.one(op, {{"size", ints({4})}, {"dtype", DType::kBFloat16}}) ==
          T(DType::kBFloat16, {4}));
    CHECK(t.error(op, {{"size", ints({4})}, {"dtype", DType::kInt64}})
              .find("need a floating dtype, got int64") != std::string::npos);
    CHECK(t.error(op, {{"size", ints({-2})}}).find("negative size -2") != std::string::npos);
  }
  CHECK(t.one(OpKind::Randperm, {{"n", i64(7)}}) == T(i64t, {7}));  // dtype=long by default
  CHECK(t.one(OpKind::Randperm, {{"n", i64(0)}, {"dtype", DType::kInt32}}) ==
        T(DType::kInt32, {0}));
  CHECK(t.error(OpKind::Randperm, {{"n", i64(-1)}}).find("negative n -1") != std::string::npos);
  CHECK(t.error(OpKind::Randperm, {{"n", i64(300)}, {"dtype", DType::kInt8}})
            .find("int8 cannot hold 299") != std::string::npos);
}

TEST_CASE("device copies keep dtype and shape") {
  OpTester t;
  auto x = t.in(f16, {2, 3});
  CHECK(t.one(OpKind::H2DCopy, {{"self", x}}) == T(f16, {2, 3}));
  CHECK(t.one(OpKind::D2HCopy, {{"self", x}}) == T(f16, {2, 3}));
  // A delegate call's types come from its subgraph, never from inference.
  CHECK(t.error(OpKind::DelegateCall, {{"inputs", std::vector<ValueId>{x}}})
            .find("come from its subgraph") != std::string::npos);
}

TEST_CASE("the unary math ops infer by their kind") {
  OpTester t;
  auto f = t.in(f16, {2, 3});
  auto i = t.in(i32, {4});
  auto b = t.in(b8, {5});
  // kFloat: floats keep their dtype, integers and bool give float32.
  for (OpKind op :
       {OpKind::Sin, OpKind::Cos, OpKind::Tan, OpKind::Asin, OpKind::Acos, OpKind::Atan,
        OpKind::Sinh, OpKind::Cosh, OpKind::Asinh, OpKind::Acosh, OpKind::Atanh, OpKind::Expm1,
        OpKind::Log1p, OpKind::Log2, OpKind::Log10, OpKind::Reciprocal}) {
    INFO(op_info(op).name);
    CHECK(t.one(op, {{"self", f}}) == T(f16, {2, 3}));
    CHECK(t.one(op, {{"self", i}}) == T(f32, {4}));
    CHECK(t.one(op, {{"self", b}}) == T(f32, {5}));
  }
  // kNumeric: the input's dtype; bool refused, as ATen refuses it.
  for (OpKind op : {OpKind::Abs, OpKind::Ceil, OpKind::Floor, OpKind::Round, OpKind::Trunc}) {
    INFO(op_info(op).name);
    CHECK(t.one(op, {{"self", f}}) == T(f16, {2, 3}));
    CHECK(t.one(op, {{"self", i}}) == T(i32, {4}));
    CHECK(t.error(op, {{"self", b}}).find("expected a numeric tensor, got bool[5]") !=
          std::string::npos);
  }
  // kAny: sign takes bool too.
  CHECK(t.one(OpKind::Sign, {{"self", b}}) == T(b8, {5}));
  CHECK(t.one(OpKind::Sign, {{"self", i}}) == T(i32, {4}));
  // kIntegral: bitwise_not takes integers and bool, not floats.
  CHECK(t.one(OpKind::BitwiseNot, {{"self", i}}) == T(i32, {4}));
  CHECK(t.one(OpKind::BitwiseNot, {{"self", b}}) == T(b8, {5}));
  CHECK(t.error(OpKind::BitwiseNot, {{"self", f}}) ==
        "/nodes/0/args/self (node \"n\"): aten.bitwise_not.default: expected an integer or bool "
        "tensor, got float16[2, 3]");
  // kPredicate: bool of the input's shape.
  for (OpKind op : {OpKind::Isnan, OpKind::Isinf}) {
    CHECK(t.one(op, {{"self", f}}) == T(b8, {2, 3}));
    CHECK(t.one(op, {{"self", i}}) == T(b8, {4}));
  }
}

TEST_CASE("the binary math ops infer by their kind") {
  OpTester t;
  auto f = t.in(f16, {2, 1});
  auto g = t.in(f32, {3});
  auto i = t.in(i32, {2, 3});
  auto l = t.in(i64t, {3});
  auto b = t.in(b8, {3});
  // Comparisons and logical ops: bool, broadcast.
  for (OpKind op :
       {OpKind::EqTensor, OpKind::NeTensor, OpKind::LtTensor, OpKind::LeTensor, OpKind::GtTensor,
        OpKind::GeTensor, OpKind::LogicalAnd, OpKind::LogicalOr, OpKind::LogicalXor}) {
    INFO(op_info(op).name);
    CHECK(t.one(op, {{"self", f}, {"other", g}}) == T(b8, {2, 3}));
  }
  for (OpKind op :
       {OpKind::NeScalar, OpKind::LtScalar, OpKind::LeScalar, OpKind::GtScalar, OpKind::GeScalar}) {
    INFO(op_info(op).name);
    CHECK(t.one(op, {{"self", i}, {"other", Scalar{0.5}}}) == T(b8, {2, 3}));
  }
  // Bitwise: the result type, integers and bool only.
  CHECK(t.one(OpKind::BitwiseAndTensor, {{"self", i}, {"other", l}}) == T(i64t, {2, 3}));
  CHECK(t.one(OpKind::BitwiseOrScalar, {{"self", b}, {"other", Scalar{true}}}) == T(b8, {3}));
  CHECK(t.one(OpKind::BitwiseXorScalar, {{"self", b}, {"other", Scalar{int64_t{3}}}}) ==
        T(i64t, {3}));
  CHECK(t.error(OpKind::BitwiseAndTensor, {{"self", i}, {"other", g}})
            .find("expected integer or bool operands, got a float32 result") != std::string::npos);
  // Arithmetic: the result type (a number lifts only the category), not bool.
  CHECK(t.one(OpKind::Maximum, {{"self", f}, {"other", g}}) == T(f32, {2, 3}));
  CHECK(t.one(OpKind::FmodScalar, {{"self", i}, {"other", Scalar{int64_t{3}}}}) == T(i32, {2, 3}));
  CHECK(t.one(OpKind::RemainderScalar, {{"self", i}, {"other", Scalar{1.5}}}) == T(f32, {2, 3}));
  CHECK(t.one(OpKind::PowTensorTensor, {{"self", i}, {"exponent", l}}) == T(i64t, {2, 3}));
  CHECK(t.error(OpKind::Minimum, {{"self", b}, {"other", b}}).find("expected numeric operands") !=
        std::string::npos);
  // atan2: integers give float32.
  CHECK(t.one(OpKind::Atan2, {{"self", i}, {"other", l}}) == T(f32, {2, 3}));
  CHECK(t.error(OpKind::RemainderTensor, {{"self", g}, {"other", t.in(f32, {2})}})
            .find("cannot be broadcast") != std::string::npos);
}

TEST_CASE("div with a rounding mode: true division without one, else the result type") {
  OpTester t;
  auto i = t.in(i32, {2, 3});
  auto f = t.in(f16, {3});
  CHECK(t.one(OpKind::DivTensorMode, {{"self", i}, {"other", i}, {"rounding_mode", none()}}) ==
        T(f32, {2, 3}));
  CHECK(t.one(OpKind::DivTensorMode,
              {{"self", i}, {"other", i}, {"rounding_mode", std::string("floor")}}) ==
        T(i32, {2, 3}));
  CHECK(t.one(OpKind::DivScalarMode, {{"self", i},
                                      {"other", Scalar{int64_t{2}}},
                                      {"rounding_mode", std::string("trunc")}}) == T(i32, {2, 3}));
  CHECK(t.one(OpKind::DivScalarMode,
              {{"self", f}, {"other", Scalar{0.5}}, {"rounding_mode", std::string("floor")}}) ==
        T(f16, {3}));
  CHECK(t.error(OpKind::DivTensorMode,
                {{"self", i}, {"other", i}, {"rounding_mode", std::string("round")}}) ==
        "/nodes/0/args/rounding_mode (node \"n\"): aten.div.Tensor_mode: expected None, 'trunc' or "
        "'floor', got 'round'");
}

TEST_CASE("amin, prod and var reduce as amax and sum do") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 4});
  CHECK(t.one(OpKind::Amin, {{"self", x}, {"dim", ints({0, 2})}}) == T(f32, {3}));
  CHECK(t.one(OpKind::ProdDimInt, {{"self", t.in(i32, {2, 3})}, {"dim", i64(1)}}) == T(i64t, {2}));
  CHECK(t.one(OpKind::ProdDimInt, {{"self", x}, {"dim", i64(-1)}, {"keepdim", true}}) ==
        T(f32, {2, 3, 1}));
  CHECK(t.one(OpKind::ProdDimInt, {{"self", t.in(b8, {3})}, {"dim", i64(0)}, {"dtype", f32}}) ==
        T(f32, {}));
  CHECK(t.one(OpKind::VarCorrection, {{"self", x}, {"dim", ints({1})}, {"keepdim", true}}) ==
        T(f32, {2, 1, 4}));
  CHECK(t.one(OpKind::VarCorrection, {{"self", x}, {"dim", none()}}) == T(f32, {}));
  CHECK(t.error(OpKind::VarCorrection, {{"self", t.in(i32, {3})}, {"dim", none()}})
            .find("floating-point") != std::string::npos);
}

TEST_CASE("index reductions, cumsum, sort and topk give int64 indices") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 4});
  CHECK(t.one(OpKind::Argmax, {{"self", x}, {"dim", none()}}) == T(i64t, {}));
  CHECK(t.one(OpKind::Argmax, {{"self", x}, {"dim", none()}, {"keepdim", true}}) ==
        T(i64t, {1, 1, 1}));
  CHECK(t.one(OpKind::Argmin, {{"self", x}, {"dim", i64(1)}}) == T(i64t, {2, 4}));
  Result<std::vector<TensorType>> mx =
      t.infer(OpKind::MaxDim, {{"self", x}, {"dim", i64(-1)}, {"keepdim", true}});
  REQUIRE(mx.ok());
  CHECK(*mx == std::vector<TensorType>{T(f32, {2, 3, 1}), T(i64t, {2, 3, 1})});
  Result<std::vector<TensorType>> mn = t.infer(OpKind::MinDim, {{"self", x}, {"dim", i64(0)}});
  REQUIRE(mn.ok());
  CHECK(*mn == std::vector<TensorType>{T(f32, {3, 4}), T(i64t, {3, 4})});
  CHECK(t.one(OpKind::Cumsum, {{"self", t.in(b8, {5})}, {"dim", i64(0)}}) == T(i64t, {5}));
  CHECK(t.one(OpKind::Cumsum, {{"self", x}, {"dim", i64(2)}, {"dtype", DType::kFloat64}}) ==
        T(DType::kFloat64, {2, 3, 4}));
  CHECK(t.error(OpKind::Cumsum, {{"self", x}, {"dim", i64(3)}}).find("out of range") !=
        std::string::npos);
  Result<std::vector<TensorType>> s = t.infer(OpKind::Sort, {{"self", x}, {"dim", i64(1)}});
  REQUIRE(s.ok());
  CHECK(*s == std::vector<TensorType>{T(f32, {2, 3, 4}), T(i64t, {2, 3, 4})});
  Result<std::vector<TensorType>> k = t.infer(OpKind::Topk, {{"self", x}, {"k", i64(2)}});
  REQUIRE(k.ok());
  CHECK(*k == std::vector<TensorType>{T(f32, {2, 3, 2}), T(i64t, {2, 3, 2})});
  CHECK(t.error(OpKind::Topk, {{"self", x}, {"k", i64(5)}}) ==
        "/nodes/0/args/k (node \"n\"): aten.topk.default: k 5 is out of range for dim 2 of size 4");
}

TEST_CASE("native_group_norm checks N, C, HxW and the groups") {
  OpTester t;
  auto x = t.in(f32, {2, 6, 3, 3});
  auto c = t.in(f32, {6});
  Result<std::vector<TensorType>> gn = t.infer(OpKind::NativeGroupNorm, {{"input", x},
                                                                         {"weight", c},
                                                                         {"bias", c},
                                                                         {"N", i64(2)},
                                                                         {"C", i64(6)},
                                                                         {"HxW", i64(9)},
                                                                         {"group", i64(3)},
                                                                         {"eps", 1e-5}});
  REQUIRE(gn.ok());
  CHECK(*gn == std::vector<TensorType>{T(f32, {2, 6, 3, 3}), T(f32, {2, 3}), T(f32, {2, 3})});
  CHECK(t.error(OpKind::NativeGroupNorm, {{"input", x},
                                          {"weight", none()},
                                          {"bias", none()},
                                          {"N", i64(2)},
                                          {"C", i64(6)},
                                          {"HxW", i64(9)},
                                          {"group", i64(4)},
                                          {"eps", 1e-5}})
            .find("is not divisible into 4 groups") != std::string::npos);
  CHECK(t.error(OpKind::NativeGroupNorm, {{"input", x},
                                          {"weight", none()},
                                          {"bias", none()},
                                          {"N", i64(2)},
                                          {"C", i64(6)},
                                          {"HxW", i64(8)},
                                          {"group", i64(3)},
                                          {"eps", 1e-5}})
            .find("HxW 8 is not the product") != std::string::npos);
}

TEST_CASE("grid_sampler_2d and linalg_det") {
  OpTester t;
  auto x = t.in(f32, {2, 3, 5, 6});
  auto grid = t.in(f32, {2, 4, 7, 2});
  CHECK(t.one(OpKind::GridSampler2d, {{"input", x},
                                      {"grid", grid},
                                      {"interpolation_mode", i64(2)},
                                      {"padding_mode", i64(1)},
                                      {"align_corners", true}}) == T(f32, {2, 3, 4, 7}));
  CHECK(t.error(OpKind::GridSampler2d, {{"input", x},
                                        {"grid", t.in(f32, {2, 4, 7, 3})},
                                        {"interpolation_mode", i64(0)},
                                        {"padding_mode", i64(0)},
                                        {"align_corners", false}})
            .find("expected a grid of [2, H_out, W_out, 2]") != std::string::npos);
  CHECK(t.error(OpKind::GridSampler2d, {{"input", x},
                                        {"grid", grid},
                                        {"interpolation_mode", i64(3)},
                                        {"padding_mode", i64(0)},
                                        {"align_corners", false}})
            .find("expected 0 (bilinear), 1 (nearest) or 2 (bicubic), got 3") != std::string::npos);
  CHECK(t.one(OpKind::LinalgDet, {{"A", t.in(f32, {2, 3, 3})}}) == T(f32, {2}));
  CHECK(t.one(OpKind::LinalgDet, {{"A", t.in(f32, {4, 4})}}) == T(f32, {}));
  CHECK(t.error(OpKind::LinalgDet, {{"A", t.in(f32, {3, 4})}}).find("expected square matrices") !=
        std::string::npos);
}

TEST_CASE("nonzero infers its upper bound, marked as decided by the data") {
  OpTester t;
  CHECK(t.one(OpKind::Nonzero, {{"self", t.in(f32, {2, 3})}}) == TensorType{i64t, {6, 2}, true});
  CHECK(t.one(OpKind::Nonzero, {{"self", t.in(f32, {})}}) == TensorType{i64t, {1, 0}, true});
  CHECK(t.one(OpKind::Nonzero, {{"self", t.in(DType::kBool, {4, 0, 2})}}) ==
        TensorType{i64t, {0, 3}, true});
}

TEST_CASE("ONNX's data-dependent ops infer their upper bounds") {
  OpTester t;
  CHECK(t.one(OpKind::OnnxNonZero, {{"self", t.in(f32, {2, 3})}}) ==
        TensorType{i64t, {2, 6}, true});
  CHECK(t.error(OpKind::OnnxNonZero, {{"self", t.in(f32, {})}}).find("rank 1 or more") !=
        std::string::npos);
  auto boxes = t.in(f32, {2, 6, 4});
  CHECK(t.one(OpKind::OnnxNonMaxSuppression, {{"boxes", boxes},
                                              {"scores", t.in(f32, {2, 3, 6})},
                                              {"max_output_boxes_per_class", i64(4)},
                                              {"iou_threshold", 0.5},
                                              {"score_threshold", none()},
                                              {"center_point_box", false}}) == T(i64t, {24, 3}));
  CHECK(t.error(OpKind::OnnxNonMaxSuppression, {{"boxes", boxes},
                                                {"scores", t.in(f32, {2, 3, 5})},
                                                {"max_output_boxes_per_class", i64(4)},
                                                {"iou_threshold", 0.5},
                                                {"score_threshold", none()},
                                                {"center_point_box", false}})
            .find("expected boxes [B, S, 4] and scores [B, C, S]") != std::string::npos);
  Result<std::vector<TensorType>> u = t.infer(
      OpKind::OnnxUnique, {{"self", t.in(f32, {2, 4, 2})}, {"axis", i64(1)}, {"sorted", true}});
  REQUIRE(u.ok());
  CHECK(*u == std::vector<TensorType>{T(f32, {2, 4, 2}), T(i64t, {4}), T(i64t, {4}), T(i64t, {4})});
  u = t.infer(OpKind::OnnxUnique,
              {{"self", t.in(f32, {2, 4})}, {"axis", none()}, {"sorted", false}});
  REQUIRE(u.ok());
  CHECK(*u == std::vector<TensorType>{T(f32, {8}), T(i64t, {8}), T(i64t, {8}), T(i64t, {8})});
}

TEST_CASE("every op in the table is covered by this file") {
  // A new op in ops.def must get inference tests; these counts are the reminder.
  size_t aten = 0;
  for (const OpInfo& op : all_ops())
    aten += op.schema.ns == "aten";
  CHECK(aten == 140);
  CHECK(all_ops().size() == 148);
}

}  // namespace
}  // namespace etc
