// Ops that run down one axis in order, a loop per column of [outer, n, inner]:
// cumsum and scatter_add. Every backend visits a column's elements in the same
// order (the interpreter, the CPU's loops, a GPU thread per column), so each gives
// the interpreter's values bit for bit. Lowered as Loop kernels: a runtime call on
// buffers (codegen/runtime/), O(n) work where the masked sums they replace were
// O(n^2).
#include <algorithm>

#include "codegen/cpp.h"
#include "frontend/composites.h"
#include "ir/scalar.h"
#include "ops/ops.h"

namespace gradc {
namespace {

// ---- cumsum(x, axis, reverse) ------------------------------------------------
// y[.., j, ..] = sum over k <= j (k >= j: reverse) of x[.., k, ..], summed in double
// (int64 for i32) down the column and rounded once per element, as reductions.
Type infer_cumsum(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  if (x.rank() == 0) user_error(n.loc, "cumsum: needs an axis, got a scalar");
  norm_axis(n, n.attr_int("axis"), x);
  return x;
}

Tensor eval_cumsum(const Node& n, const Args& a, const EvalCtx&) {
  const Tensor& x = *a[0];
  const AxisSplit c(x.shape(), norm_axis(n, n.attr_int("axis"), x.type));
  const bool reverse = n.attr_int("reverse") != 0;
  Tensor y = Tensor::empty(n.type);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
    const T* px = x.data<T>();
    T* py = y.data<T>();
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t i = 0; i < c.inner; ++i) {
        Acc acc = 0;
        for (int64_t s = 0; s < c.n; ++s) {
          const int64_t e = (o * c.n + (reverse ? c.n - 1 - s : s)) * c.inner + i;
          acc += Acc(px[e]);
          py[e] = T(acc);
        }
      }
  });
  return y;
}

// The adjoint of a running sum is the running sum the other way.
void vjp_cumsum(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  Attrs a;
  a.set("axis", Attr::of_int(ad.y().attr_int("axis")));
  a.set("reverse", Attr::of_int(ad.y().attr_int("reverse") ? 0 : 1));
  ct[0] = ad.emit(Op::Cumsum, {g}, a);
}

// ---- scatter_add(x, indices, src, axis) ---------------------------------------
// x, then src[.., j, ..] added at [.., indices[.., j, ..], ..] for j = 0, 1, ..: the
// additions in the result's dtype, in order of j (PyTorch's CPU order). indices has
// src's shape, or is one index per slice of src along the axis, i32[m] (index_add's).
Type infer_scatter_add(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  const Type& ix = arg_type(g, n, 1);
  const Type& src = arg_type(g, n, 2);
  if (x.rank() == 0) user_error(n.loc, "scatter_add: cannot add into a scalar");
  const int axis = norm_axis(n, n.attr_int("axis"), x);
  bool ok = src.rank() == x.rank() && src.dtype == x.dtype;
  for (int d = 0; ok && d < x.rank(); ++d) ok = d == axis || src.shape[size_t(d)] == x.shape[size_t(d)];
  if (!ok)
    user_error(n.loc, "scatter_add: src {} must be {} with x's shape {} except along axis {}", type_str(src),
               dtype_name(x.dtype), type_str(x), axis);
  if (ix.dtype != DType::I32 || (ix.shape != src.shape && ix.shape != Shape{src.shape[size_t(axis)]}))
    user_error(n.loc, "scatter_add: indices must be i32{} (src's shape) or i32[{}] (one per slice), got {}",
               shape_str(src.shape), src.shape[size_t(axis)], type_str(ix));
  return x;
}

Tensor eval_scatter_add(const Node& n, const Args& a, const EvalCtx& ctx) {
  const Tensor &x = *a[0], &ix = *a[1], &src = *a[2];
  const int axis = norm_axis(n, n.attr_int("axis"), x.type);
  const AxisSplit c(x.shape(), axis);
  const int64_t m = src.shape()[size_t(axis)];
  const int32_t* k = ix.data<int32_t>();
  const bool slices = one_index_per_slice(ix.shape(), src.shape());
  for (int64_t e = 0; e < ix.size(); ++e)
    if (k[e] < 0 || k[e] >= c.n)
      throw UserError(n.loc, fmt::format("scatter_add: index {} is out of range 0..{} on rank {}, at element {} of "
                                         "the indices",
                                         k[e], c.n - 1, ctx.rank, element_str(e, ix.shape())));
  Tensor y = Tensor::empty(n.type);
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* ps = src.data<T>();
    T* py = y.data<T>();
    std::copy_n(x.data<T>(), x.size(), py);
    for (int64_t o = 0; o < c.outer; ++o)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t i = 0; i < c.inner; ++i) {
          const int64_t e = (o * m + j) * c.inner + i;
          T& to = py[(o * c.n + k[slices ? j : e]) * c.inner + i];
          to = op::add(to, ps[e]);  // i32 wraps around
        }
  });
  return y;
}

// d/dx is the identity; d/dsrc gathers the cotangent where each element went (its
// slices, for one index per slice: take).
void vjp_scatter_add(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const int axis = norm_axis(ad.y(), ad.y().attr_int("axis"), ad.type(ad.arg(0)));
  if (ad.needs(0)) ct[0] = g;
  if (!ad.needs(2)) return;
  if (one_index_per_slice(ad.shape(ad.arg(1)), ad.shape(ad.arg(2)))) {
    Attrs a;
    a.set("axis", Attr::of_int(axis));
    ct[2] = ad.emit(Op::Take, {g, ad.arg(1)}, a);
  } else {
    ct[2] = composite::take_along_axis(ad, g, ad.arg(1), axis);
  }
}

}  // namespace

void register_axis_ops() {
  using A = CallArg;
  def(Op::Cumsum).infer(infer_cumsum).eval(eval_cumsum).vjp(vjp_cumsum).form(KernelForm::Loop);
  runtime_calls()[Op::Cumsum] = {"cumsum",
                                 {{A::Outer, "axis"}, {A::Len, "axis"}, {A::Inner, "axis"}, {A::Int, "reverse"}}};
  def(Op::ScatterAdd).infer(infer_scatter_add).eval(eval_scatter_add).vjp(vjp_scatter_add).form(KernelForm::Loop);
  runtime_calls()[Op::ScatterAdd] = {
      "scatter_add", {{A::Outer, "axis"}, {A::Len, "axis"}, {A::SrcLen, "axis"}, {A::Inner, "axis"}, {A::PerSlice}}};
}

}  // namespace gradc
