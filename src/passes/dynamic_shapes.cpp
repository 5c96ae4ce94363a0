#include "passes/dynamic_shapes.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace etc {
namespace {

// One integer argument (or list element) that differs between the builds.
struct Moving {
  NodeId node;
  uint32_t arg = 0;
  int32_t element = -1;  // in an int list; -1 for an int argument
};

class Comparison {
 public:
  Comparison(std::span<Graph* const> graphs, const std::string& symbols)
      : g_(*graphs[0]), all_(graphs), others_(graphs.subspan(1)), symbols_(symbols) {}

  Status run() {
    for (const Graph* o : others_)
      ETC_RETURN_IF_ERROR(same_structure(*o));
    std::set<uint32_t> dynamic;
    for (size_t i = 0; i < g_.value_slots(); ++i) {
      const Value& v = g_.value(ValueId(static_cast<uint32_t>(i)));
      if (v.erased) continue;
      for (const Graph* o : others_) {
        const Value& w = o->value(v.id);
        if (w.spec.dtype != v.spec.dtype || w.spec.rank() != v.spec.rank())
          return depends(value_label(v) + " changes dtype or rank");
        if (w.spec.sizes != v.spec.sizes) dynamic.insert(v.id.v);
        if (v.kind == ValueKind::kConstant) {
          std::span<const uint8_t> a = v.spec.constant.bytes(), b = w.spec.constant.bytes();
          if (!std::equal(a.begin(), a.end(), b.begin(), b.end()))
            return depends("constant " + value_label(v) + " (computed at export) changes");
        }
      }
    }
    for (NodeId id : g_.order())
      ETC_RETURN_IF_ERROR(compare_args(id));
    for (const Moving& m : moving_)
      ETC_RETURN_IF_ERROR(rewrite(m));
    for (uint32_t v : dynamic) {
      const Value& val = g_.value(ValueId(v));
      if (val.kind == ValueKind::kState)
        return depends("state " + value_label(val) + " changes shape");
      // Values at a delegate's boundary were marked before partitioning (the partitioner
      // only delegates dynamic work the CUDA kernels resize) and keep their marks across it.
      if ((!val.spec.device.is_cpu() || inside_delegate(val)) &&
          val.spec.dynamism != ShapeDynamism::kDynamicBound) {
        return internal_error(value_label(val) +
                              " has dynamic dims at a delegate's boundary but is not marked "
                              "dynamic-bound");
      }
      for (Graph* g : all_)
        g->value(ValueId(v)).spec.dynamism = ShapeDynamism::kDynamicBound;
    }
    // Each delegate's subgraph, compared and marked the same way (its dynamic-bound tensors
    // are resized by the delegate's kernels).
    for (NodeId id : g_.order()) {
      if (g_.node(id).delegate == nullptr) continue;
      std::vector<Graph*> subs;
      for (Graph* g : all_)
        subs.push_back(g->node(id).delegate->graph.get());
      ETC_RETURN_IF_ERROR(Comparison(subs, symbols_).run());
    }
    return Status();
  }

 private:
  std::string value_label(const Value& v) const {
    return v.name.empty() ? "%" + std::to_string(v.id.v) : "'" + v.name + "'";
  }

  Status depends(const std::string& what, const std::string& node = {}) const {
    return Status(ErrorCode::kUnsupported,
                  what + " with the dynamic dims (" + symbols_ +
                      "); etc can resize tensors at run time but not this: fix the sizes with "
                      "--input-shape",
                  Location{.node = node});
  }

  Status same_structure(const Graph& o) const {
    auto same_order = [&] {
      std::span<const NodeId> a = g_.order(), b = o.order();
      return std::equal(a.begin(), a.end(), b.begin(), b.end());
    };
    if (o.value_slots() != g_.value_slots() || o.node_slots() != g_.node_slots() || !same_order() ||
        !std::equal(g_.outputs().begin(), g_.outputs().end(), o.outputs().begin(),
                    o.outputs().end()) ||
        g_.states().size() != o.states().size())
      return depends("the compiled program's structure changes");
    for (size_t i = 0; i < g_.states().size(); ++i) {
      if (g_.states()[i].value != o.states()[i].value ||
          g_.states()[i].update != o.states()[i].update)
        return depends("the program's state changes");
    }
    for (NodeId id : g_.order()) {
      const Node& a = g_.node(id);
      const Node& b = o.node(id);
      if (a.op != b.op || a.args.size() != b.args.size() || a.outputs != b.outputs ||
          (a.delegate == nullptr) != (b.delegate == nullptr))
        return depends("node '" + a.name + "' changes", a.name);
    }
    return Status();
  }

  Status compare_args(NodeId id) {
    const Node& n = g_.node(id);
    for (const Graph* o : others_) {
      const Node& m = o->node(id);
      for (uint32_t i = 0; i < n.args.size(); ++i) {
        const ArgValue& a = n.args[i];
        const ArgValue& b = m.args[i];
        const std::string arg = op_info(n.op).schema.args[i].name;
        if (a.index() != b.index())
          return depends("argument '" + arg + "' of node '" + n.name + "' changes kind", n.name);
        if (const auto* x = std::get_if<int64_t>(&a)) {
          if (*x != std::get<int64_t>(b)) note(Moving{id, i, -1});
        } else if (const auto* xs = std::get_if<std::vector<int64_t>>(&a)) {
          const auto& ys = std::get<std::vector<int64_t>>(b);
          if (xs->size() != ys.size()) {
            return depends("argument '" + arg + "' of node '" + n.name + "' changes length",
                           n.name);
          }
          for (size_t e = 0; e < xs->size(); ++e) {
            if ((*xs)[e] != ys[e]) note(Moving{id, i, static_cast<int32_t>(e)});
          }
        } else if (a != b) {
          return depends("argument '" + arg + "' of node '" + n.name + "' changes", n.name);
        }
      }
    }
    return Status();
  }

  void note(Moving m) {
    for (const Moving& x : moving_) {
      if (x.node == m.node && x.arg == m.arg && x.element == m.element) return;
    }
    moving_.push_back(m);
  }

  // Input `self`'s size at dim `d` in every build equals this argument's value there.
  bool is_input_dim(const Moving& m, ValueId self, int64_t d) const {
    auto value_in = [&](const Graph& g) {
      const ArgValue& a = g.node(m.node).args[m.arg];
      return m.element < 0 ? std::get<int64_t>(a)
                           : std::get<std::vector<int64_t>>(a)[static_cast<size_t>(m.element)];
    };
    auto dim_in = [&](const Graph& g) -> std::optional<int64_t> {
      const TensorSpec& s = g.value(self).spec;
      if (d < 0 || d >= static_cast<int64_t>(s.rank())) return std::nullopt;
      return s.sizes[static_cast<size_t>(d)];
    };
    if (dim_in(g_) != value_in(g_)) return false;
    return std::all_of(others_.begin(), others_.end(),
                       [&](const Graph* o) { return dim_in(*o) == value_in(*o); });
  }

  Status rewrite(const Moving& m) {
    Node& n = g_.node(m.node);
    const std::string arg = op_info(n.op).schema.args[m.arg].name;
    auto fail = [&] {
      return depends(
          "argument '" + arg + "' of node '" + n.name + "' (" + op_info(n.op).name + ") changes",
          n.name);
    };
    ArgValue value = n.args[m.arg];
    const ValueId self = n.args.empty()                     ? ValueId()
                         : std::get_if<ValueId>(&n.args[0]) ? std::get<ValueId>(n.args[0])
                                                            : ValueId();
    if ((n.op == OpKind::View && arg == "size") || (n.op == OpKind::Reshape && arg == "shape")) {
      // One entry may be inferred at run time (-1): the list may hold no other.
      auto& list = std::get<std::vector<int64_t>>(value);
      for (size_t e = 0; e < list.size(); ++e) {
        if (static_cast<int32_t>(e) != m.element && list[e] == -1) return fail();
      }
      list[static_cast<size_t>(m.element)] = -1;
    } else if (n.op == OpKind::Expand && arg == "size" && self.valid()) {
      auto& list = std::get<std::vector<int64_t>>(value);
      const int64_t lead =
          static_cast<int64_t>(list.size()) - static_cast<int64_t>(g_.value(self).spec.rank());
      if (!is_input_dim(m, self, m.element - lead)) return fail();
      list[static_cast<size_t>(m.element)] = -1;  // expand keeps the input's dim
    } else if (n.op == OpKind::SliceTensor && arg == "end" && self.valid()) {
      const int64_t dim = std::get<int64_t>(n.args[1]);
      const int64_t rank = static_cast<int64_t>(g_.value(self).spec.rank());
      if (!is_input_dim(m, self, dim < 0 ? dim + rank : dim)) return fail();
      value = std::numeric_limits<int64_t>::max();  // to the end of the dim
    } else {
      return fail();
    }
    // Every build gets the same argument, so the graphs stay comparable.
    for (Graph* g : all_)
      g->set_arg(m.node, m.arg, value);
    return Status();
  }

  bool inside_delegate(const Value& v) const {
    for (const Use& u : v.uses) {
      if (g_.node(u.node).op == OpKind::DelegateCall) return true;
    }
    return v.kind == ValueKind::kNodeOutput && g_.node(v.producer).op == OpKind::DelegateCall;
  }

  Graph& g_;
  std::span<Graph* const> all_;
  std::span<Graph* const> others_;
  std::string symbols_;
  std::vector<Moving> moving_;
};

}  // namespace

Status mark_dynamic_shapes(std::span<Graph* const> graphs, const std::string& symbols) {
  if (graphs.size() < 2) return Status();
  return Comparison(graphs, symbols).run();
}

}  // namespace etc
