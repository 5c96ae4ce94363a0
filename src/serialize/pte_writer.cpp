#include "serialize/pte_writer.h"

#include <cstring>

#include "serialize/etc_delegate_generated.h"
#include "serialize/program_generated.h"

namespace etc {
namespace {

namespace fb = executorch_flatbuffer;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

Offset<fb::Tensor> write_tensor(FlatBufferBuilder& b, const pte::Tensor& t) {
  auto sizes = b.CreateVector(t.sizes);
  auto dim_order = b.CreateVector(t.dim_order);
  Offset<fb::ExtraTensorInfo> extra;
  if (t.has_extra) {
    auto fqn = t.fully_qualified_name.empty() ? Offset<flatbuffers::String>()
                                              : b.CreateString(t.fully_qualified_name);
    extra = fb::CreateExtraTensorInfo(b, t.mutable_data_segments_idx, fqn,
                                      static_cast<fb::TensorDataLocation>(t.location),
                                      static_cast<fb::DeviceType>(t.device.type), t.device.index);
  }
  Offset<fb::AllocationDetails> alloc;
  if (t.allocation) {
    alloc = fb::CreateAllocationDetails(b, t.allocation->memory_id,
                                        static_cast<uint32_t>(t.allocation->offset),
                                        static_cast<uint32_t>(t.allocation->offset >> 32));
  }
  return fb::CreateTensor(b, static_cast<fb::ScalarType>(t.scalar_type), t.storage_offset, sizes,
                          dim_order, t.requires_grad, t.data_buffer_idx, alloc, t.layout,
                          static_cast<fb::TensorShapeDynamism>(t.shape_dynamism), extra);
}

Offset<fb::EValue> write_value(FlatBufferBuilder& b, const pte::EValue& v) {
  using K = pte::ValueKind;
  switch (v.kind) {
    case K::kNull:
      return fb::CreateEValue(b, fb::KernelTypes::Null, fb::CreateNull(b).Union());
    case K::kInt:
      return fb::CreateEValue(b, fb::KernelTypes::Int, fb::CreateInt(b, v.i).Union());
    case K::kBool:
      return fb::CreateEValue(b, fb::KernelTypes::Bool, fb::CreateBool(b, v.b).Union());
    case K::kDouble:
      return fb::CreateEValue(b, fb::KernelTypes::Double, fb::CreateDouble(b, v.d).Union());
    case K::kString:
      return fb::CreateEValue(b, fb::KernelTypes::String,
                              fb::CreateString(b, b.CreateString(v.s)).Union());
    case K::kTensor:
      return fb::CreateEValue(b, fb::KernelTypes::Tensor, write_tensor(b, v.tensor).Union());
    case K::kIntList:
      return fb::CreateEValue(b, fb::KernelTypes::IntList,
                              fb::CreateIntList(b, b.CreateVector(v.ints)).Union());
    case K::kDoubleList:
      return fb::CreateEValue(b, fb::KernelTypes::DoubleList,
                              fb::CreateDoubleList(b, b.CreateVector(v.doubles)).Union());
    case K::kBoolList: {
      std::vector<uint8_t> bytes(v.bools.begin(), v.bools.end());
      auto vec = b.CreateVector(bytes);
      return fb::CreateEValue(b, fb::KernelTypes::BoolList, fb::CreateBoolList(b, vec).Union());
    }
    case K::kTensorList:
      return fb::CreateEValue(b, fb::KernelTypes::TensorList,
                              fb::CreateTensorList(b, b.CreateVector(v.items)).Union());
    case K::kOptionalTensorList:
      return fb::CreateEValue(b, fb::KernelTypes::OptionalTensorList,
                              fb::CreateOptionalTensorList(b, b.CreateVector(v.items)).Union());
  }
  return fb::CreateEValue(b, fb::KernelTypes::Null, fb::CreateNull(b).Union());
}

Offset<fb::Instruction> write_instruction(FlatBufferBuilder& b, const pte::Instruction& in) {
  switch (in.kind) {
    case pte::InstrKind::kKernel:
      return fb::CreateInstruction(
          b, fb::InstructionArguments::KernelCall,
          fb::CreateKernelCall(b, in.index, b.CreateVector(in.args)).Union());
    case pte::InstrKind::kDelegate:
      return fb::CreateInstruction(
          b, fb::InstructionArguments::DelegateCall,
          fb::CreateDelegateCall(b, in.index, b.CreateVector(in.args)).Union());
    case pte::InstrKind::kMove:
      return fb::CreateInstruction(b, fb::InstructionArguments::MoveCall,
                                   fb::CreateMoveCall(b, in.index, in.target).Union());
    case pte::InstrKind::kJumpFalse:
      return fb::CreateInstruction(b, fb::InstructionArguments::JumpFalseCall,
                                   fb::CreateJumpFalseCall(b, in.index, in.target).Union());
    case pte::InstrKind::kFree:
      return fb::CreateInstruction(b, fb::InstructionArguments::FreeCall,
                                   fb::CreateFreeCall(b, in.index).Union());
  }
  return 0;
}

Offset<fb::ExecutionPlan> write_plan(FlatBufferBuilder& b, const pte::Plan& p) {
  std::vector<Offset<fb::EValue>> values;
  for (const pte::EValue& v : p.values)
    values.push_back(write_value(b, v));
  std::vector<Offset<fb::Chain>> chains;
  for (const pte::Chain& c : p.chains) {
    std::vector<Offset<fb::Instruction>> instrs;
    for (const pte::Instruction& in : c.instructions)
      instrs.push_back(write_instruction(b, in));
    chains.push_back(fb::CreateChain(b, b.CreateVector(c.inputs), b.CreateVector(c.outputs),
                                     b.CreateVector(instrs)));
  }
  std::vector<Offset<fb::Operator>> ops;
  for (const pte::Operator& o : p.operators)
    ops.push_back(fb::CreateOperator(b, b.CreateString(o.name), b.CreateString(o.overload)));
  std::vector<Offset<fb::BackendDelegate>> delegates;
  for (const pte::Delegate& d : p.delegates) {
    std::vector<Offset<fb::CompileSpec>> specs;
    for (const pte::CompileSpec& cs : d.compile_specs) {
      specs.push_back(fb::CreateCompileSpec(
          b, b.CreateString(cs.key),
          b.CreateVector(reinterpret_cast<const uint8_t*>(cs.value.data()), cs.value.size())));
    }
    auto ref = fb::CreateBackendDelegateDataReference(b, static_cast<fb::DataLocation>(d.location),
                                                      d.index);
    delegates.push_back(
        fb::CreateBackendDelegate(b, b.CreateString(d.id), ref, b.CreateVector(specs)));
  }
  Offset<flatbuffers::Vector<Offset<fb::NonConstBufferDevice>>> devices;
  if (!p.buffer_devices.empty()) {  // omitted entirely for CPU-only plans, as ExecuTorch does
    std::vector<Offset<fb::NonConstBufferDevice>> list;
    for (const pte::BufferDevice& d : p.buffer_devices) {
      list.push_back(fb::CreateNonConstBufferDevice(
          b, d.buffer_idx, static_cast<fb::DeviceType>(d.device.type), d.device.index));
    }
    devices = b.CreateVector(list);
  }
  return fb::CreateExecutionPlan(
      b, b.CreateString(p.name), 0, b.CreateVector(values), b.CreateVector(p.inputs),
      b.CreateVector(p.outputs), b.CreateVector(chains), b.CreateVector(ops),
      b.CreateVector(delegates), b.CreateVector(p.buffer_sizes), devices);
}

Offset<fb::SubsegmentOffsets> write_subsegment(FlatBufferBuilder& b,
                                               const pte::SubsegmentOffsets& s) {
  return fb::CreateSubsegmentOffsets(b, s.segment_index, b.CreateVector(s.offsets));
}

void put_u32(std::string& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::string bytes_of(const ConstantData& d) {
  auto s = d.bytes();
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

}  // namespace

std::string serialize_delegate_program(
    const pte::Plan& plan, const std::vector<std::pair<int32_t, std::string>>& constants) {
  FlatBufferBuilder b;
  auto p = write_plan(b, plan);
  std::vector<Offset<etc_delegate::DelegateConstant>> list;
  for (const auto& [value, key] : constants)
    list.push_back(etc_delegate::CreateDelegateConstant(b, value, b.CreateString(key)));
  auto root =
      etc_delegate::CreateDelegateProgram(b, kDelegateFormatVersion, p, b.CreateVector(list));
  b.Finish(root, etc_delegate::DelegateProgramIdentifier());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Result<std::string> write_pte(const pte::File& file, uint64_t segment_alignment) {
  const pte::Program& prog = file.program;
  if (file.segment_data.size() != prog.segments.size()) {
    return internal_error("pte writer: " + std::to_string(prog.segments.size()) + " segments but " +
                          std::to_string(file.segment_data.size()) + " segment blobs");
  }
  FlatBufferBuilder b;
  std::vector<Offset<fb::ExecutionPlan>> plans;
  for (const pte::Plan& p : prog.plans)
    plans.push_back(write_plan(b, p));
  std::vector<Offset<fb::Buffer>> constant_buffer;
  for (const ConstantData& c : prog.constant_buffer) {
    b.ForceVectorAlignment(c.size, 1, 16);
    constant_buffer.push_back(fb::CreateBuffer(b, b.CreateVector(c.bytes().data(), c.size)));
  }
  std::vector<Offset<fb::BackendDelegateInlineData>> inline_data;
  for (const ConstantData& c : prog.delegate_inline_data) {
    b.ForceVectorAlignment(c.size, 1, 16);
    inline_data.push_back(
        fb::CreateBackendDelegateInlineData(b, b.CreateVector(c.bytes().data(), c.size)));
  }
  std::vector<Offset<fb::DataSegment>> segments;
  for (const pte::Segment& s : prog.segments)
    segments.push_back(fb::CreateDataSegment(b, s.offset, s.size));
  Offset<fb::SubsegmentOffsets> constant_segment;
  if (prog.constant_segment) constant_segment = write_subsegment(b, *prog.constant_segment);
  std::vector<Offset<fb::SubsegmentOffsets>> mutable_segments;
  for (const pte::SubsegmentOffsets& s : prog.mutable_data_segments)
    mutable_segments.push_back(write_subsegment(b, s));
  std::vector<Offset<fb::NamedData>> named;
  for (const pte::NamedData& n : prog.named_data)
    named.push_back(fb::CreateNamedData(b, b.CreateString(n.key), n.segment_index));
  auto root = fb::CreateProgram(b, prog.version, b.CreateVector(plans),
                                constant_buffer.empty() ? 0 : b.CreateVector(constant_buffer),
                                inline_data.empty() ? 0 : b.CreateVector(inline_data),
                                segments.empty() ? 0 : b.CreateVector(segments), constant_segment,
                                mutable_segments.empty() ? 0 : b.CreateVector(mutable_segments),
                                named.empty() ? 0 : b.CreateVector(named));
  b.Finish(root, fb::ProgramIdentifier());
  std::string flat(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());

  uint64_t segment_bytes = 0;
  for (const pte::Segment& s : prog.segments)
    segment_bytes = std::max(segment_bytes, s.offset + s.size);
  if (segment_bytes == 0) return flat;  // no segment data: a plain FlatBuffer, no header

  // Insert the extended header after the identifier; shift the root offset past it.
  constexpr size_t kPaddedHeader = 32;  // 32 is a multiple of the largest force_align (16)
  std::string out;
  out.reserve(flat.size() + kPaddedHeader + segment_bytes + segment_alignment);
  out.append(flat, 0, 8);
  uint32_t root_offset = 0;
  std::memcpy(&root_offset, flat.data(),
              4);  // little-endian host (checked at build time by flatbuffers)
  put_u32(out, 0, root_offset + static_cast<uint32_t>(kPaddedHeader));
  std::string header(kPaddedHeader, '\0');
  std::memcpy(header.data(), pte::kHeaderMagic, 4);
  const uint64_t program_size = flat.size() + kPaddedHeader;
  const uint64_t base =
      (program_size + segment_alignment - 1) / segment_alignment * segment_alignment;
  put_u32(header, 4, pte::kHeaderLength);
  put_u64(header, 8, program_size);
  put_u64(header, 16, base);
  put_u64(header, 24, segment_bytes);
  out += header;
  out.append(flat, 8, std::string::npos);
  out.resize(base, '\0');
  for (size_t i = 0; i < prog.segments.size(); ++i) {
    out.resize(base + prog.segments[i].offset, '\0');
    out += bytes_of(file.segment_data[i]);
  }
  return out;
}

}  // namespace etc
