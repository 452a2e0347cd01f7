// The reference interpreter's kernels, one row per op (ops/<group>.cpp fills them
// in): a local op's result on one rank, a collective's on every rank at once.
#pragma once
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace gradc {

struct EvalCtx {
  int rank = 0;
  int world = 1;
  const Graph* graph = nullptr;  // the mesh's axes, for rank(A)
};
using Args = std::vector<const Tensor*>;

// Evaluates a local op on one rank.
using LocalFn = Tensor (*)(const Node& n, const Args& args, const EvalCtx& ctx);
// Evaluates a collective: x[k] is rank k's operand; returns every rank's result.
using CollectiveFn = std::vector<Tensor> (*)(const Node& n, const std::vector<Tensor>& x);

struct KernelRule {
  LocalFn local = nullptr;            // every op but the collectives
  CollectiveFn collective = nullptr;  // the collectives
};
OpTable<KernelRule>& kernels();

// bf16 and f16 (docs/language.md, "Low precision"): an op with a result or operand of
// those types runs as the f32 op on f32 copies of its operands, and its result is
// rounded once to its type; the kernels see f32, f64 and i32 only. These are the one
// place that happens: a local op on one rank's operands, and a collective on every
// rank's (which thus sums in f32).
Tensor run_local(const Node& n, const Args& args, const EvalCtx& ctx);
std::vector<Tensor> run_collective_kernel(const Node& n, const std::vector<Tensor>& x);

}  // namespace gradc
