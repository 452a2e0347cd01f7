#include <cstring>

#include "passes/pass.h"

namespace gradc {
namespace {

// Attributes equal as printed: floats bit for bit (-0.0 is not 0.0; a NaN equals the same NaN).
bool same(const Attr& a, const Attr& b) {
  if (a.kind != b.kind || a.i != b.i || a.s != b.s || a.list.size() != b.list.size()) return false;
  if (std::memcmp(&a.f, &b.f, sizeof a.f) != 0) return false;
  for (size_t k = 0; k < a.list.size(); ++k)
    if (!same(a.list[k], b.list[k])) return false;
  return true;
}
bool same(const Attrs& a, const Attrs& b) {
  if (a.items.size() != b.items.size()) return false;
  for (size_t k = 0; k < a.items.size(); ++k)
    if (a.items[k].first != b.items[k].first || !same(a.items[k].second, b.items[k].second)) return false;
  return true;
}

// A node as CSE compares it: op, operands (already replaced), attributes, type.
struct Key {
  const Node* n;
  bool operator==(const Key& o) const {
    return n->op == o.n->op && n->args == o.n->args && n->type == o.n->type && same(n->attrs, o.n->attrs);
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = uint64_t(k.n->op);
    auto mix = [&](uint64_t v) {  // splitmix64's finaliser over the running hash and v
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h ^= h >> 30;
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 27;
      h *= 0x94d049bb133111ebull;
      h ^= h >> 31;
    };
    for (ValueId a : k.n->args) mix(uint64_t(a));
    for (int64_t d : k.n->type.shape) mix(uint64_t(d));
    for (const auto& [key, a] : k.n->attrs.items) {
      mix(std::hash<std::string>()(key));
      mix(attr_hash(a));
    }
    return size_t(h);
  }
  static uint64_t attr_hash(const Attr& a) {
    uint64_t bits = 0;
    std::memcpy(&bits, &a.f, sizeof bits);
    uint64_t h = (uint64_t(a.kind) * 31 + uint64_t(a.i)) * 0x9e3779b97f4a7c15ull ^ bits ^ std::hash<std::string>()(a.s);
    for (const Attr& x : a.list) h = (h ^ attr_hash(x)) * 0x100000001b3ull;
    return h;
  }
};

}  // namespace

Graph cse(Graph g) {
  std::vector<ValueId> repl(g.nodes.size());
  std::vector<bool> keep(g.nodes.size(), true);
  // An open-addressing table of the nodes seen so far (no allocation per node):
  // slots hold a node index, or -1; the size is a power of two at least twice the nodes.
  size_t cap = 16;
  while (cap < 2 * g.nodes.size()) cap *= 2;
  std::vector<ValueId> slot(cap, -1);
  std::vector<size_t> hash(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    repl[i] = ValueId(i);
    Node& n = g.nodes[i];
    for (ValueId& a : n.args) a = repl[size_t(a)];  // operands as merged so far (rebuild keeps them)
    // Collectives are exchanges, and inputs are distinct variables: never merged.
    if (is_collective(n.op) || n.op == Op::Input) continue;
    hash[i] = KeyHash()(Key{&n});
    for (size_t s = hash[i] & (cap - 1);; s = (s + 1) & (cap - 1)) {
      const ValueId o = slot[s];
      if (o < 0) {
        slot[s] = ValueId(i);
        break;
      }
      if (hash[size_t(o)] == hash[i] && Key{&g.nodes[size_t(o)]} == Key{&n}) {
        repl[i] = o;
        keep[i] = false;
        break;
      }
    }
  }
  return rebuild(std::move(g), keep, repl);
}

}  // namespace gradc
