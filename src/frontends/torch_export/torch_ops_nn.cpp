// The torch.export converters of matrix products, convolutions, pooling, resizing,
// reductions, softmax and normalisation (the rest of the table is in torch_ops.cpp).
#include <cmath>
#include <limits>

#include "frontends/torch_export/torch_node.h"
#include "frontends/torch_export/torch_ops.h"
#include "support/checked_math.h"

namespace etc::torch_import {
namespace {

// ---- Matrix, convolution, pooling, normalisation ---------------------------------------------

Status convert_linear(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(ValueId w, n.tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  ArgValue bias = b ? ArgValue(*b) : ArgValue(std::monostate{});
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::Linear, {{"input", x}, {"weight", w}, {"bias", bias}}));
  return n.set_output(0, out);
}

Status convert_addmm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId s, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(ValueId a, n.tensor("mat1"));
  ETC_ASSIGN_OR_RETURN(ValueId b, n.tensor("mat2"));
  ETC_ASSIGN_OR_RETURN(Scalar beta, n.scalar("beta", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(Scalar alpha, n.scalar("alpha", Scalar{int64_t{1}}));
  ETC_ASSIGN_OR_RETURN(
      ValueId out,
      n.emit(OpKind::Addmm,
             {{"self", s}, {"mat1", a}, {"mat2", b}, {"beta", beta}, {"alpha", alpha}}));
  return n.set_output(0, out);
}

Converter matmul2(OpKind op) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId a, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(ValueId b, n.tensor("mat2"));
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", a}, {"mat2", b}}));
    return n.set_output(0, out);
  };
}

// The input of a convolution with padding "valid" or "same" (conv*.padding), and the
// symmetric padding the convolution then takes: for "same", when a dim's total padding is
// odd, the input is padded by one more at its end first.
Result<ValueId> same_padding(TorchNode& n, ValueId x, ValueId w, const std::string& mode,
                             const std::vector<int64_t>& stride,
                             const std::vector<int64_t>& dilation, size_t spatial,
                             std::vector<int64_t>& padding) {
  padding.assign(spatial, 0);
  if (mode == "valid") return x;
  if (mode != "same") return n.invalid("padding must be 'same' or 'valid', not '" + mode + "'");
  for (int64_t s : stride) {
    if (s != 1)
      return n.invalid("padding='same' takes stride 1 (ATen does not define it otherwise)");
  }
  const auto& ks = n.sizes(w);
  if (ks.size() != spatial + 2) return n.invalid("the weight's rank does not match the input's");
  std::vector<int64_t> extra;  // constant_pad_nd's pairs, last dim first
  bool odd = false;
  if (dilation.size() != 1 && dilation.size() != spatial)
    return n.invalid("dilation takes 1 or " + std::to_string(spatial) + " values");
  std::vector<int64_t> totals(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t d = dilation.size() == 1 ? dilation[0] : dilation[i];
    const std::optional<int64_t> total = checked_mul(d, ks[i + 2] - 1);
    if (d < 1 || !total)
      return n.invalid("dilation must be positive and dilation * (kernel - 1) fit 64 bits");
    totals[i] = *total;
    padding[i] = *total / 2;
    odd = odd || *total % 2 != 0;
  }
  if (!odd) return x;
  for (size_t i = spatial; i-- > 0;) {
    extra.push_back(0);
    extra.push_back(totals[i] % 2);
  }
  return n.emit(OpKind::ConstantPadNd, {{"self", x}, {"pad", extra}, {"value", Scalar{0.0}}});
}

// conv1d/2d/3d (defaults of the functional form), their .padding forms, conv_transpose1d/2d/3d
// (`always_transposed`) and convolution.
Status convert_conv_as(TorchNode& n, bool always_transposed) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
  ETC_ASSIGN_OR_RETURN(ValueId w, n.tensor("weight"));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
  size_t spatial = n.sizes(x).size() >= 2 ? n.sizes(x).size() - 2 : 0;
  if (spatial == 0) return n.invalid("input must have a batch, a channel and spatial dims");
  auto expand = [&](std::vector<int64_t> v) {
    if (v.size() == 1 && spatial > 1) v.assign(spatial, v[0]);
    return v;
  };
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> stride, n.ints("stride", std::vector<int64_t>{1}));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dilation, n.ints("dilation", std::vector<int64_t>{1}));
  std::vector<int64_t> padding;
  if (auto mode = n.string_arg("padding", std::nullopt); mode.ok()) {
    // conv*.padding: "valid" is no padding; "same" pads dilation * (kernel - 1) in all, half
    // before and the rest after, the odd one after as ATen does (stride 1 only).
    ETC_ASSIGN_OR_RETURN(x, same_padding(n, x, w, *mode, stride, dilation, spatial, padding));
  } else {
    ETC_ASSIGN_OR_RETURN(padding, n.ints("padding", std::vector<int64_t>{0}));
  }
  ETC_ASSIGN_OR_RETURN(bool transposed, n.bool_arg("transposed", always_transposed));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> out_pad,
                       n.ints("output_padding", std::vector<int64_t>(spatial, 0)));
  ETC_ASSIGN_OR_RETURN(int64_t groups, n.int_arg("groups", 1));
  ArgValue bias = b ? ArgValue(*b) : ArgValue(std::monostate{});
  if (spatial == 1) {
    // The IR's convolution is 2-D: a 1-D one runs as [N, C, 1, L] with a [O, I, 1, K] kernel
    // ([I, O / groups, 1, K] transposed).
    ETC_ASSIGN_OR_RETURN(ValueId x2, n.emit(OpKind::Unsqueeze, {{"self", x}, {"dim", int64_t{2}}}));
    ETC_ASSIGN_OR_RETURN(ValueId w2, n.emit(OpKind::Unsqueeze, {{"self", w}, {"dim", int64_t{2}}}));
    auto two = [](const std::vector<int64_t>& v, int64_t first) {
      return std::vector<int64_t>{first, v.at(0)};
    };
    if (stride.size() != 1 || padding.size() != 1 || dilation.size() != 1 || out_pad.size() != 1) {
      return n.invalid("a 1-D convolution takes one stride, padding, dilation and output padding");
    }
    ETC_ASSIGN_OR_RETURN(ValueId y2,
                         n.emit(OpKind::Convolution, {{"input", x2},
                                                      {"weight", w2},
                                                      {"bias", bias},
                                                      {"stride", two(stride, 1)},
                                                      {"padding", two(padding, 0)},
                                                      {"dilation", two(dilation, 1)},
                                                      {"transposed", transposed},
                                                      {"output_padding", two(out_pad, 0)},
                                                      {"groups", groups}}));
    ETC_ASSIGN_OR_RETURN(ValueId y,
                         n.emit(OpKind::SqueezeDim, {{"self", y2}, {"dim", int64_t{2}}}));
    return n.set_output(0, y);
  }
  if (spatial == 3) {
    ValueId y;
    if (transposed) {
      ETC_ASSIGN_OR_RETURN(y, emit_conv_transpose3d(n, x, w, b, expand(stride), expand(padding),
                                                    expand(dilation), expand(out_pad), groups));
    } else {
      ETC_ASSIGN_OR_RETURN(
          y, emit_conv3d(n, x, w, b, expand(stride), expand(padding), expand(dilation), groups));
    }
    return n.set_output(0, y);
  }
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::Convolution, {{"input", x},
                                                    {"weight", w},
                                                    {"bias", bias},
                                                    {"stride", expand(stride)},
                                                    {"padding", expand(padding)},
                                                    {"dilation", expand(dilation)},
                                                    {"transposed", transposed},
                                                    {"output_padding", expand(out_pad)},
                                                    {"groups", groups}}));
  return n.set_output(0, out);
}

Status convert_conv(TorchNode& n) {
  return convert_conv_as(n, false);
}
Status convert_conv_transpose(TorchNode& n) {
  return convert_conv_as(n, true);
}

Converter max_pool(bool with_indices) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride", std::vector<int64_t>{}));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding", std::vector<int64_t>{0}));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> d, n.ints("dilation", std::vector<int64_t>{1}));
    ETC_ASSIGN_OR_RETURN(bool ceil, n.bool_arg("ceil_mode", false));
    // Core ATen writes max_pool2d_with_indices even when nothing reads the indices: then it
    // is max_pool2d (which a CUDA delegate runs).
    bool indices = with_indices && n.output_used(1);
    OpKind op = indices ? OpKind::MaxPool2dWithIndices : OpKind::MaxPool2d;
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(op, {{"self", x},
                                                  {"kernel_size", k},
                                                  {"stride", s},
                                                  {"padding", p},
                                                  {"dilation", d},
                                                  {"ceil_mode", ceil}}));
    ETC_RETURN_IF_ERROR(n.set_output(0, out));
    if (indices) ETC_RETURN_IF_ERROR(n.set_output(1, n.last_outputs()[1]));
    return Status();
  };
}

Status convert_avg_pool(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> k, n.ints("kernel_size"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> s, n.ints("stride", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> p, n.ints("padding", std::vector<int64_t>{0}));
  ETC_ASSIGN_OR_RETURN(bool ceil, n.bool_arg("ceil_mode", false));
  ETC_ASSIGN_OR_RETURN(bool count_pad, n.bool_arg("count_include_pad", true));
  ETC_ASSIGN_OR_RETURN(std::optional<int64_t> div, n.optional_int("divisor_override"));
  ArgValue d = div ? ArgValue(*div) : ArgValue(std::monostate{});
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::AvgPool2d, {{"self", x},
                                                               {"kernel_size", k},
                                                               {"stride", s},
                                                               {"padding", p},
                                                               {"ceil_mode", ceil},
                                                               {"count_include_pad", count_pad},
                                                               {"divisor_override", d}}));
  return n.set_output(0, out);
}

Status convert_linalg_det(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId a, n.tensor("A"));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::LinalgDet, {{"A", a}}));
  return n.set_output(0, out);
}

Status convert_adaptive_avg_pool(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("output_size"));
  ETC_ASSIGN_OR_RETURN(ValueId out,
                       n.emit(OpKind::AdaptiveAvgPool2d, {{"self", x}, {"output_size", size}}));
  return n.set_output(0, out);
}

Converter reduce(OpKind op) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dim, n.ints("dim", std::vector<int64_t>{}));
    ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
    ValueId out;
    if (op == OpKind::Amax) {
      ETC_ASSIGN_OR_RETURN(out, n.emit(op, {{"self", x}, {"dim", dim}, {"keepdim", keepdim}}));
    } else {
      ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
      ArgValue dt = d ? ArgValue(*d) : ArgValue(std::monostate{});
      ETC_ASSIGN_OR_RETURN(
          out, n.emit(op, {{"self", x}, {"dim", dim}, {"keepdim", keepdim}, {"dtype", dt}}));
    }
    return n.set_output(0, out);
  };
}

// _softmax(self, dim, half_to_float) / _log_softmax, and softmax.int(self, dim, dtype).
Converter softmax(OpKind op, bool has_half_to_float) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(int64_t dim, n.int_arg("dim"));
    bool half_to_float = false;
    if (has_half_to_float) {
      ETC_ASSIGN_OR_RETURN(half_to_float, n.bool_arg("half_to_float", false));
    } else {
      ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
      if (d && *d != n.dtype(x)) {
        ETC_ASSIGN_OR_RETURN(x, n.emit(OpKind::ToCopy, {{"self", x}, {"dtype", *d}}));
      }
    }
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(op, {{"self", x}, {"dim", dim}, {"half_to_float", half_to_float}}));
    return n.set_output(0, out);
  };
}

// layer_norm (one output) and native_layer_norm (output, mean, rstd).
Converter layer_norm(bool native) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
    ETC_ASSIGN_OR_RETURN(std::vector<int64_t> shape, n.ints("normalized_shape"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
    ETC_ASSIGN_OR_RETURN(double eps,
                         n.float_arg("eps", native ? std::nullopt : std::optional<double>(1e-5)));
    ArgValue wa = w ? ArgValue(*w) : ArgValue(std::monostate{});
    ArgValue ba = b ? ArgValue(*b) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::NativeLayerNorm, {{"input", x},
                                                                       {"normalized_shape", shape},
                                                                       {"weight", wa},
                                                                       {"bias", ba},
                                                                       {"eps", eps}}));
    ETC_RETURN_IF_ERROR(n.set_output(0, out));
    if (native) {
      for (int i = 1; i < n.num_outputs() && i < 3; ++i)
        ETC_RETURN_IF_ERROR(n.set_output(i, n.last_outputs()[i]));
    }
    return Status();
  };
}

// batch_norm (training=False) and _native_batch_norm_legit_no_training.
Converter batch_norm(bool native) {
  return [=](TorchNode& n) -> Status {
    if (!native) {
      ETC_ASSIGN_OR_RETURN(bool training, n.bool_arg("training"));
      if (training) return convert_batch_norm_training(n, false);
    }
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> w, n.optional_tensor("weight"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> b, n.optional_tensor("bias"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> mean, n.optional_tensor("running_mean"));
    ETC_ASSIGN_OR_RETURN(std::optional<ValueId> var, n.optional_tensor("running_var"));
    if (!mean || !var) return n.unsupported("batch_norm without running statistics");
    ETC_ASSIGN_OR_RETURN(double momentum, n.float_arg("momentum", 0.1));
    ETC_ASSIGN_OR_RETURN(double eps, n.float_arg("eps", 1e-5));
    ArgValue wa = w ? ArgValue(*w) : ArgValue(std::monostate{});
    ArgValue ba = b ? ArgValue(*b) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(ValueId out,
                         n.emit(OpKind::NativeBatchNormNoTraining, {{"input", x},
                                                                    {"weight", wa},
                                                                    {"bias", ba},
                                                                    {"running_mean", *mean},
                                                                    {"running_var", *var},
                                                                    {"momentum", momentum},
                                                                    {"eps", eps}}));
    ETC_RETURN_IF_ERROR(n.set_output(0, out));
    if (native) {
      for (int i = 1; i < n.num_outputs() && i < 3; ++i)
        ETC_RETURN_IF_ERROR(n.set_output(i, n.last_outputs()[i]));
    }
    return Status();
  };
}

// constant_pad_nd(self, pad, value). A negative pad crops (PyTorch's decomposition of col2im
// writes one): those sides become slices first, so the program's constant_pad_nd pads only,
// which ExecuTorch's portable kernel requires.
Status convert_constant_pad(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> pad, n.ints("pad"));
  ETC_ASSIGN_OR_RETURN(Scalar value, n.scalar("value", Scalar{0.0}));
  const std::vector<int64_t> in = n.sizes(x);
  if (pad.size() % 2 != 0 || pad.size() / 2 > in.size()) {
    return n.invalid("pad " + shape_to_string(pad) + " does not fit " + shape_to_string(in));
  }
  bool padded = false;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t& before = pad[2 * k];
    int64_t& after = pad[2 * k + 1];
    const auto dim = static_cast<int64_t>(in.size() - 1 - k);
    const int64_t len = in[static_cast<size_t>(dim)];
    const int64_t crop_before = std::max<int64_t>(0, -before);
    const int64_t crop_after = std::max<int64_t>(0, -after);
    if (crop_before + crop_after > len) {
      return n.invalid("pad (" + std::to_string(before) + ", " + std::to_string(after) +
                       ") crops more than dim " + std::to_string(dim) + "'s " +
                       std::to_string(len) + " elements");
    }
    if (before < 0 || after < 0) {
      const int64_t start = crop_before;
      const int64_t end = len - crop_after;
      ETC_ASSIGN_OR_RETURN(
          x,
          n.emit(
              OpKind::SliceTensor,
              {{"self", x}, {"dim", dim}, {"start", start}, {"end", end}, {"step", int64_t{1}}}));
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    padded = padded || before > 0 || after > 0;
  }
  if (!padded && n.sizes(x) != in) return n.set_output(0, x);
  ETC_ASSIGN_OR_RETURN(
      ValueId out, n.emit(OpKind::ConstantPadNd, {{"self", x}, {"pad", pad}, {"value", value}}));
  return n.set_output(0, out);
}

// linalg_vector_norm(x, ord=2, dim, keepdim): sqrt(sum(x * x)).
Status convert_vector_norm(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  ETC_ASSIGN_OR_RETURN(double ord, n.float_arg("ord", 2.0));
  if (ord != 2.0) return n.unsupported("ord " + std::to_string(ord) + " (etc imports the 2-norm)");
  ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
  if (d) return n.unsupported("a dtype argument");
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dim, n.ints("dim", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
  ETC_ASSIGN_OR_RETURN(ValueId sq, n.emit(OpKind::MulTensor, {{"self", x}, {"other", x}}));
  ETC_ASSIGN_OR_RETURN(ValueId sum, n.emit(OpKind::SumDimIntList,
                                           {{"self", sq}, {"dim", dim}, {"keepdim", keepdim}}));
  ETC_ASSIGN_OR_RETURN(ValueId out, n.emit(OpKind::Sqrt, {{"self", sum}}));
  return n.set_output(0, out);
}

// upsample_nearest2d.vec / upsample_bilinear2d.vec: the IR ops themselves (output_size or
// scale_factors; the inference checks that exactly one is given).
Converter upsample(OpKind op) {
  return [=](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("input"));
    ArgValue size_arg = std::monostate{};
    if (n.has("output_size")) {
      ETC_ASSIGN_OR_RETURN(std::vector<int64_t> size, n.ints("output_size"));
      size_arg = std::move(size);
    }
    ETC_ASSIGN_OR_RETURN(std::optional<std::vector<double>> scales,
                         n.optional_floats("scale_factors"));
    ArgValue scales_arg = scales ? ArgValue(*scales) : ArgValue(std::monostate{});
    ValueId out;
    if (op == OpKind::UpsampleBilinear2d) {
      ETC_ASSIGN_OR_RETURN(bool align, n.bool_arg("align_corners"));
      ETC_ASSIGN_OR_RETURN(out, n.emit(op, {{"input", x},
                                            {"output_size", size_arg},
                                            {"align_corners", align},
                                            {"scale_factors", scales_arg}}));
    } else {
      ETC_ASSIGN_OR_RETURN(
          out,
          n.emit(op, {{"input", x}, {"output_size", size_arg}, {"scale_factors", scales_arg}}));
    }
    return n.set_output(0, out);
  };
}

// mean.default(self, *, dtype): the mean of every element.
// mean.default / sum.default(self, *, dtype): over every element (dim None).
Converter reduce_all(OpKind op) {
  return [op](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
    ETC_ASSIGN_OR_RETURN(std::optional<DType> d, n.dtype_arg("dtype"));
    ArgValue dt = d ? ArgValue(*d) : ArgValue(std::monostate{});
    ETC_ASSIGN_OR_RETURN(
        ValueId out,
        n.emit(op, {{"self", x}, {"dim", std::monostate{}}, {"keepdim", false}, {"dtype", dt}}));
    return n.set_output(0, out);
  };
}

// any.default(self) and any.dims(self, dim, keepdim): any.dim over each dim, the highest
// first (every element flattened into one dim when all are reduced without keepdim).
Status convert_any_dims(TorchNode& n) {
  ETC_ASSIGN_OR_RETURN(ValueId x, n.tensor("self"));
  const auto rank = static_cast<int64_t>(n.sizes(x).size());
  ETC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, n.ints("dim", std::vector<int64_t>{}));
  ETC_ASSIGN_OR_RETURN(bool keepdim, n.bool_arg("keepdim", false));
  if (dims.empty() && !keepdim) {
    ETC_ASSIGN_OR_RETURN(
        x, n.emit(OpKind::Reshape, {{"self", x}, {"shape", std::vector<int64_t>{-1}}}));
    ETC_ASSIGN_OR_RETURN(
        ValueId out,
        n.emit(OpKind::AnyDim, {{"self", x}, {"dim", int64_t{0}}, {"keepdim", false}}));
    return n.set_output(0, out);
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d)
      dims.push_back(d);
  }
  for (int64_t& d : dims) {
    ETC_ASSIGN_OR_RETURN(d, n.wrap_dim(d, rank, "dim"));
  }
  std::sort(dims.rbegin(), dims.rend());
  if (std::adjacent_find(dims.begin(), dims.end()) != dims.end())
    return n.invalid("dim lists a dim twice");
  for (int64_t d : dims) {
    ETC_ASSIGN_OR_RETURN(x,
                         n.emit(OpKind::AnyDim, {{"self", x}, {"dim", d}, {"keepdim", keepdim}}));
  }
  return n.set_output(0, x);
}

}  // namespace

void add_nn_converters(std::map<std::string, Converter>& t) {
  t["aten.constant_pad_nd.default"] = convert_constant_pad;
  t["aten.mean.default"] = reduce_all(OpKind::MeanDim);
  t["aten.sum.default"] = reduce_all(OpKind::SumDimIntList);
  t["aten.any.default"] = convert_any_dims;
  t["aten.any.dims"] = convert_any_dims;
  t["aten._adaptive_avg_pool2d.default"] = convert_adaptive_avg_pool;
  t["aten.linear.default"] = convert_linear;
  t["aten.addmm.default"] = convert_addmm;
  t["aten.mm.default"] = matmul2(OpKind::Mm);
  t["aten.linalg_det.default"] = convert_linalg_det;
  t["aten.bmm.default"] = matmul2(OpKind::Bmm);
  t["aten._int_mm.default"] = matmul2(OpKind::IntMm);
  t["aten.conv1d.default"] = convert_conv;
  t["aten.conv2d.default"] = convert_conv;
  t["aten.conv3d.default"] = convert_conv;
  t["aten.conv3d.padding"] = convert_conv;
  t["aten.conv_transpose1d.default"] = convert_conv_transpose;
  t["aten.conv_transpose2d.input"] = convert_conv_transpose;
  t["aten.conv_transpose3d.input"] = convert_conv_transpose;
  t["aten.conv1d.padding"] = convert_conv;
  t["aten.conv2d.padding"] = convert_conv;
  t["aten.convolution.default"] = convert_conv;
  t["aten.max_pool2d.default"] = max_pool(false);
  t["aten.max_pool2d_with_indices.default"] = max_pool(true);
  t["aten.avg_pool2d.default"] = convert_avg_pool;
  t["aten.adaptive_avg_pool2d.default"] = convert_adaptive_avg_pool;
  t["aten.upsample_nearest2d.vec"] = upsample(OpKind::UpsampleNearest2d);
  t["aten.upsample_bilinear2d.vec"] = upsample(OpKind::UpsampleBilinear2d);
  t["aten.mean.dim"] = reduce(OpKind::MeanDim);
  t["aten.sum.dim_IntList"] = reduce(OpKind::SumDimIntList);
  t["aten.amax.default"] = reduce(OpKind::Amax);
  t["aten._softmax.default"] = softmax(OpKind::Softmax, true);
  t["aten._log_softmax.default"] = softmax(OpKind::LogSoftmax, true);
  t["aten.softmax.int"] = softmax(OpKind::Softmax, false);
  t["aten.log_softmax.int"] = softmax(OpKind::LogSoftmax, false);
  t["aten.layer_norm.default"] = layer_norm(false);
  t["aten.native_layer_norm.default"] = layer_norm(true);
  t["aten.batch_norm.default"] = batch_norm(false);
  t["aten._native_batch_norm_legit_no_training.default"] = batch_norm(true);
  t["aten.linalg_vector_norm.default"] = convert_vector_norm;
  // _native_batch_norm_legit(..., training, momentum, eps): with running statistics and
  // training=False, the same thing.
  t["aten._native_batch_norm_legit.default"] = [](TorchNode& n) -> Status {
    ETC_ASSIGN_OR_RETURN(bool training, n.bool_arg("training"));
    if (training) return convert_batch_norm_training(n, false);
    return batch_norm(true)(n);
  };
}

}  // namespace etc::torch_import
