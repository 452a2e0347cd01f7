// Lowering a parsed .dg program to the IR: names resolved, `def`s inlined,
// composites (mean, softmax, cross_entropy, ...) expanded into IR ops, dtype
// promotion made explicit with casts, and every node's type inferred as it is
// made, so shape errors are reported at their source location.
#pragma once
#include "frontend/ast.h"
#include "ir/graph.h"

namespace gradc {

struct LowerOptions {
  int ranks = 0;     // overrides the program's `world N` when non-zero; with neither the world is 1
  bool f64 = false;  // every f32 becomes f64 (literals, declarations, creation ops): for gradient checks
  std::vector<std::pair<std::string, int>> mesh = {};  // --mesh=dp=4,tp=2: the declared axes' sizes, in order
  // --size B=32 (or an input file's shape): values for the program's `size` parameters
  // (docs/language.md section 3); one not given takes its default.
  std::vector<std::pair<std::string, int64_t>> sizes = {};
};
Graph lower_program(const ast::Program& p, const LowerOptions& opt);
inline Graph lower_program(const ast::Program& p, int ranks = 0) { return lower_program(p, LowerOptions{ranks}); }

// The world a program declares (0 when it declares none).
int declared_world(const ast::Program& p);
// The mesh it declares (no axes when none).
Mesh declared_mesh(const ast::Program& p);
// The size parameters it declares (`size B = 8`), in order.
std::vector<std::string> declared_sizes(const ast::Program& p);
// The largest value a size parameter takes: it is an i32 wherever the program uses it as a value.
inline constexpr int64_t kMaxSize = 2147483647;

// What to write instead of a method call `x.NAME(...)`, for the lexer's error: a
// function gradc has (sum(x)), the gradc spelling of a PyTorch or NumPy name
// (torch.cat: concat([a, b], axis=0)), or that there is none.
std::string method_advice(const std::string& name);

}  // namespace gradc
