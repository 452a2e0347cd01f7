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

const Attr* Attrs::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

namespace {
const Attr& get(const Node& n, const std::string& key) {
  const Attr* a = n.attrs.find(key);
  GRADC_ASSERT(a, "{} has no attribute '{}'", op_name(n.op), key);
  return *a;
}
}  // namespace

int64_t Node::attr_int(const std::string& key) const {
  const Attr& a = get(*this, key);
  GRADC_ASSERT(a.kind == Attr::Int, "{}.{} is not an integer", op_name(op), key);
  return a.i;
}
double Node::attr_num(const std::string& key) const {
  const Attr& a = get(*this, key);
  GRADC_ASSERT(a.kind == Attr::Int || a.kind == Attr::Float, "{}.{} is not a number",
               op_name(op), key);
  return a.number();
}
const std::string& Node::attr_sym(const std::string& key) const {
  const Attr& a = get(*this, key);
  GRADC_ASSERT(a.kind == Attr::Sym || a.kind == Attr::Str, "{}.{} is not a name", op_name(op),
               key);
  return a.s;
}
std::vector<int64_t> Node::attr_ints(const std::string& key) const {
  const Attr& a = get(*this, key);
  GRADC_ASSERT(a.kind == Attr::List, "{}.{} is not a list", op_name(op), key);
  std::vector<int64_t> out;
  for (const Attr& x : a.list) {
    GRADC_ASSERT(x.kind == Attr::Int, "{}.{} is not a list of integers", op_name(op), key);
    out.push_back(x.i);
  }
  return out;
}
std::vector<std::vector<int64_t>> Node::attr_int_lists(const std::string& key) const {
  const Attr& a = get(*this, key);
  GRADC_ASSERT(a.kind == Attr::List, "{}.{} is not a list", op_name(op), key);
  std::vector<std::vector<int64_t>> out;
  for (const Attr& x : a.list) {
    GRADC_ASSERT(x.kind == Attr::List, "{}.{} is not a list of lists", op_name(op), key);
    auto& row = out.emplace_back();
    for (const Attr& y : x.list) {
      GRADC_ASSERT(y.kind == Attr::Int, "{}.{} is not a list of integer lists", op_name(op), key);
      row.push_back(y.i);
    }
  }
  return out;
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
