// The single-process reference (`gradc verify`): an N-rank graph rewritten as
// one process that holds every rank's values. Each value v becomes N values
// v#0 .. v#N-1; each collective becomes its local meaning on those copies
// (LANGUAGE.md section 5: sums, concatenations, slices); each grad becomes the
// gradient of the one objective (sum, mean or global over the ranks' losses)
// with respect to each rank's copy. No collective is left, so the autodiff
// pass differentiates it with local rules only, independently of the
// collectives' derivative rules that it checks.
#include "passes/unroll.h"

#include "passes/autodiff.h"

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
  ValueId block(ValueId v, int64_t axis, int64_t b) {
    Shape s = g().type(v).shape;
    std::vector<int64_t> starts(s.size(), 0), ends = s;
    int64_t len = s[size_t(axis)] / N_;
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
    if (op == Reduction::Avg) acc = emit_(Op::Div, {acc, constant(Type{g().type(acc).dtype, {}}, N_)});
    return acc;
  }
  std::vector<ValueId>& copies(ValueId v) { return copy_[size_t(v)]; }
  std::vector<ValueId> same(ValueId v) { return std::vector<ValueId>(size_t(N_), v); }

  void node(ValueId i) {
    const Node& n = src_[i];
    loc_ = n.loc;
    std::vector<ValueId>& out = copy_[size_t(i)];
    std::vector<ValueId> xs;
    if (!n.args.empty()) xs = copies(n.args[0]);
    auto axis = [&](const char* k) {
      int64_t a = n.attr_int(k);
      return a < 0 ? a + src_.type(n.args[0]).rank() : a;
    };
    auto op_of = [&]() { return reduction_of(n); };
    switch (n.op) {
      case Op::Rank:
        for (int r = 0; r < N_; ++r) out.push_back(constant(Type{DType::I32, {}}, r));
        return;
      case Op::Input: {
        bool shared = n.attrs.has("shared");
        for (int r = 0; r < N_; ++r) {
          if (shared && r > 0) {
            out.push_back(out[0]);
            continue;
          }
          Node c = n;
          c.args.clear();
          if (!n.args.empty()) c.args.push_back(xs[size_t(r)]);
          std::string name = shared ? n.attr_sym("name") : unrolled_input_name(n.attr_sym("name"), r);
          c.attrs.set("name", Attr::of_str(name));
          c.name = name;
          out.push_back(g().append(std::move(c)));
        }
        return;
      }
      case Op::AllReduce: out = same(reduce_ranks(xs, op_of())); return;
      case Op::AllGather: out = same(concat(xs, axis("axis"))); return;
      case Op::ReduceScatter: {
        ValueId total = reduce_ranks(xs, op_of());
        for (int r = 0; r < N_; ++r) out.push_back(block(total, axis("axis"), r));
        return;
      }
      case Op::Broadcast: out = same(xs[size_t(n.attr_int("root"))]); return;
      case Op::Reduce:
      case Op::Gather: {
        ValueId root_value = n.op == Op::Reduce ? reduce_ranks(xs, op_of()) : concat(xs, axis("axis"));
        ValueId zero = constant(g().type(root_value), 0);
        out = same(zero);
        out[size_t(n.attr_int("root"))] = root_value;
        return;
      }
      case Op::Scatter:
        for (int r = 0; r < N_; ++r) out.push_back(block(xs[size_t(n.attr_int("root"))], axis("axis"), r));
        return;
      case Op::AllToAll:
        for (int r = 0; r < N_; ++r) {
          std::vector<ValueId> parts;
          for (int k = 0; k < N_; ++k) parts.push_back(block(xs[size_t(k)], axis("split_axis"), r));
          out.push_back(concat(parts, axis("concat_axis")));
        }
        return;
      case Op::Permute: {
        out = same(constant(src_.type(i), 0));
        for (const auto& p : n.attr_int_lists("pairs")) out[size_t(p[1])] = xs[size_t(p[0])];
        return;
      }
      case Op::Grad: return grad(n, out);
      default: break;
    }
    GRADC_ASSERT(!is_collective(n.op), "unroll: no local meaning for {}", op_name(n.op));
    for (int r = 0; r < N_; ++r) {
      Node c = n;
      for (ValueId& a : c.args) a = copies(a)[size_t(r)];
      c.rep = Rep::Unknown;
      c.type = infer_type(g(), c);
      out.push_back(g().append(std::move(c)));
    }
  }

  // The objective over all ranks' losses, then its gradient with respect to each
  // rank's copy of w (one gradient for a shared input: it is one variable; the total
  // of the copies' for a replicated intermediate).
  void grad(const Node& n, std::vector<ValueId>& out) {
    const GradMode mode = grad_mode_of(n);
    const std::vector<ValueId>& loss = copies(n.args[0]);
    auto total = [&](ValueId v) {
      std::vector<int64_t> axes;
      for (int d = 0; d < g().type(v).rank(); ++d) axes.push_back(d);
      Attrs a;
      a.set("axes", Attr::of_ints(axes));
      return emit_(Op::ReduceSum, {v}, a);
    };
    ValueId L;
    if (mode == GradMode::Global) {
      L = total(loss[0]);  // the loss is the same on every rank
    } else {
      L = total(loss[0]);
      for (int r = 1; r < N_; ++r) L = emit_(Op::Add, {L, total(loss[size_t(r)])});
      if (mode == GradMode::Mean) L = emit_(Op::Div, {L, constant(Type{g().type(L).dtype, {}}, N_)});
    }
    const std::vector<ValueId>& w = copies(n.args[1]);
    Attrs a;
    a.set("mode", Attr::of_sym("sum"));
    std::vector<int> index;
    for (int r = 0; r < N_; ++r) {
      if (r > 0 && w[size_t(r)] == w[0]) {  // a shared input
        out.push_back(out[0]);
        index.push_back(index[0]);
        continue;
      }
      out.push_back(emit_(Op::Grad, {L, w[size_t(r)]}, a));
      index.push_back(grad_count_++);
    }
    out_.grads.push_back(index);
    // A replicated w is one variable (LANGUAGE.md section 6): every rank's gradient is
    // the total over its copies, as the program computes it (grads lists the parts).
    if (!src_[n.args[1]].rep.varies() && w[1 % size_t(N_)] != w[0]) {
      ValueId sum = out[0];
      for (int r = 1; r < N_; ++r) sum = emit_(Op::Add, {sum, out[size_t(r)]});
      out.assign(size_t(N_), sum);
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
