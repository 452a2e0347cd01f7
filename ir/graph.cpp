#include "ir/graph.h"

#include <algorithm>
#include <cstring>

#include "ir/rules.h"

namespace gradc {

Attr Attr::of_ints(const std::vector<int64_t>& v) {
  Attr a;
  a.kind = List;
  for (int64_t x : v) a.list.push_back(of_int(x));
  return a;
}

void Attrs::set(const std::string& key, Attr v) {
  auto it = std::lower_bound(items.begin(), items.end(), key,
                             [](const auto& p, const std::string& k) { return p.first < k; });
  if (it != items.end() && it->first == key)
    it->second = std::move(v);
  else
    items.insert(it, {key, std::move(v)});
}

const Attr* Attrs::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

// ---- interned attribute sets ----------------------------------------------------
namespace {
// Equal as printed: floats bit for bit.
bool same(const Attr& a, const Attr& b) {
  if (a.kind != b.kind || a.i != b.i || a.s != b.s || a.list.size() != b.list.size()) return false;
  if (std::memcmp(&a.f, &b.f, sizeof a.f) != 0) return false;
  for (size_t k = 0; k < a.list.size(); ++k)
    if (!same(a.list[k], b.list[k])) return false;
  return true;
}
uint64_t attr_hash(const Attr& a) {
  uint64_t bits = 0;
  std::memcpy(&bits, &a.f, sizeof bits);
  uint64_t h = (uint64_t(a.kind) * 31 + uint64_t(a.i)) * 0x9e3779b97f4a7c15ull ^ bits ^ std::hash<std::string>()(a.s);
  for (const Attr& x : a.list) h = (h ^ attr_hash(x)) * 0x100000001b3ull;
  return h;
}
}  // namespace

uint64_t AttrsTraits::hash(const Attrs& a) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const auto& [key, v] : a.items) h = (h ^ std::hash<std::string>()(key) ^ (attr_hash(v) << 1)) * 0x100000001b3ull;
  return h;
}
bool AttrsTraits::same(const Attrs& a, const Attrs& b) {
  if (a.items.size() != b.items.size()) return false;
  for (size_t k = 0; k < a.items.size(); ++k)
    if (a.items[k].first != b.items[k].first || !gradc::same(a.items[k].second, b.items[k].second)) return false;
  return true;
}

void AttrsRef::set(const std::string& key, Attr v) {
  Attrs a = *this;
  a.set(key, std::move(v));
  *this = AttrsRef(a);
}

// A missing or ill-typed attribute can only come from textual IR (the frontend
// and the passes always set them), so it is reported as the user's error there.
namespace {
const Attr& get(const Node& n, std::string_view key) {
  const Attr* a = n.attrs.find(key);
  if (!a) user_error(n.loc, "{}: needs the attribute '{}'", op_name(n.op), key);
  return *a;
}
[[noreturn]] void ill_typed(const Node& n, std::string_view key, const char* what) {
  user_error(n.loc, "{}: attribute '{}' must be {}", op_name(n.op), key, what);
}
}  // namespace

int64_t Node::attr_int(std::string_view key) const {
  const Attr& a = get(*this, key);
  if (a.kind != Attr::Int) ill_typed(*this, key, "an integer");
  return a.i;
}
double Node::attr_num(std::string_view key) const {
  const Attr& a = get(*this, key);
  if (a.kind != Attr::Int && a.kind != Attr::Float) ill_typed(*this, key, "a number");
  return a.number();
}
const std::string& Node::attr_sym(std::string_view key) const {
  const Attr& a = get(*this, key);
  if (a.kind != Attr::Sym && a.kind != Attr::Str) ill_typed(*this, key, "a name");
  return a.s;
}
std::vector<int64_t> Node::attr_ints(std::string_view key) const {
  const Attr& a = get(*this, key);
  if (a.kind != Attr::List) ill_typed(*this, key, "a list of integers");
  std::vector<int64_t> out;
  for (const Attr& x : a.list) {
    if (x.kind != Attr::Int) ill_typed(*this, key, "a list of integers");
    out.push_back(x.i);
  }
  return out;
}
std::vector<std::vector<int64_t>> Node::attr_int_lists(std::string_view key) const {
  const Attr& a = get(*this, key);
  if (a.kind != Attr::List) ill_typed(*this, key, "a list of integer lists");
  std::vector<std::vector<int64_t>> out;
  for (const Attr& x : a.list) {
    if (x.kind != Attr::List) ill_typed(*this, key, "a list of integer lists");
    auto& row = out.emplace_back();
    for (const Attr& y : x.list) {
      if (y.kind != Attr::Int) ill_typed(*this, key, "a list of integer lists");
      row.push_back(y.i);
    }
  }
  return out;
}

Node const_node(const Type& t, double value, Loc loc) {
  Node n;
  n.op = Op::Const;
  n.type = t;
  n.loc = loc;
  n.attrs.set("value", t.dtype == DType::I32 ? Attr::of_int(int64_t(value)) : Attr::of_float(value));
  return n;
}

ValueId emit(Graph& g, Op op, std::vector<ValueId> args, Attrs attrs, Loc loc, Name name) {
  Node n;
  n.op = op;
  n.args = std::move(args);
  n.attrs = std::move(attrs);
  n.loc = loc;
  n.name = std::move(name);
  n.type = infer_type(g, n);
  return g.append(std::move(n));
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::Sum: return "sum";
    case Reduction::Avg: return "avg";
    case Reduction::Prod: return "prod";
    case Reduction::Max: return "max";
    case Reduction::Min: break;
  }
  return "min";
}

std::optional<Reduction> reduction_by_name(std::string_view s) {
  for (Reduction r : {Reduction::Sum, Reduction::Avg, Reduction::Prod, Reduction::Max, Reduction::Min})
    if (s == reduction_name(r)) return r;
  return std::nullopt;
}

Reduction reduction_of(const Node& n) {
  if (!n.attrs.has("op")) return Reduction::Sum;
  const std::optional<Reduction> r = reduction_by_name(n.attr_sym("op"));
  if (!r)
    user_error(n.loc, "{}: unknown reduction op={} (expected sum, avg, prod, max or min)", op_name(n.op),
               n.attr_sym("op"));
  return *r;
}

const char* grad_mode_name(GradMode m) {
  switch (m) {
    case GradMode::Sum: return "sum";
    case GradMode::Mean: return "mean";
    case GradMode::Global: break;
  }
  return "global";
}

std::optional<GradMode> grad_mode_by_name(std::string_view s) {
  for (GradMode m : {GradMode::Sum, GradMode::Mean, GradMode::Global})
    if (s == grad_mode_name(m)) return m;
  return std::nullopt;
}

GradMode grad_mode_of(const Node& n) {
  const std::optional<GradMode> m = grad_mode_by_name(n.attr_sym("mode"));
  if (!m) user_error(n.loc, "grad: unknown mode={} (expected sum, mean or global)", n.attr_sym("mode"));
  return *m;
}

std::string checked_op_name(const Node& n) {
  if (n.backward) return fmt::format("in the gradient of {}: {}", op_name(n.fwd_op), op_name(n.op));
  return std::string(op_name(n.op));
}

void verify(const Graph& g) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (ValueId a : n.args)
      GRADC_ASSERT(a >= 0 && size_t(a) < i, "{} (node {}) uses value {} before it is defined", op_name(n.op), i, a);
    Type t = infer_type(g, n);
    GRADC_ASSERT(t == n.type, "{} (node {}) has type {} but its shape rule gives {}", op_name(n.op), i,
                 type_str(n.type), type_str(t));
  }
  for (const auto& [name, v] : g.outputs) GRADC_ASSERT(v >= 0 && v < g.size(), "output {} names no value", name);
}

}  // namespace gradc
