#include "ir/collectives.h"

#include <algorithm>
#include <optional>

#include "ir/print.h"

namespace gradc {

OpTable<CollectiveRule>& collective_rules() {
  static OpTable<CollectiveRule> t;
  return t;
}

bool has_param(Op op, std::string_view param) {
  const auto& ps = collective_rules()[op].params;
  return std::find(ps.begin(), ps.end(), param) != ps.end();
}

bool is_axis_param(std::string_view p) { return p == "axis" || p == "split_axis" || p == "concat_axis"; }

Attr pairs_attr(const std::vector<std::vector<int64_t>>& pairs) {
  Attr a;
  a.kind = Attr::List;
  for (const auto& p : pairs) a.list.push_back(Attr::of_ints(p));
  return a;
}

int64_t axis_attr(const Node& n, const char* key) {
  const int64_t a = n.attr_int(key);
  return a < 0 ? a + n.type->rank() : a;
}

Term routing(const Node& n, int world) {
  const auto f = collective_rules()[n.op].routing;
  GRADC_ASSERT(f, "{} is not a collective (world {})", op_name(n.op), world);
  Term t = f(n);
  std::sort(t.pairs.begin(), t.pairs.end());
  return t;
}

Term transpose(const Term& t) {
  Term r{t.dst, t.src, t.has_pairs, {}};
  for (const auto& p : t.pairs) r.pairs.push_back({p[1], p[0]});
  std::sort(r.pairs.begin(), r.pairs.end());
  return r;
}

namespace {
// Every way to give op's parameters values from t's: axes from its sides' axes, the
// root from its sides' roots, pairs from its pairs; reductions are sum.
void candidates(Op op, const Term& t, const std::vector<int64_t>& axes, const std::vector<int64_t>& roots, size_t i,
                Attrs& a, std::vector<Attrs>& out) {
  const auto& ps = collective_rules()[op].params;
  if (i == ps.size()) return out.push_back(a);
  const std::string& p = ps[i];
  const std::vector<int64_t>* values = is_axis_param(p) ? &axes : p == "root" ? &roots : nullptr;
  if (!values) {
    Attrs b = a;
    if (p == "op") b.set("op", Attr::of_sym("sum"));
    if (p == "pairs") b.set("pairs", pairs_attr(t.pairs));
    return candidates(op, t, axes, roots, i + 1, b, out);  // "shift" is given as pairs
  }
  for (int64_t v : *values) {
    Attrs b = a;
    b.set(p, Attr::of_int(v));
    candidates(op, t, axes, roots, i + 1, b, out);
  }
}

// The first registered collective (ops.def's order) with routing t, and its attributes.
std::optional<CollectiveCall> collective_with(const Term& t, int world) {
  std::vector<int64_t> axes, roots;
  for (const Side& s : {t.src, t.dst}) {
    if (s.axis >= 0) axes.push_back(s.axis);
    if (s.root >= 0) roots.push_back(s.root);
  }
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    if (!collective_rules()[op].routing || has_param(op, "pairs") != t.has_pairs) continue;
    std::vector<Attrs> cands;
    Attrs none;
    candidates(op, t, axes, roots, 0, none, cands);
    for (const Attrs& a : cands) {
      Node n;
      n.op = op;
      n.attrs = a;
      if (routing(n, world) == t) return CollectiveCall{op, a};
    }
  }
  return std::nullopt;
}
}  // namespace

std::vector<CollectiveCall> collectives_for(const Term& t, int world) {
  if (!t.has_pairs) {
    std::optional<CollectiveCall> c = collective_with(t, world);
    return c ? std::vector<CollectiveCall>{*c} : std::vector<CollectiveCall>{};
  }
  // A permute receives at most once per rank: split the pairs into rounds, each a
  // collective with those pairs.
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
    Term round = t;
    round.pairs = pairs;
    std::optional<CollectiveCall> c = collective_with(round, world);
    if (!c) return {};
    rounds.push_back(*c);
  }
  return rounds;
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
