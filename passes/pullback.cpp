// The torch target's backward program (pullback_program, passes/autodiff.h): the
// forward program, its outputs' cotangents as inputs, and grad nodes that the
// autodiff pass then replaces as it does the program's own.
#include <set>

#include "ir/builder.h"
#include "passes/autodiff.h"

namespace gradc {

Graph pullback_program(Graph g) {
  std::set<std::string> names;
  std::vector<ValueId> xs;
  for (ValueId v = 0; v < g.size(); ++v)
    if (g[v].op == Op::Input) {
      names.insert(g[v].attr_sym("name"));
      if (is_float(g.type(v).dtype)) xs.push_back(v);
    }
  auto fresh = [&](std::string n) {
    while (names.count(n)) n += "_";
    names.insert(n);
    return n;
  };
  const std::vector<std::pair<std::string, ValueId>> ys = std::move(g.outputs);
  g.outputs.clear();
  Builder b(g);
  ValueId loss = -1;
  for (const auto& [name, y] : ys) {
    if (!is_float(g.type(y).dtype) || xs.empty()) continue;
    Node ct;
    ct.op = Op::Input;
    ct.type = g.type(y);
    ct.name = fresh("ct_" + name);
    ct.attrs.set("name", Attr::of_str(ct.name.str()));
    const ValueId c = g.append(std::move(ct));
    std::vector<int64_t> axes(b.shape(y).size());
    for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
    // <y, ct_y>, summed in f64 whatever the outputs' dtypes
    const ValueId dot = b.cast(b.reduce_sum(b.mul(y, c), axes), DType::F64);
    loss = loss < 0 ? dot : b.add(loss, dot);
  }
  if (loss < 0) return g;
  for (ValueId x : xs) {
    Attrs a;
    a.set("mode", Attr::of_sym("sum"));
    a.set("own", Attr::of_int(1));
    const std::string name = fresh("grad_" + g[x].attr_sym("name"));
    g.outputs.push_back({name, emit(g, Op::Grad, {loss, x}, a, g[x].loc, name)});
  }
  return g;
}

}  // namespace gradc
