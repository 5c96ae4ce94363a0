#include "passes/fold_constants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "consteval/evaluate.h"

namespace etc {
namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;)
    s[i - 1] = s[i] * std::max<int64_t>(sizes[i], 1);
  return s;
}

// Copies the strided view (sizes, element strides, element offset) of `in` into `out`
// contiguously; `elem` is the element size.
// Copies an R x C block whose input strides are (sr, sc) elements, in 32 x 32 tiles so that
// a transpose reads and writes whole cache lines (a weight transpose is most of the work
// when folding a large model). Elements are copied with fixed-size memcpy: the input may be a
// window into a mapped archive at any alignment.
template <size_t E>
void copy_block(const uint8_t* in, int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                uint8_t* out) {
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* src = in + static_cast<size_t>(r * sr) * E;
        uint8_t* dst = out + static_cast<size_t>(r * cols) * E;
        for (int64_t c = c0; c < c1; ++c)
          std::memcpy(dst + static_cast<size_t>(c) * E, src + static_cast<size_t>(c * sc) * E, E);
      }
    }
  }
}

void copy_block_bytes(const uint8_t* in, int64_t rows, int64_t cols, int64_t sr, int64_t sc,
                      size_t elem, uint8_t* out) {
  if (sc == 1) {  // rows are contiguous runs
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out + static_cast<size_t>(r * cols) * elem,
                  in + static_cast<size_t>(r * sr) * elem, static_cast<size_t>(cols) * elem);
    }
    return;
  }
  switch (elem) {
    case 1:
      return copy_block<1>(in, rows, cols, sr, sc, out);
    case 2:
      return copy_block<2>(in, rows, cols, sr, sc, out);
    case 4:
      return copy_block<4>(in, rows, cols, sr, sc, out);
    case 8:
      return copy_block<8>(in, rows, cols, sr, sc, out);
    default:
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          std::memcpy(out + static_cast<size_t>(r * cols + c) * elem,
                      in + static_cast<size_t>(r * sr + c * sc) * elem, elem);
        }
      }
  }
}

// out (contiguous, `sizes`) = the elements of `in` at offset + sum(index[d] * strides[d]).
// The two innermost output dims are copied as a block; the outer ones are iterated.
void gather(const uint8_t* in, const std::vector<int64_t>& sizes,
            const std::vector<int64_t>& strides, int64_t offset, size_t elem, uint8_t* out) {
  const size_t rank = sizes.size();
  for (int64_t d : sizes)
    if (d == 0) return;
  if (rank == 0) {
    std::memcpy(out, in + static_cast<size_t>(offset) * elem, elem);
    return;
  }
  const int64_t cols = sizes[rank - 1], sc = strides[rank - 1];
  const int64_t rows = rank >= 2 ? sizes[rank - 2] : 1, sr = rank >= 2 ? strides[rank - 2] : 0;
  const size_t outer_rank = rank >= 2 ? rank - 2 : 0;
  int64_t outer = 1;
  for (size_t d = 0; d < outer_rank; ++d)
    outer *= sizes[d];
  std::vector<int64_t> idx(outer_rank, 0);
  const size_t block = static_cast<size_t>(rows * cols) * elem;
  for (int64_t i = 0; i < outer; ++i) {
    int64_t src = offset;
    for (size_t d = 0; d < outer_rank; ++d)
      src += idx[d] * strides[d];
    copy_block_bytes(in + static_cast<size_t>(src) * elem, rows, cols, sr, sc, elem,
                     out + static_cast<size_t>(i) * block);
    for (size_t d = outer_rank; d-- > 0;) {
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

// ATen's cast semantics (convert_element), element by element.
void convert(DType from, DType to, const uint8_t* in, uint8_t* out, int64_t n) {
  const size_t si = static_cast<size_t>(dtype_size(from)), so = static_cast<size_t>(dtype_size(to));
  for (int64_t i = 0; i < n; ++i, in += si, out += so)
    convert_element(from, in, to, out);
}

// The most elements of an 8-bit integer constant that a widening cast folds: biases and
// zero points fold, weight matrices stay packed.
constexpr int64_t kMaxWidenedQuantized = 4096;

// Whether casting `in` to `to` widens a packed quantized weight: more than
// kMaxWidenedQuantized 8-bit integers cast to a wider type (float for DequantizeLinear, int32
// or int64 for the integer products). Folding it would store the weight at 2-8 times its
// size; it stays packed in the program and is widened at run time.
bool widens_packed_weight(const TensorSpec& in, DType to) {
  return (in.dtype == DType::kInt8 || in.dtype == DType::kUInt8) && dtype_size(to) > 1 &&
         in.numel() > kMaxWidenedQuantized;
}

struct Folder {
  const Graph& g;
  const Node& n;
  WritableArena& arena;  // memory for strided copies
  const OpSchema& schema = op_info(n.op).schema;

  const ArgValue& arg(const char* name) const {
    return n.args[static_cast<size_t>(schema.arg_index(name))];
  }
  int64_t int_arg(const char* name) const { return std::get<int64_t>(arg(name)); }
  const TensorSpec& self() const { return g.value(std::get<ValueId>(n.args[0])).spec; }
  static int64_t wrap(int64_t d, size_t rank) {
    return d < 0 ? d + static_cast<int64_t>(std::max<size_t>(rank, 1)) : d;
  }

  std::optional<ConstantData> evaluated() const;

  // The folded bytes of output 0, or nullopt when this node is not foldable.
  std::optional<ConstantData> run() const {
    const TensorSpec& out = g.value(n.outputs[0]).spec;
    const size_t elem = static_cast<size_t>(dtype_size(out.dtype));
    auto fresh = [&](std::string bytes) {
      size_t size = bytes.size();
      return ConstantData{make_blob(std::move(bytes)), 0, size};
    };
    switch (n.op) {
      case OpKind::FullLike: {
        const Scalar& v = std::get<Scalar>(arg("fill_value"));
        std::string bytes(static_cast<size_t>(out.nbytes()), '\0');
        if (out.numel() > 0) {
          if (dtype_is_float(out.dtype)) {
            store_float_as(out.dtype, v.to_double(), bytes.data());
          } else {
            const auto i = static_cast<int64_t>(v.to_double());
            std::memcpy(bytes.data(), &i, elem);  // little-endian: the low bytes
          }
          for (size_t k = elem; k < bytes.size(); k += elem)
            std::memcpy(bytes.data() + k, bytes.data(), elem);
        }
        return fresh(std::move(bytes));
      }
      case OpKind::View:
      case OpKind::Reshape:
      case OpKind::Clone:
      case OpKind::SqueezeDim:
      case OpKind::SqueezeDims:
      case OpKind::Unsqueeze:
        return self().constant;  // same elements, same order: share the bytes
      case OpKind::ToCopy: {
        if (self().dtype == out.dtype) return self().constant;
        if (widens_packed_weight(self(), out.dtype)) return std::nullopt;
        std::string bytes(static_cast<size_t>(out.nbytes()), '\0');
        convert(self().dtype, out.dtype, self().constant.bytes().data(),
                reinterpret_cast<uint8_t*>(bytes.data()), out.numel());
        return fresh(std::move(bytes));
      }
      case OpKind::Cat: {
        const auto& ins = std::get<std::vector<ValueId>>(arg("tensors"));
        for (ValueId v : ins) {
          if (g.value(v).spec.dtype != out.dtype) return std::nullopt;  // mixed dtypes: leave it
        }
        int64_t dim = wrap(int_arg("dim"), out.rank());
        std::string bytes(static_cast<size_t>(out.nbytes()), '\0');
        // outer = product of dims before `dim`; each input contributes a contiguous chunk per outer
        // index.
        int64_t outer = 1;
        for (int64_t d = 0; d < dim; ++d)
          outer *= out.sizes[static_cast<size_t>(d)];
        size_t pos = 0;
        for (int64_t o = 0; o < outer; ++o) {
          for (ValueId v : ins) {
            const TensorSpec& s = g.value(v).spec;
            if (s.rank() == 1 && s.sizes[0] == 0) continue;
            size_t chunk = static_cast<size_t>(s.nbytes() / std::max<int64_t>(outer, 1));
            std::memcpy(bytes.data() + pos,
                        s.constant.bytes().data() + static_cast<size_t>(o) * chunk, chunk);
            pos += chunk;
          }
        }
        return fresh(std::move(bytes));
      }
      default:
        break;
    }
    // Strided views: describe output dim d by a stride into the input and an offset.
    const TensorSpec& in = self();
    std::vector<int64_t> in_strides = contiguous_strides(in.sizes);
    std::vector<int64_t> strides;
    int64_t offset = 0;
    switch (n.op) {
      case OpKind::Permute:
        for (int64_t d : std::get<std::vector<int64_t>>(arg("dims"))) {
          strides.push_back(in_strides[static_cast<size_t>(wrap(d, in.rank()))]);
        }
        break;
      case OpKind::TransposeInt: {
        strides = in_strides;
        if (in.rank() > 0) {
          std::swap(strides[static_cast<size_t>(wrap(int_arg("dim0"), in.rank()))],
                    strides[static_cast<size_t>(wrap(int_arg("dim1"), in.rank()))]);
        }
        break;
      }
      case OpKind::Expand: {
        size_t lead = out.rank() - in.rank();
        strides.assign(out.rank(), 0);
        for (size_t d = 0; d < in.rank(); ++d)
          strides[lead + d] = in.sizes[d] == 1 ? 0 : in_strides[d];
        break;
      }
      case OpKind::SliceTensor: {
        int64_t dim = wrap(int_arg("dim"), in.rank());
        int64_t size = in.sizes[static_cast<size_t>(dim)];
        int64_t start = 0;
        if (auto* s = std::get_if<int64_t>(&arg("start")))
          start = std::clamp<int64_t>(*s < 0 ? *s + size : *s, 0, size);
        strides = in_strides;
        strides[static_cast<size_t>(dim)] *= int_arg("step");
        offset = start * in_strides[static_cast<size_t>(dim)];
        break;
      }
      case OpKind::SelectInt: {
        int64_t dim = wrap(int_arg("dim"), in.rank());
        int64_t index = int_arg("index");
        if (index < 0) index += in.sizes[static_cast<size_t>(dim)];
        offset = index * in_strides[static_cast<size_t>(dim)];
        strides = in_strides;
        strides.erase(strides.begin() + dim);
        break;
      }
      default:
        return evaluated();
    }
    const auto size = static_cast<size_t>(out.nbytes());
    WritableArena::Piece piece = arena.allocate(size);
    gather(in.constant.bytes().data(), out.sizes, strides, offset, elem, piece.data);
    return ConstantData{std::move(piece.blob), piece.offset, size};
  }
};

// The bytes of output 0 computed by the op's CPU kernel (consteval/evaluate.h), for ops
// without a copy above: when the op is evaluable, has one output, and folding keeps the
// program small (a dequantized weight or an outer product stays a node). A kernel's refusal
// is left for the verifier and the runtime to report, where it is located.
std::optional<ConstantData> Folder::evaluated() const {
  if (!why_not_evaluable(n.op).empty()) return std::nullopt;
  int64_t in_bytes = 0;
  for (ValueId v : tensor_args(n))
    in_bytes += g.value(v).spec.nbytes();
  if (!keeps_program_small(in_bytes, g.value(n.outputs[0]).spec.nbytes())) return std::nullopt;
  Result<std::vector<ConstantData>> r = evaluate_node(g, n);
  if (!r.ok()) return std::nullopt;
  return std::move(r->front());
}

bool all_inputs_constant(const Graph& g, const Node& n) {
  std::vector<ValueId> ins = tensor_args(n);
  return !ins.empty() && std::all_of(ins.begin(), ins.end(), [&](ValueId v) {
    return g.value(v).kind == ValueKind::kConstant;
  });
}

// Moves the run-time dequantization of packed weights (an 8-bit constant's widening, left
// above, and the nodes after it that read only constants and such values) to just before the
// first node that reads its result. A QDQ model lists every weight's DequantizeLinear first;
// in that order all the widened weights would be live at once. Returns whether the order
// changed.
bool sink_widened_weights(Graph& graph) {
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  size_t ids = 0;
  for (NodeId id : order)
    ids = std::max<size_t>(ids, id.v + 1);
  std::vector<char> sunk(ids, 0);
  bool any = false;
  auto known = [&](ValueId v) {
    const Value& val = graph.value(v);
    return val.kind == ValueKind::kConstant ||
           (val.kind == ValueKind::kNodeOutput && sunk[val.producer.v]);
  };
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    if (n.delegate != nullptr) continue;
    std::vector<ValueId> ins = tensor_args(n);
    if (ins.empty() || !std::all_of(ins.begin(), ins.end(), known)) continue;
    const bool root =
        n.op == OpKind::ToCopy && graph.value(ins[0]).kind == ValueKind::kConstant &&
        widens_packed_weight(graph.value(ins[0]).spec, graph.value(n.outputs[0]).spec.dtype);
    const bool follows = std::any_of(ins.begin(), ins.end(), [&](ValueId v) {
      return graph.value(v).kind == ValueKind::kNodeOutput;
    });
    if (root || follows) {
      sunk[id.v] = 1;
      any = true;
    }
  }
  if (!any) return false;
  // The new order: every other node in place, each preceded by the sunk nodes it needs
  // (depth first, producers before users) that are not placed yet; sunk nodes nothing
  // reads (graph outputs) go last.
  std::vector<NodeId> placed;
  placed.reserve(order.size());
  std::vector<char> done(ids, 0);
  std::function<void(NodeId)> place = [&](NodeId id) {
    if (done[id.v]) return;
    done[id.v] = 1;
    for (ValueId v : tensor_args(graph.node(id))) {
      const Value& val = graph.value(v);
      if (val.kind == ValueKind::kNodeOutput && sunk[val.producer.v]) place(val.producer);
    }
    placed.push_back(id);
  };
  for (NodeId id : order) {
    if (!sunk[id.v]) place(id);
  }
  for (NodeId id : order)
    place(id);
  return placed != order && graph.set_order(placed);
}

}  // namespace

Result<bool> fold_constants(Graph& graph, PassContext&) {
  bool changed = false;
  WritableArena arena;
  std::vector<NodeId> order(graph.order().begin(), graph.order().end());
  for (NodeId id : order) {
    const Node& n = graph.node(id);
    if (n.outputs.size() != 1 || n.delegate != nullptr || graph.is_live_out(n.outputs[0])) continue;
    // full_like reads only its self's shape: a static one folds whatever self is.
    const bool static_fill = n.op == OpKind::FullLike &&
                             graph.value(n.outputs[0]).spec.dynamism == ShapeDynamism::kStatic;
    if (!static_fill && !all_inputs_constant(graph, n)) continue;
    std::optional<ConstantData> data = Folder{graph, n, arena}.run();
    if (!data) continue;
    ValueId out = n.outputs[0];
    TensorSpec spec = TensorSpec::make(graph.value(out).spec.dtype, graph.value(out).spec.sizes);
    spec.constant = std::move(*data);
    std::string name = graph.value(out).name;
    std::vector<ValueId> inputs = tensor_args(n);
    ValueId folded = graph.add_constant(graph.unique_value_name(name + ".folded"), std::move(spec));
    graph.replace_all_uses(out, folded);
    graph.erase_node(id);
    // An input nothing else reads goes now (not at the next dce): a mapped weight's pages are
    // released as soon as its folded form exists, so folding does not hold both.
    for (ValueId in : inputs)
      graph.erase_constant(in);
    graph.rename_value(folded, name);  // the original name is free again
    changed = true;
  }
  if (sink_widened_weights(graph)) changed = true;
  return changed;
}

}  // namespace etc
