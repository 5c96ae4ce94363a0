// Channels-last chains end to end (Method::plan_channels_last): tensors that only channels-last
// kernels read and write between convolutions stay channels-last, with the bits of the NCHW
// kernels at any thread count, and fall back to NCHW wherever anything else reads them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "format/pte_reader.h"
#include "runtime/fusion_test_util.h"
#include "runtime/kernels/parallel.h"

namespace etc {
namespace {

using namespace fusion_test;  // NOLINT(google-build-using-namespace): the tests' helpers

struct ChainRun {
  std::vector<float> y;
  size_t channels_last = 0;
};

// `nan_at`: input elements set to NaN.
ChainRun run_chain(const pte::File& f, bool onednn, int threads, size_t input_numel = 16 * 40 * 40,
                   const std::vector<size_t>& nan_at = {}) {
  const rt::test::OnednnScope scope(onednn);
  const rt::test::ThreadsScope thread_count(threads);
  auto runtime = std::move(rt::make_cpu_runtime()).value();
  Result<std::unique_ptr<rt::Method>> m = rt::Method::load(f, 0, runtime->env());
  INFO(m.status().to_string());
  REQUIRE(m.ok());
  std::vector<float> x(input_numel);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i) * 0.37f);
  for (size_t i : nan_at)
    x.at(i) = std::numeric_limits<float>::quiet_NaN();
  for (int call = 0; call < 2; ++call) {  // twice: the same state, the same bits
    REQUIRE((*m)->set_input(0, x.data(), x.size() * 4).ok());
    const Status st = (*m)->execute();
    INFO(st.to_string());
    REQUIRE(st.ok());
  }
  const rt::TensorView& y = (*m)->output(0);
  ChainRun out;
  out.y.assign(static_cast<const float*>(y.data), static_cast<const float*>(y.data) + y.numel());
  out.channels_last = (*m)->channels_last_convolutions();
  return out;
}

// Runs `f` on etc's own kernels (NCHW everywhere) and with oneDNN at 1 and at 3 threads:
// with oneDNN built in, `channels_last` steps run channels-last (none without it); the same
// bits at both thread counts; etc's own kernels within rounding; not all zero. Returns the
// run on etc's own kernels.
ChainRun check_chain(const pte::File& f, size_t channels_last, size_t input_numel = 16 * 40 * 40) {
  const ChainRun own = run_chain(f, false, 1, input_numel);
  CHECK(own.channels_last == 0);
  const ChainRun one = run_chain(f, true, 1, input_numel);
  const ChainRun three = run_chain(f, true, 3, input_numel);
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == channels_last);
#else
  (void)channels_last;
  CHECK(one.channels_last == 0);
#endif
  REQUIRE(one.y.size() == own.y.size());
  CHECK(std::memcmp(one.y.data(), three.y.data(), one.y.size() * 4) == 0);
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(one.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
  CHECK(*std::max_element(own.y.begin(), own.y.end()) > 0.1f);
  return own;
}

// Runs `f` on etc's own kernels at 1 thread and with oneDNN at 2, for a program only part of
// whose convolutions may chain: with oneDNN built in, `channels_last` steps run channels-last
// (none without it); the outputs within rounding of etc's own kernels.
void check_part_chained(const pte::File& f, size_t channels_last,
                        size_t input_numel = 16 * 40 * 40) {
  const ChainRun own = run_chain(f, false, 1, input_numel);
  const ChainRun chained = run_chain(f, true, 2, input_numel);
  CHECK(chained.channels_last == (ETC_WITH_ONEDNN ? channels_last : 0));
  REQUIRE(chained.y.size() == own.y.size());
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(chained.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("tensors only oneDNN convolutions read stay channels-last between them") {
  Graph g = inverted_residual(false);
  // c1, dw and pw write channels-last (the residual add joins pw to c1); dw, pw and t read it;
  // t writes channels-last too, for the mean over H and W, which reads either layout.
  check_chain(export_graph(g), 5);
}

TEST_CASE("a first layer of few input channels writes a chain's first tensor channels-last") {
  // x [1, 3, 128, 128] -> conv 3x3 stride 2 (3 -> 32) -> relu6 -> depthwise 3x3 -> relu ->
  // conv 1x1 (32 -> 32) -> mean. The first layer runs etc's direct loop and writes its out
  // (and relu6's) channels-last for the depthwise layer.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 3, 128, 128}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {32, 3, 3, 3}, 31), constant(g, "b1", {32}, 32),
                      2, 1, 1, spec({1, 32, 64, 64}));
  ValueId r1 = node(g, OpKind::Hardtanh, "r1",
                    {{"self", c1}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 32, 64, 64}));
  ValueId dw = conv_s(g, "dw", r1, constant(g, "w2", {32, 1, 3, 3}, 33),
                      constant(g, "b2", {32}, 34), 1, 1, 32, spec({1, 32, 64, 64}));
  ValueId r2 = node(g, OpKind::Relu, "r2", {{"self", dw}}, spec({1, 32, 64, 64}));
  ValueId pw = conv_s(g, "pw", r2, constant(g, "w3", {32, 32, 1, 1}, 35), std::monostate{}, 1, 0, 1,
                      spec({1, 32, 64, 64}));
  ValueId y = global_mean(g, pw, 32);
  g.set_outputs({y});
  // c1 writes channels-last, dw reads and writes, pw reads (and writes, for the mean).
  check_chain(export_graph(g), 4, 3 * 128 * 128);
}

TEST_CASE("small 1x1 layers stay in a chain on etc's own channels-last kernel") {
  // mnasnet0_5's first blocks, small: x [1, 3, 128, 128] -> conv 3x3 stride 2 (3 -> 16) ->
  // relu -> depthwise 3x3 (16) -> relu -> conv 1x1 (16 -> 8) -> conv 1x1 (8 -> 24) -> relu ->
  // depthwise 3x3 stride 2 (24) -> relu -> conv 1x1 (24 -> 16) -> mean. The 8 -> 24 layer
  // (fewer than 16 inputs) and the 24 -> 16 one (393 K multiply-adds) are too small for
  // oneDNN: etc's kernel runs them channels-last (kPointwiseNhwc), so the depthwise layers
  // of 16 and 24 channels between them run on oneDNN in the chain too. Every convolution
  // and the mean read or write channels-last.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 3, 128, 128}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {16, 3, 3, 3}, 61), constant(g, "b1", {16}, 62),
                      2, 1, 1, spec({1, 16, 64, 64}));
  ValueId r1 = node(g, OpKind::Relu, "r1", {{"self", c1}}, spec({1, 16, 64, 64}));
  ValueId dw1 = conv_s(g, "dw1", r1, constant(g, "w2", {16, 1, 3, 3}, 63),
                       constant(g, "b2", {16}, 64), 1, 1, 16, spec({1, 16, 64, 64}));
  ValueId r2 = node(g, OpKind::Relu, "r2", {{"self", dw1}}, spec({1, 16, 64, 64}));
  ValueId p1 = conv_s(g, "p1", r2, constant(g, "w3", {8, 16, 1, 1}, 65), constant(g, "b3", {8}, 66),
                      1, 0, 1, spec({1, 8, 64, 64}));
  ValueId p2 = conv_s(g, "p2", p1, constant(g, "w4", {24, 8, 1, 1}, 67),
                      constant(g, "b4", {24}, 68), 1, 0, 1, spec({1, 24, 64, 64}));
  ValueId r3 = node(g, OpKind::Relu, "r3", {{"self", p2}}, spec({1, 24, 64, 64}));
  ValueId dw2 = conv_s(g, "dw2", r3, constant(g, "w5", {24, 1, 3, 3}, 69),
                       constant(g, "b5", {24}, 70), 2, 1, 24, spec({1, 24, 32, 32}));
  ValueId r4 = node(g, OpKind::Relu, "r4", {{"self", dw2}}, spec({1, 24, 32, 32}));
  ValueId p3 = conv_s(g, "p3", r4, constant(g, "w6", {16, 24, 1, 1}, 71),
                      constant(g, "b6", {16}, 72), 1, 0, 1, spec({1, 16, 32, 32}));
  ValueId y = global_mean(g, p3, 16);
  g.set_outputs({y});
  check_chain(export_graph(g), 7, 3 * 128 * 128);
}

TEST_CASE("a max pooling between oneDNN convolutions runs channels-last with them") {
  Graph plain = stem(false), indices = stem(true);
  // c1 writes channels-last, the pooling reads and writes, c2 (whose residual add reads the
  // pooling's out) reads and writes, c3 reads and writes, the mean reads.
  const ChainRun own = check_chain(export_graph(plain), 5);
  // Indices a caller reads: the pooling computes them, NCHW, and so the convolutions around it
  // (c3, after the residual add, writes channels-last for the mean).
  const ChainRun read = run_chain(export_graph(indices), true, 1);
  CHECK(read.channels_last == (ETC_WITH_ONEDNN ? 2 : 0));
  for (size_t i = 0; i < own.y.size(); ++i)
    CHECK(read.y[i] == Approx(own.y[i]).epsilon(1e-4).margin(1e-5));
}

TEST_CASE("a tensor another kernel reads stays NCHW, with the convolutions tied to it") {
  Graph g = inverted_residual(true);
  // r1 is read by the neg: c1 and pw (whose residual add reads r1) stay NCHW; only dw's out
  // (read by pw alone) is channels-last: dw writes it, pw reads it. t (reading the add's NCHW
  // out) writes channels-last for the mean.
  check_part_chained(export_graph(g), 4);
}

TEST_CASE("a clamp after a oneDNN convolution is its post-op: NaN becomes the lower bound") {
  // x [1, 24, 24, 24] -> conv 3x3 (24 -> 64) -> relu6 -> conv 1x1 (64 -> 64) -> mean, with one
  // input pixel NaN. c1's outs around it are NaN. etc's own relu6 keeps NaN, and the 1x1
  // layer and the mean spread it to every channel; oneDNN's clip (its post-op on c1, whose out
  // is channels-last) makes it 0, as XNNPACK's clamps do, and every output stays finite.
  // (24 inputs: not whole vectors, so c1 runs on oneDNN, not on etc's Winograd.)
  Graph g;
  ValueId x = g.add_input("x", spec({1, 24, 24, 24}));
  ValueId c1 = conv_s(g, "c1", x, constant(g, "w1", {64, 24, 3, 3}, 51),
                      constant(g, "b1", {64}, 52), 1, 1, 1, spec({1, 64, 24, 24}));
  ValueId r1 = node(g, OpKind::Hardtanh, "r1",
                    {{"self", c1}, {"min_val", Scalar{0.0}}, {"max_val", Scalar{6.0}}},
                    spec({1, 64, 24, 24}));
  ValueId pw = conv_s(g, "pw", r1, constant(g, "w2", {64, 64, 1, 1}, 53),
                      constant(g, "b2", {64}, 54), 1, 0, 1, spec({1, 64, 24, 24}));
  g.set_outputs({global_mean(g, pw, 64)});
  const pte::File f = export_graph(g);
  const size_t numel = 24 * 24 * 24, nan_pixel = 5 * 24 + 7;  // channel 0, row 5, column 7
  // Finite inputs: the same values either way (within rounding), at any thread count.
  check_chain(f, 3, numel);
  const ChainRun own = run_chain(f, false, 1, numel, {nan_pixel});
  const ChainRun one = run_chain(f, true, 1, numel, {nan_pixel});
  const ChainRun three = run_chain(f, true, 3, numel, {nan_pixel});
  REQUIRE(own.y.size() == 64);
  CHECK(std::all_of(own.y.begin(), own.y.end(), [](float v) { return std::isnan(v); }));
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == 3);
  CHECK(std::all_of(one.y.begin(), one.y.end(), [](float v) { return std::isfinite(v); }));
  CHECK(std::memcmp(one.y.data(), three.y.data(), one.y.size() * 4) == 0);
#else
  CHECK(std::all_of(one.y.begin(), one.y.end(), [](float v) { return std::isnan(v); }));
  (void)three;
#endif
}

TEST_CASE("3x3 layers run etc's Winograd in a chain, with the NCHW kernel's bits") {
  // x [1, 16, 24, 24] -> conv 3x3 (16 -> 32) -> relu -> max pool 3x3 / 2 -> conv 3x3 (32 ->
  // 32) -> relu -> neg -> y: both layers on etc's Winograd in a chain, the first reading the
  // method's NCHW input, the last writing NCHW for the neg, the pooling channels-last between
  // them. On etc's NCHW kernels (oneDNN off) both run the NCHW Winograd (144 and 36 tiles):
  // the same bits, at 1 and 3 threads.
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 24, 24}));
  ValueId a = conv(g, "a", x, constant(g, "wa", {32, 16, 3, 3}, 71), constant(g, "ba", {32}, 72), 1,
                   1, spec({1, 32, 24, 24}));
  ValueId r = node(g, OpKind::Relu, "r", {{"self", a}}, spec({1, 32, 24, 24}));
  const ValueId p = max_pool_3x3_s2(g, r, {1, 32, 12, 12}).first;
  ValueId b = conv(g, "b", p, constant(g, "wb", {32, 32, 3, 3}, 73), constant(g, "bb", {32}, 74), 1,
                   1, spec({1, 32, 12, 12}));
  ValueId rb = node(g, OpKind::Relu, "rb", {{"self", b}}, spec({1, 32, 12, 12}));
  ValueId y = node(g, OpKind::Neg, "y", {{"self", rb}}, spec({1, 32, 12, 12}));
  g.set_outputs({y});
  const pte::File f = export_graph(g);
  const ChainRun own = run_chain(f, false, 1, 16 * 24 * 24);
  const ChainRun one = run_chain(f, true, 1, 16 * 24 * 24);
  const ChainRun three = run_chain(f, true, 3, 16 * 24 * 24);
#if ETC_WITH_ONEDNN
  CHECK(one.channels_last == 3);
#endif
  REQUIRE(one.y.size() == own.y.size());
  CHECK(std::memcmp(one.y.data(), own.y.data(), own.y.size() * 4) == 0);
  CHECK(std::memcmp(three.y.data(), own.y.data(), own.y.size() * 4) == 0);
  CHECK(*std::min_element(own.y.begin(), own.y.end()) < -0.1f);
}

// x -> conv a (16 -> 32) -> relu, x -> conv b (16 -> 24); cat([a, b], `dim`) -> conv c -> mean:
// squeezenet's fire module, small. `input_item`: x is cat's first item instead of a;
// `side_reader`: the cat's out is also read by a neg (a second output).
struct CatCase {
  int64_t dim = 1;
  bool input_item = false;
  bool side_reader = false;
};

Graph cat_block(const CatCase& c) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId a = conv_s(g, "a", x, constant(g, "wa", {32, 16, 3, 3}, 21), constant(g, "ba", {32}, 22),
                     1, 1, 1, spec({1, 32, 40, 40}));
  ValueId ra = node(g, OpKind::Relu, "ra", {{"self", a}}, spec({1, 32, 40, 40}));
  ValueId b = conv_s(g, "b", x, constant(g, "wb", {24, 16, 3, 3}, 23), constant(g, "bb", {24}, 24),
                     1, 1, 1, spec({1, 24, 40, 40}));
  const ValueId first = c.input_item ? x : ra;
  const int64_t first_c = c.input_item ? 16 : 32;
  std::vector<int64_t> joined{1, first_c + 24, 40, 40};
  if (c.dim == 2) {
    b = conv_s(g, "b2", b, constant(g, "wb2", {first_c, 24, 1, 1}, 26), std::monostate{}, 1, 0, 1,
               spec({1, first_c, 40, 40}));
    joined = {1, first_c, 80, 40};
  }
  ValueId cat = node(g, OpKind::Cat, "cat",
                     {{"tensors", std::vector<ValueId>{first, b}}, {"dim", c.dim}}, spec(joined));
  ValueId conv = conv_s(g, "c", cat, constant(g, "wc", {16, joined[1], 3, 3}, 25), std::monostate{},
                        1, 1, 1, spec({1, 16, joined[2], 40}));
  ValueId y = global_mean(g, conv, 16);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", cat}}, spec(joined))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a cat along the channels of channels-last tensors runs channels-last with them") {
  // a (with its relu), b and c write or read channels-last, the cat joins each position's
  // channels item by item: the chain goes on through it.
  Graph plain = cat_block(CatCase{}), minus3 = cat_block(CatCase{-3});
  const ChainRun own = check_chain(export_graph(plain), 5);
  // -3 names the same dimension.
  const ChainRun neg = check_chain(export_graph(minus3), 5);
  CHECK(std::memcmp(own.y.data(), neg.y.data(), own.y.size() * 4) == 0);
}

TEST_CASE("a cat stays NCHW, with its items, where anything but the chain reads or writes them") {
  // An item from outside every group (the method's input), a join along the rows, and a cat
  // another kernel reads: the cat and the convolutions whose outs it joins stay NCHW.
  // c (a oneDNN 3x3 layer reading the NCHW cat) writes channels-last for the mean; along the
  // rows, b writes channels-last for b2 too, which writes its out NCHW for the cat.
  const std::pair<CatCase, size_t> cases[] = {
      {CatCase{1, true, false}, 2}, {CatCase{2, false, false}, 4}, {CatCase{1, false, true}, 2}};
  for (const auto& [c, steps] : cases) {
    CAPTURE(c.dim, c.input_item, c.side_reader);
    Graph g = cat_block(c);
    check_part_chained(export_graph(g), steps);
  }
}

// x -> conv 3x3 (16 -> 48) -> silu -> a; squeeze-and-excitation: global mean of a (adaptive
// average pooling, or mean over H and W with `mean_dim`) -> conv 1x1 (48 -> 8) -> relu ->
// conv 1x1 (8 -> 48) -> sigmoid -> s; s * a (a * s with `scaled_first`) -> conv 1x1 (48 ->
// 48) -> b: efficientnet's block, small, `blocks` times (b the next block's c1 out), then a
// mean over H, W -> y. With `side_reader`, the first a is also read by a neg (a second
// output).
struct SeCase {
  bool mean_dim = false;
  bool scaled_first = false;
  bool side_reader = false;
  int blocks = 1;
  // Images: with more than one, each image's product takes its own scales ([N, 48, 1, 1]).
  int64_t batch = 1;
};

Graph se_block(const SeCase& c) {
  Graph g;
  ValueId x = g.add_input("x", spec({c.batch, 16, 40, 40}));
  ValueId b = conv_s(g, "c1", x, constant(g, "w1", {48, 16, 3, 3}, 61), constant(g, "b1", {48}, 62),
                     1, 1, 1, spec({c.batch, 48, 40, 40}));
  ValueId first_a;
  for (int k = 0; k < c.blocks; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(70 + 10 * k);
    ValueId a = node(g, OpKind::Silu, "a" + n, {{"self", b}}, spec({c.batch, 48, 40, 40}));
    if (k == 0) first_a = a;
    ValueId m = c.mean_dim
                    ? node(g, OpKind::MeanDim, "m" + n,
                           {{"self", a}, {"dim", std::vector<int64_t>{-1, -2}}, {"keepdim", true}},
                           spec({c.batch, 48, 1, 1}))
                    : node(g, OpKind::AdaptiveAvgPool2d, "m" + n,
                           {{"self", a}, {"output_size", std::vector<int64_t>{1, 1}}},
                           spec({c.batch, 48, 1, 1}));
    ValueId q = conv_s(g, "q" + n, m, constant(g, "wq" + n, {8, 48, 1, 1}, seed),
                       constant(g, "bq" + n, {8}, seed + 1), 1, 0, 1, spec({c.batch, 8, 1, 1}));
    ValueId qr = node(g, OpKind::Relu, "qr" + n, {{"self", q}}, spec({c.batch, 8, 1, 1}));
    ValueId e = conv_s(g, "e" + n, qr, constant(g, "we" + n, {48, 8, 1, 1}, seed + 2),
                       constant(g, "be" + n, {48}, seed + 3), 1, 0, 1, spec({c.batch, 48, 1, 1}));
    ValueId sc = node(g, OpKind::Sigmoid, "sc" + n, {{"self", e}}, spec({c.batch, 48, 1, 1}));
    ValueId scaled = c.scaled_first
                         ? node(g, OpKind::MulTensor, "mul" + n, {{"self", a}, {"other", sc}},
                                spec({c.batch, 48, 40, 40}))
                         : node(g, OpKind::MulTensor, "mul" + n, {{"self", sc}, {"other", a}},
                                spec({c.batch, 48, 40, 40}));
    b = conv_s(g, "p" + n, scaled, constant(g, "wp" + n, {48, 48, 1, 1}, seed + 4),
               std::monostate{}, 1, 0, 1, spec({c.batch, 48, 40, 40}));
  }
  ValueId y = global_mean(g, b, 48, c.batch);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", first_a}}, spec({c.batch, 48, 40, 40}))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a squeeze-and-excitation block runs channels-last between its convolutions") {
  // c1 writes channels-last (with its silu), the global mean reads it, the product by the
  // block's scales reads and writes it, p reads it (and writes it for the last mean): the
  // chain goes through the block.
  for (const SeCase& c : {SeCase{}, SeCase{true, false}, SeCase{false, true}}) {
    CAPTURE(c.mean_dim, c.scaled_first);
    Graph g = se_block(c);
    check_chain(export_graph(g), 5);
  }
  // Three blocks: the later blocks' scales (a sigmoid run as its convolution's epilogue) are
  // planned over the bytes of chain tensors dead by then, which the epilogue writes anew: the
  // chain holds (c1, then a mean, a product and a convolution per block, then the last mean).
  Graph three = se_block(SeCase{false, false, false, 3});
  check_chain(export_graph(three), 11);
  // Two images, the scales' first dim 2: each image's positions take that image's scales (the
  // product reading the first image's for both fails the comparison with etc's own kernels).
  Graph two_images = se_block(SeCase{false, false, false, 1, 2});
  check_chain(export_graph(two_images), 5, 2 * 16 * 40 * 40);
  // A tensor another kernel reads: c1 and the product stay NCHW (p reads the product, and
  // writes channels-last for the last mean).
  Graph side = se_block(SeCase{false, false, true});
  check_part_chained(export_graph(side), 2);
}

// Inference batch norm of x ([1, c, h, w]) with positive variances, then relu (densenet's
// pre-activation): the relu's out.
ValueId batch_norm_relu(Graph& g, const std::string& name, ValueId x, int64_t c,
                        std::vector<int64_t> sizes, uint32_t seed) {
  TensorSpec var = spec({c});
  std::string bytes(static_cast<size_t>(4 * c), '\0');
  for (int64_t k = 0; k < c; ++k) {
    const float f = 0.5f + 0.1f * static_cast<float>((seed * 7 + k * 3) % 10);
    std::memcpy(bytes.data() + 4 * k, &f, 4);
  }
  var.constant = ConstantData{make_blob(bytes), 0, bytes.size()};
  Result<std::vector<ArgValue>> bound =
      bind_args(OpKind::NativeBatchNormNoTraining,
                {{"input", x},
                 {"weight", constant(g, name + "_gamma", {c}, seed)},
                 {"bias", constant(g, name + "_beta", {c}, seed + 1)},
                 {"running_mean", constant(g, name + "_mean", {c}, seed + 2)},
                 {"running_var", g.add_constant(name + "_var", std::move(var))},
                 {"momentum", 0.1},
                 {"eps", 1e-5}});
  REQUIRE(bound.ok());
  NodeId bn = g.add_node(OpKind::NativeBatchNormNoTraining, name, std::move(bound).value(),
                         {name + "0", name + "1", name + "2"}, {spec(sizes), spec({0}), spec({0})});
  return node(g, OpKind::Relu, name + "_relu", {{"self", g.node(bn).outputs[0]}}, spec(sizes));
}

// densenet, small: x -> conv 3x3 (16 -> 32) -> f0; two dense layers, each cat(all f so far)
// -> batch norm -> relu -> conv 1x1 (-> 48) -> relu -> conv 3x3 (48 -> 16) -> f1, f2; a
// transition: cat(f0, f1, f2) -> batch norm -> relu -> conv 1x1 (64 -> 32) -> average pooling
// 2x2 -> conv 3x3 (32 -> 32) -> mean.
Graph dense_block() {
  Graph g;
  auto sized = [](int64_t c, int64_t h) { return std::vector<int64_t>{1, c, h, h}; };
  ValueId x = g.add_input("x", spec(sized(16, 40)));
  std::vector<ValueId> features{conv_s(g, "f0", x, constant(g, "w0", {32, 16, 3, 3}, 81),
                                       constant(g, "b0", {32}, 82), 1, 1, 1, spec(sized(32, 40)))};
  int64_t channels = 32;
  for (int k = 1; k <= 2; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(90 + 10 * k);
    ValueId joined = node(g, OpKind::Cat, "cat" + n, {{"tensors", features}, {"dim", int64_t{1}}},
                          spec(sized(channels, 40)));
    ValueId r = batch_norm_relu(g, "bn" + n, joined, channels, sized(channels, 40), seed);
    ValueId b = conv_s(g, "pw" + n, r, constant(g, "wp" + n, {48, channels, 1, 1}, seed + 5),
                       constant(g, "bp" + n, {48}, seed + 6), 1, 0, 1, spec(sized(48, 40)));
    ValueId br = node(g, OpKind::Relu, "pr" + n, {{"self", b}}, spec(sized(48, 40)));
    features.push_back(conv_s(g, "f" + n, br, constant(g, "wf" + n, {16, 48, 3, 3}, seed + 7),
                              std::monostate{}, 1, 1, 1, spec(sized(16, 40))));
    channels += 16;
  }
  ValueId joined = node(g, OpKind::Cat, "cat_t", {{"tensors", features}, {"dim", int64_t{1}}},
                        spec(sized(channels, 40)));
  ValueId r = batch_norm_relu(g, "bn_t", joined, channels, sized(channels, 40), 131);
  ValueId t = conv_s(g, "t", r, constant(g, "wt", {32, channels, 1, 1}, 136), std::monostate{}, 1,
                     0, 1, spec(sized(32, 40)));
  ValueId pooled = node(g, OpKind::AvgPool2d, "avg",
                        {{"self", t},
                         {"kernel_size", std::vector<int64_t>{2, 2}},
                         {"stride", std::vector<int64_t>{2, 2}}},
                        spec(sized(32, 20)));
  ValueId c = conv_s(g, "c", pooled, constant(g, "wc", {32, 32, 3, 3}, 137),
                     constant(g, "bc", {32}, 138), 1, 1, 1, spec(sized(32, 20)));
  g.set_outputs({global_mean(g, c, 32)});
  return g;
}

TEST_CASE("a dense block's batch norms, cats and average pooling run channels-last") {
  // Every step: f0, per layer its cat, batch norm (with its relu), 1x1 and 3x3 convolutions;
  // the transition's cat, batch norm, 1x1 convolution, pooling and 3x3 convolution; the mean.
  // f0 is an item of all three cats.
  Graph g = dense_block();
  check_chain(export_graph(g), 1 + 2 * 4 + 5 + 1);
}

// convnext, small: x -> conv 3x3 (16 -> 32) -> r0; `blocks` blocks, each r -> depthwise 7x7
// -> permute to [N, H, W, C] -> view [1600, 32] -> mm by [32, 32] (mixes the channels of each
// position) -> view [1, 40, 40, 32] -> permute back -> times a layer scale (`scale` sizes,
// [32, 1, 1] or [1, 32, 1, 1]) -> + r -> the next r; then a mean over H, W -> y. With
// `side_reader`, the first block's permute back is also read by a neg (a second output).
struct NextCase {
  std::vector<int64_t> scale{32, 1, 1};
  bool side_reader = false;
  int blocks = 2;
};

Graph next_block(const NextCase& c) {
  Graph g;
  const std::vector<int64_t> nchw{1, 32, 40, 40}, nhwc{1, 40, 40, 32};
  ValueId x = g.add_input("x", spec({1, 16, 40, 40}));
  ValueId r = conv_s(g, "stem", x, constant(g, "ws", {32, 16, 3, 3}, 151),
                     constant(g, "bs", {32}, 152), 1, 1, 1, spec(nchw));
  ValueId first_back;
  for (int k = 0; k < c.blocks; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(160 + 10 * k);
    ValueId d = conv_s(g, "dw" + n, r, constant(g, "wd" + n, {32, 1, 7, 7}, seed),
                       constant(g, "bd" + n, {32}, seed + 1), 1, 3, 32, spec(nchw));
    ValueId p = node(g, OpKind::Permute, "to" + n,
                     {{"self", d}, {"dims", std::vector<int64_t>{0, 2, 3, 1}}}, spec(nhwc));
    ValueId v = node(g, OpKind::View, "v" + n,
                     {{"self", p}, {"size", std::vector<int64_t>{1600, 32}}}, spec({1600, 32}));
    ValueId m =
        node(g, OpKind::Mm, "mm" + n,
             {{"self", v}, {"mat2", constant(g, "wm" + n, {32, 32}, seed + 2)}}, spec({1600, 32}));
    ValueId u = node(g, OpKind::View, "u" + n, {{"self", m}, {"size", nhwc}}, spec(nhwc));
    ValueId back = node(g, OpKind::Permute, "back" + n,
                        {{"self", u}, {"dims", std::vector<int64_t>{0, 3, 1, 2}}}, spec(nchw));
    if (k == 0) first_back = back;
    ValueId scaled =
        node(g, OpKind::MulTensor, "ls" + n,
             {{"self", constant(g, "gamma" + n, c.scale, seed + 3)}, {"other", back}}, spec(nchw));
    r = node(g, OpKind::AddTensor, "res" + n, {{"self", scaled}, {"other", r}}, spec(nchw));
  }
  ValueId y = global_mean(g, r, 32);
  if (c.side_reader) {
    g.set_outputs({y, node(g, OpKind::Neg, "n", {{"self", first_back}}, spec(nchw))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a convnext block runs channels-last from one depthwise layer to the next") {
  // The stem, and per block the depthwise layer, both permutes (the first reads the chain
  // tensor's bytes as [N, H, W, C]; the second writes a chain tensor with the bytes of its
  // input), the layer scale and the residual sum; then the mean. The mm mixes each position's
  // channels, so a permute that moved the wrong bytes would change the outputs.
  for (const NextCase& c : {NextCase{}, NextCase{{1, 32, 1, 1}}}) {
    CAPTURE(c.scale);
    Graph g = next_block(c);
    check_chain(export_graph(g), 1 + 2 * 5 + 1);
  }
  // The first permute back is read by another kernel too: it stays NCHW, and with it its
  // layer scale, the sums (the residual stream is one layout), the stem and the mean. Each
  // depthwise layer still writes channels-last for its permute to [N, H, W, C].
  Graph side = next_block(NextCase{{32, 1, 1}, true});
  check_part_chained(export_graph(side), 2 * 2);
}

// x [1, 16, 20, 20] -> conv 3x3 (16 -> 32) -> relu -> a; per unit (ShuffleNet V2's, small):
// a's channels split in two halves (slices), the second through conv 1x1 -> relu ->
// depthwise 3x3 -> conv 1x1 -> relu, joined to the first (cat), viewed [1, 2, 16, 20, 20],
// dims 1 and 2 transposed (`negative_dims`: -3 and -4, the slices' dim -3) and viewed
// [1, 32, 20, 20]: the channel shuffle, the next unit's a (`groups` 4: viewed [1, 4, 8, 20,
// 20]). Then conv 3x3 -> mean -> y. With `side_reader`, the first unit's shuffled a is also
// read by a neg (a second output).
struct ShuffleCase {
  bool negative_dims = false;
  bool side_reader = false;
  int64_t groups = 2;
};

Graph shuffle_units(const ShuffleCase& c) {
  Graph g;
  ValueId x = g.add_input("x", spec({1, 16, 20, 20}));
  ValueId a = conv_s(g, "c0", x, constant(g, "w0", {32, 16, 3, 3}, 91), constant(g, "b0", {32}, 92),
                     1, 1, 1, spec({1, 32, 20, 20}));
  a = node(g, OpKind::Relu, "r0", {{"self", a}}, spec({1, 32, 20, 20}));
  ValueId first_shuffled;
  const int64_t dim = c.negative_dims ? -3 : 1;
  for (int k = 0; k < 2; ++k) {
    const std::string n = std::to_string(k);
    const auto seed = static_cast<uint32_t>(100 + 10 * k);
    auto half = [&](const std::string& name, int64_t start) {
      return node(g, OpKind::SliceTensor, name + n,
                  {{"self", a}, {"dim", dim}, {"start", start}, {"end", start + 16}},
                  spec({1, 16, 20, 20}));
    };
    ValueId s1 = half("s1_", 0), s2 = half("s2_", 16);
    ValueId p1 = conv_s(g, "p1_" + n, s2, constant(g, "wp1_" + n, {16, 16, 1, 1}, seed),
                        constant(g, "bp1_" + n, {16}, seed + 1), 1, 0, 1, spec({1, 16, 20, 20}));
    p1 = node(g, OpKind::Relu, "rp1_" + n, {{"self", p1}}, spec({1, 16, 20, 20}));
    ValueId d = conv_s(g, "d" + n, p1, constant(g, "wd" + n, {16, 1, 3, 3}, seed + 2),
                       constant(g, "bd" + n, {16}, seed + 3), 1, 1, 16, spec({1, 16, 20, 20}));
    ValueId p2 = conv_s(g, "p2_" + n, d, constant(g, "wp2_" + n, {16, 16, 1, 1}, seed + 4),
                        constant(g, "bp2_" + n, {16}, seed + 5), 1, 0, 1, spec({1, 16, 20, 20}));
    p2 = node(g, OpKind::Relu, "rp2_" + n, {{"self", p2}}, spec({1, 16, 20, 20}));
    ValueId joined = node(g, OpKind::Cat, "cat" + n,
                          {{"tensors", std::vector<ValueId>{s1, p2}}, {"dim", int64_t{1}}},
                          spec({1, 32, 20, 20}));
    const std::vector<int64_t> grouped{1, c.groups, 32 / c.groups, 20, 20};
    ValueId v5 =
        node(g, OpKind::View, "v5_" + n, {{"self", joined}, {"size", grouped}}, spec(grouped));
    ValueId t = node(g, OpKind::TransposeInt, "t" + n,
                     {{"self", v5},
                      {"dim0", c.negative_dims ? int64_t{-3} : int64_t{1}},
                      {"dim1", c.negative_dims ? int64_t{-4} : int64_t{2}}},
                     spec({1, 32 / c.groups, c.groups, 20, 20}));
    a = node(g, OpKind::View, "v4_" + n,
             {{"self", t}, {"size", std::vector<int64_t>{1, 32, 20, 20}}}, spec({1, 32, 20, 20}));
    if (k == 0) first_shuffled = a;
  }
  ValueId last = conv_s(g, "c9", a, constant(g, "w9", {16, 32, 3, 3}, 93), std::monostate{}, 1, 1,
                        1, spec({1, 16, 20, 20}));
  ValueId y = global_mean(g, last, 16);
  if (c.side_reader) {
    g.set_outputs(
        {y, node(g, OpKind::Neg, "n", {{"self", first_shuffled}}, spec({1, 32, 20, 20}))});
  } else {
    g.set_outputs({y});
  }
  return g;
}

TEST_CASE("a channel shuffle and the splits after it run channels-last between convolutions") {
  // The first layer, per unit both slices, the three convolutions (the relus in their
  // epilogues), the cat and the transpose of the cat's 5-d view, the last layer and the mean:
  // the chain goes on through the views. A transpose or a slice that moved the wrong
  // channels would change the outputs (the 1x1 layers mix each position's channels).
  for (const ShuffleCase& c : {ShuffleCase{}, ShuffleCase{true}, ShuffleCase{false, false, 4}}) {
    CAPTURE(c.negative_dims, c.groups);
    Graph g = shuffle_units(c);
    check_chain(export_graph(g), 1 + 2 * 7 + 2, 16 * 20 * 20);
  }
  // The first unit's shuffled tensor is read by another kernel (through its 4-d view): that
  // transpose stays NCHW, and with it everything tied to it: its cat, the cat's items, the
  // slices and their input, the 1x1 layers on etc's own kernel (which read their input in
  // their out's layout) and the depthwise layers between them, the second unit's slices
  // (which read the shuffled tensor) and so the second unit too. The last layer reads the
  // NCHW tensor and writes channels-last for the mean.
  Graph side = shuffle_units(ShuffleCase{false, true});
  check_part_chained(export_graph(side), 2, 16 * 20 * 20);
}

}  // namespace
}  // namespace etc
