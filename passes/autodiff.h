// The autodiff pass and the replication analysis.
#pragma once
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
// float input ("grad_x" for x) of L = sum over ranks and float outputs of <y, ct_y>,
// each rank's inputs its own variables (mode=sum, own=1: a shared input's gradient is
// this rank's part). After autodiff it is split in two: `forward`, the values that do
// not depend on the cotangents, whose outputs are g's and then the values the pullback
// reads ("saved<k>_..."); and `pullback`, the rest, whose inputs are g's, the
// cotangents and those saved values. Both are after the grad and optimise pipelines.
// `pullback` is empty (no outputs) when there is no float input or output.
struct Linearized {
  Graph forward, pullback;
  size_t outputs;  // the program's outputs: the first of forward's
};
Linearized linearize(Graph g);

}  // namespace gradc
