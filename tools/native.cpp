#include "tools/native.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "codegen/cpp.h"
#include "support/diag.h"
#include "tools/toolchain.h"

namespace fs = std::filesystem;

namespace gradc {
namespace {

using Entry = int (*)(int world, const void* const* inputs, void* const* outputs, int iters, double* step_ms,
                      char* error, int error_size);

// $XDG_CACHE_HOME/gradc, else ~/.cache/gradc, created if need be.
fs::path cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path dir = xdg && *xdg     ? fs::path(xdg) / "gradc"
                 : home && *home ? fs::path(home) / ".cache" / "gradc"
                                 : fs::temp_directory_path() / "gradc-cache";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw UserError({}, fmt::format("cannot create the native backend's cache '{}': {}", dir.string(), ec.message()));
  return dir;
}

// 128 bits of two FNV-1a hashes, as hex: the cache key.
std::string hash(const std::string& s) {
  uint64_t a = 1469598103934665603ull, b = 0x84222325cbf29ce4ull;
  for (unsigned char c : s) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  return fmt::format("{:016x}{:016x}", a, b);
}

// The compiled library for these sources, of which `unit` is the one compiled: from
// the cache, else compiled into it (in a folder of its own, then renamed into place:
// concurrent runs of gradc compiling the same program do not collide).
std::string library(const std::vector<GeneratedFile>& files, const std::string& unit) {
  std::string key_text = native_command("DIR", unit, "OUT") + "\n" + native_fingerprint() + "\n";
  for (const GeneratedFile& f : files) key_text += f.name + "\n" + f.text;
  const fs::path dir = cache_dir();
  const std::string key = hash(key_text);
  const fs::path so = dir / (key + ".so");
  std::error_code ec;
  if (fs::exists(so, ec)) return so.string();
  const fs::path src = dir / fmt::format("{}-{}", key, getpid());
  fs::create_directories(src, ec);
  if (ec) throw UserError({}, fmt::format("cannot create '{}': {}", src.string(), ec.message()));
  for (const GeneratedFile& f : files) {
    std::ofstream out(src / f.name, std::ios::binary);
    out << f.text;
    if (!out) throw UserError({}, fmt::format("cannot write '{}'", (src / f.name).string()));
  }
  const std::string tmp = so.string() + fmt::format(".{}.tmp", getpid());
  std::string err = run_compile(native_command(src.string(), unit, tmp));
  if (!err.empty())
    throw InternalError(
        fmt::format("internal error: the generated code did not compile; it is kept in {}\n{}", src.string(), err));
  fs::rename(tmp, so, ec);
  if (ec) throw UserError({}, fmt::format("cannot write '{}': {}", so.string(), ec.message()));
  fs::remove_all(src, ec);
  return so.string();
}

// A rank's failure, "rank R: why": an error in the program's data at an op
// ("rank R: FILE:L:C: what") becomes that op's diagnostic, as the interpreter gives it.
UserError run_error(const std::string& error, const std::string& source_path) {
  const std::string at = ": " + source_path + ":";
  const size_t p = error.find(at);
  if (error.rfind("rank ", 0) != 0 || p == std::string::npos) return UserError({}, error);
  size_t used = 0;
  const Loc loc = parse_loc_str(source_path, error.c_str() + p + at.size(), &used);
  const size_t rest = p + at.size() + used;
  if (!loc.known() || error.compare(rest, 2, ": ") != 0) return UserError({}, error);
  return UserError(loc, error.substr(rest + 2));
}

}  // namespace

bool native_available(std::string* why) {
  static const Toolchain tc = native_toolchain();
  if (why) *why = tc.missing;
  return tc.found;
}

NativeRun run_native(const Lowered& l, const std::string& source_path, const RankInputs& inputs, int iters) {
  const std::string name = "program";
  std::vector<GeneratedFile> files = generate(l, Target::Cpu, name, source_path);
  files.push_back(generate_native_entry(l, name));
  files.push_back(one_unit(name + "_unit.cpp", {name + ".cpp", name + "_native.cpp"}));
  const std::string so = library(files, files.back().name);
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw InternalError(fmt::format("internal error: cannot load the compiled program {}: {}", so, dlerror()));
  auto entry = reinterpret_cast<Entry>(dlsym(lib, "gradc_native_run"));
  if (!entry) throw InternalError(fmt::format("internal error: {} has no gradc_native_run", so));

  const int world = l.graph.world;
  const size_t ni = std::max<size_t>(l.inputs.size(), 1), no = std::max<size_t>(l.outputs.size(), 1);
  std::vector<const void*> in(size_t(world) * ni, nullptr);
  std::vector<void*> out(size_t(world) * no, nullptr);
  NativeRun run;
  run.outputs.resize(size_t(world));
  for (int r = 0; r < world; ++r) {
    for (size_t i = 0; i < l.inputs.size(); ++i)
      if (auto it = inputs[size_t(r)].find(l.inputs[i].first); it != inputs[size_t(r)].end())
        in[size_t(r) * ni + i] = it->second.buf.get();
    for (size_t i = 0; i < l.outputs.size(); ++i) {
      run.outputs[size_t(r)].push_back(
          {l.outputs[i].first, Tensor::empty(l.buffers[size_t(l.outputs[i].second)].type)});
      out[size_t(r) * no + i] = run.outputs[size_t(r)].back().second.buf.get();
    }
  }
  run.step_ms.assign(size_t(iters), 0);
  char error[4096] = "";
  const int rc = entry(world, in.data(), out.data(), iters, run.step_ms.data(), error, int(sizeof error));
  // The library stays loaded: its threads are joined, but unloading buys nothing.
  if (rc != 0) throw run_error(error, source_path);
  return run;
}

}  // namespace gradc
