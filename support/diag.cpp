#include "support/diag.h"

#include <cstring>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>

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

std::vector<CallSite> calls_of(Loc loc) {
  std::vector<CallSite> out;
  for (int site = loc.site; site > 0; site = out.back().call.site) out.push_back(call_site(site));
  return out;
}

Loc within_calls(Loc place, const std::vector<CallSite>& calls) {
  int site = 0;
  for (size_t i = calls.size(); i-- > 0;)
    site = call_site(calls[i].callee, Loc{calls[i].call.line, calls[i].call.col, site});
  return Loc{place.line, place.col, site};
}

std::string call_chain(const std::string& path, Loc loc, bool col) {
  std::string out;
  for (const CallSite& c : calls_of(loc))
    out += path.empty() ? fmt::format(" in `{}` called at line {}", c.callee, c.call.line)
           : col        ? fmt::format(" in `{}` called at {}:{}:{}", c.callee, path, c.call.line, c.call.col)
                        : fmt::format(" in `{}` called at {}:{}", c.callee, path, c.call.line);
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
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
  std::vector<CallSite> calls;  // innermost first
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
  *used = size_t(p - s);
  return within_calls(Loc{line, col}, calls);
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
    for (const CallSite& c : calls_of(loc))
      out += fmt::format("  in `{}` called at {}:{}:{}\n", c.callee, path, c.call.line, c.call.col);
    return out;
  };
  std::string out = located(e.loc, "error", e.what()) + calls(e.loc);
  for (const auto& [loc, msg] : e.notes) out += located(loc, "note", msg) + calls(loc);
  return out;
}

}  // namespace gradc
