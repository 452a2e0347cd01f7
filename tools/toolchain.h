// How `gradc build` compiles generated sources: the host C++ compiler with BLAS
// (cpu), or nvcc with cuBLAS and NCCL (cuda), found where this build of gradc
// found them (CXX and CUDA_HOME override).
#pragma once
#include <string>
#include <vector>

namespace gradc {

struct Toolchain {
  bool found = false;
  std::string missing;  // why not, when not found
  std::string describe;  // one line for gradc --version
};
Toolchain cpu_toolchain();
Toolchain cuda_toolchain();

// Compiles `sources` (in `dir`) into the executable `exe`; returns the compiler's
// output on failure, empty on success.
std::string compile(bool cuda, const std::string& dir, const std::vector<std::string>& sources, const std::string& exe);

}  // namespace gradc
