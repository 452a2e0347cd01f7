#include "passes/pass.h"

namespace gradc {

Graph dce(Graph g) {
  std::vector<bool> live(g.nodes.size(), false);
  for (const auto& o : g.outputs) live[size_t(o.second)] = true;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    __builtin_prefetch(&g.nodes[i >= 8 ? i - 8 : 0]);  // the array streams from memory
    // A collective is an exchange every rank takes part in: it stays even when unused.
    // An input is the program's interface: it stays too (a backend takes its data, and
    // checks that a shared one is the same on every rank, whether or not it is read).
    if (is_collective(g.nodes[i].op) || g.nodes[i].op == Op::Input) live[i] = true;
    if (live[i])
      for (ValueId a : g.nodes[i].args) live[size_t(a)] = true;
  }
  std::vector<ValueId> same(g.nodes.size());
  for (size_t i = 0; i < same.size(); ++i) same[i] = ValueId(i);
  return rebuild(std::move(g), live, same);
}

}  // namespace gradc
