#include "runtime/interp.h"

#include <cmath>
#include <cstring>

#include "ir/mesh.h"
#include "ir/rules.h"
#include "runtime/kernels.h"

namespace gradc {

namespace {
// Rank r's value of an input: its supplied data, else its default. A shared
// input must hold the same value on every rank.
std::vector<Tensor> input_values(const Graph& g, const Node& n, const RankInputs& inputs,
                                 const std::vector<Tensor>* dflt) {
  const std::string& name = n.attr_sym("name");
  std::vector<Tensor> out;
  for (int r = 0; r < g.world; ++r) {
    auto it = inputs[size_t(r)].find(name);
    if (it != inputs[size_t(r)].end()) {
      if (it->second.type != n.type)
        throw UserError(n.loc, fmt::format("input '{}' is declared {}, but rank {} was given {}", name,
                                           type_str(n.type), r, type_str(it->second.type)));
      out.push_back(it->second);
    } else if (dflt) {
      out.push_back((*dflt)[size_t(r)]);
    } else {
      throw UserError(n.loc, fmt::format("input '{}' has no value for rank {} and no default", name, r));
    }
  }
  // shared: the same on every rank; shared(A): on the ranks of each group over A
  if (n.attrs.has("shared"))
    for (const std::vector<int>& group : mesh_groups(g, shared_axes(g, n)))
      for (size_t k = 1; k < group.size(); ++k) {
        const Tensor &a = out[size_t(group[0])], &b = out[size_t(group[k])];
        const int64_t size = dtype_size(a.dtype());
        for (int64_t i = 0; i < a.size(); ++i) {
          if (std::memcmp(a.data<std::byte>() + i * size, b.data<std::byte>() + i * size, size_t(size)) == 0) continue;
          const SharedWords w = shared_words(g, n);
          throw UserError(n.loc,
                          fmt::format("{} differs between ranks {} and {}{}{}", w.what, group[0], group[k],
                                      a.shape().empty() ? "" : " at element " + element_str(i, a.shape()), w.note));
        }
      }
  return out;
}
}  // namespace

// A collective runs in each of its groups (over=) on the group's ranks, as on a world of their own.
std::vector<Tensor> run_collective(const Graph& g, const Node& n, const std::vector<Tensor>& x) {
  if (!has_groups(g, n)) return run_collective_kernel(n, x);
  std::vector<Tensor> out(x.size());
  for (const std::vector<int>& group : mesh_groups(g, over_axes(g, n))) {
    std::vector<Tensor> in;
    for (int r : group) in.push_back(x[size_t(r)]);
    std::vector<Tensor> res = run_collective_kernel(n, in);
    for (size_t k = 0; k < group.size(); ++k) out[size_t(group[k])] = std::move(res[k]);
  }
  return out;
}

namespace {
// --check-finite: the first NaN or infinity of a result, as an error at its op.
void check_finite(const Node& n, const std::vector<Tensor>& out) {
  if (!is_float(n.type->dtype) || n.op == Op::Const) return;
  for (size_t r = 0; r < out.size(); ++r)
    for (int64_t i = 0; i < out[r].size(); ++i) {
      const double v = out[r].get(i);
      if (std::isfinite(v)) continue;
      throw UserError(n.loc, fmt::format("{}: the result holds {} on rank {}, at element {} of {} (--check-finite)",
                                         checked_op_name(n),
                                         std::isnan(v) ? "NaN"
                                         : v > 0       ? "inf"
                                                       : "-inf",
                                         r, element_str(i, n.type->shape), type_str(n.type)));
    }
}
}  // namespace

std::vector<std::vector<Tensor>> evaluate(const Graph& g, const RankInputs& inputs, const std::vector<ValueId>& wanted,
                                          const Overrides* overrides, bool every_collective, bool check) {
  const int N = g.world;
  GRADC_ASSERT(int(inputs.size()) == N, "{} ranks of inputs for a world of {}", inputs.size(), N);
  // An input supplied on every rank needs no default.
  auto supplied = [&](const Node& n) {
    for (const auto& in : inputs)
      if (!in.count(n.attr_sym("name"))) return false;
    return true;
  };

  // Which nodes are needed, and the last node that reads each one (to free it early).
  std::vector<bool> needed(g.nodes.size(), false);
  std::vector<bool> keep(g.nodes.size(), false);
  for (ValueId v : wanted) needed[size_t(v)] = keep[size_t(v)] = true;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    // Collectives always run: every rank takes part in every exchange. A run also
    // reads every shared input, to check it is the same on every rank.
    const bool shared = n.op == Op::Input && n.attrs.has("shared");
    if (!needed[i] && !(every_collective && (is_collective(n.op) || shared))) continue;
    needed[i] = true;
    if (n.op == Op::Input && supplied(n)) continue;
    for (ValueId a : n.args) needed[size_t(a)] = true;
  }
  std::vector<int> last_use(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (needed[i] && !(g.nodes[i].op == Op::Input && supplied(g.nodes[i])))
      for (ValueId a : g.nodes[i].args) last_use[size_t(a)] = int(i);

  std::vector<std::vector<Tensor>> vals(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!needed[i]) continue;
    const Node& n = g.nodes[i];
    std::vector<Tensor>& out = vals[i];
    if (n.op == Op::Input) {
      out = input_values(g, n, inputs, n.args.empty() ? nullptr : &vals[size_t(n.args[0])]);
    } else if (is_collective(n.op)) {
      out = run_collective(g, n, vals[size_t(n.args[0])]);
    } else {
      LocalFn f = kernels()[n.op].local;
      if (!f)
        throw UserError(n.loc, fmt::format("{}: this op must be removed by a pass before running "
                                           "(run the autodiff pass first)",
                                           op_name(n.op)));
      Args args(n.args.size());
      for (int r = 0; r < N; ++r) {
        for (size_t k = 0; k < n.args.size(); ++k) args[k] = &vals[size_t(n.args[k])][size_t(r)];
        out.push_back(run_local(n, args, EvalCtx{r, N, &g}));
      }
    }
    if (overrides) {
      auto it = overrides->find(ValueId(i));
      if (it != overrides->end()) out = it->second;
    }
    if (check) check_finite(n, out);
    for (ValueId a : n.args)
      if (last_use[size_t(a)] == int(i) && !keep[size_t(a)]) vals[size_t(a)].clear();
  }
  return vals;
}

RankOutputs interpret(const Graph& g, const RankInputs& inputs, bool check_finite) {
  std::vector<ValueId> wanted;
  for (const auto& o : g.outputs) wanted.push_back(o.second);
  auto vals = evaluate(g, inputs, wanted, nullptr, true, check_finite);
  RankOutputs out(size_t(g.world));
  for (int r = 0; r < g.world; ++r)
    for (const auto& [name, v] : g.outputs) out[size_t(r)].push_back({name, vals[size_t(v)][size_t(r)]});
  return out;
}

RankInputs complete_inputs(const Graph& g, const RankInputs& inputs, bool all_defaults) {
  std::vector<ValueId> wanted;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op != Op::Input) continue;
    bool given = false;
    for (const auto& in : inputs) given |= in.count(g.nodes[i].attr_sym("name")) > 0;
    if (given || all_defaults || g.nodes[i].args.empty()) wanted.push_back(ValueId(i));  // no default: the run's error
  }
  auto vals = evaluate(g, inputs, wanted, nullptr, false);
  RankInputs out = inputs;
  for (ValueId v : wanted)
    for (int r = 0; r < g.world; ++r) out[size_t(r)][g[v].attr_sym("name")] = vals[size_t(v)][size_t(r)];
  return out;
}

}  // namespace gradc
