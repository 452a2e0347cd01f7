#include "ir/lowered.h"

#include <fmt/format.h>

#include <cstdio>
#include <iterator>
#include <string>

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
    case LKernel::Loop: return "loop";
  }
  return "?";
}
// Printing appends to a buffer, the frequent pieces without a format string. Printed
// to a file, the buffer is written out line by line once it holds 64 KiB (a
// 100k-statement program prints 28 MB: written from a buffer that stays in the cache);
// the pieces a caller gets as strings (body, fused_ops) stay in it.
struct Out {
  using value_type = char;  // for std::back_inserter
  std::string s;
  std::FILE* file = nullptr;
  void append(const char* b, const char* e) { s.append(b, size_t(e - b)); }  // not s.append(b, e): replace()
  void push_back(char c) { s.push_back(c); }
  void line_done() {
    if (s.size() >= (size_t(1) << 16)) flush();
  }
  void flush() {
    std::fwrite(s.data(), 1, s.size(), file);
    s.clear();
  }
};
void put(Out& out, std::string_view s) { out.append(s.data(), s.data() + s.size()); }
void put(Out& out, int64_t v) {
  fmt::format_int f(v);
  out.append(f.data(), f.data() + f.size());
}
template <class T>
void put_list(Out& out, const std::vector<T>& items, std::string_view sep) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) put(out, sep);
    put(out, items[i]);
  }
}

void write_lines(Out& out, const std::vector<int>& lines) {
  if (lines.empty()) return;
  put(out, lines.size() == 1 ? "line " : "lines ");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) out.push_back(',');
    put(out, int64_t(lines[i]));
  }
}
std::string lines_str(const std::vector<int>& lines) {
  Out out;
  write_lines(out, lines);
  return out.s;
}

void write_fused_ops(Out& out, const Lowered& l, const LKernel& k) {
  constexpr size_t kShown = 24;
  for (size_t i = 0; i < k.fused.size() && i < kShown; ++i) {
    if (i) out.push_back(' ');
    const std::string_view name = op_name(l.graph[k.fused[i]].op);
    out.append(name.data(), name.data() + name.size());
  }
  if (k.fused.size() > kShown) fmt::format_to(std::back_inserter(out), " ... ({} ops)", k.fused.size());
}

// What the kernel does, in one line: "z = add, mul(x, y)", "c = gemm(a^T, b)".
void write_body(Out& out, const Lowered& l, const LKernel& k) {
  const Graph& g = l.graph;
  auto it = std::back_inserter(out);
  auto buf = [&](int b) -> const std::string& { return l.buffers[size_t(b)].name; };
  auto reads = [&] {
    for (size_t i = 0; i < k.reads.size(); ++i) {
      if (i) put(out, ", ");
      put(out, buf(k.reads[i]));
    }
  };
  switch (k.kind) {
    case LKernel::Gemm: {
      const LGemm& m = l.gemms[size_t(k.gemm)];
      fmt::format_to(it, "{} = gemm({}{}, {}{}) m={} n={} k={} batch={}", buf(k.out), buf(m.a), m.trans_a ? "^T" : "",
                     buf(m.b), m.trans_b ? "^T" : "", m.m, m.n, m.k, m.batch);
      if (m.alpha != 1) fmt::format_to(it, " alpha={}", m.alpha);
      return;
    }
    case LKernel::Comm:
    case LKernel::Loop: {
      const Node& n = g[k.root];
      fmt::format_to(it, "{} = {}(", buf(k.out), op_name(n.op));
      if (k.kind == LKernel::Loop)  // its operands in order
        for (size_t i = 0; i < n.args.size(); ++i)
          fmt::format_to(it, "{}{}", i ? ", " : "", buf(l.buffer_of[size_t(n.args[i])]));
      else
        reads();
      fmt::format_to(it, ") {{");
      for (size_t i = 0; i < n.attrs->items.size(); ++i)
        fmt::format_to(it, "{}{}={}", i ? ", " : "", n.attrs->items[i].first, attr_str(n.attrs->items[i].second));
      fmt::format_to(it, "}}{}", l.buffers[size_t(k.out)].kind == LBuffer::Alias ? " in place" : "");
      if (k.kind == LKernel::Loop && !k.fused.empty()) put(out, ", checking its indices");
      return;
    }
    default: {
      put(out, buf(k.out));
      if (k.kind == LKernel::Reduce) {
        const Node& n = g[k.root];
        fmt::format_to(it, " = {}[axes {}](", op_name(n.op), fmt::join(n.attr_ints("axes"), ","));
      } else {
        put(out, " = map(");
      }
      write_fused_ops(out, l, k);
      put(out, ") of (");
      reads();
      put(out, k.kind == LKernel::Map && k.guard >= 0 ? ") if not given" : ")");
    }
  }
}
std::string body(const Lowered& l, const LKernel& k) {
  Out out;
  write_body(out, l, k);
  return out.s;
}

}  // namespace

std::string fused_ops(const Lowered& l, const LKernel& k) {
  Out out;
  write_fused_ops(out, l, k);
  return out.s;
}

int base_buffer(const Lowered& l, int b) {
  while (l.buffers[size_t(b)].kind == LBuffer::Alias) b = l.buffers[size_t(b)].alias_of;
  return b;
}

int64_t tile_size(const Lowered& l, const LKernel& k) {
  if (k.kind == LKernel::Map) return l.buffers[size_t(k.out)].type->size();
  if (k.kind == LKernel::Reduce && l.buffers[size_t(k.out)].type->size() == 1)
    return l.graph.type(l.graph[k.root].args[0]).size();
  return 0;
}

int64_t last_row_len(const Lowered& l, const LKernel& k) {
  const int64_t n = tile_size(l, k);
  return k.tiles && k.rows * k.row_len != n ? n - (k.rows - 1) * k.row_len : 0;
}

int64_t plan_bytes(const Lowered& l) {
  int64_t total = l.workspace_bytes;
  for (const LBuffer& b : l.buffers)
    if (b.kind == LBuffer::Input || b.kind == LBuffer::Const)
      total += b.bytes() * (b.kind == LBuffer::Input && !l.graph[b.value].args.empty() ? 2 : 1);
  return total;
}

void print_lowered(const Lowered& l, std::FILE* to) {
  Out s;
  s.file = to;
  s.s.reserve((size_t(1) << 16) + 4096);
  auto it = std::back_inserter(s);
  fmt::format_to(it, "world {}: {} kernels, {} buffers, workspace {} bytes\n", l.graph.world, l.kernels.size(),
                 l.buffers.size(), l.workspace_bytes);
  for (const LBuffer& b : l.buffers) {
    put(s, "buffer ");
    put(s, b.name);
    s.push_back(' ');
    put(s, kind_name(b));
    s.push_back(' ');
    put(s, dtype_name(b.type->dtype));
    s.push_back('[');
    put_list(s, b.type->shape, ", ");
    s.push_back(']');
    if (b.kind == LBuffer::Work) {
      put(s, " @");
      put(s, b.offset);
    }
    if (b.row_local) put(s, " row-local");
    if (b.kind == LBuffer::Alias) {
      put(s, " of ");
      put(s, l.buffers[size_t(b.alias_of)].name);
    }
    put(s, b.output ? " output\n" : "\n");
    s.line_done();
  }
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const LKernel& k = l.kernels[i];
    put(s, "kernel ");
    put(s, int64_t(i));
    put(s, k.stream == LKernel::Compute ? " compute " : " comm ");
    put(s, kind_name(k));
    put(s, ": ");
    write_body(s, l, k);
    if (k.group >= 0) fmt::format_to(it, "; row group {}: {} rows x {}", k.group, k.rows, k.row_len);
    if (const int64_t last = last_row_len(l, k); last > 0) fmt::format_to(it, ", the last {}", last);
    if (!k.waits.empty()) {
      put(s, "; waits for kernel ");
      put_list(s, k.waits, ", ");
    }
    if (!k.lines.empty()) {
      put(s, "; ");
      write_lines(s, k.lines);
    }
    s.push_back('\n');
    s.line_done();
  }
  for (const auto& [name, b] : l.outputs) fmt::format_to(it, "output {} = {}\n", name, l.buffers[size_t(b)].name);
  s.flush();
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
  std::string s =
      fmt::format("{{\"world\": {}, \"workspace_bytes\": {},\n \"buffers\": [", l.graph.world, l.workspace_bytes);
  for (size_t b = 0; b < l.buffers.size(); ++b) {
    const LBuffer& x = l.buffers[b];
    s += fmt::format(
        "{}\n  {{\"name\": \"{}\", \"kind\": \"{}\", \"type\": \"{}\", \"offset\": {}, \"output\": {}, \"row_local\": "
        "{}}}",
        b ? "," : "", x.name, kind_name(x), type_str(x.type), x.offset, x.output ? "true" : "false",
        x.row_local ? "true" : "false");
  }
  s += "],\n \"kernels\": [";
  for (size_t i = 0; i < l.kernels.size(); ++i) {
    const LKernel& k = l.kernels[i];
    s += fmt::format(
        "{}\n  {{\"kind\": \"{}\", \"stream\": \"{}\", \"out\": {}, \"reads\": [{}], \"waits\": [{}], "
        "\"lines\": [{}], \"what\": \"{}\"",
        i ? "," : "", kind_name(k), k.stream == LKernel::Compute ? "compute" : "comm", k.out, fmt::join(k.reads, ", "),
        fmt::join(k.waits, ", "), fmt::join(k.lines, ", "), body(l, k));
    if (k.group >= 0) s += fmt::format(", \"group\": {}, \"rows\": {}, \"row_len\": {}", k.group, k.rows, k.row_len);
    if (const int64_t last = last_row_len(l, k); last > 0) s += fmt::format(", \"last_row_len\": {}", last);
    s += "}";
  }
  return s + "]}\n";
}

}  // namespace gradc
