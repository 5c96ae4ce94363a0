// ONNX's LSTM, GRU and RNN -> IR, unrolled over the (static) sequence: the input projection
// of every time step is one GEMM, then each step is a GEMM with the recurrent weights and the
// gate arithmetic. LSTM: ONNX's gate order i, o, f, c; sigmoid, tanh, tanh; peepholes P =
// [p_i, p_o, p_f]: i and f see the previous cell state, o the new one. GRU: gates z, r, h;
// linear_before_reset chooses where r applies. RNN: one gate.
#include "frontends/onnx/node_context.h"
#include "frontends/onnx/onnx_converters.h"

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

// What LSTM, GRU and RNN share: sizes, direction and layout, checked.
struct Recurrence {
  int64_t hidden = 0, dirs = 1, layout = 0, seq = 0, batch = 0, in = 0;
  std::string direction;
  ValueId x2;  // X as [seq * batch, in]
};

// Reads and checks the attributes and shapes common to the recurrent ops, `gates` blocks
// of hidden_size rows in W and R.
Result<Recurrence> read_recurrence(NodeCtx& ctx, int64_t gates) {
  Recurrence rc;
  if (!dtype_is_float(ctx.dtype(0))) return ctx.unsupported("integer inputs");
  ETC_ASSIGN_OR_RETURN(rc.hidden, ctx.attr_int("hidden_size", std::nullopt));
  const int64_t hidden = rc.hidden;
  Result<std::string> dir = ctx.attr_string("direction", "forward");
  if (!dir.ok()) return dir.status();
  rc.direction = *dir;
  if (rc.direction != "forward" && rc.direction != "reverse" && rc.direction != "bidirectional") {
    return ctx.invalid("direction must be forward, reverse or bidirectional, got '" + rc.direction +
                       "'");
  }
  // layout=1 (opset 14): X [batch, seq, in], states [batch, dirs, H], Y [batch, seq, dirs, H]
  // (ONNX's test_lstm_batchwise checks it; ONNX Runtime refuses it).
  ETC_ASSIGN_OR_RETURN(rc.layout, ctx.attr_int("layout", 0));
  if (rc.layout != 0 && rc.layout != 1) return ctx.invalid("layout must be 0 or 1");
  if (ctx.attr("clip")) return ctx.unsupported("cell clipping (clip)");
  const int64_t dirs = rc.dirs = rc.direction == "bidirectional" ? 2 : 1;
  std::vector<int64_t> xs = ctx.shape(0);
  if (xs.size() != 3) return ctx.invalid("X must have rank 3");
  rc.seq = rc.layout == 0 ? xs[0] : xs[1];
  rc.batch = rc.layout == 0 ? xs[1] : xs[0];
  rc.in = xs[2];
  if (ctx.shape(1) != std::vector<int64_t>{dirs, gates * hidden, rc.in}) {
    return ctx.invalid("W must be [" + std::to_string(dirs) + ", " +
                       std::to_string(gates * hidden) + ", " + std::to_string(rc.in) + "], got " +
                       shape_to_string(ctx.shape(1)));
  }
  if (ctx.shape(2) != std::vector<int64_t>{dirs, gates * hidden, hidden}) {
    return ctx.invalid("R must be [" + std::to_string(dirs) + ", " +
                       std::to_string(gates * hidden) + ", " + std::to_string(hidden) + "], got " +
                       shape_to_string(ctx.shape(2)));
  }
  if (ctx.has_input(3) && ctx.shape(3) != std::vector<int64_t>{dirs, 2 * gates * hidden}) {
    return ctx.invalid("B must be [" + std::to_string(dirs) + ", " +
                       std::to_string(2 * gates * hidden) + "], got " +
                       shape_to_string(ctx.shape(3)));
  }
  if (ctx.has_input(4)) {  // sequence_lens: every sequence must be full length
    ETC_ASSIGN_OR_RETURN(const HostTensor* lens, ctx.require_constant(4, "sequence_lens"));
    for (int64_t l : lens->ints()) {
      if (l != rc.seq) {
        return ctx.unsupported("sequence_lens shorter than the sequence (" + std::to_string(l) +
                               ")");
      }
    }
  }
  if (rc.seq < 1) return ctx.invalid("the sequence is empty");
  if (rc.seq > 4096) return ctx.unsupported("sequences over 4096 steps (the loop is unrolled)");
  ETC_ASSIGN_OR_RETURN(ValueId x, ctx.input(0));
  if (rc.layout == 1) {
    ETC_ASSIGN_OR_RETURN(x, permute(ctx, x, {1, 0, 2}));
  }
  ETC_ASSIGN_OR_RETURN(rc.x2, reshape(ctx, x, {rc.seq * rc.batch, rc.in}));
  return rc;
}

// Initial state input i as [dirs, batch, H]; nullopt when absent.
Result<std::optional<ValueId>> initial_state(NodeCtx& ctx, const Recurrence& rc, int i) {
  if (!ctx.has_input(i)) return std::optional<ValueId>();
  ETC_ASSIGN_OR_RETURN(ValueId v, ctx.input(i));
  if (rc.layout == 1) {
    ETC_ASSIGN_OR_RETURN(v, permute(ctx, v, {1, 0, 2}));
  }
  return std::optional<ValueId>(v);
}

// Sets Y (output 0, from each direction's [seq, batch, H]) and the final states (outputs
// 1.., each from every direction's [batch, H]).
Status set_recurrent_outputs(NodeCtx& ctx, const Recurrence& rc, const std::vector<ValueId>& ys,
                             const std::vector<std::vector<ValueId>>& finals) {
  if (ctx.has_output(0)) {
    ETC_ASSIGN_OR_RETURN(ValueId y, stack(ctx, ys, 1));  // [seq, dirs, batch, H]
    if (rc.layout == 1) {
      ETC_ASSIGN_OR_RETURN(y, permute(ctx, y, {2, 0, 1, 3}));
    }
    ETC_RETURN_IF_ERROR(ctx.set_output(0, y));
  }
  for (size_t k = 0; k < finals.size(); ++k) {
    const int out = static_cast<int>(k) + 1;
    if (!ctx.has_output(out)) continue;
    ETC_ASSIGN_OR_RETURN(ValueId s, stack(ctx, finals[k], 0));  // [dirs, batch, H]
    if (rc.layout == 1) {
      ETC_ASSIGN_OR_RETURN(s, permute(ctx, s, {1, 0, 2}));
    }
    ETC_RETURN_IF_ERROR(ctx.set_output(out, s));
  }
  return Status();
}

// An activation of the activations attribute.
Result<ValueId> activate(NodeCtx& ctx, const std::string& f, ValueId v) {
  if (f == "Sigmoid") return ctx.emit(OpKind::Sigmoid, {{"self", v}});
  if (f == "Tanh") return ctx.emit(OpKind::Tanh, {{"self", v}});
  if (f == "Relu") return ctx.emit(OpKind::Relu, {{"self", v}});
  return ctx.unsupported("activation '" + f + "' (only Sigmoid, Tanh and Relu)");
}

}  // namespace

Status convert_lstm(NodeCtx& ctx) {
  ETC_ASSIGN_OR_RETURN(int64_t input_forget, ctx.attr_int("input_forget", 0));
  if (input_forget != 0) return ctx.unsupported("input_forget=1");
  if (ctx.attr("activations")) {
    Result<std::vector<std::string>> acts = ctx.attr_strings("activations");
    if (!acts.ok()) return acts.status();
    for (size_t i = 0; i < acts->size(); ++i) {
      if ((*acts)[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh"))
        return ctx.unsupported("activation '" + (*acts)[i] + "' (only Sigmoid, Tanh, Tanh)");
    }
  }
  ETC_ASSIGN_OR_RETURN(Recurrence rc, read_recurrence(ctx, 4));
  const int64_t hidden = rc.hidden, dirs = rc.dirs, seq = rc.seq, batch = rc.batch;
  const std::string& direction = rc.direction;
  const ValueId x2 = rc.x2;
  ETC_ASSIGN_OR_RETURN(ValueId w, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId r, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> h0, initial_state(ctx, rc, 5));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> c0, initial_state(ctx, rc, 6));

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
  return set_recurrent_outputs(ctx, rc, ys, {hs, cs});
}

// GRU (gates z, r, h; activations f=Sigmoid, g=Tanh) and RNN (one gate, f=Tanh):
// Ht = (1 - z) * h~ + z * Ht-1 and Ht = f(Xt W + Ht-1 R + Wb + Rb). A missing initial
// state is zeros.
Status convert_gru_rnn(NodeCtx& ctx) {
  const bool gru = ctx.op_type() == "GRU";
  const int64_t gates = gru ? 3 : 1;
  ETC_ASSIGN_OR_RETURN(Recurrence rc, read_recurrence(ctx, gates));
  const int64_t hidden = rc.hidden, batch = rc.batch, seq = rc.seq;
  ETC_ASSIGN_OR_RETURN(int64_t lbr, ctx.attr_int("linear_before_reset", 0));
  std::vector<std::string> acts;
  if (ctx.attr("activations")) {
    ETC_ASSIGN_OR_RETURN(acts, ctx.attr_strings("activations"));
  }
  const size_t per_dir = gru ? 2 : 1;
  if (acts.empty()) {
    for (int64_t d = 0; d < rc.dirs; ++d) {
      if (gru) {
        acts.insert(acts.end(), {"Sigmoid", "Tanh"});
      } else {
        acts.emplace_back("Tanh");
      }
    }
  }
  if (acts.size() != per_dir * static_cast<size_t>(rc.dirs))
    return ctx.invalid("activations must name " + std::to_string(per_dir) + " per direction");
  ETC_ASSIGN_OR_RETURN(ValueId w, ctx.input(1));
  ETC_ASSIGN_OR_RETURN(ValueId r, ctx.input(2));
  ETC_ASSIGN_OR_RETURN(std::optional<ValueId> h0, initial_state(ctx, rc, 5));
  std::vector<ValueId> ys, hs;
  for (int64_t d = 0; d < rc.dirs; ++d) {
    const bool reverse = rc.direction == "reverse" || d == 1;
    const std::string& f = acts[per_dir * static_cast<size_t>(d)];
    const std::string& g = gru ? acts[per_dir * static_cast<size_t>(d) + 1] : f;
    ETC_ASSIGN_OR_RETURN(ValueId wd, select(ctx, w, 0, d));
    ETC_ASSIGN_OR_RETURN(ValueId rd, select(ctx, r, 0, d));
    ArgValue wb = std::monostate{}, rb = std::monostate{};
    if (ctx.has_input(3)) {
      ETC_ASSIGN_OR_RETURN(ValueId b, ctx.input(3));
      ETC_ASSIGN_OR_RETURN(ValueId bd, select(ctx, b, 0, d));
      ETC_ASSIGN_OR_RETURN(wb, slice(ctx, bd, 0, 0, gates * hidden));
      ETC_ASSIGN_OR_RETURN(rb, slice(ctx, bd, 0, gates * hidden, 2 * gates * hidden));
    }
    // Every step's input projection at once: [seq, batch, gates * H].
    ETC_ASSIGN_OR_RETURN(
        ValueId xw, ctx.emit(OpKind::Linear, {{"input", rc.x2}, {"weight", wd}, {"bias", wb}}));
    ETC_ASSIGN_OR_RETURN(xw, reshape(ctx, xw, {seq, batch, gates * hidden}));
    ValueId h;
    if (h0) {
      ETC_ASSIGN_OR_RETURN(h, select(ctx, *h0, 0, d));
    } else {
      h = ctx.add_constant(
          host_from_doubles(ctx.dtype(0), {batch, hidden},
                            std::vector<double>(static_cast<size_t>(batch * hidden), 0.0)));
    }
    // GRU's h gate with linear_before_reset=0 multiplies the state by r before R_h.
    std::optional<ValueId> rh, rbh;
    if (gru && lbr == 0) {
      ETC_ASSIGN_OR_RETURN(rh, slice(ctx, rd, 0, 2 * hidden, 3 * hidden));
      if (const ValueId* rbv = std::get_if<ValueId>(&rb)) {
        ETC_ASSIGN_OR_RETURN(rbh, slice(ctx, *rbv, 0, 2 * hidden, 3 * hidden));
      }
    }
    std::vector<ValueId> steps(static_cast<size_t>(seq));
    for (int64_t k = 0; k < seq; ++k) {
      const int64_t t = reverse ? seq - 1 - k : k;
      ETC_ASSIGN_OR_RETURN(ValueId xt, select(ctx, xw, 0, t));
      ETC_ASSIGN_OR_RETURN(ValueId hr,
                           ctx.emit(OpKind::Linear, {{"input", h}, {"weight", rd}, {"bias", rb}}));
      if (!gru) {
        ETC_ASSIGN_OR_RETURN(ValueId pre, binary(ctx, OpKind::AddTensor, xt, hr));
        ETC_ASSIGN_OR_RETURN(h, activate(ctx, f, pre));
        steps[static_cast<size_t>(t)] = h;
        continue;
      }
      ETC_ASSIGN_OR_RETURN(ValueId xzr, slice(ctx, xt, 1, 0, 2 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId hzr, slice(ctx, hr, 1, 0, 2 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId zr, binary(ctx, OpKind::AddTensor, xzr, hzr));
      ETC_ASSIGN_OR_RETURN(zr, activate(ctx, f, zr));
      ETC_ASSIGN_OR_RETURN(ValueId z, slice(ctx, zr, 1, 0, hidden));
      ETC_ASSIGN_OR_RETURN(ValueId rg, slice(ctx, zr, 1, hidden, 2 * hidden));
      ETC_ASSIGN_OR_RETURN(ValueId xh, slice(ctx, xt, 1, 2 * hidden, 3 * hidden));
      ValueId hh;
      if (lbr != 0) {
        ETC_ASSIGN_OR_RETURN(ValueId hrh, slice(ctx, hr, 1, 2 * hidden, 3 * hidden));
        ETC_ASSIGN_OR_RETURN(hh, binary(ctx, OpKind::MulTensor, rg, hrh));
      } else {
        ETC_ASSIGN_OR_RETURN(ValueId rs, binary(ctx, OpKind::MulTensor, rg, h));
        ArgValue bias = std::monostate{};
        if (rbh) bias = *rbh;
        ETC_ASSIGN_OR_RETURN(
            hh, ctx.emit(OpKind::Linear, {{"input", rs}, {"weight", *rh}, {"bias", bias}}));
      }
      ETC_ASSIGN_OR_RETURN(ValueId pre, binary(ctx, OpKind::AddTensor, xh, hh));
      ETC_ASSIGN_OR_RETURN(ValueId cand, activate(ctx, g, pre));
      // (1 - z) * h~ + z * h = h~ + z * (h - h~)
      ETC_ASSIGN_OR_RETURN(ValueId diff, binary(ctx, OpKind::SubTensor, h, cand));
      ETC_ASSIGN_OR_RETURN(ValueId zd, binary(ctx, OpKind::MulTensor, z, diff));
      ETC_ASSIGN_OR_RETURN(h, binary(ctx, OpKind::AddTensor, cand, zd));
      steps[static_cast<size_t>(t)] = h;
    }
    ETC_ASSIGN_OR_RETURN(ValueId yd, stack(ctx, steps, 0));  // [seq, batch, H]
    ys.push_back(yd);
    hs.push_back(h);
  }
  return set_recurrent_outputs(ctx, rc, ys, {hs});
}

}  // namespace etc::onnx_import
