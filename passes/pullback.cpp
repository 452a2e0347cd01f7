// The torch target's two programs (linearize, passes/autodiff.h): the pullback program
// (the forward program, its outputs' cotangents as inputs, and grad nodes that the
// autodiff pass replaces as it does the program's own), split after autodiff into the
// values that do not depend on the cotangents (the forward op's) and those that do
// (the pullback op's), as JAX's linearize partially evaluates a JVP.
#include <fmt/format.h>

#include <set>

#include "ir/builder.h"
#include "ir/mesh.h"
#include "passes/autodiff.h"
#include "passes/pass.h"

namespace gradc {
namespace {

// A node's attributes but `key`.
Attrs without(const Node& n, const char* key) {
  Attrs a;
  for (const auto& [k, v] : n.attrs->items)
    if (k != key) a.set(k, v);
  return a;
}

}  // namespace

// The program with one more input per float output, its cotangent (names in `cts`), and
// the outputs y..., then grad_x... of L = sum over ranks of sum_y <y, ct_y> / copies_y.
// Along the axes not in `data_parallel` (Megatron's tensor, sequence and expert axes)
// every rank's copy of a value is one value: an output y replicated along some of them
// (its copies: the product of their sizes) counts once, so its cotangent must be the
// same on those ranks (the ct input is shared along them: the classes check it), and an
// input replicated along them is one variable (grad's own= holds the data-parallel axes
// only), whose gradient is the total. Along the data-parallel axes each rank's loss and
// inputs are its own (DDP then averages).
Graph pullback_program(Graph g, uint8_t data_parallel, std::set<std::string>& cts, const std::set<std::string>& only) {
  std::set<std::string> names;
  std::vector<ValueId> xs;
  for (ValueId v = 0; v < g.size(); ++v)
    if (g[v].op == Op::Input) {
      names.insert(g[v].attr_sym("name"));
      if (is_float(g.type(v).dtype) && (only.empty() || only.count(g[v].attr_sym("name")))) xs.push_back(v);
    }
  for (const auto& o : g.outputs) names.insert(o.first);
  auto fresh = [&](std::string n) {
    while (names.count(n)) n += "_";
    names.insert(n);
    return n;
  };
  const Graph reps = replication(g);
  const uint8_t one_loss = uint8_t(full_mask(g) & ~data_parallel);
  Builder b(g);
  ValueId loss = -1;
  for (const auto& [name, y] : std::vector(g.outputs)) {
    if (!is_float(g.type(y).dtype) || xs.empty()) continue;
    Node ct;
    ct.op = Op::Input;
    ct.type = g.type(y);
    ct.name = fresh("ct_" + name);
    ct.loc = g[y].loc;
    cts.insert(ct.name.str());
    ct.attrs.set("name", Attr::of_str(ct.name.str()));
    const uint8_t same = uint8_t(one_loss & ~reps[y].rep.axes());  // y is one value along these
    if (same) {
      ct.attrs.set("shared", same == full_mask(g) ? Attr::of_int(1) : over_attr(g, same));
      ct.attrs.set("cotangent", Attr::of_str(name));  // the classes' message names the output
    }
    const ValueId c = g.append(std::move(ct));
    std::vector<int64_t> axes(b.shape(y).size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
    // <y, ct_y>, summed in f64 whatever the outputs' dtypes
    ValueId dot = b.cast(b.reduce_sum(b.mul(y, c), axes), DType::F64);
    if (same) dot = b.mul(dot, 1.0 / mask_size(g, same));
    loss = loss < 0 ? dot : b.add(loss, dot);
  }
  if (loss < 0) return g;
  for (ValueId x : xs) {
    Attrs a;
    a.set("mode", Attr::of_sym("sum"));
    a.set("own", Attr::of_int(data_parallel));
    const std::string name = fresh("grad_" + g[x].attr_sym("name"));
    g.outputs.push_back({name, emit(g, Op::Grad, {loss, x}, a, g[x].loc, name)});
  }
  return g;
}

Graph own_as_unshared(Graph g, uint8_t data_parallel) {
  const uint8_t one_loss = uint8_t(full_mask(g) & ~data_parallel);
  for (Node& n : g.nodes) {
    if (n.op == Op::Grad) n.attrs = without(n, "own");
    if (n.op != Op::Input || !n.attrs.has("shared")) continue;
    const uint8_t along = uint8_t(axes_mask(shared_axes(g, n)) & one_loss);
    Attrs a = without(n, "shared");
    if (along) a.set("shared", along == full_mask(g) ? Attr::of_int(1) : over_attr(g, along));
    n.attrs = a;
  }
  return g;
}

namespace {

// Views and casts the pullback recomputes from a saved operand rather than save.
bool cheap(Op op) { return op == Op::BroadcastTo || op == Op::Reshape || op == Op::Transpose; }

}  // namespace

Linearized linearize(Graph g, uint8_t data_parallel, const std::set<std::string>& only, const PipelineOptions& opt) {
  const size_t outputs = g.outputs.size();
  std::set<std::string> ct_names;
  g = run_pipeline(run_pipeline(pullback_program(std::move(g), data_parallel, ct_names, only), Pipeline::Grad, opt),
                   Pipeline::Optimise, opt);
  if (g.outputs.size() == outputs) return {std::move(g), Graph{}, outputs};

  // tangent: depends on a cotangent; fixed: depends on no input and is no collective
  // (the pullback computes it again); the rest is the forward op's.
  const size_t n = g.nodes.size();
  std::vector<bool> tangent(n), fixed(n);
  for (size_t v = 0; v < n; ++v) {
    const Node& node = g.nodes[v];
    bool t = node.op == Op::Input && ct_names.count(node.attr_sym("name"));
    bool f = node.op != Op::Input && !is_collective(node.op);
    for (ValueId a : node.args) t |= tangent[size_t(a)], f &= fixed[size_t(a)];
    tangent[v] = t;
    fixed[v] = f && !t;
  }
  // The pullback: every tangent value, input and gradient, and what they read, computed again where
  // it is fixed, an input's default or a cheap view, else saved by the forward op.
  std::vector<bool> in_pullback(n), saved(n);
  // a gradient that depends on no cotangent (zero: an input no float output reads) too
  for (size_t k = outputs; k < g.outputs.size(); ++k) in_pullback[size_t(g.outputs[k].second)] = true;
  for (size_t v = n; v-- > 0;) {
    const Node& node = g.nodes[v];
    if (tangent[v] || node.op == Op::Input) in_pullback[v] = true;
    if (!in_pullback[v]) continue;
    for (ValueId a : node.args) {
      const Node& arg = g.nodes[size_t(a)];
      if (tangent[size_t(a)] || fixed[size_t(a)] || node.op == Op::Input || arg.op == Op::Input || cheap(arg.op))
        in_pullback[size_t(a)] = true;
      else
        saved[size_t(a)] = true;
    }
  }
  for (size_t v = 0; v < n; ++v) saved[v] = saved[v] && !in_pullback[v];

  Graph fwd = g, pb = std::move(g);
  // The forward op: the values that are not tangent; its outputs the program's, then
  // the saved values ("saved<k>_<name>"), which the pullback takes as inputs.
  std::vector<bool> keep(n);
  std::vector<ValueId> same(n);
  for (size_t v = 0; v < n; ++v) keep[v] = !tangent[v], same[v] = ValueId(v);
  fwd.outputs.resize(outputs);
  int k = 0;
  for (size_t v = 0; v < n; ++v) {
    if (!saved[v]) continue;
    std::string hint;
    for (char c : pb.nodes[v].name.str()) hint += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    const std::string name = fmt::format("saved{}{}{}", k++, hint.empty() ? "" : "_", hint);
    fwd.outputs.push_back({name, ValueId(v)});
    Node in;
    in.op = Op::Input;
    in.rep = pb.nodes[v].rep;
    in.type = pb.nodes[v].type;
    in.loc = pb.nodes[v].loc;
    in.name = name;
    in.attrs.set("name", Attr::of_str(name));
    pb.nodes[v] = std::move(in);
  }
  fwd = rebuild(std::move(fwd), keep, same);
  for (size_t v = 0; v < n; ++v) keep[v] = in_pullback[v] || saved[v];
  pb.outputs.erase(pb.outputs.begin(), pb.outputs.begin() + std::ptrdiff_t(outputs));
  pb = rebuild(std::move(pb), keep, same);
  // The program's shared inputs are checked by the forward op of the same step (autograd
  // refuses a saved input changed in place since), so the pullback checks its
  // cotangents only.
  for (Node& node : pb.nodes)
    if (node.op == Op::Input && node.attrs.has("shared") && !node.attrs.has("cotangent"))
      node.attrs = without(node, "shared");
  return {std::move(fwd), std::move(pb), outputs};
}

}  // namespace gradc
