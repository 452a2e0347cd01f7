#include "ir/lowered.h"

#include <fmt/format.h>

#include "ir/print.h"

namespace gradc {
namespace {

const char* kind_name(const LBuffer& b) {
  switch (b.kind) {
    case LBuffer::Input: return "input";
    case LBuffer::Const: return "const";
    case LBuffer::Work: return "work";
    case LBuffer::Alias: return "alias";
  }
  return "?";
}
const char* kind_name(const LKernel& k) {
  switch (k.kind) {
    case LKernel::Map: return "map";
    case LKernel::Reduce: return "reduce";
    case LKernel::Gemm: return "gemm";
    case LKernel::Comm: return "comm";
  }
  return "?";
}
std::string lines_str(const std::vector<int>& lines) {
  if (lines.empty()) return "";
  return fmt::format("line{} {}", lines.size() == 1 ? "" : "s", fmt::join(lines, ","));
}

// What the kernel does, in one line: "z = add, mul(x, y)", "c = gemm(a^T, b)".
std::string body(const Lowered& l, const LKernel& k) {
  const Graph& g = l.graph;
  auto buf = [&](int b) { return l.buffers[size_t(b)].name; };
  std::vector<std::string> reads;
  for (int r : k.reads) reads.push_back(buf(r));
  switch (k.kind) {
    case LKernel::Gemm:
      return fmt::format("{} = gemm({}{}, {}{}) m={} n={} k={} batch={}", buf(k.out), buf(k.a), k.trans_a ? "^T" : "",
                         buf(k.b), k.trans_b ? "^T" : "", k.m, k.n, k.k, k.batch);
    case LKernel::Comm: {
      const Node& n = g[k.root];
      std::vector<std::string> attrs;
      for (const auto& [key, v] : n.attrs.items) attrs.push_back(key + "=" + attr_str(v));
      bool in_place = l.buffers[size_t(k.out)].kind == LBuffer::Alias;
      return fmt::format("{} = {}({}) {{{}}}{}", buf(k.out), op_name(n.op), fmt::join(reads, ", "),
                         fmt::join(attrs, ", "), in_place ? " in place" : "");
    }
    default: {
      const std::string ops = fused_ops(l, k);
      if (k.kind == LKernel::Reduce) {
        const Node& n = g[k.root];
        return fmt::format("{} = {}[axes {}]({}) of ({})", buf(k.out), op_name(n.op), fmt::join(n.attr_ints("axes"), ","),
                           ops, fmt::join(reads, ", "));
      }
      return fmt::format("{} = map({}) of ({}){}", buf(k.out), ops, fmt::join(reads, ", "),
                         k.guard >= 0 ? " if not given" : "");
    }
  }
}

}  // namespace

std::string fused_ops(const Lowered& l, const LKernel& k) {
  constexpr size_t kShown = 24;
  std::vector<std::string> ops;
  for (size_t i = 0; i < k.fused.size() && i < kShown; ++i) ops.push_back(std::string(op_name(l.graph[k.fused[i]].op)));
  if (k.fused.size() > kShown) ops.push_back(fmt::format("... ({} ops)", k.fused.size()));
  return fmt::format("{}", fmt::join(ops, " "));
}

int64_t plan_bytes(const Lowered& l) {
  int64_t total = l.workspace_bytes;
  for (const LBuffer& b : l.buffers)
    if (b.kind == LBuffer::Input || b.kind == LBuffer::Const)
      total += b.bytes() * (b.kind == LBuffer::Input && !l.graph[b.value].args.empty() ? 2 : 1);
  return total;
}

std::string print_lowered(const Lowered& l) {
  std::string s = fmt::format("world {}: {} kernels, {} buffers, workspace {} bytes\n", l.graph.world,
                              l.kernels.size(), l.buffers.size(), l.workspace_bytes);
  for (const LBuffer& b : l.buffers) {
    s += fmt::format("buffer {} {} {}", b.name, kind_name(b), type_str(b.type));
    if (b.kind == LBuffer::Work) s += fmt::format(" @{}", b.offset);
    if (b.kind == LBuffer::Alias) s += fmt::format(" of {}", l.buffers[size_t(b.alias_of)].name);
    s += b.output ? " output\n" : "\n";
  }
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const LKernel& k = l.kernels[i];
    s += fmt::format("kernel {} {} {}: {}", i, k.stream == LKernel::Compute ? "compute" : "comm", kind_name(k),
                     body(l, k));
    if (k.group >= 0) s += fmt::format("; row group {}: {} rows x {}", k.group, k.rows, k.row_len);
    if (!k.waits.empty()) s += fmt::format("; waits for kernel {}", fmt::join(k.waits, ", "));
    if (!k.lines.empty()) s += "; " + lines_str(k.lines);
    s += "\n";
  }
  for (const auto& [name, b] : l.outputs) s += fmt::format("output {} = {}\n", name, l.buffers[size_t(b)].name);
  return s;
}

std::string print_lowered_dot(const Lowered& l) {
  std::string s = "digraph lowered {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n";
  for (size_t b = 0; b < l.buffers.size(); ++b)
    s += fmt::format("  b{} [shape=note, label=\"{}\\n{}\"{}];\n", b, l.buffers[b].name, type_str(l.buffers[b].type),
                     l.buffers[b].kind == LBuffer::Input ? ", style=filled, fillcolor=palegreen" : "");
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const LKernel& k = l.kernels[i];
    bool comm = k.stream == LKernel::Communication;
    if (k.group == int(i)) s += fmt::format("  subgraph cluster_rows{} {{\n    label=\"row group: one kernel\";\n", i);
    s += fmt::format("  k{} [shape=box, label=\"{} {}\\n{}\"{}];\n", i, kind_name(k), i, lines_str(k.lines),
                     comm ? ", style=filled, fillcolor=orange" : "");
    if (k.group >= 0 && (i + 1 == l.kernels.size() || l.kernels[i + 1].group != k.group)) s += "  }\n";
    for (int r : k.reads) s += fmt::format("  b{} -> k{};\n", r, i);
    s += fmt::format("  k{} -> b{};\n", i, k.out);
    for (int w : k.waits) s += fmt::format("  k{} -> k{} [style=dashed, label=\"wait\"];\n", w, i);
  }
  return s + "}\n";
}

std::string print_lowered_json(const Lowered& l) {
  std::string s = fmt::format("{{\"world\": {}, \"workspace_bytes\": {},\n \"buffers\": [", l.graph.world,
                              l.workspace_bytes);
  for (size_t b = 0; b < l.buffers.size(); ++b) {
    const LBuffer& x = l.buffers[b];
    s += fmt::format("{}\n  {{\"name\": \"{}\", \"kind\": \"{}\", \"type\": \"{}\", \"offset\": {}, \"output\": {}}}",
                     b ? "," : "", x.name, kind_name(x), type_str(x.type), x.offset, x.output ? "true" : "false");
  }
  s += "],\n \"kernels\": [";
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const LKernel& k = l.kernels[i];
    s += fmt::format("{}\n  {{\"kind\": \"{}\", \"stream\": \"{}\", \"out\": {}, \"reads\": [{}], \"waits\": [{}], "
                     "\"lines\": [{}], \"what\": \"{}\"",
                     i ? "," : "", kind_name(k), k.stream == LKernel::Compute ? "compute" : "comm", k.out,
                     fmt::join(k.reads, ", "), fmt::join(k.waits, ", "), fmt::join(k.lines, ", "), body(l, k));
    if (k.group >= 0) s += fmt::format(", \"group\": {}, \"rows\": {}, \"row_len\": {}", k.group, k.rows, k.row_len);
    s += "}";
  }
  return s + "]}\n";
}

}  // namespace gradc
