#include "format/pte_reader.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <type_traits>

#include "format/etc_delegate_generated.h"
#include "format/program_generated.h"
#include "format/pte_writer.h"
#include "graph/dtype.h"
#include "support/checked_math.h"

namespace etc {
namespace {

namespace fb = executorch_flatbuffer;

uint32_t get_u32(std::span<const uint8_t> b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | b[at + static_cast<size_t>(i)];
  return v;
}
uint64_t get_u64(std::span<const uint8_t> b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | b[at + static_cast<size_t>(i)];
  return v;
}

template <typename T>
std::vector<T> vec(const flatbuffers::Vector<T>* v) {
  if (v == nullptr) return std::vector<T>();
  if constexpr (std::is_arithmetic_v<T>) {
    // The verifier checks a vector's length field for 4-byte alignment only, so the
    // elements of an 8-byte vector in a damaged file can be misaligned: copy bytes.
    std::vector<T> out(v->size());
    if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
    return out;
  } else {
    return std::vector<T>(v->begin(), v->end());
  }
}
std::string str(const flatbuffers::String* s) {
  return s == nullptr ? std::string() : s->str();
}

pte::Tensor to_tensor(const fb::Tensor& t) {
  pte::Tensor out;
  out.scalar_type = static_cast<int8_t>(t.scalar_type());
  out.storage_offset = t.storage_offset();
  out.sizes = vec(t.sizes());
  out.dim_order = vec(t.dim_order());
  out.requires_grad = t.requires_grad();
  out.data_buffer_idx = t.data_buffer_idx();
  if (const fb::AllocationDetails* a = t.allocation_info()) {
    out.allocation =
        pte::Allocation{a->memory_id(), static_cast<uint64_t>(a->memory_offset_low()) |
                                            (static_cast<uint64_t>(a->memory_offset_high()) << 32)};
  }
  out.layout = t.layout();
  out.shape_dynamism = static_cast<uint8_t>(t.shape_dynamism());
  if (const fb::ExtraTensorInfo* e = t.extra_tensor_info()) {
    out.has_extra = true;
    out.mutable_data_segments_idx = e->mutable_data_segments_idx();
    out.fully_qualified_name = str(e->fully_qualified_name());
    out.location = static_cast<uint8_t>(e->location());
    out.device = Device{static_cast<DeviceType>(e->device_type()), e->device_index()};
  }
  return out;
}

pte::EValue to_value(const fb::EValue& v) {
  pte::EValue out;
  switch (v.val_type()) {
    case fb::KernelTypes::Int:
      out.kind = pte::ValueKind::kInt;
      out.i = v.val_as_Int()->int_val();
      break;
    case fb::KernelTypes::Bool:
      out.kind = pte::ValueKind::kBool;
      out.b = v.val_as_Bool()->bool_val();
      break;
    case fb::KernelTypes::Double:
      out.kind = pte::ValueKind::kDouble;
      out.d = v.val_as_Double()->double_val();
      break;
    case fb::KernelTypes::String:
      out.kind = pte::ValueKind::kString;
      out.s = str(v.val_as_String()->string_val());
      break;
    case fb::KernelTypes::Tensor:
      out.kind = pte::ValueKind::kTensor;
      out.tensor = to_tensor(*v.val_as_Tensor());
      break;
    case fb::KernelTypes::IntList:
      out.kind = pte::ValueKind::kIntList;
      out.int_items = vec(v.val_as_IntList()->items());
      break;
    case fb::KernelTypes::DoubleList:
      out.kind = pte::ValueKind::kDoubleList;
      out.doubles = vec(v.val_as_DoubleList()->items());
      break;
    case fb::KernelTypes::BoolList: {
      out.kind = pte::ValueKind::kBoolList;
      if (const auto* items = v.val_as_BoolList()->items()) {
        for (auto b : *items)
          out.bools.push_back(b != 0);
      }
      break;
    }
    case fb::KernelTypes::TensorList:
      out.kind = pte::ValueKind::kTensorList;
      out.items = vec(v.val_as_TensorList()->items());
      break;
    case fb::KernelTypes::OptionalTensorList:
      out.kind = pte::ValueKind::kOptionalTensorList;
      out.items = vec(v.val_as_OptionalTensorList()->items());
      break;
    default:
      out.kind = pte::ValueKind::kNull;
      break;
  }
  return out;
}

Result<pte::Plan> to_plan(const fb::ExecutionPlan& p, const std::string& path, size_t index) {
  pte::Plan out;
  out.name = str(p.name());
  auto where = [&](const std::string& what) {
    return invalid_input("plan " + std::to_string(index) + " ('" + out.name + "'): " + what,
                         Location{.file = path});
  };
  if (p.values() != nullptr) {
    for (size_t i = 0; i < p.values()->size(); ++i) {
      const fb::EValue* v = p.values()->Get(static_cast<flatbuffers::uoffset_t>(i));
      if (v == nullptr) return where("value " + std::to_string(i) + " is missing");
      if (v->val_type() != fb::KernelTypes::Null && v->val() == nullptr) {
        return where("value " + std::to_string(i) + " has a type but no payload");
      }
      if (static_cast<uint8_t>(v->val_type()) > static_cast<uint8_t>(fb::KernelTypes::MAX)) {
        return where("value " + std::to_string(i) + " has unknown type " +
                     std::to_string(static_cast<int>(v->val_type())));
      }
      out.values.push_back(to_value(*v));
    }
  }
  out.inputs = vec(p.inputs());
  out.outputs = vec(p.outputs());
  if (p.chains() != nullptr) {
    for (const fb::Chain* c : *p.chains()) {
      pte::Chain chain;
      chain.inputs = vec(c->inputs());
      chain.outputs = vec(c->outputs());
      if (c->instructions() != nullptr) {
        for (const fb::Instruction* in : *c->instructions()) {
          pte::Instruction ins;
          if (in->instr_args_type() != fb::InstructionArguments::NONE &&
              in->instr_args() == nullptr) {
            return where("chain " + std::to_string(out.chains.size()) + " instruction " +
                         std::to_string(chain.instructions.size()) +
                         " has a type but no arguments");
          }
          switch (in->instr_args_type()) {
            case fb::InstructionArguments::KernelCall: {
              const auto* k = in->instr_args_as_KernelCall();
              ins.kind = pte::InstrKind::kKernel;
              ins.index = k->op_index();
              ins.args = vec(k->args());
              break;
            }
            case fb::InstructionArguments::DelegateCall: {
              const auto* d = in->instr_args_as_DelegateCall();
              ins.kind = pte::InstrKind::kDelegate;
              ins.index = d->delegate_index();
              ins.args = vec(d->args());
              break;
            }
            case fb::InstructionArguments::MoveCall:
              ins.kind = pte::InstrKind::kMove;
              ins.index = in->instr_args_as_MoveCall()->move_from();
              ins.target = in->instr_args_as_MoveCall()->move_to();
              break;
            case fb::InstructionArguments::JumpFalseCall:
              ins.kind = pte::InstrKind::kJumpFalse;
              ins.index = in->instr_args_as_JumpFalseCall()->cond_value_index();
              ins.target = in->instr_args_as_JumpFalseCall()->destination_instruction();
              break;
            case fb::InstructionArguments::FreeCall:
              ins.kind = pte::InstrKind::kFree;
              ins.index = in->instr_args_as_FreeCall()->value_index();
              break;
            default:
              return where("an instruction has no arguments (type " +
                           std::to_string(static_cast<int>(in->instr_args_type())) + ")");
          }
          chain.instructions.push_back(std::move(ins));
        }
      }
      out.chains.push_back(std::move(chain));
    }
  }
  if (p.operators() != nullptr) {
    for (const fb::Operator* o : *p.operators())
      out.operators.push_back({str(o->name()), str(o->overload())});
  }
  if (p.delegates() != nullptr) {
    for (const fb::BackendDelegate* d : *p.delegates()) {
      pte::Delegate del;
      del.id = str(d->id());
      if (d->processed() == nullptr)
        return where("delegate '" + del.id + "' has no processed data reference");
      del.location = static_cast<uint8_t>(d->processed()->location());
      del.index = d->processed()->index();
      if (d->compile_specs() != nullptr) {
        for (const fb::CompileSpec* cs : *d->compile_specs()) {
          std::vector<uint8_t> v = vec(cs->value());
          del.compile_specs.push_back({str(cs->key()), std::string(v.begin(), v.end())});
        }
      }
      out.delegates.push_back(std::move(del));
    }
  }
  out.buffer_sizes = vec(p.non_const_buffer_sizes());
  if (p.non_const_buffer_device() != nullptr) {
    for (const fb::NonConstBufferDevice* d : *p.non_const_buffer_device()) {
      out.buffer_devices.push_back(pte::BufferDevice{
          d->buffer_idx(), Device{static_cast<DeviceType>(d->device_type()), d->device_index()}});
    }
  }
  return out;
}

// Sizes no machine can hold are invalid programs, not allocation failures: 2^47 bytes
// (128 TiB) is the user address space of x86-64 and AArch64 with 48-bit virtual addresses,
// and of every GPU etc supports. Buffer sizes, each device's sum of buffers, tensor byte
// counts and planned offsets must stay within it (docs/pte-format.md, "Reading").
constexpr int64_t kMaxPlausibleBytes = int64_t{1} << 47;
constexpr const char* kMaxPlausibleText = "2^47 bytes (128 TiB)";

// Semantic checks of one plan. `constant_size(idx, state)` returns the bytes available to
// constant idx (state: to entry idx of the mutable data segment, a state's initial value), or
// -1 if there is no such entry.
class PlanValidator {
 public:
  PlanValidator(const pte::Plan& p, const std::string& path, size_t index,
                std::function<int64_t(uint32_t, bool)> constant_size, size_t num_segments,
                size_t num_inline)
      : p_(p),
        path_(path),
        index_(index),
        constant_size_(std::move(constant_size)),
        num_segments_(num_segments),
        num_inline_(num_inline) {}

  Status run() {
    for (size_t i = 0; i < p_.buffer_sizes.size(); ++i) {
      if (p_.buffer_sizes[i] < 0)
        return fail("non_const_buffer_sizes[" + std::to_string(i) + "] is negative");
      if (p_.buffer_sizes[i] > kMaxPlausibleBytes) {
        return fail("non_const_buffer_sizes[" + std::to_string(i) + "] is " +
                    std::to_string(p_.buffer_sizes[i]) + " bytes, more than " + kMaxPlausibleText +
                    " (no machine can address it)");
      }
    }
    for (const pte::BufferDevice& d : p_.buffer_devices) {
      if (d.buffer_idx <= 0 || static_cast<size_t>(d.buffer_idx) >= p_.buffer_sizes.size()) {
        return fail("non_const_buffer_device names buffer " + std::to_string(d.buffer_idx) +
                    ", but the plan has " +
                    std::to_string(p_.buffer_sizes.size() == 0 ? 0 : p_.buffer_sizes.size() - 1) +
                    " buffers");
      }
      ETC_RETURN_IF_ERROR(check_device(
          d.device, "non_const_buffer_device for buffer " + std::to_string(d.buffer_idx)));
    }
    // All the buffers of one device together must fit its address space too.
    std::map<std::pair<int, int>, int64_t> per_device;
    for (size_t i = 1; i < p_.buffer_sizes.size(); ++i) {
      Device d = p_.buffer_device(static_cast<uint32_t>(i));
      int64_t& total = per_device[{static_cast<int>(d.type), d.index}];
      total += p_.buffer_sizes[i];  // each is at most 2^47: the running sum cannot overflow
      if (total > kMaxPlausibleBytes) {
        return fail("the planned buffers on " + to_string(d) + " add up to more than " +
                    kMaxPlausibleText + " (at buffer " + std::to_string(i) + ")");
      }
    }
    for (size_t i = 0; i < p_.values.size(); ++i)
      ETC_RETURN_IF_ERROR(check_value(i));
    for (int32_t v : p_.inputs)
      ETC_RETURN_IF_ERROR(check_index(v, "plan input"));
    for (int32_t v : p_.outputs)
      ETC_RETURN_IF_ERROR(check_index(v, "plan output"));
    if (p_.chains.empty()) return fail("the plan has no chain");
    for (size_t c = 0; c < p_.chains.size(); ++c) {
      const pte::Chain& chain = p_.chains[c];
      for (size_t k = 0; k < chain.instructions.size(); ++k) {
        ETC_RETURN_IF_ERROR(
            check_instruction(chain.instructions[k], chain.instructions.size(),
                              "chain " + std::to_string(c) + " instruction " + std::to_string(k)));
      }
    }
    for (size_t i = 0; i < p_.delegates.size(); ++i) {
      const pte::Delegate& d = p_.delegates[i];
      size_t limit = d.location == 0 ? num_inline_ : num_segments_;
      if (d.location > 1)
        return fail("delegate " + std::to_string(i) + " has unknown data location");
      if (d.index >= limit) {
        return fail("delegate " + std::to_string(i) + " ('" + d.id + "') refers to " +
                    (d.location == 0 ? "inline data " : "segment ") + std::to_string(d.index) +
                    ", but there are " + std::to_string(limit));
      }
    }
    return Status();
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_input("plan " + std::to_string(index_) + " ('" + p_.name + "'): " + what,
                         Location{.file = path_});
  }

  Status check_index(int32_t v, const std::string& what) const {
    if (v < 0 || static_cast<size_t>(v) >= p_.values.size()) {
      return fail(what + " refers to value " + std::to_string(v) + ", but the plan has " +
                  std::to_string(p_.values.size()) + " values");
    }
    return Status();
  }

  Status check_device(Device d, const std::string& what) const {
    if (d.type != DeviceType::kCPU && d.type != DeviceType::kCUDA) {
      return fail(what + ": unknown device type " + std::to_string(static_cast<int>(d.type)));
    }
    if (d.index < 0) return fail(what + ": negative device index " + std::to_string(d.index));
    if (d.is_cpu() && d.index != 0) return fail(what + ": the CPU has only device index 0");
    return Status();
  }

  Status check_value(size_t i) const {
    const pte::EValue& v = p_.values[i];
    std::string what = "value " + std::to_string(i);
    if (v.kind == pte::ValueKind::kIntList) {
      // ExecuTorch's boxed list: every item is the index of an Int value.
      for (size_t k = 0; k < v.int_items.size(); ++k) {
        int64_t item = v.int_items[k];
        std::string at = what + " (IntList) item " + std::to_string(k);
        if (item < 0 || static_cast<uint64_t>(item) >= p_.values.size()) {
          return fail(at + " refers to value " + std::to_string(item) + ", but the plan has " +
                      std::to_string(p_.values.size()) + " values");
        }
        const pte::EValue& target = p_.values[static_cast<size_t>(item)];
        if (target.kind != pte::ValueKind::kInt) {
          return fail(at + " refers to value " + std::to_string(item) + ", which is " +
                      pte::value_kind_name(target.kind) + ", not Int");
        }
      }
    }
    if (v.kind == pte::ValueKind::kTensorList || v.kind == pte::ValueKind::kOptionalTensorList) {
      for (int32_t item : v.items) {
        if (item == -1 && v.kind == pte::ValueKind::kOptionalTensorList) continue;
        ETC_RETURN_IF_ERROR(check_index(item, what + " (tensor list)"));
        if (p_.values[static_cast<size_t>(item)].kind != pte::ValueKind::kTensor) {
          return fail(what + " lists value " + std::to_string(item) + ", which is not a tensor");
        }
      }
    }
    if (v.kind != pte::ValueKind::kTensor) return Status();
    const pte::Tensor& t = v.tensor;
    auto dtype = dtype_from_scalar_type(t.scalar_type);
    if (!dtype) {
      return Status(ErrorCode::kUnsupported,
                    "plan " + std::to_string(index_) + " ('" + p_.name + "'): " + what +
                        ": scalar type " + std::to_string(t.scalar_type) +
                        " is not supported by etc",
                    Location{.file = path_});
    }
    std::vector<int64_t> sizes;
    for (size_t d = 0; d < t.sizes.size(); ++d) {
      if (t.sizes[d] < 0) return fail(what + ": size " + std::to_string(d) + " is negative");
      sizes.push_back(t.sizes[d]);
    }
    auto numel = checked_numel(sizes);
    auto nbytes = numel ? checked_mul(*numel, dtype_size(*dtype)) : std::nullopt;
    if (!nbytes)
      return fail(what + ": sizes " + shape_to_string(sizes) + " overflow a 64-bit byte count");
    if (*nbytes > kMaxPlausibleBytes) {
      return fail(what + ": sizes " + shape_to_string(sizes) + " need " + std::to_string(*nbytes) +
                  " bytes, more than " + kMaxPlausibleText);
    }
    if (!t.dim_order.empty()) {
      std::vector<uint8_t> sorted = t.dim_order;
      std::sort(sorted.begin(), sorted.end());
      if (sorted != contiguous_dim_order(t.sizes.size()))
        return fail(what + ": dim_order is not a permutation of its dims");
    }
    if (t.storage_offset != 0) return fail(what + ": storage_offset must be 0");
    if (t.shape_dynamism > 2)
      return fail(what + ": unknown shape dynamism " + std::to_string(t.shape_dynamism));
    ETC_RETURN_IF_ERROR(check_device(t.device, what));
    if (t.allocation) {
      uint32_t id = t.allocation->memory_id;
      if (id == 0 || id >= p_.buffer_sizes.size()) {
        return fail(what + ": planned into buffer " + std::to_string(id) + ", but the plan has " +
                    std::to_string(p_.buffer_sizes.empty() ? 0 : p_.buffer_sizes.size() - 1) +
                    " buffers");
      }
      auto end = checked_add(static_cast<int64_t>(t.allocation->offset), *nbytes);
      if (t.allocation->offset > static_cast<uint64_t>(kMaxPlausibleBytes) || !end ||
          *end > p_.buffer_sizes[id]) {
        return fail(what + ": bytes [" + std::to_string(t.allocation->offset) + ", +" +
                    std::to_string(*nbytes) + ") do not fit buffer " + std::to_string(id) + " of " +
                    std::to_string(p_.buffer_sizes[id]) + " bytes");
      }
      if (p_.buffer_device(id) != t.device) {
        return fail(what + ": tensor is on " + to_string(t.device) + " but its buffer " +
                    std::to_string(id) + " is on " + to_string(p_.buffer_device(id)));
      }
    }
    if (t.data_buffer_idx > 0) {
      // Without a planned allocation: a constant. With one: a state's initial value, in
      // the mutable data segment, copied into the planned (possibly device) memory at load.
      const bool state = t.allocation.has_value();
      if (!state && !t.device.is_cpu()) {
        return fail(what + ": a constant in the file must be on the CPU, not " +
                    to_string(t.device));
      }
      const std::string kind = state ? "initial state " : "constant ";
      int64_t available = constant_size_(t.data_buffer_idx, state);
      if (available < 0)
        return fail(what + ": " + kind + std::to_string(t.data_buffer_idx) + " does not exist");
      if (available < *nbytes) {
        return fail(what + ": " + kind + std::to_string(t.data_buffer_idx) + " has " +
                    std::to_string(available) + " bytes, the tensor needs " +
                    std::to_string(*nbytes));
      }
    }
    return Status();
  }

  Status check_instruction(const pte::Instruction& in, size_t count,
                           const std::string& what) const {
    switch (in.kind) {
      case pte::InstrKind::kKernel:
        if (in.index < 0 || static_cast<size_t>(in.index) >= p_.operators.size()) {
          return fail(what + ": operator " + std::to_string(in.index) + " does not exist");
        }
        break;
      case pte::InstrKind::kDelegate:
        if (in.index < 0 || static_cast<size_t>(in.index) >= p_.delegates.size()) {
          return fail(what + ": delegate " + std::to_string(in.index) + " does not exist");
        }
        break;
      case pte::InstrKind::kMove:
        ETC_RETURN_IF_ERROR(check_index(in.index, what + " (move_from)"));
        return check_index(in.target, what + " (move_to)");
      case pte::InstrKind::kJumpFalse:
        ETC_RETURN_IF_ERROR(check_index(in.index, what + " (condition)"));
        if (in.target < 0 || static_cast<size_t>(in.target) > count) {
          return fail(what + ": jump destination " + std::to_string(in.target) +
                      " is outside the chain");
        }
        return Status();
      case pte::InstrKind::kFree:
        return check_index(in.index, what + " (free)");
    }
    for (int32_t a : in.args)
      ETC_RETURN_IF_ERROR(check_index(a, what + " argument"));
    return Status();
  }

  const pte::Plan& p_;
  const std::string& path_;
  size_t index_;
  std::function<int64_t(uint32_t, bool)> constant_size_;
  size_t num_segments_;
  size_t num_inline_;
};

Status verify_flatbuffer(std::span<const uint8_t> region, const std::string& path, bool delegate) {
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 64;
  opts.max_tables = 50'000'000;
  opts.check_alignment = true;
  flatbuffers::Verifier verifier(region.data(), region.size(), opts);
  bool ok = delegate ? etc_delegate::VerifyDelegateProgramBuffer(verifier)
                     : fb::VerifyProgramBuffer(verifier);
  if (!ok) {
    return invalid_input(std::string(delegate ? "the delegate blob" : "the program") +
                             " fails FlatBuffers verification (corrupt or truncated file)",
                         Location{.file = path});
  }
  return Status();
}

}  // namespace

Result<pte::File> read_pte(const std::shared_ptr<const Blob>& blob, const std::string& path) {
  std::span<const uint8_t> bytes = blob->bytes();
  pte::File file;
  file.file_size = bytes.size();
  auto at = [&](uint64_t offset, std::string what) {
    return invalid_input(std::move(what), Location{.file = path, .byte_offset = offset});
  };
  if (bytes.size() < 8)
    return at(0, "file is " + std::to_string(bytes.size()) + " bytes, too short for a .pte");
  if (std::memcmp(bytes.data() + 4, pte::kFileIdentifier, 4) != 0) {
    std::string id(reinterpret_cast<const char*>(bytes.data() + 4), 4);
    for (char& c : id)
      c = std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    if (id.rfind("ET", 0) == 0)
      return at(4, "incompatible .pte version '" + id + "' (this etc reads ET12)");
    return at(4, "not a .pte file: identifier is '" + id + "', expected 'ET12'");
  }
  uint64_t program_size = bytes.size();
  if (bytes.size() >= 16 && std::memcmp(bytes.data() + 8, pte::kHeaderMagic, 4) == 0) {
    pte::ExtendedHeader h;
    h.length = get_u32(bytes, 12);
    if (h.length < pte::kMinHeaderLength) {
      return at(
          12, "extended header length " + std::to_string(h.length) + " is below the minimum of 24");
    }
    if (8 + static_cast<uint64_t>(h.length) > bytes.size()) {
      return at(12, "extended header length " + std::to_string(h.length) +
                        " runs past the end of the file");
    }
    h.program_size = get_u64(bytes, 16);
    h.segment_base_offset = get_u64(bytes, 24);
    h.segment_data_size = h.length >= 32 ? get_u64(bytes, 32) : 0;
    if (h.program_size < 8 + h.length || h.program_size > bytes.size()) {
      return at(16, "extended header program_size " + std::to_string(h.program_size) +
                        " is outside the file (" + std::to_string(bytes.size()) + " bytes)");
    }
    if (h.segment_base_offset != 0 &&
        (h.segment_base_offset < h.program_size || h.segment_base_offset > bytes.size())) {
      return at(24, "extended header segment_base_offset " + std::to_string(h.segment_base_offset) +
                        " is outside the file's segment area");
    }
    if (h.segment_data_size > bytes.size() ||
        h.segment_base_offset + h.segment_data_size > bytes.size()) {
      return at(32, "extended header segment_data_size " + std::to_string(h.segment_data_size) +
                        " runs past the end of the file (" + std::to_string(bytes.size()) +
                        " bytes)");
    }
    program_size = h.program_size;
    file.header = h;
  }
  if (program_size > FLATBUFFERS_MAX_BUFFER_SIZE)
    return at(0, "program is larger than FlatBuffers allows (2 GiB)");
  ETC_RETURN_IF_ERROR(verify_flatbuffer(bytes.subspan(0, program_size), path, /*delegate=*/false));
  const fb::Program* prog = fb::GetProgram(bytes.data());

  pte::Program& p = file.program;
  p.version = prog->version();
  if (prog->segments() != nullptr) {
    for (const fb::DataSegment* s : *prog->segments())
      p.segments.push_back({s->offset(), s->size()});
  }
  // ExecuTorch writes no header when all segment data is empty (a lone empty constant
  // segment), so only segments with bytes need one.
  const bool has_base = file.header && file.header->segment_base_offset != 0;
  for (size_t i = 0; i < p.segments.size(); ++i) {
    if (!has_base && p.segments[i].size != 0) {
      return at(0, "segment " + std::to_string(i) + " holds " + std::to_string(p.segments[i].size) +
                       " bytes but the file has no extended header saying where segments start");
    }
  }
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const pte::Segment& s = p.segments[i];
    uint64_t base = has_base ? file.header->segment_base_offset : bytes.size();
    if (!has_base) {
      file.segment_data.push_back(ConstantData{blob, bytes.size(), 0});
      continue;
    }
    // Each term is at most the file size (< 2^63) before they are added: no wrap-around, and
    // no size that turns negative as a signed number (fuzz_pte: a size of 2^64 - 1).
    const uint64_t file_size = bytes.size();
    if (s.offset > file_size || s.size > file_size || base > file_size - s.offset ||
        s.size > file_size - base - s.offset) {
      return at(base + std::min<uint64_t>(s.offset, bytes.size()),
                "segment " + std::to_string(i) + " (offset " + std::to_string(s.offset) +
                    ", size " + std::to_string(s.size) + ") runs past the end of the file");
    }
    file.segment_data.push_back(
        ConstantData{blob, static_cast<size_t>(base + s.offset), static_cast<size_t>(s.size)});
  }
  if (prog->constant_buffer() != nullptr) {
    for (const fb::Buffer* b : *prog->constant_buffer()) {
      const auto* st = b->storage();
      size_t off = st == nullptr ? 0 : static_cast<size_t>(st->data() - bytes.data());
      p.constant_buffer.push_back(ConstantData{blob, off, st == nullptr ? 0 : st->size()});
    }
  }
  if (prog->backend_delegate_data() != nullptr) {
    for (const fb::BackendDelegateInlineData* d : *prog->backend_delegate_data()) {
      const auto* data = d->data();
      size_t off = data == nullptr ? 0 : static_cast<size_t>(data->data() - bytes.data());
      p.delegate_inline_data.push_back(ConstantData{blob, off, data == nullptr ? 0 : data->size()});
    }
  }
  if (const fb::SubsegmentOffsets* cs = prog->constant_segment()) {
    p.constant_segment = pte::SubsegmentOffsets{cs->segment_index(), vec(cs->offsets())};
    const auto& c = *p.constant_segment;
    if (c.offsets.size() > 1 && c.segment_index >= p.segments.size()) {
      return at(0, "constant_segment refers to segment " + std::to_string(c.segment_index) +
                       ", but there are " + std::to_string(p.segments.size()));
    }
    if (c.offsets.size() > 1 && !p.constant_buffer.empty()) {
      return at(0, "the program has both a constant segment and an inline constant_buffer");
    }
  }
  if (prog->mutable_data_segments() != nullptr) {
    for (const fb::SubsegmentOffsets* m : *prog->mutable_data_segments()) {
      p.mutable_data_segments.push_back(
          pte::SubsegmentOffsets{m->segment_index(), vec(m->offsets())});
      if (m->segment_index() >= p.segments.size()) {
        return at(0, "mutable_data_segments refers to segment " +
                         std::to_string(m->segment_index()) + ", but there are " +
                         std::to_string(p.segments.size()));
      }
    }
  }
  if (prog->named_data() != nullptr) {
    for (const fb::NamedData* n : *prog->named_data()) {
      p.named_data.push_back(pte::NamedData{str(n->key()), n->segment_index()});
      if (n->segment_index() >= p.segments.size()) {
        return at(0, "named data '" + str(n->key()) + "' refers to segment " +
                         std::to_string(n->segment_index()) + ", but there are " +
                         std::to_string(p.segments.size()));
      }
    }
  }
  if (prog->execution_plan() == nullptr || prog->execution_plan()->size() == 0) {
    return invalid_input("the program has no execution plan", Location{.file = path});
  }
  for (size_t i = 0; i < prog->execution_plan()->size(); ++i) {
    ETC_ASSIGN_OR_RETURN(
        pte::Plan plan,
        to_plan(*prog->execution_plan()->Get(static_cast<flatbuffers::uoffset_t>(i)), path, i));
    p.plans.push_back(std::move(plan));
  }
  auto constant_size = [&file](uint32_t idx, bool state) -> int64_t {
    const pte::Program& pr = file.program;
    if (state) {
      std::span<const uint8_t> b = file.mutable_bytes(idx);
      return b.data() == nullptr ? -1 : static_cast<int64_t>(b.size());
    }
    if (pr.constant_segment && pr.constant_segment->offsets.size() > 1) {
      const auto& offs = pr.constant_segment->offsets;
      if (idx >= offs.size()) return -1;
      uint64_t seg_size = file.segment_data[pr.constant_segment->segment_index].size;
      if (offs[idx] > seg_size) return -1;
      return static_cast<int64_t>(seg_size - offs[idx]);
    }
    if (idx >= pr.constant_buffer.size()) return -1;
    return static_cast<int64_t>(pr.constant_buffer[idx].size);
  };
  for (size_t i = 0; i < p.plans.size(); ++i) {
    ETC_RETURN_IF_ERROR(PlanValidator(p.plans[i], path, i, constant_size, p.segments.size(),
                                      p.delegate_inline_data.size())
                            .run());
  }
  return file;
}

Result<pte::File> read_pte_file(const std::string& path) {
  ETC_ASSIGN_OR_RETURN(std::shared_ptr<const Blob> blob, map_file(path));
  return read_pte(blob, path);
}

Result<DelegateProgram> read_delegate_program(std::span<const uint8_t> bytes,
                                              const std::string& where) {
  if (bytes.size() < 8 ||
      !flatbuffers::BufferHasIdentifier(bytes.data(), etc_delegate::DelegateProgramIdentifier())) {
    return invalid_input("not an etc CUDA delegate blob (identifier ECD1 missing)",
                         Location{.file = where});
  }
  // FlatBuffers reads scalars and vectors in place, aligned relative to the buffer's start:
  // a blob at a misaligned address (a segment at an odd offset in a damaged file) is read
  // from an aligned copy, or the verifier itself would read misaligned memory.
  std::vector<uint64_t> aligned;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    aligned.resize((bytes.size() + 7) / 8);
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    bytes =
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size());
  }
  ETC_RETURN_IF_ERROR(verify_flatbuffer(bytes, where, /*delegate=*/true));
  const etc_delegate::DelegateProgram* d = etc_delegate::GetDelegateProgram(bytes.data());
  DelegateProgram out;
  out.version = d->version();
  if (out.version != kDelegateFormatVersion) {
    return Status(ErrorCode::kUnsupported,
                  "delegate blob version " + std::to_string(out.version) +
                      " is not supported (this etc reads " +
                      std::to_string(kDelegateFormatVersion) + ")",
                  Location{.file = where});
  }
  if (d->plan() == nullptr)
    return invalid_input("delegate blob has no plan", Location{.file = where});
  ETC_ASSIGN_OR_RETURN(out.plan, to_plan(*d->plan(), where, 0));
  if (d->constants() != nullptr) {
    for (const etc_delegate::DelegateConstant* c : *d->constants()) {
      if (c->value_index() < 0 || static_cast<size_t>(c->value_index()) >= out.plan.values.size()) {
        return invalid_input("delegate constant '" + str(c->key()) + "' refers to value " +
                                 std::to_string(c->value_index()) + ", which does not exist",
                             Location{.file = where});
      }
      out.constants.emplace_back(c->value_index(), str(c->key()));
    }
  }
  ETC_RETURN_IF_ERROR(PlanValidator(
                          out.plan, where, 0, [](uint32_t, bool) -> int64_t { return -1; }, 0, 0)
                          .run());
  return out;
}

}  // namespace etc
