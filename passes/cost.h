// `gradc cost`: what a graph (after autodiff) costs each rank: the bytes every
// collective moves under ring algorithms, flops, and peak memory.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

struct CollectiveCost {
  ValueId node;
  bool backward;
  double sent = 0, received = 0;  // bytes per rank (averaged over ranks for the rooted ones)
};

struct GraphCost {
  std::vector<CollectiveCost> collectives;
  double flops_forward = 0, flops_backward = 0;  // per rank
  double peak_bytes = 0;  // per rank: values live at once in program order (gradc cost: the buffer plan's)
};

// Bytes per rank for N ranks, with B the bytes of the value named in each formula:
//   all_reduce 2(N-1)/N B (its buffer); all_gather (N-1)/N B (the gathered result);
//   reduce_scatter (N-1)/N B (the operand); all_to_all (N-1)/N B (the operand);
//   broadcast, reduce (N-1)/N B: a chain in which every rank but one forwards B;
//   gather, scatter (N-1)/N B (the whole gathered or scattered value): N-1 blocks
//   go to or from the root; permute: B for each pair whose ends differ, over N.
CollectiveCost collective_cost(const Graph& g, ValueId v);
GraphCost graph_cost(const Graph& g);
// The report, each collective named by its source value (or, in the backward, the
// forward op whose gradient it computes) and `source`'s line; sizes in readable units.
std::string cost_report(const Graph& g, const GraphCost& c, const std::string& source);
// The same as JSON, for scripts: exact byte and flop counts.
std::string cost_json(const Graph& g, const GraphCost& c, const std::string& source);

}  // namespace gradc
