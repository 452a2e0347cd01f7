// The single-process reference (`gradc verify`): an N-rank graph rewritten as
// one process that holds every rank's values. Each value v becomes N values
// v#0 .. v#N-1; each collective becomes its local meaning on those copies
// (docs/language.md section 5: sums, concatenations, slices); each grad becomes the
// gradient of the one objective (sum, mean or global over the ranks' losses)
// with respect to each rank's copy. No collective is left, so the autodiff
// pass differentiates it with local rules only, independently of the
// collectives' derivative rules that it checks.
#include "passes/unroll.h"

#include "passes/autodiff.h"

#include <map>
#include <set>

#include "ir/collectives.h"
#include "ir/mesh.h"
#include "ir/rules.h"

namespace gradc {
namespace {

class Unroller {
 public:
  explicit Unroller(const Graph& g) : src_(g), N_(g.world), copy_(g.nodes.size()) { out_.g.world = 1; }

  Unrolled run() {
    for (size_t i = 0; i < src_.nodes.size(); ++i) node(ValueId(i));
    return std::move(out_);
  }

 private:
  Graph& g() { return out_.g; }
  ValueId emit_(Op op, std::vector<ValueId> args, Attrs attrs = {}) {
    return emit(g(), op, std::move(args), std::move(attrs), loc_);
  }
  ValueId constant(const Type& t, double v) { return g().append(const_node(t, v, loc_)); }
  ValueId reshape(ValueId v, const Shape& s) {
    Attrs a;
    a.set("shape", Attr::of_ints(s));
    return emit_(Op::Reshape, {v}, a);
  }
  ValueId concat(const std::vector<ValueId>& xs, int64_t axis) {
    Attrs a;
    a.set("axis", Attr::of_int(axis));
    return emit_(Op::Concat, xs, a);
  }
  // block b of N along the axis
  ValueId block(ValueId v, int64_t axis, int64_t b, int64_t N) {
    Shape s = g().type(v).shape;
    std::vector<int64_t> starts(s.size(), 0), ends = s;
    int64_t len = s[size_t(axis)] / N;
    starts[size_t(axis)] = b * len;
    ends[size_t(axis)] = (b + 1) * len;
    Attrs a;
    a.set("starts", Attr::of_ints(starts));
    a.set("ends", Attr::of_ints(ends));
    return emit_(Op::Slice, {v}, a);
  }
  // op over the ranks' copies: sums and products as chains of adds and muls
  // (rank order), max and min as one reduction over a stacked axis, so that
  // ties split evenly among all ranks as the language says.
  ValueId reduce_ranks(const std::vector<ValueId>& xs, Reduction op) {
    if (op == Reduction::Max || op == Reduction::Min) {
      std::vector<ValueId> rows;
      for (ValueId x : xs) {
        Shape s = g().type(x).shape;
        s.insert(s.begin(), 1);
        rows.push_back(reshape(x, s));
      }
      Attrs a;
      a.set("axes", Attr::of_ints({0}));
      return emit_(op == Reduction::Max ? Op::ReduceMax : Op::ReduceMin, {concat(rows, 0)}, a);
    }
    ValueId acc = xs[0];
    for (size_t k = 1; k < xs.size(); ++k) acc = emit_(op == Reduction::Prod ? Op::Mul : Op::Add, {acc, xs[k]});
    if (op == Reduction::Avg) acc = emit_(Op::Div, {acc, constant(Type{g().type(acc).dtype, {}}, double(xs.size()))});
    return acc;
  }
  std::vector<ValueId>& copies(ValueId v) { return copy_[size_t(v)]; }

  void node(ValueId i) {
    const Node& n = src_[i];
    loc_ = n.loc;
    std::vector<ValueId>& out = copy_[size_t(i)];
    switch (n.op) {
      case Op::Rank:
        for (int r = 0; r < N_; ++r)
          out.push_back(
              constant(Type{DType::I32, {}}, n.attrs.has("over") ? group_rank(src_, r, over_axes(src_, n)) : r));
        return;
      case Op::Input: {
        // one variable for the ranks of each group it is shared along (all ranks for
        // `shared`, each rank its own for a per-rank input)
        const bool all = shared_everywhere(n);
        out.assign(size_t(N_), -1);
        for (const std::vector<int>& group : mesh_groups(src_, shared_axes(src_, n))) {
          const int r = group[0];
          Node c = n;
          c.args.clear();
          if (!n.args.empty()) c.args.push_back(copies(n.args[0])[size_t(r)]);
          std::string name = all ? n.attr_sym("name") : unrolled_input_name(n.attr_sym("name"), r);
          Attrs a;  // shared(A) names axes the reference, one process, does not have
          for (const auto& [k, v] : n.attrs->items)
            if (k != "shared" || all) a.set(k, v);
          c.attrs = a;
          c.attrs.set("name", Attr::of_str(name));
          c.name = name;
          const ValueId v = g().append(std::move(c));
          for (int q : group) out[size_t(q)] = v;
        }
        return;
      }
      case Op::Grad: return grad(n, out);
      default: break;
    }
    if (is_collective(n.op)) {  // in each group, as on a world of the group's ranks
      out.assign(size_t(N_), -1);
      for (const std::vector<int>& group : mesh_groups(src_, over_axes(src_, n))) {
        std::vector<ValueId> xs;
        for (int r : group) xs.push_back(copies(n.args[0])[size_t(r)]);
        std::vector<ValueId> ys = collective(n, xs);
        for (size_t k = 0; k < group.size(); ++k) out[size_t(group[k])] = ys[k];
      }
      return;
    }
    for (int r = 0; r < N_; ++r) {
      Node c = n;
      for (ValueId& a : c.args) a = copies(a)[size_t(r)];
      c.rep = Rep::Unknown;
      c.type = infer_type(g(), c);
      out.push_back(g().append(std::move(c)));
    }
  }

  // A collective's local meaning on the copies xs of its group's ranks, read from its
  // routing (ir/collectives.h): rank r's result is the reduction (op=, sum by default)
  // of what the routing sends it, or their concatenation where it fills blocks of its
  // result, or zeros where it receives nothing. `gradc prove` checks each routing
  // against the interpreter's kernel (runtime/comm.cpp), written independently.
  std::vector<ValueId> collective(const Node& n, const std::vector<ValueId>& xs) {
    const int N = int(xs.size());
    const Term t = routing(n, N);
    const Reduction op = reduction_of(n);
    // the same value for every destination: computed once
    const bool same = !t.has_pairs && t.src.axis < 0 && t.dst.root < 0;
    std::vector<ValueId> out;
    for (int r = 0; r < N; ++r) {
      if (same && r > 0) {
        out.push_back(out[0]);
        continue;
      }
      std::vector<int64_t> from;
      if (t.dst.root >= 0 && r != t.dst.root) {
        // only the root receives
      } else if (t.has_pairs) {
        for (const auto& p : t.pairs)
          if (p[1] == r) from.push_back(p[0]);
      } else if (t.src.root >= 0) {
        from.push_back(t.src.root);
      } else {
        for (int k = 0; k < N; ++k) from.push_back(k);
      }
      std::vector<ValueId> parts;
      for (int64_t k : from) parts.push_back(t.src.axis < 0 ? xs[size_t(k)] : block(xs[size_t(k)], t.src.axis, r, N));
      if (parts.empty())
        out.push_back(constant(*n.type, 0));
      else
        out.push_back(t.dst.axis >= 0 ? concat(parts, t.dst.axis) : reduce_ranks(parts, op));
    }
    return out;
  }

  // The objective over all ranks' losses, then its gradient with respect to each
  // rank's copy of w (one gradient for a shared input: it is one variable; the total
  // of the copies' for a replicated intermediate).
  void grad(const Node& n, std::vector<ValueId>& out) {
    const GradMode mode = grad_mode_of(n);
    // The ranks' losses over `over` (docs/language.md section 8): each group that shares its
    // coordinates on `over` counts once, by its representative's loss.
    const uint8_t over = mode == GradMode::Global ? 0 : axes_mask(over_axes(src_, n));
    const std::vector<ValueId>& loss = copies(n.args[0]);
    auto total = [&](ValueId v) {
      std::vector<int64_t> axes;
      for (int d = 0; d < g().type(v).rank(); ++d) axes.push_back(d);
      Attrs a;
      a.set("axes", Attr::of_ints(axes));
      return emit_(Op::ReduceSum, {v}, a);
    };
    const std::vector<int> reps = loss_representatives(src_, over);
    ValueId L = total(loss[size_t(reps[0])]);
    for (size_t k = 1; k < reps.size(); ++k) L = emit_(Op::Add, {L, total(loss[size_t(reps[k])])});
    if (mode == GradMode::Mean) L = emit_(Op::Div, {L, constant(Type{g().type(L).dtype, {}}, double(reps.size()))});
    const std::vector<ValueId>& w = copies(n.args[1]);
    Attrs a;
    a.set("mode", Attr::of_sym("sum"));
    std::vector<int> index;
    std::map<ValueId, int> first;  // a shared input's one copy: one gradient
    for (int r = 0; r < N_; ++r) {
      if (auto it = first.find(w[size_t(r)]); it != first.end()) {
        out.push_back(out[size_t(it->second)]);
        index.push_back(index[size_t(it->second)]);
        continue;
      }
      first[w[size_t(r)]] = r;
      out.push_back(emit_(Op::Grad, {L, w[size_t(r)]}, a));
      index.push_back(grad_count_++);
    }
    out_.grads.push_back(index);
    // A w replicated along R is one variable for each group of ranks that differ only
    // along R (docs/language.md section 8): every rank's gradient is the total over the
    // group's distinct copies, as the program computes it (grads lists the parts).
    const uint8_t R = uint8_t(full_mask(src_) & ~src_[n.args[1]].rep.axes());
    if (R)
      for (const std::vector<int>& group : groups_along(src_, R)) {
        std::set<ValueId> seen;
        ValueId sum = -1;
        for (int q : group)
          if (seen.insert(w[size_t(q)]).second) sum = sum < 0 ? out[size_t(q)] : emit_(Op::Add, {sum, out[size_t(q)]});
        for (int q : group) out[size_t(q)] = sum;
      }
  }

  const Graph& src_;
  int N_;
  std::vector<std::vector<ValueId>> copy_;
  Unrolled out_;
  Loc loc_;
  int grad_count_ = 0;
};

}  // namespace

std::string unrolled_input_name(const std::string& name, int rank) { return name + "#" + std::to_string(rank); }

Unrolled unroll(const Graph& g) {
  const Graph with_reps = replication(g);  // which values are one variable
  return Unroller(with_reps).run();
}

}  // namespace gradc
