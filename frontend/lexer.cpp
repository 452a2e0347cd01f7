#include "frontend/lexer.h"

#include "frontend/lower.h"

#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace gradc {

namespace {
// ASCII only, as the language's names are (std::isalpha would follow the C locale).
bool digit(char c) { return c >= '0' && c <= '9'; }
bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool ident_char(char c) { return ident_start(c) || digit(c); }
}  // namespace

// n characters of one line (a name, a number, punctuation): no newline among them.
void Lexer::skip(size_t n) {
  i += n;
  col += int(n);
}

void Lexer::advance(size_t n) {
  for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
    if (s[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
}

Token Lexer::next() {
  Token t = scan();
  last_ = t.kind;
  return t;
}

Token Lexer::scan() {
  while (i < s.size()) {
    char c = s[i];
    Loc loc{line, col};
    if (c == ' ' || c == '\t' || c == '\r') {
      skip(1);
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') skip(1);
    } else if (c == '\n') {
      advance(1);
      if (depth == 0 && last_ != Tok::Newline) return {Tok::Newline, "\\n", loc};
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      Token t{Tok::Ident, s.substr(i, j - i), loc};
      skip(j - i);
      return t;
    } else if (c == '.' && syntax_ == Syntax::Dg && i + 1 < s.size() && ident_start(s[i + 1])) {
      // NumPy's and PyTorch's attributes and methods: x.T, x.sum(), x.shape
      size_t j = i + 1;
      while (j < s.size() && ident_char(s[j])) ++j;
      const std::string attr = s.substr(i + 1, j - i - 1);
      if (attr == "T") user_error(loc, "'.T' is not gradc: write transpose(x) (it reverses the axes, as x.T does)");
      user_error(loc, "'.{}': gradc values have no attributes or methods; {}", attr, method_advice(attr));
    } else if (c == '%' && syntax_ == Syntax::Ir) {
      size_t j = i + 1;
      while (j < s.size() && (ident_char(s[j]) || s[j] == '.')) ++j;
      if (j == i + 1) user_error(loc, "expected a value name after '%'");
      Token t{Tok::ValueRef, s.substr(i + 1, j - i - 1), loc};
      skip(j - i);
      return t;
    } else if (digit(c) || (c == '.' && i + 1 < s.size() && digit(s[i + 1]))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && digit(s[j])) ++j;
      if (j < s.size() && s[j] == '.') {
        is_float = true;
        ++j;
        while (j < s.size() && digit(s[j])) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && digit(s[k])) {
          is_float = true;
          j = k;
          while (j < s.size() && digit(s[j])) ++j;
        }
      }
      if (j < s.size() && ident_char(s[j])) {
        size_t k = j;
        while (k < s.size() && ident_char(s[k])) ++k;
        user_error(loc, "malformed number '{}'", s.substr(i, k - i));
      }
      Token t{is_float ? Tok::Float : Tok::Int, s.substr(i, j - i), loc};
      if (is_float) {
        t.fval = std::strtod(t.text.c_str(), nullptr);
      } else {
        errno = 0;
        t.ival = std::strtoll(t.text.c_str(), nullptr, 10);
        if (errno == ERANGE) user_error(loc, "integer literal {} is too large", t.text);
        t.fval = double(t.ival);
      }
      skip(j - i);
      return t;
    } else if (c == '"') {
      std::string str;
      size_t j = i + 1;
      while (j < s.size() && s[j] != '"' && s[j] != '\n') {
        if (s[j] == '\\' && j + 1 < s.size()) ++j;
        str += s[j++];
      }
      if (j >= s.size() || s[j] != '"') user_error(loc, "unterminated string");
      advance(j + 1 - i);
      return {Tok::String, std::move(str), loc};
    } else {
      std::string_view p(&s[i], 1);
      if (i + 1 < s.size()) {  // "**", "==", "!=", "<=", ">=", "//"
        const char d = s[i + 1];
        if ((d == '=' && (c == '=' || c == '!' || c == '<' || c == '>')) || (d == c && (c == '*' || c == '/')))
          p = std::string_view(&s[i], 2);
      }
      if (p.size() == 1 &&
          std::string_view(syntax_ == Syntax::Dg ? "()[]{},:;=+-*/<>%@" : "()[]{},:;=+-*/<>").find(c) ==
              std::string_view::npos)
        user_error(loc, "unexpected character '{}'{}", c,
                   s.compare(i, 3, "...") == 0 && syntax_ == Syntax::Dg
                       ? ": gradc has no `...` (Ellipsis): write each axis, as x[:, :, 0]"
                       : "");
      if (c == '(' || c == '[') ++depth;
      if ((c == ')' || c == ']') && depth > 0) --depth;
      Token t{Tok::Punct, std::string(p), loc};
      skip(p.size());
      return t;
    }
  }
  return {Tok::End, "end of file", Loc{line, col}};
}

std::vector<Token> lex(const std::string& s, Syntax syntax) {
  std::vector<Token> out;
  Lexer lexer(s, syntax);
  do out.push_back(lexer.next());
  while (out.back().kind != Tok::End);
  return out;
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of file";
    case Tok::String: return "string \"" + t.text + "\"";
    case Tok::ValueRef: return "'%" + t.text + "'";
    default: return "'" + t.text + "'";
  }
}

}  // namespace gradc
