#include "codegen/cpp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "codegen/runtime_files.h"
#include "ir/collectives.h"
#include "ir/mesh.h"
#include "ir/print.h"
#include "ir/view.h"
#include "passes/lower_kernels.h"
#include "support/diag.h"
#include "support/file.h"
#include "support/stack.h"

namespace gradc {

const char* cpp_type(DType t) {
  switch (t) {
    case DType::F32: return "float";
    case DType::F64: return "double";
    case DType::BF16: return "gradc::bfloat16";
    case DType::F16: return "gradc::float16";
    case DType::I32: break;
  }
  return "int32_t";
}

namespace {

// Whether C++ text names `var` (as a whole word).
bool mentions(const std::string& text, const std::string& var) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t p = text.find(var); p != std::string::npos; p = text.find(var, p + 1))
    if ((p == 0 || !word(text[p - 1])) && (p + var.size() == text.size() || !word(text[p + var.size()]))) return true;
  return false;
}

// A functor's index parameter, named where its body reads it: `int64_t o`, else
// `int64_t /*o*/` (a body whose value does not depend on it, a broadcast one).
std::string index_param(const std::string& body, const std::string& name) {
  return mentions(body, name) ? "int64_t " + name : "int64_t /*" + name + "*/";
}

const char* dtype_enum(DType t) {
  switch (t) {
    case DType::F32: return "gradc::DType::F32";
    case DType::F64: return "gradc::DType::F64";
    case DType::BF16: return "gradc::DType::BF16";
    case DType::F16: return "gradc::DType::F16";
    case DType::I32: break;
  }
  return "gradc::DType::I32";
}

// A number as a C++ literal of type t, exact (shortest round-trip digits).
std::string literal(double v, DType t) {
  if (t == DType::I32) return fmt::format("int32_t({})", int64_t(v));
  if (std::isnan(v)) return fmt::format("{}(NAN)", cpp_type(t));
  if (std::isinf(v)) return fmt::format("{}({}INFINITY)", cpp_type(t), v < 0 ? "-" : "");
  std::string s = t == DType::F32 ? fmt::format("{}", float(v)) : fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return t == DType::F32 ? s + "f" : s;
}

// The index of `rank` (a C++ expression) in its group over `axes`, as ir/mesh.h's
// group_rank: its coordinates on them, row-major in their order ("0" for no axes).
std::string group_rank_code(const Graph& g, const std::vector<int>& axes, const std::string& rank) {
  std::string e;
  for (int a : axes) {
    const int stride = axis_stride(g, a);
    std::string c = stride == 1 ? fmt::format("{} % {}", rank, axis_size(g, a))
                                : fmt::format("{} / {} % {}", rank, stride, axis_size(g, a));
    e = e.empty() ? c : fmt::format("({}) * {} + {}", e, axis_size(g, a), c);
  }
  return e.empty() ? "0" : e;
}

// sum idx[d] * stride[d], written simply.
std::string flat_index(const std::vector<std::string>& idx, const Shape& shape) {
  Shape st = row_major_strides(shape);
  std::vector<std::string> terms;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (idx[d] == "0" || shape[d] == 1) continue;
    terms.push_back(st[d] == 1 ? idx[d] : fmt::format("{} * {}", idx[d], st[d]));
  }
  return terms.empty() ? "0" : fmt::format("{}", fmt::join(terms, " + "));
}

// A shape as the runtime's error messages take it: gradc::Dims{2, 3}.
std::string dims_code(const Shape& s) { return fmt::format("gradc::Dims{{{}}}", fmt::join(s, ", ")); }

// The statement raising an index check's error (check_labels with what=, node c) for
// the C++ expressions `index` and `element` (its flat position in the indices): the
// same words in a map kernel that fuses the check and in a loop kernel that makes it.
std::string index_error_call(const Node& c, const std::string& where, const std::string& index,
                             const std::string& element) {
  return fmt::format("gradc::index_error(\"{}\", \"{}\", rank, {}, {}, {}, {});", where, c.attr_sym("what"), index,
                     c.attr_int("n"), element, dims_code(c.type->shape));
}

// The body of one map or reduce kernel: statements computing values at index
// expressions, memoised within a scope.
class Body {
 public:
  Body(const Lowered& l, const LKernel& k, const std::string& source)
      : l_(l), g_(l.graph), source_(source), fused_(k.fused.begin(), k.fused.end()) {}
  Body(const Lowered& l, const std::set<ValueId>& fused, const std::string& source)
      : l_(l), g_(l.graph), source_(source), fused_(fused) {}

  // Splits flat index `flat` of `shape` into one variable per axis.
  std::vector<std::string> unflatten(const std::string& flat, const Shape& shape, const std::string& prefix) {
    std::vector<std::string> idx;
    Shape st = row_major_strides(shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      std::string e = "0";
      if (shape[d] != 1) {
        e = flat;
        if (st[d] != 1) e = fmt::format("({} / {})", e, st[d]);
        if (d > 0) e = fmt::format("{} % {}", e, shape[d]);
      }
      std::string var = fmt::format("{}{}", prefix, d);
      line(fmt::format("const int64_t {} = {};", var, e));
      if (flat == "i" && e != flat && e != "0") divides_i_.insert(var);
      idx.push_back(var);
    }
    return idx;
  }

  // The value v at multi-index idx (one expression per axis of v's shape): the
  // name of a variable holding it.
  std::string value(ValueId v, const std::vector<std::string>& idx) {
    if (auto it = bound_.find(v); it != bound_.end()) return it->second;  // a table's value, at any index
    const std::string k = key(v, idx);
    for (auto s = memo_.rbegin(); s != memo_.rend(); ++s)
      if (auto it = s->find(k); it != s->end()) return it->second;
    std::string r = deep([&] { return compute(v, idx); });  // a fused chain recurses as deep as it is long
    memo_.back()[k] = r;
    return r;
  }

  void line(const std::string& s) { lines_ += std::string(size_t(indent_), ' ') + s + "\n"; }
  // The statements, without index variables nothing reads.
  std::string text() const {
    std::string out;
    for (const std::string& l : kept_lines()) out += l + "\n";
    return out;
  }
  // Whether the statements read an axis of flat element i (i / stride or i % size: its
  // row, or its place in the row), not i alone: a map that is run in rows (map_rows).
  bool reads_axes_of_i() const {
    for (const std::string& l : kept_lines())
      if (divides_i_.count(index_var(l))) return true;
    return false;
  }
  // The index variable a statement defines ("const int64_t NAME = ..."), or "".
  static std::string index_var(const std::string& line) {
    const size_t p = line.find("const int64_t ");
    return p == std::string::npos ? "" : line.substr(p + 14, line.find(' ', p + 14) - p - 14);
  }
  // The statements, a string each, less the index variables nothing reads.
  std::vector<std::string> kept_lines() const {
    std::vector<std::string> lines;
    for (size_t a = 0, b; a < lines_.size(); a = b + 1)
      lines.push_back(lines_.substr(a, (b = lines_.find('\n', a)) - a));
    return pruned(std::move(lines));
  }
  // A body in a row's terms (row r, element j of it, the map_rows form): its statements
  // split into the element's and the checks that depend on the row alone, with the
  // statements those read (an embedding lookup's id: `take(w, ids)` checks ids[r] once a
  // row, where a check among the element's statements, a call, keeps clang from
  // vectorising the loop over the row). Only checks outside any block move: one in a
  // block depends on its condition.
  struct RowSplit {
    std::string element, row_checks;
  };
  RowSplit split_row_checks() const {
    const std::vector<std::string> lines = kept_lines();
    std::set<std::string> of_element = {"i", "j"};  // variables that depend on the element
    std::vector<bool> row_check(lines.size(), false);
    const size_t top = lines.empty() ? 0 : lines[0].find_first_not_of(' ');
    for (size_t l = 0; l < lines.size(); ++l) {
      const std::string& s = lines[l];
      const size_t at = s.find_first_not_of(' ');
      const bool nested = at != top || s.back() == '{' || s.substr(at) == "}";
      bool element = nested;
      for (const std::string& v : of_element) element = element || mentions(s, v);
      if (const std::string v = assigned(s); !v.empty() && element) of_element.insert(v);
      row_check[l] = !element && s.compare(at, 4, "if (") == 0 && s.find("_error(") != std::string::npos;
    }
    // the checks' statements: the row's lines that define what a kept line reads
    std::vector<bool> keep = row_check;
    for (size_t l = lines.size(); l-- > 0;)
      for (size_t m = l + 1; m < lines.size() && !keep[l]; ++m) {
        const std::string v = assigned(lines[l]);
        keep[l] = keep[m] && !v.empty() && !of_element.count(v) && mentions(lines[m], v);
      }
    RowSplit r;
    std::vector<std::string> element, checks;
    for (size_t l = 0; l < lines.size(); ++l) {
      if (!row_check[l]) element.push_back(lines[l]);
      if (keep[l]) checks.push_back(lines[l]);
    }
    for (const std::string& l : pruned(element)) r.element += l + "\n";
    for (const std::string& l : pruned(checks)) r.row_checks += l + "\n";
    return r;
  }
  // The variable a statement defines or assigns (`T NAME = ...`, `NAME = ...`, `T NAME{};`), or "".
  static std::string assigned(const std::string& line) {
    const size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos || line.compare(at, 4, "if (") == 0 || line.compare(at, 6, "return") == 0) return "";
    size_t end = line.find(" = ", at);
    if (end == std::string::npos) end = line.find("{};", at);
    if (end == std::string::npos || line.find('(', at) < end) return "";
    const std::string left = line.substr(at, end - at);
    return left.substr(left.rfind(' ') == std::string::npos ? 0 : left.rfind(' ') + 1);
  }
  // `lines` less the index variables nothing reads.
  static std::vector<std::string> pruned(std::vector<std::string> lines) {
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < lines.size(); ++i) {
        const std::string var = index_var(lines[i]);
        if (var.empty()) continue;
        bool used = false;
        for (size_t j = 0; j < lines.size() && !used; ++j)
          if (j != i) used = mentions(lines[j], var);
        if (!used) {
          lines.erase(lines.begin() + long(i));
          changed = true;
          break;
        }
      }
    }
    return lines;
  }
  // A plain map's body: `root` at flat element i of the output, of `shape`.
  void map_element(ValueId root, const Shape& shape) {
    std::vector<std::string> idx = unflatten("i", shape, "i");
    set_element(idx, shape, "i");
    line(fmt::format("return {};", value(root, idx)));
  }
  // A map kernel reads buffers of its own shape at its own element: buf[i].
  void set_element(const std::vector<std::string>& idx, const Shape& shape, const std::string& flat) {
    elements_ = {{idx, shape}};
    elem_flat_ = flat;
  }
  void set_prefetch(bool on) { prefetch_ = on; }  // the CPU's (prefetch_ahead)
  // The CPU's tables: a value that is a function of one 16-bit value alone is looked up
  // in a table of its value at each of that value's 65536 bit patterns (table_leaf),
  // which `tables` receives as a definition, named `prefix`_tableN.
  void set_tables(const std::string& prefix, std::vector<std::string>* tables) {
    table_prefix_ = prefix;
    tables_ = tables;
  }
  // A map's buffers read at its own element become the body's parameters e_NAME (in
  // `params`, first read first), which its caller loads: two elements at a time on the GPU.
  void set_element_params(bool on) { element_params_ = on; }
  // A row group member on the CPU, whose row is `row_var` (its element in the row
  // `in_row`, for a map): row-local buffers are read at the element's place in the row.
  void set_row(const std::string& row_var, int64_t len, const std::string& in_row) {
    row_var_ = row_var;
    row_len_ = len;
    in_row_ = in_row;
  }
  std::set<int> reads;      // buffers read
  std::vector<int> params;  // of them, those read at the element as parameters (set_element_params)

 private:
  // A local: vK, or vK_NAME for a named value (never a field's b_NAME, an index variable or C++).
  std::string fresh(ValueId v) {
    std::string n = g_[v].name;
    std::replace(n.begin(), n.end(), '.', '_');
    return n.empty() ? fmt::format("v{}", counter_++) : fmt::format("v{}_{}", counter_++, n);
  }
  std::string def(ValueId v, const std::string& expr) {
    std::string name = fresh(v);
    line(fmt::format(
        "{} {} = {};", cpp_type(g_.type(v).dtype), name,
        expr));  // not const: a long chain of const locals sends clang's constant evaluator into deep recursion
    return name;
  }
  std::string load(int b, const std::vector<std::string>& idx) {
    reads.insert(b);
    const LBuffer& x = l_.buffers[size_t(b)];
    const bool elem = at_own_element(idx, x.type->shape);
    if (row_len_ > 0 && l_.buffers[size_t(base_buffer(l_, b))].row_local) {  // it holds the current row only
      if (elem && !in_row_.empty()) return fmt::format("b_{}[{}]", x.name, in_row_);
      return fmt::format("b_{}[{} - {} * {}]", x.name, flat_at(idx, x.type->shape), row_var_, row_len_);
    }
    if (elem) return at_element(b);
    return fmt::format("b_{}[{}]", x.name, flat_index(idx, x.type->shape));
  }
  // The flat index of idx in shape: the map's own element's variable where it is that.
  std::string flat_at(const std::vector<std::string>& idx, const Shape& shape) const {
    return at_own_element(idx, shape) ? elem_flat_ : flat_index(idx, shape);
  }
  // Buffer b at the map's own flat element: b_NAME[i], or the body's parameter e_NAME.
  std::string at_element(int b) {
    reads.insert(b);
    const std::string& name = l_.buffers[size_t(b)].name;
    if (!element_params_) return fmt::format("b_{}[{}]", name, elem_flat_);
    if (std::find(params.begin(), params.end(), b) == params.end()) params.push_back(b);
    return "e_" + name;
  }
  // A take whose positions stay near its element's own (take_along_axis: within the
  // element's row of x) reads x about in order, but each row's cache lines in a random
  // one, which the CPU's prefetchers do not follow: every 16th element asks for the line
  // 4 KiB further on in x (scaled where x is longer than the result), as a streamed
  // read would have it. Only where x is a buffer the kernel reads, and not in a row
  // group (which works on one row, already in cache, and may hold x's row alone); CPU only.
  void prefetch_ahead(ValueId x, const std::vector<std::string>& idx, const Shape& shape) {
    if (row_len_ > 0) return;
    const std::string element = flat_at(idx, shape);
    const int64_t n = num_elements(g_.type(x).shape), count = num_elements(shape);
    std::string ahead = fmt::format("{} + {}", element, 4096 / dtype_size(g_.type(x).dtype));
    if (n != count) ahead = fmt::format("({}) * {} / {}", ahead, n, count);
    const std::string at = value(x, {fmt::format("std::min<int64_t>({}, {})", ahead, n - 1)});
    const std::string e = element.find(' ') == std::string::npos ? element : "(" + element + ")";
    if (at.starts_with("b_")) line(fmt::format("if (({} & 15) == 0) GRADC_PREFETCH(&{});", e, at));
  }
  // An operand's index from the output's, by a view's axes (ir/view.h).
  static std::vector<std::string> operand_index(const std::vector<std::string>& idx,
                                                const std::vector<ViewAxis>& axes) {
    std::vector<std::string> out;
    for (const ViewAxis& a : axes) {
      if (a.from < 0)
        out.push_back("0");
      else if (a.offset == 0)
        out.push_back(idx[size_t(a.from)]);
      else
        out.push_back(fmt::format("({} {} {})", idx[size_t(a.from)], a.offset > 0 ? '+' : '-', std::abs(a.offset)));
    }
    return out;
  }
  static std::vector<std::string> broadcast(const std::vector<std::string>& idx, const Shape& from, const Shape& to) {
    return operand_index(idx, broadcast_axes(from, to));
  }
  // A view op's value at idx: its map's reads, each guarded by its box where that is not the whole output.
  std::string view(ValueId v, const ViewMap& m, const std::vector<std::string>& idx) {
    const Node& n = g_[v];
    const Shape& out = n.type->shape;
    if (m.flat) {  // reshape: the same flat element
      const Shape& in = g_.type(n.args[0]).shape;
      if (in == out) return value(n.args[0], idx);
      const int b = l_.buffer_of[size_t(n.args[0])];
      if (!fused_.count(n.args[0]) && b >= 0 && !l_.buffers[size_t(base_buffer(l_, b))].row_local) {
        // a buffer: read at the flat element itself
        if (at_own_element(idx, out)) return at_element(b);
        reads.insert(b);
        return fmt::format("b_{}[{}]", l_.buffers[size_t(b)].name, flat_index(idx, out));
      }
      if (at_own_element(idx, out)) {  // the operand's index at the same flat element is also the element's
        std::vector<std::string> in_idx = unflatten(elem_flat_, in, fmt::format("r{}_", counter_++));
        elements_.emplace_back(in_idx, in);
        return value(n.args[0], in_idx);
      }
      std::string flat = fmt::format("f{}", counter_++);
      line(fmt::format("const int64_t {} = {};", flat, flat_index(idx, out)));
      return value(n.args[0], unflatten(flat, in, fmt::format("r{}_", counter_++)));
    }
    // the axes a read's box bounds
    auto bounded = [&](const ViewRead& r) {
      std::vector<size_t> axes;
      for (size_t e = 0; !r.whole() && e < out.size(); ++e)
        if (r.lo[e] != 0 || r.hi[e] != out[e]) axes.push_back(e);
      return axes;
    };
    if (m.reads.size() == 1) {
      const ViewRead& r = m.reads[0];
      std::vector<std::string> in = operand_index(idx, r.axes), conds;
      for (size_t e : bounded(r)) conds.push_back(fmt::format("{} >= {} && {} < {}", idx[e], r.lo[e], idx[e], r.hi[e]));
      if (conds.empty()) return value(n.args[r.operand], in);
      return guarded(v, fmt::format("{}", fmt::join(conds, " && ")), n.args[r.operand], in);
    }
    // reads that tile an axis in order: each below its end, past the reads before it
    std::string name = fresh(v);
    line(fmt::format("{} {}{{}};", cpp_type(n.type->dtype), name));
    for (size_t i = 0; i < m.reads.size(); ++i) {
      const ViewRead& r = m.reads[i];
      std::vector<std::string> in = operand_index(idx, r.axes), conds;
      for (size_t e : bounded(r)) conds.push_back(fmt::format("{} < {}", idx[e], r.hi[e]));
      line(fmt::format("{}if ({}) {{", i ? "else " : "",
                       conds.empty() ? "true" : fmt::format("{}", fmt::join(conds, " && "))));
      indent_ += 2;
      memo_.emplace_back();
      line(fmt::format("{} = {};", name, value(n.args[r.operand], in)));
      memo_.pop_back();
      indent_ -= 2;
      line("}");
    }
    return name;
  }
  // Evaluates `v` at idx only when `cond` holds, else zero: the operand may not be read there.
  std::string guarded(ValueId v, const std::string& cond, ValueId child, const std::vector<std::string>& cidx) {
    std::string name = fresh(v);
    line(fmt::format("{} {}{{}};", cpp_type(g_.type(v).dtype), name));
    line(fmt::format("if ({}) {{", cond));
    indent_ += 2;
    memo_.emplace_back();
    line(fmt::format("{} = {};", name, value(child, cidx)));
    memo_.pop_back();
    indent_ -= 2;
    line("}");
    return name;
  }

  // What a table needs (table_leaf): through x's operands, the nearest 16-bit values
  // (one at most, `leaf`), and whether a costly op is on the way.
  struct Cone {
    bool ok = false;
    ValueId leaf = -1;
    bool costly = false;
  };
  // A splat constant, or a broadcast, reshape or cast of one, that the kernel computes
  // (one in a buffer, an output's, is read): the same value at every element.
  bool splat(ValueId x) const {
    const Node& n = g_[x];
    if (!fused_.count(x)) return false;
    if (n.op == Op::Const) return n.attrs.find("value")->kind != Attr::List;
    return (n.op == Op::BroadcastTo || n.op == Op::Reshape || n.op == Op::Cast) && splat(n.args[0]);
  }
  // x (fused) walked through: elementwise ops of x's shape (and reshapes to the same
  // shape) on its operands, which are splat constants, 16-bit values (the leaf, one value)
  // or values walked through in turn; an op that depends on where the element is (rank,
  // iota, rand, take, an index check) or may stop the program (// and % of integers) is
  // not walked through.
  Cone cone(ValueId x) {
    if (auto it = cones_.find(x); it != cones_.end()) return it->second;
    Cone c;
    const Node& n = g_[x];
    const bool same_shape_view = n.op == Op::Reshape && g_.type(n.args[0]).shape == n.type->shape;
    c.ok = fused_.count(x) && (same_shape_view || (is_elementwise(n.op) && n.op != Op::CheckLabels &&
                                                   n.op != Op::FloorDiv && n.op != Op::Mod && !view_maps()[n.op]));
    c.costly = float_only(n.op) && !cheap_scalars()[n.op];  // exp, tanh, division ...: not a vector instruction or two
    for (size_t i = 0; c.ok && i < n.args.size(); ++i) {
      const ValueId a = n.args[i];
      const Node& an = g_[a];
      if (splat(a)) continue;  // no element's own
      if (an.type->shape != n.type->shape) {
        c.ok = false;
      } else if (is_low_precision(an.type->dtype)) {
        c.ok = c.leaf < 0 || c.leaf == a;
        c.leaf = a;
      } else {
        const Cone ac = deep([&] { return cone(a); });  // as deep as a fused chain is long
        c.ok = ac.ok && (ac.leaf < 0 || c.leaf < 0 || ac.leaf == c.leaf);
        if (ac.leaf >= 0) c.leaf = ac.leaf;
        c.costly |= ac.costly;
      }
    }
    return cones_[x] = c;
  }
  // The 16-bit value v is a function of alone, reaching down through 16-bit values that
  // are themselves functions of one (tanh(x * 1.5 + 0.5) in bf16, each op rounded, is a
  // function of x), where the ops on the way hold a costly one: else -1. f32 and 16-bit
  // results only, so that an entry is 32 bits; of more than one element (one is computed
  // once where read, as lower_kernels' of_one_16bit has it).
  ValueId table_leaf(ValueId v) {
    const DType t = g_.type(v).dtype;
    if ((t != DType::F32 && !is_low_precision(t)) || g_.type(v).size() <= 1) return -1;
    Cone c = cone(v);
    if (!c.ok || c.leaf < 0) return -1;
    for (Cone below; fused_.count(c.leaf) && (below = cone(c.leaf)).ok && below.leaf >= 0;)
      c.leaf = below.leaf, c.costly |= below.costly;
    return c.costly ? c.leaf : -1;
  }
  // v from the table of its values at each of the 65536 values of `leaf` (table_leaf),
  // which is defined (once for v) by the same code as v's, on the leaf's value `e`.
  std::string table_lookup(ValueId v, ValueId leaf, const std::vector<std::string>& idx) {
    const std::string at = value(leaf, idx);
    auto [it, made] = table_of_.try_emplace(v);
    if (made) {
      it->second = fmt::format("{}_table{}", table_prefix_, tables_->size());
      Body f(l_, fused_, source_);
      f.bound_[leaf] = "e";  // at whatever index the walk reaches it: all of the cone's values have v's shape
      const std::string r = f.value(v, idx);
      f.line(fmt::format("return {};", r));
      const char* lt = cpp_type(g_.type(leaf).dtype);
      tables_->push_back(
          fmt::format("// {}: {}'s value at each of the 65536 values of {} ({}), computed once\n"
                      "const gradc::Table16<{}, {}> {}([]({} e) {{\n{}}});\n\n",
                      it->second, what(v), what(leaf), fused_ops_of(v, leaf), lt, cpp_type(g_.type(v).dtype),
                      it->second, lt, f.text()));
    }
    return def(v, fmt::format("{}.at({})", it->second, at));
  }
  // A value in a comment: its buffer's name, else its own, else its number.
  std::string what(ValueId x) const {
    if (const int b = l_.buffer_of[size_t(x)]; b >= 0) return l_.buffers[size_t(b)].name;
    return g_[x].name.empty() ? fmt::format("value {}", x) : g_[x].name.str();
  }
  // The ops from leaf to v, in order (a table's comment).
  std::string fused_ops_of(ValueId v, ValueId leaf) const {
    std::vector<ValueId> order;
    std::set<ValueId> seen{leaf};
    std::vector<std::pair<ValueId, bool>> todo{{v, false}};
    while (!todo.empty()) {
      auto [x, done] = todo.back();
      todo.pop_back();
      if (done) {
        order.push_back(x);
        continue;
      }
      if (!seen.insert(x).second || g_[x].op == Op::Const) continue;
      todo.push_back({x, true});
      for (ValueId a : g_[x].args) todo.push_back({a, false});
    }
    std::vector<std::string> ops;
    for (ValueId x : order) ops.emplace_back(op_name(g_[x].op));
    return fmt::format("{}", fmt::join(ops, " "));
  }
  static std::string key(ValueId v, const std::vector<std::string>& idx) {
    return fmt::format("{}@{}", v, fmt::join(idx, ","));
  }

  std::string compute(ValueId v, const std::vector<std::string>& idx) {
    const Node& n = g_[v];
    const int b = l_.buffer_of[size_t(v)];
    if (!fused_.count(v)) {
      GRADC_ASSERT(b >= 0, "value %{} is neither fused nor in a buffer", v);
      return load(b, idx);
    }
    if (tables_)
      if (const ValueId leaf = table_leaf(v); leaf >= 0) return table_lookup(v, leaf, idx);
    const Type& t = n.type;
    if (const ViewFn f = view_maps()[n.op]) {
      std::vector<Shape> in;
      for (ValueId a : n.args) in.push_back(g_.type(a).shape);
      return view(v, f(n, in), idx);
    }
    auto arg = [&](size_t i) { return value(n.args[i], broadcast(idx, g_.type(n.args[i]).shape, t.shape)); };
    switch (n.op) {
      case Op::Const: return literal(n.attrs.find("value")->number(), t.dtype);
      case Op::Rank:
        return n.attrs.has("over") ? fmt::format("int32_t({})", group_rank_code(g_, over_axes(g_, n), "rank")) : "rank";
      case Op::Iota: return fmt::format("int32_t({})", idx[0]);
      case Op::Randn:
      case Op::Rand: {
        std::string seed = value(n.args[0], {});
        return def(v, fmt::format("float(gradc::{}({}, {}))", n.op == Op::Randn ? "normal01" : "uniform01", seed,
                                  flat_index(idx, t.shape)));
      }
      case Op::Cast: {
        // to and from bf16 and f16 only from and to f32 (passes/low_precision.cpp): one rounding, or exact
        const DType from = g_.type(n.args[0]).dtype;
        if (is_low_precision(from)) return def(v, fmt::format("gradc::to_float({})", arg(0)));
        if (is_low_precision(t.dtype))
          return def(v, fmt::format("gradc::to_{}({})", t.dtype == DType::BF16 ? "bfloat16" : "float16", arg(0)));
        return def(v, fmt::format("gradc::op::cast<{}>({})", cpp_type(t.dtype), arg(0)));
      }
#define OP(E, name, arity, flags)
#define COMPARE(E, f, flags) case Op::E:  // every COMPARE row of ir/ops.def
#include "ir/ops.def"
#undef COMPARE
#undef OP
        {
          const std::string x = arg(0), y = arg(1);  // in order: each may write lines (a call's arguments have none)
          return def(v, fmt::format("gradc::op::{}<{}>({}, {})", op_name(n.op), cpp_type(t.dtype), x, y));
        }
      case Op::Where: {
        // the condition may have another dtype; the branches have the result's
        std::string c = arg(0), a = arg(1), bb = arg(2);
        return def(v, fmt::format("gradc::op::where({}, {}, {})", c, a, bb));
      }
      case Op::Take: {
        // x[pre.., indices[j..], post..]; an index out of range stops the rank
        const int rx = g_.type(n.args[0]).rank(), ri = g_.type(n.args[1]).rank();
        const int axis = int(n.attr_int("axis") < 0 ? n.attr_int("axis") + rx : n.attr_int("axis"));
        const Shape& is = g_.type(n.args[1]).shape;
        const int64_t len = g_.type(n.args[0]).shape[size_t(axis)];
        std::vector<std::string> at(idx.begin() + axis, idx.begin() + axis + ri);
        std::string ix = value(n.args[1], at);
        line(fmt::format("if ({} < 0 || {} >= {}) gradc::index_error(\"{}\", \"take\", rank, {}, {}, {}, {});", ix, ix,
                         len, where(n), ix, len, at.empty() ? "0" : flat_index(at, is), dims_code(is)));
        std::vector<std::string> in(idx.begin(), idx.begin() + axis);
        in.push_back(ix);
        in.insert(in.end(), idx.begin() + axis + ri, idx.end());
        if (prefetch_ && n.attrs.has("near") && rx == 1) prefetch_ahead(n.args[0], idx, t.shape);
        return value(n.args[0], in);
      }
      case Op::CheckLabels: {
        const std::string x = arg(0);
        if (n.attrs.has("what")) {  // another op's indices, none ignored
          line(fmt::format("if ({0} < 0 || {0} >= {1}) {2}", x, n.attr_int("n"),
                           index_error_call(n, where(n), x, flat_index(idx, t.shape))));
          return x;
        }
        line(fmt::format(
            "if ({0} != {1} && ({0} < 0 || {0} >= {2})) gradc::label_error(\"{3}\", rank, {0}, {2}, {1}, "
            "{4}, {5});",
            x, n.attr_int("ignore"), n.attr_int("n"), where(n), flat_index(idx, t.shape), dims_code(t.shape)));
        return x;
      }
      case Op::FloorDiv:
      case Op::Mod: {
        std::string a = arg(0), d = arg(1);
        line(fmt::format("if ({} == 0) gradc::division_error(\"{}\", \"{}\", rank, {}, {});", d, where(n),
                         n.op == Op::Mod ? "%" : "//", flat_index(idx, t.shape), dims_code(t.shape)));
        return def(v, fmt::format("gradc::op::{}({}, {})", op_name(n.op), a, d));
      }
      default: break;
    }
    GRADC_ASSERT(is_elementwise(n.op), "{} cannot be fused into a kernel", op_name(n.op));
    std::vector<std::string> args;
    for (size_t i = 0; i < n.args.size(); ++i) args.push_back(arg(i));
    return def(v, fmt::format("gradc::op::{}({})", op_name(n.op), fmt::join(args, ", ")));
  }

  // file:line:col of a node, for the run-time errors at it
  std::string where(const Node& n) const { return loc_str(source_, n.loc); }

  const Lowered& l_;
  const Graph& g_;
  const std::string& source_;
  std::set<ValueId> fused_;
  std::vector<std::map<std::string, std::string>> memo_{1};
  bool prefetch_ = false;
  std::string table_prefix_;
  std::vector<std::string>* tables_ = nullptr;
  std::map<ValueId, Cone> cones_;
  std::map<ValueId, std::string> table_of_;
  std::map<ValueId, std::string> bound_;  // a table's function: its 16-bit value, the parameter e
  bool element_params_ = false;
  // The index variables and shape at which a value is the map's own flat element
  // (elem_flat_): the output's, and a reshaped operand's at the same element.
  std::vector<std::pair<std::vector<std::string>, Shape>> elements_;
  bool at_own_element(const std::vector<std::string>& idx, const Shape& shape) const {
    return !elem_flat_.empty() &&
           std::find(elements_.begin(), elements_.end(), std::pair(idx, shape)) != elements_.end();
  }
  std::string elem_flat_;
  std::set<std::string> divides_i_;  // index variables that are an axis of flat element i (unflatten)
  std::string row_var_, in_row_;
  int64_t row_len_ = 0;
  std::string lines_;
  int indent_ = 4;
  int counter_ = 0;
};

std::string reduce_op(Op op) {
  return op == Op::ReduceSum ? "gradc::ROp::Sum" : op == Op::ReduceMax ? "gradc::ROp::Max" : "gradc::ROp::Min";
}
std::string rop(const Node& n) {
  switch (reduction_of(n)) {
    case Reduction::Sum: return "gradc::ROp::Sum";
    case Reduction::Avg: return "gradc::ROp::Avg";
    case Reduction::Prod: return "gradc::ROp::Prod";
    case Reduction::Max: return "gradc::ROp::Max";
    case Reduction::Min: break;
  }
  return "gradc::ROp::Min";
}

// The [outer, dim, inner] blocks of `shape` around `axis`, with dim divided by `parts`.
std::string blocks(const Shape& shape, int64_t axis, int64_t parts = 1) {
  if (axis < 0) axis += int64_t(shape.size());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  return fmt::format("gradc::Blocks{{{}, {}, {}}}", outer, shape[size_t(axis)] / parts, inner);
}

// ---- names ------------------------------------------------------------------------
// A user's names reach generated code in four places, each kept apart from what
// gradc writes itself, so that no name of a program can break it:
//   kernel fields   b_NAME (a buffer a functor reads); its locals are vK_NAME and its
//                   index variables a letter and digits (i0, q1, f3): never b_ or v<digit>
//   class members   in_NAME_, out_NAME_, default_NAME_ (gradc's own: stream_, ws_, ...)
//   the class's API set_NAME, NAME(), NAME_type, ...: a name that would clash with C++
//                   (a keyword, a macro, std), with the class's own members or with
//                   another name's members takes a trailing _ until it does not
//   the class       the program's name, likewise (class_name), and named in the files
//                   beside the class only by an alias at their top (`using Step = class
//                   NAME;`), so that neither their locals nor a function of the C
//                   library of its name (exp.dg) can hide it
}  // namespace

bool cpp_reserved(const std::string& n) {
  static const std::set<std::string> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char",
      "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit",
      "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double",
      "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
      "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or",
      "or_eq", "private", "protected", "public", "register", "reinterpret_cast", "requires", "return", "short",
      "signed", "sizeof", "static", "static_assert", "static_cast", "struct", "switch", "template", "this",
      "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual",
      "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "final", "override", "import", "module",
      // names and macros of the headers generated code includes
      "std", "gradc", "main", "NAN", "INFINITY", "NULL", "EOF", "assert", "errno", "stdin", "stdout", "stderr",
      "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t", "ptrdiff_t",
      "M_PI", "M_E", "FLT_MAX", "DBL_MAX", "INT32_MAX", "INT32_MIN", "HUGE_VAL", "offsetof", "cudaStream_t",
      "ncclComm_t", "cublasHandle_t", "MPI_Comm", "__global__", "__device__", "__host__"};
  return words.count(n) > 0 || n.rfind("GRADC_", 0) == 0 || n.rfind("__", 0) == 0 ||
         (n.size() > 1 && n[0] == '_' && std::isupper(static_cast<unsigned char>(n[1])));
}

namespace {
// The class's own members, whatever its program (the API's names avoid them too), the
// parameters of its constructors, which name the class where they delegate, and the
// locals of run(), which would hide an output's accessor of their name (spans, shared,
// hashes, checking, check_shared, size_values, size_names).
const std::set<std::string> kClassMembers = {"comm",
                                             "group",
                                             "rank",
                                             "owned",
                                             "stream",
                                             "world",
                                             "Sizes",
                                             "sizes",
                                             "set_sizes",
                                             "workspace_bytes",
                                             "run",
                                             "keep_defaults",
                                             "check_shared_inputs",
                                             "owned_",
                                             "comm_",
                                             "stream_",
                                             "comm_stream_",
                                             "blas_",
                                             "events_",
                                             "scratch_bytes",
                                             "scratch_capacity_",
                                             "rank_",
                                             "ws_",
                                             "ws_bytes_",
                                             "ws_capacity_",
                                             "partials_",
                                             "sz_",
                                             "sized_",
                                             "off_",
                                             "shared_checks_",
                                             "check_shared",
                                             "spans",
                                             "shared",
                                             "hashes",
                                             "checking",
                                             "size_values",
                                             "size_names"};
// The C library's headers, which a header of the program's name would hide (time.dg's
// time.h, found by <ctime>), and those of the libraries the runtime includes.
const std::set<std::string> kHeaderStems = {
    "assert", "complex",      "ctype",     "errno",       "fenv",     "float",  "inttypes",  "iso646",  "limits",
    "locale", "math",         "setjmp",    "signal",      "stdalign", "stdarg", "stdatomic", "stdbool", "stddef",
    "stdint", "stdio",        "stdlib",    "stdnoreturn", "string",   "tgmath", "threads",   "time",    "uchar",
    "wchar",  "wctype",       "alloca",    "features",    "malloc",   "memory", "pthread",   "sched",   "strings",
    "unistd", "fcntl",        "dlfcn",     "immintrin",   "cblas",    "mpi",    "nccl",      "cublas",  "cublas_v2",
    "cuda",   "cuda_runtime", "cuda_bf16", "cuda_fp16",   "omp"};
}  // namespace

// A name in the form of a kernel's functor (k0_x: k, digits, _), which run() names.
static bool kernel_form(const std::string& n) {
  size_t k = 1;
  while (k < n.size() && std::isdigit(static_cast<unsigned char>(n[k]))) ++k;
  return n.rfind("k", 0) == 0 && k > 1 && k < n.size() && n[k] == '_';
}

std::string class_name(std::string n) {
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  // a leading digit or _ (reserved at global scope), a kernel's name (k0_x) or a
  // member's form (in_x_, out_y_, default_x_) takes a leading p
  auto starts = [&](const char* s) { return n.rfind(s, 0) == 0; };
  const bool member = !n.empty() && n.back() == '_' && (starts("in_") || starts("out_") || starts("default_"));
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])) || n[0] == '_' || kernel_form(n) || member)
    n = "p" + n;
  while (cpp_reserved(n) || kClassMembers.count(n) || kHeaderStems.count(n)) n += "_";
  return n;
}

bool has_shared_input(const Lowered& l) {
  return std::any_of(l.inputs.begin(), l.inputs.end(),
                     [&](const auto& in) { return l.graph[l.buffers[size_t(in.second)].value].attrs.has("shared"); });
}

OpTable<RuntimeCall>& runtime_calls() {
  static OpTable<RuntimeCall> t;
  return t;
}

std::map<std::string, std::string> api_names(const Lowered& l, const std::string& cls) {
  std::set<std::string> taken = kClassMembers;
  taken.insert(cls);
  std::map<std::string, std::string> api;
  std::set<std::string> inputs, outputs;
  for (const auto& i : l.inputs) inputs.insert(i.first);
  for (const auto& o : l.outputs) outputs.insert(o.first);
  auto members = [&](const std::string& a, const std::string& n) {
    std::vector<std::string> m = {a + "_type", a + "_size", a + "_rank", a + "_shape"};
    if (inputs.count(n)) m.push_back("set_" + a);
    if (outputs.count(n)) m.insert(m.end(), {a, "set_" + a + "_out"});
    return m;
  };
  auto name = [&](const std::string& n) {
    if (api.count(n)) return;
    // a kernel's form (k0_x) takes a leading p, as the class's name: run() names the
    // kernels' functors (k0_x, k0_x_check, k0_x_table0), which a member of that form
    // (k0_x(), or k0_x_type of an output k0_x) would hide
    std::string a = kernel_form(n) ? "p" + n : n;
    for (;;) {
      std::vector<std::string> m = members(a, n);
      if (!cpp_reserved(a) &&
          std::none_of(m.begin(), m.end(), [&](const std::string& x) { return taken.count(x) > 0; }))
        break;
      a += "_";
    }
    for (const std::string& x : members(a, n)) taken.insert(x);
    api[n] = a;
  };
  for (const auto& i : l.inputs) name(i.first);
  for (const auto& o : l.outputs) name(o.first);
  return api;
}

std::vector<std::vector<int>> mesh_group_axes(const Lowered& l) {
  std::vector<std::vector<int>> groups;
  auto add = [&](const std::vector<int>& axes) {
    if (!is_world(l.graph, axes) && std::find(groups.begin(), groups.end(), axes) == groups.end())
      groups.push_back(axes);
  };
  for (const Node& n : l.graph.nodes) {
    if (is_collective(n.op) && n.attrs.has("over")) add(over_axes(l.graph, n));
    if (n.op == Op::Input && shared_in_groups(n)) add(shared_axes(l.graph, n));
  }
  return groups;
}

void write_sources(const std::string& dir, const std::vector<GeneratedFile>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError({}, fmt::format("cannot create '{}': {}", dir, ec.message()));
  std::vector<std::pair<std::string, std::string>> out;
  for (const GeneratedFile& f : files) {  // a name may have folders: the torch target's NAME/csrc/
    out.push_back({dir + "/" + f.name, f.text});
    std::filesystem::create_directories(std::filesystem::path(out.back().first).parent_path(), ec);
    if (ec) throw UserError({}, fmt::format("cannot create '{}': {}", dir, ec.message()));
  }
  write_files_atomic(out);
}

std::string fill(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string at = "@" + key + "@";
    for (size_t p = text.find(at); p != std::string::npos; p = text.find(at, p + value.size()))
      text.replace(p, at.size(), value);
  }
  return text;
}

namespace {

// The generator of one program's sources: what both targets share. A target's
// emitter (CpuEmitter, CudaEmitter, below) overrides only what differs: its
// constructors and members, how a kernel waits for another stream, where constants
// live, its CMake and main() templates. Every method may be called in any order
// (the kernels' functors are made once, on first use: functors()).
class Emitter {
 public:
  Emitter(const Lowered& l, std::string name, std::string source)
      : l_(l), g_(l.graph), name_(std::move(name)), source_(std::move(source)), api_(api_names(l, name_)) {
    groups_ = mesh_group_axes(l);
  }
  virtual ~Emitter() = default;
  // A class for any value of these sizes (AnySizes): it is generated at several sizes
  // and the numbers that differ become formulas in them (codegen/any_size.h).
  void set_any(std::vector<AnySize> sizes) { any_ = std::move(sizes); }
  bool any() const { return !any_.empty(); }

  // The class's files, the runtime's, CMake's, and (gradc build) an executable's main.
  std::vector<GeneratedFile> files() {
    std::vector<GeneratedFile> out = {{name_ + ".h", header()}, {name_ + extension(), source()}};
    for (const char* f : runtime_files()) out.push_back({f, embedded_file(f)});
    out.push_back({"CMakeLists.txt", fill(embedded_file(cmake_template()), {{"NAME", name_}})});
    return out;
  }
  GeneratedFile main_file() {
    const std::string file = name_ + "_main" + extension();
    if (!any())
      return {file,
              fill(embedded_file(main_template()),
                   {{"NAME", name_},
                    {"FOR_SIZES", ""},
                    {"PROGRAM_AT", ""},
                    {"PROGRAM", fmt::format("  static const gradc::exe::Program program{{{}}};", program_table())},
                    {"BIND", bind()}})};
    // for any size: each from the inputs' files (gradc::exe::find_sizes), then the
    // program's inputs and outputs at those sizes
    std::vector<std::string> sources, names;
    for (const AnySize& a : any_) {
      names.push_back(a.name);
      for (const auto& [input, axis] : a.from)
        for (size_t i = 0; i < l_.inputs.size(); ++i)
          if (l_.inputs[i].first == input)
            sources.push_back(fmt::format("{{\"{}\", &sz.{}, {}, {}}}", a.name, a.name, i, axis));
      if (a.from.empty()) sources.push_back(fmt::format("{{\"{}\", &sz.{}, -1, -1}}", a.name, a.name));
    }
    const std::string program_at = fmt::format(
        "\n// The program's inputs and outputs at the sizes sz (`sizes` says which they are).\n"
        "static gradc::exe::Program program_at(const Step::Sizes& sz, const char* sizes) {{\n"
        "  gradc::exe::Program p{{{}}};\n  p.any_size = true;\n  return p;\n}}\n",
        program_table());
    const std::string program = fmt::format(
        "  Step::Sizes sz;\n"
        "  // Each size from the files of the inputs whose declared shape has it as a dimension\n"
        "  // (the input's index and the axis), else its default.\n"
        "  const gradc::exe::SizeSource sources[] = {{{0}}};\n"
        "  const std::string sizes = gradc::exe::find_sizes(program_at(sz, \"\"), argc, argv, sources, "
        "std::size(sources));\n"
        "  if (sizes.empty()) return 1;\n"
        "  const gradc::exe::Program program = program_at(sz, sizes.c_str());",
        fmt::join(sources, ", "));
    return {file,
            fill(embedded_file(main_template()), {{"NAME", name_},
                                                  {"FOR_SIZES", fmt::format(", for any {}", fmt::join(names, ", "))},
                                                  {"PROGRAM_AT", program_at},
                                                  {"PROGRAM", program},
                                                  {"BIND", "    step.set_sizes(sz);\n" + bind()}})};
  }

  std::string header() {
    std::string s = fmt::format(
        "// Generated by gradc from {}: do not edit.\n"
        "// One step of the program on one rank. Construct it once with the communicator and\n"
        "// stream to use; it allocates its workspace then{}, and run() allocates nothing.\n"
        "#pragma once\n#include \"gradc_runtime.h\"\n\n",
        source_, any() ? " (and set_sizes, where new sizes need more)" : "");
    s += fmt::format("class {} {{\n public:\n  static constexpr int world = {};\n", name_, g_.world);
    if (any()) {
      s +=
          "  // The program's sizes, chosen at run time (set_sizes, or run(sizes)); 0: no default.\n  struct Sizes {\n";
      for (const AnySize& a : any_) s += fmt::format("    int64_t {} = {};\n", a.name, a.value);
      s += "  };\n";
    }
    std::set<std::string> described;  // an input may be an output too
    for (const auto& [n, b] : l_.inputs)
      if (described.insert(n).second) s += shape_members(n, l_.buffers[size_t(b)]);
    for (const auto& [n, b] : l_.outputs)
      if (described.insert(n).second) s += shape_members(n, l_.buffers[size_t(b)]);
    for (const auto& [n, a] : api_)
      if (n != a)
        s += fmt::format("  // '{}' of the program is {} here ({} is taken in C++ or in this class)\n", n, a, n);
    if (any())
      s += fmt::format("  int64_t workspace_bytes() const {{ return ws_bytes_; }}  // at the sizes set\n\n");
    else
      s += fmt::format("  static constexpr int64_t workspace_bytes = {};\n\n", l_.workspace_bytes);
    s += constructors();
    s += fmt::format("  ~{0}();\n  {0}(const {0}&) = delete;\n  {0}& operator=(const {0}&) = delete;\n\n", name_);
    for (const auto& [n, b] : l_.inputs) {
      const LBuffer& x = l_.buffers[size_t(b)];
      s += fmt::format("  void set_{}(const {}* p) {{ in_{}_ = p; }}{}\n", api(n), cpp_type(x.type->dtype), n,
                       l_.graph[x.value].args.empty() ? "  // required" : "  // optional: it has a default");
    }
    for (const auto& [n, b] : l_.outputs) {
      const LBuffer& x = l_.buffers[size_t(b)];
      s += fmt::format("  {}* {}();\n", cpp_type(x.type->dtype), api(n));
      s += fmt::format("  void set_{}_out({}* p) {{ out_{}_ = p; }}\n", api(n), cpp_type(x.type->dtype), n);
    }
    s += "  void run();  // enqueues one step; does not synchronise\n";
    if (any())
      s += "  // The sizes of the next runs: checked, and the workspace and defaults planned for\n"
           "  // them (memory is allocated only where they need more than it holds).\n"
           "  void set_sizes(const Sizes& sizes);\n  const Sizes& sizes() const { return sz_; }\n"
           "  void run(const Sizes& sizes) { set_sizes(sizes); run(); }\n";
    if (checks())
      s += any() ? "  // Check that each shared input holds the same data, and that every rank runs at the\n"
                   "  // same sizes, in the next `steps` runs (-1: every run; 0: none). A check is one\n"
                   "  // all_reduce of a 64-bit hash per input and one of the sizes, and synchronises.\n"
                   "  // Default: every run (-DGRADC_CHECK_SHARED=0: none).\n"
                 : "  // Check that each shared input holds the same data on every rank in the next `steps`\n"
                   "  // runs (-1: every run; 0: none). A check is one all_reduce of a 64-bit hash per input\n"
                   "  // and synchronises. Default: every run (-DGRADC_CHECK_SHARED=0: none).\n";
    if (checks()) s += "  void check_shared_inputs(int steps) { shared_checks_ = steps; }\n";
    s += "  // After a run(), inputs left unset keep the defaults it computed: later runs skip\n"
         "  // computing them (the inputs then count as given, and no longer change).\n  void keep_defaults() {";
    for (const auto& [n, b] : l_.inputs)
      if (!l_.graph[l_.buffers[size_t(b)].value].args.empty())
        s += fmt::format(" if (!in_{0}_) in_{0}_ = default_{0}_;", n);
    s += " }\n\n private:\n";
    s += members();
    s += "  int32_t rank_;\n  char* ws_ = nullptr;\n  gradc::Partials partials_;  // a reduction's partial results\n";
    if (any())
      s += fmt::format(
          "  Sizes sz_;\n  bool sized_ = false;  // set_sizes was called\n  int64_t ws_bytes_ = 0, ws_capacity_ = 0;\n"
          "  int64_t off_[{}] = {{}};  // each buffer's place in the workspace (the plan's)\n",
          std::max<size_t>(1, l_.buffers.size()));
    if (checks()) s += "  int shared_checks_ = GRADC_CHECK_SHARED;\n";
    for (const auto& [n, b] : l_.inputs)
      s += fmt::format("  const {}* in_{}_ = nullptr;\n", cpp_type(l_.buffers[size_t(b)].type->dtype), n);
    for (const auto& [n, b] : l_.outputs)
      s += fmt::format("  {}* out_{}_ = nullptr;\n", cpp_type(l_.buffers[size_t(b)].type->dtype), n);
    for (const auto& [n, b] : l_.inputs)
      if (!l_.graph[l_.buffers[size_t(b)].value].args.empty())
        s += fmt::format("  {}* default_{}_ = nullptr;  // where its default is computed\n{}",
                         cpp_type(l_.buffers[size_t(b)].type->dtype), n,
                         any() ? fmt::format("  int64_t default_{}_capacity_ = 0;  // its elements\n", n) : "");
    return s + "};\n";
  }

  std::string source() {
    std::string s = fmt::format("// Generated by gradc from {}: do not edit.\n#include \"{}.h\"\n\n", source_, name_);
    if (std::string_view(extension()) == ".cpp")  // the host compiler's loops
      s += "// The loops' vectorize hints (GRADC_VECTORIZE) ask, they do not require: clang would\n"
           "// warn at each loop it leaves scalar (one that calls a function, any loop at -O0).\n"
           "#if defined(__clang__)\n#pragma clang diagnostic ignored \"-Wpass-failed\"\n#endif\n\n";
    std::string consts;
    for (const LBuffer& b : l_.buffers)
      if (b.kind == LBuffer::Const) consts += const_data(b);
    if (!consts.empty()) s += fmt::format("namespace {{\n\n{}}}  // namespace\n\n", consts);
    // The kernels' functors have external linkage, in a namespace of the program's
    // own: in an anonymous one, clang 19 leaves scalar a loop that reads a value per
    // row (x[i] - m[i / n], as softmax and normalize do; tests/lit/vectorized.dg).
    s += fmt::format("namespace {}_kernels {{\n\n", name_);
    for (size_t i = 0; i < l_.kernels.size(); ++i)
      if (const auto f = functors().find(int(i)); f != functors().end()) s += f->second.text;
    s += fmt::format("}}  // namespace {}_kernels\n\nusing namespace {}_kernels;\n\n", name_, name_);
    s += lifetime();
    s += run();
    for (const auto& [n, b] : l_.outputs)  // where each output is: the caller's place, else the plan's
      s += fmt::format("\n{}* {}::{}() {{ return out_{}_ ? out_{}_ : {}; }}\n",
                       cpp_type(l_.buffers[size_t(b)].type->dtype), name_, api(n), n, n, raw(b, false));
    return s;
  }

 protected:
  // ---- what a target's emitter says ----------------------------------------------
  virtual const char* extension() const = 0;                   // of the class's source: .cpp, .cu
  virtual std::vector<const char*> runtime_files() const = 0;  // the runtime headers it includes
  virtual const char* cmake_template() const = 0;
  virtual const char* main_template() const = 0;
  virtual std::string constructors() = 0;          // their declarations in the class
  virtual std::string members() = 0;               // the target's private members
  virtual std::string constructor() = 0;           // their definitions, up to what both targets do
  virtual std::string destructor() { return ""; }  // what the destructor releases besides the workspace
  // A constant's array, and a pointer to it that kernels read.
  virtual std::string const_array(const LBuffer& b, size_t count, const std::string& values) = 0;
  virtual std::string const_pointer(const LBuffer& b) { return fmt::format("{}_data", b.name); }
  // Whether a row group's row-local buffers hold one row (the CPU runs a row at a time).
  virtual bool row_local_buffers() const { return false; }
  virtual bool prefetches() const { return false; }  // Body's prefetch_ahead
  virtual bool pairs() const { return false; }       // pair_functor
  // Whether map_rows's functors take the row and the place in it, f(r, j), and check
  // what depends on the row alone once a row (check_row): the CPU's loop over rows.
  virtual bool rows_by_row() const { return false; }
  virtual bool tables16() const { return false; }  // Body's table_lookup
  // A tile group's member where row-local buffers are not kept a row at a time (the GPU):
  // its functor is a map's, of the flat element (gradc::tile_row), in pairs where it can.
  bool flat_tile(const LKernel& k) const { return k.tiles && !row_local_buffers(); }
  // A kernel's waits for the other stream, and the record of its end (CUDA's events).
  virtual std::string waits(const LKernel&, const std::string&) { return ""; }
  virtual std::string record(size_t, const std::string&, const std::string&) { return ""; }
  // A class for any size: what set_sizes does first where the sizes change (before the
  // memory of the old ones is released), and last (with the new sizes set).
  virtual std::string resizing() { return ""; }
  virtual std::string resized() { return ""; }
  virtual std::string step_begin() { return ""; }  // before the first kernel
  virtual std::string step_end() { return ""; }    // after the last kernel
  // An executable's main: input i and output i bound to the class.
  virtual std::string bind_input(size_t i, const std::string& api, const char* ctype) = 0;
  virtual std::string bind_output(size_t i, const std::string& api, const char* ctype) = 0;

  // The main template's @PROGRAM@: the executable's table of inputs and outputs.
  std::string program_table() const {
    auto arg = [&](const std::string& n, int b, bool has_default) {
      const LBuffer& x = l_.buffers[size_t(b)];
      std::string dims = x.type->shape.empty() ? "0" : fmt::format("{}", fmt::join(x.type->shape, ", "));
      return fmt::format("{{\"{}\", {}, {}, {{{}}}, {}}}", n, dtype_enum(x.type->dtype), x.type->rank(), dims,
                         has_default ? "true" : "false");
    };
    std::vector<std::string> ins, outs;
    for (const auto& [n, b] : l_.inputs) ins.push_back(arg(n, b, !g_[l_.buffers[size_t(b)].value].args.empty()));
    for (const auto& [n, b] : l_.outputs) outs.push_back(arg(n, b, false));
    std::vector<std::string> mesh;
    for (size_t k = 0; k < g_.mesh.axes.size(); ++k)
      mesh.push_back(fmt::format("{{\"{}\", {}}}", g_.mesh.axes[k], g_.mesh.sizes[k]));
    std::vector<std::string> sizes;
    for (const auto& [size, value] : g_.sizes) sizes.push_back(fmt::format("{} = {}", size, value));
    return fmt::format("\"{}\", \"{}\", {}, {{{}}}, {{{}}}, {{{}}}, {}", name_ + ".dg", name_, g_.world,
                       fmt::join(ins, ", "), fmt::join(outs, ", "), fmt::join(mesh, ", "),
                       any() ? "sizes" : fmt::format("\"{}\"", fmt::join(sizes, ", ")));
  }
  // The main template's @BIND@: the shared inputs' check, then each input and output bound.
  std::string bind() {
    std::string s;
    if (checks()) s += "    step.check_shared_inputs(1);  // the first step: the inputs do not change\n";
    for (size_t i = 0; i < l_.inputs.size(); ++i)
      s += bind_input(i, api(l_.inputs[i].first), cpp_type(l_.buffers[size_t(l_.inputs[i].second)].type->dtype));
    for (size_t i = 0; i < l_.outputs.size(); ++i)
      s += bind_output(i, api(l_.outputs[i].first), cpp_type(l_.buffers[size_t(l_.outputs[i].second)].type->dtype));
    return s;
  }

  std::string shape_members(const std::string& name, const LBuffer& b) {
    const std::string& n = api(name);
    std::string dims = b.type->shape.empty() ? "" : fmt::format("{}", fmt::join(b.type->shape, ", "));
    if (any())
      return fmt::format(
          "  using {0}_type = {1};\n  int64_t {0}_size() const {{ return {2}; }}\n"
          "  static constexpr int {0}_rank = {3};\n  std::array<int64_t, {4}> {0}_shape() const {{ return {{{5}}}; "
          "}}\n",
          n, cpp_type(b.type->dtype), b.type->size(), b.type->rank(), std::max(1, b.type->rank()),
          b.type->shape.empty() ? "1" : dims);
    return fmt::format(
        "  using {}_type = {};\n  static constexpr int64_t {}_size = {};\n"
        "  static constexpr int {}_rank = {};\n  static constexpr int64_t {}_shape[{}] = {{{}}};\n",
        n, cpp_type(b.type->dtype), n, b.type->size(), n, b.type->rank(), n, std::max(1, b.type->rank()),
        b.type->shape.empty() ? "1" : dims);
  }
  std::string const_data(const LBuffer& b) {
    std::vector<std::string> vals;
    for (const Attr& a : g_[b.value].attrs.find("value")->list) vals.push_back(literal(a.number(), b.type->dtype));
    return fmt::format("// {}: a constant {}\n", b.name, type_str(b.type)) +
           const_array(b, vals.size(), fmt::format("{}", fmt::join(vals, ", ")));
  }
  std::string comment(const LKernel& k) {
    std::string ops = fused_ops(l_, k);
    if (k.kind == LKernel::Reduce) ops += fmt::format("{}{}", ops.empty() ? "" : " ", op_name(g_[k.root].op));
    if (ops.empty() && k.kind == LKernel::Map)  // an input's default
      ops = "a copy of " + l_.buffers[size_t(l_.buffer_of[size_t(k.root)])].name;
    std::string lines = k.lines.empty() ? ""
                                        : fmt::format(", {} line{} {}", source_, k.lines.size() == 1 ? "" : "s",
                                                      fmt::join(k.lines, ", "));
    return fmt::format("// {}: {}{}\n", out_name(k), ops, lines);
  }
  // Where buffer b's data is: an input's pointer (or its default), a constant, the
  // workspace, or (for an alias) its base's place; an output the caller placed wins.
  std::string ptr(int b, bool for_reading) {
    if (written(b)) {
      if (output_of_.empty()) {  // the first output each buffer is
        output_of_.assign(l_.buffers.size(), nullptr);
        for (const auto& [n, ob] : l_.outputs)
          if (!output_of_[size_t(ob)]) output_of_[size_t(ob)] = &n;
      }
      if (const std::string* n = output_of_[size_t(b)]) return fmt::format("{}()", api(*n));
    }
    return raw(b, for_reading);
  }
  // Whether a kernel writes buffer b in every step (an input's default is written elsewhere).
  bool written(int b) {
    if (written_.empty()) {
      written_.assign(l_.buffers.size(), false);
      for (const LKernel& k : l_.kernels)
        if (k.guard < 0) written_[size_t(k.out)] = true;
    }
    return written_[size_t(b)];
  }
  std::string raw(int b, bool for_reading) {
    const LBuffer& x = l_.buffers[size_t(b)];
    if (x.kind == LBuffer::Alias) return ptr(x.alias_of, for_reading);
    const LBuffer* base = &x;
    const char* t = cpp_type(x.type->dtype);
    std::string p;
    if (base->kind == LBuffer::Input) {
      const std::string& n = g_[base->value].attr_sym("name");
      p = g_[base->value].args.empty() ? "in_" + n + "_" : fmt::format("(in_{0}_ ? in_{0}_ : default_{0}_)", n);
      if (!for_reading) p = fmt::format("const_cast<{}*>({})", t, p);
    } else if (base->kind == LBuffer::Const) {
      p = const_pointer(*base);
      if (!for_reading) p = fmt::format("const_cast<{}*>({})", t, p);
    } else {
      p = any() ? fmt::format("reinterpret_cast<{}*>(ws_ + off_[{}])", t, base_buffer(l_, b))
                : fmt::format("reinterpret_cast<{}*>(ws_ + {})", t, base->offset);
    }
    return p;
  }

  // The functor of each map and reduce kernel, and the buffers it reads (the fields
  // the calls fill in): made once, on first use.
  struct Functor {
    std::string text;
    std::vector<int> reads;
    int64_t row = 0;     // a map's: the rows it is run in (map_rows), where it reads along them
    std::string values;  // what fills its last fields at a call (functor_fields)
  };
  const std::map<int, Functor>& functors() {
    if (!functors_) {
      functors_.emplace();
      for (size_t i = 0; i < l_.kernels.size(); ++i)
        if (l_.kernels[i].kind == LKernel::Map || l_.kernels[i].kind == LKernel::Reduce)
          (*functors_)[int(i)] = functor(int(i));
        else if (l_.kernels[i].kind == LKernel::Loop && !l_.kernels[i].fused.empty())
          (*functors_)[int(i)] = index_check(int(i));
    }
    return *functors_;
  }
  const std::vector<int>& reads(size_t kernel) { return functors().at(int(kernel)).reads; }
  // Kernel i's functor as a call makes it: its struct, given the buffers it reads and
  // the values of its last fields (functor_fields).
  std::string functor_value(int i) {
    std::vector<std::string> fields;
    for (int b : reads(size_t(i))) fields.push_back(ptr(b, true));
    if (!functors().at(i).values.empty()) fields.push_back(functors().at(i).values);
    return fmt::format("{}{{{}}}", kernel_name(i), fmt::join(fields, ", "));
  }

  Functor functor(int i) {
    const LKernel& k = l_.kernels[size_t(i)];
    const Type& out = l_.buffers[size_t(k.out)].type;
    // The pair form, where the output is 16-bit or a 16-bit buffer is read at the element
    // (known once the body is built: a kernel that reads no 16-bit buffer skips the trial).
    auto low = [&](int b) { return is_low_precision(l_.buffers[size_t(b)].type->dtype); };
    if (k.kind == LKernel::Map && (k.group < 0 || flat_tile(k)) && pairs() &&
        (is_low_precision(out.dtype) || std::any_of(k.reads.begin(), k.reads.end(), low))) {
      Body body(l_, k, source_);
      body.set_element_params(true);
      body.map_element(k.root, out.shape);
      if (is_low_precision(out.dtype) || std::any_of(body.params.begin(), body.params.end(), low))
        return pair_functor(i, body);
    }
    std::vector<std::string> tables;  // the functor's tables' definitions, before it
    auto new_body = [&] {
      Body b(l_, k, source_);
      b.set_prefetch(prefetches());
      if (tables16()) b.set_tables(kernel_name(i), &tables);
      return b;
    };
    Body body = new_body();
    std::optional<Body> in_rows;  // a map run in rows, in the row's terms (built after the flat body said so)
    std::string result;
    std::string signature;
    std::string text;        // the functor's statements, where not body.text()
    std::string row_checks;  // a map_rows functor's checks of its row (check_row)
    int64_t rows_of = 0;     // Functor::row
    const bool group_rows = k.kind == LKernel::Map && k.group >= 0 && !flat_tile(k);
    // Element j of row r: the row's axes from r, the others from j, so what depends on
    // the row alone is seen to (and computed once a row); `count` rows of `len`.
    auto row_form = [&](Body& b, int64_t len, int64_t count) {
      b.line(len == 1 ? std::string("const int64_t i = r + j;") : fmt::format("const int64_t i = r * {} + j;", len));
      std::vector<std::string> idx;
      size_t split = 0;  // the rows are the axes before it
      int64_t rows_size = 1;
      while (split < out.shape.size() && rows_size < count) rows_size *= out.shape[split++];
      const Shape rows(out.shape.begin(), out.shape.begin() + long(split)),
          row(out.shape.begin() + long(split), out.shape.end());
      if (rows_size == count && (!group_rows || last_row_len(l_, k) == 0)) {
        idx = b.unflatten("r", rows, "a");
        for (const std::string& x : b.unflatten("j", row, "b")) idx.push_back(x);
      } else {  // the rows do not end at an axis
        idx = b.unflatten("i", out.shape, "i");
      }
      b.set_element(idx, out.shape, "i");
      if (group_rows && row_local_buffers()) b.set_row("r", k.row_len, k.row_len == 1 ? "0" : "j");
      result = b.value(k.root, idx);
      b.line(fmt::format("return {};", result));
      text = b.text();
      if (!group_rows) {  // map_rows checks the row once before its elements (a row group's runtime does not)
        Body::RowSplit parts = b.split_row_checks();
        text = parts.element;
        row_checks = parts.row_checks;
      }
      signature = fmt::format("GRADC_FUNCTOR {} operator()({}, {}) const", cpp_type(out.dtype), index_param(text, "r"),
                              index_param(text, "j"));
    };
    if (group_rows) {
      row_form(body, k.row_len, k.rows);
    } else if (k.kind == LKernel::Map) {
      body.map_element(k.root, out.shape);
      signature =
          fmt::format("GRADC_FUNCTOR {} operator()({}) const", cpp_type(out.dtype), index_param(body.text(), "i"));
      // Run in rows where it reads at the element's place in its row or at its row
      // (i % len, i / ...), the rows long enough to fill vectors (the runtime's map_rows).
      if (out.shape.size() >= 2 && out.shape.back() >= 16 && body.reads_axes_of_i()) rows_of = out.shape.back();
      if (rows_of && rows_by_row()) {  // built again in the row's terms, with its tables
        tables.clear();
        in_rows.emplace(new_body());
        row_form(*in_rows, rows_of, num_elements(out.shape) / rows_of);
      }
    } else {
      const Node& r = g_[k.root];
      const Shape& in = g_.type(r.args[0]).shape;
      std::vector<int64_t> axes = r.attr_ints("axes");
      for (int64_t& a : axes)
        if (a < 0) a += int64_t(in.size());
      Shape kept, red;
      for (size_t d = 0; d < in.size(); ++d)
        (std::count(axes.begin(), axes.end(), int64_t(d)) ? red : kept).push_back(in[d]);
      std::vector<std::string> o = body.unflatten("o", kept, "o"), q = body.unflatten("r", red, "q"), idx;
      size_t ko = 0, kr = 0;
      for (size_t d = 0; d < in.size(); ++d)
        idx.push_back(std::count(axes.begin(), axes.end(), int64_t(d)) ? q[kr++] : o[ko++]);
      if (k.group >= 0 && row_local_buffers()) body.set_row("o", k.row_len, "");
      result = body.value(r.args[0], idx);
      body.line(fmt::format("return {};", result));
      signature = fmt::format("GRADC_FUNCTOR {} operator()({}, {}) const", cpp_type(out.dtype),
                              index_param(body.text(), "o"), index_param(body.text(), "r"));
    }
    const Body& made = in_rows ? *in_rows : body;
    std::string s = fmt::format("{}", fmt::join(tables, "")) + comment(k);
    s += fmt::format("struct {} {{\n", kernel_name(i));
    for (int b : made.reads)
      s += fmt::format("  const {}* b_{};\n", cpp_type(l_.buffers[size_t(b)].type->dtype), l_.buffers[size_t(b)].name);
    if (text.empty()) text = made.text();
    const auto [fields, values] = functor_fields(row_checks + text);
    s += fields;
    if (!row_checks.empty())
      s += fmt::format("  GRADC_FUNCTOR void check_row({}) const {{\n{}  }}\n", index_param(row_checks, "r"),
                       row_checks);
    s += fmt::format("  {} {{\n{}  }}\n}};\n\n", signature, text);
    return {s, std::vector<int>(made.reads.begin(), made.reads.end()), rows_of, values};
  }
  // A map kernel that reads or writes 16-bit elements, on the GPU: its body `at` takes the
  // buffers read at its own element as parameters, and `pair` computes elements i and
  // i + 1 (i even) from one load of two elements of each, for a store of two (the
  // runtime's map, where every pointer is aligned to two elements: pairs_aligned).
  Functor pair_functor(int i, const Body& body) {
    const LKernel& k = l_.kernels[size_t(i)];
    const char* t = cpp_type(l_.buffers[size_t(k.out)].type->dtype);
    auto type = [&](int b) { return cpp_type(l_.buffers[size_t(b)].type->dtype); };
    auto name = [&](int b) { return l_.buffers[size_t(b)].name; };
    std::vector<std::string> one, loads, params, fields;
    std::string lane_a, lane_b;  // at()'s arguments after i, for elements i and i + 1
    for (int b : body.params) {
      one.push_back(fmt::format("b_{}[i]", name(b)));
      lane_a += fmt::format(", e_{}.a", name(b));
      lane_b += fmt::format(", e_{}.b", name(b));
      loads.push_back(fmt::format("    const auto e_{0} = gradc::load_pair(b_{0} + i);\n", name(b)));
      params.push_back(fmt::format("{} e_{}", type(b), name(b)));
      fields.push_back("b_" + name(b));
    }
    std::string s = comment(k) + fmt::format("struct {} {{\n", kernel_name(i));
    for (int b : body.reads) s += fmt::format("  const {}* b_{};\n", type(b), name(b));
    const auto [fields_in, values] = functor_fields(body.text());
    s += fields_in;
    s += fmt::format("  GRADC_FUNCTOR {} operator()(int64_t i) const {{ return at(i{}{}); }}\n", t,
                     one.empty() ? "" : ", ", fmt::join(one, ", "));
    s += fmt::format(
        "  GRADC_FUNCTOR gradc::Pair<{}> pair(int64_t i) const {{\n{}    return {{at(i{}), at(i + 1{})}};\n  }}\n", t,
        fmt::join(loads, ""), lane_a, lane_b);
    s += fmt::format("  bool pairs_aligned() const {{ return {}; }}\n",
                     fields.empty() ? "true" : fmt::format("gradc::pair_aligned({})", fmt::join(fields, ", ")));
    s += fmt::format("  GRADC_FUNCTOR {} at(int64_t i{}{}) const {{\n{}  }}\n}};\n\n", t, params.empty() ? "" : ", ",
                     fmt::join(params, ", "), body.text());
    return {s, std::vector<int>(body.reads.begin(), body.reads.end()), 0, values};
  }
  // What a loop kernel that checks its indices calls for one out of range: the error
  // of the check_labels it makes (the interpreter's words), at that index's element.
  Functor index_check(int i) {
    const LKernel& k = l_.kernels[size_t(i)];
    const Node& c = g_[k.fused[0]];
    const std::string call = index_error_call(c, loc_str(source_, c.loc), "index", "element");
    const auto [fields, values] = functor_fields(call);
    return {
        fmt::format("// {}: the check of {}'s indices, made as it reads them\nstruct {}_check {{\n{}"
                    "  GRADC_FUNCTOR void operator()(int64_t index, int64_t element) const {{\n    {}\n  }}\n}};\n\n",
                    out_name(k), c.attr_sym("what"), kernel_name(i), fields, call),
        {},
        0,
        values};
  }
  // A functor's last fields: the rank, where its statements read it, and in a class for
  // any size the sizes (the functor's `sz`, the class's `sz_`: its statements are made at
  // sizes given, whose numbers become the sizes' polynomials afterwards, any_size.cpp);
  // and the values that fill them in at a call (Functor::values).
  std::pair<std::string, std::string> functor_fields(const std::string& statements) const {
    std::string fields;
    std::vector<std::string> values;
    if (mentions(statements, "rank")) {
      fields += "  int32_t rank;\n";
      values.push_back("rank_");
    }
    if (any()) {
      fields += fmt::format("  {}::Sizes sz;\n", name_);
      values.push_back("sz_");
    }
    return {fields, fmt::format("{}", fmt::join(values, ", "))};
  }
  // A kernel is named by the buffer it writes.
  const std::string& out_name(const LKernel& k) const { return l_.buffers[size_t(k.out)].name; }
  std::string kernel_name(int i) { return fmt::format("k{}_{}", i, out_name(l_.kernels[size_t(i)])); }

  // The constructors and the destructor: the target's part, then what both do.
  std::string lifetime() {
    std::string s = constructor();
    if (any()) {
      // the workspace for the default sizes, where they are ones the class takes (else
      // the first set_sizes, or run(), which then says what is wrong with them)
      std::vector<std::string> taken;
      for (const AnySize& a : any_)
        taken.push_back(fmt::format("gradc::size_taken(defaults.{0}, @M_{0}@, @LEAST_{0}@)", a.name));
      s += fmt::format(
          "  partials_ = gradc::alloc_partials();\n  const Sizes defaults{{}};\n  if ({}) set_sizes(defaults);\n",
          fmt::join(taken, " && "));
      s += "}\n\n" + set_sizes();
    } else {
      s += "  ws_ = static_cast<char*>(gradc::alloc(workspace_bytes));\n  partials_ = gradc::alloc_partials();\n";
      s += default_allocs();
      s += "}\n\n";
    }
    s += fmt::format("{}::~{}() {{\n  gradc::release(ws_);\n  gradc::release(partials_);\n", name_, name_);
    for (const auto& [n, b] : l_.inputs)
      if (!g_[l_.buffers[size_t(b)].value].args.empty()) s += fmt::format("  gradc::release(default_{}_);\n", n);
    return s + destructor() + "}\n\n";
  }

  // Where each input's default is computed.
  std::string default_allocs() {
    std::string s;
    for (const auto& [n, b] : l_.inputs)
      if (!g_[l_.buffers[size_t(b)].value].args.empty())
        s += fmt::format("  default_{}_ = static_cast<{}*>(gradc::alloc({} * sizeof({})));\n", n,
                         cpp_type(l_.buffers[size_t(b)].type->dtype), l_.buffers[size_t(b)].type->size(),
                         cpp_type(l_.buffers[size_t(b)].type->dtype));
    return s;
  }
  // A class for any size: set_sizes checks them (@M_B@, B's multiple, and @LEAST_B@,
  // its least value, are filled in once the formulas are fitted), plans the workspace again (runtime/plan.h) and
  // allocates where the new sizes need more (gradc::grow: the workspace, each default's
  // memory and the target's).
  std::string set_sizes() {
    std::string s = fmt::format("void {}::set_sizes(const Sizes& s) {{\n", name_);
    std::vector<std::string> same;
    for (const AnySize& a : any_) {
      const std::string& n = a.name;
      s += fmt::format("  gradc::check_size(\"{1}\", \"{0}\", s.{0}, @M_{0}@, @LEAST_{0}@);\n", n, name_);
      same.push_back(fmt::format("s.{0} == sz_.{0}", n));
    }
    s += fmt::format("  if (sized_ && {}) return;\n", fmt::join(same, " && "));
    s += resizing() + "  sz_ = s;\n";
    std::vector<std::string> steps, bytes;
    for (int32_t x : l_.plan_steps) steps.push_back(std::to_string(x));
    for (const LBuffer& b : l_.buffers) bytes.push_back(std::to_string(b.bytes()));
    s += fmt::format("  static const int32_t steps[] = {{{}}};  // the buffer plan's\n",
                     steps.empty() ? "0" : fmt::format("{}", fmt::join(steps, ", ")));
    s += fmt::format("  const int64_t bytes[] = {{{}}};  // each buffer's\n", fmt::join(bytes, ", "));
    s += fmt::format("  ws_bytes_ = gradc::plan_first_fit(steps, {}, bytes, off_);\n", steps.size());
    s += "  gradc::grow(ws_, ws_capacity_, ws_bytes_);\n";
    for (const auto& [n, b] : l_.inputs)
      if (!g_[l_.buffers[size_t(b)].value].args.empty())
        s += fmt::format(
            "  if (in_{0}_ == default_{0}_) in_{0}_ = nullptr;  // a kept default of other sizes\n"
            "  gradc::grow(default_{0}_, default_{0}_capacity_, {1});\n",
            n, l_.buffers[size_t(b)].type->size());
    return s + resized() + "  sized_ = true;\n}\n\n";
  }

  // --check-finite: a buffer's float values checked for NaN and infinity (an error at
  // the op that computed it, or the input, as the interpreter's).
  std::string finite_check(int buffer, const std::string& stream) {
    const LBuffer& b = l_.buffers[size_t(buffer)];
    if (!l_.check_finite || !is_float(b.type->dtype)) return "";
    const Node& n = g_[b.value];
    // the cast that rounds an op's f32 result to bf16 or f16 (passes/low_precision.cpp)
    // is that op, at its place, as the interpreter names it (an f16 overflow: inf)
    const Node& a = n.args.empty() ? n : g_[n.args[0]];
    const bool rounds = n.op == Op::Cast && is_low_precision(n.type->dtype) && a.op != Op::Cast &&
                        a.loc.line == n.loc.line && a.loc.col == n.loc.col && a.backward == n.backward;
    return fmt::format("  gradc::check_finite({}, {}, {}, rank_, \"{}\", \"{}\", \"{}\", {});\n", stream,
                       ptr(buffer, true), b.type->size(), loc_str(source_, n.loc), checked_op_name(rounds ? a : n),
                       dtype_name(b.type->dtype), dims_code(b.type->shape));
  }

  bool any_shared() const { return has_shared_input(l_); }
  // The class checks its shared inputs, and a class for any size its sizes (StepSizes).
  bool checks() const { return any_shared() || any(); }

  // A mesh's group communicators (groups_), each named by its axes ("dp_tp" for
  // over=[dp, tp]); the target keeps them (group_comm: the C++ expression of one).
  std::vector<std::vector<int>> groups_;  // mesh_group_axes()
  std::string group_name(const std::vector<int>& axes) const { return axes_names(g_, axes, "_"); }
  std::string group_axes(const std::vector<int>& axes) const { return axes_names(g_, axes); }  // "dp, tp"
  virtual std::string group_comm(const std::string& name) const = 0;
  std::string comm_for(const std::vector<int>& axes) const {
    return is_world(g_, axes) ? "comm_" : group_comm(group_name(axes));
  }
  // rank_'s color and key in the split that makes its group over `axes`
  // (MPI_Comm_split, ncclCommSplit): its coordinates on the other axes, and on these.
  std::string color_code(const std::vector<int>& axes) const {
    std::vector<int> others;
    for (int k = 0; k < num_axes(g_); ++k)
      if (std::find(axes.begin(), axes.end(), k) == axes.end()) others.push_back(k);
    return group_rank_code(g_, others, "rank_");
  }
  std::string key_code(const std::vector<int>& axes) const { return group_rank_code(g_, axes, "rank_"); }
  // The mesh's groups as the application's communicators, one per set of axes.
  std::string groups_struct(const char* type, const char* ctor) const {
    if (groups_.empty()) return "";
    std::string s =
        "  // The application's communicators of the mesh's groups (Megatron's tensor- and\n"
        "  // data-parallel groups), beside the world's: one per set of axes the program's\n"
        "  // collectives run over (or its inputs are shared along), each this rank's group.\n  struct Groups {\n";
    for (const auto& axes : groups_)
      s += fmt::format("    {} {};  // over=[{}]\n", type, group_name(axes), group_axes(axes));
    return s + "  };\n" + fmt::format(fmt::runtime(ctor), name_);
  }
  // Each group's size checked, once it is made or given.
  std::string group_checks(const char* size) const {
    std::string s;
    for (const auto& axes : groups_)
      s += fmt::format("  if ({1} != {2}) gradc::wrong_group(\"{0}\", \"{3}\", {2}, {1});\n", name_,
                       fmt::format(fmt::runtime(size), group_name(axes)), axes_size(g_, axes), group_axes(axes));
    return s;
  }
  // The shared inputs among `bs`, each as a gradc::SharedInput: its group communicator,
  // data and slot among its groups, and the interpreter's words for it (shared_words).
  std::vector<std::string> shared_entries(const std::vector<int>& bs) {
    std::vector<std::string> entries;
    for (int b : bs) {
      const LBuffer& x = l_.buffers[size_t(b)];
      const Node& n = g_[x.value];
      if (!n.attrs.has("shared")) continue;
      const std::vector<int> axes = shared_axes(g_, n);
      std::vector<int> others;
      for (int k = 0; k < num_axes(g_); ++k)
        if (std::find(axes.begin(), axes.end(), k) == axes.end()) others.push_back(k);
      const SharedWords w = shared_words(g_, n);
      entries.push_back(fmt::format("{{&{}, {}, {}, {}, {}, {},\n       \"{}\", \"{}\", \"{}\", {}}}", comm_for(axes),
                                    ptr(b, true), x.type->size(), dtype_enum(x.type->dtype),
                                    group_rank_code(g_, others, "rank_"), g_.world / axes_size(g_, axes), w.what,
                                    loc_str(source_, n.loc), w.note, dims_code(x.type->shape)));
    }
    return entries;
  }
  // The array of the shared inputs `entries`, as the checks take them.
  static std::string shared_array(const std::vector<std::string>& entries, const char* indent) {
    if (entries.empty())
      return fmt::format("{}const gradc::SharedInput<gradc::Comm>* const shared = nullptr;  // no shared input\n",
                         indent);
    return fmt::format("{}const gradc::SharedInput<gradc::Comm> shared[] = {{\n      {}}};\n", indent,
                       fmt::join(entries, ",\n      "));
  }
  // The given inputs' check, started before the step's kernels and finished after them
  // (shared_check_end), where the communicator can leave its all_reduce running
  // meanwhile (the torch target's), so that its latency is hidden. A class for any size
  // checks its sizes in the same all_reduce, and finishes it before its first collective.
  // `sizes`: a class for any size checks its sizes in it (else before, sizes_check).
  std::string shared_check_start(const std::vector<std::string>& entries, bool sizes) const {
    if (entries.empty() && !sizes) return "";
    std::string s = entries.empty()
                        ? "  // the sizes' check: one all_reduce of their hash; every rank's must be the same, or\n"
                          "  // the collectives would exchange other lengths (finished before the first collective)\n"
                        : "  // the shared inputs' check: one all_reduce of their hashes, under way while the\n"
                          "  // step's kernels run where the communicator can (gradc::start_check_shared)\n";
    s += shared_array(entries, "  ");
    if (sizes) {
      std::vector<std::string> values, names;
      for (const AnySize& a : any_) {
        values.push_back("sz_." + a.name);
        names.push_back(fmt::format("\"{}\"", a.name));
      }
      if (!entries.empty())
        s += "  // and the sizes' hash: every rank's sizes must be the same, or the collectives would\n"
             "  // exchange other lengths (the check finished before the first collective)\n";
      s += fmt::format(
          "  const int64_t size_values[] = {{{}}};\n  static const char* const size_names[] = {{{}}};\n"
          "  const gradc::StepSizes sizes{{size_values, {}, size_names, \"{}\"}};\n",
          fmt::join(values, ", "), fmt::join(names, ", "), any_.size(), source_);
    }
    return s + fmt::format(
                   "  gradc::HashMessage hashes;\n"
                   "  const bool checking = check_shared && gradc::start_check_shared(comm_, stream_, shared, {}, "
                   "rank_, hashes{});\n",
                   entries.size(), sizes ? ", sizes" : "");
  }
  std::string shared_check_end(const std::vector<std::string>& entries, bool sizes) const {
    if (entries.empty() && !sizes) return "";
    return fmt::format("  if (checking) gradc::finish_check_shared(comm_, stream_, shared, {}, rank_, hashes{});\n",
                       entries.size(), sizes ? ", sizes" : "");
  }
  // The sizes checked by themselves, in a block, before the first collective where that
  // comes before a shared input's default (the shared inputs' check then follows it).
  std::string sizes_check() const {
    return "  {  // the first collective comes before a shared input's default: the sizes first\n" +
           indent(shared_check_start({}, true) + shared_check_end({}, true)) + "  }\n";
  }

  // The memory the application gave for outputs must not overlap its inputs' or
  // another output's (gradc::check_disjoint).
  std::string disjoint_check() {
    if (l_.outputs.empty()) return "";
    std::vector<std::string> spans;
    auto span = [&](const std::string& ptr, int b, const char* kind, const std::string& n) {
      const LBuffer& x = l_.buffers[size_t(b)];
      spans.push_back(fmt::format("{{{}, {}, \"{} '{}'\", {}}}", ptr, x.type->size() * dtype_size(x.type->dtype), kind,
                                  n, kind[0] == 'o'));
    };
    for (const auto& [n, b] : l_.inputs) span(fmt::format("in_{}_", n), b, "input", n);
    for (const auto& [n, b] : l_.outputs) span(fmt::format("out_{}_", n), b, "output", n);
    return fmt::format("  const gradc::Span spans[] = {{\n      {}}};\n  gradc::check_disjoint(\"{}\", spans);\n",
                       fmt::join(spans, ",\n      "), name_);
  }

  std::string run() {
    std::string s = fmt::format("void {}::run() {{\n", name_);
    if (any()) s += "  if (!sized_) set_sizes(Sizes{});  // the defaults, where no sizes were set\n";
    if (checks())
      s += "  const bool check_shared = shared_checks_ != 0;\n  if (shared_checks_ > 0) --shared_checks_;\n";
    for (const auto& [n, b] : l_.inputs)  // given inputs; a default is checked where it is computed
      if (g_[l_.buffers[size_t(b)].value].args.empty()) s += finite_check(b, "stream_");
    for (const auto& [n, b] : l_.inputs)
      if (g_[l_.buffers[size_t(b)].value].args.empty())
        s += fmt::format("  if (!in_{}_) gradc::missing_input(\"{}\", \"{}\");\n", n, name_, api(n));
    s += disjoint_check();
    // Every shared input in one check, started once the defaults among them are computed:
    // before the kernels, or after the last kernel of a shared input's default.
    std::vector<int> inputs;
    for (const auto& [n, b] : l_.inputs) inputs.push_back(b);
    const std::vector<std::string> shared = shared_entries(inputs);
    std::optional<size_t> last_default;
    for (size_t i = 0; i < l_.kernels.size(); ++i)
      if (const int b = l_.kernels[i].guard; b >= 0 && g_[l_.buffers[size_t(b)].value].attrs.has("shared"))
        last_default = i;
    // A class for any size checks its sizes before its first collective: in the shared
    // inputs' check, finished there, or by themselves where that collective comes before
    // the check can start (after a shared input's default).
    bool sizes_first = false;
    for (size_t i = 0; any() && last_default && i < *last_default; ++i)
      sizes_first |= l_.kernels[i].kind == LKernel::Comm;
    const bool sizes = any() && !sizes_first;
    if (!last_default) s += shared_check_start(shared, sizes);
    bool finished = !any();  // the sizes checked (before the first collective)
    s += step_begin();
    // Each kernel's statements, in parts where there are many (parts()), between the
    // checks, which declare and read run()'s own variables.
    std::vector<std::string> kernels;
    auto flush = [&] {
      s += parts(kernels);
      kernels.clear();
    };
    for (size_t i = 0; i < l_.kernels.size(); ++i) {
      const LKernel& k = l_.kernels[i];
      std::string stream = k.stream == LKernel::Compute ? "stream_" : "comm_stream_";
      // The kernel's first line, and the def calls its value was computed in.
      std::string where = k.lines.empty()
                              ? source_
                              : fmt::format("{}:{}{}", source_, k.lines.front(),
                                            call_chain(source_, g_[l_.buffers[size_t(k.out)].value].loc, false));
      std::string call = waits(k, stream);
      const LBuffer& out = l_.buffers[size_t(k.out)];
      const int64_t n_out = out.type->size();
      if (k.kind == LKernel::Comm && !finished) {  // the sizes checked before the exchange
        flush();
        s += sizes_first ? sizes_check() : shared_check_end(shared, sizes);
        finished = true;
      }
      if (k.group >= 0) {  // a row group: one kernel, launched at its first member
        kernels.push_back((k.group == int(i) ? row_group(int(i), stream, where) : "") + finite_check(k.out, stream) +
                          record(i, stream, where));
        continue;
      }
      switch (k.kind) {
        case LKernel::Map: {
          // map_one(s, f, out), map(s, n, f, out) or map_rows(s, n, row, f, out)
          const int64_t row = functors().at(int(i)).row;
          std::string fn = "map", counts;
          if (n_out == 1)
            fn = "map_one";
          else if (row) {
            fn = "map_rows";
            counts = fmt::format("{}, {}, ", n_out, row);
          } else
            counts = fmt::format("{}, ", n_out);
          call += fmt::format(
              "  gradc::{}({}, {}{}, {});\n", fn, stream, counts, functor_value(int(i)),
              k.guard >= 0 ? fmt::format("default_{}_", g_[out.value].attr_sym("name")) : ptr(k.out, false));
          break;
        }
        case LKernel::Reduce: {
          const Node& r = g_[k.root];
          call += fmt::format("  gradc::{}({}, partials_, {}, {}, {}, {}, {});\n",
                              leading_axes(r) ? "reduce_leading" : "reduce", stream, reduce_op(r.op), n_out,
                              g_.type(r.args[0]).size() / std::max<int64_t>(1, n_out), functor_value(int(i)),
                              ptr(k.out, false));
          break;
        }
        case LKernel::Gemm: {
          const LGemm& m = l_.gemms[size_t(k.gemm)];
          call += fmt::format("  gradc::gemm(blas_, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}{});\n", stream,
                              m.trans_a, m.trans_b, m.m, m.n, m.k, ptr(m.a, true), m.stride_a, ptr(m.b, true),
                              m.stride_b, ptr(k.out, false), m.batch,
                              m.alpha == 1 ? "" : ", " + literal(m.alpha, l_.buffers[size_t(k.out)].type->dtype));
          break;
        }
        case LKernel::Comm: call += collective(k, stream, where); break;
        case LKernel::Loop: call += loop(int(i), stream); break;
      }
      if (k.guard >= 0) {
        const std::string& n = g_[out.value].attr_sym("name");
        call = fmt::format("  if (!in_{}_) {{  // the default of {}\n{}  }}\n", n, n, indent(call));
      }
      kernels.push_back(fmt::format("  // {} ({})\n", out.name, where) + call + finite_check(k.out, stream) +
                        record(i, stream, where));
      if (last_default == i) {
        flush();
        s += shared_check_start(shared, sizes);
      }
    }
    flush();
    s += step_end();
    if (!finished || !sizes) s += shared_check_end(shared, sizes);
    // Outputs no kernel writes in place (an input, a constant, a view, a second name
    // for one value) are copied where the caller asked for them.
    std::set<int> first;
    for (size_t k = 0; k < l_.outputs.size(); ++k) {
      const auto& [n, b] = l_.outputs[k];
      if (written(b) && first.insert(b).second) continue;
      const LBuffer& x = l_.buffers[size_t(b)];
      s += fmt::format("  if (out_{0}_) gradc::copy(stream_, out_{0}_, {1}, {2});\n", n, ptr(b, true), x.bytes());
    }
    return s + "}\n";
  }
  // Consecutive kernels' statements: as they are, or where there are more than
  // kPartKernels, in parts of at most that many, each a lambda that is not inlined
  // (GRADC_PART), so that no function clang compiles holds many more (run() keeps the
  // few runs of kernels between its checks that are short enough). clang's time
  // in some passes (IndVarSimplify, SROA, LoopSimplify) grows with the size of the
  // function for each loop in it: one run() of 2198 kernels took 96 s of CPU to
  // compile, the same kernels in parts 33 s (docs/codegen.md, "Parts of run()").
  static constexpr size_t kPartKernels = 100;
  std::string parts(const std::vector<std::string>& kernels) const {
    if (kernels.size() <= kPartKernels) return fmt::format("{}", fmt::join(kernels, ""));
    std::string s;
    for (size_t p = 0; p < kernels.size(); p += kPartKernels) {
      std::string part;
      for (size_t k = p; k < std::min(kernels.size(), p + kPartKernels); ++k) part += kernels[k];
      s += "  [&]() GRADC_PART {\n" + indent(part) + "  }();\n";
    }
    return s;
  }
  // Whether a reduction's axes are the leading ones (0, 1, .. k-1, some kept after them).
  bool leading_axes(const Node& r) const {
    std::vector<int64_t> axes = r.attr_ints("axes");
    const int64_t rank = g_.type(r.args[0]).rank();
    for (int64_t& a : axes)
      if (a < 0) a += rank;
    std::sort(axes.begin(), axes.end());
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != int64_t(i)) return false;
    return int64_t(axes.size()) < rank;
  }
  // Members i.. of a row group, per row each in turn: gradc::rows(stream, rows, steps...).
  // A group of tiles' reduction to one element is a member on the CPU (tile_reduce); a GPU,
  // whose blocks take the tiles at once, runs it as a reduction kernel of its own between
  // the members before it and those after (its operands' places are whole there).
  std::string row_group(int first, const std::string& stream, const std::string& where) {
    std::string waits, steps, names, s;
    auto launch = [&] {
      if (!steps.empty())
        s += fmt::format("  // {} ({}): one kernel per row\n{}  gradc::rows({}, {}{});\n", names, where, waits, stream,
                         rows_arg(l_.kernels[size_t(first)]), steps);
      waits = steps = names = "";
    };
    size_t j = size_t(first);
    for (; j < l_.kernels.size() && l_.kernels[j].group == first; ++j) {
      const LKernel& k = l_.kernels[j];
      std::string f = functor_value(int(j));
      if (k.kind == LKernel::Reduce && k.tiles && !row_local_buffers()) {
        launch();
        s += fmt::format("  // {} ({})\n{}  gradc::reduce({}, partials_, {}, 1, {}, {}, {});\n", out_name(k), where,
                         this->waits(k, stream), stream, reduce_op(g_[k.root].op), tile_size(l_, k), f,
                         ptr(k.out, false));
        continue;
      }
      waits += this->waits(k, stream);
      const bool local = row_local_buffers() && l_.buffers[size_t(k.out)].row_local;  // written at row 0
      // Read by no later member: stream_row (streamed out where large).
      bool read_later = false;
      for (size_t m = j + 1; m < l_.kernels.size() && l_.kernels[m].group == first; ++m)
        for (int b : reads(m)) read_later |= base_buffer(l_, b) == base_buffer(l_, k.out);
      // a tile's members are given the elements in all (the last tile may be short)
      const std::string end = k.tiles ? fmt::format(", {}", tile_size(l_, k)) : "";
      if (k.kind == LKernel::Reduce && k.tiles)
        steps += fmt::format(",\n              gradc::tile_reduce({}, {}, {}, {}{})", reduce_op(g_[k.root].op),
                             k.row_len, f, ptr(k.out, false), end);
      else if (flat_tile(k))
        steps += fmt::format(",\n              gradc::tile_row({}, {}, {}{})", k.row_len, f, ptr(k.out, false), end);
      else if (k.kind == LKernel::Reduce)
        steps += fmt::format(",\n              gradc::reduce_row({}, {}, {}, {})", reduce_op(g_[k.root].op), k.row_len,
                             f, ptr(k.out, false));
      else if (!local && !read_later && k.row_len > 1)
        steps += fmt::format(",\n              gradc::stream_row({}, {}, {}, {}{})", rows_arg(k), k.row_len, f,
                             ptr(k.out, false), end);
      else
        steps += fmt::format(",\n              gradc::{}({}, {}, {}{})", local ? "local_row" : "map_row", k.row_len, f,
                             ptr(k.out, false), end);
      names += (names.empty() ? "" : ", ") + out_name(k);
    }
    launch();
    return s;
  }
  // A row group's rows: of tiles, from the size (a formula in a class for any size).
  std::string rows_arg(const LKernel& k) const {
    return k.tiles ? fmt::format("gradc::tiles({}, {})", tile_size(l_, k), k.row_len) : std::to_string(k.rows);
  }
  static std::string indent(const std::string& s) {
    std::string out;
    size_t start = 0;
    while (start < s.size()) {
      size_t end = s.find('\n', start);
      out += "  " + s.substr(start, end - start + 1);
      start = end + 1;
    }
    return out;
  }

  // A collective: its runtime call (runtime_calls(), from its block in ops/collective.cpp)
  // on the communicator of its group.
  std::string collective(const LKernel& k, const std::string& stream, const std::string& where) {
    const Node& n = g_[k.root];
    const RuntimeCall& rc = runtime_calls()[n.op];
    GRADC_ASSERT(rc.fn, "{} has no runtime call", op_name(n.op));
    const int in_b = k.reads.empty() ? k.out : k.reads[0];
    (void)stream;
    std::vector<std::string> args = {comm_for(over_axes(g_, n)), ptr(in_b, true), ptr(k.out, false)}, decls;
    call_args(n, rc, args, decls);
    const std::string call = fmt::format("gradc::{}({}, \"{}\");", rc.fn, fmt::join(args, ", "), where);
    if (decls.empty()) return "  " + call + "\n";
    std::string out = "  {\n";
    for (const std::string& d : decls) out += "    " + d + "\n";
    return out + "    " + call + "\n  }\n";
  }
  // A Loop kernel: gradc::FN(stream, ARGS..., operands..., out) (runtime_calls(), from
  // its block in ops/axis.cpp).
  std::string loop(int i, const std::string& stream) {
    const LKernel& k = l_.kernels[size_t(i)];
    const Node& n = g_[k.root];
    const RuntimeCall& rc = runtime_calls()[n.op];
    GRADC_ASSERT(rc.fn, "{} has no runtime call", op_name(n.op));
    std::vector<std::string> args = {stream}, decls;
    call_args(n, rc, args, decls);
    GRADC_ASSERT(decls.empty(), "{}: a loop's call takes no arrays", op_name(n.op));
    for (ValueId a : n.args) args.push_back(ptr(l_.buffer_of[size_t(a)], true));
    args.push_back(ptr(k.out, false));
    if (!k.fused.empty())  // the check it makes (index_check)
      args.push_back(fmt::format("{}_check{{{}}}", kernel_name(i), functors().at(i).values));
    return fmt::format("  gradc::{}({});\n", rc.fn, fmt::join(args, ", "));
  }
  // The arguments a RuntimeCall lists for node n, appended to args (with the
  // declarations of the static arrays some pass, appended to decls).
  void call_args(const Node& n, const RuntimeCall& rc, std::vector<std::string>& args,
                 std::vector<std::string>& decls) const {
    const Shape& xs = g_.type(n.args[0]).shape;
    const int N = is_collective(n.op) ? group_size(g_, n) : 1;
    auto around = [&](const char* key, const Shape& s) { return AxisSplit(s, int(axis_attr(n, key))); };
    for (const CallArg& a : rc.args) {
      switch (a.kind) {
        case CallArg::Count: args.push_back(std::to_string(g_.type(n.args[0]).size())); break;
        case CallArg::Blocks: args.push_back(blocks(xs, n.attr_int(a.key))); break;
        case CallArg::GroupBlocks: args.push_back(blocks(xs, n.attr_int(a.key), N)); break;
        case CallArg::DType: args.push_back(dtype_enum(n.type->dtype)); break;
        case CallArg::Reduction: args.push_back(rop(n)); break;
        case CallArg::Int: args.push_back(std::to_string(n.attr_int(a.key))); break;
        case CallArg::Axis: args.push_back(std::to_string(axis_attr(n, a.key))); break;
        case CallArg::Shape:
          decls.push_back(fmt::format("const int64_t shape[] = {{{}}};", fmt::join(xs, ", ")));
          args.push_back("shape");
          args.push_back(std::to_string(xs.size()));
          break;
        case CallArg::Pairs: {
          std::vector<std::string> flat;
          for (const auto& p : n.attr_int_lists("pairs")) flat.push_back(fmt::format("{}, {}", p[0], p[1]));
          decls.push_back(fmt::format("static const int pairs[] = {{{}}};",
                                      flat.empty() ? "0" : fmt::format("{}", fmt::join(flat, ", "))));
          args.push_back("pairs");
          args.push_back(std::to_string(flat.size()));
          break;
        }
        case CallArg::Outer: args.push_back(std::to_string(around(a.key, n.type->shape).outer)); break;
        case CallArg::Len: args.push_back(std::to_string(around(a.key, n.type->shape).n)); break;
        case CallArg::SrcLen: args.push_back(std::to_string(around(a.key, g_.type(n.args.back()).shape).n)); break;
        case CallArg::Inner: args.push_back(std::to_string(around(a.key, n.type->shape).inner)); break;
        case CallArg::PerSlice:
          args.push_back(one_index_per_slice(g_.type(n.args[1]).shape, g_.type(n.args.back()).shape) ? "1" : "0");
          break;
      }
    }
  }

  const Lowered& l_;
  const Graph& g_;
  std::string name_, source_;
  std::optional<std::map<int, Functor>> functors_;
  std::vector<bool> written_;                  // by buffer: written()'s answers, made on first use
  std::vector<const std::string*> output_of_;  // by buffer: the output ptr() names it by, made on first use
  std::vector<AnySize> any_;                   // a class for any size: its sizes
  std::map<std::string, std::string> api_;     // an input's or output's name in the API, by its name
  const std::string& api(const std::string& n) const { return api_.at(n); }
};

class CpuEmitter final : public Emitter {
 public:
  using Emitter::Emitter;

  // The native backend's entry (gradc run): the class on gradc's in-process group.
  GeneratedFile native_entry() {
    const size_t ni = std::max<size_t>(l_.inputs.size(), 1), no = std::max<size_t>(l_.outputs.size(), 1);
    std::string bind;
    if (checks()) bind += "    step.check_shared_inputs(1);  // the first step: the inputs do not change\n";
    for (size_t i = 0; i < l_.inputs.size(); ++i) {
      const auto& [n, b] = l_.inputs[i];
      bind +=
          fmt::format("    if (inputs[r * {0} + {1}]) step.set_{2}(static_cast<const {3}*>(inputs[r * {0} + {1}]));\n",
                      ni, i, api(n), cpp_type(l_.buffers[size_t(b)].type->dtype));
    }
    for (size_t i = 0; i < l_.outputs.size(); ++i) {
      const auto& [n, b] = l_.outputs[i];
      bind += fmt::format("    step.set_{}_out(static_cast<{}*>(outputs[r * {} + {}]));\n", api(n),
                          cpp_type(l_.buffers[size_t(b)].type->dtype), no, i);
    }
    return {name_ + "_native.cpp",
            fill(embedded_file("native.cpp.in"),
                 {{"NAME", name_}, {"NI", std::to_string(ni)}, {"NO", std::to_string(no)}, {"BIND", bind}})};
  }

 private:
  const char* extension() const override { return ".cpp"; }
  std::vector<const char*> runtime_files() const override {
    return {"gradc_runtime.h", "gradc_common.h", "gradc_dtype.h", "gradc_scalar.h",
            "gradc_plan.h",    "gradc_blas.h",   "gradc_cpu.h",   "gradc_threads.h",
            "gradc_mpi.h",     "gradc_main.h",   "gradc_npy.h",   "gradc_kernels.cmake"};
  }
  const char* cmake_template() const override { return "CMakeLists.cpu.txt"; }
  const char* main_template() const override { return "main.cpu.cpp.in"; }
  std::string constructors() override {
    return fmt::format(
        "#if !defined(GRADC_WITHOUT_THREAD_COMM)\n"
        "  // The world's ranks as threads of this process: this rank's place in gradc's\n"
        "  // in-process group (one gradc::ThreadGroup of `world` ranks, shared by the threads).\n"
        "  // (An application that never runs them so, as the torch target's, defines\n"
        "  // GRADC_WITHOUT_THREAD_COMM: the in-process communicator is then not compiled.)\n"
        "  {0}(gradc::ThreadGroup& group, int rank);\n"
        "#endif\n"
        "#if defined(GRADC_WITH_MPI)\n"
        "  // The world's ranks as MPI processes (gradc_add_program(... MPI) defines GRADC_WITH_MPI).\n"
        "  explicit {0}(MPI_Comm comm);\n"
        "{1}"
        "#endif\n"
        "  // Any gradc::Comm; it must outlive this object. (The communicators above are made\n"
        "  // in {0}'s own source, so that their code is compiled with the kernels' flags.)\n"
        "  explicit {0}(gradc::Comm& comm);\n",
        name_, groups_struct("MPI_Comm", "  {0}(MPI_Comm world, const Groups& groups);\n"));
  }
  std::string group_comm(const std::string& name) const override { return fmt::format("*comm_{}_", name); }
  std::string members() override {
    std::string s = fmt::format(
        "  {}(std::unique_ptr<gradc::Comm> owned, gradc::Comm* comm{});\n"
        "  std::unique_ptr<gradc::Comm> owned_;  // the communicator made for this object, if any\n"
        "  gradc::Comm& comm_;\n"
        "  // the kernels' and the collectives' (--check-finite's): all run in order on this thread\n"
        "  gradc::Stream stream_;\n  [[maybe_unused]] gradc::Stream comm_stream_;\n  gradc::Blas blas_;\n",
        name_, groups_.empty() ? "" : ", bool split = true");
    for (const auto& axes : groups_)
      s += fmt::format("  std::unique_ptr<gradc::Comm> comm_{}_;  // this rank's group over=[{}]\n", group_name(axes),
                       group_axes(axes));
    return s;
  }
  std::string constructor() override {
    // The communicators are made here, not inline in the header: their collectives'
    // loops are then compiled with the kernels (as gradc run compiles them), not by the
    // application's compiler at its own optimisation level.
    std::string s = fmt::format(
        "#if !defined(GRADC_WITHOUT_THREAD_COMM)\n"
        "{0}::{0}(gradc::ThreadGroup& group, int rank) : {0}(std::make_unique<gradc::ThreadComm>(group, rank), "
        "nullptr) {{}}\n"
        "#endif\n"
        "#if defined(GRADC_WITH_MPI)\n"
        "{0}::{0}(MPI_Comm comm) : {0}(std::make_unique<gradc::MpiComm>(comm), nullptr) {{}}\n"
        "#endif\n"
        "{0}::{0}(gradc::Comm& comm) : {0}(nullptr, &comm) {{}}\n\n"
        "{0}::{0}(std::unique_ptr<gradc::Comm> owned, gradc::Comm* comm{1})\n"
        "    : owned_(std::move(owned)), comm_(comm ? *comm : *owned_), rank_(comm_.rank()) {{\n"
        "  if (comm_.size() != world) gradc::wrong_world(\"{0}\", world, comm_.size());\n",
        name_, groups_.empty() ? "" : ", bool split");
    if (groups_.empty()) return s;
    // the groups: split from the world's, or given (Groups)
    std::string given = fmt::format(
        "#if defined(GRADC_WITH_MPI)\n{0}::{0}(MPI_Comm world, const Groups& groups)\n"
        "    : {0}(std::make_unique<gradc::MpiComm>(world), nullptr, false) {{\n",
        name_);
    for (const auto& axes : groups_)
      given +=
          fmt::format("  comm_{0}_ = std::make_unique<gradc::MpiComm>(groups.{0}, world, false);\n", group_name(axes));
    given += group_checks("comm_{}_->size()") + "}\n#endif\n\n";
    std::string split = "  if (split) {  // every rank splits the world, in this order\n";
    for (const auto& axes : groups_)
      split += fmt::format("    comm_{}_ = comm_.split({}, {});\n", group_name(axes), color_code(axes), key_code(axes));
    return given + s + split + "  }\n";
  }
  std::string const_array(const LBuffer& b, size_t count, const std::string& values) override {
    return fmt::format("const {} {}_data[{}] = {{{}}};\n\n", cpp_type(b.type->dtype), b.name, count, values);
  }
  bool row_local_buffers() const override { return true; }
  bool prefetches() const override { return true; }
  bool rows_by_row() const override { return true; }
  bool tables16() const override { return l_.tables16; }
  std::string bind_input(size_t i, const std::string& api, const char* t) override {  // host vectors, by pointer
    return fmt::format(
        "    if (!d.inputs[{0}].empty()) step.set_{1}(reinterpret_cast<const {2}*>(d.inputs[{0}].data()));\n", i, api,
        t);
  }
  std::string bind_output(size_t i, const std::string& api, const char* t) override {
    return fmt::format("    step.set_{}_out(reinterpret_cast<{}*>(d.outputs[{}].data()));\n", api, t, i);
  }
};

class CudaEmitter final : public Emitter {
 public:
  using Emitter::Emitter;

 private:
  const char* extension() const override { return ".cu"; }
  std::vector<const char*> runtime_files() const override {
    return {"gradc_runtime.h", "gradc_common.h", "gradc_dtype.h", "gradc_scalar.h", "gradc_plan.h",
            "gradc_cuda.h",    "gradc_nccl.h",   "gradc_main.h",  "gradc_npy.h"};
  }
  bool pairs() const override { return true; }
  const char* cmake_template() const override { return "CMakeLists.cuda.txt"; }
  const char* main_template() const override { return "main.cuda.cu.in"; }
  std::string constructors() override {
    return fmt::format(
        "  // The NCCL communicator of the world's ranks (this rank's, on its device) and the\n"
        "  // stream to run on; both stay the application's.\n  {}(ncclComm_t comm, cudaStream_t stream);\n{}",
        name_, groups_struct("ncclComm_t", "  {0}(ncclComm_t comm, const Groups& groups, cudaStream_t stream);\n"));
  }
  std::string group_comm(const std::string& name) const override { return fmt::format("comm_{}_", name); }
  std::string members() override {
    return fmt::format(
        "  cudaStream_t stream_, comm_stream_;  // compute, and communication\n  gradc::Comm comm_;\n"
        "  cublasHandle_t blas_;\n"
        "  cudaEvent_t events_[{}];  // one per kernel, for the other stream to wait on; the step's start\n"
        "{}{}",
        l_.kernels.size() + 1,
        any() ? "  int64_t scratch_capacity_ = 0;  // comm_.scratch's bytes: a collective's rearranged blocks\n"
              : fmt::format("  static constexpr int64_t scratch_bytes = {};  // a collective's rearranged blocks\n",
                            scratch_bytes()),
        group_members());
  }
  std::string group_members() const {
    if (groups_.empty()) return "";
    std::string s = fmt::format("  {}(ncclComm_t comm, const Groups* groups, cudaStream_t stream);\n", name_);
    for (const auto& axes : groups_)
      s += fmt::format("  gradc::Comm comm_{}_;  // this rank's group over=[{}]\n", group_name(axes), group_axes(axes));
    return s + "  bool own_groups_;  // split from the world's here (else the application's)\n";
  }
  // Room for one collective's rearranged blocks (CUDA): twice its larger buffer.
  int64_t scratch_bytes() const {
    int64_t most = 0;
    for (const LKernel& k : l_.kernels)
      if (k.kind == LKernel::Comm) most = std::max({most, 2 * comm_bytes(k, true), 2 * comm_bytes(k, false)});
    return most;
  }
  int64_t comm_bytes(const LKernel& k, bool out) const {
    return out ? l_.buffers[size_t(k.out)].bytes()
               : g_.type(g_[k.root].args[0]).size() * dtype_size(g_.type(g_[k.root].args[0]).dtype);
  }
  // For any size, the same as code: the largest of the collectives' terms, each a
  // number fitted as a formula in the sizes (the largest may differ between sizes).
  std::string scratch_code() const {
    std::vector<std::string> terms;
    for (const LKernel& k : l_.kernels)
      if (k.kind == LKernel::Comm)
        for (bool out : {true, false}) terms.push_back(fmt::format("2 * {}", comm_bytes(k, out)));
    if (terms.empty()) return "0";
    return terms.size() == 1 ? terms[0] : fmt::format("std::max<int64_t>({{{}}})", fmt::join(terms, ", "));
  }
  // New sizes: the steps before may still use the memory set_sizes releases, and the
  // collectives' room grows where the new sizes need more (each group's shares it).
  std::string resizing() override {
    return "  GRADC_CUDA(cudaStreamSynchronize(stream_), \"set_sizes\");  // the steps before may still use "
           "the memory\n";
  }
  std::string resized() override {
    std::string s = fmt::format(
        "  const int64_t scratch = {};  // a collective's rearranged blocks\n"
        "  gradc::grow(comm_.scratch, scratch_capacity_, scratch);\n",
        scratch_code());
    for (const auto& axes : groups_) s += fmt::format("  comm_{}_.scratch = comm_.scratch;\n", group_name(axes));
    return s;
  }
  std::string constructor() override {
    std::string s;
    if (!groups_.empty())
      s = fmt::format(
          "{0}::{0}(ncclComm_t comm, cudaStream_t stream) : {0}(comm, nullptr, stream) {{}}\n"
          "{0}::{0}(ncclComm_t comm, const Groups& groups, cudaStream_t stream) : {0}(comm, &groups, stream) {{}}\n\n"
          "{0}::{0}(ncclComm_t comm, const Groups* groups, cudaStream_t stream) : stream_(stream) {{\n",
          name_);
    else
      s = fmt::format("{}::{}(ncclComm_t comm, cudaStream_t stream) : stream_(stream) {{\n", name_, name_);
    s += "  int rank = 0, size = 0;\n  GRADC_NCCL(ncclCommUserRank(comm, &rank), \"constructor\");\n";
    s += "  GRADC_NCCL(ncclCommCount(comm, &size), \"constructor\");\n  rank_ = rank;\n";
    s += fmt::format("  if (size != world) gradc::wrong_world(\"{}\", world, size);\n", name_);
    s += "  GRADC_CUDA(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking), \"constructor\");\n";
    s += any() ? "  comm_ = gradc::Comm{comm, comm_stream_, nullptr, rank, size};  // its scratch: set_sizes\n"
               : "  comm_ = gradc::Comm{comm, comm_stream_, static_cast<char*>(gradc::alloc(scratch_bytes)), rank, "
                 "size};\n";
    s += "  GRADC_CUBLAS(cublasCreate(&blas_), \"constructor\");\n  GRADC_CUBLAS(cublasSetStream(blas_, stream_), "
         "\"constructor\");\n";
    s += "  for (cudaEvent_t& e : events_) GRADC_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "
         "\"constructor\");\n";
    if (groups_.empty()) return s;
    // the groups: split from the world's (every rank, in this order), or given (Groups)
    s += "  own_groups_ = groups == nullptr;\n";
    for (const auto& axes : groups_) {
      const std::string n = group_name(axes);
      s += fmt::format("  comm_{}_ = gradc::Comm{{nullptr, comm_stream_, comm_.scratch, 0, 0}};\n", n);
      s += fmt::format(
          "  if (groups)\n    comm_{0}_.nccl = groups->{0};\n  else\n    GRADC_NCCL(ncclCommSplit(comm, {1}, {2}, "
          "&comm_{0}_.nccl, nullptr), \"constructor\");\n",
          n, color_code(axes), key_code(axes));
      s += fmt::format("  GRADC_NCCL(ncclCommUserRank(comm_{0}_.nccl, &comm_{0}_.rank), \"constructor\");\n", n);
      s += fmt::format("  GRADC_NCCL(ncclCommCount(comm_{0}_.nccl, &comm_{0}_.size), \"constructor\");\n", n);
    }
    return s + group_checks("comm_{}_.size");
  }
  std::string destructor() override {
    std::string s;
    for (const auto& axes : groups_)
      s += fmt::format("  if (own_groups_) ncclCommDestroy(comm_{}_.nccl);\n", group_name(axes));
    return s +
           "  gradc::release(comm_.scratch);\n  for (cudaEvent_t e : events_) cudaEventDestroy(e);\n"
           "  cublasDestroy(blas_);\n  cudaStreamDestroy(comm_stream_);\n";
  }
  std::string const_array(const LBuffer& b, size_t count, const std::string& values) override {
    return fmt::format("__device__ const {} {}_data[{}] = {{{}}};\n\n", cpp_type(b.type->dtype), b.name, count, values);
  }
  std::string const_pointer(const LBuffer& b) override { return fmt::format("gradc::symbol({}_data)", b.name); }
  std::string waits(const LKernel& k, const std::string& stream) override {
    std::string s;
    for (int w : k.waits) s += fmt::format("  gradc::wait({}, events_[{}]);\n", stream, w);
    return s;
  }
  std::string record(size_t i, const std::string& stream, const std::string& where) override {
    return fmt::format("  GRADC_CUDA(cudaEventRecord(events_[{}], {}), \"{}\");\n", i, stream, where);
  }
  // The last kernel on the communication stream, if any.
  std::optional<size_t> last_comm() const {
    std::optional<size_t> last;
    for (size_t i = 0; i < l_.kernels.size(); ++i)
      if (l_.kernels[i].stream != LKernel::Compute) last = i;
    return last;
  }
  // The communication stream starts after what the caller enqueued on the stream before
  // run(): its inputs, and the step before (whose workspace this one reuses).
  std::string step_begin() override {
    if (!last_comm()) return "";
    return fmt::format(
        "  // the communication starts after what was enqueued on the stream before run()\n"
        "  GRADC_CUDA(cudaEventRecord(events_[{0}], stream_), \"run\");\n  gradc::wait(comm_stream_, events_[{0}]);\n",
        l_.kernels.size());
  }
  std::string step_end() override {  // the step ends on the compute stream, after the last collective
    const std::optional<size_t> last = last_comm();
    return last ? fmt::format("  gradc::wait(stream_, events_[{}]);\n", *last) : "";
  }
  std::string bind_input(size_t i, const std::string& api, const char* t) override {  // device pointers
    return fmt::format("    if (d.inputs[{0}]) step.set_{1}(static_cast<const {2}*>(d.inputs[{0}]));\n", i, api, t);
  }
  std::string bind_output(size_t i, const std::string& api, const char* t) override {
    return fmt::format("    step.set_{}_out(static_cast<{}*>(d.outputs[{}]));\n", api, t, i);
  }
};

std::unique_ptr<Emitter> emitter(const Lowered& l, Target target, const std::string& name, const std::string& source) {
  if (target == Target::Cuda) return std::make_unique<CudaEmitter>(l, name, source);
  return std::make_unique<CpuEmitter>(l, name, source);
}

}  // namespace

// The buffers of unnamed values are named by their values' numbers (t12), which
// differ between sizes where a size's value lets a pass merge or fold another node
// (B * world == 4, a constant elsewhere). A class for any size numbers them instead in
// their order: t0, t1, ..., skipping names the program uses.
Lowered numbered_in_order(const Lowered& l) {
  Lowered c = l;
  auto number = [](const std::string& n) -> int64_t {
    if (n.size() < 2 || n[0] != 't' || !std::all_of(n.begin() + 1, n.end(), [](char ch) { return std::isdigit(ch); }))
      return -1;
    return std::stoll(n.substr(1));
  };
  std::vector<std::pair<int64_t, size_t>> unnamed;
  std::set<std::string> taken;
  for (size_t b = 0; b < c.buffers.size(); ++b) {
    const bool is_unnamed = number(c.buffers[b].name) >= 0 && c.graph[c.buffers[b].value].name.str().empty();
    if (is_unnamed)
      unnamed.push_back({number(c.buffers[b].name), b});
    else
      taken.insert(c.buffers[b].name);
  }
  std::sort(unnamed.begin(), unnamed.end());
  std::map<int64_t, std::string> renamed;
  int64_t next = 0;
  for (const auto& [old, b] : unnamed) {
    auto [at, fresh] = renamed.try_emplace(old);
    if (fresh) {
      while (taken.count(fmt::format("t{}", next))) ++next;
      at->second = fmt::format("t{}", next++);
    }
    c.buffers[b].name = at->second;
  }
  return c;
}

std::vector<GeneratedFile> generate(const Lowered& l, Target target, const std::string& name,
                                    const std::string& source_path, const std::vector<AnySize>& any) {
  if (any.empty()) return emitter(l, target, name, source_path)->files();
  const Lowered numbered = numbered_in_order(l);
  std::unique_ptr<Emitter> e = emitter(numbered, target, name, source_path);
  e->set_any(any);
  return e->files();
}

GeneratedFile generate_main(const Lowered& l, Target target, const std::string& name, const std::vector<AnySize>& any) {
  const Lowered numbered = any.empty() ? Lowered{} : numbered_in_order(l);
  std::unique_ptr<Emitter> e = emitter(any.empty() ? l : numbered, target, name, "");
  e->set_any(any);
  return e->main_file();
}

GeneratedFile generate_native_entry(const Lowered& l, const std::string& name) {
  return CpuEmitter(l, name, "").native_entry();
}

}  // namespace gradc
