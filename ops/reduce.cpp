// Reductions over a set of axes, which are dropped from the result
// (the language's keepdims=true adds a reshape after).
#include <algorithm>

#include "ir/scalar.h"
#include "ops/ops.h"
#include "passes/ad.h"

namespace gradc {
namespace {

// The reduced axes, normalised, sorted and unique.
std::vector<int> reduced_axes(const Node& n, const Type& x) {
  std::vector<int> axes;
  for (int64_t a : n.attr_ints("axes")) {
    int ax = norm_axis(n, a, x);
    if (std::find(axes.begin(), axes.end(), ax) != axes.end())
      user_error(n.loc, "{}: axis {} is repeated", op_name(n.op), a);
    axes.push_back(ax);
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

Type infer_reduce(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  std::vector<int> axes = reduced_axes(n, x);
  Type out{x.dtype, {}};
  for (int d = 0; d < x.rank(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), d)) out.shape.push_back(x.shape[size_t(d)]);
  return out;
}

Tensor eval_reduce(const Node& n, const Args& a, const EvalCtx&) {
  const Tensor& x = *a[0];
  Shape keep = x.shape();
  for (int64_t ax : n.attr_ints("axes")) keep[size_t(ax < 0 ? ax + x.type.rank() : ax)] = 1;
  Tensor y = Tensor::empty(n.type);
  const Op op = n.op;
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // Accumulate sums in double (int64 for i32), so f32 sums lose little.
    using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
    std::vector<Acc> acc(size_t(y.size()));
    std::fill(acc.begin(), acc.end(),
              op == Op::ReduceSum   ? Acc(0)
              : op == Op::ReduceMax ? max_start<Acc>()
                                    : min_start<Acc>());
    const T* px = x.data<T>();
    Strides st = broadcast_strides(keep, x.shape());
    if (op == Op::ReduceSum)
      strided_loop<1>(x.shape(), {st}, {0}, [&](int64_t i, auto o) { acc[size_t(o[0])] += px[i]; });
    else  // max and min: a NaN element makes the result NaN (as NumPy and PyTorch); equal values: the first stays
      strided_loop<1>(x.shape(), {st}, {0}, [&](int64_t i, auto o) {
        Acc& r = acc[size_t(o[0])];
        r = op == Op::ReduceMax ? max_step(r, Acc(px[i])) : min_step(r, Acc(px[i]));
      });
    T* out = y.data<T>();
    for (size_t i = 0; i < acc.size(); ++i) out[i] = T(acc[i]);
  });
  return y;
}

// The cotangent g of the reduced value, reshaped to keep the reduced axes (size 1)
// and broadcast back over x.
ValueId spread(Ad& ad, ValueId g, ValueId x) {
  Shape keep = ad.shape(x);
  for (int64_t a : ad.y().attr_ints("axes")) keep[size_t(a)] = 1;
  return ad.broadcast(ad.reshape(g, keep), ad.shape(x));
}

// d/dx_i sum_j x_j = 1
void vjp_reduce_sum(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = spread(ad, g, ad.arg(0)); }

// d/dx_i max_j x_j = [x_i = y] / #{j : x_j = y}: ties split the derivative evenly
// (likewise min), as PyTorch's amax/amin do.
void vjp_reduce_extremum(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  ValueId x = ad.arg(0);
  ValueId hit = ad.cmp(Op::Eq, x, spread(ad, y, x));
  ValueId count = spread(ad, ad.reduce_sum(hit, ad.y().attr_ints("axes")), x);
  ct[0] = ad.div(ad.mul(spread(ad, g, x), hit), count);
}

}  // namespace

void register_reduce_ops() {
  def(Op::ReduceSum).infer(infer_reduce).eval(eval_reduce).vjp(vjp_reduce_sum).form(KernelForm::Reduce);
  def(Op::ReduceMax).infer(infer_reduce).eval(eval_reduce).vjp(vjp_reduce_extremum).form(KernelForm::Reduce);
  def(Op::ReduceMin).infer(infer_reduce).eval(eval_reduce).vjp(vjp_reduce_extremum).form(KernelForm::Reduce);
}

}  // namespace gradc
