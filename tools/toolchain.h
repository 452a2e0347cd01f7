// How `gradc build` compiles generated sources: the host C++ compiler with BLAS
// (cpu), or nvcc with cuBLAS and NCCL (cuda), found where this build of gradc
// found them (CXX and CUDA_HOME override).
#pragma once
#include <string>
#include <vector>

#include "codegen/cpp.h"

namespace gradc {

struct Toolchain {
  bool found = false;
  std::string missing;   // why not, when not found
  std::string describe;  // one line for gradc --version
};
Toolchain cpu_toolchain();
Toolchain cuda_toolchain();

// The generated sources as one translation unit: a file `name` that includes each
// of them, which is what gradc compiles. The runtime's headers are then parsed, and
// their inline code compiled, once rather than once per source: a small program
// compiles in about 60% of the time.
GeneratedFile one_unit(const std::string& name, const std::vector<std::string>& sources);

// nvcc's flags for the GPUs a cuda executable is compiled for: those CMake's CUDAARCHS
// names where it is set ("80;90", "90-real", "native"), else sm_80 and sm_90. A value
// that is not such a list is a UserError.
std::string cuda_arch_flags();
// Compiles `source` (in `dir`) into the executable `exe`; returns the compiler's
// output on failure, empty on success. `runtime`: flags added (the runtime's
// folder and its precompiled header: shared_runtime in tools/native.h).
std::string compile(bool cuda, const std::string& dir, const std::string& source, const std::string& exe,
                    const std::string& runtime = "");
// The command precompiling `header` (in `dir`) into `pch` with the flags of an
// executable's compile (`exe`) or of the native backend's; the command compiling the
// runtime's shared part (`source`, codegen/runtime/gradc_runtime_object.cpp) into
// `object` with the same flags; and whether their compiler is clang, which precompiles
// (-include-pch): others compile without either.
// The flag under which the runtime's headers leave their shared code to that object:
// the header, the object and every program compiled with them define it alike.
inline constexpr const char* kRuntimeObjectFlag = "-DGRADC_RUNTIME_OBJECT";
std::string precompile_command(bool exe, const std::string& dir, const std::string& header, const std::string& pch);
std::string runtime_object_command(bool exe, const std::string& dir, const std::string& source,
                                   const std::string& object);
bool precompiles(bool exe);

// The native backend's compiler: clang++-19 where found (GRADC_NATIVE_CXX
// overrides), else this build's C++ compiler; found or not, and what it is.
Toolchain native_toolchain();
// The command compiling `source` in `dir` into the shared library `so` at -O3 for
// this machine (`runtime` as for compile), and a fingerprint of the compiler binary
// (for the cache key).
std::string native_command(const std::string& dir, const std::string& source, const std::string& so,
                           const std::string& runtime = "");
std::string native_fingerprint();
// Runs a compile command: empty on success, else the command and the compiler's output.
std::string run_compile(const std::string& cmd);

}  // namespace gradc
