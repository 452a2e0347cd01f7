// Which of OpenBLAS's kernels gradc's matmuls run on. OpenBLAS (built for every x86
// CPU, as Debian's is) picks its kernels for the CPU when it loads, from a table of the
// CPUs it knows; a newer CPU it does not know gets its oldest kernels. Debian's 0.3.21
// runs an Intel Xeon of model 207 (Emerald Rapids, AVX-512) on its SSE3 "Prescott"
// kernels: sgemm of 512x512 by 512x1024 on one core at 28 GFLOP/s, against 137 with
// its AVX-512 "SkylakeX" kernels (docs/native.md). So where OpenBLAS's choice uses
// narrower vectors than the CPU has, gradc has it choose again, once, before its first
// matmul: the AVX-512 kernels where the CPU has AVX-512, else the AVX2 ones where it has
// AVX2 and FMA. OPENBLAS_CORETYPE, where the user sets it, is left to choose.
// The interpreter (ops/shape.cpp) and the generated code (as gradc_blas.h, which
// gradc_cpu.h includes) call the same function. Self-contained, C++17.
#pragma once
#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

// OpenBLAS's own choice of kernels, which an OpenBLAS built for every CPU (DYNAMIC_ARCH)
// exports; weak, so that a BLAS without them links and keeps its kernels.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace gradc {

// The kernels to ask OpenBLAS for instead of `chosen` (the name openblas_get_corename
// gives), on a CPU with AVX-512 (F, BW, DQ, VL) or AVX2 and FMA; nullptr: keep them.
inline const char* wider_blas_kernels(const char* chosen, bool avx512, bool avx2_fma) {
  auto named = [chosen](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (strcmp(chosen, n) == 0) return true;
    return false;
  };
  const bool has512 = named({"SkylakeX", "Cooperlake", "SapphireRapids"});
  if (avx512) return has512 ? nullptr : "SkylakeX";
  if (avx2_fma) return has512 || named({"Haswell", "Zen", "Excavator"}) ? nullptr : "Haswell";
  return nullptr;
}

// What choose_blas_kernels found: OpenBLAS's choice, and the kernels gradc asked for
// instead (empty where it kept them).
struct BlasKernels {
  std::string openblas, asked;
};

// Once a process, before its first BLAS call: OpenBLAS's kernels for this CPU, chosen
// again where they are narrower than it. Call it before the process starts threads of
// its own (it sets OPENBLAS_CORETYPE for OpenBLAS to read, then unsets it).
inline const BlasKernels& choose_blas_kernels() {
  static BlasKernels k;
  static std::once_flag once;
  std::call_once(once, [] {
    k.openblas = openblas_get_corename();
    if (getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) return;
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char* wider = wider_blas_kernels(k.openblas.c_str(), avx512, avx2_fma);
    if (!wider) return;
    // OpenBLAS's first buffer allocation chooses its kernels again where none are chosen,
    // and its own threads, started at load, make it when they start: one that fell
    // between quit and init below would choose with OPENBLAS_CORETYPE unset (seen: 1
    // process in 14 kept Prescott). A small product here makes that allocation first.
    float a[16] = {}, c[16];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.f, a, 4, a, 4, 0.f, c, 4);
    gotoblas_dynamic_quit();
    setenv("OPENBLAS_CORETYPE", wider, 1);
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    k.asked = wider;
  });
  return k;
}

}  // namespace gradc
