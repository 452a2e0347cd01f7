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

// The bytes a collective node sends per rank, for the bytes of its operand (`in`) and
// result (`out`) and its group of N ranks, under ring algorithms: each collective's block
// in ops/collective.cpp gives its formula (all_reduce 2(N-1)/N of its buffer, all_gather
// (N-1)/N of the gathered result, permute a buffer for each pair whose ends differ, over N, ...).
using SentFn = double (*)(const Node& n, double in, double out, int N);
OpTable<SentFn>& bytes_sent();

// Bytes per rank: bytes_sent(), and as many received (every byte one rank sends, another
// receives; averaged over ranks for the rooted ones).
CollectiveCost collective_cost(const Graph& g, ValueId v);
GraphCost graph_cost(const Graph& g);
// A program with `size` parameters: each count of its GraphCost as a polynomial in
// the sizes, such as "96*B + 768", or "16*B, B a multiple of 16" where it is one only
// at multiples, or "none" (gradc cost fits them, tools/gradc.cpp).
struct CostFormulas {
  std::string fitted;   // the sizes they were fitted and checked at, for the report
  std::string failure;  // where the program could not be sampled, why (the fields below are then empty)
  std::vector<std::string> sent, received;                       // per collective, in GraphCost's order
  std::string sent_total[2], received_total[2], flops[2], peak;  // [0] forward, [1] backward
};

// The report, each collective named by its source value (or, in the backward, the
// forward op whose gradient it computes) and `source`'s line; sizes in readable units.
// With `formulas`, a section gives the counts as functions of the program's sizes.
std::string cost_report(const Graph& g, const GraphCost& c, const std::string& source,
                        const CostFormulas* formulas = nullptr);
// The same as JSON, for scripts: exact byte and flop counts (and formulas as text).
std::string cost_json(const Graph& g, const GraphCost& c, const std::string& source,
                      const CostFormulas* formulas = nullptr);

}  // namespace gradc
