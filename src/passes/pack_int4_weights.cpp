#include "passes/pack_int4_weights.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "graph/int4.h"

namespace etc {
namespace {

// Whether every value of an int8 constant fits in a nibble.
bool all_fit(const TensorSpec& spec) {
  const std::span<const uint8_t> bytes = spec.constant.bytes();
  return std::all_of(bytes.begin(), bytes.end(),
                     [](uint8_t b) { return int4::fits(static_cast<int8_t>(b)); });
}

}  // namespace

Result<bool> pack_int4_weights(Graph& graph, PassContext&) {
  // Each live node's position, to find a constant's first reader.
  std::unordered_map<uint32_t, size_t> position;
  const std::span<const NodeId> order = graph.order();
  for (size_t i = 0; i < order.size(); ++i)
    position[order[i].v] = i;
  std::vector<ValueId> candidates;
  for (ValueId id : graph.constants()) {
    const Value& v = graph.value(id);
    const TensorSpec& s = v.spec;
    // (A last dim of 1 would take a byte a value all the same.)
    if (s.dtype != DType::kInt8 || s.rank() == 0 || s.sizes.back() < 2 ||
        s.numel() < kMinPackedInt4 || s.constant.size != static_cast<size_t>(s.nbytes()) ||
        v.uses.empty() || graph.is_graph_output(id))
      continue;
    const bool fit = all_fit(s);
    // Read once: a mapped weight's pages leave the process (read again when written out).
    s.constant.blob->release(s.constant.offset, s.constant.size);
    if (fit) candidates.push_back(id);
  }
  // Past kComputedWeightsInMemory the packed weights go to a temporary file, and each leaves the
  // process once packed: peak memory does not grow with the model (as fold-constants).
  WritableArena arena(kComputedWeightsInMemory);
  bool changed = false;
  for (ValueId id : candidates) {
    const Value& v = graph.value(id);
    std::optional<NodeId> first;
    size_t at = std::numeric_limits<size_t>::max();
    bool nested = false;  // a reader outside the top-level order (a delegate's subgraph)
    for (const Use& u : v.uses) {
      const auto it = position.find(u.node.v);
      if (it == position.end()) {
        nested = true;
        break;
      }
      if (it->second < at) {
        at = it->second;
        first = u.node;
      }
    }
    if (nested || !first) continue;
    const std::string name = v.name;
    const std::vector<int64_t> sizes = v.spec.sizes;
    const int64_t size = sizes.back(), rows = v.spec.numel() / std::max<int64_t>(size, 1);
    const int64_t row_bytes = int4::row_bytes(size);
    TensorSpec packed_spec = TensorSpec::make(DType::kUInt8, sizes);
    packed_spec.sizes.back() = row_bytes;
    const size_t nbytes = static_cast<size_t>(rows * row_bytes);
    WritableArena::Piece piece = arena.allocate(nbytes);
    const auto* values = reinterpret_cast<const int8_t*>(v.spec.constant.bytes().data());
    for (int64_t r = 0; r < rows; ++r)
      int4::pack(values + r * size, size, piece.data + r * row_bytes);
    piece.blob->release(piece.offset, nbytes);
    packed_spec.constant = ConstantData{piece.blob, piece.offset, nbytes};
    const ValueId packed =
        graph.add_constant(graph.unique_value_name(name + ".int4"), std::move(packed_spec));
    const NodeId unpack = graph.add_node(
        OpKind::UnpackInt4, graph.unique_node_name("unpack_int4." + name),
        {ArgValue(packed), ArgValue(size)}, {graph.unique_value_name(name + ".unpacked")},
        {TensorSpec::make(DType::kInt8, sizes)}, *first);
    const ValueId unpacked = graph.node(unpack).outputs[0];
    graph.replace_all_uses(id, unpacked);
    graph.erase_constant(id);  // its bytes (mapped from the model) go with it
    graph.rename_value(unpacked, name);
    changed = true;
  }
  return changed;
}

}  // namespace etc
