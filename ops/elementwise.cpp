// Elementwise ops: NumPy broadcasting of operands of one dtype.
#include <cmath>

#include "ir/elementwise.h"
#include "ops/ops.h"
#include "passes/ad.h"

namespace gradc {
namespace {

using namespace build;  // the derivative rules are written as expressions (ir/builder.h)

// ---- shape rules ---------------------------------------------------------

Type infer_unary(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  if (float_only(n.op) && !is_float(x.dtype))
    user_error(n.loc, "{}: expects a float operand, got {}", op_name(n.op), type_str(x));
  return x;
}

Type infer_cast(const Graph& g, const Node& n) {
  DType to;
  if (!parse_dtype(n.attr_sym("to"), to)) user_error(n.loc, "cast: unknown dtype '{}'", n.attr_sym("to"));
  return Type{to, arg_type(g, n, 0).shape};
}

Type infer_broadcast(const Graph& g, const Node& n, size_t first) {
  Type out = arg_type(g, n, first);
  for (size_t i = first + 1; i < n.args.size(); ++i) {
    const Type& t = arg_type(g, n, i);
    if (t.dtype != out.dtype)
      user_error(n.loc, "{}: operands have different dtypes {} and {}", op_name(n.op), dtype_name(out.dtype),
                 dtype_name(t.dtype));
    bool ok;
    Shape s = broadcast_shapes(out.shape, t.shape, &ok);
    if (!ok)
      user_error(n.loc, "{}: shapes {} and {} do not broadcast", op_name(n.op), shape_str(out.shape),
                 shape_str(t.shape));
    out.shape = s;
  }
  return out;
}

Type infer_binary(const Graph& g, const Node& n) {
  Type t = infer_broadcast(g, n, 0);
  if ((n.op == Op::FloorDiv || n.op == Op::Mod) && t.dtype != DType::I32)
    user_error(n.loc, "{}: expects i32 operands, got {}", op_name(n.op), dtype_name(t.dtype));
  if (float_only(n.op) && !is_float(t.dtype))
    user_error(n.loc, "{}: expects float operands, got {}", op_name(n.op), dtype_name(t.dtype));
  if (is_comparison(n.op)) t.dtype = float_of(t.dtype);
  return t;
}

Type infer_where(const Graph& g, const Node& n) {
  Type t = infer_broadcast(g, n, 1);
  bool ok;
  t.shape = broadcast_shapes(arg_type(g, n, 0).shape, t.shape, &ok);
  if (!ok)
    user_error(n.loc, "where: condition shape {} does not broadcast with {}", shape_str(arg_type(g, n, 0).shape),
               shape_str(t.shape));
  return t;
}

// ---- interpreter kernels -------------------------------------------------

Tensor eval_unary(const Node& n, const Args& a, const EvalCtx&) {
  Tensor y = Tensor::empty(n.type);
  dispatch(n.type->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a[0]->data<T>();
    T* out = y.data<T>();
    const int64_t size = y.size();
    with_unary<T>(n.op, [&](auto f) {
      for (int64_t i = 0; i < size; ++i) out[i] = f(x[i]);
    });
  });
  return y;
}

Tensor eval_cast(const Node& n, const Args& a, const EvalCtx&) { return a[0]->cast(n.type->dtype); }

template <class T, class R, class F>
void binary_loop(const Tensor& a, const Tensor& b, Tensor& y, F f) {
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* out = y.data<R>();
  const int64_t size = y.size();
  if (a.shape() == y.shape() && b.shape() == y.shape()) {
    for (int64_t i = 0; i < size; ++i) out[i] = R(f(pa[i], pb[i]));
  } else if (a.shape() == y.shape() && b.size() == 1) {
    const T s = pb[0];
    for (int64_t i = 0; i < size; ++i) out[i] = R(f(pa[i], s));
  } else if (b.shape() == y.shape() && a.size() == 1) {
    const T s = pa[0];
    for (int64_t i = 0; i < size; ++i) out[i] = R(f(s, pb[i]));
  } else {
    strided_loop<2>(y.shape(), {broadcast_strides(a.shape(), y.shape()), broadcast_strides(b.shape(), y.shape())},
                    {0, 0}, [&](int64_t i, auto off) { out[i] = R(f(pa[off[0]], pb[off[1]])); });
  }
}

Tensor eval_binary(const Node& n, const Args& a, const EvalCtx&) {
  Tensor y = Tensor::empty(n.type);
  const Op op = n.op;
  dispatch(a[0]->dtype(), [&](auto ta) {
    using T = decltype(ta);
    dispatch(n.type->dtype, [&](auto tr) {
      using R = decltype(tr);
      with_binary<T>(op, [&](auto f) { binary_loop<T, R>(*a[0], *a[1], y, f); });
    });
  });
  return y;
}

// i32 // and %: a zero divisor is an error at the op, naming the rank and the
// first result element (row-major) it would divide.
Tensor eval_int_division(const Node& n, const Args& a, const EvalCtx& ctx) {
  const int32_t* b = a[1]->data<int32_t>();
  int64_t bad = -1;
  strided_loop<1>(n.type->shape, {broadcast_strides(a[1]->shape(), n.type->shape)}, {0}, [&](int64_t i, auto o) {
    if (bad < 0 && b[o[0]] == 0) bad = i;
  });
  if (bad >= 0)
    throw UserError(n.loc,
                    fmt::format("{}: division by zero on rank {}, at element {} of {}", n.op == Op::Mod ? "%" : "//",
                                ctx.rank, element_str(bad, n.type->shape), type_str(n.type)));
  return eval_binary(n, a, ctx);
}

// Indices checked where they are made: each in 0..n-1, else an error at the op naming
// the index, the rank and the element. cross_entropy's labels (PyTorch: "Target 7 is out
// of bounds") may also be the ignored value (`ignore`); the indices of another op (its
// name `what`: take_along_axis, scatter_add, ...) may not.
Type infer_check_labels(const Graph& g, const Node& n) {
  const Type& t = arg_type(g, n, 0);
  if (t.dtype != DType::I32) user_error(n.loc, "check_labels: labels must be i32, got {}", type_str(t));
  n.attr_int("n");
  if (!n.attrs.has("what")) n.attr_int("ignore");
  return t;
}
Tensor eval_check_labels(const Node& n, const Args& a, const EvalCtx& ctx) {
  const int64_t classes = n.attr_int("n");
  const bool labels = !n.attrs.has("what");
  const int64_t ignore = labels ? n.attr_int("ignore") : -1;
  const int32_t* x = a[0]->data<int32_t>();
  for (int64_t i = 0; i < a[0]->size(); ++i) {
    if ((labels && x[i] == ignore) || (x[i] >= 0 && x[i] < classes)) continue;
    const std::string at = element_str(i, a[0]->shape());
    if (!labels)
      throw UserError(n.loc, fmt::format("{}: index {} is out of range 0..{} on rank {}, at element {} of the indices",
                                         n.attr_sym("what"), x[i], classes - 1, ctx.rank, at));
    throw UserError(n.loc, fmt::format("cross_entropy: label {} is out of range 0..{} on rank {}, at element {} of the "
                                       "labels (ignore_index is {})",
                                       x[i], classes - 1, ctx.rank, at, ignore));
  }
  return *a[0];
}

Tensor eval_where(const Node& n, const Args& a, const EvalCtx&) {
  Tensor y = Tensor::empty(n.type);
  dispatch(a[0]->dtype(), [&](auto tc) {
    using C = decltype(tc);
    dispatch(n.type->dtype, [&](auto tv) {
      using T = decltype(tv);
      const C* c = a[0]->data<C>();
      const T* p = a[1]->data<T>();
      const T* q = a[2]->data<T>();
      T* out = y.data<T>();
      strided_loop<3>(y.shape(),
                      {broadcast_strides(a[0]->shape(), y.shape()), broadcast_strides(a[1]->shape(), y.shape()),
                       broadcast_strides(a[2]->shape(), y.shape())},
                      {0, 0, 0}, [&](int64_t i, auto o) { out[i] = c[o[0]] != C(0) ? p[o[1]] : q[o[2]]; });
    });
  });
  return y;
}

// ---- derivative rules: y = f(x), g = the cotangent of y ---------------------
// Written as expressions (ir/builder.h): ad[v] is the value v, ad(e) adds e's nodes.

// d/dx -x = -1
void vjp_neg(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(-ad[g]); }
// d/dx exp(x) = exp(x) = y
void vjp_exp(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * ad[y]); }
// d/dx log(x) = 1 / x
void vjp_log(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] / ad[ad.arg(0)]); }
// d/dx sqrt(x) = 1 / (2 sqrt(x)) = 0.5 / y
void vjp_sqrt(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * 0.5 / ad[y]); }
// d/dx x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
void vjp_rsqrt(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const Ex Y = ad[y];
  ct[0] = ad(ad[g] * -0.5 * (Y * (Y * Y)));
}
// d/dx |x| = sign(x)   (0 at 0, as in PyTorch)
void vjp_abs(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * sign(ad[ad.arg(0)])); }
// d/dx relu(x) = [not x <= 0]   (0 at 0, 1 at NaN: PyTorch's threshold_backward)
void vjp_relu(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  ct[0] = ad(where(ad[ad.arg(0)] <= 0.0, 0.0, ad[g]));
}
// d/dx sigmoid(x) = y (1 - y)
void vjp_sigmoid(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const Ex Y = ad[y];
  ct[0] = ad(ad[g] * (Y * (1.0 - Y)));
}
// d/dx tanh(x) = 1 - y^2
void vjp_tanh(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const Ex Y = ad[y];
  ct[0] = ad(ad[g] * (1.0 - Y * Y));
}
// d/dx sin(x) = cos(x)
void vjp_sin(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * cos(ad[ad.arg(0)])); }
// d/dx cos(x) = -sin(x)
void vjp_cos(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(-(ad[g] * sin(ad[ad.arg(0)]))); }
// d/dx x^2 = 2 x
void vjp_square(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * ad[ad.arg(0)] * 2.0); }
// d/dx 1/x = -1/x^2 = -y^2
void vjp_reciprocal(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const Ex Y = ad[y];
  ct[0] = ad(-(ad[g] * (Y * Y)));
}
// d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
void vjp_erf(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const Ex X = ad[ad.arg(0)];
  ct[0] = ad(ad[g] * exp(-(X * X)) * 1.1283791670955126);
}
// d/dx log1p(x) = 1 / (1 + x), as PyTorch's
void vjp_log1p(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] / (ad[ad.arg(0)] + 1.0)); }
// d/dx expm1(x) = exp(x) = y + 1, as PyTorch's
void vjp_expm1(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad(ad[g] * (ad[y] + 1.0)); }
// d/dx cast(x) = 1, in x's dtype
void vjp_cast(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad.cast(g, ad.dtype(ad.arg(0))); }

// Binary ops broadcast their operands, so each cotangent is summed back to its operand's shape.
// d/da (a + b) = 1, d/db (a + b) = 1
void vjp_add(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  for (size_t i = 0; i < 2; ++i)
    if (ad.needs(i)) ct[i] = ad.sum_to(g, ad.shape(ad.arg(i)));
}
// d/da (a - b) = 1, d/db (a - b) = -1
void vjp_sub(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  if (ad.needs(0)) ct[0] = ad.sum_to(g, ad.shape(ad.arg(0)));
  if (ad.needs(1)) ct[1] = ad.sum_to(ad(-ad[g]), ad.shape(ad.arg(1)));
}
// d/da (a b) = b, d/db (a b) = a
void vjp_mul(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const ValueId a = ad.arg(0), b = ad.arg(1);
  if (ad.needs(0)) ct[0] = ad.sum_to(ad(ad[g] * ad[b]), ad.shape(a));
  if (ad.needs(1)) ct[1] = ad.sum_to(ad(ad[g] * ad[a]), ad.shape(b));
}
// d/da (a / b) = 1 / b, d/db (a / b) = -a / b^2 = -(a / b) / b. It reads a and b,
// not y, as PyTorch's does (derivatives.yaml): a gradient differentiated again with
// respect to y has no path through this rule (docs/semantics.md). CSE merges the
// a / b here with y afterwards.
void vjp_div(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const ValueId a = ad.arg(0), b = ad.arg(1);
  const Ex gb = ad[g] / ad[b];
  if (ad.needs(0)) ct[0] = ad.sum_to(ad(gb), ad.shape(a));
  if (ad.needs(1)) ct[1] = ad.sum_to(ad(-(gb * (ad[a] / ad[b]))), ad.shape(b));
}
// d/da a^b = b a^(b-1), taken as 0 where b = 0 (0^0 is 1: no 0 * inf);
// d/db a^b = a^b log(a), taken as 0 where a = 0 and b >= 0 (as PyTorch does both; at
// a = 0 and b < 0 it is inf * -inf = -inf); log reads 1 where it is taken as 0, so that
// a derivative of this one has no 0 * inf either
void vjp_pow(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const ValueId a = ad.arg(0), b = ad.arg(1);
  const Ex A = ad[a], B = ad[b], G = ad[g];
  if (ad.needs(0)) ct[0] = ad.sum_to(ad(G * where(eq(B, 0.0), 0.0, B * pow(A, B - 1.0))), ad.shape(a));
  if (ad.needs(1)) {
    const Ex zero = minimum(eq(A, 0.0), B >= 0.0);
    ct[1] = ad.sum_to(ad(G * where(zero, 0.0, ad[y] * log(where(zero, 1.0, A)))), ad.shape(b));
  }
}
// d/da max(a, b): 0 where a < b, half at a tie (likewise min with >), all of it
// elsewhere, so that where a or b is NaN both get all of it, as PyTorch does. Selected,
// not multiplied: the operand that is not the maximum gets 0 whatever the cotangent (an
// infinite one included), as PyTorch's masked_fill gives it.
void vjp_extremum(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const ValueId a = ad.arg(0), b = ad.arg(1);
  const Ex A = ad[a], B = ad[b], G = ad[g];
  const bool max = ad.y().op == Op::Maximum;
  const Ex shared = where(eq(A, B), G * 0.5, G);
  if (ad.needs(0)) ct[0] = ad.sum_to(ad(where(max ? A < B : A > B, 0.0, shared)), ad.shape(a));
  if (ad.needs(1)) ct[1] = ad.sum_to(ad(where(max ? B < A : B > A, 0.0, shared)), ad.shape(b));
}
// d/da where(c, a, b) = [c], d/db where(c, a, b) = [not c]; nothing flows to c
void vjp_where(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  const Ex C = ad[ad.arg(0)], G = ad[g];
  if (ad.needs(1)) ct[1] = ad.sum_to(ad(where(C, G, 0.0)), ad.shape(ad.arg(1)));
  if (ad.needs(2)) ct[2] = ad.sum_to(ad(where(C, 0.0, G)), ad.shape(ad.arg(2)));
}

}  // namespace

void register_elementwise_ops() {
  // Each one's value per element is gradc::op::NAME in ir/scalar.h, for the
  // interpreter's kernel and the generated code alike (KernelForm::Scalar).
  // `cheap`: a vector instruction or two, computed again where read (cheap_scalars).
  enum Cost { Costly, Cheap };
  auto unary = [](Op op, VjpFn vjp, Cost c = Costly) {
    def(op).infer(infer_unary).eval(eval_unary).vjp(vjp).form(KernelForm::Scalar).cheap(c == Cheap);
  };
  unary(Op::Neg, vjp_neg, Cheap);
  unary(Op::Exp, vjp_exp);
  unary(Op::Log, vjp_log);
  unary(Op::Sqrt, vjp_sqrt);
  unary(Op::Rsqrt, vjp_rsqrt);
  unary(Op::Abs, vjp_abs, Cheap);
  unary(Op::Relu, vjp_relu, Cheap);
  unary(Op::Sigmoid, vjp_sigmoid);
  unary(Op::Tanh, vjp_tanh);
  unary(Op::Sin, vjp_sin);
  unary(Op::Cos, vjp_cos);
  unary(Op::Square, vjp_square, Cheap);
  unary(Op::Reciprocal, vjp_reciprocal);
  unary(Op::Erf, vjp_erf);
  unary(Op::Log1p, vjp_log1p);
  unary(Op::Expm1, vjp_expm1);
  unary(Op::Sign, nullptr, Cheap);   // not differentiable: no derivative rule
  unary(Op::StopGradient, nullptr);  // the autodiff pass stops at it
  def(Op::Cast).infer(infer_cast).eval(eval_cast).vjp(vjp_cast).form(KernelForm::Scalar);
  auto binary = [](Op op, VjpFn vjp, Cost c = Costly) {
    def(op).infer(infer_binary).eval(eval_binary).vjp(vjp).form(KernelForm::Scalar).cheap(c == Cheap);
  };
  binary(Op::Add, vjp_add, Cheap);
  binary(Op::Sub, vjp_sub, Cheap);
  binary(Op::Mul, vjp_mul, Cheap);
  binary(Op::Div, vjp_div);
  binary(Op::Pow, vjp_pow);
  binary(Op::Maximum, vjp_extremum, Cheap);
  binary(Op::Minimum, vjp_extremum, Cheap);
  // the comparisons: every COMPARE row of ir/ops.def, with zero derivative
#define OP(E, name, arity, flags)
#define COMPARE(E, f, flags) binary(Op::E, nullptr, Cheap);
#include "ir/ops.def"
#undef COMPARE
#undef OP
  for (Op op : {Op::FloorDiv, Op::Mod}) def(op).infer(infer_binary).eval(eval_int_division).form(KernelForm::Scalar);
  def(Op::Where).infer(infer_where).eval(eval_where).vjp(vjp_where).form(KernelForm::Scalar).cheap();
  def(Op::CheckLabels).infer(infer_check_labels).eval(eval_check_labels).form(KernelForm::Scalar);
}

}  // namespace gradc
