// Passes are functions from IR to IR, run from one straight list (pipeline.cpp).
#pragma once
#include <string>
#include <vector>

#include "ir/lowered.h"
#include "passes/autodiff.h"

namespace gradc {

struct PipelineOptions {
  bool print_after_all = false;  // the IR after every pass, marked "unchanged" when it is
  bool time_passes = false;
  bool check_finite = false;               // lower: a kernel per value, checked (lower_kernels)
  int64_t max_folded = 4096;               // fold: larger results stay as ops
  bool any_size = false;                   // lower: waits for any buffer plan (lower_kernels)
  bool tables16 = true;                    // codegen (the CPU): functions of one 16-bit value as tables
  std::vector<GradInfo>* grads = nullptr;  // grad: what autodiff made of each grad, in program order
};

// A pass takes its input by value (it changes it in place) and may read the options.
using PassFn = Graph (*)(Graph, const PipelineOptions&);
struct PassInfo {
  const char* name;
  PassFn run;
  const char* summary;
};

// Every pass `gradc opt --pass=` knows, in the order the default pipeline runs them.
const std::vector<PassInfo>& all_passes();
const PassInfo* find_pass(const std::string& name);

// Runs `passes` in order; what the options ask for is appended to `log`.
Graph run_passes(Graph g, const std::vector<const PassInfo*>& passes, const PipelineOptions& opt, std::string& log);

// The named pipelines, each one straight list of passes (as Halide's Lower.cpp): every
// command, verify, prove, the benchmarks and the tests run these, not lists of their own.
//   grad      autodiff: every grad replaced by its derived backward graph, each value
//             marked replicated or varying
//   optimise  fold, cse, dce: what the backends compile (after grad)
//   lower     optimise, low-precision, then lower-kernels: the program as every backend sees it
//             (ir/lowered.h); run by lowered(), since it ends in kernels, not a graph
enum class Pipeline { Grad, Optimise, Lower };
const std::vector<const PassInfo*>& pipeline(Pipeline p);
Graph run_pipeline(Graph g, Pipeline p, const PipelineOptions& opt = {}, std::string* log = nullptr);
Lowered lowered(Graph g, const PipelineOptions& opt = {}, std::string* log = nullptr);

// The passes (one file each in passes/).
Graph infer_shapes(Graph g);                     // re-derives every type; reports errors at source locations
Graph dce(Graph g);                              // drops values nothing uses; keeps every collective and input
Graph cse(Graph g);                              // merges identical local ops; never merges collectives
Graph fold(Graph g, int64_t max_folded = 4096);  // evaluates local ops on constants (small results only)
// Each bf16 or f16 op as its f32 op and a rounding cast; reductions over ranks of them
// as exchanges in their type and a sum on the receiving rank (passes/low_precision.cpp).
Graph widen_low_precision(Graph g);

// Shared by the passes: g without the nodes where keep is false and with each
// operand v read as repl[v] (its nodes moved, not copied; dropped nodes must be unused).
// `moved` (if given, of g's size) gets each value's place in the new graph (that of
// repl[v]; -1 where it was dropped).
Graph rebuild(Graph&& g, const std::vector<bool>& keep, const std::vector<ValueId>& repl,
              std::vector<ValueId>* moved = nullptr);

}  // namespace gradc
