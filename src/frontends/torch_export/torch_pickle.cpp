// The restricted torch.save pickle reader (torch_pickle.h). Facts used, from Python's pickle
// format (Lib/pickletools.py documents every opcode) and torch.save's layout:
// - torch.save writes protocol 2: PROTO, GLOBAL ("module\nname\n"), BINPUT/BINGET (memo),
//   MARK, TUPLE*, EMPTY_DICT/LIST, SETITEMS, APPENDS, BININT*, BINUNICODE, NONE, NEWTRUE/FALSE,
//   REDUCE (call), BINPERSID (a storage reference), STOP.
// - A storage reference is the tuple ("storage", <StorageType global>, key, location, numel);
//   its bytes are the zip entry <top>/data/<key>.
// - A tensor is REDUCE(torch._utils._rebuild_tensor_v2, (storage, storage_offset, size,
//   stride, requires_grad, backward_hooks[, metadata])).
// - A wrapper subclass is REDUCE(torch._tensor._rebuild_from_type_v2, (func, type, args,
//   state)) with func torch._utils._rebuild_wrapper_subclass and args (cls, dtype, size,
//   stride, storage_offset, layout, device, requires_grad); state is a dict of attributes.
#include "frontends/torch_export/torch_pickle.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

namespace etc::torch_import {
namespace {

// A torch.save pickle of one weight is a few hundred bytes; anything past this is not one.
constexpr size_t kMaxPickleBytes = size_t{16} << 20;
constexpr int64_t kMaxDim = int64_t{1} << 48;

// The pickle's values. Objects live in one pool and point at each other with raw pointers,
// so a cycle (a list appended to itself through the memo) neither leaks nor recurses.
struct Obj {
  enum class K {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kTuple,
    kList,
    kDict,         // items: key, value, key, value, ...
    kFunction,     // an allow-listed callable; s: "module name"
    kClass,        // an allow-listed class; s: "module.Name"
    kDType,        // a torch dtype; dtype
    kStorageType,  // torch.FloatStorage, ...; dtype
    kStorage,      // a persistent storage reference; s: key, i: numel, dtype
    kLayout,       // s: "torch.strided"
    kDevice,       // s: "cpu"
    kTensor,       // tensor
    kWrapper,      // a subclass: s class, dtype, tensor.sizes; items: its state dict
    kRecordClass,  // an allow-listed plain class of torchao's (a config record); s: "Name"
    kRecord,       // an instance of one (NEWOBJ, then BUILD): s "Name", items its state dict;
                   // an enum member (REDUCE of the class by its value): i the value
  };
  K kind = K::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;
  DType dtype = DType::kFloat32;
  std::vector<Obj*> items;
  PickledTensor tensor;
};

const char* kind_name(Obj::K k) {
  switch (k) {
    case Obj::K::kNone:
      return "None";
    case Obj::K::kBool:
      return "a bool";
    case Obj::K::kInt:
      return "an int";
    case Obj::K::kFloat:
      return "a float";
    case Obj::K::kStr:
      return "a string";
    case Obj::K::kTuple:
      return "a tuple";
    case Obj::K::kList:
      return "a list";
    case Obj::K::kDict:
      return "a dict";
    case Obj::K::kFunction:
      return "a function";
    case Obj::K::kClass:
      return "a class";
    case Obj::K::kDType:
      return "a dtype";
    case Obj::K::kStorageType:
      return "a storage type";
    case Obj::K::kStorage:
      return "a storage";
    case Obj::K::kLayout:
      return "a layout";
    case Obj::K::kDevice:
      return "a device";
    case Obj::K::kTensor:
      return "a tensor";
    case Obj::K::kWrapper:
      return "a tensor subclass";
    case Obj::K::kRecordClass:
      return "a record class";
    case Obj::K::kRecord:
      return "a record";
  }
  return "?";
}

// What a GLOBAL may name. Anything else is refused.
struct Allowed {
  Obj::K kind;
  DType dtype = DType::kFloat32;
};
const std::map<std::string, Allowed>& allow_list() {
  static const std::map<std::string, Allowed> table = [] {
    std::map<std::string, Allowed> t;
    for (const char* f :
         {"torch._utils _rebuild_tensor_v2", "torch._utils _rebuild_parameter",
          "torch._utils _rebuild_wrapper_subclass", "torch._tensor _rebuild_from_type_v2",
          "collections OrderedDict", "torch.serialization _get_layout", "torch device"}) {
      t[f] = {Obj::K::kFunction};
    }
    const std::pair<const char*, DType> dtypes[] = {
        {"uint8", DType::kUInt8},      {"int8", DType::kInt8},       {"int16", DType::kInt16},
        {"int32", DType::kInt32},      {"int64", DType::kInt64},     {"float16", DType::kFloat16},
        {"float32", DType::kFloat32},  {"float64", DType::kFloat64}, {"bool", DType::kBool},
        {"bfloat16", DType::kBFloat16}};
    for (const auto& [n, d] : dtypes)
      t[std::string("torch ") + n] = {Obj::K::kDType, d};
    const std::pair<const char*, DType> storages[] = {
        {"ByteStorage", DType::kUInt8},    {"CharStorage", DType::kInt8},
        {"ShortStorage", DType::kInt16},   {"IntStorage", DType::kInt32},
        {"LongStorage", DType::kInt64},    {"HalfStorage", DType::kFloat16},
        {"FloatStorage", DType::kFloat32}, {"DoubleStorage", DType::kFloat64},
        {"BoolStorage", DType::kBool},     {"BFloat16Storage", DType::kBFloat16}};
    for (const auto& [n, d] : storages)
      t[std::string("torch ") + n] = {Obj::K::kStorageType, d};
    // Sub-byte integer dtypes name what IntxUnpackedToInt8Tensor's int8 qdata holds.
    for (int bits = 1; bits <= 7; ++bits) {
      t["torch int" + std::to_string(bits)] = {Obj::K::kDType, DType::kInt8};
      t["torch uint" + std::to_string(bits)] = {Obj::K::kDType, DType::kUInt8};
    }
    for (const char* c :
         {"torchao.quantization Int8Tensor", "torchao.quantization IntxUnpackedToInt8Tensor",
          "torch Tensor", "torch.nn.parameter Parameter"}) {
      t[c] = {Obj::K::kClass};
    }
    // The records Int8DynamicActivationInt8WeightConfig's weight carries to describe the
    // activations' quantization (which the program spells out in its own nodes): the kwargs,
    // their granularity and the mapping type (an enum, rebuilt from its value).
    for (const char* c :
         {"torchao.quantization.quantize_.workflows.int8.int8_tensor "
          "QuantizeTensorToInt8Kwargs",
          "torchao.quantization.granularity PerRow", "torchao.quantization.granularity PerTensor",
          "torchao.quantization.quant_primitives MappingType"}) {
      t[c] = {Obj::K::kRecordClass};
    }
    return t;
  }();
  return table;
}

class Reader {
 public:
  Reader(std::span<const uint8_t> bytes, const std::string& file) : b_(bytes), file_(file) {}

  Result<PickledWeight> run();

 private:
  Location at(size_t offset) const {
    Location loc;
    loc.file = file_;
    loc.byte_offset = offset;
    return loc;
  }
  Status fail(const std::string& m) const { return invalid_input(m, at(op_)); }
  Status refuse(const std::string& m) const { return unsupported(m, at(op_)); }

  Obj* make(Obj::K k) {
    pool_.push_back(std::make_unique<Obj>());
    pool_.back()->kind = k;
    return pool_.back().get();
  }
  Status need(size_t n) const {
    if (n > b_.size() - pos_) {
      return invalid_input("the pickle is truncated: opcode at byte " + std::to_string(op_) +
                               " needs " + std::to_string(n) + " more bytes, " +
                               std::to_string(b_.size() - pos_) + " are left",
                           at(pos_));
    }
    return Status();
  }
  Result<uint64_t> le(size_t n) {
    ETC_RETURN_IF_ERROR(need(n));
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k)
      v |= static_cast<uint64_t>(b_[pos_ + k]) << (8 * k);
    pos_ += n;
    return v;
  }
  Result<std::string> bytes(uint64_t n) {
    if (n > b_.size()) return fail("a string of " + std::to_string(n) + " bytes is past the end");
    ETC_RETURN_IF_ERROR(need(static_cast<size_t>(n)));
    std::string s(reinterpret_cast<const char*>(b_.data() + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  Result<std::string> line() {
    for (size_t k = pos_; k < b_.size() && k - pos_ <= 256; ++k) {
      if (b_[k] == '\n') {
        std::string s(reinterpret_cast<const char*>(b_.data() + pos_), k - pos_);
        pos_ = k + 1;
        return s;
      }
    }
    return fail("GLOBAL's name is not a line of at most 256 bytes");
  }
  Result<Obj*> pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      return fail("the opcode pops an empty stack");
    Obj* o = stack_.back();
    stack_.pop_back();
    return o;
  }
  Result<std::vector<Obj*>> pop_mark() {
    if (marks_.empty()) return fail("the opcode needs a MARK, and there is none");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Obj*> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Status push(Obj* o) {
    if (stack_.size() >= (size_t{1} << 20)) return fail("the pickle's stack is too deep");
    stack_.push_back(o);
    return Status();
  }
  Result<Obj*> global(const std::string& module, const std::string& name);
  Result<Obj*> call(Obj* fn, Obj* args, int depth = 0);
  Result<Obj*> rebuild_tensor(const std::vector<Obj*>& a);
  Result<Obj*> rebuild_wrapper(const std::vector<Obj*>& a);
  Result<Obj*> storage_ref(Obj* pid);
  Result<std::vector<int64_t>> int_tuple(Obj* o, const char* what) const;
  Status expect(Obj* o, Obj::K k, const std::string& what) const {
    if (o->kind == k) return Status();
    return fail(what + " must be " + kind_name(k) + ", got " + kind_name(o->kind));
  }
  // An attribute's value as text, at most kTextBudget characters in all (then "..."): a
  // container or record may hold itself through the memo, and each level multiplies the work.
  std::string text(const Obj* o) const {
    size_t budget = kTextBudget;
    return text(o, 0, budget);
  }
  std::string text(const Obj* o, int depth, size_t& budget) const;
  std::string text_of(const Obj* o, int depth, size_t& budget) const;
  static constexpr size_t kTextBudget = 1024;

  std::span<const uint8_t> b_;
  const std::string& file_;
  size_t pos_ = 0;
  size_t op_ = 0;  // the current opcode's offset
  std::vector<std::unique_ptr<Obj>> pool_;
  std::vector<Obj*> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, Obj*> memo_;
};

Result<Obj*> Reader::global(const std::string& module, const std::string& name) {
  const std::string key = module + " " + name;
  auto it = allow_list().find(key);
  if (it == allow_list().end()) {
    std::string hint;
    if (module.rfind("torchao", 0) == 0) {
      hint = std::string(
                 "; of torchao's tensor subclasses etc imports Int8Tensor ("
                 "Int8WeightOnlyConfig, Int8DynamicActivationInt8WeightConfig) and "
                 "IntxUnpackedToInt8Tensor (IntxWeightOnlyConfig, "
                 "Int8DynamicActivationIntxWeightConfig), as torchao ") +
             kTorchaoTested + " saves them";
      if (name.find("Kwargs") != std::string::npos || name.find("Per") == 0)
        hint += "; of their activations' quantization, per row (PerRow) or per tensor (PerTensor)";
    } else if (module == "torch") {
      hint = "; etc reads the dtypes " + std::string(dtype_names());
    }
    return refuse("the pickle names global '" + module + "." + name +
                  "', which etc does not read (nothing in a pickle is executed; only torch's "
                  "tensor rebuilding globals are understood)" +
                  hint);
  }
  Obj* o = make(it->second.kind);
  o->dtype = it->second.dtype;
  o->s = it->second.kind == Obj::K::kClass || it->second.kind == Obj::K::kDType
             ? module + "." + name
         : it->second.kind == Obj::K::kRecordClass ? name
                                                   : key;
  return o;
}

Result<std::vector<int64_t>> Reader::int_tuple(Obj* o, const char* what) const {
  if (o->kind != Obj::K::kTuple && o->kind != Obj::K::kList)
    return fail(std::string(what) + " must be a tuple of ints, got " + kind_name(o->kind));
  if (o->items.size() > 16) return refuse(std::string(what) + " has more than 16 dims");
  std::vector<int64_t> v;
  for (Obj* e : o->items) {
    if (e->kind != Obj::K::kInt || e->i < 0 || e->i > kMaxDim)
      return fail(std::string(what) + " must hold ints in [0, 2^48]");
    v.push_back(e->i);
  }
  return v;
}

Result<Obj*> Reader::storage_ref(Obj* pid) {
  // ("storage", storage type, key, location, numel)
  if (pid->kind != Obj::K::kTuple || pid->items.size() != 5 ||
      pid->items[0]->kind != Obj::K::kStr || pid->items[0]->s != "storage") {
    return refuse(
        "a persistent id that is not a storage reference (\"storage\", type, key, "
        "location, numel)");
  }
  Obj* type = pid->items[1];
  ETC_RETURN_IF_ERROR(expect(type, Obj::K::kStorageType, "the storage's type"));
  ETC_RETURN_IF_ERROR(expect(pid->items[2], Obj::K::kStr, "the storage's key"));
  ETC_RETURN_IF_ERROR(expect(pid->items[4], Obj::K::kInt, "the storage's size"));
  const std::string& key = pid->items[2]->s;
  if (key.empty() || key.size() > 64 || key.find('/') != std::string::npos || key == "..")
    return fail("the storage key '" + key + "' is not a plain name");
  if (pid->items[4]->i < 0 || pid->items[4]->i > kMaxDim)
    return fail("the storage's size " + std::to_string(pid->items[4]->i) + " is implausible");
  Obj* s = make(Obj::K::kStorage);
  s->s = key;
  s->i = pid->items[4]->i;
  s->dtype = type->dtype;
  return s;
}

Result<Obj*> Reader::rebuild_tensor(const std::vector<Obj*>& a) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (a.size() != 6 && a.size() != 7)
    return fail("_rebuild_tensor_v2 takes 6 or 7 arguments, got " + std::to_string(a.size()));
  ETC_RETURN_IF_ERROR(expect(a[0], Obj::K::kStorage, "_rebuild_tensor_v2's storage"));
  ETC_RETURN_IF_ERROR(expect(a[1], Obj::K::kInt, "_rebuild_tensor_v2's storage offset"));
  Obj* t = make(Obj::K::kTensor);
  t->tensor.dtype = a[0]->dtype;
  t->tensor.storage_key = a[0]->s;
  t->tensor.storage_numel = a[0]->i;
  if (a[1]->i < 0 || a[1]->i > kMaxDim) return fail("the storage offset is out of range");
  t->tensor.storage_offset = a[1]->i;
  ETC_ASSIGN_OR_RETURN(t->tensor.sizes, int_tuple(a[2], "the tensor's size"));
  ETC_ASSIGN_OR_RETURN(t->tensor.strides, int_tuple(a[3], "the tensor's stride"));
  if (t->tensor.sizes.size() != t->tensor.strides.size())
    return fail("the tensor's size and stride differ in length");
  if (a[5]->kind != Obj::K::kDict || !a[5]->items.empty())
    return refuse("a tensor with backward hooks");
  return t;
}

Result<Obj*> Reader::rebuild_wrapper(const std::vector<Obj*>& a) {
  // (cls, dtype, size, stride, storage_offset, layout, device, requires_grad)
  if (a.size() != 8)
    return fail("_rebuild_wrapper_subclass takes 8 arguments, got " + std::to_string(a.size()));
  ETC_RETURN_IF_ERROR(expect(a[0], Obj::K::kClass, "_rebuild_wrapper_subclass's class"));
  ETC_RETURN_IF_ERROR(expect(a[1], Obj::K::kDType, "_rebuild_wrapper_subclass's dtype"));
  ETC_RETURN_IF_ERROR(expect(a[5], Obj::K::kLayout, "_rebuild_wrapper_subclass's layout"));
  if (a[5]->s != "torch.strided") return refuse("a tensor subclass of layout " + a[5]->s);
  Obj* w = make(Obj::K::kWrapper);
  w->s = a[0]->s;
  w->dtype = a[1]->dtype;
  ETC_ASSIGN_OR_RETURN(w->tensor.sizes, int_tuple(a[2], "the subclass's size"));
  return w;
}

Result<Obj*> Reader::call(Obj* fn, Obj* args, int depth) {
  if (depth > 2) return refuse("rebuild calls nested more than twice");
  if (fn->kind == Obj::K::kRecordClass && fn->s == "MappingType") {
    // MappingType(value): the enum's member.
    if (args->kind != Obj::K::kTuple || args->items.size() != 1 ||
        args->items[0]->kind != Obj::K::kInt)
      return fail("MappingType is rebuilt from one int");
    Obj* o = make(Obj::K::kRecord);
    o->s = fn->s;
    o->i = args->items[0]->i;
    return o;
  }
  if (fn->kind != Obj::K::kFunction)
    return fail(std::string("REDUCE calls ") + kind_name(fn->kind) + ", not a function");
  ETC_RETURN_IF_ERROR(expect(args, Obj::K::kTuple, "REDUCE's arguments"));
  const std::vector<Obj*>& a = args->items;
  const std::string& f = fn->s;
  if (f == "collections OrderedDict") {
    if (!a.empty()) return refuse("OrderedDict built from items");
    return make(Obj::K::kDict);
  }
  if (f == "torch.serialization _get_layout" || f == "torch device") {
    if (a.empty() || a.size() > 2 || a[0]->kind != Obj::K::kStr) return fail(f + " takes a name");
    Obj* o = make(f == "torch device" ? Obj::K::kDevice : Obj::K::kLayout);
    o->s = a[0]->s;
    return o;
  }
  if (f == "torch._utils _rebuild_tensor_v2") return rebuild_tensor(a);
  if (f == "torch._utils _rebuild_parameter") {
    if (a.size() != 3 || a[0]->kind != Obj::K::kTensor)
      return fail("_rebuild_parameter takes (tensor, requires_grad, hooks)");
    return a[0];
  }
  if (f == "torch._utils _rebuild_wrapper_subclass") return rebuild_wrapper(a);
  if (f == "torch._tensor _rebuild_from_type_v2") {
    // (func, new_type, args, state): func(*args), given type new_type and attributes state.
    if (a.size() != 4) return fail("_rebuild_from_type_v2 takes 4 arguments");
    ETC_RETURN_IF_ERROR(expect(a[1], Obj::K::kClass, "_rebuild_from_type_v2's type"));
    ETC_ASSIGN_OR_RETURN(Obj * r, call(a[0], a[2], depth + 1));
    if (a[3]->kind != Obj::K::kDict) return fail("_rebuild_from_type_v2's state must be a dict");
    if (r->kind == Obj::K::kWrapper) {
      if (r->s != a[1]->s) return fail("the subclass " + r->s + " is rebuilt as type " + a[1]->s);
      r->items = a[3]->items;
      return r;
    }
    if (r->kind == Obj::K::kTensor) {
      if (a[1]->s != "torch.Tensor" && a[1]->s != "torch.nn.parameter.Parameter")
        return refuse("a plain tensor rebuilt as type " + a[1]->s);
      return r;
    }
    return fail(std::string("_rebuild_from_type_v2's function returned ") + kind_name(r->kind));
  }
  return fail("REDUCE of " + f);  // unreachable: every allowed function is handled above
}

std::string Reader::text(const Obj* o, int depth, size_t& budget) const {
  if (depth > 4 || budget == 0) return "...";
  std::string s = text_of(o, depth, budget);
  budget -= std::min(budget, s.size());
  return s;
}

std::string Reader::text_of(const Obj* o, int depth, size_t& budget) const {
  switch (o->kind) {
    case Obj::K::kNone:
      return "None";
    case Obj::K::kBool:
      return o->i ? "True" : "False";
    case Obj::K::kInt:
      return std::to_string(o->i);
    case Obj::K::kFloat:
      return std::to_string(o->f);
    case Obj::K::kStr:
      return "'" + o->s + "'";
    case Obj::K::kTuple:
    case Obj::K::kList: {
      std::string s = o->kind == Obj::K::kTuple ? "(" : "[";
      for (size_t k = 0; k < o->items.size() && k < 16; ++k)
        s += (k ? ", " : "") + text(o->items[k], depth + 1, budget);
      return s + (o->kind == Obj::K::kTuple ? ")" : "]");
    }
    case Obj::K::kDType:
      return o->s;  // "torch.int4"
    case Obj::K::kTensor:
      return std::string(dtype_name(o->tensor.dtype)) + " tensor";
    case Obj::K::kRecord: {
      if (o->s == "MappingType") {
        const char* names[] = {"SYMMETRIC", "SYMMETRIC_NO_CLIPPING_ERR", "ASYMMETRIC"};
        return o->i >= 1 && o->i <= 3 ? "MappingType." + std::string(names[o->i - 1])
                                      : "MappingType(" + std::to_string(o->i) + ")";
      }
      std::string s = o->s + "(";
      for (size_t k = 0; k + 1 < o->items.size() && k < 32; k += 2) {
        // A field's name bare when it is an identifier, else quoted (so that no key can
        // spell out other fields).
        const Obj* key = o->items[k];
        const bool name = key->kind == Obj::K::kStr && !key->s.empty() &&
                          std::all_of(key->s.begin(), key->s.end(), [](char c) {
                            return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                          });
        s += (k ? ", " : "") + (name ? key->s : text(key, depth + 1, budget)) + "=" +
             text(o->items[k + 1], depth + 1, budget);
      }
      return s + ")";
    }
    default:
      return kind_name(o->kind);
  }
}

Result<PickledWeight> Reader::run() {
  if (b_.size() > kMaxPickleBytes) {
    return unsupported("the pickle has " + std::to_string(b_.size()) +
                           " bytes; a saved weight's has a few hundred",
                       at(0));
  }
  while (true) {
    op_ = pos_;
    if (pos_ >= b_.size()) {
      return invalid_input("the pickle ends without STOP (truncated)", at(pos_));
    }
    const uint8_t code = b_[pos_++];
    switch (code) {
      case 0x80: {  // PROTO
        ETC_ASSIGN_OR_RETURN(uint64_t v, le(1));
        if (v < 2 || v > 5) return refuse("pickle protocol " + std::to_string(v));
        break;
      }
      case 0x95: {  // FRAME (protocol 4): a length hint
        ETC_ASSIGN_OR_RETURN(uint64_t frame, le(8));
        (void)frame;
        break;
      }
      case 'c': {  // GLOBAL
        ETC_ASSIGN_OR_RETURN(std::string module, line());
        ETC_ASSIGN_OR_RETURN(std::string name, line());
        ETC_ASSIGN_OR_RETURN(Obj * g, global(module, name));
        ETC_RETURN_IF_ERROR(push(g));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        ETC_ASSIGN_OR_RETURN(Obj * name, pop());
        ETC_ASSIGN_OR_RETURN(Obj * module, pop());
        ETC_RETURN_IF_ERROR(expect(module, Obj::K::kStr, "STACK_GLOBAL's module"));
        ETC_RETURN_IF_ERROR(expect(name, Obj::K::kStr, "STACK_GLOBAL's name"));
        ETC_ASSIGN_OR_RETURN(Obj * g, global(module->s, name->s));
        ETC_RETURN_IF_ERROR(push(g));
        break;
      }
      case 'q':     // BINPUT
      case 'r':     // LONG_BINPUT
      case 0x94: {  // MEMOIZE
        uint64_t key = memo_.size();
        if (code != 0x94) {
          ETC_ASSIGN_OR_RETURN(key, le(code == 'q' ? 1 : 4));
        }
        if (stack_.empty()) return fail("a memo put with an empty stack");
        memo_[key] = stack_.back();
        break;
      }
      case 'h':    // BINGET
      case 'j': {  // LONG_BINGET
        ETC_ASSIGN_OR_RETURN(uint64_t key, le(code == 'h' ? 1 : 4));
        auto it = memo_.find(key);
        if (it == memo_.end()) return fail("memo entry " + std::to_string(key) + " is not set");
        ETC_RETURN_IF_ERROR(push(it->second));
        break;
      }
      case '(':  // MARK
        if (marks_.size() >= 256) return fail("MARKs nest too deep");
        marks_.push_back(stack_.size());
        break;
      case 't': {  // TUPLE
        ETC_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark());
        Obj* t = make(Obj::K::kTuple);
        t->items = std::move(items);
        ETC_RETURN_IF_ERROR(push(t));
        break;
      }
      case ')':  // EMPTY_TUPLE
        ETC_RETURN_IF_ERROR(push(make(Obj::K::kTuple)));
        break;
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        Obj* t = make(Obj::K::kTuple);
        t->items.resize(static_cast<size_t>(code - 0x84));
        for (size_t k = t->items.size(); k-- > 0;) {
          ETC_ASSIGN_OR_RETURN(t->items[k], pop());
        }
        ETC_RETURN_IF_ERROR(push(t));
        break;
      }
      case '}':  // EMPTY_DICT
        ETC_RETURN_IF_ERROR(push(make(Obj::K::kDict)));
        break;
      case ']':  // EMPTY_LIST
        ETC_RETURN_IF_ERROR(push(make(Obj::K::kList)));
        break;
      case 'a': {  // APPEND
        ETC_ASSIGN_OR_RETURN(Obj * v, pop());
        if (stack_.empty() || stack_.back()->kind != Obj::K::kList)
          return fail("APPEND to something that is not a list");
        stack_.back()->items.push_back(v);
        break;
      }
      case 'e': {  // APPENDS
        ETC_ASSIGN_OR_RETURN(std::vector<Obj*> items, pop_mark());
        if (stack_.empty() || stack_.back()->kind != Obj::K::kList)
          return fail("APPENDS to something that is not a list");
        for (Obj* v : items)
          stack_.back()->items.push_back(v);
        break;
      }
      case 's':    // SETITEM
      case 'u': {  // SETITEMS
        std::vector<Obj*> items;
        if (code == 's') {
          ETC_ASSIGN_OR_RETURN(Obj * v, pop());
          ETC_ASSIGN_OR_RETURN(Obj * k, pop());
          items = {k, v};
        } else {
          ETC_ASSIGN_OR_RETURN(items, pop_mark());
        }
        if (items.size() % 2 != 0) return fail("SETITEMS with an odd number of items");
        if (stack_.empty() || stack_.back()->kind != Obj::K::kDict)
          return fail("SETITEMS on something that is not a dict");
        for (Obj* v : items)
          stack_.back()->items.push_back(v);
        break;
      }
      case 'J': {  // BININT
        ETC_ASSIGN_OR_RETURN(uint64_t v, le(4));
        Obj* o = make(Obj::K::kInt);
        o->i = static_cast<int32_t>(static_cast<uint32_t>(v));
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'K':    // BININT1
      case 'M': {  // BININT2
        ETC_ASSIGN_OR_RETURN(uint64_t v, le(code == 'K' ? 1 : 2));
        Obj* o = make(Obj::K::kInt);
        o->i = static_cast<int64_t>(v);
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 0x8a: {  // LONG1: n bytes, little-endian two's complement
        ETC_ASSIGN_OR_RETURN(uint64_t n, le(1));
        if (n > 8) return refuse("an integer of " + std::to_string(n) + " bytes");
        ETC_ASSIGN_OR_RETURN(uint64_t v, le(static_cast<size_t>(n)));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign
        Obj* o = make(Obj::K::kInt);
        o->i = static_cast<int64_t>(v);
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        ETC_RETURN_IF_ERROR(need(8));
        uint64_t v = 0;
        for (int k = 0; k < 8; ++k)
          v = (v << 8) | b_[pos_ + static_cast<size_t>(k)];
        pos_ += 8;
        Obj* o = make(Obj::K::kFloat);
        std::memcpy(&o->f, &v, 8);
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'X':     // BINUNICODE
      case 0x8c:    // SHORT_BINUNICODE
      case 0x8d: {  // BINUNICODE8
        ETC_ASSIGN_OR_RETURN(uint64_t n, le(code == 'X' ? 4 : code == 0x8c ? 1 : 8));
        ETC_ASSIGN_OR_RETURN(std::string s, bytes(n));
        Obj* o = make(Obj::K::kStr);
        o->s = std::move(s);
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'N':
        ETC_RETURN_IF_ERROR(push(make(Obj::K::kNone)));
        break;
      case 0x88:    // NEWTRUE
      case 0x89: {  // NEWFALSE
        Obj* o = make(Obj::K::kBool);
        o->i = code == 0x88;
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'R': {  // REDUCE
        ETC_ASSIGN_OR_RETURN(Obj * args, pop());
        ETC_ASSIGN_OR_RETURN(Obj * fn, pop());
        ETC_ASSIGN_OR_RETURN(Obj * r, call(fn, args));
        ETC_RETURN_IF_ERROR(push(r));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args), for a record class only
        ETC_ASSIGN_OR_RETURN(Obj * args, pop());
        ETC_ASSIGN_OR_RETURN(Obj * cls, pop());
        if (cls->kind != Obj::K::kRecordClass || cls->s == "MappingType")
          return fail(std::string("NEWOBJ of ") + kind_name(cls->kind) + " " + cls->s);
        if (args->kind != Obj::K::kTuple || !args->items.empty())
          return fail("NEWOBJ of " + cls->s + " with arguments");
        Obj* o = make(Obj::K::kRecord);
        o->s = cls->s;
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'b': {  // BUILD: a record's state, a dict of its fields
        ETC_ASSIGN_OR_RETURN(Obj * state, pop());
        ETC_ASSIGN_OR_RETURN(Obj * o, pop());
        if (o->kind != Obj::K::kRecord || state->kind != Obj::K::kDict || !o->items.empty()) {
          return fail(std::string("BUILD of ") + kind_name(o->kind) + " from " +
                      kind_name(state->kind) + " (etc builds torchao's records from a dict)");
        }
        o->items = state->items;
        ETC_RETURN_IF_ERROR(push(o));
        break;
      }
      case 'Q': {  // BINPERSID
        ETC_ASSIGN_OR_RETURN(Obj * pid, pop());
        ETC_ASSIGN_OR_RETURN(Obj * s, storage_ref(pid));
        ETC_RETURN_IF_ERROR(push(s));
        break;
      }
      case '0': {  // POP
        ETC_ASSIGN_OR_RETURN(Obj * dropped, pop());
        (void)dropped;
        break;
      }
      case '.': {  // STOP
        ETC_ASSIGN_OR_RETURN(Obj * top, pop());
        if (!stack_.empty() || !marks_.empty()) return fail("STOP leaves values on the stack");
        PickledWeight w;
        if (top->kind == Obj::K::kTensor) {
          w.dtype = top->tensor.dtype;
          w.sizes = top->tensor.sizes;
          w.tensors.emplace_back("", top->tensor);
          return w;
        }
        if (top->kind != Obj::K::kWrapper) {
          return fail(std::string("the pickle holds ") + kind_name(top->kind) + ", not a tensor");
        }
        w.class_name = top->s;
        w.dtype = top->dtype;
        w.sizes = top->tensor.sizes;
        for (size_t k = 0; k + 1 < top->items.size(); k += 2) {
          const Obj* key = top->items[k];
          const Obj* v = top->items[k + 1];
          if (key->kind != Obj::K::kStr) {
            return fail(
                "the subclass's state has a key that is "
                "not a string");
          }
          if (v->kind == Obj::K::kTensor) {
            w.tensors.emplace_back(key->s, v->tensor);
          } else {
            w.attributes.emplace_back(key->s, text(v));
          }
        }
        return w;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", code);
        return refuse(std::string("pickle opcode ") + hex +
                      " is not one torch.save writes for a tensor; etc does not read it");
      }
    }
  }
}

// A window into another blob (an entry of the .pt2 that is itself a zip).
class SliceBlob final : public Blob {
 public:
  SliceBlob(std::shared_ptr<const Blob> base, size_t offset, size_t size)
      : base_(std::move(base)), offset_(offset), size_(size) {}
  std::span<const uint8_t> bytes() const override { return base_->bytes().subspan(offset_, size_); }
  void release(size_t offset, size_t size) const override {
    base_->release(offset_ + offset, size);
  }

 private:
  std::shared_ptr<const Blob> base_;
  size_t offset_, size_;
};

}  // namespace

Result<PickledWeight> parse_weight_pickle(std::span<const uint8_t> pickle,
                                          const std::string& file) {
  return Reader(pickle, file).run();
}

Result<TorchSaveArchive> read_torch_save(const ConstantData& bytes, const std::string& file) {
  auto blob = std::make_shared<SliceBlob>(bytes.blob, bytes.offset, bytes.size);
  if (!looks_like_zip(blob->bytes())) {
    return invalid_input(
        "a pickled weight must be a torch.save zip archive; this one does not "
        "start with 'PK'",
        Location{.file = file, .byte_offset = 0});
  }
  ETC_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::open(blob, file));
  // <top>/data.pkl, exactly one.
  std::vector<std::string> pickles;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash) == "/data.pkl")
      pickles.push_back(e.name);
  }
  if (pickles.size() != 1) {
    return invalid_input("a torch.save archive holds one <name>/data.pkl; this one has " +
                             std::to_string(pickles.size()),
                         zip.at(""));
  }
  TorchSaveArchive a;
  a.prefix = pickles[0].substr(0, pickles[0].size() - std::string("data.pkl").size());
  if (const ZipEntry* order = zip.find(a.prefix + "byteorder")) {
    ETC_ASSIGN_OR_RETURN(std::string text, zip.read_text(*order));
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.pop_back();
    if (text != "little") {
      return unsupported("byte order '" + text + "'; etc reads little-endian weights",
                         zip.at(order->name));
    }
  }
  const ZipEntry* pkl = zip.find(pickles[0]);
  ETC_ASSIGN_OR_RETURN(ConstantData data, zip.read(*pkl));
  ETC_ASSIGN_OR_RETURN(a.weight, parse_weight_pickle(data.bytes(), zip.at(pkl->name).file));
  a.zip = std::move(zip);
  return a;
}

Result<ConstantData> TorchSaveArchive::storage(const PickledTensor& t) const {
  const std::string name = prefix + "data/" + t.storage_key;
  const ZipEntry* e = zip.find(name);
  if (e == nullptr) return invalid_input("storage " + name + " is missing", zip.at(""));
  const uint64_t want =
      static_cast<uint64_t>(t.storage_numel) * static_cast<uint64_t>(dtype_size(t.dtype));
  if (e->size < want) {
    return invalid_input("the storage holds " + std::to_string(e->size) +
                             " bytes; the pickle "
                             "says " +
                             std::to_string(t.storage_numel) + " " +
                             std::string(dtype_name(t.dtype)) + " elements (" +
                             std::to_string(want) + " bytes)",
                         zip.at(name));
  }
  ETC_ASSIGN_OR_RETURN(ConstantData d, zip.read(*e));
  d.size = static_cast<size_t>(want);
  return d;
}

}  // namespace etc::torch_import
