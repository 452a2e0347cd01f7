#include <array>

#include "passes/pass.h"

namespace gradc {
namespace {

// A node as CSE compares it: op, operands (already replaced), attributes, type.
struct Key {
  const Node* n;
  bool operator==(const Key& o) const {
    return n->op == o.n->op && n->args == o.n->args && n->type == o.n->type && n->attrs == o.n->attrs;
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return hash(*k.n, [](ValueId a) { return a; });
  }
  // The hash of `n` with each operand a read as arg(a).
  template <class Arg>
  static size_t hash(const Node& n, Arg arg) {
    uint64_t h = uint64_t(n.op);
    auto mix = [&](uint64_t v) {  // splitmix64's finaliser over the running hash and v
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h ^= h >> 30;
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 27;
      h *= 0x94d049bb133111ebull;
      h ^= h >> 31;
    };
    for (ValueId a : n.args) mix(uint64_t(arg(a)));
    mix(n.type.hash());
    mix(n.attrs.hash());
    return size_t(h);
  }
};

bool mergeable(const Node& n) { return !is_collective(n.op) && n.op != Op::Input; }

}  // namespace

Graph cse(Graph g) {
  const size_t count = g.nodes.size();
  std::vector<ValueId> repl(count);
  for (size_t i = 0; i < count; ++i) repl[i] = ValueId(i);
  std::vector<bool> keep(count, true);
  // An open-addressing table of the nodes seen so far (no allocation per node):
  // slots hold a node index, or -1, and beside each a tag of 8 bits of its node's
  // hash, so that a slot taken by another node rarely costs reading that node. The
  // size is a power of two at least twice the nodes.
  size_t cap = 16;
  while (cap < 2 * count) cap *= 2;
  std::vector<ValueId> slot(cap, -1);
  std::vector<uint8_t> tag(cap);
  auto tag_of = [](size_t h) { return uint8_t(h >> 56); };
  // Node i, of hash h, merges with the node the table holds equal to it, or goes in.
  auto lookup = [&](size_t i, size_t h) {
    const Node& n = g.nodes[i];
    for (size_t s = h & (cap - 1);; s = (s + 1) & (cap - 1)) {
      const ValueId o = slot[s];
      if (o < 0) {
        slot[s] = ValueId(i);
        tag[s] = tag_of(h);
        return;
      }
      if (tag[s] == tag_of(h) && Key{&g.nodes[size_t(o)]} == Key{&n}) {
        repl[i] = o;
        keep[i] = false;
        return;
      }
    }
  };
  // A large table is read from memory: node i + kAhead's slots are fetched while
  // node i is looked up. Its hash is taken with the operands merged so far, and
  // taken again at its turn if one of the kAhead nodes before it was merged since.
  // A leaf (a constant, rank) is looked up there and then: it equals no node but
  // leaves, so the order changes no result, and the nodes that read it hash as
  // they will be looked up.
  constexpr size_t kAhead = 16;
  std::array<size_t, 2 * kAhead> hash{};  // node j's at j % (2 kAhead)
  auto hash_ahead = [&](size_t j) {
    if (j >= count || !mergeable(g.nodes[j])) return;
    const Node& n = g.nodes[j];
    const size_t h = KeyHash::hash(n, [&](ValueId a) { return repl[size_t(a)]; });
    if (n.args.empty()) return lookup(j, h);
    hash[j % hash.size()] = h;
    __builtin_prefetch(&slot[h & (cap - 1)]);
    __builtin_prefetch(&tag[h & (cap - 1)]);
  };
  for (size_t j = 0; j < kAhead; ++j) hash_ahead(j);
  for (size_t i = 0; i < count; ++i) {
    hash_ahead(i + kAhead);
    Node& n = g.nodes[i];
    if (n.args.empty()) continue;  // a leaf is done, an input never merges
    bool again = false;
    for (ValueId& a : n.args) {  // operands as merged so far (rebuild keeps them)
      again |= size_t(a) + kAhead >= i && repl[size_t(a)] != a && !g.nodes[size_t(a)].args.empty();
      a = repl[size_t(a)];
    }
    // Collectives are exchanges, and inputs are distinct variables: never merged.
    if (!mergeable(n)) continue;
    lookup(i, again ? KeyHash()(Key{&n}) : hash[i % hash.size()]);
  }
  return rebuild(std::move(g), keep, repl);
}

}  // namespace gradc
