#include "format/pte_model.h"

namespace etc::pte {

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kNull:
      return "Null";
    case ValueKind::kInt:
      return "Int";
    case ValueKind::kBool:
      return "Bool";
    case ValueKind::kDouble:
      return "Double";
    case ValueKind::kTensor:
      return "Tensor";
    case ValueKind::kString:
      return "String";
    case ValueKind::kIntList:
      return "IntList";
    case ValueKind::kDoubleList:
      return "DoubleList";
    case ValueKind::kBoolList:
      return "BoolList";
    case ValueKind::kTensorList:
      return "TensorList";
    case ValueKind::kOptionalTensorList:
      return "OptionalTensorList";
  }
  return "?";
}

Device Plan::buffer_device(uint32_t memory_id) const {
  for (const BufferDevice& d : buffer_devices) {
    if (d.buffer_idx == static_cast<int32_t>(memory_id)) return d.device;
  }
  return Device{};
}

std::vector<int64_t> Plan::int_list(const EValue& v) const {
  std::vector<int64_t> out;
  out.reserve(v.int_items.size());
  for (int64_t item : v.int_items) {
    bool ok = item >= 0 && static_cast<uint64_t>(item) < values.size() &&
              values[static_cast<size_t>(item)].kind == ValueKind::kInt;
    out.push_back(ok ? values[static_cast<size_t>(item)].i : 0);
  }
  return out;
}

std::span<const uint8_t> File::constant_bytes(uint32_t idx) const {
  if (program.constant_segment && program.constant_segment->offsets.size() > 1) {
    const auto& offs = program.constant_segment->offsets;
    if (idx >= offs.size() || program.constant_segment->segment_index >= segment_data.size())
      return {};
    std::span<const uint8_t> seg = segment_data[program.constant_segment->segment_index].bytes();
    if (offs[idx] > seg.size()) return {};
    return seg.subspan(static_cast<size_t>(offs[idx]));
  }
  if (idx >= program.constant_buffer.size()) return {};
  return program.constant_buffer[idx].bytes();
}

std::span<const uint8_t> File::mutable_bytes(uint32_t idx) const {
  // ExecuTorch's runtime reads the first mutable data segment only.
  if (program.mutable_data_segments.empty()) return {};
  const SubsegmentOffsets& m = program.mutable_data_segments[0];
  if (idx == 0 || idx >= m.offsets.size() || m.segment_index >= segment_data.size()) return {};
  std::span<const uint8_t> seg = segment_data[m.segment_index].bytes();
  if (m.offsets[idx] > seg.size()) return {};
  // An entry ends where the next begins (no padding between them), the last at the end.
  uint64_t end = idx + 1 < m.offsets.size() ? m.offsets[idx + 1] : seg.size();
  if (end < m.offsets[idx] || end > seg.size()) return {};
  return seg.subspan(static_cast<size_t>(m.offsets[idx]),
                     static_cast<size_t>(end - m.offsets[idx]));
}

std::span<const uint8_t> File::delegate_bytes(const Delegate& d) const {
  if (d.location == 0) {
    return d.index < program.delegate_inline_data.size()
               ? program.delegate_inline_data[d.index].bytes()
               : std::span<const uint8_t>();
  }
  return d.index < segment_data.size() ? segment_data[d.index].bytes() : std::span<const uint8_t>();
}

std::optional<std::span<const uint8_t>> File::named_bytes(const std::string& key) const {
  for (const NamedData& n : program.named_data) {
    if (n.key == key && n.segment_index < segment_data.size())
      return segment_data[n.segment_index].bytes();
  }
  return std::nullopt;
}

}  // namespace etc::pte
