#include "backends/cuda/cuda_capability.h"

#include <algorithm>
#include <initializer_list>

namespace etc {
namespace {

bool is_cuda_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Checks every tensor the node reads or writes with `ok`; returns the first failure.
template <typename Pred>
std::optional<std::string> check_tensors(const Graph& g, const Node& n, Pred ok, const char* what) {
  auto check = [&](ValueId id) -> std::optional<std::string> {
    const TensorSpec& s = g.value(id).spec;
    if (s.rank() > kCudaMaxRank)
      return "rank " + std::to_string(s.rank()) + " is above the CUDA limit of 8";
    if (!ok(s.dtype))
      return std::string(dtype_name(s.dtype)) + " tensors are not supported (needs " + what + ")";
    return std::nullopt;
  };
  for (ValueId v : tensor_args(n)) {
    if (auto r = check(v)) return r;
  }
  for (ValueId o : n.outputs) {
    if (auto r = check(o)) return r;
  }
  return std::nullopt;
}

std::optional<std::string> floats_only(const Graph& g, const Node& n) {
  return check_tensors(g, n, is_cuda_float, "float32, float16 or bfloat16");
}

// Elementwise ops also run on int32/int64 (and bool conditions for where).
std::optional<std::string> floats_or_ints(const Graph& g, const Node& n) {
  return check_tensors(
      g, n,
      [](DType t) {
        return is_cuda_float(t) || t == DType::kInt32 || t == DType::kInt64 || t == DType::kBool;
      },
      "float32, float16, bfloat16, int32, int64 or bool");
}

std::optional<std::string> any_dtype(const Graph& g, const Node& n) {
  return check_tensors(
      g, n, [](DType t) { return t != DType::kFloat64; }, "a dtype other than float64");
}

using Reason = std::optional<std::string>;

// The CUDA column of ops.def: one predicate per kind of op. Dynamic dims are checked before
// these run (is_static_only below).

// Elementwise ops on float32/16, bfloat16, int32/64 (and bool conditions for where).
Reason cuda_numeric(const Graph& g, const Node& n) {
  return floats_or_ints(g, n);
}

// The unary math ops (unary_math.def): one CUDA kernel for every pair of dtypes their kinds
// allow among float32/16, bfloat16, int32/64 and bool.
Reason cuda_unary_math(const Graph& g, const Node& n) {
  return floats_or_ints(g, n);
}

// The binary math ops (binary_math.def): one CUDA kernel for every dtype their kinds allow
// among float32/16, bfloat16, int32/64 and bool.
Reason cuda_binary_math(const Graph& g, const Node& n) {
  return floats_or_ints(g, n);
}

// Float ops whose tensors all have the input's dtype: the CUDA kernels take weight, bias and
// statistics in the input's dtype (the CPU kernels convert any float dtype).
Reason cuda_float(const Graph& g, const Node& n) {
  const DType in = g.value(std::get<ValueId>(n.args[0])).spec.dtype;
  for (ValueId v : tensor_args(n)) {
    if (g.value(v).spec.dtype != in) {
      return std::string("parameters of a dtype other than the input's (") +
             std::string(dtype_name(g.value(v).spec.dtype)) + " with " +
             std::string(dtype_name(in)) + " input) run on the host";
    }
  }
  return floats_only(g, n);
}

// Convolution, pooling, upsampling and batch norm kernels are written for static shapes.
Reason cuda_float_static(const Graph& g, const Node& n) {
  return cuda_float(g, n);
}

Reason cuda_softmax(const Graph& g, const Node& n) {
  if (std::get<bool>(n.args[static_cast<size_t>(op_info(n.op).schema.arg_index("half_to_float"))]))
    return std::string("half_to_float=True runs on the host");
  return floats_only(g, n);
}

Reason cuda_convolution(const Graph& g, const Node& n) {
  if (std::get<bool>(n.args[static_cast<size_t>(op_info(n.op).schema.arg_index("transposed"))]))
    return std::string("transposed convolution runs on the host");
  return floats_only(g, n);
}

// A row gather: float tables, and 8-bit ones (a quantized embedding's rows, gather-rows-first).
Reason cuda_embedding(const Graph& g, const Node& n) {
  return check_tensors(
      g, n,
      [](DType t) {
        return is_cuda_float(t) || t == DType::kInt32 || t == DType::kInt64 || t == DType::kInt8 ||
               t == DType::kUInt8;
      },
      "float or 8-bit weights and int32/int64 indices");
}

// etc::weight_only_linear: float input, scale, zero point and bias; an int8 or 4-bit weight.
Reason cuda_weight_only(const Graph& g, const Node& n) {
  return check_tensors(
      g, n, [](DType t) { return is_cuda_float(t) || t == DType::kInt8 || t == DType::kUInt8; },
      "float tensors and an int8 or packed 4-bit weight");
}

// aten._int_mm: uint8 or int8 by int8, int32 sums.
Reason cuda_int_mm(const Graph& g, const Node& n) {
  return check_tensors(
      g, n, [](DType t) { return t == DType::kUInt8 || t == DType::kInt8 || t == DType::kInt32; },
      "uint8 or int8 by int8, int32 sums");
}

// Layout, copy, indexing and creation ops move bytes of any dtype but float64.
Reason cuda_any(const Graph& g, const Node& n) {
  return any_dtype(g, n);
}

// Creation ops whose sizes are arguments.
Reason cuda_any_static(const Graph& g, const Node& n) {
  return any_dtype(g, n);
}

Reason cuda_index_put(const Graph& g, const Node& n) {
  // Accumulating with atomics would add repeated indices in any order.
  if (std::get<bool>(n.args[static_cast<size_t>(op_info(n.op).schema.arg_index("accumulate"))]))
    return std::string("index_put with accumulate=True runs on the host (deterministic order)");
  return any_dtype(g, n);
}

Reason cuda_host_form(const Graph&, const Node&) {
  return std::string("the host-only form of max_pool2d (delegates use max_pool2d)");
}

// Ops whose output size the data decides (nonzero, ONNX's NonZero, NonMaxSuppression,
// Unique): the count must be known where the next op is sized, on the host.
Reason cuda_data_dependent(const Graph&, const Node& n) {
  return std::string(op_info(n.op).name) +
         "'s output size depends on the data: it runs on the host, where the count sizes what "
         "follows";
}

// Ops with no CUDA kernel (yet): they run on the host and split the delegate around them.
Reason cuda_host_only(const Graph&, const Node& n) {
  return std::string(op_info(n.op).name) + " has no CUDA kernel: it runs on the host";
}

Reason cuda_random(const Graph&, const Node&) {
  return std::string("random numbers are drawn on the host (one generator per instruction)");
}

Reason cuda_compiler_op(const Graph&, const Node&) {
  return std::string("compiler-inserted op");
}

using CapabilityFn = Reason (*)(const Graph&, const Node&);

struct Capability {
  CapabilityFn fn;
  // The kernel computes its outputs' sizes from the actual input sizes at run time (a
  // dynamic-bound out is resized within its planned bound), so the delegate can take
  // dynamic-bound tensors through it.
  bool resizes;
};

constexpr bool is_static_only(CapabilityFn fn) {
  return fn == &cuda_float_static || fn == &cuda_any_static || fn == &cuda_convolution;
}

constexpr Capability kCapability[] = {
#define ETC_OP(e, schema, kernel, infer, cuda) {&cuda, !is_static_only(&cuda)},
#include "graph/ops.def"
#undef ETC_OP
};

}  // namespace

std::optional<std::string> cuda_unsupported_reason(const Graph& graph, const Node& node) {
  const Capability& cap = kCapability[static_cast<size_t>(node.op)];
  auto dynamic = [&](ValueId v) { return graph.value(v).spec.dynamism != ShapeDynamism::kStatic; };
  const std::vector<ValueId> reads = tensor_args(node);
  if ((std::any_of(reads.begin(), reads.end(), dynamic) ||
       std::any_of(node.outputs.begin(), node.outputs.end(), dynamic)) &&
      !cap.resizes) {
    return std::string(op_info(node.op).name) +
           " with dynamic dims runs on the host (its CUDA kernel is written for static shapes)";
  }
  return cap.fn(graph, node);
}

bool cuda_may_delegate(OpKind op) {
  const CapabilityFn fn = kCapability[static_cast<size_t>(op)].fn;
  return fn != &cuda_host_form && fn != &cuda_compiler_op && fn != &cuda_random &&
         fn != &cuda_data_dependent && fn != &cuda_host_only;
}

}  // namespace etc
