// Lowering to kernels: a graph after grad and simplification becomes the
// lowered program of ir/lowered.h (fused kernels, BLAS calls, collectives on
// buffers, a buffer plan and a two-stream schedule).
#pragma once
#include "ir/lowered.h"

namespace gradc {

// With `check_finite` (gradc run --check-finite), every value but constants, views and
// the cheapest leaves is its own kernel's buffer, checked for NaN and infinity after
// the kernel, so a run stops at the first op, in program order, that makes one.
Lowered lower_kernels(Graph g, bool check_finite = false);

}  // namespace gradc
