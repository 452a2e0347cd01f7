// The in-process communicator: N ranks in one process. Each collective takes
// every rank's operand (x[k] is rank k's) and returns every rank's result.
// Reductions combine in rank order (x_0, then x_1, ...), so results are
// deterministic and identical on every rank. These are the interpreter's kernels, and
// on purpose a statement of each collective's meaning independent of its routing
// (ir/collectives.h), against which `gradc prove` checks the routing.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace gradc::comm {

using ReduceOp = Reduction;  // ir/graph.h

using PerRank = std::vector<Tensor>;
using Pairs = std::vector<std::vector<int64_t>>;  // [src, dst]

Tensor reduce_all(const PerRank& x, ReduceOp op);  // op over k of x[k]
PerRank all_reduce(const PerRank& x, ReduceOp op);
PerRank all_gather(const PerRank& x, int axis);
PerRank reduce_scatter(const PerRank& x, int axis, ReduceOp op);
PerRank broadcast(const PerRank& x, int root);
PerRank reduce(const PerRank& x, int root, ReduceOp op);
PerRank gather(const PerRank& x, int root, int axis);
PerRank scatter(const PerRank& x, int root, int axis);
PerRank all_to_all(const PerRank& x, int split_axis, int concat_axis);
PerRank permute(const PerRank& x, const Pairs& pairs);

}  // namespace gradc::comm
