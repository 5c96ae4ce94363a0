// The load planner's channels-last pass (load_plan_planner.h): the tensors that only
// convolutions running on oneDNN or etc's NHWC kernels (and the steps that can read them in
// either layout) read and write stay NHWC between them.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "runtime/kernels/conv.h"
#include "runtime/kernels/conv_algorithm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/load_plan_planner.h"

namespace etc::rt::kernels::load_plan_detail {

void CpuPlanner::plan_channels_last() {
  // Without jumps the steps run in order: a tensor lives from the step that writes it until
  // a step writes its bytes anew.
  // A move rebinds a value to another's bytes, which no step names: none of that either.
  if (!straight_line()) return;
  std::map<const TensorView*, const Value*> by_tensor;
  for (const Value& v : values())
    by_tensor[&v.tensor] = &v;
  // A convolution that can run on oneDNN with channels-last tensors, and what it writes (its
  // out, its epilogue's outs) and reads through its epilogue (operands from outside).
  struct Group {
    size_t step = 0;
    std::vector<const Value*> writes, operands;
    bool channels_last = true;
    // Not a oneDNN convolution (its out at argument 9) but a step that reads its input
    // (argument 0) in its out's layout: a max pooling (out at 6), a batch norm or an average
    // pooling (7), a convolution on etc's own NHWC kernels (9).
    bool same_in = false;
    // Its kernel returns a list of its outs (batch norm's three, max pooling's two).
    bool returns_list = false;
    // A cat along the channels (its out at argument 2): its items and its out share a layout.
    bool cat = false;
    // A product by one value per channel (its out at argument 2): its argument `scaled` and
    // its out share a layout; the other, [N, C, 1, 1] or [C, 1, 1], has the same bytes in
    // either.
    bool scale = false;
    size_t scaled = 0;
    // A sum of two tensors of its out's sizes (its out at argument 3; convnext's residual
    // adds): both and its out share a layout.
    bool sum = false;
    // A permute [0, 3, 1, 2] of a plain [N, H, W, C] tensor (its out at argument 2; convnext's
    // way back from its LayerNorms and linear layers): channels-last, its out has the bytes of
    // its input.
    bool from_nhwc = false;
    size_t out_arg = 9;
    // The arguments the step reads in the group's layout (a convolution reads either; a cat's
    // items are a list).
    std::vector<size_t> tied_args() const {
      if (same_in) return {0};
      if (scale) return {scaled};
      if (sum) return {0, 1};
      return {};
    }
    bool ties(size_t arg) const {
      const std::vector<size_t> tied = tied_args();
      return std::find(tied.begin(), tied.end(), arg) != tied.end();
    }
    bool convolution() const { return !same_in && !cat && !scale && !sum && !from_nhwc; }
  };
  std::vector<Group> groups;
  std::map<const Value*, size_t> writer;  // value -> its group
  std::vector<int64_t> group_of_step(steps().size(), -1);
  auto usable = [&](const Value* v) {
    return v->is_tensor() && !is_io(v) && v->tensor.capacity < 0 && v->tensor.data != nullptr &&
           v->tensor.device.is_cpu();
  };
  // Takes a step's group (its out at group.out_arg) with its epilogue: the epilogue's outs
  // are the group's too, and its operands from outside must be chain tensors. False where an
  // out is not plain planned memory or another group writes it.
  auto adopt = [&](Group group) {
    const MethodStep& s = steps()[group.step];
    group.writes.push_back(s.args[group.out_arg]);
    bool ok = true;
    if (s.epilogue != nullptr) {
      auto add = [&](std::vector<const Value*>& to, const TensorView* t) {
        auto it = by_tensor.find(t);
        if (it == by_tensor.end() || !usable(it->second)) {
          ok = false;
          return;
        }
        if (std::find(to.begin(), to.end(), it->second) == to.end()) to.push_back(it->second);
      };
      for (const Epilogue::Op& op : s.epilogue->ops)
        add(group.writes, op.out);
      for (const Epilogue::Op& op : s.epilogue->ops) {
        for (const TensorView* t : {op.a, op.b}) {
          if (t == nullptr) continue;
          auto it = by_tensor.find(t);
          if (it != by_tensor.end() &&
              std::find(group.writes.begin(), group.writes.end(), it->second) != group.writes.end())
            continue;
          add(group.operands, t);
        }
      }
    }
    for (const Value* v : group.writes) {
      if (writer.count(v) != 0) ok = false;  // written by two steps: leave both
    }
    if (!ok) return false;
    group_of_step[group.step] = static_cast<int64_t>(groups.size());
    for (const Value* v : group.writes)
      writer[v] = groups.size();
    groups.push_back(std::move(group));
    return true;
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::Convolution) ||
        ((s.constant_args >> 1) & 1) == 0)
      continue;
    const std::optional<kernels::ConvGeometry> g = kernels::float_conv2d_geometry(s.args);
    // The convolutions oneDNN or etc's own NHWC kernels run on channels-last tensors (their
    // weights are constants, checked above); choose_conv_algorithm has the thresholds.
    const ConvCall chain{false, DType::kFloat32, true, true, kernels::onednn_conv_enabled()};
    if (!g || !usable(s.args[9]) || s.args[0]->tensor.capacity >= 0) continue;
    const ConvAlgorithm algorithm = choose_conv_algorithm(*g, chain);
    if (!chain_algorithm(algorithm)) continue;
    if (algorithm == ConvAlgorithm::kPointwiseNhwc) {
      // etc's own 1x1 kernel reads the input in the out's layout, as a pooling does.
      Group group;
      group.step = i;
      group.same_in = true;
      adopt(std::move(group));
      continue;
    }
    // A first layer reading a method input (NCHW, never in a chain) runs etc's direct loop
    // into a channels-last out (channels_last_convolution): no oneDNN state to make for it.
    // Winograd (etc's own, either layout in and out) makes its state at its first call.
    const bool direct_first_layer = is_io(s.args[0]) && kernels::few_input_channels_conv(*g);
    if (algorithm == ConvAlgorithm::kOnednn && !direct_first_layer &&
        !kernels::prepare_onednn_conv(s.args, *g, steps()[i].state))
      continue;
    Group group;
    group.step = i;
    adopt(std::move(group));
  }
  // Max poolings whose indices nothing reads, of 4-d float tensors (resnet18's pooling between
  // its first convolution and its first stage): channels-last where their input is (the
  // kernel takes 16 channels of a pixel per vector: no stride-2 shuffles).
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::MaxPool2dWithIndices) ||
        s.args.size() != 9 || ((s.unread_outs >> 7) & 1) == 0 || !usable(s.args[0]) ||
        !usable(s.args[6]) || s.args[0]->tensor.dtype != DType::kFloat32 ||
        s.args[0]->tensor.rank() != 4 || s.args[6]->tensor.dtype != DType::kFloat32 ||
        writer.count(s.args[6]) != 0)
      continue;
    Group group;
    group.step = i;
    group.same_in = true;
    group.returns_list = true;
    group.out_arg = 6;
    adopt(std::move(group));
  }
  // Inference batch norms (with their epilogue: densenet's relu) and average poolings of 4-d
  // float tensors (densenet's layers and transitions, between its convolutions): each
  // position's channels scaled and shifted, or averaged over the window, channels-last where
  // their input is.
  auto float4d_out = [&](const Value* v) {
    return usable(v) && v->tensor.dtype == DType::kFloat32 && v->tensor.rank() == 4;
  };
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || s.args.empty() || !s.args[0]->is_tensor() ||
        s.args[0]->tensor.dtype != DType::kFloat32 || s.args[0]->tensor.rank() != 4)
      continue;
    Group group;
    group.step = i;
    group.same_in = true;
    if (s.calls(OpKind::NativeBatchNormNoTraining) && s.args.size() >= 11 &&
        float4d_out(s.args[7])) {
      group.out_arg = 7;
      group.returns_list = true;
      adopt(std::move(group));
    } else if (s.calls(OpKind::AvgPool2d) && s.args.size() >= 8 && float4d_out(s.args[7]) &&
               s.epilogue == nullptr) {
      group.out_arg = 7;
      adopt(std::move(group));
    }
  }
  // Cats of 4-d float tensors along their channels (squeezenet's and googlenet's blocks join
  // convolutions' outs for the next convolutions; each of densenet's layers joins all the
  // outs before it): channels-last where every item is, each position's channels copied
  // item by item, so the chain goes on through them.
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || !s.calls(OpKind::Cat) || s.args.size() < 3 ||
        s.args[0]->is_tensor() || s.args[1]->kind != Value::Kind::kInt || !usable(s.args[2]) ||
        s.args[2]->tensor.dtype != DType::kFloat32 || s.args[2]->tensor.rank() != 4 ||
        (s.args[1]->i != 1 && s.args[1]->i != -3) || writer.count(s.args[2]) != 0)
      continue;
    bool ok = !s.args[0]->tensors.empty();
    std::vector<const Value*> items;
    for (const TensorView* t : s.args[0]->tensors) {
      auto it = t == nullptr ? by_tensor.end() : by_tensor.find(t);
      if (it == by_tensor.end() || !usable(it->second) || t->dtype != DType::kFloat32 ||
          t->rank() != 4 || t->numel() == 0 ||
          std::find(items.begin(), items.end(), it->second) != items.end()) {
        ok = false;
        break;
      }
      items.push_back(it->second);
    }
    if (!ok) continue;
    Group group;
    group.step = i;
    group.cat = true;
    group.out_arg = 2;
    group.operands = items;  // read in the group's layout: each must be a group's out
    adopt(std::move(group));
  }
  // Squeeze-and-excitation blocks (efficientnet's, mobilenet_v3's): a global mean of a
  // chain tensor (adaptive average pooling to 1x1, or mean over H and W), whose out has the
  // same bytes in either layout, and the product of the tensor by the [N, C, 1, 1] result,
  // channels-last with it, so that the chain goes on to the next convolution.
  auto float4d = [](const Value* v) {
    return v->is_tensor() && v->tensor.dtype == DType::kFloat32 && v->tensor.rank() == 4;
  };
  auto per_channel = [](const TensorView& s, const TensorView& x) {
    return x.rank() == 4 && is_channel_scale(s, x.sizes);
  };
  std::vector<bool> reads_either(steps().size(), false);  // a global mean: argument 0
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused) continue;
    if (s.calls(OpKind::AdaptiveAvgPool2d) && s.args.size() >= 3 && float4d(s.args[0]) &&
        s.args[1]->ints == std::vector<int64_t>{1, 1} && float4d(s.args[2])) {
      reads_either[i] = true;
    } else if (s.calls(OpKind::MeanDim) && s.args.size() >= 5 && float4d(s.args[0]) &&
               s.args[4]->is_tensor() && s.args[4]->tensor.dtype == DType::kFloat32 &&
               s.args[1]->ints.size() == 2) {
      std::vector<int64_t> dims = s.args[1]->ints;
      for (int64_t& d : dims)
        d = d < 0 ? d + 4 : d;
      std::sort(dims.begin(), dims.end());
      reads_either[i] = dims == std::vector<int64_t>{2, 3};
    } else if (s.calls(OpKind::MulTensor) && s.args.size() >= 3 && s.args[0]->is_tensor() &&
               s.args[1]->is_tensor() && s.args[0]->tensor.dtype == DType::kFloat32 &&
               s.args[1]->tensor.dtype == DType::kFloat32 && usable(s.args[2]) &&
               float4d(s.args[2]) && writer.count(s.args[2]) == 0) {
      const TensorView& a = s.args[0]->tensor;
      const TensorView& b = s.args[1]->tensor;
      const size_t scaled = per_channel(b, a) ? 0 : per_channel(a, b) ? 1 : 2;
      if (scaled == 2 || s.args[2]->tensor.sizes != s.args[scaled]->tensor.sizes ||
          s.args[2]->tensor.sizes[2] * s.args[2]->tensor.sizes[3] == 1)
        continue;
      Group group;
      group.step = i;
      group.scale = true;
      group.scaled = scaled;
      group.out_arg = 2;
      adopt(std::move(group));
    }
  }
  // ConvNeXt's blocks: a depthwise convolution, a permute to [N, H, W, C], a LayerNorm and
  // two linear layers over the channels, a permute back, a product by one value per channel
  // and a residual sum. The permute to [N, H, W, C] of a chain tensor is a copy of its bytes
  // (it reads either layout, as a global mean does); the permute back writes a chain tensor
  // with the bytes of its input; the sum of two chain tensors of one size is the sum of their
  // bytes. So the residual stream stays channels-last from one depthwise layer to the next.
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused) continue;
    if (s.calls(OpKind::Permute) && s.args.size() >= 3 && float4d(s.args[0]) &&
        s.args[2]->is_tensor()) {
      if (s.args[1]->ints == std::vector<int64_t>{0, 2, 3, 1}) {
        reads_either[i] = true;
      } else if (s.args[1]->ints == std::vector<int64_t>{0, 3, 1, 2} && usable(s.args[2]) &&
                 float4d(s.args[2]) && writer.count(s.args[2]) == 0) {
        Group group;
        group.step = i;
        group.from_nhwc = true;
        group.out_arg = 2;
        adopt(std::move(group));
      }
    } else if (s.calls(OpKind::AddTensor) && s.args.size() >= 4 && float4d(s.args[0]) &&
               float4d(s.args[1]) && usable(s.args[3]) && float4d(s.args[3]) &&
               s.args[0]->tensor.sizes == s.args[3]->tensor.sizes &&
               s.args[1]->tensor.sizes == s.args[3]->tensor.sizes && writer.count(s.args[3]) == 0) {
      Group group;
      group.step = i;
      group.sum = true;
      group.out_arg = 3;
      adopt(std::move(group));
    }
  }
  // ShuffleNet's blocks: the channel shuffle (a transpose of dims 1 and 2 of the [N, G, C/G,
  // H, W] view of a cat's out) and the splits of its [N, C, H, W] view along the channels
  // (slices). Both read their input in their out's layout; a 5-d [N, A, B, H, W] tensor held
  // channels-last is [N, H, W, A, B], the bytes of the [N, A * B, H, W] tensor held [N, H, W,
  // C] (the views between them are taken as the tensors they view, below).
  for (size_t i = 0; i < steps().size(); ++i) {
    const MethodStep& s = steps()[i];
    if (s.kind != StepKind::kKernel || s.fused || s.args.empty() || !s.args[0]->is_tensor() ||
        s.args[0]->tensor.dtype != DType::kFloat32)
      continue;
    Group group;
    group.step = i;
    group.same_in = true;
    const TensorView& in = s.args[0]->tensor;
    if (s.calls(OpKind::TransposeInt) && s.args.size() >= 4 && in.rank() == 5 &&
        s.args[1]->kind == Value::Kind::kInt && s.args[2]->kind == Value::Kind::kInt &&
        usable(s.args[3]) && s.args[3]->tensor.dtype == DType::kFloat32 &&
        s.args[3]->tensor.rank() == 5 && writer.count(s.args[3]) == 0) {
      const int64_t d0 = s.args[1]->i < 0 ? s.args[1]->i + 5 : s.args[1]->i;
      const int64_t d1 = s.args[2]->i < 0 ? s.args[2]->i + 5 : s.args[2]->i;
      if (std::min(d0, d1) != 1 || std::max(d0, d1) != 2) continue;
      group.out_arg = 3;
      adopt(std::move(group));
    } else if (s.calls(OpKind::SliceTensor) && s.args.size() >= 6 && in.rank() == 4 &&
               s.args[1]->kind == Value::Kind::kInt && (s.args[1]->i == 1 || s.args[1]->i == -3) &&
               float4d_out(s.args[5]) && writer.count(s.args[5]) == 0) {
      group.out_arg = 5;
      adopt(std::move(group));
    }
  }
  if (groups.empty()) return;

  // Views of a group's out under another shape that differs only by splitting or merging the
  // channels ([N, C, H, W] and [N, A, B, H, W], A * B = C): the same bytes in either layout.
  // Such a view, which no step writes, stands for the out wherever it is read between the
  // out's step and the next write over its bytes; elsewhere (or if any of its reads finds
  // another tensor there) it stays what it was, a value over the out's memory.
  auto merged = [](const TensorView& t) {
    std::vector<int64_t> m = t.sizes;
    if (m.size() == 5) {
      m[1] *= m[2];
      m.erase(m.begin() + 2);
    }
    return m.size() == 4 ? m : std::vector<int64_t>{};
  };
  std::multimap<const void*, const Value*> writes_at;  // a group's writes by their address
  for (const auto& [v, gi] : writer) {
    if (v->tensor.data != nullptr && v->tensor.nbytes() > 0) writes_at.emplace(v->tensor.data, v);
  }
  std::set<const Value*> written;  // by any kernel: not a view
  for (const MethodStep& s : steps()) {
    for (const Value* u : s.args) {
      if (writes(s, u)) written.insert(u);
    }
  }
  std::map<const Value*, const Value*> view_of;  // null: not a view of one out everywhere
  for (size_t j = 0; j < steps().size(); ++j) {
    for (const Value* u : steps()[j].args) {
      if (!u->is_tensor() || written.count(u) != 0 || u->tensor.data == nullptr ||
          u->tensor.nbytes() == 0)
        continue;
      const Value* at = nullptr;  // the out of the latest group step before j over u's bytes
      size_t at_step = 0;
      auto [first, last] = writes_at.equal_range(u->tensor.data);
      for (auto it = first; it != last; ++it) {
        const size_t step = groups[writer.at(it->second)].step;
        if (step < j && (at == nullptr || step > at_step)) {
          at = it->second;
          at_step = step;
        }
      }
      bool ok = at != nullptr && at->tensor.nbytes() == u->tensor.nbytes() &&
                at->tensor.dtype == u->tensor.dtype;
      if (ok) {
        const std::vector<int64_t> shape = merged(u->tensor);
        ok = !shape.empty() && shape == merged(at->tensor);
      }
      for (size_t k = at_step + 1; ok && k < j; ++k) {
        for (const Value* x : steps()[k].args) {
          if (x->is_tensor() && writes(steps()[k], x) && overlaps(x->tensor, at->tensor))
            ok = false;
        }
      }
      auto known = view_of.find(u);
      if (known == view_of.end()) {
        view_of[u] = ok ? at : nullptr;
      } else if (!ok || known->second != at) {
        known->second = nullptr;
      }
    }
  }
  // A step's argument as the groups see it: the out it views, or itself.
  auto seen = [&](const Value* u) {
    auto it = view_of.find(u);
    return it != view_of.end() && it->second != nullptr ? it->second : u;
  };

  // Who reads each written tensor. The convolutions of groups may read one as their input
  // (argument 0); an epilogue may read one as an operand if its own group agrees on the
  // layout; anything else (another kernel, a delegate, an alias of its memory while it
  // lives) keeps the tensor NCHW.
  std::vector<std::pair<size_t, size_t>> agree;  // groups that must share a layout
  size_t owner = 0;                              // the kernel whose epilogue a fused step is
  for (size_t j = 0; j < steps().size(); ++j) {
    const MethodStep& s = steps()[j];
    if (!s.fused) owner = j;
    const int64_t own = group_of_step[owner];
    for (size_t a = 0; a < s.args.size(); ++a) {
      // A list of tensors (cat, stack, index) reads its items as NCHW; a kernel's returned
      // list is its outs (a group's own pooling out among them).
      const bool outs_list = !s.fused && s.kind == StepKind::kKernel && a + 1 == s.args.size() &&
                             !s.args[a]->is_tensor() && own >= 0 &&
                             static_cast<size_t>(own) < groups.size() &&
                             groups[static_cast<size_t>(own)].returns_list;
      // A cat group's items: read in its layout.
      const bool cat_list = !s.fused && a == 0 && own >= 0 &&
                            static_cast<size_t>(own) < groups.size() &&
                            groups[static_cast<size_t>(own)].cat;
      for (const TensorView* t : outs_list ? std::vector<TensorView*>{} : s.args[a]->tensors) {
        auto item = t == nullptr ? by_tensor.end() : by_tensor.find(t);
        if (item == by_tensor.end()) continue;
        auto w = writer.find(item->second);
        if (w == writer.end()) continue;
        if (cat_list) {
          agree.emplace_back(w->second, static_cast<size_t>(own));
        } else {
          groups[w->second].channels_last = false;
        }
      }
      auto it = writer.find(seen(s.args[a]));
      if (it == writer.end()) continue;
      Group& g = groups[it->second];
      if (own == static_cast<int64_t>(it->second)) {
        // Its own convolution names it as its out (and return value), its epilogue as operand
        // or out.
        if (!s.fused && a < g.out_arg) g.channels_last = false;  // also its input: in place
        continue;
      }
      const Group* by = own >= 0 ? &groups[static_cast<size_t>(own)] : nullptr;
      // The input of a pooling or a channel scaling, whose out then takes its layout, or an
      // operand of an epilogue.
      const bool tied = by != nullptr && (s.fused || by->ties(a));
      // The input of another oneDNN convolution, or of a global mean: either layout.
      const bool either =
          !s.fused && a == 0 && ((by != nullptr && by->convolution()) || reads_either[j]);
      if (tied) {
        agree.emplace_back(it->second, static_cast<size_t>(own));
      } else if (!either) {
        g.channels_last = false;
      }
    }
  }
  // Other values over a written tensor's memory (views the program reads it through, which
  // assume NCHW), from the group's step until a kernel writes that memory anew (its out, the
  // last argument: the planner reuses the bytes for another tensor).
  // And a method output over it that no kernel writes anew after it (a caller reads it as
  // NCHW).
  for (Group& g : groups) {
    for (const Value* v : g.writes) {
      bool reused = false;
      for (size_t j = g.step + 1; j < steps().size() && !reused && g.channels_last; ++j) {
        const MethodStep& s = steps()[j];
        // A kernel's outs: its return value, or the tensors of a returned list (max
        // pooling's values and indices), written after its reads.
        const bool kernel = s.kind == StepKind::kKernel && !s.fused;
        for (const Value* u : s.args) {
          const bool outs_list = kernel && u == s.args.back() && !u->is_tensor();
          for (const TensorView* t : u->tensors) {  // list items over it: read as NCHW
            // A cat group reading one of the group's tensors as an item (the loop above tied
            // their layouts).
            if (u == s.args[0] && group_of_step[j] >= 0 &&
                groups[static_cast<size_t>(group_of_step[j])].cat) {
              auto item = by_tensor.find(t);
              if (item != by_tensor.end() &&
                  std::find(g.writes.begin(), g.writes.end(), item->second) != g.writes.end())
                continue;
            }
            if (t != nullptr && t->data != nullptr && t->nbytes() > 0 && overlaps(*t, v->tensor)) {
              if (outs_list) {
                reused = true;
              } else {
                g.channels_last = false;
              }
            }
          }
          if (!u->is_tensor() || u->tensor.data == nullptr || u->tensor.nbytes() == 0 ||
              std::find(g.writes.begin(), g.writes.end(), u) != g.writes.end() || seen(u) == v ||
              !overlaps(u->tensor, v->tensor))
            continue;
          // A kernel's out, or an epilogue's (a fused step writes its out as its kernel
          // runs, and the method reads v's bytes no more once anything is planned over them).
          if (s.kind == StepKind::kKernel && writes(s, u)) {
            reused = true;  // after this step's reads, checked in this loop too
          } else {
            g.channels_last = false;
          }
        }
      }
      for (size_t k : m_.outputs) {
        const Value& o = values()[k];
        if (!reused && o.is_tensor() && o.tensor.data != nullptr && o.tensor.nbytes() > 0 &&
            overlaps(o.tensor, v->tensor))
          g.channels_last = false;
      }
    }
    // An epilogue operand (or a cat's item) from outside every group is NCHW: the group's
    // layout must be too.
    for (const Value* v : g.operands) {
      if (writer.count(v) == 0) g.channels_last = false;
    }
    // So is a pooling's (a batch norm's, a channel scaling's, a sum's) input that no group
    // writes.
    for (size_t in : g.tied_args()) {
      if (writer.count(seen(steps()[g.step].args[in])) == 0) g.channels_last = false;
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [a, b] : agree) {
      if (groups[a].channels_last != groups[b].channels_last) {
        groups[a].channels_last = groups[b].channels_last = false;
        changed = true;
      }
    }
  }
  auto channels_last_in = [&](const MethodStep& s) {
    auto in = writer.find(seen(s.args[0]));
    return in != writer.end() && groups[in->second].channels_last;
  };
  for (const Group& g : groups) {
    MethodStep& s = steps()[g.step];
    if (g.channels_last) s.channels_last_args |= uint64_t{1} << g.out_arg;
    // The inputs a step reads in its out's layout (agreed above), or a convolution's input.
    for (size_t in : g.tied_args()) {
      if (g.channels_last) s.channels_last_args |= uint64_t{1} << in;
    }
    if (g.convolution() && channels_last_in(s)) s.channels_last_args |= uint64_t{1} << 0;
  }
  for (size_t i = 0; i < steps().size(); ++i) {
    if (reads_either[i] && channels_last_in(steps()[i])) steps()[i].channels_last_args |= 1;
  }
}

}  // namespace etc::rt::kernels::load_plan_detail
