// The lexer shared by the .dg language and the IR's textual form.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "support/diag.h"

namespace gradc {

enum class Tok { Ident, Int, Float, String, ValueRef, Punct, Newline, End };

struct Token {
  Tok kind = Tok::End;
  std::string text;  // identifier, punctuation, string contents, or %name without the %
  Loc loc;
  int64_t ival = 0;
  double fval = 0;
  bool is(std::string_view punct) const { return kind == Tok::Punct && std::string_view(text) == punct; }
  bool is_ident(std::string_view word) const { return kind == Tok::Ident && std::string_view(text) == word; }
};

// Newlines inside (...) and [...] do not end a statement, so they produce no token.
// In the IR's text `%name` is a value reference; in a .dg program `%` is modulo.
enum class Syntax { Dg, Ir };

// Produces tokens one at a time, as the parser asks for them: a program's text
// is never held as a token list (a 100k-statement program has a million tokens).
class Lexer {
 public:
  Lexer(const std::string& text, Syntax syntax) : s(text), syntax_(syntax) {}
  Token next();  // after the last token, End again and again

 private:
  Token scan();
  void advance(size_t n);
  void skip(size_t n);
  const std::string& s;
  Syntax syntax_;
  size_t i = 0;
  int line = 1, col = 1, depth = 0;
  Tok last_ = Tok::End;  // the kind of the token returned last (none yet: End)
};

std::vector<Token> lex(const std::string& text, Syntax syntax);  // every token, End last
std::string describe(const Token& t);                            // for "expected X, got Y" messages

}  // namespace gradc
