#include "ir/rules.h"
#include "passes/pass.h"
#include "runtime/kernels.h"

namespace gradc {

namespace {
// Results of more than max_folded elements stay as ops (a splat stays small).
bool foldable(const Graph& g, const Node& n, int64_t max_folded) {
  if (is_collective(n.op) || n.op == Op::Input || n.op == Op::Const || n.op == Op::Rank || n.op == Op::Grad ||
      n.args.empty())
    return false;
  if (n.type->size() > max_folded) return false;
  for (ValueId a : n.args)
    if (g[a].op != Op::Const) return false;
  return true;
}
}  // namespace

// n becomes x itself, as a reshape to its own shape (which costs nothing).
static void become(Node& n, ValueId x) {
  n.op = Op::Reshape;
  n.args = {x};
  n.attrs = Attrs{};
  n.attrs.set("shape", Attr::of_ints(n.type->shape));
}

// transpose(transpose(x)) is one transpose of x, or x itself (as a reshape to its
// own shape, which costs nothing): the backward of a matmul with a transposed
// operand makes these, and a transpose left standing is a copy before a BLAS call.
void fold_transposes(Graph& g, Node& n, std::vector<int>& uses) {
  if (n.op != Op::Transpose || g[n.args[0]].op != Op::Transpose) return;
  const Node& inner = g[n.args[0]];
  --uses[size_t(n.args[0])];  // n reads inner's operand now
  ++uses[size_t(inner.args[0])];
  std::vector<int64_t> p1 = inner.attr_ints("perm"), p2 = n.attr_ints("perm"), c(p2.size());
  bool identity = true;
  for (size_t d = 0; d < p2.size(); ++d) {
    c[d] = p1[size_t(p2[d])];
    identity &= c[d] == int64_t(d);
  }
  n.args = {inner.args[0]};
  n.attrs = Attrs{};
  if (identity) {
    n.op = Op::Reshape;
    n.attrs.set("shape", Attr::of_ints(n.type->shape));
  } else {
    n.attrs.set("perm", Attr::of_ints(c));
  }
}

// A transpose of the last two axes of casts of a matmul, each read by the next alone
// (the derivative of a bf16 matmul rounds its f32 product, widens it again and
// transposes it), becomes the same casts of the transposed matmul: lowering then folds
// the transpose into the BLAS call (C^T = B^T A^T), and the casts read the product in
// order instead of across its rows. Casts are elementwise, so every value is the same;
// each node keeps its place, the transpose's node now the last cast. Only casts the
// program does not name (autodiff's) move: a name keeps the value it was given.
void sink_transpose(Graph& g, Node& n, const std::vector<int>& uses) {
  if (n.op != Op::Transpose) return;
  const std::vector<int64_t> perm = n.attr_ints("perm");
  const size_t r = perm.size();
  if (r < 2 || perm[r - 2] != int64_t(r - 1) || perm[r - 1] != int64_t(r - 2)) return;
  std::vector<ValueId> casts;  // the operand's chain, from the matmul's reader up
  ValueId v = n.args[0];
  for (; g[v].op == Op::Cast && uses[size_t(v)] == 1 && g[v].name.empty(); v = g[v].args[0])
    casts.insert(casts.begin(), v);
  if (casts.empty() || g[v].op != Op::Matmul || uses[size_t(v)] != 1) return;
  std::vector<Attrs> to;  // each cast's target, in order; the last one's moves to n
  for (ValueId c : casts) to.push_back(g[c].attrs);
  const Attrs transpose = n.attrs;
  Node& first = g[casts[0]];
  first.op = Op::Transpose;
  first.args = {v};
  first.attrs = transpose;
  first.type = infer_type(g, first);
  for (size_t i = 1; i <= casts.size(); ++i) {
    Node& c = i < casts.size() ? g[casts[i]] : n;
    c.op = Op::Cast;
    c.args = {casts[i - 1]};
    c.attrs = to[i - 1];
    c.type = infer_type(g, c);
  }
}

// Whether `wide` holds every value of `narrow` exactly, so that a cast to it and back
// gives the value again: bf16 and f16 in f32 and f64, f32 and i32 in f64.
static bool holds_exactly(DType wide, DType narrow) {
  if (is_low_precision(narrow)) return wide == DType::F32 || wide == DType::F64;
  return wide == DType::F64 && (narrow == DType::F32 || narrow == DType::I32);
}

// A cast to its operand's own type, and a cast back of an exact widening
// (cast(cast(x, f32), bf16) of a bf16 x), are x itself, as a reshape to its own shape
// (which costs nothing): autodiff's rules for casts make them, and in bf16 each is a
// rounding more in the kernels. The same bits, but for a NaN's: a signalling one stays
// so where the round trip would have made it quiet.
void fold_casts(Graph& g, Node& n, std::vector<int>& uses) {
  if (n.op != Op::Cast) return;
  const auto through = [&](ValueId v) {  // v, or what the identity reshapes it is are of
    while (g[v].op == Op::Reshape && g[v].type->shape == g.type(g[v].args[0]).shape) v = g[v].args[0];
    return v;
  };
  const DType to = n.type->dtype;
  ValueId x = through(n.args[0]);
  if (g.type(x).dtype != to) {
    if (g[x].op != Op::Cast || !holds_exactly(g.type(x).dtype, to)) return;
    x = through(g[x].args[0]);
    if (g.type(x).dtype != to) return;
  }
  --uses[size_t(n.args[0])];
  ++uses[size_t(x)];
  become(n, x);
}

// Whether v is a 1 at every element: a splat constant of 1, through the reshapes,
// broadcasts and casts that keep it one (1 is exact in every type).
static bool is_one(const Graph& g, ValueId v) {
  while (g[v].op == Op::Reshape || g[v].op == Op::BroadcastTo || g[v].op == Op::Cast) v = g[v].args[0];
  if (g[v].op != Op::Const) return false;
  const Attr* a = g[v].attrs.find("value");
  return a && ((a->kind == Attr::Float && a->f == 1.0) || (a->kind == Attr::Int && a->i == 1));
}

// 1 * x and x * 1 are x, as a reshape to its own shape, where x has the product's type
// (x * 1 is exact in IEEE arithmetic, and in bf16 and f16 a rounding of x is x): the
// seed of a sum's gradient is a broadcast 1, and each such product was a kernel, in
// bf16 with a rounding more. A product that is an output (through casts and reshapes)
// stays: as a kernel it joins its neighbours' pass over memory, where an output that
// is an input's buffer is copied in a pass of its own.
void fold_mul_one(Graph& g, Node& n, std::vector<int>& uses, bool output) {
  if (n.op != Op::Mul || output) return;
  for (int side = 0; side < 2; ++side) {
    const ValueId one = n.args[size_t(side)], x = n.args[size_t(1 - side)];
    if (!is_one(g, one) || !(g[x].type == n.type)) continue;
    --uses[size_t(one)];
    become(n, x);
    return;
  }
}

Graph fold(Graph g, int64_t max_folded) {
  Graph& out = g;
  std::vector<int> uses(out.nodes.size(), 0);
  for (const Node& n : out.nodes)
    for (ValueId a : n.args) ++uses[size_t(a)];
  for (const auto& o : out.outputs) ++uses[size_t(o.second)];
  std::vector<char> output(out.nodes.size(), 0);  // an output, or a cast or reshape of one
  for (const auto& o : out.outputs)
    for (ValueId v = o.second;; v = out[v].args[0]) {
      output[size_t(v)] = 1;
      if (out[v].op != Op::Cast && out[v].op != Op::Reshape) break;
    }
  for (Node& n : out.nodes) {
    fold_transposes(out, n, uses);
    sink_transpose(out, n, uses);
    fold_mul_one(out, n, uses, output[size_t(&n - out.nodes.data())]);
    fold_casts(out, n, uses);
    if (!foldable(out, n, max_folded)) continue;
    std::vector<Tensor> vals;
    for (ValueId a : n.args) vals.push_back(run_local(out[a], {}, EvalCtx{}));
    Args args;
    for (const Tensor& t : vals) args.push_back(&t);
    Tensor r = run_local(n, args, EvalCtx{0, out.world});
    std::vector<double> v = r.values();
    bool splat = true;
    for (double x : v) splat = splat && x == v[0];
    Attr value;
    if (splat && !v.empty()) {
      value = n.type->dtype == DType::I32 ? Attr::of_int(int64_t(v[0])) : Attr::of_float(v[0]);
    } else {
      value.kind = Attr::List;
      for (double x : v)
        value.list.push_back(n.type->dtype == DType::I32 ? Attr::of_int(int64_t(x)) : Attr::of_float(x));
    }
    n.op = Op::Const;
    n.args.clear();
    n.attrs = Attrs{};
    n.attrs.set("value", value);
  }
  return g;
}

}  // namespace gradc
