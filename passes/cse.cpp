#include <map>
#include <tuple>

#include "ir/print.h"
#include "passes/pass.h"

namespace gradc {

Graph cse(const Graph& g) {
  std::vector<ValueId> repl(g.nodes.size());
  std::vector<bool> keep(g.nodes.size(), true);
  std::map<std::tuple<int, std::vector<ValueId>, std::string, std::string>, ValueId> seen;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    repl[i] = ValueId(i);
    const Node& n = g.nodes[i];
    // Collectives are exchanges, and inputs are distinct variables: never merged.
    if (is_collective(n.op) || n.op == Op::Input) continue;
    std::vector<ValueId> args;
    for (ValueId a : n.args) args.push_back(repl[size_t(a)]);
    std::string attrs;
    for (const auto& [k, v] : n.attrs.items) attrs += k + "=" + attr_str(v) + ";";
    auto key = std::make_tuple(int(n.op), args, attrs, type_str(n.type));
    auto [it, fresh] = seen.emplace(key, ValueId(i));
    if (!fresh) {
      repl[i] = it->second;
      keep[i] = false;
    }
  }
  return rebuild(g, keep, repl);
}

}  // namespace gradc
