// The reference interpreter: runs a graph on N ranks in one process, in
// lockstep (every rank computes a node before the next node), with collectives
// exchanged through the in-process communicator (runtime/comm.h).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace gradc {

// inputs[r][name]: rank r's value for an input; a missing one takes its default.
using RankInputs = std::vector<std::map<std::string, Tensor>>;
// outputs[r]: rank r's outputs, in the order the program lists them.
using RankOutputs = std::vector<std::vector<std::pair<std::string, Tensor>>>;

// With `check_finite`, the run stops at the first op (in program order) whose result
// holds a NaN or an infinity, with an error at the op naming it, the rank and the
// element (gradc run --check-finite); constants are not checked.
RankOutputs interpret(const Graph& g, const RankInputs& inputs, bool check_finite = false);
// A collective on every rank's operand: in each of its groups (over= a mesh's axes),
// as on a world of the group's ranks.
std::vector<Tensor> run_collective(const Graph& g, const Node& n, const std::vector<Tensor>& x);

// The inputs as a run sees them, checked as interpret checks them (the declared
// type; a shared input the same on every rank; an input without a default given
// on every rank): each input given on some ranks only gets its default on the
// others, and with `all_defaults` every input not given gets its default
// (evaluated once here: --iters times steps without them).
RankInputs complete_inputs(const Graph& g, const RankInputs& inputs, bool all_defaults);

// Values given for some nodes on every rank, used instead of what they compute.
using Overrides = std::map<ValueId, std::vector<Tensor>>;

// Evaluates the nodes `wanted` (and what they need) on every rank; vals[node][rank].
// Used by interpret and by the checks that compare values (verify). A run takes
// part in every collective; a check that only needs some values (a loss at a
// perturbed point) passes every_collective = false and skips the others.
std::vector<std::vector<Tensor>> evaluate(const Graph& g, const RankInputs& inputs, const std::vector<ValueId>& wanted,
                                          const Overrides* overrides = nullptr, bool every_collective = true,
                                          bool check_finite = false);

}  // namespace gradc
