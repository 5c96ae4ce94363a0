// Shared by the benchmarks: builds graphs through the Graph API with output types inferred
// by etc's own shape inference, and the model generators both benchmarks use (MLP chains,
// ResNets, transformer stacks, random DAGs, and a small repeating transformer block for
// scaling runs). Constants are windows into a shared zero-filled blob (grown when a larger
// constant needs it), so a graph with many large weights allocates little beyond the IR.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "graph/ops.h"
#include "support/file_io.h"

namespace etc::bench {

[[noreturn]] inline void die(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::exit(2);
}

using NamedArgs = std::initializer_list<std::pair<std::string_view, ArgValue>>;
using Ints = std::vector<int64_t>;

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name) { graph_.name = std::move(name); }

  Graph& graph() { return graph_; }
  Graph take() { return std::move(graph_); }
  size_t nodes() const { return graph_.order().size(); }

  ValueId input(Ints sizes, DType dtype = DType::kFloat32) {
    return graph_.add_input("in" + std::to_string(graph_.inputs().size()),
                            TensorSpec::make(dtype, std::move(sizes)));
  }

  // A float32 constant whose bytes (zeros) are a window into a shared blob.
  ValueId constant(Ints sizes) {
    TensorSpec spec = TensorSpec::make(DType::kFloat32, std::move(sizes));
    size_t bytes = static_cast<size_t>(spec.nbytes());
    if (!zeros_ || zeros_->bytes().size() < bytes)
      zeros_ = make_blob(std::string(std::max<size_t>(bytes, 4096), '\0'));
    spec.constant = ConstantData{zeros_, 0, bytes};
    return graph_.add_constant("c" + std::to_string(graph_.value_slots()), std::move(spec));
  }

  // Adds one node; returns its outputs. Output types come from etc's shape inference, so an
  // inconsistent generator fails here rather than in the pipeline.
  std::vector<ValueId> op(OpKind kind, NamedArgs named) {
    Result<std::vector<ArgValue>> args = bind_args(kind, named);
    if (!args.ok()) die("bind_args: " + args.status().to_string());
    std::vector<TensorType> types;
    Status s = infer_types(
        kind, *args, [this](ValueId v) -> const TensorSpec& { return graph_.value(v).spec; },
        Location{}, &types);
    if (!s.ok()) die("infer_types(" + op_info(kind).name + "): " + s.to_string());
    std::vector<std::string> names;
    std::vector<TensorSpec> specs;
    for (TensorType& t : types) {
      names.push_back("v" + std::to_string(graph_.value_slots() + names.size()));
      specs.push_back(TensorSpec::make(t.dtype, std::move(t.sizes)));
    }
    NodeId id = graph_.add_node(kind, "n" + std::to_string(graph_.node_slots()), std::move(*args),
                                std::move(names), std::move(specs));
    return graph_.node(id).outputs;
  }
  ValueId op1(OpKind kind, NamedArgs named) { return op(kind, named)[0]; }

  // Common building blocks.
  ValueId linear(ValueId x, int64_t out_features, bool bias = true) {
    int64_t in_features = graph_.value(x).spec.sizes.back();
    ValueId w = constant({out_features, in_features});
    ArgValue b = bias ? ArgValue(constant({out_features})) : ArgValue(std::monostate{});
    return op1(OpKind::Linear, {{"input", x}, {"weight", w}, {"bias", b}});
  }
  ValueId unary(OpKind kind, ValueId x) { return op1(kind, {{"self", x}}); }
  ValueId binary(OpKind kind, ValueId a, ValueId b) {
    return op1(kind, {{"self", a}, {"other", b}});
  }
  ValueId view(ValueId x, Ints sizes) { return op1(OpKind::View, {{"self", x}, {"size", sizes}}); }
  ValueId reshape(ValueId x, Ints sizes) {
    return op1(OpKind::Reshape, {{"self", x}, {"shape", sizes}});
  }
  ValueId permute(ValueId x, Ints dims) {
    return op1(OpKind::Permute, {{"self", x}, {"dims", dims}});
  }
  ValueId layer_norm(ValueId x) {
    int64_t d = graph_.value(x).spec.sizes.back();
    return op(OpKind::NativeLayerNorm, {{"input", x},
                                        {"normalized_shape", Ints{d}},
                                        {"weight", constant({d})},
                                        {"bias", constant({d})},
                                        {"eps", 1e-5}})[0];
  }
  ValueId softmax(ValueId x, int64_t dim) {
    return op1(OpKind::Softmax, {{"self", x}, {"dim", dim}, {"half_to_float", false}});
  }
  ValueId conv2d(ValueId x, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding) {
    int64_t in_channels = graph_.value(x).spec.sizes[1];
    ValueId w = constant({out_channels, in_channels, kernel, kernel});
    return op1(OpKind::Convolution, {{"input", x},
                                     {"weight", w},
                                     {"bias", std::monostate{}},
                                     {"stride", Ints{stride, stride}},
                                     {"padding", Ints{padding, padding}},
                                     {"dilation", Ints{1, 1}},
                                     {"transposed", false},
                                     {"output_padding", Ints{0, 0}},
                                     {"groups", int64_t{1}}});
  }
  ValueId batch_norm(ValueId x) {
    int64_t c = graph_.value(x).spec.sizes[1];
    return op(OpKind::NativeBatchNormNoTraining, {{"input", x},
                                                  {"weight", constant({c})},
                                                  {"bias", constant({c})},
                                                  {"running_mean", constant({c})},
                                                  {"running_var", constant({c})},
                                                  {"momentum", 0.1},
                                                  {"eps", 1e-5}})[0];
  }

  const Ints& sizes(ValueId v) const { return graph_.value(v).spec.sizes; }

 private:
  Graph graph_;
  std::shared_ptr<const Blob> zeros_;
};

// ---- Models ------------------------------------------------------------------------------

// An MLP: linear + relu per layer over the given widths (widths[0] is the input width).
inline Graph make_mlp(const std::string& name, int64_t batch, const Ints& widths) {
  GraphBuilder b(name);
  ValueId x = b.input({batch, widths[0]});
  for (size_t i = 1; i < widths.size(); ++i) {
    x = b.linear(x, widths[i]);
    if (i + 1 < widths.size()) x = b.unary(OpKind::Relu, x);
  }
  b.graph().set_outputs({x});
  return b.take();
}

// A ResNet with basic blocks (conv-bn-relu-conv-bn + skip, 1x1 conv on the skip when the
// shape changes) on [batch, 3, image, image].
inline Graph make_resnet(const std::string& name, int64_t batch, int64_t image,
                         const std::vector<int>& blocks_per_stage) {
  GraphBuilder b(name);
  ValueId x = b.input({batch, 3, image, image});
  x = b.unary(OpKind::Relu, b.batch_norm(b.conv2d(x, 64, 7, 2, 3)));
  x = b.op1(
      OpKind::MaxPool2d,
      {{"self", x}, {"kernel_size", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"padding", Ints{1, 1}}});
  int64_t channels = 64;
  for (size_t stage = 0; stage < blocks_per_stage.size(); ++stage) {
    for (int blk = 0; blk < blocks_per_stage[stage]; ++blk) {
      int64_t stride = (stage > 0 && blk == 0) ? 2 : 1;
      ValueId skip = x;
      ValueId h = b.unary(OpKind::Relu, b.batch_norm(b.conv2d(x, channels, 3, stride, 1)));
      h = b.batch_norm(b.conv2d(h, channels, 3, 1, 1));
      if (stride != 1 || b.sizes(skip)[1] != channels)
        skip = b.batch_norm(b.conv2d(skip, channels, 1, stride, 0));
      x = b.unary(OpKind::Relu, b.binary(OpKind::AddTensor, h, skip));
    }
    channels *= 2;
  }
  x = b.op1(OpKind::AdaptiveAvgPool2d, {{"self", x}, {"output_size", Ints{1, 1}}});
  x = b.view(x, {batch, b.sizes(x)[1]});
  x = b.linear(x, 1000);
  b.graph().set_outputs({x});
  return b.take();
}

// One pre-norm transformer layer on x: [batch, seq, dim].
inline ValueId transformer_layer(GraphBuilder& b, ValueId x, int64_t heads, int64_t ffn) {
  const Ints s = b.sizes(x);
  const int64_t batch = s[0], seq = s[1], dim = s[2], head_dim = dim / heads;
  ValueId h = b.layer_norm(x);
  ValueId q = b.linear(h, dim), k = b.linear(h, dim), v = b.linear(h, dim);
  auto heads_first = [&](ValueId t, Ints perm, Ints shape) {
    return b.reshape(b.permute(b.view(t, {batch, seq, heads, head_dim}), std::move(perm)),
                     std::move(shape));
  };
  ValueId q3 = heads_first(q, {0, 2, 1, 3}, {batch * heads, seq, head_dim});
  ValueId k3 = heads_first(k, {0, 2, 3, 1}, {batch * heads, head_dim, seq});
  ValueId v3 = heads_first(v, {0, 2, 1, 3}, {batch * heads, seq, head_dim});
  ValueId scores = b.op1(OpKind::Bmm, {{"self", q3}, {"mat2", k3}});
  scores = b.op1(OpKind::MulScalar,
                 {{"self", scores}, {"other", Scalar{1.0 / static_cast<double>(head_dim)}}});
  ValueId p = b.softmax(scores, -1);
  ValueId o = b.op1(OpKind::Bmm, {{"self", p}, {"mat2", v3}});
  o = b.reshape(b.permute(b.view(o, {batch, heads, seq, head_dim}), {0, 2, 1, 3}),
                {batch, seq, dim});
  x = b.binary(OpKind::AddTensor, x, b.linear(o, dim));
  h = b.layer_norm(x);
  h = b.linear(b.unary(OpKind::Gelu, b.linear(h, ffn)), dim);
  return b.binary(OpKind::AddTensor, x, h);
}

inline Graph make_transformer(const std::string& name, int64_t batch, int64_t seq, int64_t dim,
                              int64_t heads, int64_t ffn, int layers) {
  GraphBuilder b(name);
  ValueId x = b.input({batch, seq, dim});
  for (int i = 0; i < layers; ++i)
    x = transformer_layer(b, x, heads, ffn);
  x = b.layer_norm(x);
  b.graph().set_outputs({x});
  return b.take();
}

// A random DAG of about `nodes` nodes over [batch, width] float32 tensors: unary ops,
// binary ops joining two values, linears and slices that change the width, concatenations,
// row-max normalisation, and (about 3% of nodes) a float64 round trip that the CUDA delegate
// cannot run, so --target cuda splits the graph into many partitions. Operands come mostly
// from recent values; 5% come from anywhere earlier (long skips, which keep many tensors
// alive at once in large DAGs). A value about to leave the recent window unused is joined
// into the newest one (add, cat, or linear + add), so, as in real models, almost everything
// flows into the single graph output.
inline Graph make_random_dag(const std::string& name, size_t nodes, uint32_t seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  const Ints widths = {32, 64, 128, 256, 512, 1024, 2048};
  const size_t window = 16;
  const int64_t batch = static_cast<int64_t>(8 << uniform(4));
  GraphBuilder b(name);
  std::vector<ValueId> values = {b.input({batch, widths[uniform(widths.size())]}),
                                 b.input({batch, widths[uniform(widths.size())]})};
  std::vector<bool> used(2, false);
  auto width = [&](ValueId v) { return b.sizes(v)[1]; };
  auto push = [&](ValueId v) {
    values.push_back(v);
    used.push_back(false);
  };
  // An operand: mostly the newest value or a recent one, sometimes any earlier value.
  auto pick = [&]() -> size_t {
    const size_t n = values.size(), w = std::min(n, window);
    if (chance(0.5)) return n - 1;
    if (chance(0.9)) return n - 1 - uniform(w);
    return uniform(n);
  };
  // Joins values[yi] into the newest value.
  auto join = [&](size_t yi) {
    ValueId x = values.back(), y = values[yi];
    used[yi] = used[values.size() - 1] = true;
    if (width(x) == width(y)) {
      push(b.binary(OpKind::AddTensor, x, y));
    } else if (width(x) + width(y) <= 4096) {
      push(b.op1(OpKind::Cat, {{"tensors", std::vector<ValueId>{x, y}}, {"dim", int64_t{1}}}));
    } else {
      push(b.binary(OpKind::AddTensor, x, b.linear(y, width(x))));
    }
  };
  size_t oldest_unused = 0;
  auto pending = [&] {  // unused values before the newest: each costs a join at the end
    size_t n = 0;
    for (size_t i = oldest_unused; i + 1 < values.size(); ++i)
      n += !used[i];
    return n;
  };
  while (b.nodes() + pending() < nodes) {
    while (oldest_unused + 1 < values.size() && used[oldest_unused])
      ++oldest_unused;
    if (oldest_unused + window < values.size()) {
      join(oldest_unused);
      continue;
    }
    size_t xi = pick();
    ValueId x = values[xi];
    used[xi] = true;
    double r = std::uniform_real_distribution<double>(0, 1)(rng);
    if (r < 0.28) {
      static const OpKind kUnary[] = {OpKind::Relu, OpKind::Gelu, OpKind::Sigmoid, OpKind::Tanh};
      push(b.unary(kUnary[uniform(4)], x));
    } else if (r < 0.52) {
      // A second operand of the same width among recent values, else x itself.
      size_t yi = xi;
      for (int tries = 0; tries < 8; ++tries) {
        size_t c = pick();
        if (width(values[c]) == width(x)) {
          yi = c;
          break;
        }
      }
      used[yi] = true;
      push(b.binary(chance(0.7) ? OpKind::AddTensor : OpKind::MulTensor, x, values[yi]));
    } else if (r < 0.72) {
      push(b.linear(x, widths[uniform(widths.size())]));
    } else if (r < 0.80) {
      size_t yi = pick();
      used[yi] = true;
      if (width(x) + width(values[yi]) > 4096) {
        push(b.unary(OpKind::Relu, x));
      } else {
        push(b.op1(OpKind::Cat,
                   {{"tensors", std::vector<ValueId>{x, values[yi]}}, {"dim", int64_t{1}}}));
      }
    } else if (r < 0.87 && width(x) > 32) {
      push(b.op1(OpKind::SliceTensor,
                 {{"self", x}, {"dim", int64_t{1}}, {"start", int64_t{0}}, {"end", width(x) / 2}}));
    } else if (r < 0.97 || b.nodes() + 3 > nodes) {
      ValueId m = b.op1(OpKind::Amax, {{"self", x}, {"dim", Ints{1}}, {"keepdim", true}});
      push(b.binary(OpKind::SubTensor, x, m));
    } else {
      ValueId d = b.op1(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kFloat64}});
      push(b.op1(OpKind::ToCopy, {{"self", b.unary(OpKind::Exp, d)}, {"dtype", DType::kFloat32}}));
    }
  }
  // Join whatever is still unused (a few recent values) into the single output.
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    if (!used[i] && b.graph().value(values[i]).uses.empty()) join(i);
  }
  b.graph().set_outputs({values.back()});
  return b.take();
}

// The scaling pattern: a pre-norm transformer block as torch.export writes it, on tiny
// tensors ([1, 4, 8]), 30 nodes per block. Besides the attention and MLP ops it has what
// real exports carry: a `clone` (remove-noops drops it), a transposed weight
// (`permute(W)` feeding `addmm`, which fold-constants folds) and `view`s around addmm.
// With `host_every` > 0, every host_every-th block ends with a float64 round trip (two
// `_to_copy` nodes the CUDA delegate cannot run), splitting the delegates.
inline constexpr size_t kScalingBlockNodes = 31;  // without the host round trip

inline void add_scaling_block(GraphBuilder& b, ValueId& x, size_t block, size_t host_every) {
  const int64_t seq = 4, dim = 8, heads = 2, head_dim = 4, ffn = 16;
  ValueId h = b.layer_norm(x);
  ValueId q = b.linear(h, dim), k = b.linear(h, dim), v = b.linear(h, dim);
  auto heads_first = [&](ValueId t, Ints perm, Ints shape) {
    return b.reshape(b.permute(b.view(t, {1, seq, heads, head_dim}), std::move(perm)),
                     std::move(shape));
  };
  ValueId q3 = heads_first(q, {0, 2, 1, 3}, {heads, seq, head_dim});
  ValueId k3 = heads_first(k, {0, 2, 3, 1}, {heads, head_dim, seq});
  ValueId v3 = heads_first(v, {0, 2, 1, 3}, {heads, seq, head_dim});
  ValueId s = b.op1(OpKind::Bmm, {{"self", q3}, {"mat2", k3}});
  s = b.op1(OpKind::MulScalar, {{"self", s}, {"other", Scalar{0.5}}});
  ValueId o = b.op1(OpKind::Bmm, {{"self", b.softmax(s, -1)}, {"mat2", v3}});
  o = b.reshape(b.permute(b.view(o, {1, heads, seq, head_dim}), {0, 2, 1, 3}), {1, seq, dim});
  o = b.unary(OpKind::Clone, o);
  ValueId wt = b.permute(b.constant({dim, dim}), {1, 0});
  ValueId a = b.op1(OpKind::Addmm,
                    {{"self", b.constant({dim})}, {"mat1", b.view(o, {seq, dim})}, {"mat2", wt}});
  x = b.binary(OpKind::AddTensor, x, b.view(a, {1, seq, dim}));
  h = b.linear(b.unary(OpKind::Gelu, b.linear(b.layer_norm(x), ffn)), dim);
  x = b.binary(OpKind::AddTensor, x, h);
  if (host_every > 0 && block % host_every == host_every - 1) {
    ValueId d = b.op1(OpKind::ToCopy, {{"self", x}, {"dtype", DType::kFloat64}});
    x = b.op1(OpKind::ToCopy, {{"self", d}, {"dtype", DType::kFloat32}});
  }
}

inline Graph make_scaling_graph(size_t nodes, size_t host_every) {
  GraphBuilder b("scaling_" + std::to_string(nodes));
  ValueId x = b.input({1, 4, 8});
  for (size_t block = 0; b.nodes() < nodes; ++block)
    add_scaling_block(b, x, block, host_every);
  b.graph().set_outputs({x});
  return b.take();
}

}  // namespace etc::bench
