// Collectives (docs/language.md sections 5 and 8): each one's rules of every layer in one
// block at the end (register_collective_ops): parameters, shape rule, replication, the
// interpreter's kernel, routing (its derivative is the routing's transpose), bytes on
// the wire and the generated code's call. The exchanges themselves are
// runtime/comm.cpp (the in-process communicator) and codegen/runtime/ (the targets'),
// deliberately a second statement of each collective's meaning: `gradc prove` checks
// every routing against the interpreter's kernel.
#include "codegen/cpp.h"
#include "ir/collectives.h"
#include "ops/ops.h"
#include "passes/cost.h"
#include "runtime/comm.h"

namespace gradc {
namespace {

using namespace build;  // the derivative rules are written as expressions (ir/builder.h)

// N: the ranks of the collective's groups (the world, or over=: the product of those axes' sizes).
void check_root(const Graph& g, const Node& n) {
  const int N = group_size(g, n);
  int64_t root = n.attr_int("root");
  if (root < 0 || root >= N) user_error(n.loc, "{}: root {} is outside 0..{}", op_name(n.op), root, N - 1);
}

void check_reduction(const Node& n, const Type& x) {
  if (reduction_of(n) == Reduction::Avg && !is_float(x.dtype))
    user_error(n.loc, "{}: op=avg needs a float operand, got {}", op_name(n.op), type_str(x));
}

int divisible_axis(const Graph& g, const Node& n, const char* key, const Type& x) {
  const int N = group_size(g, n);
  int axis = norm_axis(n, n.attr_int(key), x);
  if (x.shape[size_t(axis)] % N != 0)
    user_error(n.loc, "{}: axis {} has size {}, which does not divide by {} ranks", op_name(n.op), axis,
               x.shape[size_t(axis)], N);
  return axis;
}

Type infer_all_reduce(const Graph& g, const Node& n) {
  group_size(g, n);  // checks over=
  const Type& x = arg_type(g, n, 0);
  check_reduction(n, x);
  return x;
}
Type infer_all_gather(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  y.shape[size_t(norm_axis(n, n.attr_int("axis"), y))] *= group_size(g, n);
  return y;
}
Type infer_reduce_scatter(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  check_reduction(n, y);
  y.shape[size_t(divisible_axis(g, n, "axis", y))] /= group_size(g, n);
  return y;
}
Type infer_broadcast(const Graph& g, const Node& n) {
  check_root(g, n);
  return arg_type(g, n, 0);
}
Type infer_reduce(const Graph& g, const Node& n) {
  check_root(g, n);
  return infer_all_reduce(g, n);
}
Type infer_gather(const Graph& g, const Node& n) {
  check_root(g, n);
  return infer_all_gather(g, n);
}
Type infer_scatter(const Graph& g, const Node& n) {
  check_root(g, n);
  Type y = arg_type(g, n, 0);
  y.shape[size_t(divisible_axis(g, n, "axis", y))] /= group_size(g, n);
  return y;
}
Type infer_all_to_all(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  int split = divisible_axis(g, n, "split_axis", y);
  int cat = norm_axis(n, n.attr_int("concat_axis"), y);
  y.shape[size_t(split)] /= group_size(g, n);
  y.shape[size_t(cat)] *= group_size(g, n);
  return y;
}
Type infer_permute(const Graph& g, const Node& n) {
  const int N = group_size(g, n);
  std::vector<bool> received(size_t(N), false);
  for (const auto& p : n.attr_int_lists("pairs")) {
    if (p.size() != 2) user_error(n.loc, "permute: each pair must be [src, dst]");
    for (int64_t r : p)
      if (r < 0 || r >= N)
        user_error(n.loc, "permute: pair [{}, {}] names rank {}, outside 0..{}", p[0], p[1], r, N - 1);
    if (received[size_t(p[1])]) user_error(n.loc, "permute: rank {} is the destination of more than one pair", p[1]);
    received[size_t(p[1])] = true;
  }
  return arg_type(g, n, 0);
}

int axis_of(const Node& n, const char* key, const Tensor& x) { return norm_axis(n, n.attr_int(key), x.type); }
int root_of(const Node& n) { return int(n.attr_int("root")); }

std::vector<Tensor> run_all_reduce(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_reduce(x, reduction_of(n));
}
std::vector<Tensor> run_all_gather(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_gather(x, axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_reduce_scatter(const Node& n, const std::vector<Tensor>& x) {
  return comm::reduce_scatter(x, axis_of(n, "axis", x[0]), reduction_of(n));
}
std::vector<Tensor> run_broadcast(const Node& n, const std::vector<Tensor>& x) {
  return comm::broadcast(x, root_of(n));
}
std::vector<Tensor> run_reduce(const Node& n, const std::vector<Tensor>& x) {
  return comm::reduce(x, root_of(n), reduction_of(n));
}
std::vector<Tensor> run_gather(const Node& n, const std::vector<Tensor>& x) {
  return comm::gather(x, root_of(n), axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_scatter(const Node& n, const std::vector<Tensor>& x) {
  return comm::scatter(x, root_of(n), axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_all_to_all(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_to_all(x, axis_of(n, "split_axis", x[0]), axis_of(n, "concat_axis", x[0]));
}
std::vector<Tensor> run_permute(const Node& n, const std::vector<Tensor>& x) {
  return comm::permute(x, n.attr_int_lists("pairs"));
}

// ---- replication -------------------------------------------------------------
// Over the axes S of its groups: all_reduce, all_gather and broadcast give every rank
// of a group the same value (replicated along S); the others give ranks different
// blocks, or the root something else than the rest (varying along S). permute of a
// value replicated along S is replicated when every rank receives. Along the other
// axes the result is as its operand.
uint8_t over_bits(const Graph& g, const Node& n) { return axes_mask(over_axes(g, n)); }
Rep rep_same_in_group(const Graph& g, const Node& n) {
  return Rep::along(uint8_t(g[n.args[0]].rep.axes() & ~over_bits(g, n)));
}
Rep rep_differs(const Graph& g, const Node& n) {
  return Rep::along(uint8_t(g[n.args[0]].rep.axes() | over_bits(g, n)));
}
Rep rep_permute(const Graph& g, const Node& n) {
  if (!g[n.args[0]].rep.varies_along(over_bits(g, n)) && int(n.attr_int_lists("pairs").size()) == group_size(g, n))
    return g[n.args[0]].rep;
  return rep_differs(g, n);
}

// ---- derivative rules ------------------------------------------------------------
// A collective with op=sum is a linear map A on the values of all ranks together;
// its derivative rule applies A^T, which is again a collective (transpose_of in
// ir/collectives.cpp, checked by `gradc prove`). For op=avg, A/N. For prod, max
// and min, y = red_k x_k is nonlinear: rank k's cotangent is A^T(g) times the
// local partial dy/dx_k, computed exactly on every rank (see extremum_partial and the prod rules).

// dy/dx_k, elementwise, for y = red_j x_j over ranks.
//   max/min: [x_k = y] / #{j : x_j = y}, ties split evenly, where `full` is y
//            itself on every rank. Piecewise constant: every higher derivative is
//            0, and so is the derivative of this rule.
ValueId extremum_partial(Ad& ad, ValueId x, ValueId full) {
  const Ex hit = eq(ad[x], ad[full]);
  return ad(hit / all_reduce(hit, Reduction::Sum));
}

//   prod:    prod_{j != k} x_j, from the counts over ranks of the zeros, the
//            infinities and the NaNs (one all_reduce of the three), and the product Q
//            of the regular values (a zero as 1, an infinity as its sign, a NaN as 1):
//            rank k removes its own from both, so that R = Q / w_k is the others'
//            regular part, then: a NaN among the others, or a zero and an infinity,
//            NaN; a zero, R * 0; an infinity, R * inf (its sign); else R. No division
//            by a value that can be zero or infinite, and two all_reduces. Exact as a
//            value (an infinite x_k gets the others' finite product, not inf / inf),
//            but its parts (the counts, the masks) are constants to a further
//            differentiation, so a gradient that is differentiated again uses
//            leave_one_out_prod.
ValueId zero_counting_prod(Ad& ad, ValueId x) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const Shape s = ad.shape(x);
  Shape row = s;
  row.insert(row.begin(), 1);
  const Ex X = ad[x];
  const Ex is_zero = eq(X, 0.0), is_inf = eq(abs(X), inf), is_nan = ne(X, X);
  Attrs ax0;
  ax0.set("axis", Attr::of_int(0));
  const ValueId kinds =
      ad.emit(Op::Concat, {ad(reshape(is_zero, row)), ad(reshape(is_inf, row)), ad(reshape(is_nan, row))}, ax0);
  const Ex counts = all_reduce(ad[kinds], Reduction::Sum);
  auto count = [&](int64_t i) {  // slot i of the counts, less this rank's own
    std::vector<int64_t> start(row.size(), 0), end(row.begin(), row.end());
    start[0] = i;
    end[0] = i + 1;
    return reshape(slice(counts, start, end), s);
  };
  const Ex zeros = count(0) - is_zero, infs = count(1) - is_inf, nans = count(2) - is_nan;
  const Ex w = where(is_zero + is_nan, 1.0, where(is_inf, sign(X), X));
  const Ex R = all_reduce(w, Reduction::Prod) / w;
  const Ex none = where(infs > 0.5, R * inf, R), some_zero = where(infs > 0.5, nan, R * 0.0);
  return ad(where(nans > 0.5, nan, where(zeros > 0.5, some_zero, none)));
}

// prod_{j != k} x_j on rank k, exact to every order: the ranks' values gathered
// into G = [x_0; ...; x_{N-1}], rank k's own row replaced by ones, and the rows
// multiplied in a balanced tree (log2 N halvings, an odd count padded with a row
// of ones). Every step is an ordinary op (all_gather, where, slice, concat, mul)
// with an exact derivative rule, so grad of grad gives
// d2P/dx_j dx_k = prod_{i not in {j, k}} x_i without dividing by anything, zeros
// or not. It costs an all_gather of N times x's size.
ValueId leave_one_out_prod(Ad& ad, ValueId x) {
  const Shape s = ad.shape(x);
  const DType dt = ad.dtype(x);
  const int64_t N = ad.group_size();
  Shape rows = s;
  rows.insert(rows.begin(), 1);
  Attrs ax0;
  ax0.set("axis", Attr::of_int(0));
  ValueId all = ad.collective(Op::AllGather, ad.reshape(x, rows), ax0);  // [N] + s
  Shape col(rows.size(), 1);
  col[0] = N;
  ValueId v = ad(where(eq(reshape(iota(N), col), rank()), 1.0, ad[all]));  // the row of rank k is ones
  for (int64_t n = N; n > 1;) {
    if (n % 2) {
      rows[0] = 1;
      v = ad.emit(Op::Concat, {v, ad.constant(Type{dt, rows}, 1)}, ax0);
      ++n;
    }
    std::vector<int64_t> start(rows.size(), 0), mid(s.size() + 1), end(s.size() + 1);
    for (size_t d = 0; d < s.size(); ++d) mid[d + 1] = end[d + 1] = s[d];
    mid[0] = n / 2;
    end[0] = n;
    std::vector<int64_t> second = start;
    second[0] = n / 2;
    v = ad(slice(ad[v], start, mid) * slice(ad[v], second, end));
    n /= 2;
  }
  return ad.reshape(v, s);
}

void vjp_collective(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  const Node n = ad.y();  // a copy: emitting moves the nodes
  ValueId x = ad.arg(0);
  const std::string op = n.attrs.has("op") ? n.attr_sym("op") : "sum";
  const int N = ad.group_size();
  ValueId lin;
  if (n.op == Op::AllReduce && ad.replicated_in_group(g)) {
    // Every rank holds the same cotangent: the sum over ranks is N times it, no exchange.
    lin = ad.mul(g, double(N));
  } else {
    lin = -1;
    for (const CollectiveCall& t : transpose_of(n, N)) {
      ValueId part = ad.collective(t.op, g, t.attrs);
      lin = lin < 0 ? part : ad.add(lin, part);
    }
    if (lin < 0) lin = ad.zeros(ad.type(x));  // permute with no pairs
  }
  if (op == "sum") {
    ct[0] = lin;
  } else if (op == "avg") {
    ct[0] = ad.mul(lin, 1.0 / N);
  } else if (op == "prod") {
    ct[0] = ad.mul(lin, ad.higher_order() ? leave_one_out_prod(ad, x) : zero_counting_prod(ad, x));
  } else {
    // max and min compare x with the whole reduced value, on every rank.
    ValueId full = y;
    if (n.op == Op::Reduce) {
      Attrs a;
      a.set("root", Attr::of_int(n.attr_int("root")));
      full = ad.collective(Op::Broadcast, y, a);
    } else if (n.op == Op::ReduceScatter) {
      Attrs a;
      a.set("axis", Attr::of_int(n.attr_int("axis")));
      full = ad.collective(Op::AllGather, y, a);
    }
    ct[0] = ad.mul(lin, extremum_partial(ad, x, full));
  }
}

// One collective's rules of every layer, registered together (a new collective is a row
// in ir/ops.def and one of these blocks; docs/internals.md).
struct Collective {
  Op op;
  std::vector<std::string> params;  // keyword parameters after x (ir/collectives.h)
  InferFn infer;                    // its shape rule
  RepFn rep;                        // its replication
  CollectiveFn run;                 // the interpreter's kernel: every rank's result at once
  Term (*routing)(const Node& n);   // its op=sum map, whose transpose is its derivative
  SentFn sent;                      // bytes one rank sends (gradc cost)
  RuntimeCall call;                 // the generated code's call (codegen/runtime/)
};

void collective(const Collective& c) {
  def(c.op).infer(c.infer).rep(c.rep).collective(c.run).vjp(vjp_collective).form(KernelForm::Comm);
  collective_rules()[c.op] = CollectiveRule{c.params, c.routing};
  bytes_sent()[c.op] = c.sent;
  runtime_calls()[c.op] = c.call;
}

// The share of a buffer a rank sends in a ring over N ranks.
double ring(int N) { return double(N - 1) / N; }

}  // namespace

void register_collective_ops() {
  using route::block, route::root, route::term, route::whole;
  using A = CallArg;
  // all_reduce(x, op=sum): op over the group's x, on every rank. 2(N-1)/N of the buffer
  // (a ring reduce_scatter, then a ring all_gather).
  collective({.op = Op::AllReduce,
              .params = {"op"},
              .infer = infer_all_reduce,
              .rep = rep_same_in_group,
              .run = run_all_reduce,
              .routing = [](const Node&) { return term(whole(), whole()); },
              .sent = [](const Node&, double in, double, int N) { return 2 * ring(N) * in; },
              .call = {"all_reduce", {{A::Count}, {A::DType}, {A::Reduction}}}});
  // all_gather(x, axis): the group's x concatenated along axis, on every rank.
  collective({.op = Op::AllGather,
              .params = {"axis"},
              .infer = infer_all_gather,
              .rep = rep_same_in_group,
              .run = run_all_gather,
              .routing = [](const Node& n) { return term(whole(), block(axis_attr(n, "axis"))); },
              .sent = [](const Node&, double, double out, int N) { return ring(N) * out; },
              .call = {"all_gather", {{A::Blocks, "axis"}, {A::DType}}}});
  // reduce_scatter(x, axis, op=sum): block r (along axis) of op over the group's x, on rank r.
  collective({.op = Op::ReduceScatter,
              .params = {"axis", "op"},
              .infer = infer_reduce_scatter,
              .rep = rep_differs,
              .run = run_reduce_scatter,
              .routing = [](const Node& n) { return term(block(axis_attr(n, "axis")), whole()); },
              .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },
              .call = {"reduce_scatter", {{A::GroupBlocks, "axis"}, {A::DType}, {A::Reduction}}}});
  // broadcast(x, root=0): the root's x on every rank; a chain in which every rank but one forwards it.
  collective({.op = Op::Broadcast,
              .params = {"root"},
              .infer = infer_broadcast,
              .rep = rep_same_in_group,
              .run = run_broadcast,
              .routing = [](const Node& n) { return term(root(n.attr_int("root")), whole()); },
              .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },
              .call = {"broadcast", {{A::Count}, {A::DType}, {A::Int, "root"}}}});
  // reduce(x, root=0, op=sum): op over the group's x on the root, zeros elsewhere.
  collective({.op = Op::Reduce,
              .params = {"root", "op"},
              .infer = infer_reduce,
              .rep = rep_differs,
              .run = run_reduce,
              .routing = [](const Node& n) { return term(whole(), root(n.attr_int("root"))); },
              .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },
              .call = {"reduce_to", {{A::Count}, {A::DType}, {A::Reduction}, {A::Int, "root"}}}});
  // gather(x, root=0, axis=0): the group's x concatenated on the root, zeros elsewhere;
  // N-1 blocks go to the root.
  collective({.op = Op::Gather,
              .params = {"root", "axis"},
              .infer = infer_gather,
              .rep = rep_differs,
              .run = run_gather,
              .routing = [](const Node& n) { return term(whole(), root(n.attr_int("root"), axis_attr(n, "axis"))); },
              .sent = [](const Node&, double, double out, int N) { return ring(N) * out; },
              .call = {"gather", {{A::Blocks, "axis"}, {A::DType}, {A::Int, "root"}}}});
  // scatter(x, root=0, axis=0): block r of the root's x, on rank r.
  collective({.op = Op::Scatter,
              .params = {"root", "axis"},
              .infer = infer_scatter,
              .rep = rep_differs,
              .run = run_scatter,
              .routing = [](const Node& n) { return term(root(n.attr_int("root"), axis_attr(n, "axis")), whole()); },
              .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },
              .call = {"scatter", {{A::GroupBlocks, "axis"}, {A::DType}, {A::Int, "root"}}}});
  // all_to_all(x, split_axis, concat_axis): block r of every rank's x (along split_axis),
  // concatenated along concat_axis, on rank r.
  collective(
      {.op = Op::AllToAll,
       .params = {"split_axis", "concat_axis"},
       .infer = infer_all_to_all,
       .rep = rep_differs,
       .run = run_all_to_all,
       .routing =
           [](const Node& n) { return term(block(axis_attr(n, "split_axis")), block(axis_attr(n, "concat_axis"))); },
       .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },
       .call = {"all_to_all", {{A::Shape}, {A::Axis, "split_axis"}, {A::Axis, "concat_axis"}, {A::DType}}}});
  // permute(x, shift=1 | pairs=[[src, dst], ...]): x of src on dst, zeros where none
  // arrives; a buffer for each pair whose ends differ, over N.
  collective({.op = Op::Permute,
              .params = {"shift", "pairs"},
              .infer = infer_permute,
              .rep = rep_permute,
              .run = run_permute,
              .routing = [](const Node& n) { return Term{whole(), whole(), true, n.attr_int_lists("pairs")}; },
              .sent =
                  [](const Node& n, double in, double, int N) {
                    int moving = 0;
                    for (const auto& p : n.attr_int_lists("pairs")) moving += p[0] != p[1];
                    return moving * in / N;
                  },
              .call = {"permute", {{A::Count}, {A::DType}, {A::Pairs}}}});
}

}  // namespace gradc
