// An ExecuTorch program in memory: plain C++ mirrors of the .pte schema (program.fbs),
// plus the file-level parts (extended header, segment bytes). The emitter builds one from a
// graph, the writer turns it into bytes, the reader turns bytes back into one after
// validating them, and the dumps print it. Segment bytes are windows into a shared Blob
// (the mmapped file when read), never copies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/device.h"
#include "graph/tensor_spec.h"

namespace etc::pte {

inline constexpr char kFileIdentifier[] = "ET12";
inline constexpr char kHeaderMagic[] = "eh00";
inline constexpr uint32_t kHeaderLength = 32;     // what we write
inline constexpr uint32_t kMinHeaderLength = 24;  // what readers accept
inline constexpr uint64_t kDefaultSegmentAlignment = 128;
inline constexpr uint64_t kConstantAlignment = 16;
// Named-data key prefix of a plan's input/output names (JSON {"inputs": [...], "outputs": [...]}).
inline constexpr char kIoNamesKey[] = "etc.io_names.";

struct Allocation {
  uint32_t memory_id = 0;  // 1-based
  uint64_t offset = 0;
  bool operator==(const Allocation&) const = default;
};

struct Tensor {
  int8_t scalar_type = 6;  // FLOAT
  int32_t storage_offset = 0;
  std::vector<int32_t> sizes;
  std::vector<uint8_t> dim_order;
  bool requires_grad = false;
  uint32_t data_buffer_idx = 0;
  std::optional<Allocation> allocation;
  int8_t layout = 0;
  uint8_t shape_dynamism = 0;
  // ExtraTensorInfo, present only when the file has one.
  bool has_extra = false;
  uint64_t mutable_data_segments_idx = 0;
  std::string fully_qualified_name;
  uint8_t location = 0;  // TensorDataLocation
  Device device;         // CPU unless extra info says otherwise
  bool operator==(const Tensor&) const = default;
};

enum class ValueKind : uint8_t {
  kNull = 1,
  kInt,
  kBool,
  kDouble,
  kTensor,
  kString,
  kIntList,
  kDoubleList,
  kBoolList,
  kTensorList,
  kOptionalTensorList,
};
const char* value_kind_name(ValueKind k);

struct EValue {
  ValueKind kind = ValueKind::kNull;
  int64_t i = 0;   // Int
  bool b = false;  // Bool
  double d = 0;    // Double
  std::string s;   // String
  // IntList: as on the wire, the indices of the plan's Int values that hold the integers
  // (ExecuTorch's boxed list), not the integers; Plan::int_list resolves them.
  std::vector<int64_t> int_items;
  std::vector<double> doubles;  // DoubleList
  std::vector<bool> bools;      // BoolList
  std::vector<int32_t> items;   // TensorList / OptionalTensorList
  Tensor tensor;                // Tensor
  bool operator==(const EValue&) const = default;
};

enum class InstrKind : uint8_t { kKernel = 1, kDelegate, kMove, kJumpFalse, kFree };

struct Instruction {
  InstrKind kind = InstrKind::kKernel;
  int32_t index = 0;   // op_index, delegate_index, move_from, cond_value_index, value_index
  int32_t target = 0;  // move_to, destination_instruction
  std::vector<int32_t> args;
  bool operator==(const Instruction&) const = default;
};

struct Operator {
  std::string name;      // "aten::add"
  std::string overload;  // "out"
  bool operator==(const Operator&) const = default;
};

struct CompileSpec {
  std::string key;
  std::string value;
  bool operator==(const CompileSpec&) const = default;
};

struct Delegate {
  std::string id;
  uint8_t location = 1;  // DataLocation: 0 INLINE, 1 SEGMENT
  uint32_t index = 0;
  std::vector<CompileSpec> compile_specs;
  bool operator==(const Delegate&) const = default;
};

struct Chain {
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<Instruction> instructions;
  bool operator==(const Chain&) const = default;
};

struct BufferDevice {
  int32_t buffer_idx = 0;
  Device device;
  bool operator==(const BufferDevice&) const = default;
};

struct Plan {
  std::string name;
  std::vector<EValue> values;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::vector<Chain> chains;
  std::vector<Operator> operators;
  std::vector<Delegate> delegates;
  std::vector<int64_t> buffer_sizes;         // non_const_buffer_sizes, entry 0 reserved
  std::vector<BufferDevice> buffer_devices;  // non_const_buffer_device (sparse)
  bool operator==(const Plan&) const = default;

  // The device of buffer `memory_id` (CPU unless listed).
  Device buffer_device(uint32_t memory_id) const;
  // The integers of IntList `v`: each item's Int value. Items that are out of range or not
  // an Int (which the reader refuses) come out as 0.
  std::vector<int64_t> int_list(const EValue& v) const;
};

struct Segment {
  uint64_t offset = 0;  // relative to the segment base
  uint64_t size = 0;
  bool operator==(const Segment&) const = default;
};

struct SubsegmentOffsets {
  uint32_t segment_index = 0;
  std::vector<uint64_t> offsets;
  bool operator==(const SubsegmentOffsets&) const = default;
};

struct NamedData {
  std::string key;
  uint32_t segment_index = 0;
  bool operator==(const NamedData&) const = default;
};

struct Program {
  uint32_t version = 0;
  std::vector<Plan> plans;
  std::vector<ConstantData> constant_buffer;       // deprecated inline constants
  std::vector<ConstantData> delegate_inline_data;  // backend_delegate_data
  std::vector<Segment> segments;
  std::optional<SubsegmentOffsets> constant_segment;
  std::vector<SubsegmentOffsets> mutable_data_segments;
  std::vector<NamedData> named_data;
};

struct ExtendedHeader {
  uint32_t length = kHeaderLength;
  uint64_t program_size = 0;
  uint64_t segment_base_offset = 0;
  uint64_t segment_data_size = 0;
};

// A whole .pte: the program, its header (if the file has one) and the bytes of each
// segment (windows into the file, or owned bytes when written).
struct File {
  Program program;
  std::optional<ExtendedHeader> header;
  std::vector<ConstantData> segment_data;  // one per program.segments entry
  uint64_t file_size = 0;

  // Bytes of constant `data_buffer_idx` (from the constant segment or the deprecated
  // inline buffer); empty span if there is none.
  std::span<const uint8_t> constant_bytes(uint32_t data_buffer_idx) const;
  // Bytes of entry `idx` (>= 1) of the mutable data segment (a state's initial value); an
  // empty span with a null data pointer if there is none.
  std::span<const uint8_t> mutable_bytes(uint32_t idx) const;
  // Bytes of a delegate's processed blob.
  std::span<const uint8_t> delegate_bytes(const Delegate& d) const;
  // Bytes of named data `key`, or nullopt.
  std::optional<std::span<const uint8_t>> named_bytes(const std::string& key) const;
};

}  // namespace etc::pte
