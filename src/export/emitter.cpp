#include "export/emitter.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <span>
#include <unordered_map>

#include "format/pte_writer.h"
#include "passes/memory_planner.h"

namespace etc {
namespace {

// Whether a state's initial value is worth writing: not when it is absent or all zeros (a
// KV cache), which the runtime restores from the state's name alone.
bool has_nonzero_initial(const StateBuffer& s) {
  if (s.initial.empty()) return false;
  static const uint8_t kZeroPage[4096] = {};
  std::span<const uint8_t> bytes = s.initial.bytes();
  for (size_t at = 0; at < bytes.size(); at += sizeof(kZeroPage)) {
    const size_t n = std::min(sizeof(kZeroPage), bytes.size() - at);
    if (std::memcmp(bytes.data() + at, kZeroPage, n) != 0) return true;
  }
  return false;
}

// Remembers byte strings by content: an FNV-1a hash, then an exact comparison, so lookups
// cost one pass over the bytes (no byte strings as map keys).
class ContentIndex {
 public:
  template <typename BytesOf>
  std::optional<uint64_t> find(std::string_view bytes, BytesOf bytes_of) const {
    auto it = by_hash_.find(hash(bytes));
    if (it == by_hash_.end()) return std::nullopt;
    for (uint64_t id : it->second) {
      if (bytes_of(id) == bytes) return id;
    }
    return std::nullopt;
  }
  void add(std::string_view bytes, uint64_t id) { by_hash_[hash(bytes)].push_back(id); }

 private:
  // Buckets only (equal contents are compared in full). A large string is hashed by its size
  // and 32 windows of 64 bytes spread over it: distinct weights of one shape differ there, so
  // hashing a model's weights costs next to nothing and only true duplicates (or strings
  // equal in every window) are compared byte by byte.
  static uint64_t hash(std::string_view bytes) {
    constexpr size_t kWindows = 32, kWindow = 64;
    uint64_t h = 0xcbf29ce484222325ULL ^ bytes.size();
    if (bytes.size() <= kWindows * kWindow * 2) return mix(h, bytes);
    const size_t step = (bytes.size() - kWindow) / (kWindows - 1);
    for (size_t w = 0; w < kWindows; ++w)
      h = mix(h, bytes.substr(w * step, kWindow));
    return h;
  }
  static uint64_t mix(uint64_t h, std::string_view bytes) {
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
      h ^= h >> 29;
    }
    for (; i < bytes.size(); ++i)
      h = (h ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ULL;
    return h;
  }
  std::unordered_map<uint64_t, std::vector<uint64_t>> by_hash_;
};

// Lays constants out at `alignment`, deduplicating identical contents. The bytes are not
// copied: the pool is a list of pieces of the constants' own blobs (mapped weight files),
// which the .pte writer streams.
class ConstantPool {
 public:
  explicit ConstantPool(uint64_t alignment) : alignment_(alignment) {}
  // Returns the offset of `data` in the pool.
  uint64_t add(const ConstantData& data) {
    std::span<const uint8_t> bytes = data.bytes();
    std::string_view key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto bytes_at = [this, size = key.size()](uint64_t offset) {
      std::span<const uint8_t> b = spans_.at(offset);
      return std::string_view(reinterpret_cast<const char*>(b.data()), std::min(b.size(), size));
    };
    std::optional<uint64_t> seen = index_.find(key, bytes_at);
    if (!seen) {
      size_ = (size_ + alignment_ - 1) / alignment_ * alignment_;
      seen = size_;
      if (!bytes.empty())
        pieces_.push_back(PiecewiseBlob::Piece{size_, data.blob, data.offset, data.size});
      spans_.emplace(size_, bytes);
      size_ += bytes.size();
      index_.add(key, *seen);
    }
    // Looked at (hashed, maybe compared): a mapped weight's pages leave the process until the
    // writer reads them, so emitting a program does not hold every weight at once.
    if (data.blob != nullptr) data.blob->release(data.offset, data.size);
    return *seen;
  }
  ConstantData segment() const {
    return ConstantData{std::make_shared<PiecewiseBlob>(pieces_, size_), 0,
                        static_cast<size_t>(size_)};
  }

 private:
  uint64_t alignment_;
  uint64_t size_ = 0;
  std::vector<PiecewiseBlob::Piece> pieces_;
  std::map<uint64_t, std::span<const uint8_t>> spans_;
  ContentIndex index_;
};

std::string op_base_name(const OpSchema& s) {
  return s.ns + "::" + s.name;
}

class PlanEmitter {
 public:
  enum class Mode { kHost, kDelegate };

  PlanEmitter(const Graph& g, Mode mode) : g_(g), mode_(mode) {}

  // Called for each constant a host plan uses; returns its data_buffer_idx.
  std::function<uint32_t(const ConstantData&)> host_constant;
  // Called for each state buffer's initial bytes; returns its index in the mutable segment.
  std::function<uint32_t(const ConstantData&)> host_state;
  // Called for each constant a delegate plan uses with its value index.
  std::function<void(int32_t, const Value&)> delegate_constant;
  // In a delegate plan: the workspace offsets of intermediate tensors (buffer 1).
  const std::unordered_map<uint32_t, uint64_t>* workspace_offsets = nullptr;
  // In a delegate plan every tensor lives on the delegate's device.
  std::optional<Device> device_override;
  // Called for each delegate call node; returns the delegate's segment index.
  std::function<Result<uint32_t>(const Node&)> delegate_blob;

  Result<pte::Plan> emit(const std::string& name) {
    plan_.name = name;
    for (ValueId in : g_.inputs()) {
      ETC_ASSIGN_OR_RETURN(int32_t v, tensor(in));
      plan_.inputs.push_back(v);
    }
    pte::Chain chain;
    for (NodeId id : g_.order()) {
      const Node& n = g_.node(id);
      if (n.storage_alias) continue;  // its output is its input's storage: nothing to run
      Result<pte::Instruction> instr =
          n.op == OpKind::DelegateCall ? emit_delegate(n) : emit_kernel(n);
      if (!instr.ok()) {
        return std::move(instr).take_status().add_location(
            Location{.pointer = n.origin, .node = n.name});
      }
      chain.instructions.push_back(std::move(instr).value());
    }
    // State write back, after the last node, as ExecuTorch emits it: copy_(state, update),
    // unless the update was computed in the state's own storage.
    for (const StateBuffer& s : g_.states()) {
      if (!s.update.valid()) continue;
      const TensorSpec& a = g_.value(s.value).spec;
      const TensorSpec& b = g_.value(s.update).spec;
      if (a.mem_id && a.mem_id == b.mem_id && a.mem_offset == b.mem_offset) continue;
      // copy_ is a host kernel: device state must have been updated in its own storage.
      if (!a.device.is_cpu() || !b.device.is_cpu()) {
        return internal_error("the update of state '" + s.fqn + "' on " + to_string(a.device) +
                              " is not planned over the state; it cannot be written back");
      }
      pte::Instruction instr;
      instr.kind = pte::InstrKind::kKernel;
      instr.index = op_index("aten::copy_", "");
      ETC_ASSIGN_OR_RETURN(int32_t state, tensor(s.value));
      ETC_ASSIGN_OR_RETURN(int32_t update, tensor(s.update));
      pte::EValue no;
      no.kind = pte::ValueKind::kBool;
      instr.args = {state, update, add_value(no), state};
      chain.instructions.push_back(std::move(instr));
    }
    for (ValueId out : g_.outputs()) {
      ETC_ASSIGN_OR_RETURN(int32_t v, tensor(out));
      plan_.outputs.push_back(v);
    }
    chain.inputs = plan_.inputs;
    chain.outputs = plan_.outputs;
    plan_.chains.push_back(std::move(chain));
    return std::move(plan_);
  }

  pte::Plan& plan() { return plan_; }

 private:
  int32_t add_value(pte::EValue v) {
    plan_.values.push_back(std::move(v));
    return static_cast<int32_t>(plan_.values.size() - 1);
  }

  Result<int32_t> tensor(ValueId id) {
    if (auto it = index_.find(id.v); it != index_.end()) return it->second;
    const Value& val = g_.value(id);
    const TensorSpec& s = val.spec;
    pte::EValue v;
    v.kind = pte::ValueKind::kTensor;
    pte::Tensor& t = v.tensor;
    t.scalar_type = dtype_to_scalar_type(s.dtype);
    for (int64_t d : s.sizes) {
      if (d > std::numeric_limits<int32_t>::max()) {
        return unsupported("tensor '" + val.name + "' has a dim of " + std::to_string(d) +
                           ", larger than the .pte format's int32 sizes");
      }
      t.sizes.push_back(static_cast<int32_t>(d));
    }
    t.dim_order = s.dim_order;
    t.shape_dynamism = static_cast<uint8_t>(s.dynamism);
    if (workspace_offsets != nullptr) {
      if (auto it = workspace_offsets->find(id.v); it != workspace_offsets->end()) {
        t.allocation = pte::Allocation{1, it->second};
      }
    } else if (s.mem_id) {
      t.allocation = pte::Allocation{*s.mem_id, s.mem_offset.value_or(0)};
    }
    Device device = device_override.value_or(s.device);
    if (!device.is_cpu()) {
      t.has_extra = true;
      t.device = device;
    }
    int32_t index = add_value(std::move(v));
    index_[id.v] = index;
    if (val.kind == ValueKind::kState) {
      const StateBuffer* state = g_.state_of(id);
      if (state == nullptr || mode_ != Mode::kHost || !host_state)
        return internal_error("state '" + val.name + "' outside a host plan");
      // Planned, with its initial bytes in the mutable segment (loaded into the planned
      // memory when the method loads, and again by reset_state()). A state without an initial
      // value starts as zeros (graph.h), and so does one whose initial value is all zeros (a
      // KV cache): its name goes into ExtraTensorInfo, as ExecuTorch writes a mutable
      // buffer's with emit_mutable_buffer_names, and the runtime zeroes such a tensor at load
      // and at reset on every device (device memory is not zeroed when allocated). Writing
      // the zeros to the file instead would grow a program by its whole KV cache.
      pte::Tensor& emitted = plan_.values[static_cast<size_t>(index)].tensor;
      if (has_nonzero_initial(*state)) {
        emitted.data_buffer_idx = host_state(state->initial);
      } else {
        emitted.has_extra = true;
        emitted.fully_qualified_name = state->fqn.empty() ? val.name : state->fqn;
      }
    } else if (val.kind == ValueKind::kConstant) {
      if (mode_ == Mode::kHost) {
        plan_.values[static_cast<size_t>(index)].tensor.data_buffer_idx = host_constant(s.constant);
      } else {
        delegate_constant(index, val);
      }
    }
    return index;
  }

  // `optional_list`: a Tensor?[] argument (an OptionalTensorList, -1 for None).
  Result<int32_t> arg_value(const ArgValue& a, bool optional_list = false) {
    pte::EValue v;
    if (std::holds_alternative<std::monostate>(a)) {
      v.kind = pte::ValueKind::kNull;
    } else if (const auto* id = std::get_if<ValueId>(&a)) {
      return tensor(*id);
    } else if (const auto* ids = std::get_if<std::vector<ValueId>>(&a)) {
      v.kind = optional_list ? pte::ValueKind::kOptionalTensorList : pte::ValueKind::kTensorList;
      for (ValueId t : *ids) {
        if (!t.valid() && optional_list) {
          v.items.push_back(-1);
          continue;
        }
        ETC_ASSIGN_OR_RETURN(int32_t i, tensor(t));
        v.items.push_back(i);
      }
    } else if (const auto* sc = std::get_if<Scalar>(&a)) {
      if (const auto* i = std::get_if<int64_t>(&sc->v)) {
        v.kind = pte::ValueKind::kInt;
        v.i = *i;
      } else if (const auto* d = std::get_if<double>(&sc->v)) {
        v.kind = pte::ValueKind::kDouble;
        v.d = *d;
      } else {
        v.kind = pte::ValueKind::kBool;
        v.b = std::get<bool>(sc->v);
      }
    } else if (const auto* i = std::get_if<int64_t>(&a)) {
      v.kind = pte::ValueKind::kInt;
      v.i = *i;
    } else if (const auto* il = std::get_if<std::vector<int64_t>>(&a)) {
      // ExecuTorch's boxed list: each integer is an Int value of its own, emitted before the
      // list, and the list holds their indices (as ExecuTorch's emitter lays them out).
      v.kind = pte::ValueKind::kIntList;
      for (int64_t x : *il) {
        pte::EValue item;
        item.kind = pte::ValueKind::kInt;
        item.i = x;
        v.int_items.push_back(add_value(std::move(item)));
      }
    } else if (const auto* d = std::get_if<double>(&a)) {
      v.kind = pte::ValueKind::kDouble;
      v.d = *d;
    } else if (const auto* dl = std::get_if<std::vector<double>>(&a)) {
      v.kind = pte::ValueKind::kDoubleList;
      v.doubles = *dl;
    } else if (const auto* b = std::get_if<bool>(&a)) {
      v.kind = pte::ValueKind::kBool;
      v.b = *b;
    } else if (const auto* bl = std::get_if<std::vector<bool>>(&a)) {
      v.kind = pte::ValueKind::kBoolList;
      v.bools = *bl;
    } else if (const auto* s = std::get_if<std::string>(&a)) {
      v.kind = pte::ValueKind::kString;
      v.s = *s;
    } else {
      v.kind = pte::ValueKind::kInt;  // ScalarType: its enum number
      v.i = static_cast<uint8_t>(dtype_to_scalar_type(std::get<DType>(a)));  // 0..ScalarType max
    }
    return add_value(std::move(v));
  }

  int32_t op_index(const std::string& name, const std::string& overload) {
    for (size_t i = 0; i < plan_.operators.size(); ++i) {
      if (plan_.operators[i].name == name && plan_.operators[i].overload == overload)
        return static_cast<int32_t>(i);
    }
    plan_.operators.push_back(pte::Operator{name, overload});
    return static_cast<int32_t>(plan_.operators.size() - 1);
  }

  // Appends the return value(s): the single out again, or a TensorList of the outs.
  Status append_return(const std::vector<int32_t>& outs, std::vector<int32_t>& args) {
    if (outs.size() == 1) {
      args.push_back(outs[0]);
    } else {
      pte::EValue list;
      list.kind = pte::ValueKind::kTensorList;
      list.items = outs;
      args.push_back(add_value(std::move(list)));
    }
    return Status();
  }

  Result<pte::Instruction> emit_kernel(const Node& n) {
    const OpSchema& functional = op_info(n.op).schema;
    pte::Instruction instr;
    instr.kind = pte::InstrKind::kKernel;
    std::vector<int32_t> outs;
    for (ValueId o : n.outputs) {
      ETC_ASSIGN_OR_RETURN(int32_t i, tensor(o));
      outs.push_back(i);
    }
    if (mode_ == Mode::kDelegate) {
      instr.index = op_index(op_base_name(functional), functional.overload);
      for (size_t k = 0; k < n.args.size(); ++k) {
        ETC_ASSIGN_OR_RETURN(int32_t i, arg_value(n.args[k], functional.args[k].type ==
                                                                 ArgType::kOptionalTensorList));
        instr.args.push_back(i);
      }
      instr.args.insert(instr.args.end(), outs.begin(), outs.end());
      ETC_RETURN_IF_ERROR(append_return(outs, instr.args));
      return instr;
    }
    if (n.in_place) {
      // index_put_(self, indices, values, accumulate) -> self: the state's own storage.
      if (n.op != OpKind::IndexPut) return internal_error("only index_put runs in place");
      instr.index = op_index("aten::index_put_", "");
      for (size_t k = 0; k < n.args.size(); ++k) {
        ETC_ASSIGN_OR_RETURN(int32_t i, arg_value(n.args[k], functional.args[k].type ==
                                                                 ArgType::kOptionalTensorList));
        instr.args.push_back(i);
      }
      instr.args.push_back(instr.args[0]);
      return instr;
    }
    const OpSchema* kernel = portable_kernel(n.op);
    if (kernel == nullptr) {
      return unsupported(
          "host op " + op_info(n.op).name +
          " has no ExecuTorch portable kernel (the decompose-host-ops pass rewrites it)");
    }
    instr.index = op_index(op_base_name(*kernel), kernel->overload);
    size_t next_out = 0;
    for (const ArgSchema& a : kernel->args) {
      int fi = a.is_out ? -1 : functional.arg_index(a.name);
      if (fi >= 0) {
        ETC_ASSIGN_OR_RETURN(int32_t i, arg_value(n.args[static_cast<size_t>(fi)],
                                                  a.type == ArgType::kOptionalTensorList));
        instr.args.push_back(i);
      } else if (a.is_out && next_out < outs.size()) {
        instr.args.push_back(outs[next_out++]);
      } else {
        return internal_error("kernel " + kernel->name + "." + kernel->overload + " argument '" +
                              a.name + "' matches nothing in " + op_info(n.op).name);
      }
    }
    if (next_out != outs.size()) {
      return internal_error("kernel " + kernel->name + "." + kernel->overload + " takes " +
                            std::to_string(next_out) + " outputs, " + op_info(n.op).name + " has " +
                            std::to_string(outs.size()));
    }
    ETC_RETURN_IF_ERROR(append_return(outs, instr.args));
    return instr;
  }

  Result<pte::Instruction> emit_delegate(const Node& n) {
    if (mode_ == Mode::kDelegate) return unsupported("nested delegates are not supported");
    ETC_ASSIGN_OR_RETURN(uint32_t segment, delegate_blob(n));
    pte::Delegate d;
    d.id = n.delegate->backend_id;
    d.location = 1;  // SEGMENT
    d.index = segment;
    for (const CompileSpec& cs : n.delegate->compile_specs)
      d.compile_specs.push_back({cs.key, cs.value});
    plan_.delegates.push_back(std::move(d));
    pte::Instruction instr;
    instr.kind = pte::InstrKind::kDelegate;
    instr.index = static_cast<int32_t>(plan_.delegates.size() - 1);
    for (ValueId v : std::get<std::vector<ValueId>>(n.args[0])) {
      ETC_ASSIGN_OR_RETURN(int32_t i, tensor(v));
      instr.args.push_back(i);
    }
    for (ValueId o : n.outputs) {
      ETC_ASSIGN_OR_RETURN(int32_t i, tensor(o));
      instr.args.push_back(i);
    }
    return instr;
  }

  const Graph& g_;
  Mode mode_;
  pte::Plan plan_;
  std::unordered_map<uint32_t, int32_t> index_;
};

// Plans a delegate subgraph's intermediate tensors into one workspace (buffer 1): fills
// `offsets` (value id -> byte offset) and returns the workspace size. Subgraph inputs,
// outputs and constants are not planned. The compiled graph is not modified.
uint64_t plan_workspace(const Graph& sub, std::unordered_map<uint32_t, uint64_t>* offsets) {
  std::vector<ValueId> planned;
  std::vector<PlanTensor> tensors;
  int32_t pos = 0;
  std::unordered_map<uint32_t, size_t> slot;
  for (NodeId id : sub.order()) {
    ++pos;
    const Node& n = sub.node(id);
    for (ValueId v : tensor_args(n)) {
      if (auto it = slot.find(v.v); it != slot.end()) tensors[it->second].last = pos;
    }
    for (ValueId o : n.outputs) {
      if (sub.is_graph_output(o)) continue;
      slot[o.v] = tensors.size();
      planned.push_back(o);
      int64_t bytes = (sub.value(o).spec.nbytes() + 15) / 16 * 16;
      tensors.push_back(PlanTensor{bytes, pos, pos});
    }
  }
  BufferPlan plan = plan_greedy_by_size(tensors);
  for (size_t i = 0; i < planned.size(); ++i)
    (*offsets)[planned[i].v] = static_cast<uint64_t>(plan.offsets[i]);
  return static_cast<uint64_t>(plan.size);
}

}  // namespace

const OpSchema* portable_kernel(OpKind op) {
  const std::optional<OpSchema>& out = op_info(op).out_schema;
  return out ? &*out : nullptr;
}

Result<pte::File> emit_program(const Graph& graph, const EmitOptions& options) {
  pte::File file;
  std::vector<ConstantData> segments;  // bytes of each segment, in index order
  ConstantPool constants(options.constant_alignment);
  std::vector<uint64_t> constant_offsets{0};    // index 0: the reserved empty placeholder
  std::map<uint64_t, uint32_t> constant_index;  // offset in pool -> data_buffer_idx
  ContentIndex segment_of_bytes;                // dedup of delegate blobs and named data
  // A segment of `data` (weights stay where they are), or the index of an identical one.
  auto add_segment_data = [&](ConstantData data) -> uint32_t {
    auto view = [](const ConstantData& d) {
      std::span<const uint8_t> b = d.bytes();
      return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
    };
    auto bytes_of = [&](uint64_t i) { return view(segments[static_cast<size_t>(i)]); };
    std::optional<uint64_t> seen = segment_of_bytes.find(view(data), bytes_of);
    auto index = static_cast<uint32_t>(segments.size());
    if (!seen) segment_of_bytes.add(view(data), index);
    if (data.blob != nullptr) data.blob->release(data.offset, data.size);  // as ConstantPool
    if (seen) return static_cast<uint32_t>(*seen);
    segments.push_back(std::move(data));
    return index;
  };
  auto add_segment = [&](std::string bytes) -> uint32_t {
    size_t n = bytes.size();
    return add_segment_data(ConstantData{make_blob(std::move(bytes)), 0, n});
  };
  // The constant segment is always segment 0, even when empty (offsets [0], a zero-size
  // segment), as ExecuTorch's serializer writes it: ExecuTorch's loader takes a program
  // without one for the deprecated inline-constants layout, which its builds refuse.
  segments.push_back(ConstantData{make_blob(std::string()), 0, 0});  // replaced at the end
  // State's initial bytes: the mutable data segment, right after the constants as ExecuTorch
  // writes it (entry 0 an empty placeholder; no padding: the bytes are copied at load).
  std::vector<uint64_t> mutable_offsets{0};
  std::vector<PiecewiseBlob::Piece> mutable_pieces;
  uint64_t mutable_size = 0;
  const bool has_initial_state =
      std::any_of(graph.states().begin(), graph.states().end(), has_nonzero_initial);
  if (has_initial_state) segments.push_back(ConstantData{make_blob(std::string()), 0, 0});

  PlanEmitter host(graph, PlanEmitter::Mode::kHost);
  host.host_state = [&](const ConstantData& data) -> uint32_t {
    mutable_offsets.push_back(mutable_size);
    mutable_pieces.push_back(PiecewiseBlob::Piece{mutable_size, data.blob, data.offset, data.size});
    mutable_size += data.size;
    return static_cast<uint32_t>(mutable_offsets.size() - 1);
  };
  host.host_constant = [&](const ConstantData& data) -> uint32_t {
    uint64_t offset = constants.add(data);
    auto [it, fresh] =
        constant_index.emplace(offset, static_cast<uint32_t>(constant_offsets.size()));
    if (fresh) constant_offsets.push_back(offset);
    return it->second;
  };
  host.delegate_blob = [&](const Node& call) -> Result<uint32_t> {
    const Graph& sub = *call.delegate->graph;
    std::unordered_map<uint32_t, uint64_t> offsets;
    uint64_t workspace = plan_workspace(sub, &offsets);

    PlanEmitter inner(sub, PlanEmitter::Mode::kDelegate);
    inner.workspace_offsets = &offsets;
    inner.device_override = call.delegate->device;
    std::vector<std::pair<int32_t, std::string>> keys;
    inner.delegate_constant = [&](int32_t value, const Value& c) {
      std::string key = call.name + "/" + c.name;
      uint32_t seg = add_segment_data(c.spec.constant);
      file.program.named_data.push_back(pte::NamedData{key, seg});
      keys.emplace_back(value, key);
    };
    ETC_ASSIGN_OR_RETURN(pte::Plan plan, inner.emit(call.name));
    plan.buffer_sizes = {0, static_cast<int64_t>(workspace)};
    plan.buffer_devices = {pte::BufferDevice{1, call.delegate->device}};
    return add_segment(serialize_delegate_program(plan, keys));
  };
  ETC_ASSIGN_OR_RETURN(pte::Plan plan, host.emit("forward"));
  plan.buffer_sizes.push_back(0);
  for (size_t i = 0; i < graph.planned_buffers.size(); ++i) {
    const PlannedBuffer& b = graph.planned_buffers[i];
    plan.buffer_sizes.push_back(static_cast<int64_t>(b.size));
    if (!b.device.is_cpu())
      plan.buffer_devices.push_back(pte::BufferDevice{static_cast<int32_t>(i + 1), b.device});
  }
  file.program.plans.push_back(std::move(plan));
  // Input and output names, for `etc run --input NAME=...` and dumps: a small JSON document
  // in named data (ExecuTorch's runtime ignores keys it does not ask for).
  std::string names = "{\"inputs\": [";
  auto quoted = [](const std::string& n) {
    std::string q = "\"";
    for (char c : n) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) q += c;
    }
    return q + "\"";
  };
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    names += (i ? ", " : "") + quoted(graph.value(graph.inputs()[i]).name);
  names += "], \"outputs\": [";
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    names += (i ? ", " : "") + quoted(graph.value(graph.outputs()[i]).name);
  names += "]}";
  file.program.named_data.push_back(
      pte::NamedData{std::string(pte::kIoNamesKey) + "forward", add_segment(names)});

  segments[0] = constants.segment();
  file.program.constant_segment = pte::SubsegmentOffsets{0, constant_offsets};
  if (has_initial_state) {
    segments[1] = ConstantData{std::make_shared<PiecewiseBlob>(mutable_pieces, mutable_size), 0,
                               static_cast<size_t>(mutable_size)};
    file.program.mutable_data_segments.push_back(pte::SubsegmentOffsets{1, mutable_offsets});
  }
  // Segment layout relative to the base; every offset a multiple of the alignment.
  uint64_t offset = 0;
  for (ConstantData& data : segments) {
    offset = (offset + options.segment_alignment - 1) / options.segment_alignment *
             options.segment_alignment;
    file.program.segments.push_back(pte::Segment{offset, data.size});
    offset += data.size;
    file.segment_data.push_back(std::move(data));
  }
  return file;
}

}  // namespace etc
