#include "ir/rules.h"
#include "passes/pass.h"

namespace gradc {

Graph infer_shapes(Graph g) {
  for (Node& n : g.nodes) n.type = infer_type(g, n);
  return g;
}

}  // namespace gradc
