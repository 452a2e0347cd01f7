// Small .dg programs run on 1 to 4 ranks by the reference interpreter, their
// gradients included. The input's length picks the number of ranks, so a seed is
// a plain .dg file; programs whose buffer plan needs more than kMaxPeakBytes per
// rank, or more than 1e8 flops, are skipped.
#include "frontend/ast.h"
#include "frontend/lower.h"
#include "fuzz.h"
#include "passes/cost.h"
#include "passes/pass.h"
#include "runtime/interp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int ranks = 1 + int(size % 4);
  std::string text(reinterpret_cast<const char*>(data), size);
  return gradc::fuzz::guarded([&] {
    gradc::Graph g =
        gradc::run_pipeline(gradc::lower_program(gradc::parse_program(text), ranks), gradc::Pipeline::Grad);
    gradc::GraphCost c = gradc::graph_cost(g);
    if (c.peak_bytes > gradc::fuzz::kMaxPeakBytes || c.flops_forward + c.flops_backward > 1e8) return;
    gradc::interpret(g, gradc::RankInputs(size_t(g.world)));
  });
}
