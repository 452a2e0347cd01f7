#include "tools/toolchain.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace fs = std::filesystem;

namespace gradc {
namespace {

std::string env(const char* name, const std::string& dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}
std::string cxx() { return env("CXX", GRADC_CXX); }
std::string native_cxx() {
  const std::string c = env("GRADC_NATIVE_CXX", GRADC_NATIVE_CXX);
  return c.empty() ? cxx() : c;
}
std::string cuda_home() { return env("CUDA_HOME", GRADC_CUDA_HOME); }
std::string quote(const std::string& s) { return "'" + s + "'"; }

// No floating-point contraction: each op rounds as the interpreter's does. With clang,
// exp, log, sin and cos in a loop become glibc's vector functions (libmvec).
std::string speed_flags(const std::string& compiler) {
  const bool clang = compiler.find("clang") != std::string::npos;
  return std::string("-O3 -march=native -ffp-contract=off -fno-math-errno") +
         (clang ? " -Wno-invalid-feature-combination -fveclib=libmvec" : "");
}
std::string vector_math(const std::string& compiler) {
  return compiler.find("clang") != std::string::npos ? " -lmvec" : "";
}

// Runs a shell command; its output, and whether it succeeded.
std::pair<bool, std::string> shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {false, "cannot run " + cmd};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  return {rc == 0, out};
}

}  // namespace

Toolchain cpu_toolchain() {
  Toolchain t;
  t.found = shell(quote(cxx()) + " --version").first && fs::exists(GRADC_OPENBLAS);
  t.missing = t.found ? "" : fmt::format("needs the C++ compiler {} and OpenBLAS ({})", cxx(), GRADC_OPENBLAS);
  const bool mpi = shell("mpicxx --showme:compile").first;
  t.describe = fmt::format("cpu: {} (compiler {}, BLAS {}, {})", t.found ? "yes" : "no", cxx(), GRADC_OPENBLAS,
                           mpi ? "MPI: mpicxx" : "no MPI: ranks as threads only");
  return t;
}

Toolchain cuda_toolchain() {
  Toolchain t;
  const std::string home = cuda_home();
  const bool nvcc = fs::exists(home + "/bin/nvcc");
  const bool cublas = fs::exists(home + "/include/cublas_v2.h");
  const bool nccl = fs::exists(home + "/include/nccl.h") || fs::exists("/usr/include/nccl.h");
  t.found = nvcc && cublas && nccl;
  t.missing = t.found ? ""
                      : fmt::format("needs nvcc, cuBLAS and NCCL under CUDA_HOME ({}): {}{}{}", home,
                                    nvcc ? "" : "no nvcc ", cublas ? "" : "no cuBLAS ", nccl ? "" : "no NCCL");
  t.describe = fmt::format("cuda: {} (nvcc, cuBLAS and NCCL under {})", t.found ? "yes" : "no", home);
  return t;
}

// OpenMPI's compile and link flags (mpicxx knows them), or "" without MPI; for nvcc
// only the -I, -L and -l ones, which it takes as they are.
std::string mpi_flags(bool for_nvcc) {
  auto [ok, flags] = shell("mpicxx --showme:compile && mpicxx --showme:link");
  if (!ok) return "";
  std::istringstream in(flags);
  std::string out = " -DGRADC_WITH_MPI", f;
  while (in >> f)
    if (!for_nvcc || f.rfind("-I", 0) == 0 || f.rfind("-L", 0) == 0 || f.rfind("-l", 0) == 0) out += " " + f;
  return out;
}

std::string compile(bool cuda, const std::string& dir, const std::vector<std::string>& sources,
                    const std::string& exe) {
  std::string files;
  for (const std::string& s : sources) files += fmt::format(" '{}/{}'", dir, s);
  std::string cmd;
  if (cuda) {
    const std::string home = cuda_home();
    cmd = fmt::format(
        "{} -O2 -std=c++17 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 "
        "-I{}{} -o {} -L{}/lib64 -lcublas -lnccl{}",
        quote(home + "/bin/nvcc"), quote(dir), files, quote(exe), quote(home), mpi_flags(true));
  } else {
    // As the native backend compiles (its compiler, where found, and its flags), so that
    // an executable runs at gradc run's speed; with MPI it also runs under mpirun.
    const std::string compiler = native_toolchain().found ? native_cxx() : cxx();
    cmd = fmt::format("{} {} -std=c++17 -I{} -I{}{} -o {} {} -lpthread{}{}", quote(compiler), speed_flags(compiler),
                      quote(dir), quote(GRADC_CBLAS_INCLUDE), files, quote(exe), quote(GRADC_OPENBLAS),
                      vector_math(compiler), mpi_flags(false));
  }
  return run_compile(cmd);
}

std::string run_compile(const std::string& cmd) {
  auto [ok, out] = shell(cmd);
  if (ok) return "";
  size_t cut = 0;  // the first 40 lines of the compiler's output say enough
  for (int lines = 0; cut != std::string::npos && lines < 40; ++lines) cut = out.find('\n', cut + 1);
  if (cut != std::string::npos) out = out.substr(0, cut) + "\n[...]";
  return cmd + "\n" + out;
}

Toolchain native_toolchain() {
  Toolchain t;
  t.found = shell(quote(native_cxx()) + " --version").first && fs::exists(GRADC_OPENBLAS);
  t.missing = t.found ? "" : fmt::format("needs the C++ compiler {} and OpenBLAS ({})", native_cxx(), GRADC_OPENBLAS);
  t.describe = fmt::format("native backend: {} (compiler {})", t.found ? "yes" : "no", native_cxx());
  return t;
}

std::string native_command(const std::string& dir, const std::vector<std::string>& sources, const std::string& so) {
  std::string files;
  for (const std::string& s : sources) files += fmt::format(" '{}/{}'", dir, s);
  return fmt::format("{} {} -std=c++17 -fPIC -shared -I{} -I{}{} -o {} {} -lpthread{}", quote(native_cxx()),
                     speed_flags(native_cxx()), quote(dir), quote(GRADC_CBLAS_INCLUDE), files, quote(so),
                     quote(GRADC_OPENBLAS), vector_math(native_cxx()));
}

std::string native_fingerprint() {
  std::error_code ec;
  fs::path p = native_cxx();
  if (!p.has_parent_path()) {  // a name on PATH
    auto [ok, where] = shell("command -v " + quote(native_cxx()));
    if (ok) p = where.substr(0, where.find('\n'));
  }
  p = fs::canonical(p, ec);
  const auto size = ec ? 0 : fs::file_size(p, ec);
  const auto time = ec ? 0 : fs::last_write_time(p, ec).time_since_epoch().count();
  return fmt::format("{} {} {}", p.string(), size, time);
}

}  // namespace gradc
