#include "ir/graph.h"

#include <algorithm>

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

ValueId emit(Graph& g, Op op, std::vector<ValueId> args, Attrs attrs, Loc loc, std::string name) {
  Node n;
  n.op = op;
  n.args = std::move(args);
  n.attrs = std::move(attrs);
  n.loc = loc;
  n.name = std::move(name);
  n.type = infer_type(g, n);
  return g.append(std::move(n));
}

}  // namespace gradc
