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

}  // namespace gradc
