// rand.out, randn.out and randperm.out (runtime/kernels/random.cpp): what PyTorch promises of
// them (the range, the distribution's moments, a permutation), numbers that differ from call
// to call, and generators that differ between instructions.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

TEST_CASE("rand.out: uniform from 0 to 1 (excluded) in every float dtype, new numbers each call") {
  for (DType dt : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    INFO(dtype_name(dt));
    Call c("aten::rand.out");
    c.keep_state(0);
    Value* out = c.out(dt, {100, 100});
    REQUIRE(c.run({c.ints({100, 100})}, {out}).ok());
    std::vector<double> first = read(out);
    REQUIRE(*std::min_element(first.begin(), first.end()) >= 0.0);
    REQUIRE(*std::max_element(first.begin(), first.end()) < 1.0);
    const double mean = std::accumulate(first.begin(), first.end(), 0.0) / 10000;
    CHECK(std::abs(mean - 0.5) < 0.02);  // sd of the mean ~0.003
    REQUIRE(c.run({c.ints({100, 100})}, {out}).ok());
    CHECK(read(out) != first);
  }
  // An out of another dtype or shape is refused.
  Call bad("aten::rand.out");
  CHECK_FALSE(bad.run({bad.ints({2, 3})}, {bad.out(DType::kInt64, {2, 3})}).ok());
  Call wrong("aten::rand.out");
  CHECK_FALSE(wrong.run({wrong.ints({2, 3})}, {wrong.out(DType::kFloat32, {3, 2})}).ok());
}

TEST_CASE("randn.out: finite, mean 0 and variance 1, odd sizes filled to the end") {
  Call c("aten::randn.out");
  c.keep_state(0);
  Value* out = c.out(DType::kFloat32, {20001});
  REQUIRE(c.run({c.ints({20001})}, {out}).ok());
  std::vector<double> v = read(out);
  REQUIRE(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); }));
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v)
    var += (x - mean) * (x - mean);
  var /= static_cast<double>(v.size());
  CHECK(std::abs(mean) < 0.03);       // sd of the mean ~0.007
  CHECK(std::abs(var - 1.0) < 0.05);  // sd of the variance ~0.01
  CHECK(v.back() != 0.0);             // the odd last element is drawn too
}

TEST_CASE("randperm.out: a permutation of 0..n-1 in int64 and int32, including n = 0 and 1") {
  for (DType dt : {DType::kInt64, DType::kInt32, DType::kFloat32}) {
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      INFO(dtype_name(dt) << " n=" << n);
      Call c("aten::randperm.out");
      Value* out = c.out(dt, {n});
      REQUIRE(c.run({c.i(n)}, {out}).ok());
      std::vector<double> v = read(out);
      std::vector<double> sorted = v;
      std::sort(sorted.begin(), sorted.end());
      for (int64_t k = 0; k < n; ++k)
        REQUIRE(sorted[static_cast<size_t>(k)] == static_cast<double>(k));
      if (n == 1000) {
        std::vector<double> identity(sorted);
        CHECK(v != identity);  // shuffled (1/1000! to fail by chance)
      }
    }
  }
  Call neg("aten::randperm.out");
  CHECK_FALSE(neg.run({neg.i(-1)}, {neg.out(DType::kInt64, {0})}).ok());
}

TEST_CASE(
    "two instructions draw from different generators, one instruction the same in every method") {
  Call a("aten::rand.out"), b("aten::rand.out"), again("aten::rand.out");
  for (Call* c : {&a, &b, &again})
    c->keep_state(0);
  a.set_instruction(3);
  b.set_instruction(4);
  again.set_instruction(3);  // instruction 3 of another method loaded from the same program
  Value* oa = a.out(DType::kFloat32, {64});
  Value* ob = b.out(DType::kFloat32, {64});
  Value* oagain = again.out(DType::kFloat32, {64});
  REQUIRE(a.run({a.ints({64})}, {oa}).ok());
  REQUIRE(b.run({b.ints({64})}, {ob}).ok());
  REQUIRE(again.run({again.ints({64})}, {oagain}).ok());
  CHECK(read(oa) != read(ob));
  CHECK(read(oa) == read(oagain));  // etc run --verify's reference draws the same numbers
}

}  // namespace
}  // namespace etc::rt::test
