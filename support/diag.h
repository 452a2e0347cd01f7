// Source locations and diagnostics. User errors (a bad program, bad data) are
// thrown as UserError and printed as `file:line:col: error: msg`; a broken
// invariant inside gradc is an InternalError (a bug in gradc, never the user's).
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradc {

// A place in the program: its line and column (1-based; 0: none), and the chain of
// `def` calls it was reached through, as MLIR's CallSiteLoc keeps it: `site` numbers
// an entry of the process's call-site table (0: not inside a call). Eight bytes, so a
// node stays one cache line; a column past 65535 is kept as 65535.
struct Loc {
  int32_t line = 0;
  uint16_t col = 0;
  uint16_t site = 0;
  Loc() = default;
  Loc(int l, int c, int s = 0) : line(l), col(uint16_t(c < 0 ? 0 : c > 65535 ? 65535 : c)), site(uint16_t(s)) {}
  bool known() const { return line > 0; }
};

// One call of a `def`: the callee and where it was called (whose own `site` is the
// call that one was made in, and so on out to the program's top level).
struct CallSite {
  std::string callee;
  Loc call;
};
// The site of a call of `callee` at `call`: the same number for the same call chain.
// A program with more than 65535 distinct chains keeps the rest without one (0).
int call_site(const std::string& callee, Loc call);
CallSite call_site(int site);
// The calls `loc` was reached through, innermost first (each one's `call.site` is the next).
std::vector<CallSite> calls_of(Loc loc);
// `place` inside the calls `calls` (innermost first, their `call.site` ignored): the
// chain interned from the outermost in, as calls_of reads it back.
Loc within_calls(Loc place, const std::vector<CallSite>& calls);
// Where `loc` is, for messages and reports: "prog.dg:3:9", then each call it was
// reached through, innermost first: "prog.dg:3:9 in `bn` called at prog.dg:8:5".
// With `col` false, "prog.dg:3" (and the calls as "prog.dg:8").
std::string loc_str(const std::string& path, Loc loc, bool col = true);
// The calls alone: " in `bn` called at prog.dg:8:5" ("" at the top level; with no
// path, " in `bn` called at line 8").
std::string call_chain(const std::string& path, Loc loc, bool col = true);
// Reads what loc_str wrote, at the start of `s` ("prog.dg:" already consumed: `s`
// starts at the line); `used` is how many characters it read. Loc{} where it is none.
Loc parse_loc_str(const std::string& path, const char* s, size_t* used);

// Levenshtein's distance between two names: the edits (insert, delete, replace one
// character) from one to the other, for "did you mean" hints.
size_t edit_distance(const std::string& a, const std::string& b);

struct UserError : std::runtime_error {
  Loc loc;
  std::vector<std::pair<Loc, std::string>> notes;  // printed after the error, as clang's "note:"
  UserError(Loc l, std::string msg) : std::runtime_error(std::move(msg)), loc(l) {}
};

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

template <typename... A>
[[noreturn]] void user_error(Loc loc, fmt::format_string<A...> f, A&&... a) {
  throw UserError(loc, fmt::format(f, std::forward<A>(a)...));
}

#define GRADC_ASSERT(cond, ...)                                                                                \
  do {                                                                                                         \
    if (!(cond))                                                                                               \
      throw ::gradc::InternalError(                                                                            \
          fmt::format("{}:{}: internal error: {} ({})", __FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__))); \
  } while (0)

// A source file held in memory, so diagnostics can show the offending line.
struct SourceFile {
  std::string path;  // as the user typed it
  std::string text;
  std::string line(int n) const;
  // "path:line:col: error: msg\n<line>\n   ^\n" (no source line when loc is unknown)
  std::string format(const UserError& e) const;
};

}  // namespace gradc
