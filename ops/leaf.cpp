// Leaves: inputs, constants, rank, iota and the random generators.
#include "ir/scalar.h"
#include "ops/ops.h"

namespace gradc {
namespace {

// input: the type is declared; the optional operand is the default value.
Type infer_input(const Graph& g, const Node& n) {
  if (n.args.size() > 1) user_error(n.loc, "input: takes at most one operand (its default)");
  if (!n.args.empty() && g.type(n.args[0]) != n.type)
    user_error(n.loc, "input: default value is {}, the input is declared {}", type_str(g.type(n.args[0])),
               type_str(n.type));
  return n.type;
}
Tensor eval_input(const Node& n, const Args& a, const EvalCtx&) {
  // The interpreter supplies inputs' data; it only gets here for a default value.
  GRADC_ASSERT(!a.empty(), "input '{}' has no default", n.attr_sym("name"));
  return *a[0];
}

// const: the type is declared; `value` is one number (a splat) or one per element.
Type infer_const(const Graph&, const Node& n) {
  const Attr* v = n.attrs.find("value");
  if (!v) user_error(n.loc, "const: needs a value");
  if (v->kind == Attr::List) {
    if (int64_t(v->list.size()) != n.type->size())
      user_error(n.loc, "const: {} values for {}", v->list.size(), type_str(n.type));
    for (const Attr& x : v->list)
      if (x.kind != Attr::Int && x.kind != Attr::Float) user_error(n.loc, "const: values must be numbers");
  } else if (v->kind != Attr::Int && v->kind != Attr::Float) {
    user_error(n.loc, "const: value must be a number or a list of numbers");
  }
  return n.type;
}
Tensor eval_const(const Node& n, const Args&, const EvalCtx&) {
  const Attr* v = n.attrs.find("value");
  std::vector<double> vals;
  if (v->kind == Attr::List)
    for (const Attr& x : v->list) vals.push_back(x.number());
  else
    vals.push_back(v->number());
  if (vals.empty()) return Tensor::empty(n.type);
  return Tensor::from(n.type, vals);
}

// rank, or with over=[A, ...] (rank(A)) the rank's index in its group over those axes
Type infer_rank(const Graph& g, const Node& n) {
  over_axes(g, n);  // checks the axes
  return Type{DType::I32, {}};
}
Tensor eval_rank(const Node& n, const Args&, const EvalCtx& c) {
  if (!n.attrs.has("over")) return Tensor::scalar(DType::I32, c.rank);
  GRADC_ASSERT(c.graph, "rank(axis) needs the mesh");
  return Tensor::scalar(DType::I32, group_rank(*c.graph, c.rank, over_axes(*c.graph, n)));
}

Type infer_iota(const Graph&, const Node& n) {
  int64_t len = n.attr_int("n");
  if (len < 0) user_error(n.loc, "iota: length {} is negative", len);
  // Its values are i32, and so is the length itself (argmax's "none" beside them): one
  // along an axis of 2^31 or more (one_hot's, argmax's) would wrap.
  if (len > INT32_MAX) user_error(n.loc, "iota: length {} is more than 2^31 - 1 (its values are i32)", len);
  return Type{DType::I32, {len}};
}
Tensor eval_iota(const Node& n, const Args&, const EvalCtx&) {
  Tensor y = Tensor::empty(n.type);
  for (int64_t i = 0; i < y.size(); ++i) y.data<int32_t>()[i] = int32_t(i);
  return y;
}

Type infer_random(const Graph& g, const Node& n) {
  const Type& seed = arg_type(g, n, 0);
  if (seed != Type{DType::I32, {}})
    user_error(n.loc, "{}: seed must be an i32 scalar, got {}", op_name(n.op), type_str(seed));
  Shape s = n.attr_ints("shape");
  for (int64_t d : s)
    if (d < 0) user_error(n.loc, "{}: negative dimension in {}", op_name(n.op), shape_str(s));
  return Type{DType::F32, s};
}
Tensor eval_random(const Node& n, const Args& a, const EvalCtx&) {
  Tensor y = Tensor::empty(n.type);
  int32_t seed = a[0]->data<int32_t>()[0];
  float* p = y.data<float>();
  if (n.op == Op::Randn)
    for (int64_t i = 0; i < y.size(); ++i) p[i] = float(normal01(seed, i));
  else
    for (int64_t i = 0; i < y.size(); ++i) p[i] = float(uniform01(seed, i));
  return y;
}

// A shared input is one value on every rank (shared(A): along A); a per-rank input
// and rank vary, rank(A) along A.
Rep rep_input(const Graph& g, const Node& n) { return Rep::along(uint8_t(~axes_mask(shared_axes(g, n)))); }
Rep rep_rank(const Graph& g, const Node& n) { return Rep::along(axes_mask(over_axes(g, n))); }

}  // namespace

void register_leaf_ops() {
  def(Op::Input).infer(infer_input).rep(rep_input).eval(eval_input).form(KernelForm::Leaf);
  def(Op::Const).infer(infer_const).eval(eval_const).form(KernelForm::Leaf);
  def(Op::Rank).infer(infer_rank).rep(rep_rank).eval(eval_rank).form(KernelForm::Leaf);
  def(Op::Iota).infer(infer_iota).eval(eval_iota).form(KernelForm::Leaf);
  def(Op::Randn).infer(infer_random).eval(eval_random).form(KernelForm::Leaf);
  def(Op::Rand).infer(infer_random).eval(eval_random).form(KernelForm::Leaf);
}

}  // namespace gradc
