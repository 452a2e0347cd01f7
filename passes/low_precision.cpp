// low-precision: the rounding rule of bf16 and f16 (docs/language.md, "Low
// precision") written into the graph, so that the kernels compute f32 only. Each op
// with a bf16 or f16 result becomes its f32 op on widened operands, then a cast that
// rounds its result once, which is what the interpreter does op by op
// (runtime/kernels.cpp: run_local). What only moves values (inputs, views, take and
// the collectives that reduce nothing) stays in the storage type, so a gathered bf16
// tensor moves two bytes an element. A reduction over ranks (all_reduce,
// reduce_scatter, reduce with op=sum, avg or prod) becomes exchanges of the storage
// type and a sum in rank order on the receiving rank: in f32, rounded once
// (accum=f32), or rounded after each rank's term (accum=same). A reduce_scatter is then
// an all_to_all and the sum, the bytes of a ring reduce_scatter; an all_reduce that
// reduce_scatter followed by an all_gather. A rounding that cannot change its value
// (of neg, abs, relu, sign, maximum, minimum or where of values of its type) is not
// made where the value's one reader computes in f32: it reads the f32 value itself (a
// value of several readers keeps its rounding, so that a kernel that stores it stores
// the narrow type). Runs last before lower-kernels: nothing after it may merge a
// rounding cast with its neighbours.
#include <map>

#include "ir/mesh.h"
#include "passes/pass.h"

namespace gradc {
namespace {

class Widen {
 public:
  explicit Widen(const Graph& g) : in_(g) {
    out_.world = g.world;
    out_.mesh = g.mesh;
    out_.sizes = g.sizes;
    wide_.assign(g.nodes.size(), -1);
    readers_.assign(g.nodes.size(), 0);
    for (const Node& n : g.nodes)
      for (ValueId a : n.args) ++readers_[size_t(a)];
    for (const auto& o : g.outputs) ++readers_[size_t(o.second)];
  }

  Graph run() {
    map_.reserve(in_.nodes.size());
    for (size_t i = 0; i < in_.nodes.size(); ++i) map_.push_back(node(ValueId(i), in_.nodes[i]));
    for (const auto& [name, v] : in_.outputs) out_.outputs.emplace_back(name, map_[size_t(v)]);
    return replication(std::move(out_));
  }

 private:
  // A node of the new graph made from `like` (its location, and whether it is part of a gradient).
  ValueId add(Op op, std::vector<ValueId> args, Attrs attrs, const Node& like) {
    const ValueId v = emit(out_, op, std::move(args), std::move(attrs), like.loc);
    out_[v].backward = like.backward;
    out_[v].fwd_op = like.fwd_op;
    return v;
  }
  ValueId cast(ValueId v, DType to, const Node& like) {
    Attrs a;
    a.set("to", Attr::of_sym(dtype_name(to)));
    return add(Op::Cast, {v}, a, like);
  }
  // Old value v's new value, as f32 where it is bf16 or f16 (one cast per value).
  ValueId f32(ValueId v, const Node& like) {
    const ValueId m = map_[size_t(v)];
    if (!is_low_precision(out_.type(m).dtype)) return m;
    if (wide_[size_t(v)] < 0) {
      wide_[size_t(v)] = cast(m, DType::F32, like);
      exact_[wide_[size_t(v)]] = out_.type(m).dtype;
    }
    return wide_[size_t(v)];
  }
  bool exact_in(ValueId v, DType t) const {
    const auto it = exact_.find(v);
    return it != exact_.end() && it->second == t;
  }
  // Whether n's f32 op on new values `args` gives a value of type t exactly: an op that
  // only negates or picks among its operands, on values of t.
  bool keeps_exact(const Node& n, const std::vector<ValueId>& args, DType t) const {
    switch (n.op) {
      case Op::Neg:
      case Op::Abs:
      case Op::Relu:
      case Op::Sign:
      case Op::StopGradient:
      case Op::Maximum:
      case Op::Minimum: break;
      case Op::Where: return exact_in(args[1], t) && exact_in(args[2], t);
      default: return false;
    }
    for (ValueId a : args)
      if (!exact_in(a, t)) return false;
    return true;
  }
  ValueId copy(const Node& n, std::vector<ValueId> args, const Type& t) {
    Node m = n;
    m.args = std::move(args);
    m.type = t;
    m.grad_of = -1;
    return out_.append(std::move(m));
  }

  ValueId node(ValueId old, const Node& n) {
    std::vector<ValueId> same;
    bool low_arg = false;
    for (ValueId a : n.args) {
      same.push_back(map_[size_t(a)]);
      low_arg |= is_low_precision(in_.type(a).dtype);
    }
    const DType t = n.type->dtype;
    ValueId r;
    if (!is_low_precision(t) && !low_arg) {
      r = copy(n, same, n.type);
      if (t == DType::F32)  // autodiff's f32 ops between a widening and a rounding
        for (DType low : {DType::BF16, DType::F16})
          if (keeps_exact(n, same, low)) exact_[r] = low;
    } else if (moves_values(n.op)) {
      r = copy(n, same, n.type);
    } else if (n.op == Op::Cast) {
      const DType from = in_.type(n.args[0]).dtype;
      if (is_low_precision(t) && from == DType::F32) {
        r = copy(n, same, n.type);  // the one rounding itself
        if (exact_in(same[0], t) && readers_[size_t(old)] == 1) wide_[size_t(old)] = same[0];
      } else if (is_low_precision(from) && t == DType::F32) {
        const ValueId w = wide_[size_t(n.args[0])];
        if (n.name.empty() && n.grad_of < 0 && w >= 0 && out_[w].op != Op::Cast)
          return w;                 // the f32 value whose rounding was exact
        r = copy(n, same, n.type);  // the exact widening
        exact_[r] = from;
      } else if (is_low_precision(t))
        r = cast(is_low_precision(from) ? f32(n.args[0], n) : cast(same[0], DType::F32, n), t, n);
      else
        r = cast(f32(n.args[0], n), t, n);
    } else if (is_low_precision(t) && (n.op == Op::AllReduce || n.op == Op::ReduceScatter || n.op == Op::Reduce) &&
               reduction_of(n) != Reduction::Max && reduction_of(n) != Reduction::Min) {
      r = rank_sum(n, same[0]);
    } else {
      std::vector<ValueId> args;
      for (ValueId a : n.args) args.push_back(f32(a, n));
      Node m = n;
      if (m.attrs.has("accum")) {  // an f32 collective (max and min: exact in either type)
        Attrs a;
        for (const auto& kv : m.attrs->items)
          if (kv.first != "accum") a.set(kv.first, kv.second);
        m.attrs = AttrsRef(a);
      }
      const ValueId w = copy(m, args, is_low_precision(t) ? Type{DType::F32, n.type->shape} : Type(n.type));
      r = is_low_precision(t) ? cast(w, t, n) : w;
      if (is_low_precision(t) && keeps_exact(n, args, t) && readers_[size_t(old)] == 1) {
        exact_[w] = t;
        wide_[size_t(old)] = w;  // its readers in f32 skip the rounding
      }
    }
    out_[r].name = n.name;
    out_[r].grad_of = n.grad_of >= 0 ? map_[size_t(n.grad_of)] : -1;
    return r;
  }

  // Attributes of an exchange over n's group.
  static Attrs over(const Node& n) {
    Attrs a;
    if (const Attr* o = n.attrs.find("over")) a.set("over", *o);
    return a;
  }
  ValueId reshape(ValueId v, const Shape& s, const Node& like) {
    if (out_.type(v).shape == s) return v;
    Attrs a;
    a.set("shape", Attr::of_ints(s));
    return add(Op::Reshape, {v}, a, like);
  }
  // Row k of v along axis d, without that axis.
  ValueId row(ValueId v, int d, int64_t k, const Node& like) {
    const Shape s = out_.type(v).shape;
    std::vector<int64_t> start(s.size(), 0), end(s.begin(), s.end());
    start[size_t(d)] = k;
    end[size_t(d)] = k + 1;
    Attrs a;
    a.set("starts", Attr::of_ints(start));
    a.set("ends", Attr::of_ints(end));
    Shape r = s;
    r.erase(r.begin() + d);
    return reshape(add(Op::Slice, {v}, a, like), r, like);
  }
  ValueId scalar(double x, const Node& like) { return out_.append(const_node(Type{DType::F32, {}}, x, like.loc)); }
  ValueId binary(Op op, ValueId a, ValueId b, const Node& like) { return add(op, {a, b}, {}, like); }

  // The rows of `parts` along axis d (rank k's term in row k) combined in rank order as
  // n's reduction and accum= say: the f32 total, which rounds to n's type exactly once more.
  ValueId combine(const Node& n, ValueId parts, int d) {
    const DType t = n.type->dtype;
    const Reduction how = reduction_of(n);
    const bool same = n.attrs.has("accum") && n.attr_sym("accum") == "same";
    const Op op = how == Reduction::Prod ? Op::Mul : Op::Add;
    const int64_t N = out_.type(parts).shape[size_t(d)];
    ValueId acc = cast(row(parts, d, 0, n), DType::F32, n);
    for (int64_t k = 1; k < N; ++k) {
      acc = binary(op, acc, cast(row(parts, d, k, n), DType::F32, n), n);
      if (same) acc = cast(cast(acc, t, n), DType::F32, n);
    }
    // accum=same sums the rounded total again with the other ranks' zeros (the
    // interpreter's order: a -0 total becomes +0), then divides for avg, in f32
    if (same && how != Reduction::Prod && N > 1) acc = binary(Op::Add, acc, scalar(0, n), n);
    if (how == Reduction::Avg) acc = binary(Op::Div, acc, scalar(double(N), n), n);
    return acc;
  }
  // A reduction over ranks of bf16 or f16 values (op=sum, avg or prod), as exchanges
  // of x in its own type and combine() on the receiving rank.
  ValueId rank_sum(const Node& n, ValueId x) {
    const DType t = n.type->dtype;
    const int64_t N = group_size(in_, n);
    const Shape s = out_.type(x).shape;
    const int64_t count = out_.type(x).size();
    if (n.op == Op::ReduceScatter) {
      const int64_t axis = n.attr_int("axis");
      return cast(reduce_scatter(n, x, int(axis < 0 ? axis + int64_t(s.size()) : axis)), t, n);
    }
    if (n.op == Op::AllReduce && count % N == 0 && count > 0) {
      const ValueId mine = cast(reduce_scatter(n, reshape(x, {count}, n), 0), t, n);
      Attrs a = over(n);
      a.set("axis", Attr::of_int(0));
      return reshape(add(Op::AllGather, {mine}, a, n), s, n);
    }
    // every rank's x gathered ([N] + s), combined on every rank; reduce keeps it on the root
    Shape one = s;
    one.insert(one.begin(), 1);
    Attrs a = over(n);
    a.set("axis", Attr::of_int(0));
    ValueId total = combine(n, add(Op::AllGather, {reshape(x, one, n)}, a, n), 0);
    if (n.op == Op::Reduce) {
      const ValueId me = add(Op::Rank, {}, over(n), n);
      const ValueId root = out_.append(const_node(Type{DType::I32, {}}, double(n.attr_int("root")), n.loc));
      total = add(Op::Where, {binary(Op::Eq, me, root, n), total, scalar(0, n)}, {}, n);
    }
    return cast(total, t, n);
  }
  // reduce_scatter along axis d: block r of every rank's x moved to rank r by an
  // all_to_all into a new axis d ([.., N, L/N, ..]), then combined along it.
  ValueId reduce_scatter(const Node& n, ValueId x, int d) {
    Shape s = out_.type(x).shape;
    Shape split = s;
    split.insert(split.begin() + d, 1);
    Attrs a = over(n);
    a.set("split_axis", Attr::of_int(d + 1));
    a.set("concat_axis", Attr::of_int(d));
    return combine(n, add(Op::AllToAll, {reshape(x, split, n)}, a, n), d);
  }

  const Graph& in_;
  Graph out_;
  std::vector<ValueId> map_;        // per old value: its new value
  std::vector<ValueId> wide_;       // per old bf16 or f16 value: its f32 value (a cast, once made)
  std::map<ValueId, DType> exact_;  // new f32 values that hold a value of a bf16 or f16 type exactly
  std::vector<int> readers_;        // per old value: the ops (and outputs) that read it
};

}  // namespace

Graph widen_low_precision(Graph g) {
  bool any = false;
  for (const Node& n : g.nodes) any |= is_low_precision(n.type->dtype);
  if (!any) return g;
  return dce(Widen(g).run());  // the roundings no reader needs
}

}  // namespace gradc
