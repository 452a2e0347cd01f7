// How `gradc run` shows outputs: readable text, or the JSON layout of docs/cli.md.
#pragma once
#include <string>

#include "runtime/interp.h"

namespace gradc {

std::string number_str(const Tensor& t, int64_t i);  // shortest text that reads back exactly
// Nested lists, NumPy-style: rows on lines of their own (aligned for an outermost
// '[' at column `pad`), elided to the first and last 3 per axis past 1000 elements.
std::string tensor_text(const Tensor& t, size_t pad = 0);
std::string outputs_text(const RankOutputs& outs);
// A mesh program's adds "mesh" beside "world" and each rank's "coords" (docs/cli.md, "gradc run").
std::string outputs_json(const RankOutputs& outs, const Graph& g);

}  // namespace gradc
