#include "check/memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "passes/cost.h"
#include "support/diag.h"

namespace gradc {
namespace {

// The first number in `path` (a /proc or /sys file), in bytes after `scale`; -1 when absent or "max".
int64_t read_number(const std::string& path, const std::string& key, int64_t scale) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream in(line.substr(key.size()));
    int64_t v;
    if (in >> v) return v * scale;
    return -1;
  }
  return -1;
}

}  // namespace

int64_t available_memory() {
  int64_t avail = INT64_MAX;
  auto limit = [&](int64_t v) {
    if (v >= 0) avail = std::min(avail, v);
  };
  limit(read_number("/proc/meminfo", "MemAvailable:", 1024));
  int64_t max = read_number("/sys/fs/cgroup/memory.max", "", 1);
  int64_t used = read_number("/sys/fs/cgroup/memory.current", "", 1);
  if (max >= 0 && used >= 0) limit(std::max<int64_t>(0, max - used));
  rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) limit(int64_t(rl.rlim_cur));
  return avail;
}

std::string readable_bytes(double b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} bytes", b) : fmt::format("{:.3g} {}", b, units[u]);
}

void check_memory(const Graph& g, double copies, const std::string& what) {
  check_memory_bytes(g, graph_cost(g).peak_bytes * copies, what);
}

void check_memory_bytes(const Graph& g, double per_rank, const std::string& what) {
  const double need = per_rank * g.world;
  const int64_t avail = available_memory();
  if (need <= double(avail)) return;
  // The largest values, by bytes per rank, to say where the memory goes.
  std::vector<ValueId> big;
  for (size_t i = 0; i < g.nodes.size(); ++i) big.push_back(ValueId(i));
  auto bytes = [&](ValueId v) { return double(g.type(v).size()) * dtype_size(g.type(v).dtype); };
  std::sort(big.begin(), big.end(),
            [&](ValueId a, ValueId b) { return bytes(a) != bytes(b) ? bytes(a) > bytes(b) : a < b; });
  big.resize(std::min<size_t>(big.size(), 3));
  std::string list;
  for (ValueId v : big) {
    const Node& n = g[v];
    std::string name = n.name.empty() ? std::string(op_name(n.op)) : "'" + n.name.str() + "'";
    list += fmt::format("\n  {} {} ({} per rank){}", name, type_str(n.type), readable_bytes(bytes(v)),
                        n.loc.known() ? fmt::format(" at line {}{}", n.loc.line, call_chain("", n.loc, false)) : "");
  }
  throw UserError(
      big.empty() ? Loc{} : g[big[0]].loc,
      fmt::format("{} needs about {} of memory at its peak ({} ranks, {} each), but {} is available; "
                  "its largest values:{}",
                  what, readable_bytes(need), g.world, readable_bytes(per_rank), readable_bytes(double(avail)), list));
}

}  // namespace gradc
