// An application that makes a program's class (first.dg's, on gradc's in-process group):
// OpenBLAS must then run kernels at least as wide as this CPU's vectors, whatever it
// chose itself when it loaded (gradc_blas.h), with OPENBLAS_CORETYPE unset again.
// Prints what it saw; exits 1 where OpenBLAS still runs narrower kernels than gradc
// would have chosen (OPENBLAS_CORETYPE unset).
#include <cstdio>
#include <cstdlib>

#include "first.h"

int main() {
  const std::string before = openblas_get_corename();
  first step(*new gradc::ThreadGroup(first::world), 0);  // the class, as an application makes it
  const char* now = openblas_get_corename();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* wider = gradc::wider_blas_kernels(now, avx512, avx2_fma);
  std::printf("kernels: %s, then %s; wider ones: %s; OPENBLAS_CORETYPE %s\n", before.c_str(), now,
              wider ? wider : "none", getenv("OPENBLAS_CORETYPE") ? "set" : "unset");
  return wider && !getenv("OPENBLAS_CORETYPE") ? 1 : 0;
}
