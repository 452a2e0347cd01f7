#include "ir/collectives.h"

#include <algorithm>

#include "ir/print.h"

namespace gradc {

namespace {
Side whole() { return Side{-1, -1}; }
Side block(int64_t axis) { return Side{-1, axis}; }
Side at_root(int64_t root, int64_t axis = -1) { return Side{root, axis}; }
Term term(Side src, Side dst) {
  Term t;
  t.src = src;
  t.dst = dst;
  return t;
}
int64_t axis_attr(const Node& n, const char* key) {
  int64_t a = n.attr_int(key);
  return a < 0 ? a + n.type->rank() : a;
}
}  // namespace

Term routing(const Node& n, int world) {
  switch (n.op) {
    case Op::AllReduce: return term(whole(), whole());
    case Op::AllGather: return term(whole(), block(axis_attr(n, "axis")));
    case Op::ReduceScatter: return term(block(axis_attr(n, "axis")), whole());
    case Op::Broadcast: return term(at_root(n.attr_int("root")), whole());
    case Op::Reduce: return term(whole(), at_root(n.attr_int("root")));
    case Op::Gather: return term(whole(), at_root(n.attr_int("root"), axis_attr(n, "axis")));
    case Op::Scatter: return term(at_root(n.attr_int("root"), axis_attr(n, "axis")), whole());
    case Op::AllToAll: return term(block(axis_attr(n, "split_axis")), block(axis_attr(n, "concat_axis")));
    case Op::Permute: {
      Term t{whole(), whole(), true, n.attr_int_lists("pairs")};
      std::sort(t.pairs.begin(), t.pairs.end());
      return t;
    }
    default: break;
  }
  GRADC_ASSERT(false, "{} is not a collective (world {})", op_name(n.op), world);
}

Term transpose(const Term& t) {
  Term r{t.dst, t.src, t.has_pairs, {}};
  for (const auto& p : t.pairs) r.pairs.push_back({p[1], p[0]});
  std::sort(r.pairs.begin(), r.pairs.end());
  return r;
}

std::vector<CollectiveCall> collectives_for(const Term& t, int world) {
  auto call = [](Op op, std::initializer_list<std::pair<const char*, int64_t>> attrs) {
    CollectiveCall c{op, {}};
    for (const auto& [k, v] : attrs) c.attrs.set(k, Attr::of_int(v));
    if (op == Op::AllReduce || op == Op::ReduceScatter || op == Op::Reduce) c.attrs.set("op", Attr::of_sym("sum"));
    return std::vector<CollectiveCall>{c};
  };
  const Side& s = t.src;
  const Side& d = t.dst;
  if (t.has_pairs) {
    if (s != whole() || d != whole()) return {};
    // A permute receives at most once per rank: split the pairs into rounds.
    std::vector<CollectiveCall> rounds;
    std::vector<std::vector<std::vector<int64_t>>> by_round;
    for (const auto& p : t.pairs) {
      size_t i = 0;
      while (i < by_round.size() &&
             std::any_of(by_round[i].begin(), by_round[i].end(), [&](const auto& q) { return q[1] == p[1]; }))
        ++i;
      if (i == by_round.size()) by_round.emplace_back();
      by_round[i].push_back(p);
    }
    for (const auto& pairs : by_round) {
      CollectiveCall c{Op::Permute, {}};
      Attr a;
      a.kind = Attr::List;
      for (const auto& p : pairs) a.list.push_back(Attr::of_ints(p));
      c.attrs.set("pairs", a);
      rounds.push_back(c);
    }
    return rounds;
  }
  (void)world;
  const bool all_src = s.root < 0, all_dst = d.root < 0;
  if (all_src && all_dst) {
    if (s.axis < 0 && d.axis < 0) return call(Op::AllReduce, {});
    if (s.axis < 0) return call(Op::AllGather, {{"axis", d.axis}});
    if (d.axis < 0) return call(Op::ReduceScatter, {{"axis", s.axis}});
    return call(Op::AllToAll, {{"split_axis", s.axis}, {"concat_axis", d.axis}});
  }
  if (!all_src && all_dst && d.axis < 0) {
    if (s.axis < 0) return call(Op::Broadcast, {{"root", s.root}});
    return call(Op::Scatter, {{"root", s.root}, {"axis", s.axis}});
  }
  if (all_src && !all_dst && s.axis < 0) {
    if (d.axis < 0) return call(Op::Reduce, {{"root", d.root}});
    return call(Op::Gather, {{"root", d.root}, {"axis", d.axis}});
  }
  return {};
}

std::vector<CollectiveCall> transpose_of(const Node& n, int world) {
  Term t = transpose(routing(n, world));
  std::vector<CollectiveCall> calls = collectives_for(t, world);
  GRADC_ASSERT(!calls.empty() || (t.has_pairs && t.pairs.empty()), "no collective has the routing {}",
               term_str(t, "x", "y"));
  return calls;
}

namespace {
std::string int_str(int64_t v, IntName name) { return name ? name(v) : std::to_string(v); }

std::string side_str(const char* v, const Side& s, const char* rank, const char* other, IntName name) {
  std::string r = s.root < 0 ? rank : int_str(s.root, name);
  if (s.axis < 0) return fmt::format("{}[{}]", v, r);
  return fmt::format("{}[{}].block(axis {}, {})", v, r, int_str(s.axis, name), other);
}

std::string attr_named(const Attr& v, IntName name) {
  if (v.kind == Attr::Int) return int_str(v.i, name);
  if (v.kind != Attr::List) return attr_str(v);
  std::vector<std::string> items;
  for (const Attr& x : v.list) items.push_back(attr_named(x, name));
  return fmt::format("[{}]", fmt::join(items, ", "));
}
}  // namespace

std::string term_str(const Term& t, const char* src, const char* dst, IntName name) {
  std::string body = side_str(dst, t.dst, "r", "k", name) + " += " + side_str(src, t.src, "k", "r", name);
  if (t.has_pairs) {
    std::vector<std::string> ps;
    for (const auto& p : t.pairs) ps.push_back(fmt::format("({}, {})", int_str(p[0], name), int_str(p[1], name)));
    return fmt::format("{}  for (k, r) in {{{}}}", body, fmt::join(ps, ", "));
  }
  std::vector<std::string> vars;
  if (t.src.root < 0) vars.push_back("k");
  if (t.dst.root < 0) vars.push_back("r");
  return vars.empty() ? body : fmt::format("{}  for all ranks {}", body, fmt::join(vars, ", "));
}

std::string call_str(const CollectiveCall& c, IntName name) {
  std::vector<std::string> a;
  for (const auto& [k, v] : c.attrs.items) a.push_back(k + "=" + attr_named(v, name));
  return fmt::format("{}({})", op_name(c.op), fmt::join(a, ", "));
}

std::vector<std::vector<int64_t>> shift_pairs(int64_t shift, int n) {
  std::vector<std::vector<int64_t>> pairs;
  for (int64_t k = 0; k < n; ++k) pairs.push_back({k, ((k + shift) % n + n) % n});
  return pairs;
}

}  // namespace gradc
