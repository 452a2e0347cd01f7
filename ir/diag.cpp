#include "ir/diag.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <tuple>
#include <sstream>

namespace gradc {

std::string SourceFile::line(int n) const {
  size_t start = 0;
  for (int i = 1; i < n; ++i) {
    start = text.find('\n', start);
    if (start == std::string::npos) return {};
    ++start;
  }
  size_t end = text.find('\n', start);
  return text.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

namespace {
// The process's call sites: entry 0 is "none"; a chain is interned from the outside in.
struct CallSites {
  std::mutex mu;
  std::deque<CallSite> sites{CallSite{}};
  std::map<std::tuple<std::string, int, int, int>, int> ids;
};
CallSites& call_sites() {
  static CallSites* t = new CallSites;  // never destroyed: locations outlive static destruction
  return *t;
}
}  // namespace

int call_site(const std::string& callee, Loc call) {
  CallSites& t = call_sites();
  std::lock_guard<std::mutex> lock(t.mu);
  auto [it, added] = t.ids.try_emplace({callee, call.line, call.col, call.site}, int(t.sites.size()));
  if (added) {
    if (t.sites.size() > 65535) {
      t.ids.erase(it);
      return 0;
    }
    t.sites.push_back(CallSite{callee, call});
  }
  return it->second;
}

CallSite call_site(int site) {
  CallSites& t = call_sites();
  std::lock_guard<std::mutex> lock(t.mu);
  return site > 0 && size_t(site) < t.sites.size() ? t.sites[size_t(site)] : CallSite{};
}

std::string call_chain(const std::string& path, Loc loc, bool col) {
  std::string out;
  for (int s = loc.site; s > 0;) {
    const CallSite c = call_site(s);
    out += path.empty() ? fmt::format(" in `{}` called at line {}", c.callee, c.call.line)
           : col        ? fmt::format(" in `{}` called at {}:{}:{}", c.callee, path, c.call.line, c.call.col)
                        : fmt::format(" in `{}` called at {}:{}", c.callee, path, c.call.line);
    s = c.call.site;
  }
  return out;
}

std::string loc_str(const std::string& path, Loc loc, bool col) {
  return (col ? fmt::format("{}:{}:{}", path, loc.line, loc.col) : fmt::format("{}:{}", path, loc.line)) +
         call_chain(path, loc, col);
}

Loc parse_loc_str(const std::string& path, const char* s, size_t* used) {
  const char* p = s;
  auto number = [&](int& v) {
    if (*p < '0' || *p > '9') return false;
    int64_t x = 0;
    while (*p >= '0' && *p <= '9' && x < INT32_MAX) x = x * 10 + (*p++ - '0');
    v = int(std::min<int64_t>(x, INT32_MAX));
    return true;
  };
  int line = 0, col = 0;
  if (!number(line) || *p != ':' || (++p, !number(col))) {
    *used = 0;
    return {};
  }
  // The calls, innermost first; interned from the outermost in.
  std::vector<std::pair<std::string, Loc>> calls;
  const std::string in = " in `", called = "` called at " + path + ":";
  while (std::strncmp(p, in.c_str(), in.size()) == 0) {
    const char* name = p + in.size();
    const char* end = std::strchr(name, '`');
    if (!end || std::strncmp(end, called.c_str(), called.size()) != 0) break;
    const char* q = p;
    p = end + called.size();
    int l = 0, c = 0;
    if (!number(l) || *p != ':' || (++p, !number(c))) {
      p = q;
      break;
    }
    calls.push_back({std::string(name, end), Loc{l, c}});
  }
  int site = 0;
  for (size_t i = calls.size(); i-- > 0;) site = call_site(calls[i].first, Loc{calls[i].second.line, calls[i].second.col, site});
  *used = size_t(p - s);
  return Loc{line, col, site};
}

std::string SourceFile::format(const UserError& e) const {
  if (!e.loc.known()) return fmt::format("{}: error: {}\n", path, e.what());
  auto located = [&](Loc loc, const char* kind, const std::string& msg) {
    std::string src = line(loc.line);
    std::string caret;
    for (int i = 1; i < loc.col && size_t(i - 1) < src.size(); ++i) caret += src[size_t(i - 1)] == '\t' ? '\t' : ' ';
    return fmt::format("{}:{}:{}: {}: {}\n{}\n{}^\n", path, loc.line, loc.col, kind, msg, src, caret);
  };
  // Each def call the place was reached through, innermost first, on a line of its own.
  auto calls = [&](Loc loc) {
    std::string out;
    for (int site = loc.site; site > 0;) {
      const CallSite c = call_site(site);
      out += fmt::format("  in `{}` called at {}:{}:{}\n", c.callee, path, c.call.line, c.call.col);
      site = c.call.site;
    }
    return out;
  };
  std::string out = located(e.loc, "error", e.what()) + calls(e.loc);
  for (const auto& [loc, msg] : e.notes) out += located(loc, "note", msg) + calls(loc);
  return out;
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UserError({}, fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw UserError({}, fmt::format("'{}' is a directory, not a file", path));
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw UserError({}, fmt::format("cannot read '{}': {}", path, std::strerror(err)));
    }
    data.append(buf, size_t(n));
  }
  ::close(fd);
  return data;
}

namespace {
// Writes `data` to `path` (created or truncated); returns 0 or the errno of the failure.
int write_whole(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return err;
    }
    done += size_t(n);
  }
  return ::close(fd) == 0 ? 0 : errno;
}
}  // namespace

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  // Every file is written under a temporary name first; only when all of them
  // are complete does each take its name, so a failure leaves none behind.
  std::vector<std::string> staged;
  auto discard = [&] {
    for (const std::string& t : staged) ::unlink(t.c_str());
  };
  for (const auto& [path, data] : files) {
    std::string tmp = path + ".gradc-tmp";
    int err = write_whole(tmp, data);
    if (err) {
      ::unlink(tmp.c_str());
      discard();
      throw UserError({}, fmt::format("cannot write '{}': {}", path, std::strerror(err)));
    }
    staged.push_back(tmp);
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (std::rename(staged[i].c_str(), files[i].first.c_str()) != 0) {
      int err = errno;
      for (size_t k = 0; k < i; ++k) ::unlink(files[k].first.c_str());
      staged.erase(staged.begin(), staged.begin() + long(i));
      discard();
      throw UserError({}, fmt::format("cannot write '{}': {}", files[i].first, std::strerror(err)));
    }
  }
}

void write_file_atomic(const std::string& path, const std::string& data) { write_files_atomic({{path, data}}); }

}  // namespace gradc
