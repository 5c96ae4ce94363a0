#include "format/pte_writer.h"

#include <algorithm>
#include <cstring>

#include "format/etc_delegate_generated.h"
#include "format/program_generated.h"

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

// Every FlatBuffers sub-object is built in a statement of its own, in a fixed order, before
// the object that refers to it: C++ leaves the evaluation order of function arguments
// unspecified, so building two sub-objects inside one call's arguments lays the buffer out
// differently under different compilers (gcc and clang do differ), and exports must be
// byte-identical whichever compiler built etc.

Offset<fb::EValue> write_value(FlatBufferBuilder& b, const pte::EValue& v) {
  using K = pte::ValueKind;
  Offset<void> payload;
  fb::KernelTypes type = fb::KernelTypes::Null;
  switch (v.kind) {
    case K::kNull:
      type = fb::KernelTypes::Null;
      payload = fb::CreateNull(b).Union();
      break;
    case K::kInt:
      type = fb::KernelTypes::Int;
      payload = fb::CreateInt(b, v.i).Union();
      break;
    case K::kBool:
      type = fb::KernelTypes::Bool;
      payload = fb::CreateBool(b, v.b).Union();
      break;
    case K::kDouble:
      type = fb::KernelTypes::Double;
      payload = fb::CreateDouble(b, v.d).Union();
      break;
    case K::kString: {
      type = fb::KernelTypes::String;
      auto text = b.CreateString(v.s);
      payload = fb::CreateString(b, text).Union();
      break;
    }
    case K::kTensor:
      type = fb::KernelTypes::Tensor;
      payload = write_tensor(b, v.tensor).Union();
      break;
    case K::kIntList: {  // indices of Int values (ExecuTorch's boxed list)
      type = fb::KernelTypes::IntList;
      auto items = b.CreateVector(v.int_items);
      payload = fb::CreateIntList(b, items).Union();
      break;
    }
    case K::kDoubleList: {
      type = fb::KernelTypes::DoubleList;
      auto items = b.CreateVector(v.doubles);
      payload = fb::CreateDoubleList(b, items).Union();
      break;
    }
    case K::kBoolList: {
      type = fb::KernelTypes::BoolList;
      std::vector<uint8_t> bytes(v.bools.begin(), v.bools.end());
      auto items = b.CreateVector(bytes);
      payload = fb::CreateBoolList(b, items).Union();
      break;
    }
    case K::kTensorList: {
      type = fb::KernelTypes::TensorList;
      auto items = b.CreateVector(v.items);
      payload = fb::CreateTensorList(b, items).Union();
      break;
    }
    case K::kOptionalTensorList: {
      type = fb::KernelTypes::OptionalTensorList;
      auto items = b.CreateVector(v.items);
      payload = fb::CreateOptionalTensorList(b, items).Union();
      break;
    }
  }
  if (payload.IsNull()) payload = fb::CreateNull(b).Union();
  return fb::CreateEValue(b, type, payload);
}

Offset<fb::Instruction> write_instruction(FlatBufferBuilder& b, const pte::Instruction& in) {
  switch (in.kind) {
    case pte::InstrKind::kKernel: {
      auto args = b.CreateVector(in.args);
      auto call = fb::CreateKernelCall(b, in.index, args);
      return fb::CreateInstruction(b, fb::InstructionArguments::KernelCall, call.Union());
    }
    case pte::InstrKind::kDelegate: {
      auto args = b.CreateVector(in.args);
      auto call = fb::CreateDelegateCall(b, in.index, args);
      return fb::CreateInstruction(b, fb::InstructionArguments::DelegateCall, call.Union());
    }
    case pte::InstrKind::kMove: {
      auto call = fb::CreateMoveCall(b, in.index, in.target);
      return fb::CreateInstruction(b, fb::InstructionArguments::MoveCall, call.Union());
    }
    case pte::InstrKind::kJumpFalse: {
      auto call = fb::CreateJumpFalseCall(b, in.index, in.target);
      return fb::CreateInstruction(b, fb::InstructionArguments::JumpFalseCall, call.Union());
    }
    case pte::InstrKind::kFree: {
      auto call = fb::CreateFreeCall(b, in.index);
      return fb::CreateInstruction(b, fb::InstructionArguments::FreeCall, call.Union());
    }
  }
  return 0;
}

Offset<fb::Chain> write_chain(FlatBufferBuilder& b, const pte::Chain& c) {
  std::vector<Offset<fb::Instruction>> instrs;
  for (const pte::Instruction& in : c.instructions)
    instrs.push_back(write_instruction(b, in));
  auto inputs = b.CreateVector(c.inputs);
  auto outputs = b.CreateVector(c.outputs);
  auto instructions = b.CreateVector(instrs);
  return fb::CreateChain(b, inputs, outputs, instructions);
}

Offset<fb::BackendDelegate> write_delegate(FlatBufferBuilder& b, const pte::Delegate& d) {
  std::vector<Offset<fb::CompileSpec>> specs;
  for (const pte::CompileSpec& cs : d.compile_specs) {
    auto key = b.CreateString(cs.key);
    auto value = b.CreateVector(reinterpret_cast<const uint8_t*>(cs.value.data()), cs.value.size());
    specs.push_back(fb::CreateCompileSpec(b, key, value));
  }
  auto id = b.CreateString(d.id);
  auto ref =
      fb::CreateBackendDelegateDataReference(b, static_cast<fb::DataLocation>(d.location), d.index);
  auto compile_specs = b.CreateVector(specs);
  return fb::CreateBackendDelegate(b, id, ref, compile_specs);
}

Offset<fb::ExecutionPlan> write_plan(FlatBufferBuilder& b, const pte::Plan& p) {
  std::vector<Offset<fb::EValue>> values;
  for (const pte::EValue& v : p.values)
    values.push_back(write_value(b, v));
  std::vector<Offset<fb::Chain>> chains;
  for (const pte::Chain& c : p.chains)
    chains.push_back(write_chain(b, c));
  std::vector<Offset<fb::Operator>> ops;
  for (const pte::Operator& o : p.operators) {
    auto name = b.CreateString(o.name);
    auto overload = b.CreateString(o.overload);
    ops.push_back(fb::CreateOperator(b, name, overload));
  }
  std::vector<Offset<fb::BackendDelegate>> delegates;
  for (const pte::Delegate& d : p.delegates)
    delegates.push_back(write_delegate(b, d));
  Offset<flatbuffers::Vector<Offset<fb::NonConstBufferDevice>>> devices;
  if (!p.buffer_devices.empty()) {  // omitted entirely for CPU-only plans, as ExecuTorch does
    std::vector<Offset<fb::NonConstBufferDevice>> list;
    for (const pte::BufferDevice& d : p.buffer_devices) {
      list.push_back(fb::CreateNonConstBufferDevice(
          b, d.buffer_idx, static_cast<fb::DeviceType>(d.device.type), d.device.index));
    }
    devices = b.CreateVector(list);
  }
  auto name = b.CreateString(p.name);
  auto value_table = b.CreateVector(values);
  auto inputs = b.CreateVector(p.inputs);
  auto outputs = b.CreateVector(p.outputs);
  auto chain_table = b.CreateVector(chains);
  auto operators = b.CreateVector(ops);
  auto delegate_table = b.CreateVector(delegates);
  auto buffer_sizes = b.CreateVector(p.buffer_sizes);
  return fb::CreateExecutionPlan(b, name, 0, value_table, inputs, outputs, chain_table, operators,
                                 delegate_table, buffer_sizes, devices);
}

Offset<fb::SubsegmentOffsets> write_subsegment(FlatBufferBuilder& b,
                                               const pte::SubsegmentOffsets& s) {
  auto offsets = b.CreateVector(s.offsets);
  return fb::CreateSubsegmentOffsets(b, s.segment_index, offsets);
}

void put_u32(std::string& out, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}
void put_u64(std::string& out, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out[at + static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

std::string serialize_delegate_program(
    const pte::Plan& plan, const std::vector<std::pair<int32_t, std::string>>& constants) {
  FlatBufferBuilder b;
  auto p = write_plan(b, plan);
  std::vector<Offset<etc_delegate::DelegateConstant>> list;
  for (const auto& [value, key] : constants) {
    auto name = b.CreateString(key);
    list.push_back(etc_delegate::CreateDelegateConstant(b, value, name));
  }
  auto constant_table = b.CreateVector(list);
  auto root = etc_delegate::CreateDelegateProgram(b, kDelegateFormatVersion, p, constant_table);
  b.Finish(root, etc_delegate::DelegateProgramIdentifier());
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

namespace {

// The bytes before the segments (the program FlatBuffer, with the extended header when there
// are segments) and where the segments start.
struct Head {
  std::string bytes;
  uint64_t base = 0;  // 0: no segment data
};

Result<Head> write_head(const pte::File& file, uint64_t segment_alignment) {
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
    auto storage = b.CreateVector(c.bytes().data(), c.size);
    constant_buffer.push_back(fb::CreateBuffer(b, storage));
  }
  std::vector<Offset<fb::BackendDelegateInlineData>> inline_data;
  for (const ConstantData& c : prog.delegate_inline_data) {
    b.ForceVectorAlignment(c.size, 1, 16);
    auto data = b.CreateVector(c.bytes().data(), c.size);
    inline_data.push_back(fb::CreateBackendDelegateInlineData(b, data));
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
  for (const pte::NamedData& n : prog.named_data) {
    auto key = b.CreateString(n.key);
    named.push_back(fb::CreateNamedData(b, key, n.segment_index));
  }
  auto plan_table = b.CreateVector(plans);
  auto constant_table = constant_buffer.empty() ? 0 : b.CreateVector(constant_buffer);
  auto inline_table = inline_data.empty() ? 0 : b.CreateVector(inline_data);
  auto segment_table = segments.empty() ? 0 : b.CreateVector(segments);
  auto mutable_table = mutable_segments.empty() ? 0 : b.CreateVector(mutable_segments);
  auto named_table = named.empty() ? 0 : b.CreateVector(named);
  auto root = fb::CreateProgram(b, prog.version, plan_table, constant_table, inline_table,
                                segment_table, constant_segment, mutable_table, named_table);
  b.Finish(root, fb::ProgramIdentifier());
  std::string flat(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());

  uint64_t segment_bytes = 0;
  for (const pte::Segment& s : prog.segments)
    segment_bytes = std::max(segment_bytes, s.offset + s.size);
  if (segment_bytes == 0) return Head{std::move(flat), 0};  // no segment data: no header

  // Insert the extended header after the identifier; shift the root offset past it.
  constexpr size_t kPaddedHeader = 32;  // 32 is a multiple of the largest force_align (16)
  std::string out;
  out.reserve(flat.size() + kPaddedHeader + segment_alignment);
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
  return Head{std::move(out), base};
}

// Calls emit(span) for the file's bytes in order: the head, then each segment at its
// offset (zeros between), a PiecewiseBlob segment piece by piece.
template <typename Emit>
Status stream_pte(const pte::File& file, uint64_t segment_alignment, Emit&& emit) {
  ETC_ASSIGN_OR_RETURN(Head head, write_head(file, segment_alignment));
  auto as_span = [](std::string_view s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  static const uint8_t kZeros[4096] = {};
  uint64_t at = 0;
  auto pad_to = [&](uint64_t target) -> Status {
    if (target < at) return internal_error("pte writer: segments overlap");
    while (at < target) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(target - at, sizeof kZeros));
      ETC_RETURN_IF_ERROR(emit(std::span<const uint8_t>(kZeros, n)));
      at += n;
    }
    return Status();
  };
  auto put = [&](std::span<const uint8_t> s) -> Status {
    ETC_RETURN_IF_ERROR(emit(s));
    at += s.size();
    return Status();
  };
  ETC_RETURN_IF_ERROR(put(as_span(head.bytes)));
  if (head.base == 0) return Status();
  const pte::Program& prog = file.program;
  for (size_t i = 0; i < prog.segments.size(); ++i) {
    const uint64_t start = head.base + prog.segments[i].offset;
    ETC_RETURN_IF_ERROR(pad_to(start));
    const ConstantData& d = file.segment_data[i];
    const auto* pieces = dynamic_cast<const PiecewiseBlob*>(d.blob.get());
    if (pieces != nullptr && d.offset == 0 && d.size == pieces->size()) {
      for (const PiecewiseBlob::Piece& p : pieces->pieces()) {
        ETC_RETURN_IF_ERROR(pad_to(start + p.offset));
        if (p.size > 0) ETC_RETURN_IF_ERROR(put(p.blob->bytes().subspan(p.begin, p.size)));
        // Written: a weight mapped from the model's file leaves the process's memory (it is
        // read again from the file if anything asks), so writing a program holds one weight
        // at a time, not all of them.
        p.blob->release(p.begin, p.size);
      }
      ETC_RETURN_IF_ERROR(pad_to(start + d.size));
    } else {
      ETC_RETURN_IF_ERROR(put(d.bytes()));
      if (d.blob != nullptr) d.blob->release(d.offset, d.size);
    }
  }
  return Status();
}

}  // namespace

Result<std::string> write_pte(const pte::File& file, uint64_t segment_alignment) {
  std::string out;
  ETC_RETURN_IF_ERROR(stream_pte(file, segment_alignment, [&out](std::span<const uint8_t> s) {
    out.append(reinterpret_cast<const char*>(s.data()), s.size());
    return Status();
  }));
  return out;
}

Result<uint64_t> write_pte_file(const pte::File& file, const std::string& path,
                                const std::function<Status(const std::string&)>& check,
                                uint64_t segment_alignment) {
  ETC_ASSIGN_OR_RETURN(std::unique_ptr<AtomicFileWriter> w, AtomicFileWriter::create(path));
  ETC_RETURN_IF_ERROR(stream_pte(file, segment_alignment,
                                 [&w](std::span<const uint8_t> s) { return w->write(s); }));
  ETC_RETURN_IF_ERROR(w->close());
  if (check) ETC_RETURN_IF_ERROR(check(w->temp_path()));
  ETC_RETURN_IF_ERROR(w->commit());
  return w->written();
}

}  // namespace etc
