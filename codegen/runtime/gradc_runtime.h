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
