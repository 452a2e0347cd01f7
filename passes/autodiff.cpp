// The autodiff pass: replaces every grad(loss, w, mode) by a backward graph
// made of ordinary ops (docs/language.md section 6), built by reverse accumulation
// with each op's derivative rule (the derivatives() table, passes/ad.h). Collectives are linear maps on
// the values of all ranks together; their rules emit the transposed collective,
// so the backward graph is itself an SPMD program that every rank runs.
#include <algorithm>

#include "ir/collectives.h"
#include "ir/mesh.h"
#include "passes/ad.h"
#include "passes/autodiff.h"
#include "passes/pass.h"

namespace gradc {

OpTable<VjpFn>& derivatives() {
  static OpTable<VjpFn> t;
  return t;
}

// ---- the builder used by the derivative rules ---------------------------------

void Ad::begin(ValueId y, const std::vector<bool>& need) {
  y_ = y;
  need_ = need;
  low_ = DType::F32;
  wide_.clear();
  rule_start_ = ValueId(g_.nodes.size());
  if (need.empty()) return;  // the seed or a gradient's total: no op's rule
  if (is_low_precision(g_[y].type->dtype)) low_ = g_[y].type->dtype;
  for (ValueId a : g_[y].args)
    if (is_low_precision(g_.type(a).dtype) && low_ == DType::F32) low_ = g_.type(a).dtype;
}

ValueId Ad::cotangent(size_t i, ValueId ct) {
  const DType want = g_.type(arg(i)).dtype;
  if (low_ == DType::F32 || g_.type(ct).dtype == want) return ct;
  Attrs a;
  a.set("to", Attr::of_sym(dtype_name(want)));
  return append(Op::Cast, {ct}, a);
}

int Ad::group_size() const { return gradc::group_size(g_, y()); }
bool Ad::replicated_in_group(ValueId v) const { return !g_[v].rep.varies_along(axes_mask(over_axes(g_, y()))); }

ValueId Ad::make(Op op, std::vector<ValueId> args, Attrs attrs) {
  if (low_ != DType::F32)
    for (ValueId& a : args) {
      const DType t = g_.type(a).dtype;
      Attrs to;
      if (is_collective(op) && t == DType::F32 && a >= rule_start_) {  // sent in the storage type
        to.set("to", Attr::of_sym(dtype_name(low_)));
        a = append(Op::Cast, {a}, to);
      } else if (!is_collective(op) && is_low_precision(t)) {
        auto it = std::find_if(wide_.begin(), wide_.end(), [&](const auto& w) { return w.first == a; });
        if (it != wide_.end()) {
          a = it->second;
        } else {
          to.set("to", Attr::of_sym("f32"));
          const ValueId w = append(Op::Cast, {a}, to);
          wide_.push_back({a, w});
          a = w;
        }
      }
    }
  return append(op, std::move(args), std::move(attrs));
}

ValueId Ad::append(Op op, std::vector<ValueId> args, Attrs attrs) {
  // a derived reduction of bf16 or f16 values says how it sums
  if (is_collective(op) && has_param(op, "op") && !attrs.has("accum") && !args.empty()) {
    const DType t = g_.type(args[0]).dtype;
    if (is_low_precision(t)) attrs.set("accum", Attr::of_sym(t == reduce_dtype_ ? "same" : "f32"));
  }
  // within a rule (begin with operands), not the seed or a gradient's total
  if (y_ >= 0 && !need_.empty() && (is_collective(op) || op == Op::Rank) && !attrs.has("over"))
    if (const Attr* over = g_[y_].attrs.find("over"); over && is_collective(g_[y_].op)) attrs.set("over", *over);
  Node n;
  n.op = op;
  n.args = std::move(args);
  n.attrs = std::move(attrs);
  n.loc = y_ >= 0 ? g_[y_].loc : Loc{};
  n.backward = true;
  if (y_ >= 0) n.fwd_op = g_[y_].op;
  n.type = infer_type(g_, n);
  n.rep = infer_rep(g_, n);
  return g_.append(std::move(n));
}

ValueId Ad::make_constant(const Type& t, double v) {
  Node n = const_node(low_ != DType::F32 && is_low_precision(t.dtype) ? Type{DType::F32, t.shape} : t, v,
                      y_ >= 0 ? g_[y_].loc : Loc{});
  n.backward = true;
  if (y_ >= 0) n.fwd_op = g_[y_].op;
  n.rep = Rep::Replicated;
  return g_.append(std::move(n));
}

// ---- the pass ------------------------------------------------------------------

namespace {

// grad's reduce_dtype= (f32 when not given)
DType reduce_dtype_of(const Node& n) {
  DType t = DType::F32;
  if (n.attrs.has("reduce_dtype")) parse_dtype(n.attr_sym("reduce_dtype"), t);
  return t;
}

// The op where a value's ranks start to differ along `axes`: follow operands that
// vary along them up to a node none of whose operands does.
ValueId variation_origin(const Graph& g, ValueId v, uint8_t axes) {
  for (;;) {
    const Node& n = g[v];
    if (n.op == Op::Input) return v;
    auto it = std::find_if(n.args.begin(), n.args.end(), [&](ValueId a) { return g[a].rep.varies_along(axes); });
    if (it == n.args.end()) return v;
    v = *it;
  }
}

std::string describe_origin(const Node& n) {
  if (n.op == Op::Input) return fmt::format("the per-rank input '{}'", n.attr_sym("name"));
  if (n.op == Op::Rank) return n.attrs.has("over") ? "rank(...)" : "'rank'";
  return std::string(op_name(n.op));
}

// The axes along which a grad's ranks' losses are different samples (docs/language.md
// section 8): its over=, every axis by default, none for mode=global.
uint8_t grad_over(const Graph& g, const Node& grad) {
  if (grad_mode_of(grad) == GradMode::Global) return 0;
  return axes_mask(over_axes(g, grad));
}

// A grad's `own` attribute (the torch target's pullback): the mask of the axes along
// which w is each rank's own variable; none for a program's own grads.
uint8_t own_axes(const Node& grad) {
  const Attr* a = grad.attrs.find("own");
  return a ? uint8_t(a->i) : 0;
}

// One reverse sweep from `loss` producing the cotangent of every value in `ws`.
// `higher_order`: the gradients are differentiated again (see Ad::higher_order).
// `own`: the axes along which each w is every rank's own variable, even where it is
// replicated along them (the torch target's data-parallel axes): along them its
// gradient is this rank's part, not the total.
std::vector<ValueId> backward(Graph& g, ValueId loss, const std::vector<ValueId>& ws, GradMode mode, uint8_t over,
                              bool higher_order, uint8_t own, DType reduce_dtype) {
  const ValueId first = *std::min_element(ws.begin(), ws.end());
  const ValueId end = loss + 1;  // forward values are [0, end); backward ones are appended after
  auto differentiable = [&](ValueId v) { return is_float(g.type(v).dtype); };

  // live[v]: v is on a path from some w to the loss, along which gradients flow.
  std::vector<bool> from_w(size_t(end), false), live(size_t(end), false);
  for (ValueId w : ws)
    if (w < end) from_w[size_t(w)] = true;
  for (ValueId v = first; v < end; ++v) {
    const Node& n = g[v];
    if (from_w[size_t(v)] || !is_differentiable(n.op) || !differentiable(v)) continue;
    for (size_t i = 0; i < n.args.size(); ++i)
      if (from_w[size_t(n.args[i])] && flows_to(n, i)) from_w[size_t(v)] = true;
  }
  if (from_w[size_t(loss)]) live[size_t(loss)] = true;
  for (ValueId v = loss; v >= first; --v) {
    const Node& n = g[v];
    if (!live[size_t(v)] || !is_differentiable(n.op)) continue;
    for (size_t i = 0; i < n.args.size(); ++i)
      if (from_w[size_t(n.args[i])] && flows_to(n, i)) live[size_t(n.args[i])] = true;
  }

  Ad ad(g);
  ad.set_reduce_dtype(reduce_dtype);
  ad.set_higher_order(higher_order);
  std::vector<ValueId> ct(size_t(loss) + 1, -1);  // per forward value: its cotangent so far, or -1
  auto accumulate = [&](ValueId v, ValueId c) {
    ct[size_t(v)] = ct[size_t(v)] < 0 ? c : ad.add(ct[size_t(v)], c);
    GRADC_ASSERT(g.type(ct[size_t(v)]) == g.type(v), "a cotangent of type {} for a value of type {}",
                 type_str(g.type(ct[size_t(v)])), type_str(g.type(v)));
  };
  if (live[size_t(loss)]) {
    // The seed: d L / d loss_r. The loss is the same along the axes not in `over`, so
    // with G the groups that share their coordinates on `over`, L = c sum_g sum(loss_g)
    // = (c / M) sum_r sum(loss_r), M the ranks of a group and c 1 for sum, 1/|G| for
    // mean: 1 for mode=sum, 1/N for mean and for global (over no axis).
    const int groups = mask_size(g, over);
    const double c = mode == GradMode::Mean ? 1.0 / groups : 1.0;
    ad.begin(loss, {});
    ct[size_t(loss)] = ad.constant(g.type(loss), c / double(g.world / groups));
  }
  for (ValueId v = loss; v >= first; --v) {
    if (ct[size_t(v)] < 0 || !live[size_t(v)] || !is_differentiable(g[v].op)) continue;
    const std::vector<ValueId> args = g[v].args;  // a copy: the rule appends nodes
    const Op op = g[v].op;
    std::vector<bool> need(args.size());
    bool any = false;
    for (size_t i = 0; i < args.size(); ++i) any |= need[i] = live[size_t(args[i])] && flows_to(g[v], i);
    if (!any) continue;
    std::vector<ValueId> cts(args.size(), -1);
    ad.begin(v, need);
    derivatives()[op](ad, v, ct[size_t(v)], cts);
    for (size_t i = 0; i < args.size(); ++i)
      if (need[i]) {
        GRADC_ASSERT(cts[i] >= 0, "{}: derivative rule gave no cotangent for operand {}", op_name(op), i);
        cts[i] = ad.cotangent(i, cts[i]);
      }
    ad.end_rule();
    for (size_t i = 0; i < args.size(); ++i)
      if (need[i]) {
        GRADC_ASSERT(g.type(cts[i]) == g.type(args[i]), "{}: cotangent {} for operand of type {}", op_name(op),
                     type_str(g.type(cts[i])), type_str(g.type(args[i])));
        accumulate(args[i], cts[i]);
      }
  }

  std::vector<ValueId> out;
  for (ValueId w : ws) {
    ad.begin(w, {});
    ValueId r = w <= loss && ct[size_t(w)] >= 0 ? ct[size_t(w)] : ad.zeros(g.type(w));
    // A value replicated along axes R (a shared input, an all_reduce's result) is one
    // variable for the ranks that differ only along R, as in JAX: its gradient is the
    // total over them.
    const uint8_t R = uint8_t(full_mask(g) & ~g[w].rep.axes() & ~own);
    if (R) {
      if (!g[r].rep.varies_along(R)) {
        r = ad.mul(r, double(mask_size(g, R)));
      } else {
        Attrs a;
        a.set("op", Attr::of_sym("sum"));
        if (R != full_mask(g)) a.set("over", over_attr(g, R));
        r = ad.collective(Op::AllReduce, r, a);
      }
    }
    out.push_back(r);
  }
  return out;
}

// No grad is left to read a given derivative: each becomes its value (which takes its
// name), and its factors, which only the backward graphs read, dead code. info's values
// move with the nodes.
Graph without_given_derivatives(Graph g, std::vector<GradInfo>* info) {
  const size_t n = g.nodes.size();
  std::vector<bool> keep(n, true);
  std::vector<ValueId> repl(n);
  bool any = false;
  for (size_t v = 0; v < n; ++v) {
    const Node& node = g.nodes[v];
    repl[v] = ValueId(v);
    if (node.op != Op::GivenDerivative) continue;
    any = true;
    keep[v] = false;
    repl[v] = repl[size_t(node.args[0])];
    Node& value = g.nodes[size_t(repl[v])];
    if (value.name.empty()) value.name = node.name;
  }
  if (!any) return g;
  std::vector<ValueId> moved(n);
  g = rebuild(std::move(g), keep, repl, &moved);
  if (info)
    for (GradInfo& i : *info)
      for (ValueId* v : {&i.loss, &i.w, &i.result}) *v = moved[size_t(*v)];
  return g;
}

}  // namespace

Graph autodiff(Graph g, std::vector<GradInfo>* info) {
  // again[v]: v feeds the loss of some grad, so a gradient that v depends on is
  // differentiated again.
  std::vector<bool> again(g.nodes.size(), false);
  for (const Node& n : g.nodes)
    if (n.op == Op::Grad) again[size_t(n.args[0])] = true;
  for (size_t v = g.nodes.size(); v-- > 0;)
    if (again[v])
      for (ValueId a : g.nodes[v].args) again[size_t(a)] = true;

  // In place: the nodes before the first grad keep their places, and the others
  // (`in`) are appended again after them, each grad replaced by its backward graph.
  // The node array has room for the backward graphs (the frontend reserves it), so
  // it is not copied.
  const size_t count = g.nodes.size();
  std::vector<ValueId> remap(count, -1);
  size_t first = 0;
  for (; first < count && g.nodes[first].op != Op::Grad; ++first) {
    g.nodes[first].rep = infer_rep(g, g.nodes[first]);
    remap[first] = ValueId(first);
  }
  std::vector<Node> in(std::make_move_iterator(g.nodes.begin() + long(first)), std::make_move_iterator(g.nodes.end()));
  g.nodes.resize(first);
  if (g.nodes.capacity() < count * 6) g.nodes.reserve(count * 6);  // unused pages cost nothing
  // Node i as given (a moved node keeps its op; grads are never moved).
  auto given = [&](size_t i) -> const Node& { return i < first ? g.nodes[i] : in[i - first]; };
  for (size_t i = first; i < count; ++i) {
    Node& n = in[i - first];
    if (n.op != Op::Grad) {
      Node c = std::move(n);
      for (ValueId& a : c.args) a = remap[size_t(a)];
      if (c.grad_of >= 0) c.grad_of = remap[size_t(c.grad_of)];
      c.rep = infer_rep(g, c);
      remap[i] = g.append(std::move(c));
      continue;
    }
    // grad(loss, a, b) lowers to consecutive grad nodes: one sweep serves them all.
    size_t j = i;
    std::vector<ValueId> ws;
    const GradMode mode = grad_mode_of(n);
    const uint8_t over = grad_over(g, n);
    const uint8_t own = own_axes(n);
    while (j < count && given(j).op == Op::Grad && given(j).args[0] == n.args[0] && grad_mode_of(given(j)) == mode &&
           grad_over(g, given(j)) == over && own_axes(given(j)) == own &&
           reduce_dtype_of(given(j)) == reduce_dtype_of(n)) {
      ws.push_back(remap[size_t(given(j).args[1])]);
      ++j;
    }
    ValueId loss = remap[size_t(n.args[0])];
    // Along the axes not in `over` the loss must be replicated: each distinct value counts once.
    if (const uint8_t bad = uint8_t(g[loss].rep.axes() & ~over)) {
      const Node& origin = g[variation_origin(g, loss, bad)];
      const std::string& named = given(size_t(n.args[0])).op == Op::Grad ? given(size_t(n.args[0])).name : g[loss].name;
      std::string lname = named.empty() ? "the loss" : "'" + named + "'";
      const bool mesh = !g.mesh.axes.empty();
      throw UserError(origin.loc,
                      fmt::format("grad: {} needs a loss that is identical {}, but {} differs {}: the ranks' values "
                                  "start to differ at {}",
                                  mode == GradMode::Global ? "mode=global" : "over=[" + axes_str(g, over) + "]",
                                  over == 0 ? "on every rank" : "along " + axes_str(g, uint8_t(full_mask(g) & ~over)),
                                  lname, mesh ? "along " + axes_str(g, bad) : "per rank", describe_origin(origin)));
    }
    bool higher_order = false;
    for (size_t k = i; k < j; ++k) higher_order |= again[k];
    std::vector<ValueId> results = backward(g, loss, ws, mode, over, higher_order, own, reduce_dtype_of(n));
    for (size_t k = i; k < j; ++k) {
      ValueId r = results[k - i];
      // Two gradients can be one value (grad(loss, y, x) with y = x + 2): it keeps the first's name.
      if (g[r].grad_of < 0 && g[r].backward) {
        if (g[r].name.empty()) g[r].name = given(k).name;
        g[r].grad_of = ws[k - i];
      }
      remap[k] = r;
      if (info) info->push_back({loss, ws[k - i], r, mode, given(k).name, given(k).loc, over, own});
    }
    i = j - 1;
  }
  for (auto& o : g.outputs) o.second = remap[size_t(o.second)];
  return without_given_derivatives(std::move(g), info);
}

Graph autodiff(Graph g) { return autodiff(std::move(g), nullptr); }

Graph replication(Graph g) {
  for (Node& n : g.nodes) n.rep = infer_rep(g, n);
  return g;
}

}  // namespace gradc
