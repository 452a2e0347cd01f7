#include "ir/rules.h"
#include "passes/pass.h"

namespace gradc {

Graph infer_shapes(const Graph& g) {
  Graph out = g;
  for (Node& n : out.nodes) n.type = infer_type(out, n);
  return out;
}

}  // namespace gradc
