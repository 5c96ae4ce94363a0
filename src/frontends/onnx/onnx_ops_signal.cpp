// ONNX's signal ops -> IR: DFT and STFT as matrix products with a constant DFT matrix
// (cosines and sines computed in double at export time), STFT's frames gathered with a
// constant index. The last dim of a signal holds its real part, or its real and imaginary
// parts; so does the output's.
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

// The DFT of `x` (shape `xs`: [..., 1 or 2], the last dim real or real and imaginary) along
// `axis` (not the last), as if zero-padded or truncated to `length` points; `onesided`
// keeps the first length / 2 + 1 frequencies, `inverse` computes the inverse (scaled by
// 1 / length). The matrix product runs over [rows, c * N] x [c * N, 2 * K].
Result<ValueId> dft(NodeCtx& ctx, ValueId x, const std::vector<int64_t>& xs, int64_t axis,
                    int64_t length, bool inverse, bool onesided) {
  const int64_t r = static_cast<int64_t>(xs.size());
  const int64_t c = xs.back(), n = xs[static_cast<size_t>(axis)];
  const int64_t k = onesided ? length / 2 + 1 : length;
  // [..., N, ..., c] -> [rest..., c, N] -> [rows, c * N].
  std::vector<int64_t> perm, rest;
  for (int64_t d = 0; d < r - 1; ++d) {
    if (d == axis) continue;
    perm.push_back(d);
    rest.push_back(xs[static_cast<size_t>(d)]);
  }
  perm.push_back(r - 1);
  perm.push_back(axis);
  int64_t rows = 1;
  for (int64_t d : rest)
    rows *= d;
  ETC_ASSIGN_OR_RETURN(x, permute(ctx, x, perm));
  ETC_ASSIGN_OR_RETURN(x, reshape(ctx, x, {rows, c * n}));
  // Row (part p, point j), column (part q, frequency f): e^(s 2 pi i j f / length) takes
  // (re, im) to (re cos - s im sin, s re sin + im cos); points past `length` count zero.
  const double s = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / double(length) : 1.0;
  std::vector<double> m(static_cast<size_t>(c * n * 2 * k), 0.0);
  for (int64_t j = 0; j < std::min(n, length); ++j) {
    for (int64_t f = 0; f < k; ++f) {
      const double angle = 2 * std::numbers::pi * double((j * f) % length) / double(length);
      const double cs = std::cos(angle) * scale, sn = s * std::sin(angle) * scale;
      auto at = [&](int64_t p, int64_t q) -> double& {
        return m[static_cast<size_t>((p * n + j) * 2 * k + q * k + f)];
      };
      at(0, 0) = cs;
      at(0, 1) = sn;
      if (c == 2) {
        at(1, 0) = -sn;
        at(1, 1) = cs;
      }
    }
  }
  ValueId w = ctx.add_constant(host_from_doubles(ctx.dtype(0), {c * n, 2 * k}, m));
  ETC_ASSIGN_OR_RETURN(ValueId y, ctx.emit(OpKind::Mm, {{"self", x}, {"mat2", w}}));
  // [rows, 2 * K] -> [rest..., 2, K] -> the input's order with K at `axis`, 2 last.
  std::vector<int64_t> shape = rest;
  shape.push_back(2);
  shape.push_back(k);
  ETC_ASSIGN_OR_RETURN(y, reshape(ctx, y, shape));
  std::vector<int64_t> back;
  for (int64_t d = 0, from = 0; d < r - 1; ++d)
    back.push_back(d == axis ? r - 1 : from++);
  back.push_back(r - 2);
  return permute(ctx, y, back);
}

// A scalar integer input known at export time.
Result<int64_t> scalar_int(NodeCtx& ctx, int i, const std::string& what) {
  ETC_ASSIGN_OR_RETURN(const HostTensor* t, ctx.require_constant(i, what));
  if (!dtype_is_integral(t->dtype) || t->ints().size() != 1)
    return ctx.invalid(what + " (input " + std::to_string(i) + ") must be an integer scalar");
  return t->ints()[0];
}

Status check_signal(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0)))
    return ctx.unsupported(std::string(dtype_name(ctx.dtype(0))) + " signals");
  if (ctx.rank(0) < 2 || (ctx.shape(0).back() != 1 && ctx.shape(0).back() != 2)) {
    return ctx.invalid("the signal's last dim must be 1 (real) or 2 (complex), got shape " +
                       shape_to_string(ctx.shape(0)));
  }
  return Status();
}

}  // namespace

// DFT(input, dft_length?, axis? (opset 20); axis (before 20), inverse, onesided).
Status convert_dft(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_signal(ctx));
  const std::vector<int64_t> xs = ctx.shape(0);
  const int64_t r = static_cast<int64_t>(xs.size());
  int64_t axis = 1;
  if (ctx.opset() >= 20) {
    if (ctx.has_input(2)) {
      ETC_ASSIGN_OR_RETURN(axis, scalar_int(ctx, 2, "axis"));
    } else {
      axis = -2;
    }
  } else {
    ETC_ASSIGN_OR_RETURN(axis, ctx.attr_int("axis", 1));
  }
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r - 1) {
    return ctx.invalid("axis " + std::to_string(axis) + " is not a signal dim of shape " +
                       shape_to_string(xs));
  }
  ETC_ASSIGN_OR_RETURN(int64_t inverse, ctx.attr_int("inverse", 0));
  ETC_ASSIGN_OR_RETURN(int64_t onesided, ctx.attr_int("onesided", 0));
  if (onesided && (inverse || xs.back() == 2))
    return ctx.unsupported("onesided with a complex input or inverse");
  int64_t length = xs[static_cast<size_t>(axis)];
  if (ctx.has_input(1)) {
    ETC_ASSIGN_OR_RETURN(length, scalar_int(ctx, 1, "dft_length"));
    if (length < 1) return ctx.invalid("dft_length must be positive");
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  ETC_ASSIGN_OR_RETURN(ValueId y, dft(ctx, x, xs, axis, length, inverse != 0, onesided != 0));
  return ctx.set_output(0, y);
}

// STFT(signal [batch, length, 1 or 2], frame_step, window?, frame_length?; onesided=1) ->
// [batch, frames, bins, 2]: the DFT of each frame signal[f * step, f * step + frame_length)
// times the window.
Status convert_stft(NodeCtx& ctx) {
  ETC_RETURN_IF_ERROR(check_signal(ctx));
  const std::vector<int64_t> xs = ctx.shape(0);
  if (xs.size() != 3) return ctx.invalid("the signal must have shape [batch, length, 1 or 2]");
  ETC_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
  if (step < 1) return ctx.invalid("frame_step must be positive");
  int64_t frame = -1;
  if (ctx.has_input(3)) {
    ETC_ASSIGN_OR_RETURN(frame, scalar_int(ctx, 3, "frame_length"));
  }
  if (ctx.has_input(2)) {
    if (ctx.rank(2) != 1) return ctx.invalid("window must be 1-d");
    if (frame >= 0 && ctx.shape(2)[0] != frame) {
      return ctx.invalid("window has " + std::to_string(ctx.shape(2)[0]) +
                         " values, frame_length is " + std::to_string(frame));
    }
    frame = ctx.shape(2)[0];
  }
  if (frame < 1) return ctx.invalid("STFT needs a window or a positive frame_length");
  if (frame > xs[1]) {
    return ctx.invalid("frame_length " + std::to_string(frame) + " is longer than the signal (" +
                       std::to_string(xs[1]) + ")");
  }
  ETC_ASSIGN_OR_RETURN(int64_t onesided, ctx.attr_int("onesided", 1));
  if (onesided && xs[2] == 2) return ctx.unsupported("onesided with a complex signal");
  const int64_t frames = (xs[1] - frame) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t j = 0; j < frame; ++j)
      idx.push_back(f * step + j);
  }
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  std::vector<ValueId> indices(1);
  indices.push_back(ctx.add_constant(host_from_ints(DType::kInt64, {frames, frame}, idx)));
  ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::IndexTensor, {{"self", x}, {"indices", indices}}));
  if (ctx.has_input(2)) {
    ETC_ASSIGN_OR_RETURN(ValueId window, ctx.input(2));
    if (ctx.dtype(2) != ctx.dtype(0)) {
      ETC_ASSIGN_OR_RETURN(window,
                           ctx.emit(OpKind::ToCopy, {{"self", window}, {"dtype", ctx.dtype(0)}}));
    }
    ETC_ASSIGN_OR_RETURN(window, reshape(ctx, window, {1, 1, frame, 1}));
    ETC_ASSIGN_OR_RETURN(x, ctx.emit(OpKind::MulTensor, {{"self", x}, {"other", window}}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId y,
                       dft(ctx, x, {xs[0], frames, frame, xs[2]}, 2, frame, false, onesided != 0));
  return ctx.set_output(0, y);
}

}  // namespace etc::onnx_import
