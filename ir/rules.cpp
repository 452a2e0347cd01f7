#include "ir/rules.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/mesh.h"

namespace gradc {

OpTable<ShapeRule>& shape_rules() {
  static OpTable<ShapeRule> t;
  return t;
}

Type infer_type(const Graph& g, const Node& n) {
  int arity = op_arity(n.op);
  if (arity >= 0 && int(n.args.size()) != arity)
    user_error(n.loc, "{}: expects {} operand{}, got {}", op_name(n.op), arity, arity == 1 ? "" : "s", n.args.size());
  InferFn f = shape_rules()[n.op].infer;
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

Rep infer_rep(const Graph& g, const Node& n) {
  // Along an axis of size 1 (and on one rank) every value is the same on all ranks.
  if (g.world == 1) return Rep::Replicated;
  uint8_t axes = 0;  // by default, a value varies along every axis an operand varies along
  if (RepFn f = shape_rules()[n.op].rep)
    axes = f(g, n).axes();
  else
    for (ValueId a : n.args) axes |= g[a].rep.axes();
  return Rep::along(axes & rep_axes(g));
}

const Type& arg_type(const Graph& g, const Node& n, size_t i) {
  GRADC_ASSERT(i < n.args.size(), "{} has no operand {}", op_name(n.op), i);
  return g.type(n.args[i]);
}

int norm_axis(Loc loc, std::string_view what, int64_t axis, const Type& t) {
  int64_t r = t.rank();
  if (axis < -r || axis >= r) user_error(loc, "{}: axis {} is out of range for {}", what, axis, type_str(t));
  return int(axis < 0 ? axis + r : axis);
}

}  // namespace gradc
