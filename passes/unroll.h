// The single-process reference: see unroll.cpp.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

struct Unrolled {
  Graph g;  // world 1, no collectives; still holds grad nodes
  // grads[k][r]: which grad node of g (by order among g's grad nodes) gives
  // the k-th grad of the original program on rank r.
  std::vector<std::vector<int>> grads;
};

// Rank r's copy of a per-rank input `name` is an input of that name; a shared input keeps its name.
std::string unrolled_input_name(const std::string& name, int rank);
Unrolled unroll(const Graph& g);

}  // namespace gradc
