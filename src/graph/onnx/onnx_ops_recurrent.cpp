// ONNX's LSTM -> IR, unrolled over the (static) sequence: the input projection of every time
// step is one GEMM, then each step is a GEMM with the recurrent weights and the gate
// arithmetic (ONNX's gate order i, o, f, c; sigmoid, tanh, tanh; peepholes P = [p_i, p_o,
// p_f]: i and f see the previous cell state, o the new one).
#include "graph/onnx/node_context.h"
#include "graph/onnx/onnx_converters.h"

namespace etc::onnx_import {
namespace {

using Args = std::initializer_list<std::pair<std::string_view, ArgValue>>;

Result<ValueId> slice(NodeCtx& ctx, ValueId v, int64_t dim, int64_t start, int64_t end) {
  return ctx.emit(
      OpKind::SliceTensor,
      {{"self", v}, {"dim", dim}, {"start", start}, {"end", end}, {"step", int64_t{1}}});
}

Result<ValueId> select(NodeCtx& ctx, ValueId v, int64_t dim, int64_t index) {
  return ctx.emit(OpKind::SelectInt, {{"self", v}, {"dim", dim}, {"index", index}});
}

Result<ValueId> binary(NodeCtx& ctx, OpKind op, ValueId a, ValueId b) {
  return ctx.emit(op, {{"self", a}, {"other", b}});
}

// Stacks equally shaped values along a new dim.
Result<ValueId> stack(NodeCtx& ctx, const std::vector<ValueId>& values, int64_t dim) {
  std::vector<ValueId> parts;
  for (ValueId v : values) {
    ETC_ASSIGN_OR_RETURN(ValueId u, ctx.emit(OpKind::Unsqueeze, {{"self", v}, {"dim", dim}}));
    parts.push_back(u);
  }
  if (parts.size() == 1) return parts[0];
  return ctx.emit(OpKind::Cat, {{"tensors", parts}, {"dim", dim}});
}

}  // namespace

Status convert_lstm(NodeCtx& ctx) {
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(int64_t hidden, ctx.attr_int("hidden_size", std::nullopt));
  Result<std::string> dir = ctx.attr_string("direction", "forward");
  if (!dir.ok()) return dir.status();
  const std::string direction = *dir;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return ctx.invalid("direction must be forward, reverse or bidirectional, got '" + direction +
                       "'");
  // layout=1 (opset 14): X [batch, seq, in], states [batch, dirs, H], Y [batch, seq, dirs, H]
  // (ONNX's test_lstm_batchwise checks it; ONNX Runtime refuses it).
  ETC_ASSIGN_OR_RETURN(int64_t layout, ctx.attr_int("layout", 0));
  if (layout != 0 && layout != 1) return ctx.invalid("layout must be 0 or 1");
  auto permute = [&](ValueId v, std::vector<int64_t> dims) -> Result<ValueId> {
    return ctx.emit(OpKind::Permute, {{"self", v}, {"dims", std::move(dims)}});
  };
  ETC_ASSIGN_OR_RETURN(int64_t input_forget, ctx.attr_int("input_forget", 0));
  if (input_forget != 0) return ctx.unsupported("input_forget=1");
  if (ctx.attr("clip")) return ctx.unsupported("cell clipping (clip)");
  if (ctx.attr("activations")) {
    Result<std::vector<std::string>> acts = ctx.attr_strings("activations");
    if (!acts.ok()) return acts.status();
    for (size_t i = 0; i < acts->size(); ++i) {
      if ((*acts)[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh"))
        return ctx.unsupported("activation '" + (*acts)[i] + "' (only Sigmoid, Tanh, Tanh)");
    }
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  std::vector<int64_t> xs = ctx.shape(0);
  if (xs.size() != 3) return ctx.invalid("X must have rank 3");
  const int64_t seq = layout == 0 ? xs[0] : xs[1];
  const int64_t batch = layout == 0 ? xs[1] : xs[0];
  const int64_t in = xs[2];
  if (ctx.shape(1) != std::vector<int64_t>{dirs, 4 * hidden, in})
    return ctx.invalid("W must be [" + std::to_string(dirs) + ", " + std::to_string(4 * hidden) +
                       ", " + std::to_string(in) + "], got " + shape_to_string(ctx.shape(1)));
  if (ctx.shape(2) != std::vector<int64_t>{dirs, 4 * hidden, hidden})
    return ctx.invalid("R must be [" + std::to_string(dirs) + ", " + std::to_string(4 * hidden) +
                       ", " + std::to_string(hidden) + "], got " + shape_to_string(ctx.shape(2)));
  if (ctx.has_input(4)) {  // sequence_lens: every sequence must be full length
    const HostTensor* lens = ctx.constant(4);
    if (lens == nullptr) return ctx.unsupported("sequence_lens known only at run time");
    for (int64_t l : lens->ints()) {
      if (l != seq)
        return ctx.unsupported("sequence_lens shorter than the sequence (" + std::to_string(l) +
                               ")");
    }
  }
  if (seq < 1) return ctx.invalid("the sequence is empty");
  if (seq > 4096) return ctx.unsupported("sequences over 4096 steps (the loop is unrolled)");

  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  if (layout == 1) {
    ETC_ASSIGN_OR_RETURN(x, permute(x, {1, 0, 2}));
  }
  ETC_ASSIGN_OR_RETURN(ValueId w, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId r, ctx.input(2));
  // Initial states [dirs, batch, H]; zeros when absent.
  auto initial = [&](int i) -> Result<std::optional<ValueId>> {
    if (!ctx.has_input(i)) return std::optional<ValueId>();
    ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
    if (layout == 1) {
      ETC_ASSIGN_OR_RETURN(v, permute(v, {1, 0, 2}));
    }
    return std::optional<ValueId>(v);
  };
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> h0, initial(5));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> c0, initial(6));
  ETC_ASSIGN_OR_RETURN(ValueId x2, reshape(ctx, x, {seq * batch, in}));

  std::vector<ValueId> ys, hs, cs;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    ETC_ASSIGN_OR_RETURN(ValueId wd, select(ctx, w, 0, d));
    ETC_ASSIGN_OR_RETURN(ValueId rd, select(ctx, r, 0, d));
    ArgValue bias = std::monostate{};
    if (ctx.has_input(3)) {
      ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(3));
      ETC_ASSIGN_OR_RETURN(ValueId bd, select(ctx, b, 0, d));
      ETC_ASSIGN_OR_RETURN(ValueId wb, slice(ctx, bd, 0, 0, 4 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId rb, slice(ctx, bd, 0, 4 * hidden, 8 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId sum, binary(ctx, OpKind::AddTensor, wb, rb));
      bias = sum;
    }
    // Every step's input projection at once: [seq * batch, 4H] -> [seq, batch, 4H].
    ETC_ASSIGN_OR_RETURN(ValueId xw,
                         ctx.emit(OpKind::Linear, {{"input", x2}, {"weight", wd}, {"bias", bias}}));
    ETC_ASSIGN_OR_RETURN(xw, reshape(ctx, xw, {seq, batch, 4 * hidden}));
    std::optional<ValueId> pi, po, pf;  // peepholes, [H] each
    if (ctx.has_input(7)) {
      ETC_ASSIGN_OR_RETURN(ValueId p, ctx.input(7));
      ETC_ASSIGN_OR_RETURN(ValueId pd, select(ctx, p, 0, d));
      ETC_ASSIGN_OR_RETURN(pi, slice(ctx, pd, 0, 0, hidden));
      ETC_ASSIGN_OR_RETURN(po, slice(ctx, pd, 0, hidden, 2 * hidden));
      ETC_ASSIGN_OR_RETURN(pf, slice(ctx, pd, 0, 2 * hidden, 3 * hidden));
    }
    // gate + peephole * cell (no term while the cell state is still zero).
    auto peep = [&](ValueId gate, const std::optional<ValueId>& weight,
                    const std::optional<ValueId>& cell) -> Result<ValueId> {
      if (!weight || !cell) return gate;
      ETC_ASSIGN_OR_RETURN(ValueId pc, binary(ctx, OpKind::MulTensor, *cell, *weight));
      return binary(ctx, OpKind::AddTensor, gate, pc);
    };
    std::optional<ValueId> h, c;
    if (h0) {
      ETC_ASSIGN_OR_RETURN(ValueId v, select(ctx, *h0, 0, d));
      h = v;
    }
    if (c0) {
      ETC_ASSIGN_OR_RETURN(ValueId v, select(ctx, *c0, 0, d));
      c = v;
    }
    std::vector<ValueId> steps(static_cast<size_t>(seq));
    for (int64_t k = 0; k < seq; ++k) {
      const int64_t t = reverse ? seq - 1 - k : k;
      ETC_ASSIGN_OR_RETURN(ValueId g, select(ctx, xw, 0, t));
      if (h) {
        ETC_ASSIGN_OR_RETURN(ValueId hr, ctx.emit(OpKind::Linear, {{"input", *h}, {"weight", rd}}));
        ETC_ASSIGN_OR_RETURN(g, binary(ctx, OpKind::AddTensor, g, hr));
      }
      ETC_ASSIGN_OR_RETURN(ValueId gi, slice(ctx, g, 1, 0, hidden));
      ETC_ASSIGN_OR_RETURN(ValueId go, slice(ctx, g, 1, hidden, 2 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId gf, slice(ctx, g, 1, 2 * hidden, 3 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId gc, slice(ctx, g, 1, 3 * hidden, 4 * hidden));
      ETC_ASSIGN_OR_RETURN(gi, peep(gi, pi, c));
      ETC_ASSIGN_OR_RETURN(ValueId i_gate, ctx.emit(OpKind::Sigmoid, {{"self", gi}}));
      ETC_ASSIGN_OR_RETURN(ValueId cand, ctx.emit(OpKind::Tanh, {{"self", gc}}));
      ETC_ASSIGN_OR_RETURN(ValueId ic, binary(ctx, OpKind::MulTensor, i_gate, cand));
      if (c) {
        ETC_ASSIGN_OR_RETURN(gf, peep(gf, pf, c));
        ETC_ASSIGN_OR_RETURN(ValueId f_gate, ctx.emit(OpKind::Sigmoid, {{"self", gf}}));
        ETC_ASSIGN_OR_RETURN(ValueId fc, binary(ctx, OpKind::MulTensor, f_gate, *c));
        ETC_ASSIGN_OR_RETURN(ic, binary(ctx, OpKind::AddTensor, fc, ic));
      }
      c = ic;
      ETC_ASSIGN_OR_RETURN(go, peep(go, po, c));
      ETC_ASSIGN_OR_RETURN(ValueId o_gate, ctx.emit(OpKind::Sigmoid, {{"self", go}}));
      ETC_ASSIGN_OR_RETURN(ValueId tc, ctx.emit(OpKind::Tanh, {{"self", *c}}));
      ETC_ASSIGN_OR_RETURN(ValueId hn, binary(ctx, OpKind::MulTensor, o_gate, tc));
      h = hn;
      steps[static_cast<size_t>(t)] = hn;
    }
    ETC_ASSIGN_OR_RETURN(ValueId yd, stack(ctx, steps, 0));  // [seq, batch, H]
    ys.push_back(yd);
    hs.push_back(*h);
    cs.push_back(*c);
  }
  if (ctx.has_output(0)) {
    ETC_ASSIGN_OR_RETURN(ValueId y, stack(ctx, ys, 1));  // [seq, dirs, batch, H]
    if (layout == 1) {
      ETC_ASSIGN_OR_RETURN(y, permute(y, {2, 0, 1, 3}));
    }
    ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  }
  for (int k : {1, 2}) {
    if (!ctx.has_output(k)) continue;
    ETC_ASSIGN_OR_RETURN(ValueId s, stack(ctx, k == 1 ? hs : cs, 0));  // [dirs, batch, H]
    if (layout == 1) {
      ETC_ASSIGN_OR_RETURN(s, permute(s, {1, 0, 2}));
    }
    ETC_RETURN_IF_ERROR(ctx.set_output(k, s));
  }
  return Status();
}

}  // namespace etc::onnx_import
