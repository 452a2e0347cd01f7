// grad(loss, w): the gradient of the objective (mode sum|mean|global) with
// respect to w. Only its shape rule lives here; passes/autodiff.cpp replaces
// every grad node by a backward graph made of ordinary ops.
// given_derivative(value, x1, d1, ...): a composite's value with its derivative given,
// which the autodiff pass reads and then replaces by the value.
#include "ops/ops.h"

namespace gradc {
namespace {

using namespace build;  // the derivative rule is written as an expression (ir/builder.h)

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

// The frontend's composites make it: a wrong one is gradc's bug, not the program's.
Type infer_given_derivative(const Graph& g, const Node& n) {
  const Type& y = arg_type(g, n, 0);
  GRADC_ASSERT(n.args.size() % 2 == 1, "given_derivative: a value and pairs of a variable and its factor");
  for (size_t i = 1; i < n.args.size(); i += 2) {
    bool ok;
    const Type& x = arg_type(g, n, i);
    GRADC_ASSERT(
        arg_type(g, n, i + 1) == y && x.dtype == y.dtype && broadcast_shapes(x.shape, y.shape, &ok) == y.shape && ok,
        "given_derivative: {} and factor {} for a value {}", type_str(x), type_str(arg_type(g, n, i + 1)), type_str(y));
  }
  return y;
}

// d value / d x_i = d_i: the cotangent g d_i, summed to x_i's shape where x_i broadcast
void vjp_given_derivative(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  for (size_t i = 1; i < ad.y().args.size(); i += 2)
    if (ad.needs(i)) ct[i] = ad.sum_to(ad(ad[g] * ad[ad.arg(i + 1)]), ad.shape(ad.arg(i)));
}

}  // namespace

void register_grad_op() {
  def(Op::Grad).infer(infer_grad).rep(rep_grad).form(KernelForm::Removed);  // the autodiff pass replaces it
  def(Op::GivenDerivative).infer(infer_given_derivative).vjp(vjp_given_derivative).form(KernelForm::Removed);
}

}  // namespace gradc
