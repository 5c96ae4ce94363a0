#include "partition/cuda_capability.h"

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

// The ops whose CUDA kernels compute their outputs' sizes from the actual input sizes at run
// time (a dynamic-bound out is resized within its planned bound), so the delegate can take
// dynamic-bound tensors through them: elementwise maps, GEMMs, reductions, softmax, layer
// norm, layout and indexing ops, full_like. Convolution, pooling, upsampling, batch norm and
// the creation ops whose sizes are arguments run dynamic shapes on the host.
bool resizes_on_cuda(OpKind op) {
  switch (op) {
    case OpKind::Convolution:
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d:
    case OpKind::AdaptiveAvgPool2d:
    case OpKind::UpsampleNearest2d:
    case OpKind::UpsampleBilinear2d:
    case OpKind::NativeBatchNormNoTraining:
    case OpKind::Full:
    case OpKind::Ones:
    case OpKind::Zeros:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::optional<std::string> cuda_unsupported_reason(const Graph& graph, const Node& node) {
  const OpSchema& schema = op_info(node.op).schema;
  auto arg = [&](const char* name) -> const ArgValue& {
    return node.args[static_cast<size_t>(schema.arg_index(name))];
  };
  auto dynamic = [&](ValueId v) { return graph.value(v).spec.dynamism != ShapeDynamism::kStatic; };
  const std::vector<ValueId> reads = tensor_args(node);
  if ((std::any_of(reads.begin(), reads.end(), dynamic) ||
       std::any_of(node.outputs.begin(), node.outputs.end(), dynamic)) &&
      !resizes_on_cuda(node.op))
    return std::string(op_info(node.op).name) +
           " with dynamic dims runs on the host (its CUDA kernel is written for static shapes)";
  switch (node.op) {
    case OpKind::AddTensor:
    case OpKind::SubTensor:
    case OpKind::MulTensor:
    case OpKind::AddScalar:
    case OpKind::SubScalar:
    case OpKind::MulScalar:
    case OpKind::Neg:
    case OpKind::Relu:
    case OpKind::Clamp:
    case OpKind::Hardtanh:
    case OpKind::WhereSelf:
    case OpKind::EqScalar:
    case OpKind::LogicalNot:
    case OpKind::AnyDim:
      return floats_or_ints(graph, node);
    case OpKind::DivTensor:
    case OpKind::DivScalar:
    case OpKind::PowTensorScalar:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Rsqrt:
    case OpKind::Sigmoid:
    case OpKind::Sqrt:
    case OpKind::Tanh:
    case OpKind::Erf:
    case OpKind::Gelu:
    case OpKind::Hardsigmoid:
    case OpKind::Hardswish:
    case OpKind::Silu:
    case OpKind::Addmm:
    case OpKind::Bmm:
    case OpKind::Linear:
    case OpKind::Mm:
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d:
    case OpKind::AdaptiveAvgPool2d:
    case OpKind::Amax:
    case OpKind::MeanDim:
    case OpKind::SumDimIntList:
    case OpKind::NativeLayerNorm:
    case OpKind::NativeBatchNormNoTraining: {
      // The CUDA kernels take weight, bias and statistics in the input's dtype (the CPU
      // kernels convert any float dtype).
      const DType in = graph.value(std::get<ValueId>(node.args[0])).spec.dtype;
      for (ValueId v : tensor_args(node)) {
        if (graph.value(v).spec.dtype != in) {
          return std::string("parameters of a dtype other than the input's (") +
                 std::string(dtype_name(graph.value(v).spec.dtype)) + " with " +
                 std::string(dtype_name(in)) + " input) run on the host";
        }
      }
      return floats_only(graph, node);
    }
    case OpKind::Softmax:
    case OpKind::LogSoftmax:
      if (std::get<bool>(arg("half_to_float")))
        return std::string("half_to_float=True runs on the host");
      return floats_only(graph, node);
    case OpKind::Convolution:
      if (std::get<bool>(arg("transposed")))
        return std::string("transposed convolution runs on the host");
      return floats_only(graph, node);
    case OpKind::Embedding:
      return check_tensors(
          graph, node,
          [](DType t) { return is_cuda_float(t) || t == DType::kInt32 || t == DType::kInt64; },
          "float weights and int32/int64 indices");
    case OpKind::Cat:
    case OpKind::Clone:
    case OpKind::ConstantPadNd:
    case OpKind::Expand:
    case OpKind::Permute:
    case OpKind::Reshape:
    case OpKind::SelectInt:
    case OpKind::SliceTensor:
    case OpKind::SqueezeDim:
    case OpKind::SqueezeDims:
    case OpKind::TransposeInt:
    case OpKind::Unsqueeze:
    case OpKind::View:
    case OpKind::ToCopy:
    case OpKind::Full:
    case OpKind::Ones:
    case OpKind::Zeros:
    case OpKind::FullLike:
      return any_dtype(graph, node);
    case OpKind::UpsampleNearest2d:
    case OpKind::UpsampleBilinear2d:
      return floats_only(graph, node);
    case OpKind::IndexTensor:
      return any_dtype(graph, node);
    case OpKind::IndexPut:
      // Accumulating with atomics would add repeated indices in any order.
      if (std::get<bool>(arg("accumulate")))
        return std::string("index_put with accumulate=True runs on the host (deterministic order)");
      return any_dtype(graph, node);
    case OpKind::MaxPool2dWithIndices:
      return std::string("the host-only form of max_pool2d (delegates use max_pool2d)");
    case OpKind::H2DCopy:
    case OpKind::D2HCopy:
    case OpKind::DelegateCall:
      return std::string("compiler-inserted op");
  }
  return std::string("unknown op");
}

}  // namespace etc
