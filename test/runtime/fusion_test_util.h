// Helpers of the load planner's end-to-end tests (fusion_test.cpp, channels_last_test.cpp,
// weight_only_fusion_test.cpp): graphs built op by op, exported, run fused and unfused, and
// the profile's rows.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "runtime/export_graph.h"
#include "runtime/method.h"
#include "runtime/runtime_env.h"
#include "support/half.h"

namespace etc::fusion_test {

inline TensorSpec spec(std::vector<int64_t> sizes) {
  return TensorSpec::make(DType::kFloat32, std::move(sizes));
}

inline ValueId constant(Graph& g, const std::string& name, std::vector<int64_t> sizes,
                        uint32_t seed) {
  TensorSpec s = spec(std::move(sizes));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::string bytes(static_cast<size_t>(s.nbytes()), '\0');
  for (size_t i = 0; i < bytes.size(); i += 4) {
    const float v = d(rng);
    std::memcpy(bytes.data() + i, &v, 4);
  }
  s.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
  return g.add_constant(name, std::move(s));
}

inline ValueId node(Graph& g, OpKind op, const std::string& name,
                    std::initializer_list<std::pair<std::string_view, ArgValue>> args,
                    TensorSpec out) {
  return testing::add_op(g, op, name, args, std::move(out));
}

inline pte::File export_graph(Graph& g) {
  return testing::export_graph(g, "fusion.pte");
}

struct Run {
  std::vector<float> y;
  rt::Method::Profile profile;
};

// The graph's output bytes for an input x[i] = 2 sin(i) of dtype dt.
inline std::vector<uint8_t> run_as(const pte::File& f, bool fuse, DType dt, size_t input_numel,
                                   rt::Method::Profile* profile) {
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  rt::RuntimeEnv env = runtime->env();
  env.fuse_epilogues = fuse;
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, env);
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  std::string x;
  for (size_t i = 0; i < input_numel; ++i) {
    const float v = std::sin(static_cast<float>(i)) * 2;
    if (dt == DType::kFloat32) {
      x.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t bits = dt == DType::kBFloat16 ? float_to_bfloat16(v) : float_to_half(v);
      x.append(reinterpret_cast<const char*>(&bits), 2);
    }
  }
  REQUIRE((*m)->set_input(0, x.data(), x.size()).ok());
  (*m)->set_profile(profile);
  REQUIRE((*m)->execute().ok());
  const rt::TensorView& y = (*m)->output(0);
  const auto* bytes = static_cast<const uint8_t*>(y.data);
  return std::vector<uint8_t>(bytes, bytes + y.nbytes());
}

// The float32 graph's output for x[i] = 2 sin(i).
inline Run run(const pte::File& f, bool fuse, size_t input_numel = 3 * 9 * 7) {
  Run out;
  const std::vector<uint8_t> y = run_as(f, fuse, DType::kFloat32, input_numel, &out.profile);
  out.y.resize(y.size() / 4);
  std::memcpy(out.y.data(), y.data(), y.size());
  return out;
}

inline std::vector<std::string> rows(const rt::Method::Profile& p) {
  std::vector<std::string> names;
  for (const auto& [name, t] : p)
    names.push_back(name);
  return names;
}

// An int8 constant of values in [lo, hi].
inline ValueId int8_constant(Graph& g, const std::string& name, std::vector<int64_t> sizes, int lo,
                             int hi, uint32_t seed) {
  TensorSpec s = TensorSpec::make(DType::kInt8, std::move(sizes));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::string bytes(static_cast<size_t>(s.nbytes()), '\0');
  for (char& c : bytes)
    c = static_cast<char>(d(rng));
  s.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
  return g.add_constant(name, std::move(s));
}

// A constant of dtype dt (float32, bf16 or fp16) whose element i is value(i) rounded to it.
inline ValueId constant_of(Graph& g, const std::string& name, DType dt, std::vector<int64_t> sizes,
                           const std::function<float(int64_t)>& value) {
  TensorSpec s = TensorSpec::make(dt, std::move(sizes));
  std::string bytes;
  for (int64_t i = 0; i < s.numel(); ++i) {
    const float v = value(i);
    if (dt == DType::kFloat32) {
      bytes.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t bits = dt == DType::kBFloat16 ? float_to_bfloat16(v) : float_to_half(v);
      bytes.append(reinterpret_cast<const char*>(&bits), 2);
    }
  }
  s.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
  return g.add_constant(name, std::move(s));
}

// torchao's int4 weight-only layer as its program computes it: x [4, K] @ dequantize(w)^T,
// w int8 [N, K / 32, 32] (groups of 32 inputs) with a zero point and a scale per group:
// _to_copy, sub, mul, a view to [N, K], permute, mm. With `int8_zero`, the zero point is int8
// too, widened by its own _to_copy (as torchao's programs hold it when it is too large for
// the export to fold: more than 4096 values). With `reread`, the dequantized weight is also
// an output.
struct Int4Linear {
  int64_t n = 128, k = 256;
  bool int8_zero = false, reread = false;
};
inline Graph int4_linear(const Int4Linear& c) {
  const int64_t groups = c.k / 32;
  Graph g;
  ValueId x = g.add_input("x", spec({4, c.k}));
  ValueId q = int8_constant(g, "q", {c.n, groups, 32}, -8, 7, 61);
  ValueId w = node(g, OpKind::ToCopy, "w", {{"self", q}, {"dtype", DType::kFloat32}},
                   spec({c.n, groups, 32}));
  ValueId zp = c.int8_zero ? node(g, OpKind::ToCopy, "zpw",
                                  {{"self", int8_constant(g, "zp", {c.n, groups, 1}, -8, 7, 64)},
                                   {"dtype", DType::kFloat32}},
                                  spec({c.n, groups, 1}))
                           : constant(g, "zp", {c.n, groups, 1}, 62);
  ValueId z =
      node(g, OpKind::SubTensor, "z", {{"self", w}, {"other", zp}}, spec({c.n, groups, 32}));
  ValueId d = node(g, OpKind::MulTensor, "d",
                   {{"self", z}, {"other", constant(g, "scale", {c.n, groups, 1}, 63)}},
                   spec({c.n, groups, 32}));
  ValueId v = node(g, OpKind::View, "v", {{"self", d}, {"size", std::vector<int64_t>{c.n, c.k}}},
                   spec({c.n, c.k}));
  ValueId t = node(g, OpKind::Permute, "t", {{"self", v}, {"dims", std::vector<int64_t>{1, 0}}},
                   spec({c.k, c.n}));
  ValueId y = node(g, OpKind::Mm, "y", {{"self", x}, {"mat2", t}}, spec({4, c.n}));
  g.set_outputs(c.reread ? std::vector<ValueId>{y, t} : std::vector<ValueId>{y});
  return g;
}

// A convolution node (2-d, square stride and padding, no dilation).
inline ValueId conv_s(Graph& g, const std::string& name, ValueId x, ValueId w, ArgValue b,
                      int64_t stride, int64_t pad, int64_t groups, TensorSpec out) {
  return node(g, OpKind::Convolution, name,
              {{"input", x},
               {"weight", w},
               {"bias", b},
               {"stride", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad}},
               {"dilation", std::vector<int64_t>{1, 1}},
               {"transposed", false},
               {"output_padding", std::vector<int64_t>{0, 0}},
               {"groups", groups}},
              std::move(out));
}

inline ValueId conv(Graph& g, const std::string& name, ValueId x, ValueId w, ArgValue b,
                    int64_t pad, int64_t groups, TensorSpec out) {
  return conv_s(g, name, x, w, std::move(b), 1, pad, groups, std::move(out));
}

// max_pool2d_with_indices(x, 3x3, stride 2, padding 1) into `out` sizes: (values, indices).
inline std::pair<ValueId, ValueId> max_pool_3x3_s2(Graph& g, ValueId x, std::vector<int64_t> out,
                                                   const std::string& name = "p") {
  Result<std::vector<ArgValue>> bound =
      bind_args(OpKind::MaxPool2dWithIndices, {{"self", x},
                                               {"kernel_size", std::vector<int64_t>{3, 3}},
                                               {"stride", std::vector<int64_t>{2, 2}},
                                               {"padding", std::vector<int64_t>{1, 1}}});
  REQUIRE(bound.ok());
  const bool first = name == "p";  // the values of the single pooling are "v" and "i"
  NodeId p = g.add_node(OpKind::MaxPool2dWithIndices, name, std::move(bound).value(),
                        {first ? "v" : name + "_v", first ? "i" : name + "_i"},
                        {spec(out), TensorSpec::make(DType::kInt64, out)});
  return {g.node(p).outputs[0], g.node(p).outputs[1]};
}

// mean over H and W of x [batch, channels, H, W], kept 4-d: "y".
inline ValueId global_mean(Graph& g, ValueId x, int64_t channels, int64_t batch = 1) {
  return node(g, OpKind::MeanDim, "y",
              {{"self", x}, {"dim", std::vector<int64_t>{2, 3}}, {"keepdim", true}},
              spec({batch, channels, 1, 1}));
}

// x -> conv 3x3 (16 -> 48) -> relu -> r1 -> depthwise 3x3 -> relu6 -> r2 -> conv 1x1 -> + r1
// -> s -> conv 3x3 stride 2 (48 -> 16) -> t -> mean over H, W -> y. With `side_reader`, r1 is
// also read by a neg (a second output), which is not a convolution.
inline Graph inverted_residual(bool side_reader) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {48, 16, 3, 3}, 11),
                      constant(g, "b1", {48}, 12), 1, 1, 1, spec({1, 48, 40, 40}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 48, 40, 40}));
  ValueId dw = conv_s(g, "dw", r1, constant(g, "w2", {48, 1, 3, 3}, 13),
                      constant(g, "b2", {48}, 14), 1, 1, 48, spec({1, 48, 40, 40}));
  ValueId r2 = node(g, OpKind::Hardtanh, "r2",
                    {{"self", dw}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 48, 40, 40}));
  ValueId pw = conv_s(g, "pw", r2, constant(g, "w3", {48, 48, 1, 1}, 15), std::monostate{}, 1, 0, 1,
                      spec({1, 48, 40, 40}));
  ValueId s = node(g, OpKind::AddTensor, "s", {{"self", pw}, {"other", r1}}, spec({1, 48, 40, 40}));
  ValueId t = conv_s(g, "t", s, constant(g, "w4", {16, 48, 3, 3}, 16), constant(g, "b4", {16}, 17),
                     2, 1, 1, spec({1, 16, 20, 20}));
  ValueId y = global_mean(g, t, 16);
  if (side_reader) {
    ValueId n = node(g, OpKind::Neg, "n", {{"self", r1}}, spec({1, 48, 40, 40}));
    g.set_outputs({y, n});
  } else {
    g.set_outputs({y});
  }
  return g;
}

// x [1, 16, 40, 40] -> conv 3x3 (16 -> 32) -> relu -> max pool 3x3 stride 2 -> p -> conv 3x3
// (32 -> 32) -> + p -> conv 3x3 -> mean (resnet18's stem and first block, small). With
// `indices_read`, the pooling's indices are a graph output.
inline Graph stem(bool indices_read) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {32, 16, 3, 3}, 41),
                      constant(g, "b1", {32}, 42), 1, 1, 1, spec({1, 32, 40, 40}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 32, 40, 40}));
  const auto [v, indices] = max_pool_3x3_s2(g, r1, {1, 32, 20, 20});
  ValueId c2 = conv_s(g, "c2", v, constant(g, "w2", {32, 32, 3, 3}, 43),
                      constant(g, "b2", {32}, 44), 1, 1, 1, spec({1, 32, 20, 20}));
  ValueId s = node(g, OpKind::AddTensor, "s", {{"self", c2}, {"other", v}}, spec({1, 32, 20, 20}));
  ValueId c3 = conv_s(g, "c3", s, constant(g, "w3", {32, 32, 3, 3}, 45),
                      constant(g, "b3", {32}, 46), 1, 1, 1, spec({1, 32, 20, 20}));
  ValueId y = global_mean(g, c3, 32);
  g.set_outputs(indices_read ? std::vector<ValueId>{y, indices} : std::vector<ValueId>{y});
  return g;
}

}  // namespace etc::fusion_test
