// Lowering a parsed .dg program to the IR: names resolved, `def`s inlined,
// composites (mean, softmax, cross_entropy, ...) expanded into IR ops, dtype
// promotion made explicit with casts, and every node's type inferred as it is
// made, so shape errors are reported at their source location.
#pragma once
#include "frontend/ast.h"
#include "ir/graph.h"

namespace gradc {

// `ranks` overrides the program's `world N` when non-zero; with neither the world is 1.
Graph lower_program(const ast::Program& p, int ranks = 0);

// The world a program declares (0 when it declares none).
int declared_world(const ast::Program& p);

}  // namespace gradc
