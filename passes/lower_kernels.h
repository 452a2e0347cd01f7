// Lowering to kernels: a graph after grad and simplification becomes the
// lowered program of ir/lowered.h (fused kernels, BLAS calls, collectives on
// buffers, a buffer plan and a two-stream schedule).
#pragma once
#include "ir/lowered.h"

namespace gradc {

Lowered lower_kernels(const Graph& g);

}  // namespace gradc
