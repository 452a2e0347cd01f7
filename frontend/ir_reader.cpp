// The reader for the IR's textual form (ir/print.h's print_text writes it), above the
// IR as MLIR's AsmParser is: it shares the frontend's lexer.
#include "frontend/ir_reader.h"

#include <unordered_map>

#include "frontend/lexer.h"
#include "ir/mesh.h"
#include "ir/print.h"
#include "ir/rules.h"

namespace gradc {
namespace {

class TextParser {
 public:
  explicit TextParser(const std::string& text) : toks_(lex(text, Syntax::Ir)) {}

  Graph parse() {
    skip_newlines();
    if (peek().is_ident("world")) {
      next();
      int64_t world = expect_int("the number of ranks");
      if (world < 1 || world > kMaxWorld)
        user_error(prev_.loc, "world must be between 1 and {}, got {}", kMaxWorld, world);
      g_.world = int(world);
      end_line();
    } else if (peek().is_ident("mesh")) {  // mesh dp=2, tp=2
      next();
      g_.world = 1;
      do {
        Token axis = expect(Tok::Ident, "an axis name");
        expect_punct("=");
        int64_t size = expect_int("the axis's size");
        if (size < 1 || size > kMaxWorld) user_error(prev_.loc, "axis {} must have a size of at least 1", axis.text);
        for (const std::string& a : g_.mesh.axes)
          if (a == axis.text) user_error(axis.loc, "axis '{}' is declared twice", axis.text);
        if (int(g_.mesh.axes.size()) == kMaxAxes) user_error(axis.loc, "a mesh has at most {} axes", kMaxAxes);
        g_.mesh.axes.push_back(axis.text);
        g_.mesh.sizes.push_back(int(size));
        if (int64_t(g_.world) * size > kMaxWorld) user_error(axis.loc, "a mesh has at most {} ranks", kMaxWorld);
        g_.world *= int(size);
      } while (peek().is(",") && (next(), true));
      end_line();
    }
    while (peek().kind != Tok::End) {
      if (peek().is_ident("output")) {
        next();
        Token name = expect(Tok::Ident, "an output name");
        expect_punct("=");
        g_.outputs.push_back({name.text, value_ref()});
      } else {
        node();
      }
      end_line();
    }
    return std::move(g_);
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  const Token& next() {
    prev_ = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return prev_;
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) next();
  }
  void end_line() {
    if (peek().kind != Tok::End && peek().kind != Tok::Newline)
      user_error(peek().loc, "expected end of line, got {}", describe(peek()));
    skip_newlines();
  }
  Token expect(Tok kind, const char* what) {
    if (peek().kind != kind) user_error(peek().loc, "expected {}, got {}", what, describe(peek()));
    return next();
  }
  void expect_punct(const char* p) {
    if (!peek().is(p)) user_error(peek().loc, "expected '{}', got {}", p, describe(peek()));
    next();
  }
  int64_t expect_int(const char* what) {
    bool neg = peek().is("-");
    if (neg) next();
    Token t = expect(Tok::Int, what);
    return neg ? -t.ival : t.ival;
  }
  // "file":line:col, in a loc(...)
  Loc file_line_col() {
    if (peek().kind != Tok::String)
      user_error(peek().loc, "expected a file name in loc(...), got {}", describe(peek()));
    next();
    expect_punct(":");
    const Loc at = peek().loc;
    const int64_t line = expect_int("a line number");
    expect_punct(":");
    const int64_t col = expect_int("a column number");
    if (line < 0 || line > INT32_MAX || col < 0 || col > INT32_MAX)
      user_error(at, "loc(...): line or column out of range");
    return Loc{int(line), int(col)};
  }
  ValueId value_ref() {
    Token t = expect(Tok::ValueRef, "a value such as %x");
    auto it = ids_.find(t.text);
    if (it == ids_.end()) user_error(t.loc, "unknown value %{}", t.text);
    return it->second;
  }

  // Attribute lists nest at most two deep (pairs=[[0, 1]]); a little more is allowed, no more.
  static constexpr int kMaxAttrDepth = 16;
  Attr attr_value(int depth = 0) {
    const Token& t = peek();
    if (t.is("[")) {
      if (depth == kMaxAttrDepth) user_error(t.loc, "attribute lists are nested more than {} deep", kMaxAttrDepth);
      next();
      Attr a;
      a.kind = Attr::List;
      while (!peek().is("]")) {
        a.list.push_back(attr_value(depth + 1));
        if (!peek().is("]")) expect_punct(",");
      }
      next();
      return a;
    }
    if (t.kind == Tok::String) return Attr::of_str(next().text);
    bool neg = t.is("-");
    if (neg) next();
    const Token& v = peek();
    if (v.kind == Tok::Int) return Attr::of_int(neg ? -next().ival : next().ival);
    if (v.kind == Tok::Float) return Attr::of_float(neg ? -next().fval : next().fval);
    if (v.is_ident("inf")) return next(), Attr::of_float(neg ? -HUGE_VAL : HUGE_VAL);
    if (v.is_ident("nan") && !neg) return next(), Attr::of_float(std::nan(""));
    if (v.kind == Tok::Ident && !neg) return Attr::of_sym(next().text);
    user_error(v.loc, "expected an attribute value, got {}", describe(v));
  }

  Type type() {
    Token dt = expect(Tok::Ident, "a type such as f32[2, 3]");
    Type t;
    if (!parse_dtype(dt.text, t.dtype)) user_error(dt.loc, "unknown dtype '{}'", dt.text);
    expect_punct("[");
    while (!peek().is("]")) {
      t.shape.push_back(expect_int("a dimension"));
      if (!peek().is("]")) expect_punct(",");
    }
    next();
    return t;
  }

  void node() {
    Token name = expect(Tok::ValueRef, "a value definition such as %x = ...");
    if (ids_.count(name.text)) user_error(name.loc, "%{} is defined twice", name.text);
    expect_punct("=");
    Token opname = expect(Tok::Ident, "an op name");
    auto op = op_by_name(opname.text);
    if (!op) user_error(opname.loc, "unknown op '{}'", opname.text);
    Node n;
    n.op = *op;
    n.loc = opname.loc;
    bool numeric = name.text.find_first_not_of("0123456789") == std::string::npos;
    if (!numeric) n.name = name.text;
    expect_punct("(");
    while (!peek().is(")")) {
      n.args.push_back(value_ref());
      if (!peek().is(")")) expect_punct(",");
    }
    next();
    if (peek().is("{")) {
      next();
      while (!peek().is("}")) {
        Token key = expect(Tok::Ident, "an attribute name");
        expect_punct("=");
        n.attrs.set(key.text, attr_value());
        if (!peek().is("}")) expect_punct(",");
      }
      next();
    }
    expect_punct(":");
    Loc type_loc = peek().loc;
    n.type = type();
    // Annotations the analyses add: replication, backward, grad_of.
    while (peek().kind == Tok::Ident) {
      Token m = next();
      if (m.text == "replicated")
        n.rep = Rep::Replicated;
      else if (m.text == "varying" && peek().is("(")) {  // varying(dp, tp)
        next();
        n.rep = Rep::Replicated;
        do {
          Token axis = expect(Tok::Ident, "an axis name");
          const int k = axis_index(g_, axis.text);
          if (k < 0) user_error(axis.loc, "'{}' is not an axis of the mesh (its axes: {})", axis.text, axes_list(g_));
          n.rep = Rep::along(uint8_t(n.rep.axes() | (1u << k)));
        } while (peek().is(",") && (next(), true));
        expect_punct(")");
      } else if (m.text == "varying")
        n.rep = Rep::along(rep_axes(g_));
      else if (m.text == "bwd")
        n.backward = true;
      else if (m.text == "grad_of") {
        expect_punct("=");
        n.grad_of = value_ref();
      } else if (m.text == "loc") {
        // loc("file":line:col in "f" called at "file":line:col ...), as `gradc ir --loc` prints it
        expect_punct("(");
        const Loc place = file_line_col();
        std::vector<CallSite> calls;  // innermost first
        while (peek().is_ident("in")) {
          next();
          if (peek().kind != Tok::String)
            user_error(peek().loc, "expected a def's name in loc(...), got {}", describe(peek()));
          std::string callee = next().text;
          for (const char* word : {"called", "at"}) {
            if (!peek().is_ident(word))
              user_error(peek().loc, "expected '{}' in loc(...), got {}", word, describe(peek()));
            next();
          }
          calls.push_back({callee, file_line_col()});
        }
        expect_punct(")");
        n.loc = within_calls(place, calls);
      } else {
        user_error(m.loc, "unknown annotation '{}'", m.text);
      }
    }
    Type inferred = infer_type(g_, n);
    if (inferred != n.type)
      user_error(type_loc, "{}: declared type {} but the operands give {}", opname.text, type_str(n.type),
                 type_str(inferred));
    ids_[name.text] = g_.append(std::move(n));
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  Token prev_;
  Graph g_;
  std::unordered_map<std::string, ValueId> ids_;
};

}  // namespace

Graph parse_text(const std::string& text) { return TextParser(text).parse(); }

}  // namespace gradc
