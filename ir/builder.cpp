#include "ir/builder.h"

#include "support/diag.h"

namespace gradc {
namespace build {

Ex::Ex(ValueId v) {
  auto r = std::make_shared<Rep>();
  r->kind = Rep::Value;
  r->value = v;
  r_ = std::move(r);
}

Ex::Ex(double k, int) {
  auto r = std::make_shared<Rep>();
  r->kind = Rep::Number;
  r->k = k;
  r_ = std::move(r);
}

Ex::Ex(Op op, std::vector<Ex> args, Attrs attrs) {
  auto r = std::make_shared<Rep>();
  r->kind = Rep::Apply;
  r->op = op;
  r->args = std::move(args);
  r->attrs = std::move(attrs);
  r_ = std::move(r);
}

namespace {
Ex with_ints(Op op, Ex x, const char* key, const std::vector<int64_t>& v) {
  Attrs a;
  a.set(key, Attr::of_ints(v));
  return Ex(op, {std::move(x)}, std::move(a));
}
}  // namespace

Ex operator+(Ex a, Ex b) { return Ex(Op::Add, {std::move(a), std::move(b)}); }
Ex operator-(Ex a, Ex b) { return Ex(Op::Sub, {std::move(a), std::move(b)}); }
Ex operator*(Ex a, Ex b) { return Ex(Op::Mul, {std::move(a), std::move(b)}); }
Ex operator/(Ex a, Ex b) { return Ex(Op::Div, {std::move(a), std::move(b)}); }
Ex operator-(Ex a) { return Ex(Op::Neg, {std::move(a)}); }
Ex operator<(Ex a, Ex b) { return Ex(Op::Lt, {std::move(a), std::move(b)}); }
Ex operator<=(Ex a, Ex b) { return Ex(Op::Le, {std::move(a), std::move(b)}); }
Ex operator>(Ex a, Ex b) { return Ex(Op::Gt, {std::move(a), std::move(b)}); }
Ex operator>=(Ex a, Ex b) { return Ex(Op::Ge, {std::move(a), std::move(b)}); }
Ex eq(Ex a, Ex b) { return Ex(Op::Eq, {std::move(a), std::move(b)}); }
Ex ne(Ex a, Ex b) { return Ex(Op::Ne, {std::move(a), std::move(b)}); }
Ex pow(Ex a, Ex b) { return Ex(Op::Pow, {std::move(a), std::move(b)}); }
Ex maximum(Ex a, Ex b) { return Ex(Op::Maximum, {std::move(a), std::move(b)}); }
Ex minimum(Ex a, Ex b) { return Ex(Op::Minimum, {std::move(a), std::move(b)}); }
Ex where(Ex cond, Ex a, Ex b) { return Ex(Op::Where, {std::move(cond), std::move(a), std::move(b)}); }
#define OP(E, name, arity, flags)
#define UNARY(E, f, flags) \
  Ex f(Ex x) { return Ex(Op::E, {std::move(x)}); }
#include "ir/ops.def"
#undef UNARY
#undef OP
Ex cast(Ex x, DType to) {
  Attrs a;
  a.set("to", Attr::of_sym(dtype_name(to)));
  return Ex(Op::Cast, {std::move(x)}, std::move(a));
}
Ex reduce_sum(Ex x, const std::vector<int64_t>& axes) { return with_ints(Op::ReduceSum, std::move(x), "axes", axes); }
Ex reduce_max(Ex x, const std::vector<int64_t>& axes) { return with_ints(Op::ReduceMax, std::move(x), "axes", axes); }
Ex reduce_min(Ex x, const std::vector<int64_t>& axes) { return with_ints(Op::ReduceMin, std::move(x), "axes", axes); }
Ex reshape(Ex x, const Shape& s) { return with_ints(Op::Reshape, std::move(x), "shape", s); }
Ex broadcast_to(Ex x, const Shape& s) { return with_ints(Op::BroadcastTo, std::move(x), "shape", s); }
Ex slice(Ex x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends) {
  Attrs a;
  a.set("starts", Attr::of_ints(starts));
  a.set("ends", Attr::of_ints(ends));
  return Ex(Op::Slice, {std::move(x)}, std::move(a));
}
Ex rank() { return Ex(Op::Rank, {}); }
Ex all_reduce(Ex x, Reduction op) {
  Attrs a;
  a.set("op", Attr::of_sym(reduction_name(op)));
  return Ex(Op::AllReduce, {std::move(x)}, std::move(a));
}
Ex iota(int64_t n) {
  Attrs a;
  a.set("n", Attr::of_int(n));
  return Ex(Op::Iota, {}, std::move(a));
}

}  // namespace build

ValueId Builder::operator()(const Ex& e) {
  const Ex::Rep& r = *e.r_;
  if (r.kind == Ex::Rep::Value) return r.value;
  GRADC_ASSERT(r.kind == Ex::Rep::Apply, "a number alone has no dtype: it needs a value beside it ({})", r.k);
  if (r.made_by == this) return r.made;
  // The values first, left to right; then the numbers, in the dtype of the first value
  // (for where, of the first of the two it chooses between).
  std::vector<ValueId> args(r.args.size(), -1);
  DType dt = DType::F32;
  bool typed = false;
  for (size_t i = 0; i < r.args.size(); ++i) {
    if (r.args[i].r_->kind == Ex::Rep::Number) continue;
    args[i] = (*this)(r.args[i]);
    if (!typed && !(r.op == Op::Where && i == 0)) {
      dt = dtype(args[i]);
      typed = true;
    }
  }
  for (size_t i = 0; i < r.args.size(); ++i)
    if (args[i] < 0) {
      GRADC_ASSERT(typed, "{}: its operands are all numbers, which have no dtype", op_name(r.op));
      args[i] = scalar(r.args[i].r_->k, dt);
    }
  // As the named methods: nothing to do for a reshape or broadcast to the shape it
  // has, or a cast to the dtype it has.
  bool same = false;
  if (r.op == Op::Reshape || r.op == Op::BroadcastTo) {
    Shape to;
    for (const Attr& d : r.attrs.find("shape")->list) to.push_back(d.i);
    same = shape(args[0]) == to;
  } else if (r.op == Op::Cast) {
    same = r.attrs.find("to")->s == dtype_name(dtype(args[0]));
  }
  r.made = same ? args[0] : emit(r.op, std::move(args), r.attrs);
  r.made_by = this;
  return r.made;
}

ValueId Builder::make(Op op, std::vector<ValueId> args, Attrs attrs) {
  return gradc::emit(g_, op, std::move(args), std::move(attrs), Loc{});
}

ValueId Builder::make_constant(const Type& t, double v) { return g_.append(const_node(t, v, Loc{})); }

ValueId Builder::cast(ValueId a, DType dt) {
  if (dtype(a) == dt) return a;
  Attrs at;
  at.set("to", Attr::of_sym(dtype_name(dt)));
  return emit(Op::Cast, {a}, at);
}

ValueId Builder::reshape(ValueId a, Shape s) {
  if (shape(a) == s) return a;
  Attrs at;
  at.set("shape", Attr::of_ints(s));
  return emit(Op::Reshape, {a}, at);
}

ValueId Builder::broadcast(ValueId a, Shape s) {
  if (shape(a) == s) return a;
  Attrs at;
  at.set("shape", Attr::of_ints(s));
  return emit(Op::BroadcastTo, {a}, at);
}

ValueId Builder::transpose(ValueId a, const std::vector<int64_t>& perm) {
  Attrs at;
  at.set("perm", Attr::of_ints(perm));
  return emit(Op::Transpose, {a}, at);
}

ValueId Builder::swap_last_two(ValueId a) {
  const int r = type(a).rank();
  std::vector<int64_t> perm;
  for (int d = 0; d < r; ++d) perm.push_back(d);
  std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
  return transpose(a, perm);
}

ValueId Builder::slice(ValueId a, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends) {
  Attrs at;
  at.set("starts", Attr::of_ints(starts));
  at.set("ends", Attr::of_ints(ends));
  return emit(Op::Slice, {a}, at);
}

ValueId Builder::pad(ValueId a, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  Attrs at;
  at.set("lo", Attr::of_ints(lo));
  at.set("hi", Attr::of_ints(hi));
  return emit(Op::Pad, {a}, at);
}

ValueId Builder::reduce_sum(ValueId a, const std::vector<int64_t>& axes) {
  if (axes.empty()) return a;
  Attrs at;
  at.set("axes", Attr::of_ints(axes));
  return emit(Op::ReduceSum, {a}, at);
}

ValueId Builder::sum_to(ValueId a, Shape s) {
  const Shape from = shape(a);
  if (from == s) return a;
  // Axes that broadcasting added (leading) or stretched (size 1 in s).
  std::vector<int64_t> axes;
  size_t lead = from.size() - s.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (d < lead || (s[d - lead] == 1 && from[d] != 1)) axes.push_back(int64_t(d));
  return reshape(reduce_sum(a, axes), s);
}

}  // namespace gradc
