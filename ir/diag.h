// Source locations and diagnostics. User errors (a bad program, bad data) are
// thrown as UserError and printed as `file:line:col: error: msg`; a broken
// invariant inside gradc is an InternalError (a bug in gradc, never the user's).
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gradc {

struct Loc {
  int line = 0, col = 0;  // 1-based; 0 means "no location"
  bool known() const { return line > 0; }
};

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

#define GRADC_ASSERT(cond, ...)                                                           \
  do {                                                                                    \
    if (!(cond))                                                                          \
      throw ::gradc::InternalError(fmt::format("{}:{}: internal error: {} ({})", __FILE__, \
                                               __LINE__, #cond, fmt::format(__VA_ARGS__))); \
  } while (0)

// A source file held in memory, so diagnostics can show the offending line.
struct SourceFile {
  std::string path;  // as the user typed it
  std::string text;
  std::string line(int n) const;
  // "path:line:col: error: msg\n<line>\n   ^\n" (no source line when loc is unknown)
  std::string format(const UserError& e) const;
};

// Reads a whole file; throws UserError (no location) naming the path on failure.
std::string read_file(const std::string& path);
// Writes via a temporary name and a rename, so a failed command leaves nothing half-written.
void write_file_atomic(const std::string& path, const std::string& data);
// Writes all the files or none: each is written under a temporary name, and they
// take their names only when all are complete. Errors give the system's reason.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace gradc
