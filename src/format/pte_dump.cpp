#include "format/pte_dump.h"

#include <map>
#include <nlohmann/json.hpp>

#include "format/pte_reader.h"
#include "graph/dtype.h"

namespace etc {
namespace {

using nlohmann::json;

// FNV-1a, 64-bit: a stable fingerprint of constant bytes for diffs and goldens.
std::string fingerprint(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string dtype_text(int8_t scalar_type) {
  auto t = dtype_from_scalar_type(scalar_type);
  return t ? std::string(dtype_name(*t)) : "scalar_type(" + std::to_string(scalar_type) + ")";
}

int64_t tensor_nbytes(const pte::Tensor& t) {
  auto d = dtype_from_scalar_type(t.scalar_type);
  int64_t n = d ? dtype_size(*d) : 0;
  for (int32_t s : t.sizes)
    n *= s;
  return n;
}

std::string sizes_text(const std::vector<int32_t>& sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i)
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

std::string op_text(const pte::Operator& o) {
  return o.name + (o.overload.empty() ? "" : "." + o.overload);
}

// Printable values as they are; binary ones as hex bytes, or when longer than 16 bytes as
// their size and fingerprint.
std::string spec_value(const pte::CompileSpec& cs) {
  bool printable = true;
  for (unsigned char c : cs.value)
    printable = printable && c >= 0x20 && c <= 0x7e;
  if (printable) return cs.value;
  if (cs.value.size() > 16) {
    return std::to_string(cs.value.size()) + " bytes, fingerprint 0x" +
           fingerprint({reinterpret_cast<const uint8_t*>(cs.value.data()), cs.value.size()});
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : cs.value) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

// What a delegate's blob says, when it is one of ours.
struct DelegateSummary {
  bool decoded = false;
  std::string error;
  DelegateProgram program;
};

DelegateSummary summarize_delegate(const pte::File& file, const pte::Delegate& d) {
  DelegateSummary s;
  if (d.id != "EtcCudaBackend") return s;
  Result<DelegateProgram> p = read_delegate_program(file.delegate_bytes(d), "delegate " + d.id);
  if (!p.ok()) {
    s.error = p.status().message();
    return s;
  }
  s.decoded = true;
  s.program = std::move(p).value();
  return s;
}

std::map<std::string, int> op_counts(const pte::Plan& p) {
  std::map<std::string, int> counts;
  for (const pte::Chain& c : p.chains) {
    for (const pte::Instruction& in : c.instructions) {
      if (in.kind == pte::InstrKind::kKernel &&
          static_cast<size_t>(in.index) < p.operators.size()) {
        ++counts[op_text(p.operators[static_cast<size_t>(in.index)])];
      }
    }
  }
  return counts;
}

json value_json(const pte::File& file, const pte::Plan& plan, const pte::EValue& v) {
  json j;
  j["type"] = pte::value_kind_name(v.kind);
  switch (v.kind) {
    case pte::ValueKind::kInt:
      j["value"] = v.i;
      break;
    case pte::ValueKind::kBool:
      j["value"] = v.b;
      break;
    case pte::ValueKind::kDouble:
      j["value"] = v.d;
      break;
    case pte::ValueKind::kString:
      j["value"] = v.s;
      break;
    case pte::ValueKind::kIntList:  // the Int values' indices, and the integers they hold
      j["items"] = v.int_items;
      j["value"] = plan.int_list(v);
      break;
    case pte::ValueKind::kDoubleList:
      j["value"] = v.doubles;
      break;
    case pte::ValueKind::kBoolList:
      j["value"] = v.bools;
      break;
    case pte::ValueKind::kTensorList:
    case pte::ValueKind::kOptionalTensorList:
      j["value"] = v.items;
      break;
    case pte::ValueKind::kTensor: {
      const pte::Tensor& t = v.tensor;
      j["dtype"] = dtype_text(t.scalar_type);
      j["sizes"] = t.sizes;
      j["dim_order"] = t.dim_order;
      j["device"] = to_string(t.device);
      j["has_extra_tensor_info"] = t.has_extra;
      j["allocation"] =
          t.allocation ? json{{"mem_id", t.allocation->memory_id}, {"offset", t.allocation->offset}}
                       : json();
      // A state's initial value (planned, in the mutable data segment) or a constant.
      const bool state = t.allocation.has_value();
      if (t.data_buffer_idx > 0) {
        std::span<const uint8_t> bytes =
            state ? file.mutable_bytes(t.data_buffer_idx) : file.constant_bytes(t.data_buffer_idx);
        const auto n = static_cast<size_t>(tensor_nbytes(t));
        j[state ? "initial_state" : "constant"] = {
            {"index", t.data_buffer_idx},
            {"fingerprint", fingerprint(bytes.subspan(0, std::min(bytes.size(), n)))}};
      }
      if (t.data_buffer_idx == 0 || state) {
        j["constant"] = json();
      }
      // A named mutable buffer (ExtraTensorInfo's fully qualified name): planned without an
      // initial value, it is state that starts as zeros.
      if (!t.fully_qualified_name.empty()) j["fully_qualified_name"] = t.fully_qualified_name;
      if (t.shape_dynamism != 0) j["shape_dynamism"] = t.shape_dynamism;
      break;
    }
    case pte::ValueKind::kNull:
      break;
  }
  return j;
}

json plan_json(const pte::File& file, const pte::Plan& p, bool with_delegates) {
  json j;
  j["name"] = p.name;
  j["inputs"] = p.inputs;
  j["outputs"] = p.outputs;
  json buffers = json::array();
  for (size_t i = 1; i < p.buffer_sizes.size(); ++i) {
    buffers.push_back({{"mem_id", i},
                       {"device", to_string(p.buffer_device(static_cast<uint32_t>(i)))},
                       {"size", p.buffer_sizes[i]}});
  }
  j["buffers"] = buffers;
  j["non_const_buffer_device"] = json::array();
  for (const pte::BufferDevice& d : p.buffer_devices) {
    j["non_const_buffer_device"].push_back(
        {{"buffer_idx", d.buffer_idx}, {"device", to_string(d.device)}});
  }
  json values = json::array();
  for (const pte::EValue& v : p.values)
    values.push_back(value_json(file, p, v));
  j["values"] = values;
  json ops = json::array();
  for (const pte::Operator& o : p.operators)
    ops.push_back(op_text(o));
  j["operators"] = ops;
  json instrs = json::array();
  for (const pte::Chain& c : p.chains) {
    for (const pte::Instruction& in : c.instructions) {
      json ij;
      switch (in.kind) {
        case pte::InstrKind::kKernel:
          ij = {{"kind", "kernel"},
                {"op", op_text(p.operators[static_cast<size_t>(in.index)])},
                {"args", in.args}};
          break;
        case pte::InstrKind::kDelegate:
          ij = {{"kind", "delegate"}, {"delegate", in.index}, {"args", in.args}};
          break;
        case pte::InstrKind::kMove:
          ij = {{"kind", "move"}, {"from", in.index}, {"to", in.target}};
          break;
        case pte::InstrKind::kJumpFalse:
          ij = {{"kind", "jump_false"}, {"condition", in.index}, {"destination", in.target}};
          break;
        case pte::InstrKind::kFree:
          ij = {{"kind", "free"}, {"value", in.index}};
          break;
      }
      instrs.push_back(ij);
    }
  }
  j["instructions"] = instrs;
  json delegates = json::array();
  for (const pte::Delegate& d : p.delegates) {
    json dj;
    dj["id"] = d.id;
    dj["location"] = d.location == 0 ? "inline" : "segment";
    dj["index"] = d.index;
    dj["size"] = file.delegate_bytes(d).size();
    json specs = json::object();
    for (const pte::CompileSpec& cs : d.compile_specs)
      specs[cs.key] = spec_value(cs);
    dj["compile_specs"] = specs;
    if (with_delegates) {
      DelegateSummary s = summarize_delegate(file, d);
      if (s.decoded) {
        const pte::Plan& sub = s.program.plan;
        json pj;
        pj["version"] = s.program.version;
        pj["inputs"] = sub.inputs.size();
        pj["outputs"] = sub.outputs.size();
        pj["ops"] = op_counts(sub);
        pj["workspace_bytes"] = sub.buffer_sizes.size() > 1 ? sub.buffer_sizes[1] : 0;
        json consts = json::array();
        for (const auto& [value, key] : s.program.constants) {
          auto bytes = file.named_bytes(key);
          consts.push_back({{"key", key},
                            {"value", value},
                            {"fingerprint", bytes ? fingerprint(*bytes) : "missing"}});
        }
        pj["constants"] = consts;
        dj["program"] = pj;
      } else if (!s.error.empty()) {
        dj["program"] = {{"error", s.error}};
      }
    }
    delegates.push_back(dj);
  }
  j["delegates"] = delegates;
  return j;
}

std::string value_text(const pte::File& file, const pte::Plan& plan, size_t i,
                       const pte::EValue& v) {
  std::string s = "%" + std::to_string(i) + " " + pte::value_kind_name(v.kind);
  switch (v.kind) {
    case pte::ValueKind::kInt:
      return s + " " + std::to_string(v.i);
    case pte::ValueKind::kBool:
      return s + (v.b ? " true" : " false");
    case pte::ValueKind::kDouble:
      return s + " " + json(v.d).dump();
    case pte::ValueKind::kString:
      return s + " " + json(v.s).dump(-1, ' ', false, json::error_handler_t::replace);
    case pte::ValueKind::kIntList:  // the integers, resolved through the Int values
      return s + " " + json(plan.int_list(v)).dump();
    case pte::ValueKind::kDoubleList:
      return s + " " + json(v.doubles).dump();
    case pte::ValueKind::kBoolList:
      return s + " " + json(v.bools).dump();
    case pte::ValueKind::kTensorList:
    case pte::ValueKind::kOptionalTensorList:
      return s + " " + json(v.items).dump();
    case pte::ValueKind::kTensor: {
      const pte::Tensor& t = v.tensor;
      s += " " + dtype_text(t.scalar_type) + sizes_text(t.sizes) +
           (t.shape_dynamism == 1 ? " (bound)" : "") + " " + to_string(t.device);
      if (t.allocation) {
        s += " mem=" + std::to_string(t.allocation->memory_id) + "+" +
             std::to_string(t.allocation->offset);
      }
      if (t.data_buffer_idx > 0 && t.allocation) {
        auto bytes = file.mutable_bytes(t.data_buffer_idx);
        s += " state, initial=" + std::to_string(t.data_buffer_idx) + " (" +
             fingerprint(bytes.subspan(
                 0, std::min<size_t>(bytes.size(), static_cast<size_t>(tensor_nbytes(t))))) +
             ")";
      } else if (t.allocation && !t.fully_qualified_name.empty()) {
        s += " state \"" + t.fully_qualified_name + "\", initial zeros";
      } else if (t.data_buffer_idx > 0) {
        auto bytes = file.constant_bytes(t.data_buffer_idx);
        s += " constant=" + std::to_string(t.data_buffer_idx) + " (" +
             fingerprint(bytes.subspan(
                 0, std::min<size_t>(bytes.size(), static_cast<size_t>(tensor_nbytes(t))))) +
             ")";
      }
      return s;
    }
    case pte::ValueKind::kNull:
      return s;
  }
  return s;
}

std::string args_text(const std::vector<int32_t>& args) {
  std::string s;
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", %" : "%") + std::to_string(args[i]);
  return s;
}

}  // namespace

std::string dump_json(const pte::File& file) {
  json j;
  j["file_size"] = file.file_size;
  j["identifier"] = "ET12";
  j["version"] = file.program.version;
  if (file.header) {
    j["extended_header"] = {{"length", file.header->length},
                            {"program_size", file.header->program_size},
                            {"segment_base_offset", file.header->segment_base_offset},
                            {"segment_data_size", file.header->segment_data_size}};
  } else {
    j["extended_header"] = json();
  }
  json segs = json::array();
  for (const pte::Segment& s : file.program.segments)
    segs.push_back({{"offset", s.offset}, {"size", s.size}});
  j["segments"] = segs;
  if (file.program.constant_segment) {
    j["constant_segment"] = {{"segment_index", file.program.constant_segment->segment_index},
                             {"offsets", file.program.constant_segment->offsets}};
  } else {
    j["constant_segment"] = json();
  }
  j["constant_buffer_entries"] = file.program.constant_buffer.size();
  json named = json::array();
  for (const pte::NamedData& n : file.program.named_data) {
    auto bytes = file.named_bytes(n.key);
    named.push_back(
        {{"key", n.key}, {"segment_index", n.segment_index}, {"size", bytes ? bytes->size() : 0}});
  }
  j["named_data"] = named;
  json plans = json::array();
  for (const pte::Plan& p : file.program.plans)
    plans.push_back(plan_json(file, p, true));
  j["plans"] = plans;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::string dump_text(const pte::File& file) {
  std::string out = "program: ET12, version " + std::to_string(file.program.version) + ", " +
                    std::to_string(file.file_size) + " bytes\n";
  if (file.header) {
    out += "extended header: program " + std::to_string(file.header->program_size) +
           " bytes, segments at " + std::to_string(file.header->segment_base_offset) + " (" +
           std::to_string(file.header->segment_data_size) + " bytes)\n";
  } else {
    out += "extended header: none\n";
  }
  for (size_t i = 0; i < file.program.segments.size(); ++i) {
    const pte::Segment& s = file.program.segments[i];
    std::string role;
    if (file.program.constant_segment && file.program.constant_segment->segment_index == i &&
        !file.program.constant_segment->offsets.empty()) {
      size_t n = file.program.constant_segment->offsets.size() - 1;  // entry 0: placeholder
      role = n == 0 ? std::string("constants (none)") : "constants (" + std::to_string(n) + ")";
    }
    for (const pte::SubsegmentOffsets& m : file.program.mutable_data_segments) {
      if (m.segment_index == i && !m.offsets.empty()) {
        role += (role.empty() ? "" : ", ") + std::string("initial state (") +
                std::to_string(m.offsets.size() - 1) + ")";
      }
    }
    for (const pte::NamedData& n : file.program.named_data) {
      if (n.segment_index == i) role += (role.empty() ? "named: " : ", ") + n.key;
    }
    for (const pte::Plan& p : file.program.plans) {
      for (const pte::Delegate& d : p.delegates) {
        if (d.location == 1 && d.index == i && role.find("delegate") == std::string::npos) {
          role += (role.empty() ? "" : ", ") + std::string("delegate blob");
        }
      }
    }
    out += "segment " + std::to_string(i) + ": offset " + std::to_string(s.offset) + ", " +
           std::to_string(s.size) + " bytes" + (role.empty() ? "" : " — " + role) + "\n";
  }
  if (!file.program.constant_buffer.empty()) {
    out += "inline constant_buffer (deprecated): " +
           std::to_string(file.program.constant_buffer.size()) + " entries\n";
  }
  for (const pte::Plan& p : file.program.plans) {
    out += "\nplan \"" + p.name + "\": inputs [" + args_text(p.inputs) + "], outputs [" +
           args_text(p.outputs) + "]\n";
    out += "  buffers:\n";
    for (size_t i = 1; i < p.buffer_sizes.size(); ++i) {
      out += "    " + std::to_string(i) + ": " +
             to_string(p.buffer_device(static_cast<uint32_t>(i))) + ", " +
             std::to_string(p.buffer_sizes[i]) + " bytes\n";
    }
    out += "  values:\n";
    for (size_t i = 0; i < p.values.size(); ++i)
      out += "    " + value_text(file, p, i, p.values[i]) + "\n";
    out += "  instructions:\n";
    size_t k = 0;
    for (const pte::Chain& c : p.chains) {
      for (const pte::Instruction& in : c.instructions) {
        out += "    " + std::to_string(k++) + ": ";
        switch (in.kind) {
          case pte::InstrKind::kKernel:
            out += op_text(p.operators[static_cast<size_t>(in.index)]) + "(" + args_text(in.args) +
                   ")\n";
            break;
          case pte::InstrKind::kDelegate:
            out += "delegate " + std::to_string(in.index) + " " +
                   p.delegates[static_cast<size_t>(in.index)].id + "(" + args_text(in.args) + ")\n";
            break;
          case pte::InstrKind::kMove:
            out += "move %" + std::to_string(in.index) + " -> %" + std::to_string(in.target) + "\n";
            break;
          case pte::InstrKind::kJumpFalse:
            out += "jump_false %" + std::to_string(in.index) + " -> " + std::to_string(in.target) +
                   "\n";
            break;
          case pte::InstrKind::kFree:
            out += "free %" + std::to_string(in.index) + "\n";
            break;
        }
      }
    }
    if (!p.delegates.empty()) out += "  delegates:\n";
    for (size_t i = 0; i < p.delegates.size(); ++i) {
      const pte::Delegate& d = p.delegates[i];
      out += "    " + std::to_string(i) + ": " + d.id + ", " +
             (d.location == 0 ? "inline " : "segment ") + std::to_string(d.index) + " (" +
             std::to_string(file.delegate_bytes(d).size()) + " bytes)";
      for (const pte::CompileSpec& cs : d.compile_specs)
        out += ", " + cs.key + "=" + spec_value(cs);
      out += "\n";
      DelegateSummary s = summarize_delegate(file, d);
      if (s.decoded) {
        const pte::Plan& sub = s.program.plan;
        out += "       " + std::to_string(sub.inputs.size()) + " inputs, " +
               std::to_string(sub.outputs.size()) + " outputs, " +
               std::to_string(s.program.constants.size()) + " constants, workspace " +
               std::to_string(sub.buffer_sizes.size() > 1 ? sub.buffer_sizes[1] : 0) +
               " bytes; ops:";
        for (const auto& [op, n] : op_counts(sub))
          out += " " + op + " x" + std::to_string(n);
        out += "\n";
      } else if (!s.error.empty()) {
        out += "       cannot decode: " + s.error + "\n";
      }
    }
  }
  return out;
}

std::string dump_dot(const pte::File& file) {
  std::string out =
      "digraph program {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (size_t pi = 0; pi < file.program.plans.size(); ++pi) {
    const pte::Plan& p = file.program.plans[pi];
    std::map<int32_t, std::string> producer;  // value -> node id
    auto device_of = [&](int32_t v) {
      const pte::EValue& ev = p.values[static_cast<size_t>(v)];
      return ev.kind == pte::ValueKind::kTensor ? ev.tensor.device : Device{};
    };
    for (int32_t in : p.inputs) {
      std::string id = "p" + std::to_string(pi) + "_in" + std::to_string(in);
      const pte::Tensor& t = p.values[static_cast<size_t>(in)].tensor;
      out += "  " + id + " [shape=ellipse, label=\"input %" + std::to_string(in) + "\\n" +
             dtype_text(t.scalar_type) + sizes_text(t.sizes) + " " + to_string(t.device) + "\"];\n";
      producer[in] = id;
    }
    size_t k = 0;
    for (const pte::Chain& c : p.chains) {
      for (const pte::Instruction& in : c.instructions) {
        std::string id = "p" + std::to_string(pi) + "_i" + std::to_string(k);
        std::vector<int32_t> inputs, outputs;
        std::string label, style;
        if (in.kind == pte::InstrKind::kKernel) {
          const pte::Operator& op = p.operators[static_cast<size_t>(in.index)];
          label = op_text(op);
          // ExecuTorch's convention: the last argument is the return value (out, or a list of
          // outs).
          int32_t ret = in.args.empty() ? -1 : in.args.back();
          if (ret >= 0 && p.values[static_cast<size_t>(ret)].kind == pte::ValueKind::kTensorList) {
            outputs = p.values[static_cast<size_t>(ret)].items;
          } else if (ret >= 0) {
            outputs = {ret};
          }
          for (size_t a = 0; a + 1 < in.args.size(); ++a) {
            int32_t v = in.args[a];
            if (p.values[static_cast<size_t>(v)].kind == pte::ValueKind::kTensor &&
                std::find(outputs.begin(), outputs.end(), v) == outputs.end()) {
              inputs.push_back(v);
            }
          }
          if (op.name.rfind("et_copy::", 0) == 0) style = ", style=filled, fillcolor=\"#f4b183\"";
        } else if (in.kind == pte::InstrKind::kDelegate) {
          const pte::Delegate& d = p.delegates[static_cast<size_t>(in.index)];
          DelegateSummary s = summarize_delegate(file, d);
          size_t n_in = s.decoded ? s.program.plan.inputs.size() : in.args.size();
          for (size_t a = 0; a < in.args.size(); ++a)
            (a < n_in ? inputs : outputs).push_back(in.args[a]);
          Device dev = outputs.empty() ? Device{} : device_of(outputs[0]);
          label = "delegate " + std::to_string(in.index) + ": " + d.id + "\\n" + to_string(dev);
          if (s.decoded)
            label += "\\n" + std::to_string(op_counts(s.program.plan).size()) + " op kinds";
          style = dev.is_cpu() ? ", style=filled, fillcolor=\"#dddddd\""
                               : ", style=filled, fillcolor=\"#a9d18e\", peripheries=2";
        } else {
          label = "control";
        }
        out += "  ";
        out += id;
        out += " [label=\"" + label + "\"";
        out += style;
        out += "];\n";
        for (int32_t v : inputs) {
          auto it = producer.find(v);
          if (it == producer.end()) continue;  // constants
          Device from = device_of(v);
          out += "  " + it->second + " -> " + id + " [label=\"%" + std::to_string(v) + "\"" +
                 (from.is_cpu() ? "" : ", color=\"#2e7d32\", penwidth=2") + "];\n";
        }
        for (int32_t v : outputs)
          producer[v] = id;
        ++k;
      }
    }
    for (int32_t o : p.outputs) {
      std::string id = "p" + std::to_string(pi) + "_out" + std::to_string(o);
      out += "  " + id + " [shape=ellipse, label=\"output %" + std::to_string(o) + " " +
             to_string(device_of(o)) + "\"];\n";
      if (producer.count(o)) out += "  " + producer[o] + " -> " + id + ";\n";
    }
  }
  return out + "}\n";
}

}  // namespace etc
