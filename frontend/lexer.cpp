#include "frontend/lexer.h"

#include "frontend/lower.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string_view>

namespace gradc {

namespace {
bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
}  // namespace

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
      advance(1);
    } else if (c == '#') {
      while (i < s.size() && s[i] != '\n') advance(1);
    } else if (c == '\n') {
      advance(1);
      if (depth == 0 && last_ != Tok::Newline) return {Tok::Newline, "\\n", loc};
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      Token t{Tok::Ident, s.substr(i, j - i), loc};
      advance(j - i);
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
      advance(j - i);
      return t;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j < s.size() && s[j] == '.') {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
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
      advance(j - i);
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
      static constexpr std::string_view two[] = {"**", "==", "!=", "<=", ">=", "//"};
      std::string_view p(&s[i], 1);
      for (std::string_view t : two)
        if (s.compare(i, 2, t) == 0) p = t;
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
      advance(p.size());
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
