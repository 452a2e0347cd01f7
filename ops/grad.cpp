// grad(loss, w): the gradient of the objective (mode sum|mean|global) with
// respect to w. Only its shape rule lives here; passes/autodiff.cpp replaces
// every grad node by a backward graph made of ordinary ops.
#include "ops/ops.h"

namespace gradc {
namespace {

Type infer_grad(const Graph& g, const Node& n) {
  const Type& loss = arg_type(g, n, 0);
  const Type& w = arg_type(g, n, 1);
  if (!is_float(loss.dtype)) user_error(n.loc, "grad: the loss must be a float value, got {}", type_str(loss));
  if (!is_float(w.dtype)) user_error(n.loc, "grad: cannot differentiate with respect to an {} value", type_str(w));
  grad_mode_of(n);  // an unknown mode is an error here
  return w;
}

// The gradient with respect to a replicated value is the total over ranks, the same
// on every rank (docs/language.md section 6); with respect to a varying one, each rank's own.
// With own=AXES (the torch target's pullback: a mask of the data-parallel axes) w is
// each rank's own variable along those axes either way.
Rep rep_grad(const Graph& g, const Node& n) {
  const Rep w = g[n.args[1]].rep;
  if (!w.known()) return Rep::Varying;
  const Attr* own = n.attrs.find("own");
  return own ? Rep::along(uint8_t(w.axes() | own->i)) : w;
}

}  // namespace

void register_grad_op() {
  def(Op::Grad).infer(infer_grad).rep(rep_grad).form(KernelForm::Removed);  // the autodiff pass replaces it
}

}  // namespace gradc
