#include "ir/print.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "ir/mesh.h"
#include "support/name_map.h"

namespace gradc {

// A value without a hint is named by its id; hints are never all digits (the IR
// reader drops such names), so only hinted names can collide: a hint taken
// already gets the first free suffix, h.1, h.2, ... (each hint remembers where
// its search ended, so a name repeated 8,000 times costs linear time).
ValueNames::ValueNames(const Graph& g) : g_(g) {
  size_t hinted = 0;
  for (const Node& n : g.nodes) hinted += !n.name.empty();
  NameMap<int> taken;  // the names taken, each with the suffix to try first when it is a hint again
  taken.reserve(hinted);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::string& hint = g.nodes[i].name;
    if (hint.empty()) continue;
    auto [k, fresh] = taken.try_emplace(hint, 1);
    if (fresh) continue;
    std::string& name = names_.emplace_back();
    do name = fmt::format("{}.{}", hint, (*k)++);
    while (!taken.try_emplace(name, 1).second);
    renamed_.push_back(ValueId(i));
  }
}

std::string ValueNames::operator[](ValueId v) const {
  const std::string& hint = g_[v].name;
  if (hint.empty()) return std::to_string(v);
  auto it = std::lower_bound(renamed_.begin(), renamed_.end(), v);
  return it != renamed_.end() && *it == v ? names_[size_t(it - renamed_.begin())] : hint;
}

std::vector<std::string> value_names(const Graph& g) {
  ValueNames names(g);
  std::vector<std::string> out(g.nodes.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = names[ValueId(i)];
  return out;
}

namespace {
std::string float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// Text inside a dot label's quotes.
std::string escape_dot(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

std::string meta_str(const Graph& g, const Node& n, const std::vector<std::string>& names) {
  std::string m;
  if (n.rep != Rep::Unknown) m += fmt::format(" {}", rep_str(g, n.rep));
  if (n.backward) m += " bwd";
  if (n.grad_of >= 0) m += fmt::format(" grad_of=%{}", names[size_t(n.grad_of)]);
  return m;
}
}  // namespace

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string attr_str(const Attr& a) {
  switch (a.kind) {
    case Attr::Int: return std::to_string(a.i);
    case Attr::Float: return float_str(a.f);
    case Attr::Str: return quote(a.s);
    case Attr::Sym: return a.s;
    case Attr::List: {
      std::string s = "[";
      for (size_t i = 0; i < a.list.size(); ++i) s += (i ? ", " : "") + attr_str(a.list[i]);
      return s + "]";
    }
  }
  return "?";
}

namespace {
// `world 4`, or for a mesh `mesh dp=2, tp=2`
std::string mesh_line(const Graph& g) {
  if (g.mesh.axes.empty()) return fmt::format("world {}\n", g.world);
  std::vector<std::string> axes;
  for (int k = 0; k < num_axes(g); ++k) axes.push_back(fmt::format("{}={}", axis_name(g, k), axis_size(g, k)));
  return fmt::format("mesh {}\n", fmt::join(axes, ", "));
}
// ` "mesh": {"dp": 2, "tp": 2},` for a mesh
std::string mesh_json(const Graph& g) {
  if (g.mesh.axes.empty()) return "";
  std::vector<std::string> axes;
  for (int k = 0; k < num_axes(g); ++k) axes.push_back(fmt::format("\"{}\": {}", axis_name(g, k), axis_size(g, k)));
  return fmt::format(" \"mesh\": {{{}}},", fmt::join(axes, ", "));
}
}  // namespace

std::string print_text(const Graph& g, const std::string& loc_file) {
  std::vector<std::string> names = value_names(g);
  std::string out = mesh_line(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    out += fmt::format("%{} = {}(", names[i], op_name(n.op));
    for (size_t k = 0; k < n.args.size(); ++k) out += fmt::format("{}%{}", k ? ", " : "", names[size_t(n.args[k])]);
    out += ")";
    if (!n.attrs->items.empty()) {
      out += " {";
      for (size_t k = 0; k < n.attrs->items.size(); ++k)
        out += fmt::format("{}{}={}", k ? ", " : "", n.attrs->items[k].first, attr_str(n.attrs->items[k].second));
      out += "}";
    }
    out += fmt::format(" : {}{}", type_str(n.type), meta_str(g, n, names));
    if (!loc_file.empty() && n.loc.line > 0) {
      out += fmt::format(" loc({}:{}:{}", quote(loc_file), n.loc.line, n.loc.col);
      for (const CallSite& c : calls_of(n.loc))  // the def calls, innermost first
        out += fmt::format(" in {} called at {}:{}:{}", quote(c.callee), quote(loc_file), c.call.line, c.call.col);
      out += ")";
    }
    out += "\n";
  }
  for (const auto& [name, v] : g.outputs) out += fmt::format("output {} = %{}\n", name, names[size_t(v)]);
  return out;
}

std::string print_dot(const Graph& g) {
  std::vector<std::string> names = value_names(g);
  std::string out = "digraph gradc {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  // The nodes of one source statement (its line; the backward ops of it apart) in one box.
  std::vector<std::pair<int, bool>> groups;
  std::map<std::pair<int, bool>, std::string> members;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::string style = "";
    if (is_collective(n.op))
      style = n.backward ? ", style=\"filled,dashed\", fillcolor=\"#f4b183\"" : ", style=filled, fillcolor=\"#f4b183\"";
    else if (n.op == Op::Input)
      style = ", style=filled, fillcolor=\"#c5e0b4\"";
    else if (n.backward)
      style = ", style=\"filled,dashed\", fillcolor=\"#bdd7ee\"";
    std::string label = fmt::format("%{} = {}", names[i], op_name(n.op));
    if (is_collective(n.op))  // what the exchange does: op=prod, axis=1, root=2, ...
      for (const auto& [k, v] : n.attrs->items) label += fmt::format("\\n{}={}", k, escape_dot(attr_str(v)));
    label += fmt::format("\\n{}", type_str(n.type));
    if (n.rep != Rep::Unknown) label += fmt::format("\\n{}", rep_str(g, n.rep));
    if (n.grad_of >= 0) label += fmt::format("\\ngrad of %{}", names[size_t(n.grad_of)]);
    const std::string line = fmt::format("  n{} [label=\"{}\"{}];\n", i, label, style);
    if (n.loc.line > 0) {
      const std::pair<int, bool> key{n.loc.line, n.backward};
      if (!members.count(key)) groups.push_back(key);
      members[key] += "  " + line;
    } else {
      out += line;
    }
  }
  for (size_t k = 0; k < groups.size(); ++k) {
    const auto& [line, bwd] = groups[k];
    out +=
        fmt::format("  subgraph cluster_{} {{\n    label=\"line {}{}\";\n    style=rounded;\n    color=gray;\n{}  }}\n",
                    k, line, bwd ? " (backward)" : "", members[groups[k]]);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId a : g.nodes[i].args) out += fmt::format("  n{} -> n{};\n", a, i);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    out += fmt::format("  out{} [label=\"output {}\", shape=ellipse];\n", k, g.outputs[k].first);
    out += fmt::format("  n{} -> out{};\n", g.outputs[k].second, k);
  }
  out +=
      "  subgraph cluster_legend {\n    label=\"legend\";\n    style=rounded;\n"
      "    legend_input [label=\"input\", style=filled, fillcolor=\"#c5e0b4\"];\n"
      "    legend_coll [label=\"collective\", style=filled, fillcolor=\"#f4b183\"];\n"
      "    legend_op [label=\"local op\"];\n"
      "    legend_bwd [label=\"backward op\", style=\"filled,dashed\", fillcolor=\"#bdd7ee\"];\n"
      "    legend_bcoll [label=\"backward collective\", style=\"filled,dashed\", fillcolor=\"#f4b183\"];\n"
      "    legend_input -> legend_coll -> legend_op -> legend_bwd -> legend_bcoll [style=invis];\n  }\n";
  return out + "}\n";
}

namespace {
std::string json_attr(const Attr& a) {
  switch (a.kind) {
    case Attr::Int: return std::to_string(a.i);
    case Attr::Float: return std::isfinite(a.f) ? float_str(a.f) : quote(float_str(a.f));
    case Attr::Str:
    case Attr::Sym: return quote(a.s);
    case Attr::List: {
      std::string s = "[";
      for (size_t i = 0; i < a.list.size(); ++i) s += (i ? ", " : "") + json_attr(a.list[i]);
      return s + "]";
    }
  }
  return "null";
}
}  // namespace

std::string print_json(const Graph& g) {
  std::vector<std::string> names = value_names(g);
  std::string out = fmt::format("{{\"world\": {},{}\n \"nodes\": [", g.world, mesh_json(g));
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<std::string> args, attrs;
    for (ValueId a : n.args) args.push_back(quote(names[size_t(a)]));
    for (const auto& [k, v] : n.attrs->items) attrs.push_back(fmt::format("{}: {}", quote(k), json_attr(v)));
    out += fmt::format(
        "{}\n  {{\"id\": {}, \"name\": {}, \"op\": {}, \"args\": [{}], \"attrs\": {{{}}}, "
        "\"dtype\": \"{}\", \"shape\": [{}], \"collective\": {}, \"backward\": {}",
        i ? "," : "", i, quote(names[i]), quote(std::string(op_name(n.op))), fmt::join(args, ", "),
        fmt::join(attrs, ", "), dtype_name(n.type->dtype), fmt::join(n.type->shape, ", "), is_collective(n.op),
        n.backward);
    if (n.rep != Rep::Unknown) out += fmt::format(", \"rep\": \"{}\"", rep_str(g, n.rep));
    if (n.grad_of >= 0) out += fmt::format(", \"grad_of\": {}", quote(names[size_t(n.grad_of)]));
    if (n.loc.known()) out += fmt::format(", \"loc\": [{}, {}]", n.loc.line, n.loc.col);
    if (n.loc.site) {  // the def calls it was reached through, innermost first
      std::vector<std::string> calls;
      for (const CallSite& c : calls_of(n.loc))
        calls.push_back(fmt::format("{{\"def\": {}, \"loc\": [{}, {}]}}", quote(c.callee), c.call.line, c.call.col));
      out += fmt::format(", \"calls\": [{}]", fmt::join(calls, ", "));
    }
    out += "}";
  }
  out += "],\n \"outputs\": [";
  for (size_t k = 0; k < g.outputs.size(); ++k)
    out += fmt::format("{}{{\"name\": {}, \"value\": {}}}", k ? ", " : "", quote(g.outputs[k].first),
                       quote(names[size_t(g.outputs[k].second)]));
  return out + "]}\n";
}

}  // namespace gradc
