#include "ir/rules.h"

#include <fmt/format.h>

#include <algorithm>

namespace gradc {

namespace {
RuleTable& table() {
  static RuleTable* t = [] {
    auto* rt = new RuleTable();
    register_leaf_ops(*rt);
    register_elementwise_ops(*rt);
    register_reduce_ops(*rt);
    register_shape_ops(*rt);
    register_collective_ops(*rt);
    register_grad_op(*rt);
    return rt;
  }();
  return *t;
}
}  // namespace

const OpRule& rule(Op op) { return table().rules[int(op)]; }

ScopedRuleOverride::ScopedRuleOverride(Op op, const OpRule& r) : op_(op), saved_(table()[op]) { table()[op] = r; }
ScopedRuleOverride::~ScopedRuleOverride() { table()[op_] = saved_; }

Type infer_type(const Graph& g, const Node& n) {
  int arity = op_arity(n.op);
  if (arity >= 0 && int(n.args.size()) != arity)
    user_error(n.loc, "{}: expects {} operand{}, got {}", op_name(n.op), arity,
               arity == 1 ? "" : "s", n.args.size());
  InferFn f = rule(n.op).infer;
  GRADC_ASSERT(f, "no shape rule for {}", op_name(n.op));
  Type t = f(g, n);
  for (int64_t d : t.shape)
    if (d < 0) user_error(n.loc, "{}: negative dimension in {}", op_name(n.op), type_str(t));
  if (too_large(t.shape)) {
    // Not t.size(): the product of a too large shape's dimensions overflows.
    const bool empty = std::count(t.shape.begin(), t.shape.end(), 0) > 0;
    user_error(n.loc, "{}: {} is too large (its {} multiply to more than {})", op_name(n.op), type_str(t),
               empty ? "nonzero dimensions" : "dimensions", empty ? "2^62" : "2^40");
  }
  return t;
}

std::vector<std::string> missing_rules() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i) {
    Op op = Op(i);
    const OpRule& r = rule(op);
    if (!r.infer) out.push_back(fmt::format("{}: no shape rule", op_name(op)));
    if (r.lower == KernelForm::None) out.push_back(fmt::format("{}: no lowering (kernel form)", op_name(op)));
    if (op == Op::Grad) continue;  // replaced by the autodiff pass before any backend runs
    if (is_collective(op) && !r.collective)
      out.push_back(fmt::format("{}: no collective kernel", op_name(op)));
    if (!is_collective(op) && !r.local)
      out.push_back(fmt::format("{}: no interpreter kernel", op_name(op)));
    if (is_differentiable(op) && !r.vjp) out.push_back(fmt::format("{}: no derivative rule", op_name(op)));
  }
  return out;
}

Rep infer_rep(const Graph& g, const Node& n) {
  if (g.world == 1) return Rep::Replicated;  // one rank: every value is the same on all ranks
  if (RepFn f = rule(n.op).rep) return f(g, n);
  for (ValueId a : n.args)
    if (g[a].rep != Rep::Replicated) return Rep::Varying;
  return Rep::Replicated;
}

const Type& arg_type(const Graph& g, const Node& n, size_t i) {
  GRADC_ASSERT(i < n.args.size(), "{} has no operand {}", op_name(n.op), i);
  return g.type(n.args[i]);
}

int norm_axis(Loc loc, std::string_view what, int64_t axis, const Type& t) {
  int64_t r = t.rank();
  if (axis < -r || axis >= r)
    user_error(loc, "{}: axis {} is out of range for {}", what, axis, type_str(t));
  return int(axis < 0 ? axis + r : axis);
}

bool is_reduction_name(const std::string& s) {
  return s == "sum" || s == "avg" || s == "prod" || s == "max" || s == "min";
}

}  // namespace gradc
