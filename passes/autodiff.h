// The autodiff pass and the replication analysis.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

// What the autodiff pass made of one grad(loss, w, mode=...), in the new graph.
struct GradInfo {
  ValueId loss, w, result;
  GradMode mode;
  std::string name;  // the name the program bound the gradient to
  Loc loc;
  uint8_t over = 0;  // the axes whose ranks' losses are different samples (none for mode=global)
  uint8_t own = 0;   // the axes along which w is each rank's own variable (the torch pullback's own=)
};

// Replaces every grad node by its backward graph; `info` (if given) gets one
// entry per grad node, in program order. mode=global with a loss that is not
// replicated is a UserError at the op where the ranks' values start to differ.
// It works in place: the forward nodes keep their order and are not copied.
Graph autodiff(Graph g, std::vector<GradInfo>* info);
Graph autodiff(Graph g);
// Marks every value replicated (identical on all ranks) or varying.
Graph replication(Graph g);

// The torch target's two programs (docs/torch.md): g as the frontend made it (grads not yet
// replaced) is differentiated as the *pullback program*, g with one more input per
// float output, its cotangent ("ct_y" for y), and as outputs the gradient of every
// float input ("grad_x" for x) of L = sum over ranks and float outputs of <y, ct_y>
// (each output counted once along the axes it is one loss along, below), each rank's
// inputs its own variables along the data-parallel axes (mode=sum, own=AXES: a shared
// input's gradient is this rank's part there). After autodiff it is split in two: `forward`, the values that do
// not depend on the cotangents, whose outputs are g's and then the values the pullback
// reads ("saved<k>_..."); and `pullback`, the rest, whose inputs are g's, the
// cotangents and those saved values. Both are after the grad and optimise pipelines.
// `pullback` is empty (no outputs) when there is no float input or output.
// The pullback program before autodiff: g, one input per float output (its cotangent,
// "ct_y"; their names into `cotangents`), and outputs grad_x with grad nodes (mode=sum,
// own=data_parallel), for every float input or, where `only` names some (emit --grad),
// for those. `gradc verify` checks it for a program with no grad of its own.
Graph pullback_program(Graph g, uint8_t data_parallel, std::set<std::string>& cotangents,
                       const std::set<std::string>& only = {});
// The same objective stated without own=: every input shared only along the axes not
// in `data_parallel` (it holds the same data), and grads without own=, so each input is
// its ranks' own variable along the data-parallel axes by the language's rules. verify's
// single-process reference of a pullback program is made from it.
Graph own_as_unshared(Graph g, uint8_t data_parallel);

struct Linearized {
  Graph forward, pullback;
  size_t outputs;  // the program's outputs: the first of forward's
};
// `data_parallel`: the mask of the axes along which each rank's loss and inputs are its
// own (emit --data-parallel); along the others every rank's copy of a replicated output
// is one loss, its cotangent is checked to be the same on those ranks (the cotangent
// input is shared along them), and an input replicated along them gets the total.
// `only`: the float inputs whose gradients the pullback gives (empty: all of them).
// `opt`: the options of the pipelines it runs (a class for any size folds small
// constants only: passes/pass.h, max_folded).
struct PipelineOptions;
Linearized linearize(Graph g, uint8_t data_parallel, const std::set<std::string>& only, const PipelineOptions& opt);

}  // namespace gradc
