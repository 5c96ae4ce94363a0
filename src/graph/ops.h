// The op table (ops.def) as C++: the OpKind enum, each op's parsed ATen schemas (functional
// and out variant) and its shape/dtype inference, and lookup by IR name ("aten.add.Tensor")
// and by kernel name ("aten::add.out").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/op_schema.h"
#include "graph/tensor_spec.h"
#include "support/status.h"

namespace etc {

enum class OpKind : uint16_t {
#define ETC_OP(e, schema, kernel, infer, cuda) e,
#include "graph/ops.def"
#undef ETC_OP
};

// The inferred type of one output.
struct TensorType {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> sizes;
  // The sizes are an upper bound and the data decides (nonzero): a dynamic-bound output may
  // be smaller in any dim (one build of a bounded dynamic export sizes it by its symbol).
  bool bound_by_data = false;
  bool operator==(const TensorType&) const = default;
};

// Arguments of one node, typed by its schema, for inference functions. Accessors take the
// schema's argument name; the argument kinds were checked before inference runs, so a
// wrong name or kind here is a bug in the table.
class InferContext {
 public:
  using TypeOf = std::function<const TensorSpec&(ValueId)>;
  InferContext(const OpSchema& schema, std::span<const ArgValue> args, TypeOf type_of,
               Location node_location);

  const TensorSpec& tensor(std::string_view arg) const;
  const TensorSpec* optional_tensor(std::string_view arg) const;  // nullptr for None
  // nullptr for the None elements of a Tensor?[].
  std::vector<const TensorSpec*> tensor_list(std::string_view arg) const;
  int64_t int_arg(std::string_view arg) const;
  std::optional<int64_t> optional_int(std::string_view arg) const;
  const std::vector<int64_t>& int_list(std::string_view arg) const;
  const std::vector<int64_t>* optional_int_list(std::string_view arg) const;
  const std::vector<double>* optional_float_list(std::string_view arg) const;
  bool bool_arg(std::string_view arg) const;
  double float_arg(std::string_view arg) const;
  const std::string& string_arg(std::string_view arg) const;
  const std::string* optional_string(std::string_view arg) const;  // nullptr for None
  std::optional<Scalar> optional_scalar(std::string_view arg) const;
  Scalar scalar(std::string_view arg) const;
  std::optional<DType> dtype_arg(std::string_view arg) const;

  // An invalid-input error located at the argument (`<node>/args/<arg>`) or at the node.
  Status error(std::string_view arg, std::string message) const;
  Status error(std::string message) const;

  // Wraps a possibly negative dim into [0, rank); an error names the argument otherwise.
  Result<int64_t> wrap_dim(std::string_view arg, int64_t dim, int64_t rank) const;

 private:
  const ArgValue& arg(std::string_view name) const;
  const OpSchema& schema_;
  std::span<const ArgValue> args_;
  TypeOf type_of_;
  Location location_;
};

using InferFn = Status (*)(const InferContext&, std::vector<TensorType>&);

// How a host program runs an op (the KERNEL column of ops.def).
enum class HostForm : uint8_t {
  kOutVariant,  // ETC_OUT: ExecuTorch's portable out-variant kernel
  kDecomposed,  // ETC_DECOMPOSED: rewritten by decompose_host_ops before emission
  kNone,        // ETC_NO_KERNEL: emitted in a form of its own (the delegate call)
};

struct OpInfo {
  OpKind kind;
  OpSchema schema;
  std::string name;  // "aten.add.Tensor"
  InferFn infer;
  HostForm host_form = HostForm::kOutVariant;
  // kOutVariant: the out variant's schema, its outs marked ArgSchema::is_out.
  std::optional<OpSchema> out_schema;
  // The names kernels are registered and called by: the functional form ("aten::add.Tensor",
  // the calls inside delegate subgraphs) and the out variant ("aten::add.out", host
  // programs; empty without one).
  std::string kernel_name;
  std::string out_kernel_name;
};

const OpInfo& op_info(OpKind kind);
std::span<const OpInfo> all_ops();
// Looks up "aten.add.Tensor"; also accepts "aten::add.Tensor" and, for ops whose overload
// is "default", "aten.relu".
std::optional<OpKind> op_from_name(std::string_view name);

// A kernel name of the table ("aten::add.out" or "aten::add.Tensor") as its op and form.
struct KernelOp {
  OpKind op;
  bool out_variant = false;
};
std::optional<KernelOp> op_from_kernel_name(std::string_view name);

// "aten::add.Tensor" for a schema "add.Tensor" in namespace aten: how ExecuTorch names an
// operator in a program's operator table joined with its overload.
std::string kernel_name_of(const OpSchema& schema);

// Builds a node's argument list from named arguments: checks the names against the schema,
// fills every omitted argument with its default, and fails on a missing required one.
// Argument kinds are not checked here (the verifier does).
Result<std::vector<ArgValue>> bind_args(
    OpKind kind, std::initializer_list<std::pair<std::string_view, ArgValue>> named);

// Infers the types of a node's outputs from its (already kind-checked) arguments.
Status infer_types(OpKind kind, std::span<const ArgValue> args, const InferContext::TypeOf& type_of,
                   const Location& node_location, std::vector<TensorType>* out);

// Shape helpers shared by inference and, later, by kernels.
// Broadcasts two shapes (numpy rules); nullopt if incompatible.
std::optional<std::vector<int64_t>> broadcast_shapes(std::span<const int64_t> a,
                                                     std::span<const int64_t> b);

// Advanced indexing (ATen's index.Tensor / index_put): `self[indices]` where each entry of
// `indices` is an index tensor's shape or nullopt (None, a full slice), and dims past the
// list are full slices too. The index tensors broadcast to one shape B. When the indexed
// dims are adjacent, B replaces them in place; otherwise B comes first, then the sliced dims.
struct IndexPlan {
  std::vector<int64_t> result;     // the shape of self[indices]
  std::vector<int64_t> broadcast;  // B
  std::vector<int> indexed;        // the dims of self that an index tensor selects
  size_t b_position = 0;           // where B's dims start in `result`
};
// Errors: more indices than dims, or index shapes that do not broadcast (the message says
// which); an empty `indexed` (all None) is valid and selects everything.
Result<IndexPlan> plan_index(std::span<const int64_t> self,
                             std::span<const std::optional<std::vector<int64_t>>> indices);

}  // namespace etc
