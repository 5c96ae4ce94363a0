// Data-movement kernels (cat, clone, constant_pad_nd, the view copies, reshape) and the
// conversion/indexing/creation kernels (_to_copy, embedding, full/ones/zeros) against
// index-by-index references.
#include <cmath>
#include <limits>

#include "kernels/kernel_test_util.h"

namespace etc::rt::test {
namespace {

// out[i] = x[src_index(out multi-index)] for every element of out.
std::vector<double> gather_ref(const std::vector<double>& x, const Sizes& out_sizes,
                               const std::function<int64_t(const Sizes&)>& src_index) {
  std::vector<double> out(static_cast<size_t>(numel(out_sizes)));
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = x[src_index(unravel(static_cast<int64_t>(i), out_sizes))];
  return out;
}

int64_t flat(const Sizes& idx, const Sizes& sizes) {
  int64_t f = 0;
  for (size_t d = 0; d < sizes.size(); ++d)
    f = f * sizes[d] + idx[d];
  return f;
}

// x (of sizes s) permuted by perm: out dim d is x's dim perm[d].
std::vector<double> permute_ref(const std::vector<double>& x, const Sizes& s,
                                const std::vector<int64_t>& perm, const Sizes& out_sizes) {
  return gather_ref(x, out_sizes, [&](const Sizes& i) {
    Sizes src(s.size());
    for (size_t d = 0; d < s.size(); ++d)
      src[static_cast<size_t>(perm[d])] = i[d];
    return flat(src, s);
  });
}

const DType kMoveTypes[] = {DType::kFloat32, DType::kFloat16, DType::kFloat64,
                            DType::kInt8,    DType::kInt64,   DType::kBool};

double lo_for(DType dt) {
  return dt == DType::kBool ? 0 : -50;
}
double hi_for(DType dt) {
  return dtype_is_float(dt) ? 1 : 50;
}

TEST_CASE("cat along dims, skipping legacy empty tensors and promoting dtypes") {
  for (const char* name : {"aten::cat.out", "aten::cat.default"}) {
    for (DType dt : kMoveTypes) {
      for (int64_t dim : {0, 1, 2, -1}) {
        INFO(name << " " << dtype_name(dt) << " dim " << dim);
        const int64_t d = dim < 0 ? dim + 3 : dim;
        Sizes s1{2, 3, 4}, s2{2, 3, 4}, s3{2, 3, 4};
        s2[d] = 1;
        s3[d] = 0;
        Call c(name);
        Value* a = c.random(dt, s1, 1000, lo_for(dt), hi_for(dt));
        Value* b = c.random(dt, s2, 1001, lo_for(dt), hi_for(dt));
        Value* e = c.random(dt, s3, 1002);
        Value* legacy = c.tensor(dt, {0}, {});
        Sizes os = s1;
        os[d] = s1[d] + s2[d];
        Value* out = c.out(dt, os);
        REQUIRE(c.run({c.list({a, legacy, b, e}), c.i(dim)}, {out}).ok());
        std::vector<double> av = read(a), bv = read(b), want(static_cast<size_t>(numel(os)));
        for (size_t i = 0; i < want.size(); ++i) {
          Sizes idx = unravel(static_cast<int64_t>(i), os);
          if (idx[d] < s1[d]) {
            want[i] = av[flat(idx, s1)];
          } else {
            idx[d] -= s1[d];
            want[i] = bv[flat(idx, s2)];
          }
        }
        require_close(read(out), want, dt);
      }
    }
  }
  // int32 with float32 gives float32.
  Call c("aten::cat.out");
  Value* a = c.tensor(DType::kInt32, {2}, {1, -2});
  Value* b = c.tensor(DType::kFloat32, {1}, {0.5});
  Value* out = c.out(DType::kFloat32, {3});
  REQUIRE(c.run({c.list({a, b}), c.i(0)}, {out}).ok());
  require_close(read(out), {1, -2, 0.5}, DType::kFloat32);
  // Only legacy empties: [0].
  Value* l = c.tensor(DType::kFloat32, {0}, {});
  REQUIRE(c.run({c.list({l, l}), c.i(0)}, {c.out(DType::kFloat32, {0})}).ok());
  Value* bad = c.tensor(DType::kFloat32, {2, 2}, {1, 2, 3, 4});
  Value* bad2 = c.tensor(DType::kFloat32, {3, 3}, std::vector<double>(9, 0));
  CHECK(c.run({c.list({bad, bad2}), c.i(0)}, {c.out(DType::kFloat32, {5, 2})}).message() ==
        "aten::cat.out: tensor 1 [3, 3] does not match [2, 2] outside dim 0");
}

TEST_CASE("clone, view, reshape, squeeze and unsqueeze copy the data") {
  for (DType dt : kMoveTypes) {
    INFO(dtype_name(dt));
    const Sizes s{2, 1, 6};
    Call c("aten::clone.out");
    Value* x = c.random(dt, s, 1100, lo_for(dt), hi_for(dt));
    const std::vector<double> xv = read(x);
    auto check = [&](const char* name, std::initializer_list<Value*> extra, const Sizes& os) {
      INFO(name);
      Call k(name);
      Value* out = k.out(dt, os);
      std::vector<Value*> args{x};
      args.insert(args.end(), extra.begin(), extra.end());
      args.push_back(out);
      args.push_back(out);
      REQUIRE(k.run_raw(args).ok());
      require_close(read(out), xv, dt);
    };
    check("aten::clone.out", {c.none()}, s);
    check("aten::clone.default", {c.none()}, s);
    check("dim_order_ops::_clone_dim_order.out", {c.b(false), c.none()}, s);
    check("dim_order_ops::_clone_dim_order.out", {c.b(false), c.ints({0, 1, 2})}, s);
    check("aten::view_copy.out", {c.ints({3, -1})}, {3, 4});
    check("aten::view.default", {c.ints({12})}, {12});
    check("aten::reshape.default", {c.ints({-1, 2, 2})}, {3, 2, 2});
    check("aten::squeeze_copy.dim_out", {c.i(1)}, {2, 6});
    check("aten::squeeze.dim", {c.i(0)}, {2, 1, 6});  // size 2: unchanged
    check("aten::squeeze_copy.dims_out", {c.ints({1, -1})}, {2, 6});
    check("aten::squeeze.dims", {c.ints({})}, {2, 1, 6});
    check("aten::unsqueeze_copy.out", {c.i(0)}, {1, 2, 1, 6});
    check("aten::unsqueeze.default", {c.i(-1)}, {2, 1, 6, 1});
    check("aten::unsqueeze.default", {c.i(3)}, {2, 1, 6, 1});
  }
  Call c("aten::view_copy.out");
  Value* x = c.random(DType::kFloat32, {2, 3}, 1);
  CHECK(c.run({x, c.ints({4, -1})}, {c.out(DType::kFloat32, {4, 1})}).message() ==
        "aten::view_copy.out: size [4, -1] is invalid for an input of 6 elements");
  CHECK(c.run({x, c.ints({5})}, {c.out(DType::kFloat32, {5})}).message() ==
        "aten::view_copy.out: size [5] has 5 elements but self [2, 3] has 6");
  // ExecuTorch's dim-order ops: etc's tensors are contiguous; another order is refused.
  Call o("dim_order_ops::_clone_dim_order.out");
  CHECK(o.run({x, o.b(false), o.ints({1, 0})}, {o.out(DType::kFloat32, {2, 3})}).message() ==
        "dim_order_ops::_clone_dim_order.out: dim_order [1, 0] is not the contiguous order: etc "
        "runs contiguous tensors only");
  CHECK(o.run({x, o.b(false), o.ints({0})}, {o.out(DType::kFloat32, {2, 3})}).message() ==
        "dim_order_ops::_clone_dim_order.out: dim_order [0] is not the contiguous order: etc "
        "runs contiguous tensors only");
  // _to_dim_order_copy.out converts to the out tensor's dtype.
  Call t("dim_order_ops::_to_dim_order_copy.out");
  Value* xi = t.tensor(DType::kFloat32, {3}, {-1.5, 0.25, 7.75});
  Value* ti = t.out(DType::kInt32, {3});
  REQUIRE(t.run({xi, t.b(false), t.ints({0})}, {ti}).ok());
  CHECK(read(ti) == std::vector<double>{-1, 0, 7});
  Value* td = t.out(DType::kFloat64, {3});
  REQUIRE(t.run({xi, t.b(false), t.none()}, {td}).ok());
  CHECK(read(td) == std::vector<double>{-1.5, 0.25, 7.75});
  CHECK(t.run({xi, t.b(false), t.ints({1})}, {td}).message() ==
        "dim_order_ops::_to_dim_order_copy.out: dim_order [1] is not the contiguous order: etc "
        "runs contiguous tensors only");
  Call u("aten::unsqueeze_copy.out");
  CHECK(u.run({x, u.i(3)}, {u.out(DType::kFloat32, {2, 3, 1})}).message() ==
        "aten::unsqueeze_copy.out: dim 3 is out of range for unsqueezing a tensor of rank 2");
}

TEST_CASE("expand, permute and transpose") {
  for (DType dt : kMoveTypes) {
    INFO(dtype_name(dt));
    {
      const Sizes s{3, 1}, os{2, 3, 4};
      for (const char* name : {"aten::expand_copy.out", "aten::expand.default"}) {
        Call c(name);
        Value* x = c.random(dt, s, 1200, lo_for(dt), hi_for(dt));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.ints({2, -1, 4}), c.b(false)}, {out}).ok());
        require_close(read(out), gather_ref(read(x), os, [](const Sizes& i) { return i[1]; }), dt);
      }
    }
    {
      const Sizes s{2, 3, 4, 5};
      const std::vector<int64_t> perm{2, 0, 3, 1};
      const Sizes os{4, 2, 5, 3};
      for (const char* name : {"aten::permute_copy.out", "aten::permute.default"}) {
        Call c(name);
        Value* x = c.random(dt, s, 1201, lo_for(dt), hi_for(dt));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.ints({2, 0, -1, 1})}, {out}).ok());
        require_close(read(out), permute_ref(read(x), s, perm, os), dt);
      }
    }
    {
      // Large enough for the tiled transpose (both swapped dims of 16 or more, partial tiles,
      // two dims around them).
      const Sizes s{3, 37, 2, 50};
      const std::vector<int64_t> perm{0, 3, 2, 1};
      const Sizes os{3, 50, 2, 37};
      Call c("aten::permute_copy.out");
      Value* x = c.random(dt, s, 1203, lo_for(dt), hi_for(dt));
      Value* out = c.out(dt, os);
      REQUIRE(c.run({x, c.ints({0, 3, 2, 1})}, {out}).ok());
      require_close(read(out), permute_ref(read(x), s, perm, os), dt);
    }
    {
      const Sizes s{2, 3, 4}, os{4, 3, 2};
      for (const char* name : {"aten::transpose_copy.int_out", "aten::transpose.int"}) {
        Call c(name);
        Value* x = c.random(dt, s, 1202, lo_for(dt), hi_for(dt));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.i(0), c.i(-1)}, {out}).ok());
        require_close(read(out),
                      gather_ref(read(x), os,
                                 [&](const Sizes& i) {
                                   return flat({i[2], i[1], i[0]}, s);
                                 }),
                      dt);
      }
    }
  }
  Call c("aten::expand_copy.out");
  Value* x = c.random(DType::kFloat32, {3, 2}, 1);
  CHECK(c.run({x, c.ints({3, 4}), c.b(false)}, {c.out(DType::kFloat32, {3, 4})}).message() ==
        "aten::expand_copy.out: cannot expand [3, 2] to [3, 4]: dim 1 has size 2");
  Call p("aten::permute_copy.out");
  CHECK(p.run({x, p.ints({0, 0})}, {p.out(DType::kFloat32, {3, 3})}).message() ==
        "aten::permute_copy.out: dim 0 appears more than once in dims");
}

TEST_CASE("select and slice") {
  const Sizes s{4, 5, 6};
  for (DType dt : kMoveTypes) {
    struct Sel {
      int64_t dim, index;
    };
    for (Sel k : {Sel{0, 2}, Sel{1, -1}, Sel{-1, 0}, Sel{2, 5}}) {
      for (const char* name : {"aten::select_copy.int_out", "aten::select.int"}) {
        INFO(name << " " << dtype_name(dt) << " dim " << k.dim << " index " << k.index);
        const int64_t d = k.dim < 0 ? k.dim + 3 : k.dim;
        const int64_t index = k.index < 0 ? k.index + s[d] : k.index;
        Sizes os = s;
        os.erase(os.begin() + d);
        Call c(name);
        Value* x = c.random(dt, s, 1300, lo_for(dt), hi_for(dt));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.i(k.dim), c.i(k.index)}, {out}).ok());
        require_close(read(out),
                      gather_ref(read(x), os,
                                 [&](const Sizes& i) {
                                   Sizes src = i;
                                   src.insert(src.begin() + d, index);
                                   return flat(src, s);
                                 }),
                      dt);
      }
    }
    struct Sl {
      int64_t dim;
      std::optional<int64_t> start, end;
      int64_t step;
    };
    const Sl slices[] = {{0, {}, {}, 1}, {1, 1, 4, 1},    {2, -4, {}, 2}, {1, {}, -1, 3},
                         {2, 2, 100, 1}, {0, -100, 2, 1}, {1, 3, 2, 1},   {-1, 5, 6, 4}};
    for (const Sl& k : slices) {
      for (const char* name : {"aten::slice_copy.Tensor_out", "aten::slice.Tensor"}) {
        INFO(name << " " << dtype_name(dt) << " dim " << k.dim << " start "
                  << (k.start ? std::to_string(*k.start) : "None") << " end "
                  << (k.end ? std::to_string(*k.end) : "None") << " step " << k.step);
        const int64_t d = k.dim < 0 ? k.dim + 3 : k.dim;
        const int64_t n = s[d];
        auto wrap = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
        const int64_t start = wrap(k.start.value_or(0)), end = wrap(k.end.value_or(n));
        Sizes os = s;
        os[d] = end > start ? (end - start + k.step - 1) / k.step : 0;
        Call c(name);
        Value* x = c.random(dt, s, 1301, lo_for(dt), hi_for(dt));
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.i(k.dim), k.start ? c.i(*k.start) : c.none(),
                       k.end ? c.i(*k.end) : c.none(), c.i(k.step)},
                      {out})
                    .ok());
        require_close(read(out),
                      gather_ref(read(x), os,
                                 [&](const Sizes& i) {
                                   Sizes src = i;
                                   src[d] = start + i[d] * k.step;
                                   return flat(src, s);
                                 }),
                      dt);
      }
    }
  }
  Call c("aten::select_copy.int_out");
  Value* x = c.random(DType::kFloat32, {2, 3}, 1);
  CHECK(c.run({x, c.i(1), c.i(3)}, {c.out(DType::kFloat32, {2})}).message() ==
        "aten::select_copy.int_out: index 3 is out of range for dim 1 of size 3");
  Call sl("aten::slice_copy.Tensor_out");
  CHECK(sl.run({x, sl.i(0), sl.none(), sl.none(), sl.i(0)}, {sl.out(DType::kFloat32, {2, 3})})
            .message() == "aten::slice_copy.Tensor_out: slice step must be positive, got 0");
}

TEST_CASE("constant_pad_nd pads and crops") {
  struct Case {
    Sizes s;
    std::vector<int64_t> pad;
  };
  const Case cases[] = {{{2, 3, 4}, {1, 2}},         {{2, 3, 4}, {1, 2, 0, 1}},
                        {{2, 3, 4}, {-1, 1, 2, -2}}, {{2, 3, 4}, {0, 0, 0, 0, 1, 1}},
                        {{3, 4}, {-2, -2}},          {{3, 4}, {}},
                        {{0, 2}, {1, 1, 1, 0}}};
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kUInt8}) {
    for (const Case& k : cases) {
      for (const char* name : {"aten::constant_pad_nd.out", "aten::constant_pad_nd.default"}) {
        INFO(name << " " << dtype_name(dt) << " " << shape_to_string(k.s) << " pad "
                  << shape_to_string(k.pad));
        Call c(name);
        Value* x = c.random(dt, k.s, 1400, dt == DType::kUInt8 ? 0 : -50, hi_for(dt));
        Sizes os = k.s;
        std::vector<int64_t> before(k.s.size(), 0);
        for (size_t i = 0; i < k.pad.size() / 2; ++i) {
          const size_t d = k.s.size() - 1 - i;
          before[d] = k.pad[2 * i];
          os[d] += k.pad[2 * i] + k.pad[2 * i + 1];
        }
        const double value = dtype_is_float(dt) ? 0.5 : 7;
        Value* out = c.out(dt, os);
        REQUIRE(c.run({x, c.ints(k.pad), dtype_is_float(dt) ? c.d(value) : c.i(7)}, {out}).ok());
        std::vector<double> xv = read(x), want(static_cast<size_t>(numel(os)));
        for (size_t i = 0; i < want.size(); ++i) {
          Sizes idx = unravel(static_cast<int64_t>(i), os);
          bool inside = true;
          for (size_t d = 0; d < idx.size(); ++d) {
            idx[d] -= before[d];
            inside = inside && idx[d] >= 0 && idx[d] < k.s[d];
          }
          want[i] = inside ? xv[flat(idx, k.s)] : value;
        }
        require_close(read(out), want, dt);
      }
    }
  }
  Call c("aten::constant_pad_nd.out");
  Value* x = c.random(DType::kFloat32, {2}, 1);
  CHECK(c.run({x, c.ints({1}), c.i(0)}, {c.out(DType::kFloat32, {3})}).message() ==
        "aten::constant_pad_nd.out: pad must have an even number of values, at most 2 per dim "
        "of self [2], got 1");
}

TEST_CASE("_to_copy converts dtypes") {
  const std::vector<double> values{1.75, -1.75, 0, 2.5, -0.25, 300.5, -129, 65504};
  const DType dtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                          DType::kInt32,   DType::kInt64,   DType::kInt16,   DType::kInt8,
                          DType::kUInt8,   DType::kBool};
  for (DType from : dtypes) {
    for (DType to : dtypes) {
      for (const char* name : {"aten::_to_copy.out", "aten::_to_copy.default"}) {
        INFO(name << " " << dtype_name(from) << " -> " << dtype_name(to));
        Call c(name);
        Value* x = c.tensor(from, {2, 4}, values);
        Value* out = c.out(to, {2, 4});
        REQUIRE(c.run({x, c.dtype(to), c.none(), c.none(), c.none(), c.b(false), c.none()}, {out})
                    .ok());
        std::vector<double> xv = read(x), want(xv.size());
        // float -> integer truncates toward zero (then wraps); -> bool is != 0.
        for (size_t i = 0; i < xv.size(); ++i)
          want[i] = cast_to(to, xv[i]);
        Tolerance tol = tolerance_for(to);
        if (to == DType::kFloat16 || to == DType::kBFloat16) tol.rtol *= 2;
        require_close(read(out), want, tol);
      }
    }
  }
  Call c("aten::_to_copy.out");
  Value* x = c.tensor(DType::kFloat32, {1}, {1});
  CHECK(c.run({x, c.none(), c.none(), c.none(), c.none(), c.b(false), c.none()},
              {c.out(DType::kInt32, {1})})
            .message() == "aten::_to_copy.out: out has dtype int32, expected float32");
}

TEST_CASE("_to_copy.out as PyTorch declares it: (self, non_blocking, memory_format, out)") {
  // The form etc writes (and ExecuTorch's portable kernel takes); the out tensor's dtype is
  // the target dtype.
  for (DType to : {DType::kFloat32, DType::kInt64, DType::kFloat16, DType::kBool}) {
    INFO(dtype_name(to));
    Call c("aten::_to_copy.out");
    Value* x = c.tensor(DType::kFloat32, {3}, {1.75, -2.5, 0});
    Value* out = c.out(to, {3});
    REQUIRE(c.run({x, c.b(false), c.none()}, {out}).ok());
    std::vector<double> want;
    for (double v : {1.75, -2.5, 0.0})
      want.push_back(cast_to(to, v));
    require_close(read(out), want, tolerance_for(to));
  }
  Call c("aten::_to_copy.out");
  Value* x = c.tensor(DType::kFloat32, {2}, {1, 2});
  CHECK(c.run({x, c.b(false), c.none()}, {c.out(DType::kInt32, {3})}).message() ==
        "aten::_to_copy.out: out has shape [3], expected [2]");
}

TEST_CASE("arange.start_out, full_like.out and scalar_tensor.out") {
  {
    Call c("aten::arange.start_out");
    Value* out = c.out(DType::kInt64, {4});
    REQUIRE(c.run({c.i(2), c.i(10), c.i(2)}, {out}).ok());
    require_close(read(out), {2, 4, 6, 8}, DType::kInt64);
    Value* fout = c.out(DType::kFloat32, {3});
    REQUIRE(c.run({c.d(0), c.d(1.5), c.d(0.5)}, {fout}).ok());
    require_close(read(fout), {0, 0.5, 1}, DType::kFloat32);
    Value* down = c.out(DType::kInt64, {3});
    REQUIRE(c.run({c.i(3), c.i(0), c.i(-1)}, {down}).ok());
    require_close(read(down), {3, 2, 1}, DType::kInt64);
    CHECK(c.run({c.i(0), c.i(10), c.i(3)}, {c.out(DType::kInt64, {3})}).message() ==
          "aten::arange.start_out: out has shape [3], expected [4]");
    CHECK(c.run({c.i(0), c.i(10), c.i(0)}, {c.out(DType::kInt64, {1})}).message() ==
          "aten::arange.start_out: arange needs finite bounds and a non-zero step");
  }
  {
    Call c("aten::full_like.out");
    Value* x = c.random(DType::kFloat16, {2, 3}, 5);
    Value* out = c.out(DType::kFloat16, {2, 3});
    REQUIRE(c.run({x, c.d(-2.5), c.none()}, {out}).ok());
    require_close(read(out), std::vector<double>(6, -2.5), DType::kFloat16);
    CHECK(c.run({x, c.d(1), c.none()}, {c.out(DType::kFloat16, {3, 2})}).message().find("shape") !=
          std::string::npos);
  }
  {
    Call c("aten::scalar_tensor.out");
    Value* out = c.out(DType::kFloat32, {});
    REQUIRE(c.run({c.d(-INFINITY)}, {out}).ok());
    CHECK(read(out)[0] == -INFINITY);
  }
}

TEST_CASE("embedding gathers rows and checks indices") {
  for (DType wdt : {DType::kFloat32, DType::kFloat16, DType::kInt64}) {
    for (DType idt : {DType::kInt64, DType::kInt32}) {
      for (const char* name : {"aten::embedding.out", "aten::embedding.default"}) {
        INFO(name << " weight " << dtype_name(wdt) << " indices " << dtype_name(idt));
        Call c(name);
        Value* w = c.random(wdt, {7, 5}, 1500, -50, 50);
        Value* idx = c.tensor(idt, {2, 3}, {0, 6, 3, 3, 1, 0});
        Value* out = c.out(wdt, {2, 3, 5});
        REQUIRE(c.run({w, idx, c.i(-1), c.b(false), c.b(false)}, {out}).ok());
        std::vector<double> wv = read(w), iv = read(idx), want;
        for (double r : iv) {
          for (int64_t j = 0; j < 5; ++j)
            want.push_back(wv[static_cast<size_t>(r) * 5 + j]);
        }
        require_close(read(out), want, wdt);
      }
    }
  }
  Call c("aten::embedding.out");
  Value* w = c.random(DType::kFloat32, {5, 2}, 1);
  Value* idx = c.tensor(DType::kInt64, {3}, {0, 4, 5});
  CHECK(c.run({w, idx, c.i(-1), c.b(false), c.b(false)}, {c.out(DType::kFloat32, {3, 2})})
            .message() ==
        "aten::embedding.out: index 5 (indices element 2) is out of range for an embedding table "
        "of 5 rows");
  Value* neg = c.tensor(DType::kInt32, {1}, {-1});
  CHECK(c.run({w, neg, c.i(-1), c.b(false), c.b(false)}, {c.out(DType::kFloat32, {1, 2})})
            .message() ==
        "aten::embedding.out: index -1 (indices element 0) is out of range for an embedding "
        "table of 5 rows");
  Value* fidx = c.tensor(DType::kFloat32, {1}, {0});
  CHECK(c.run({w, fidx, c.i(-1), c.b(false), c.b(false)}, {c.out(DType::kFloat32, {1, 2})})
            .message() ==
        "aten::embedding.out: indices has dtype float32, expected int64 or int32");
}

TEST_CASE("unpack_int4 gives every byte's two signed nibbles, the low one first") {
  // Rows of 512 values (every byte value twice) and of 511 (the last byte's high nibble
  // unused); the result is the low nibble of byte c / 2 for even c, the high one for odd c,
  // sign-extended.
  for (const int64_t size : {int64_t{512}, int64_t{511}}) {
    INFO("size " << size);
    const int64_t row = (size + 1) / 2;
    std::vector<double> bytes;
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t b = 0; b < row; ++b)
        bytes.push_back(static_cast<double>((b + 37 * r) % 256));
    }
    Call c("etc::unpack_int4.out");
    Value* packed = c.tensor(DType::kUInt8, {3, row}, bytes);
    Value* out = c.out(DType::kInt8, {3, size});
    REQUIRE(c.run({packed, c.i(size)}, {out}).ok());
    std::vector<double> want;
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t col = 0; col < size; ++col) {
        const auto b = static_cast<unsigned>(bytes[static_cast<size_t>(r * row + col / 2)]);
        const unsigned nibble = col % 2 ? b >> 4 : b & 15u;
        want.push_back(nibble >= 8 ? static_cast<double>(nibble) - 16 : nibble);
      }
    }
    CHECK(read(out) == want);
  }
  Call c("etc::unpack_int4.out");
  Value* packed = c.tensor(DType::kUInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(c.run({packed, c.i(7)}, {c.out(DType::kInt8, {2, 7})}).message() ==
        "etc::unpack_int4.out: 7 values do not pack into packed [2, 3] (ceil(size / 2) bytes a "
        "row)");
  CHECK(c.run({packed, c.i(6)}, {c.out(DType::kInt8, {2, 7})}).message() ==
        "etc::unpack_int4.out: out has shape [2, 7], expected [2, 6]");
  Value* signed_bytes = c.tensor(DType::kInt8, {2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(c.run({signed_bytes, c.i(6)}, {c.out(DType::kInt8, {2, 6})}).message() ==
        "etc::unpack_int4.out: packed has dtype int8, expected uint8");
}

TEST_CASE("full, ones and zeros") {
  for (DType dt : {DType::kFloat32, DType::kFloat16, DType::kInt64, DType::kInt8, DType::kBool}) {
    for (const Sizes& s : {Sizes{2, 3}, Sizes{}, Sizes{0, 4}}) {
      INFO(dtype_name(dt) << " " << shape_to_string(s));
      const auto n = static_cast<size_t>(numel(s));
      const double fill = dt == DType::kBool ? 1 : dtype_is_float(dt) ? -2.5 : -3;
      {
        Call c("aten::full.out");
        Value* out = c.out(dt, s);
        REQUIRE(c.run({c.ints(s), dtype_is_float(dt) ? c.d(fill) : c.i(static_cast<int64_t>(fill))},
                      {out})
                    .ok());
        require_close(read(out), std::vector<double>(n, fill), dt);
      }
      {
        Call c("aten::full.default");
        Value* out = c.out(dt, s);
        REQUIRE(
            c.run({c.ints(s), c.d(fill), c.dtype(dt), c.none(), c.none(), c.none()}, {out}).ok());
        require_close(read(out), std::vector<double>(n, cast_to(dt, fill)), dt);
      }
      for (const char* name : {"aten::ones.out", "aten::zeros.out"}) {
        Call c(name);
        Value* out = c.out(dt, s);
        REQUIRE(c.run({c.ints(s)}, {out}).ok());
        const double v = std::string(name) == "aten::ones.out" ? 1 : 0;
        require_close(read(out), std::vector<double>(n, v), dt);
      }
      for (const char* name : {"aten::ones.default", "aten::zeros.default"}) {
        Call c(name);
        Value* out = c.out(dt, s);
        REQUIRE(c.run({c.ints(s), c.none(), c.none(), c.none(), c.none()}, {out}).ok());
        const double v = std::string(name) == "aten::ones.default" ? 1 : 0;
        require_close(read(out), std::vector<double>(n, v), dt);
      }
    }
  }
  // Large integers are filled exactly.
  Call c("aten::full.out");
  Value* out = c.out(DType::kInt64, {2});
  REQUIRE(c.run({c.ints({2}), c.i(9007199254740993)}, {out}).ok());
  CHECK(out->tensor.data_as<int64_t>()[1] == 9007199254740993);
  Call z("aten::zeros.default");
  CHECK(z.run({z.ints({2}), z.dtype(DType::kInt32), z.none(), z.none(), z.none()},
              {z.out(DType::kFloat32, {2})})
            .message() == "aten::zeros.default: out has dtype float32, expected int32");
  CHECK(z.run({z.ints({3}), z.none(), z.none(), z.none(), z.none()}, {z.out(DType::kFloat32, {2})})
            .message() == "aten::zeros.default: out has shape [2], expected [3]");
}

// check_embedding, check_permute, check_select, check_slice, check_constant_pad_nd: the errors
// the CUDA kernels give too.
TEST_CASE("layout and gather argument errors") {
  Call e("aten::embedding.out");
  Value* w3 = e.random(DType::kFloat32, {2, 2, 2}, 1);
  Value* idx = e.tensor(DType::kInt64, {1}, {0});
  CHECK(e.run({w3, idx, e.i(-1), e.b(false), e.b(false)}, {e.out(DType::kFloat32, {1, 2})})
            .message() == "aten::embedding.out: weight must have rank 2, got [2, 2, 2]");
  Call p("aten::permute_copy.out");
  Value* x = p.random(DType::kFloat32, {2, 3}, 2);
  CHECK(p.run({x, p.ints({1})}, {p.out(DType::kFloat32, {3})}).message() ==
        "aten::permute_copy.out: dims [1] must have one entry per dim of self [2, 3]");
  Call s("aten::select_copy.int_out");
  Value* x0 = s.random(DType::kFloat32, {}, 3);
  CHECK(s.run({x0, s.i(0), s.i(0)}, {s.out(DType::kFloat32, {})}).message() ==
        "aten::select_copy.int_out: cannot select from a zero-dimensional tensor");
  Call sl("aten::slice_copy.Tensor_out");
  CHECK(sl.run({x0, sl.i(0), sl.none(), sl.none(), sl.i(1)}, {sl.out(DType::kFloat32, {})})
            .message() == "aten::slice_copy.Tensor_out: cannot slice a zero-dimensional tensor");
  Call pad("aten::constant_pad_nd.out");
  CHECK(pad.run({x, pad.ints({-2, -2}), pad.d(0)}, {pad.out(DType::kFloat32, {2, 0})}).message() ==
        "aten::constant_pad_nd.out: padding makes dim 1 of self [2, 3] negative");
  CHECK(pad.run({x, pad.ints({-4, 5}), pad.d(0)}, {pad.out(DType::kFloat32, {2, 4})}).message() ==
        "aten::constant_pad_nd.out: pad crops more than dim 1 of self [2, 3] holds");
  const int64_t big = std::numeric_limits<int64_t>::max();
  CHECK(pad.run({x, pad.ints({big, 1}), pad.d(0)}, {pad.out(DType::kFloat32, {2, 4})}).message() ==
        "aten::constant_pad_nd.out: padding dim 1 overflows a 64-bit size");
  // A step past the slice's length takes its first element (end - start + step - 1 left int64).
  Call sl2("aten::slice_copy.Tensor_out");
  Value* xs = sl2.random(DType::kFloat32, {2, 3}, 4);
  CHECK(
      sl2.run({xs, sl2.i(1), sl2.i(1), sl2.none(), sl2.i(big)}, {sl2.out(DType::kFloat32, {2, 1})})
          .message()
          .empty());
  CHECK(pad.run({x, pad.ints({1}), pad.d(0)}, {pad.out(DType::kFloat32, {2, 4})}).message() ==
        "aten::constant_pad_nd.out: pad must have an even number of values, at most 2 per dim of "
        "self [2, 3], got 1");
}

}  // namespace
}  // namespace etc::rt::test
