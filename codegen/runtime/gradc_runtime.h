// gradc's runtime for generated code, written out beside it by `gradc emit`: the
// files of the target the compiler builds for. Everything that differs between the
// targets is in them (launching a kernel body, reductions, BLAS, communication and
// memory); what both share is gradc_common.h.
#pragma once
#if defined(__CUDACC__)
#include "gradc_nccl.h"
#else
#include "gradc_threads.h"
#if defined(GRADC_WITH_MPI)
#include "gradc_mpi.h"
#endif
#endif

namespace gradc {

// Memory that grows only (a class for any size: set_sizes): `p` holds room for
// `capacity` elements; where `count` are needed and more than that, it is released
// and allocated again (its contents are not kept).
template <class T>
void grow(T*& p, int64_t& capacity, int64_t count) {
  if (count <= capacity) return;
  release(p);
  p = static_cast<T*>(alloc(count * int64_t(sizeof(T))));
  capacity = count;
}

}  // namespace gradc
