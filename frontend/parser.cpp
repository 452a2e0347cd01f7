// A recursive-descent parser for .dg programs (docs/language.md sections 2 and 3).
#include "frontend/ast.h"
#include "frontend/lexer.h"
#include "ir/types.h"
#include "support/stack.h"

namespace gradc {
namespace {

using namespace ast;

class Parser {
 public:
  explicit Parser(const std::string& text) : lexer_(text, Syntax::Dg) {}

  Program program() {
    try {
      return program_here();
    } catch (UserError& e) {
      if (!open_.empty() && e.notes.empty() && e.loc.line > open_.back().loc.line)
        e.notes.push_back({open_.back().loc, fmt::format("to match this '{}'", open_.back().text)});
      throw;
    }
  }

 private:
  Program program_here() {
    Program p;
    skip_separators();
    while (peek().kind != Tok::End) {
      if (peek().is_ident("def")) {
        Func f = func();
        if (p.funcs.count(f.name.text)) user_error(f.name.loc, "function '{}' is defined twice", f.name.text);
        std::string key = f.name.text;
        p.funcs.emplace(key, std::move(f));
      } else {
        p.stmts.push_back(stmt());
      }
      end_stmt();
    }
    return p;
  }

  // The parser looks at most kAhead tokens ahead; the lexer makes them as they are
  // needed. What peek() returns is good until the next next().
  const Token& peek(size_t k = 0) {
    GRADC_ASSERT(k < kAhead, "the parser looks at most {} tokens ahead", kAhead);
    for (; ahead_count_ <= k; ++ahead_count_) ahead_[(ahead_first_ + ahead_count_) % kAhead] = lexer_.next();
    return ahead_[(ahead_first_ + k) % kAhead];
  }
  Token next() {
    peek();
    Token t = std::move(ahead_[ahead_first_]);
    ahead_first_ = (ahead_first_ + 1) % kAhead;
    --ahead_count_;
    return t;
  }
  bool accept(const char* p) {
    if (!peek().is(p)) return false;
    next();
    return true;
  }
  Token expect(const char* p) {
    if (!peek().is(p)) user_error(peek().loc, "expected '{}', got {}", p, describe(peek()));
    return next();
  }
  // Brackets: open() pushes, close() pops. An error while one is open, on a later
  // line than it, gets a note at the innermost open bracket (as clang's "note: to
  // match this '('"), since a missing ')' is found only at the next line.
  Token open(const char* p) {
    Token t = expect(p);
    open_.push_back(t);
    return t;
  }
  void close(const char* p) {
    if (!peek().is(p)) user_error(peek().loc, "expected '{}', got {}", p, describe(peek()));
    next();
    open_.pop_back();
  }
  // Between the items of a bracketed list: a ',' or, left for the caller, the closing `p`;
  // `call`, the function whose arguments these are (named in the error).
  void separator(const char* p, const std::string* call = nullptr) {
    if (peek().is(p)) return;
    if (!peek().is(","))
      user_error(peek().loc, "expected ',' or '{}'{}, got {}", p, call ? " in the call to " + *call : "",
                 describe(peek()));
    next();
  }
  Name name(const char* what) {
    const Token& t = peek();
    if (t.kind != Tok::Ident) user_error(t.loc, "expected {}, got {}", what, describe(t));
    if (is_keyword(t.text)) user_error(t.loc, "'{}' is a keyword and cannot be used as {}", t.text, what);
    Token n = next();
    return {n.text, n.loc};
  }
  static bool is_keyword(const std::string& s) {
    for (const char* k : {"world", "input", "shared", "output", "def", "return", "for", "in", "true", "false"})
      if (s == k) return true;
    return false;
  }
  void skip_separators() {
    while (peek().kind == Tok::Newline || peek().is(";")) next();
  }
  void end_stmt() {
    if (peek().kind != Tok::Newline && !peek().is(";") && peek().kind != Tok::End && !peek().is("}"))
      user_error(peek().loc, "expected end of statement, got {}", describe(peek()));
    skip_separators();
  }

  // A body's `{`: Python's `:` and indentation say how gradc writes it.
  void body_brace(const char* whose, const char* example) {
    if (peek().is(":")) user_error(peek().loc, "{} body is in braces, not after ':' as in Python: {}", whose, example);
    open("{");
  }

  Func func() {
    next();  // def
    Func f;
    f.name = name("a function name");
    open("(");
    while (!peek().is(")")) {
      f.params.push_back(name("a parameter name"));
      separator(")");
    }
    close(")");
    body_brace("a def's", "def f(x) { y = x * 2; return y }");
    skip_separators();
    while (!peek().is_ident("return")) {
      if (peek().is("}") || peek().kind == Tok::End)
        user_error(peek().loc, "function '{}' must end with 'return'", f.name.text);
      if (peek().is_ident("def")) user_error(peek().loc, "functions cannot be defined inside functions");
      Stmt s = stmt();
      if (s.kind != Stmt::Assign && s.kind != Stmt::For)
        user_error(s.loc, "only assignments and loops may appear inside a function");
      f.body.push_back(std::move(s));
      end_stmt();
    }
    f.return_loc = next().loc;
    f.results.push_back(expr());
    while (accept(",")) f.results.push_back(expr());
    skip_separators();
    close("}");
    return f;
  }

  Stmt stmt() {
    Stmt s;
    s.loc = peek().loc;
    if (peek().is_ident("world")) {
      next();
      s.kind = Stmt::World;
      s.value = expr();
    } else if (peek().is_ident("mesh") && peek(1).kind == Tok::Ident) {  // mesh dp=2, tp=4 (`mesh = ...` assigns)
      next();
      s.kind = Stmt::Mesh;
      do {
        s.names.push_back(name("an axis name"));
        expect("=");
        s.sizes.push_back(expr());
      } while (accept(","));
    } else if (peek().is_ident("size") && peek(1).kind == Tok::Ident) {  // size B = 8 (`size = ...` assigns)
      next();
      s.kind = Stmt::Size;
      s.names.push_back(name("a size's name"));
      if (accept("=")) s.value = expr();
    } else if (peek().is_ident("input")) {
      next();
      s.kind = Stmt::Input;
      s.names.push_back(name("an input name"));
      expect(":");
      s.type = type_expr();
      if (peek().is_ident("shared")) {
        next();
        s.shared = true;
        if (peek().is("(")) {  // shared(dp) or shared([dp, pp])
          open("(");
          const bool list = accept("[");
          do s.shared_over.push_back(name("an axis name"));
          while (accept(","));
          if (list) expect("]");
          close(")");
        }
      }
      if (accept("=")) s.value = expr();
    } else if (peek().is_ident("output")) {
      next();
      s.kind = Stmt::Output;
      s.names.push_back(name("an output name"));
      while (accept(",")) s.names.push_back(name("an output name"));
    } else if (peek().is_ident("for")) {
      for_loop(s);
    } else if (peek().is_ident("return")) {
      user_error(peek().loc, "'return' outside a function");
    } else {
      s.kind = Stmt::Assign;
      s.names.push_back(name("a name to bind"));
      while (accept(",")) s.names.push_back(name("a name to bind"));
      if (!peek().is("="))
        user_error(peek().loc, "expected '=' after '{}', got {}", s.names.back().text, describe(peek()));
      next();
      s.value = expr();
    }
    return s;
  }

  // for i in range(K) { ... } / range(A, B)
  void for_loop(Stmt& s) {
    next();  // for
    s.kind = Stmt::For;
    s.names.push_back(name("a loop variable"));
    if (!peek().is_ident("in"))
      user_error(peek().loc, "expected 'in' after the loop variable, got {}", describe(peek()));
    next();
    if (!peek().is_ident("range") || !peek(1).is("("))
      user_error(peek().loc, "a loop runs over range(K) or range(A, B), got {}", describe(peek()));
    s.value = postfix();
    body_brace("a loop's", "for i in range(3) { ... }");
    skip_separators();
    while (!peek().is("}")) {
      if (peek().kind == Tok::End) user_error(peek().loc, "expected '}}' to end the loop, got end of file");
      if (peek().is_ident("def")) user_error(peek().loc, "functions cannot be defined inside loops");
      Stmt b = stmt();
      if (b.kind != Stmt::Assign && b.kind != Stmt::For)
        user_error(b.loc, "only assignments and loops may appear inside a loop");
      s.body.push_back(std::move(b));
      end_stmt();
    }
    close("}");
  }

  TypeExpr type_expr() {
    TypeExpr t;
    t.loc = peek().loc;
    if (peek().kind != Tok::Ident) user_error(t.loc, "expected a type such as f32[2, 3], got {}", describe(peek()));
    t.dtype = next().text;
    if (DType dt; !parse_dtype(t.dtype, dt))
      user_error(t.loc, "unknown dtype '{}' (expected f32, f64, bf16, f16 or i32)", t.dtype);
    if (peek().is("[")) {
      open("[");
      while (!peek().is("]")) {
        t.dims.push_back(expr());
        separator("]");
      }
      close("]");
    }
    return t;
  }

  ExprPtr make(Expr::Kind k, Loc loc) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->loc = loc;
    return e;
  }

  ExprPtr expr() {
    // Nesting (parentheses, calls, lists, subscripts) is limited; chains are not.
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(x) { ++d; }
      ~Depth() { --d; }
    } depth(depth_);
    if (depth_ > kMaxDepth) user_error(peek().loc, "expressions are nested more than {} deep", kMaxDepth);
    ExprPtr lhs = additive();
    for (const char* op : {"==", "!=", "<", "<=", ">", ">="}) {
      if (peek().is(op)) {
        Token t = next();
        ExprPtr e = make(Expr::Binary, t.loc);
        e->text = t.text;
        e->args.push_back(std::move(lhs));
        e->args.push_back(additive());
        for (const char* op2 : {"==", "!=", "<", "<=", ">", ">="})
          if (peek().is(op2)) user_error(peek().loc, "comparisons cannot be chained; use parentheses");
        return e;
      }
    }
    return lhs;
  }
  ExprPtr binary_level(ExprPtr (Parser::*sub)(), std::initializer_list<const char*> ops) {
    ExprPtr lhs = (this->*sub)();
    for (;;) {
      const char* found = nullptr;
      for (const char* op : ops)
        if (peek().is(op)) found = op;
      if (!found) return lhs;
      Token t = next();
      ExprPtr e = make(Expr::Binary, t.loc);
      e->text = t.text;
      e->args.push_back(std::move(lhs));
      e->args.push_back((this->*sub)());
      lhs = std::move(e);
    }
  }
  ExprPtr additive() { return binary_level(&Parser::multiplicative, {"+", "-"}); }
  ExprPtr multiplicative() { return binary_level(&Parser::unary, {"*", "/", "//", "%", "@"}); }
  ExprPtr unary() {
    if (peek().is("-")) {
      Token t = next();
      ExprPtr e = make(Expr::Unary, t.loc);
      e->text = t.text;  // "-"; copying the token avoids a GCC 12 -Wrestrict false positive
      e->args.push_back(deep([&] { return unary(); }));  // --x chains may be long
      return e;
    }
    if (peek().is("+")) {
      next();
      return deep([&] { return unary(); });
    }
    return power();
  }
  ExprPtr power() {
    ExprPtr base = postfix();
    if (!peek().is("**")) return base;
    Token t = next();
    ExprPtr e = make(Expr::Binary, t.loc);
    e->text = t.text;  // "**"
    e->args.push_back(std::move(base));
    e->args.push_back(deep([&] { return unary(); }));  // right-associative; 2 ** -1 is allowed
    return e;
  }
  ExprPtr postfix() {
    ExprPtr e = primary();
    for (;;) {
      if (peek().is("(")) {
        if (e->kind != Expr::Name) user_error(peek().loc, "only named functions can be called");
        open("(");
        e->kind = Expr::Call;
        while (!peek().is(")")) {
          if (peek().kind == Tok::Ident && peek(1).is("=")) {
            KwArg kw;
            kw.loc = peek().loc;
            kw.name = next().text;
            next();
            for (const KwArg& k : e->kwargs)
              if (k.name == kw.name) user_error(kw.loc, "argument '{}' is given twice", kw.name);
            kw.value = expr();
            e->kwargs.push_back(std::move(kw));
          } else {
            if (!e->kwargs.empty()) user_error(peek().loc, "positional argument after keyword arguments");
            e->args.push_back(expr());
          }
          separator(")", &e->text);
        }
        close(")");
      } else if (peek().is("[")) {
        Token bracket = open("[");
        ExprPtr s = make(Expr::Subscript, bracket.loc);
        s->args.push_back(std::move(e));
        while (!peek().is("]")) {
          Index ix;
          ix.loc = peek().loc;
          if (!peek().is(":")) ix.start = expr();
          if (accept(":")) {
            ix.is_slice = true;
            if (!peek().is(",") && !peek().is("]") && !peek().is(":")) ix.end = expr();
            if (peek().is(":")) user_error(peek().loc, "slice steps are not supported");
          }
          s->index.push_back(std::move(ix));
          separator("]");
        }
        close("]");
        e = std::move(s);
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    const Token& t = peek();
    if (t.kind == Tok::Int || t.kind == Tok::Float) {
      Token n = next();
      ExprPtr e = make(Expr::Number, n.loc);
      e->is_int = n.kind == Tok::Int;
      e->ival = n.ival;
      e->fval = n.fval;
      return e;
    }
    if (t.is_ident("true") || t.is_ident("false")) {
      Token n = next();
      ExprPtr e = make(Expr::Number, n.loc);
      e->is_int = true;
      e->ival = n.text == "true";
      e->fval = double(e->ival);
      return e;
    }
    if (t.kind == Tok::Ident) {
      // `world` is a keyword at the start of a statement and the number of ranks in an expression.
      if (is_keyword(t.text) && t.text != "world") user_error(t.loc, "unexpected keyword '{}'", t.text);
      Token n = next();
      ExprPtr e = make(Expr::Name, n.loc);
      e->text = n.text;
      return e;
    }
    if (t.kind == Tok::String) {  // einsum's equation
      Token n = next();
      ExprPtr e = make(Expr::String, n.loc);
      e->text = n.text;
      return e;
    }
    if (t.is("(")) {
      open("(");
      ExprPtr e = expr();
      close(")");
      return e;
    }
    if (t.is("[")) {
      ExprPtr e = make(Expr::List, open("[").loc);
      while (!peek().is("]")) {
        e->args.push_back(expr());
        separator("]");
      }
      close("]");
      return e;
    }
    user_error(t.loc, "expected an expression, got {}", describe(t));
  }

  static constexpr int kMaxDepth = 500;
  static constexpr size_t kAhead = 3;
  Lexer lexer_;
  Token ahead_[kAhead];  // the tokens peeked at and not yet taken: a ring
  size_t ahead_first_ = 0, ahead_count_ = 0;
  std::vector<Token> open_;  // the brackets open at this point, innermost last
  int depth_ = 0;
};

}  // namespace

ast::Expr::~Expr() {
  std::vector<ExprPtr> work;
  auto take = [&](Expr& e) {
    for (ExprPtr& a : e.args) work.push_back(std::move(a));
    for (KwArg& k : e.kwargs) work.push_back(std::move(k.value));
    for (Index& i : e.index) {
      work.push_back(std::move(i.start));
      work.push_back(std::move(i.end));
    }
  };
  take(*this);
  while (!work.empty()) {
    ExprPtr e = std::move(work.back());
    work.pop_back();
    if (e) take(*e);  // e's children move out before e is destroyed here
  }
}

ast::Program parse_program(const std::string& text) { return Parser(text).program(); }

}  // namespace gradc
