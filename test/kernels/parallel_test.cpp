// Intra-op parallelism: parallel_for covers its range exactly once, nests serially inside a
// split region, and the
// kernels that split work across threads give bit-identical results with 1 and 3 threads
// (GEMM split by columns and by rows, banded and depthwise convolution, elementwise).
#include <atomic>
#include <cstring>
#include <mutex>
#include <set>

#include "kernels/kernel_test_util.h"
#include "runtime/kernels/parallel.h"

namespace etc::rt::test {
namespace {

using kernels::parallel_for;
using kernels::set_num_threads;

TEST_CASE("parallel_for covers the range once, in chunks, and nests serially") {
  const ThreadsScope threads(3);
  for (int64_t n : {1, 2, 7, 100, 1000}) {
    INFO("n = " << n);
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::mutex mu;
    std::set<std::pair<int64_t, int64_t>> chunks;
    std::vector<int> inner_counts;
    parallel_for(n, 10, [&](int64_t b, int64_t e) {
      {
        std::lock_guard<std::mutex> g(mu);
        chunks.insert({b, e});
      }
      for (int64_t i = b; i < e; ++i)
        ++hits[static_cast<size_t>(i)];
      // Inside a region that was split, a nested region runs on the calling thread as one
      // chunk (a region that did not split leaves nested ones free to split).
      std::atomic<int> inner{0};
      parallel_for(1000, 1, [&](int64_t, int64_t) { ++inner; });
      std::lock_guard<std::mutex> g(mu);
      inner_counts.push_back(inner.load());
    });
    if (chunks.size() > 1) {
      for (int c : inner_counts)
        CHECK(c == 1);
    } else {
      CHECK(inner_counts == std::vector<int>{3});
    }
    for (const auto& h : hits)
      CHECK(h.load() == 1);
    CHECK(chunks.size() == static_cast<size_t>(std::min<int64_t>(3, std::max<int64_t>(1, n / 10))));
  }
}

// Runs `make` (which builds a call and returns its out tensor) with 1 and with 3 threads and
// requires the same bytes.
void same_with_threads(const std::function<std::vector<uint8_t>()>& run) {
  std::vector<uint8_t> one, three;
  {
    const ThreadsScope t(1);
    one = run();
  }
  {
    const ThreadsScope t(3);
    three = run();
  }
  REQUIRE(one.size() == three.size());
  CHECK(std::memcmp(one.data(), three.data(), one.size()) == 0);
}

std::vector<uint8_t> bytes_of(const Value* v) {
  const auto* p = static_cast<const uint8_t*>(v->tensor.data);
  return std::vector<uint8_t>(p, p + v->tensor.nbytes());
}

// A convolution of constant weights (packed, or oneDNN's state) with a bias, called twice
// (the state made, then used), its arguments `channels_last` held as KernelContext says: the
// bytes of its out.
std::vector<uint8_t> packed_conv(const Sizes& xs, const Sizes& ws, int64_t stride, int64_t pad,
                                 int64_t groups, uint64_t channels_last, uint32_t seed) {
  Call c("aten::convolution.out");
  Value* x = c.random(DType::kFloat32, xs, seed);
  Value* w = c.random(DType::kFloat32, ws, seed + 1);
  Value* b = c.random(DType::kFloat32, {ws[0]}, seed + 2);
  c.keep_state(uint64_t{1} << 1);  // the weight is a constant
  c.set_channels_last(channels_last);
  const int64_t oh = (xs[2] + 2 * pad - ws[2]) / stride + 1;
  const int64_t ow = (xs[3] + 2 * pad - ws[3]) / stride + 1;
  Value* out = c.out(DType::kFloat32, {xs[0], ws[0], oh, ow});
  for (int call = 0; call < 2; ++call) {
    REQUIRE(c.run({x, w, b, c.ints({stride, stride}), c.ints({pad, pad}), c.ints({1, 1}),
                   c.b(false), c.ints({0, 0}), c.i(groups)},
                  {out})
                .ok());
  }
  return bytes_of(out);
}

TEST_CASE("GEMM, convolution and elementwise results do not depend on the thread count") {
  for (const Sizes& shape : {Sizes{97, 300, 211}, Sizes{500, 64, 40}}) {  // split by columns, rows
    INFO("mm " << shape[0] << "x" << shape[1] << "x" << shape[2]);
    same_with_threads([&] {
      Call c("aten::mm.out");
      Value* a = c.random(DType::kFloat32, {shape[0], shape[1]}, 1);
      Value* b = c.random(DType::kFloat32, {shape[1], shape[2]}, 2);
      Value* out = c.out(DType::kFloat32, {shape[0], shape[2]});
      REQUIRE(c.run({a, b}, {out}).ok());
      return bytes_of(out);
    });
  }
  struct ConvCase {
    Sizes x, w;
    int64_t groups;
  };
  for (const ConvCase& k : {ConvCase{{1, 16, 40, 50}, {24, 16, 3, 3}, 1},
                            ConvCase{{2, 32, 20, 20}, {32, 1, 5, 5}, 32}}) {
    INFO("conv groups=" << k.groups);
    same_with_threads([&] {
      Call c("aten::convolution.out");
      Value* x = c.random(DType::kFloat32, k.x, 3);
      Value* w = c.random(DType::kFloat32, k.w, 4);
      const int64_t pad = k.w[2] / 2;
      Value* out = c.out(DType::kFloat32, {k.x[0], k.w[0], k.x[2], k.x[3]});
      REQUIRE(c.run({x, w, c.none(), c.ints({1, 1}), c.ints({pad, pad}), c.ints({1, 1}), c.b(false),
                     c.ints({0, 0}), c.i(k.groups)},
                    {out})
                  .ok());
      return bytes_of(out);
    });
  }
  // Constant weights (packed): a stride-2 convolution reading its column matrix from stride
  // phases (split by columns across threads), and one of 7x7 outputs multiplying its
  // positions as rows against the transposed weights.
  struct PackedCase {
    Sizes x, w;
    int64_t stride;
  };
  // The same through oneDNN where the build has it (bands of output rows, and of output
  // channels for the 7x7 one, whose weights outweigh its input).
  for (const PackedCase& k : {PackedCase{{1, 24, 41, 39}, {40, 24, 3, 3}, 2},
                              PackedCase{{1, 96, 7, 7}, {200, 96, 3, 3}, 1},
                              PackedCase{{1, 64, 30, 30}, {48, 64, 3, 3}, 1}})
    for (bool onednn : {false, true}) {
      INFO("packed conv stride " << k.stride << (onednn ? ", oneDNN" : ", etc's kernels"));
      const OnednnScope scope(onednn);
      same_with_threads([&] { return packed_conv(k.x, k.w, k.stride, 1, 1, 0, 7); });
    }
#if ETC_WITH_ONEDNN
  // oneDNN in channels-last chains (input and out NHWC): one band at 1 thread, several at 3
  // (bands of rows for a 3x3 on 40x40, a 1x1 on 28x28 and a depthwise 3x3; of channels for a
  // 3x3 on 7x7 whose weights outweigh its input), the same bits.
  struct ChainCase {
    Sizes x, w;
    int64_t pad, groups;
  };
  for (const ChainCase& k : {ChainCase{{1, 32, 40, 40}, {48, 32, 3, 3}, 1, 1},
                             ChainCase{{1, 64, 28, 28}, {96, 64, 1, 1}, 0, 1},
                             ChainCase{{1, 64, 56, 56}, {64, 1, 3, 3}, 1, 64},
                             ChainCase{{1, 64, 7, 7}, {128, 64, 3, 3}, 1, 1}}) {
    INFO("channels-last oneDNN conv " << k.x[1] << " -> " << k.w[0] << " groups " << k.groups);
    const OnednnScope scope(true);
    same_with_threads(
        [&] { return packed_conv(k.x, k.w, 1, k.pad, k.groups, 1 | (uint64_t{1} << 9), 22); });
  }
#endif
  // A 1x1 convolution of 7x7 outputs (positions as rows, the copy-out split by channel
  // blocks), a depthwise one on 112x112 by stride 2 (channel blocks in bands of rows, the
  // bands split), and a first layer of 3 channels (its padded planes filled by rows).
  struct MoreConv {
    Sizes x, w;
    int64_t stride, pad, groups;
  };
  for (const MoreConv& k : {MoreConv{{1, 96, 7, 7}, {200, 96, 1, 1}, 1, 0, 1},
                            MoreConv{{1, 17, 112, 112}, {17, 1, 3, 3}, 2, 1, 17},
                            MoreConv{{1, 3, 96, 90}, {16, 3, 3, 3}, 2, 1, 1}}) {
    INFO("conv " << k.x[1] << " -> " << k.w[0] << " groups " << k.groups);
    same_with_threads([&] { return packed_conv(k.x, k.w, k.stride, k.pad, k.groups, 0, 11); });
  }
  // Broadcasting elementwise ops split along their outermost dim: a squeeze-excitation
  // scale (by channels) and a bias over two images.
  same_with_threads([&] {
    Call c("aten::mul.out");
    Value* s = c.random(DType::kFloat32, {1, 64, 1, 1}, 14);
    Value* x = c.random(DType::kFloat32, {1, 64, 17, 15}, 15);
    Value* out = c.out(DType::kFloat32, {1, 64, 17, 15});
    REQUIRE(c.run({s, x}, {out}).ok());
    return bytes_of(out);
  });
  same_with_threads([&] {
    Call c("aten::add.out");
    Value* x = c.random(DType::kFloat32, {2, 24, 384}, 16);
    Value* b = c.random(DType::kFloat32, {384}, 17);
    Value* out = c.out(DType::kFloat32, {2, 24, 384});
    REQUIRE(c.run({x, b, c.i(1)}, {out}).ok());
    return bytes_of(out);
  });
  // Rows of a layer norm and of a softmax across threads.
  same_with_threads([&] {
    Call c("aten::native_layer_norm.out");
    Value* x = c.random(DType::kFloat32, {3, 40, 384}, 18);
    Value* w = c.random(DType::kFloat32, {384}, 19);
    Value* b = c.random(DType::kFloat32, {384}, 20);
    Value* out = c.out(DType::kFloat32, {3, 40, 384});
    Value* mean = c.out(DType::kFloat32, {3, 40, 1});
    Value* rstd = c.out(DType::kFloat32, {3, 40, 1});
    REQUIRE(c.run({x, c.ints({384}), w, b, c.d(1e-5)}, {out, mean, rstd}).ok());
    std::vector<uint8_t> all = bytes_of(out), m = bytes_of(mean), r = bytes_of(rstd);
    all.insert(all.end(), m.begin(), m.end());
    all.insert(all.end(), r.begin(), r.end());
    return all;
  });
  same_with_threads([&] {
    Call c("aten::_softmax.out");
    Value* x = c.random(DType::kFloat32, {12, 24, 24}, 21);
    Value* out = c.out(DType::kFloat32, {12, 24, 24});
    REQUIRE(c.run({x, c.i(2), c.b(false)}, {out}).ok());
    return bytes_of(out);
  });
  same_with_threads([&] {
    Call c("aten::add.out");
    Value* a = c.random(DType::kFloat32, {300000}, 5);
    Value* b = c.random(DType::kFloat32, {300000}, 6);
    Value* out = c.out(DType::kFloat32, {300000});
    REQUIRE(c.run({a, b, c.i(1)}, {out}).ok());
    return bytes_of(out);
  });
}

}  // namespace
}  // namespace etc::rt::test
