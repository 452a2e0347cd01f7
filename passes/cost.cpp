#include "passes/cost.h"

#include <cmath>

#include <fmt/format.h>

#include <map>

#include "ir/collectives.h"
#include "ir/mesh.h"
#include "ir/print.h"

namespace gradc {

namespace {
double bytes(const Type& t) { return double(t.size()) * dtype_size(t.dtype); }

double node_flops(const Graph& g, const Node& n) {
  if (is_elementwise(n.op)) return double(n.type->size());
  switch (n.op) {
    case Op::ReduceSum:
    case Op::ReduceMax:
    case Op::ReduceMin: return double(g.type(n.args[0]).size());
    case Op::Cumsum: return double(n.type->size());
    case Op::ScatterAdd: return double(g.type(n.args[2]).size());  // an add per element of src
    case Op::Matmul: {
      const Shape& a = g.type(n.args[0]).shape;
      return 2.0 * double(n.type->size()) * double(a.back());
    }
    default: break;
  }
  if (is_collective(n.op) && has_param(n.op, "op")) {  // a reduction over the group
    const double N = group_size(g, n);
    return double(g.type(n.args[0]).size()) * (N - 1) / N * 2;
  }
  return 0;
}

std::string bytes_str(double b) {
  if (b == double(int64_t(b))) return fmt::format("{}", int64_t(b));
  return fmt::format("{:.1f}", b);
}
}  // namespace

OpTable<SentFn>& bytes_sent() {
  static OpTable<SentFn> t;
  return t;
}

CollectiveCost collective_cost(const Graph& g, ValueId v) {
  const Node& n = g[v];
  const SentFn sent = bytes_sent()[n.op];
  GRADC_ASSERT(sent, "{} has no byte count", op_name(n.op));
  CollectiveCost c{v, n.backward};
  c.sent = sent(n, bytes(g.type(n.args[0])), bytes(n.type), group_size(g, n));
  c.received = c.sent;  // every byte one rank sends, another receives
  return c;
}

GraphCost graph_cost(const Graph& g) {
  GraphCost c;
  std::vector<int> last_use(g.nodes.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId a : g.nodes[i].args) last_use[size_t(a)] = int(i);
  for (const auto& o : g.outputs) last_use[size_t(o.second)] = int(g.nodes.size());
  double live = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (is_collective(n.op)) c.collectives.push_back(collective_cost(g, ValueId(i)));
    (n.backward ? c.flops_backward : c.flops_forward) += node_flops(g, n);
    live += bytes(n.type);
    c.peak_bytes = std::max(c.peak_bytes, live);
    for (ValueId a : n.args)
      if (last_use[size_t(a)] == int(i)) {
        live -= bytes(g.type(a));
        last_use[size_t(a)] = -2;  // freed once, even when used twice by this node
      }
    if (last_use[i] == -1) live -= bytes(n.type);  // never used
  }
  return c;
}

namespace {
// 1234567 -> "1.18 MiB"; whole bytes below 1 KiB as "128 B".
std::string readable(double v, const char* unit, bool binary) {
  const double step = binary ? 1024 : 1000;
  const char* const prefixes[] = {"", binary ? "Ki" : "k", binary ? "Mi" : "M", binary ? "Gi" : "G",
                                  binary ? "Ti" : "T"};
  int p = 0;
  while (std::fabs(v) >= step && p < 4) {
    v /= step;
    ++p;
  }
  if (p == 0) return fmt::format("{} {}", bytes_str(v), unit);
  return fmt::format("{:.3g} {}{}", v, prefixes[p], unit);
}

// Where a collective comes from: its source value's name, or for a backward one the
// forward op whose gradient it computes.
std::string source_value(const Node& n) {
  if (n.backward) return fmt::format("gradient of {}", op_name(n.fwd_op));
  return n.name.empty() ? "-" : n.name;
}
std::string call_str(const Node& n) {
  std::vector<std::string> attrs;
  for (const auto& [k, v] : n.attrs->items) attrs.push_back(k + "=" + attr_str(v));
  return fmt::format("{}({})", op_name(n.op), fmt::join(attrs, ", "));
}

// A mesh's collective: the axes of its groups and their size, "tp (4)".
std::string group_str(const Graph& g, const Node& n) {
  return fmt::format("{} ({})", axes_names(g, over_axes(g, n)), group_size(g, n));
}
}  // namespace

std::string cost_report(const Graph& g, const GraphCost& c, const std::string& source, const CostFormulas* f) {
  const bool mesh = !g.mesh.axes.empty();
  std::string s = fmt::format("{} ranks{}; bytes each rank sends and receives under ring algorithms{}\n", g.world,
                              mesh ? fmt::format(" (mesh {})", mesh_option(g.mesh)) : "",
                              mesh ? " over each collective's group" : "");
  // The "at" column is as wide as its longest place (a place in a def carries its calls).
  std::vector<std::string> at;
  size_t at_width = 22;
  for (const CollectiveCost& cc : c.collectives) {
    at.push_back(loc_str(source, g[cc.node].loc, false));
    at_width = std::max(at_width, at.back().size());
  }
  s += fmt::format("{:<9} {:<{}} {:<26} {:<34} {:<14} {:>11} {:>11}{}\n", "phase", "at", at_width, "value",
                   "collective", "operand", "sent", "received", mesh ? "  over (group)" : "");
  std::map<std::string, std::pair<int, double>> per_axes;  // a mesh's totals per set of axes: count, bytes sent
  double totals[2][2] = {{0, 0}, {0, 0}};
  int counts[2] = {0, 0};
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveCost& cc = c.collectives[i];
    const Node& n = g[cc.node];
    std::string call = call_str(n);
    if (call.size() > 34) call = call.substr(0, 31) + "...";
    s += fmt::format("{:<9} {:<{}} {:<26} {:<34} {:<14} {:>11} {:>11}{}\n", cc.backward ? "backward" : "forward", at[i],
                     at_width, source_value(n), call, type_str(g.type(n.args[0])), readable(cc.sent, "B", true),
                     readable(cc.received, "B", true), mesh ? "  " + group_str(g, n) : "");
    if (mesh) {
      auto& t = per_axes[group_str(g, n)];
      t.first++;
      t.second += cc.sent;
    }
    totals[cc.backward][0] += cc.sent;
    totals[cc.backward][1] += cc.received;
    counts[cc.backward]++;
  }
  for (int b = 0; b < 2; ++b)
    s += fmt::format("total {:<8} {} collective{}, {} sent, {} received per rank\n", b ? "backward" : "forward",
                     counts[b], counts[b] == 1 ? "" : "s", readable(totals[b][0], "B", true),
                     readable(totals[b][1], "B", true));
  for (const auto& [axes, t] : per_axes)
    s += fmt::format("total over {}: {} collective{}, {} sent per rank\n", axes, t.first, t.first == 1 ? "" : "s",
                     readable(t.second, "B", true));
  s += fmt::format("flops per rank: forward {}, backward {}\n", readable(c.flops_forward, "flop", false),
                   readable(c.flops_backward, "flop", false));
  s += fmt::format("peak memory per rank: {} (the buffer plan)\n", readable(c.peak_bytes, "B", true));
  if (!f) return s;
  if (!f->failure.empty()) return s + fmt::format("as functions of the sizes: none, {}\n", f->failure);
  s += fmt::format("as functions of the sizes, in bytes and flops ({}):\n", f->fitted);
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveCost& cc = c.collectives[i];
    s += fmt::format("{:<9} {:<{}} {:<26} sent {}, received {}\n", cc.backward ? "backward" : "forward", at[i],
                     at_width, source_value(g[cc.node]), f->sent[i], f->received[i]);
  }
  for (int b = 0; b < 2; ++b)
    s += fmt::format("total {:<8} sent {}, received {} per rank\n", b ? "backward" : "forward", f->sent_total[b],
                     f->received_total[b]);
  s += fmt::format("flops per rank: forward {}, backward {}\n", f->flops[0], f->flops[1]);
  s += fmt::format("peak memory per rank: {}\n", f->peak);
  return s;
}

namespace {
// A mesh's collective: `, "axes": ["tp"], "group": 4`.
std::string group_json(const Graph& g, const Node& n) {
  if (g.mesh.axes.empty()) return "";
  std::vector<std::string> names;
  for (int a : over_axes(g, n)) names.push_back(quote(axis_name(g, a)));
  return fmt::format(", \"axes\": [{}], \"group\": {}", fmt::join(names, ", "), group_size(g, n));
}
}  // namespace

std::string cost_json(const Graph& g, const GraphCost& c, const std::string& source, const CostFormulas* f) {
  std::string s = fmt::format("{{\"world\": {}, \"collectives\": [", g.world);
  double totals[2] = {0, 0};
  for (size_t i = 0; i < c.collectives.size(); ++i) {
    const CollectiveCost& cc = c.collectives[i];
    const Node& n = g[cc.node];
    totals[cc.backward] += cc.sent;
    std::vector<std::string> calls;  // the def calls it was reached through, innermost first
    for (const CallSite& cs : calls_of(n.loc))
      calls.push_back(
          fmt::format("{{\"def\": {}, \"line\": {}, \"col\": {}}}", quote(cs.callee), cs.call.line, cs.call.col));
    s += fmt::format(
        "{}\n  {{\"phase\": \"{}\", \"file\": {}, \"line\": {}, \"col\": {}, \"calls\": [{}], \"value\": {}, "
        "\"collective\": {}, \"call\": {}, \"operand\": \"{}\", \"sent_bytes\": {}, \"received_bytes\": {}{}{}}}",
        i ? "," : "", cc.backward ? "backward" : "forward", quote(source), n.loc.line, n.loc.col,
        fmt::join(calls, ", "), quote(source_value(n)), quote(std::string(op_name(n.op))), quote(call_str(n)),
        type_str(g.type(n.args[0])), bytes_str(cc.sent), bytes_str(cc.received), group_json(g, n),
        f && f->failure.empty()
            ? fmt::format(", \"sent_formula\": {}, \"received_formula\": {}", quote(f->sent[i]), quote(f->received[i]))
            : "");
  }
  s += fmt::format("],\n \"sent_bytes\": {{\"forward\": {}, \"backward\": {}}},\n", bytes_str(totals[0]),
                   bytes_str(totals[1]));
  s += fmt::format(" \"flops\": {{\"forward\": {}, \"backward\": {}}},\n \"peak_bytes\": {}",
                   bytes_str(c.flops_forward), bytes_str(c.flops_backward), bytes_str(c.peak_bytes));
  if (f && !f->failure.empty()) s += fmt::format(",\n \"formulas\": {{\"failure\": {}}}", quote(f->failure));
  if (f && f->failure.empty()) {
    auto pair = [](const std::string* x) {
      return fmt::format("{{\"forward\": {}, \"backward\": {}}}", quote(x[0]), quote(x[1]));
    };
    s += fmt::format(
        ",\n \"formulas\": {{\"fitted\": {}, \"sent_bytes\": {}, \"received_bytes\": {}, \"flops\": {}, "
        "\"peak_bytes\": {}}}",
        quote(f->fitted), pair(f->sent_total), pair(f->received_total), pair(f->flops), quote(f->peak));
  }
  return s + "}\n";
}

}  // namespace gradc
