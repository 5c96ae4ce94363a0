// The portable out-variants of movement.cpp (what ExecuTorch's programs call for data
// movement etc's importer decomposes) against element-by-element references, and their
// argument errors. Whole programs using them run against PyTorch eager in the torch fixture
// "movement".
#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

using D = std::vector<double>;

D iota(int64_t n) {
  D v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(i);
  return v;
}

TEST_CASE("flip.out reverses the listed dims, repeated dims are an error") {
  Call c("aten::flip.out");
  Value* x = c.tensor(DType::kInt32, {2, 3, 4}, iota(24));
  Value* out = c.out(DType::kInt32, {2, 3, 4});
  REQUIRE(c.run({x, c.ints({0, -1})}, {out}).ok());
  D want;
  for (int a = 1; a >= 0; --a)
    for (int b = 0; b < 3; ++b)
      for (int k = 3; k >= 0; --k)
        want.push_back(a * 12 + b * 4 + k);
  CHECK(read(out) == want);
  CHECK(c.run({x, c.ints({1, -2})}, {out}).message() == "aten::flip.out: dims lists dim 1 twice");
}

TEST_CASE("gather.out and scatter: indices along a dim, range errors name the dim") {
  Call g("aten::gather.out");
  Value* x = g.tensor(DType::kFloat32, {2, 3}, iota(6));
  Value* idx = g.tensor(DType::kInt64, {2, 2}, {2, 0, -1, 1});
  Value* out = g.out(DType::kFloat32, {2, 2});
  REQUIRE(g.run({x, g.i(1), idx, g.b(false)}, {out}).ok());
  CHECK(read(out) == D{2, 0, 5, 4});
  Value* bad = g.tensor(DType::kInt64, {2, 2}, {3, 0, 0, 0});
  CHECK(g.run({x, g.i(1), bad, g.b(false)}, {out}).message() ==
        "aten::gather.out: index 3 is out of range for dim 1 of size 3");

  Call s("aten::scatter_add.out");
  Value* self = s.tensor(DType::kInt64, {2, 3}, {0, 0, 0, 10, 10, 10});
  Value* sidx = s.tensor(DType::kInt64, {2, 2}, {2, 2, 0, 1});
  Value* src = s.tensor(DType::kInt64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Value* sout = s.out(DType::kInt64, {2, 3});
  REQUIRE(s.run({self, s.i(1), sidx, src}, {sout}).ok());
  CHECK(read(sout) == D{0, 0, 3, 14, 15, 10});  // repeated index 2 adds both

  Call v("aten::scatter.value_out");
  Value* vout = v.out(DType::kInt64, {2, 3});
  Value* vself = v.tensor(DType::kInt64, {2, 3}, {0, 0, 0, 10, 10, 10});
  Value* vidx = v.tensor(DType::kInt64, {2, 1}, {1, 0});
  REQUIRE(v.run({vself, v.i(1), vidx, v.i(7)}, {vout}).ok());
  CHECK(read(vout) == D{0, 7, 0, 7, 10, 10});
}

TEST_CASE("index_select, repeat, diagonal_copy") {
  Call s("aten::index_select.out");
  Value* x = s.tensor(DType::kFloat32, {2, 3}, iota(6));
  Value* out = s.out(DType::kFloat32, {2, 2});
  REQUIRE(s.run({x, s.i(1), s.tensor(DType::kInt32, {2}, {2, -3})}, {out}).ok());
  CHECK(read(out) == D{2, 0, 5, 3});

  Call r("aten::repeat.out");
  Value* y = r.tensor(DType::kFloat32, {2}, {1, 2});
  Value* rout = r.out(DType::kFloat32, {2, 4});
  REQUIRE(r.run({y, r.ints({2, 2})}, {rout}).ok());
  CHECK(read(rout) == D{1, 2, 1, 2, 1, 2, 1, 2});
  CHECK(r.run({y, r.ints({})}, {rout}).message() ==
        "aten::repeat.out: repeats [] has fewer dims than self [2]");

  Call d("aten::diagonal_copy.out");
  Value* m = d.tensor(DType::kFloat32, {2, 3, 4}, iota(24));
  // Dims 0 and 2 with offset -1: the other dim (3), then the diagonal x[1 + i, j, i] (1).
  Value* dout = d.out(DType::kFloat32, {3, 1});
  REQUIRE(d.run({m, d.i(-1), d.i(0), d.i(2)}, {dout}).ok());
  CHECK(read(dout) == D{12, 16, 20});
}

TEST_CASE("split_with_sizes_copy writes a list of outs and returns nothing") {
  Call c("aten::split_with_sizes_copy.out");
  Value* x = c.tensor(DType::kFloat32, {2, 3}, iota(6));
  Value* a = c.out(DType::kFloat32, {2, 1});
  Value* b = c.out(DType::kFloat32, {2, 2});
  REQUIRE(c.run_raw({x, c.ints({1, 2}), c.i(1), c.list({a, b}), c.none()}).ok());
  CHECK(read(a) == D{0, 3});
  CHECK(read(b) == D{1, 2, 4, 5});
  CHECK(c.run_raw({x, c.ints({1, 1}), c.i(1), c.list({a, b}), c.none()}).message() ==
        "aten::split_with_sizes_copy.out: split_sizes [1, 1] do not add up to 3");
  CHECK(c.run_raw({x, c.ints({1, 2}), c.i(1), a, c.none()}).message() ==
        "aten::split_with_sizes_copy.out: out list 'out' (argument 3) must be a TensorList, got "
        "Tensor");
}

TEST_CASE("slice_scatter, any over dims, mean of everything") {
  Call s("aten::slice_scatter.out");
  Value* self = s.tensor(DType::kFloat32, {5}, {0, 0, 0, 0, 0});
  Value* src = s.tensor(DType::kFloat32, {2}, {7, 8});
  Value* out = s.out(DType::kFloat32, {5});
  REQUIRE(s.run({self, src, s.i(0), s.i(1), s.none(), s.i(2)}, {out}).ok());
  CHECK(read(out) == D{0, 7, 0, 8, 0});

  Call a("aten::any.dims_out");
  Value* x = a.tensor(DType::kFloat32, {2, 2, 2}, {0, 0, 0, 1, 0, 0, 0, 0});
  Value* aout = a.out(DType::kBool, {2, 1, 1});
  REQUIRE(a.run({x, a.ints({1, 2}), a.b(true)}, {aout}).ok());
  CHECK(read(aout) == D{1, 0});

  Call m("aten::mean.dtype_out");
  Value* y = m.tensor(DType::kFloat32, {4}, {1, 2, 3, 4});
  Value* mout = m.out(DType::kFloat32, {});
  REQUIRE(m.run({y, m.none()}, {mout}).ok());
  CHECK(read(mout) == D{2.5});
}

}  // namespace
}  // namespace etc::rt::test
