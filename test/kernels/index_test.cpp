// Advanced indexing (index.Tensor_out, index_put.out, index_put_) and copy_ against
// element-by-element references written from NumPy's indexing rules.
#include <limits>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

using D = std::vector<double>;

// x of shape [4, 5, 6] holding 0, 1, 2, ...
D iota(int64_t n) {
  D v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(i);
  return v;
}

TEST_CASE("index.Tensor: one index, adjacent indices, separated indices, negatives") {
  const Sizes xs{4, 5, 6};
  SECTION("x[:, [4, 0, -1]]") {
    Call c("aten::index.Tensor_out");
    Value* x = c.tensor(DType::kFloat32, xs, iota(120));
    Value* i = c.tensor(DType::kInt64, {3}, {4, 0, -1});
    Value* out = c.out(DType::kFloat32, {4, 3, 6});
    REQUIRE(c.run({x, c.opt_list({nullptr, i})}, {out}).ok());
    D want;
    for (int a = 0; a < 4; ++a)
      for (int k : {4, 0, 4})
        for (int b = 0; b < 6; ++b)
          want.push_back(a * 30 + k * 6 + b);
    CHECK(read(out) == want);
  }
  SECTION("x[[1, 3], [[0], [2]]] broadcasts to [2, 2] and keeps the trailing dim") {
    Call c("aten::index.Tensor_out");
    Value* x = c.tensor(DType::kFloat32, xs, iota(120));
    Value* i = c.tensor(DType::kInt32, {2}, {1, 3});
    Value* j = c.tensor(DType::kInt64, {2, 1}, {0, 2});
    Value* out = c.out(DType::kFloat32, {2, 2, 6});
    REQUIRE(c.run({x, c.opt_list({i, j})}, {out}).ok());
    D want;
    for (int r : {0, 2})
      for (int a : {1, 3})
        for (int b = 0; b < 6; ++b)
          want.push_back(a * 30 + r * 6 + b);
    CHECK(read(out) == want);
  }
  SECTION("x[[0, 2], :, [5, 1]]: the broadcast dim goes first") {
    Call c("aten::index.Tensor_out");
    Value* x = c.tensor(DType::kFloat32, xs, iota(120));
    Value* i = c.tensor(DType::kInt64, {2}, {0, 2});
    Value* k = c.tensor(DType::kInt64, {2}, {5, 1});
    Value* out = c.out(DType::kFloat32, {2, 5});
    REQUIRE(c.run({x, c.opt_list({i, nullptr, k})}, {out}).ok());
    D want;
    for (int n = 0; n < 2; ++n)
      for (int m = 0; m < 5; ++m)
        want.push_back((n == 0 ? 0 : 2) * 30 + m * 6 + (n == 0 ? 5 : 1));
    CHECK(read(out) == want);
  }
  SECTION("an index out of range names the dim") {
    Call c("aten::index.Tensor_out");
    Value* x = c.tensor(DType::kFloat32, xs, iota(120));
    Value* i = c.tensor(DType::kInt64, {1}, {5});
    Value* out = c.out(DType::kFloat32, {1, 5, 6});
    Status s = c.run({x, c.opt_list({i})}, {out});
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("index 5 is out of range for dim 0 of size 4") != std::string::npos);
  }
}

TEST_CASE("nonzero: row-major indices, resized within the planned bound") {
  SECTION("a 2-d float tensor: NaN and -inf count, -0.0 does not") {
    Call c("aten::nonzero.out");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    Value* x = c.tensor(DType::kFloat32, {2, 3}, {0, nan, -0.0, -inf, 0, 2});
    Value* out = c.out(DType::kInt64, {6, 2});
    out->tensor.capacity = 6 * 2 * 8;
    REQUIRE(c.run({x}, {out}).ok());
    CHECK(out->tensor.sizes == Sizes{3, 2});
    CHECK(read(out) == D{0, 1, 1, 0, 1, 2});
  }
  SECTION("bool and int64, all zero: no rows") {
    for (DType t : {DType::kBool, DType::kInt64}) {
      Call c("aten::nonzero.out");
      Value* x = c.tensor(t, {4}, {0, 0, 0, 0});
      Value* out = c.out(DType::kInt64, {4, 1});
      out->tensor.capacity = 4 * 8;
      REQUIRE(c.run({x}, {out}).ok());
      CHECK(out->tensor.sizes == Sizes{0, 1});
    }
  }
  SECTION("a 0-d input: one row of no columns") {
    Call c("aten::nonzero.out");
    Value* x = c.tensor(DType::kInt32, {}, {5});
    Value* out = c.out(DType::kInt64, {1, 0});
    out->tensor.capacity = 0;
    REQUIRE(c.run({x}, {out}).ok());
    CHECK(out->tensor.sizes == Sizes{1, 0});
  }
  SECTION("a static out of the wrong count is refused") {
    Call c("aten::nonzero.out");
    Value* x = c.tensor(DType::kFloat32, {3}, {1, 0, 1});
    Value* out = c.out(DType::kInt64, {3, 1});
    Status s = c.run({x}, {out});
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("out") != std::string::npos);
  }
}

TEST_CASE("index_put: a KV-cache write, broadcast values, accumulate, in place") {
  const Sizes cs{1, 2, 4, 3};  // [batch, heads, positions, head_dim]
  D cache = iota(24);
  D values{100, 101, 102, 110, 111, 112};  // [1, 2, 1, 3]
  auto expected = [&](int pos) {
    D w = cache;
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 3; ++d)
        w[static_cast<size_t>(h * 12 + pos * 3 + d)] = values[static_cast<size_t>(h * 3 + d)];
    return w;
  };
  SECTION("out of place: self is unchanged") {
    Call c("aten::index_put.out");
    Value* self = c.tensor(DType::kFloat32, cs, cache);
    Value* pos = c.tensor(DType::kInt64, {1}, {2});
    Value* v = c.tensor(DType::kFloat32, {1, 2, 1, 3}, values);
    Value* out = c.out(DType::kFloat32, cs);
    REQUIRE(c.run({self, c.opt_list({nullptr, nullptr, pos}), v, c.b(false)}, {out}).ok());
    CHECK(read(out) == expected(2));
    CHECK(read(self) == cache);
  }
  SECTION("index_put_ writes self") {
    Call c("aten::index_put_");
    Value* self = c.tensor(DType::kFloat32, cs, cache);
    Value* pos = c.tensor(DType::kInt64, {1}, {-1});
    Value* v = c.tensor(DType::kFloat32, {1, 2, 1, 3}, values);
    REQUIRE(c.run_raw({self, c.opt_list({nullptr, nullptr, pos}), v, c.b(false), self}).ok());
    CHECK(read(self) == expected(3));
  }
  SECTION("out aliasing self (etc's reinplaced plan) gives the same bytes") {
    Call c("aten::index_put.out");
    Value* self = c.tensor(DType::kFloat32, cs, cache);
    Value* pos = c.tensor(DType::kInt64, {1}, {0});
    Value* v = c.tensor(DType::kFloat32, {1, 2, 1, 3}, values);
    REQUIRE(c.run_raw({self, c.opt_list({nullptr, nullptr, pos}), v, c.b(false), self, self}).ok());
    CHECK(read(self) == expected(0));
  }
  SECTION("broadcast values and accumulate with a repeated index") {
    Call c("aten::index_put.out");
    Value* self = c.tensor(DType::kFloat32, {3, 2}, {0, 1, 2, 3, 4, 5});
    Value* idx = c.tensor(DType::kInt64, {3}, {2, 0, 2});
    Value* v = c.tensor(DType::kFloat32, {2}, {10, 20});
    Value* out = c.out(DType::kFloat32, {3, 2});
    REQUIRE(c.run({self, c.opt_list({idx}), v, c.b(true)}, {out}).ok());
    CHECK(read(out) == D{10, 21, 2, 3, 24, 45});
  }
  SECTION("values of the wrong dtype or shape are errors") {
    Call c("aten::index_put.out");
    Value* self = c.tensor(DType::kFloat32, cs, cache);
    Value* pos = c.tensor(DType::kInt64, {1}, {0});
    Value* out = c.out(DType::kFloat32, cs);
    Status s = c.run({self, c.opt_list({nullptr, nullptr, pos}),
                      c.tensor(DType::kFloat32, {1, 2, 2, 3}, iota(12)), c.b(false)},
                     {out});
    REQUIRE_FALSE(s.ok());
    CHECK(s.message().find("do not broadcast to the indexed shape [1, 2, 1, 3]") !=
          std::string::npos);
  }
}

TEST_CASE("copy_: same shape converts dtype, broadcast, the return value must be self") {
  Call c("aten::copy_");
  Value* self = c.tensor(DType::kInt64, {2, 3}, D(6, 0));
  Value* src = c.tensor(DType::kFloat32, {3}, {1.9, -2.5, 7});
  REQUIRE(c.run_raw({self, src, c.b(false), self}).ok());
  CHECK(read(self) == D{1, -2, 7, 1, -2, 7});
  Call bad("aten::copy_");
  Value* s2 = bad.tensor(DType::kFloat32, {2}, {0, 0});
  Value* other = bad.tensor(DType::kFloat32, {2}, {0, 0});
  Status s = bad.run_raw({s2, s2, bad.b(false), other});
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("must be self") != std::string::npos);
}

// check_index_put: the errors the CUDA kernel gives too.
TEST_CASE("index_put: values of another dtype or shape") {
  Call c("aten::index_put.out");
  Value* self = c.random(DType::kFloat32, {3, 2}, 1);
  Value* idx = c.tensor(DType::kInt64, {2}, {0, 2});
  CHECK(c.run({self, c.opt_list({idx}), c.random(DType::kFloat32, {3}, 2), c.b(false)},
              {c.out(DType::kFloat32, {3, 2})})
            .message() ==
        "aten::index_put.out: values of shape [3] do not broadcast to the indexed shape [2, 2]");
  const std::string msg =
      c.run({self, c.opt_list({idx}), c.random(DType::kFloat16, {2}, 3), c.b(false)},
            {c.out(DType::kFloat32, {3, 2})})
          .message();
  CHECK(msg.find("index_put needs one dtype") != std::string::npos);
}

}  // namespace
}  // namespace etc::rt::test
