// Lowering to kernels: a graph after grad and simplification becomes the
// lowered program of ir/lowered.h (fused kernels, BLAS calls, collectives on
// buffers, a buffer plan and a two-stream schedule).
#pragma once
#include "ir/lowered.h"

namespace gradc {

// How lowering and the code generators treat an op (one row per op, ops/<group>.cpp):
//   Leaf    an input or constant, or computed from the element's index (rank, iota, rand)
//   Scalar  elementwise: its value per element is gradc::op::NAME (ir/scalar.h),
//           the function the interpreter's kernel calls too
//   View    index arithmetic on its operand (reshape, transpose, slice, pad, concat, broadcast_to)
//   Reduce  a reduction over axes, of a fused expression
//   Gemm    a BLAS call
//   Comm    a collective on buffers
//   Loop    a runtime call on buffers that runs down each column of one axis in order
//           (cumsum, scatter_add: codegen/cpp.h's runtime_calls gives it)
//   Removed replaced by a pass before lowering (grad)
enum class KernelForm : uint8_t { None, Leaf, Scalar, View, Reduce, Gemm, Comm, Loop, Removed };
OpTable<KernelForm>& kernel_forms();
// The Scalar ops of a vector instruction or two (add, mul, max, a comparison, where;
// not a rounding cast): a value made of a few of them from one or two buffers is computed
// again in each kernel that reads it, where that moves fewer bytes than writing it out
// and reading it back (mark_buffers in lower_kernels.cpp).
OpTable<bool>& cheap_scalars();

// With `check_finite` (gradc run --check-finite), every value but constants, views and
// the cheapest leaves is its own kernel's buffer, checked for NaN and infinity after
// the kernel, so a run stops at the first op, in program order, that makes one.
// With `any_size` (a class for sizes set at run time, whose buffer plan is made then),
// the schedule's waits hold for every plan: two buffers not alive at once may share memory.
// The lower pipeline (passes/pass.h, lowered()) ends with it.
Lowered lower_kernels(Graph g, bool check_finite = false, bool any_size = false);

}  // namespace gradc
