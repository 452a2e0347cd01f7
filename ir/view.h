// A view op's index arithmetic, written once: which operand element each output
// element is. The interpreter turns a map into strides over each operand
// (runtime/tensor.h's view()); the code generator writes it as C++ index
// expressions on the output's index (codegen/cpp.cpp). Each view op's block in
// ops/shape.cpp registers its map; the collectives' kernels build theirs here too.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace gradc {

// Operand axis d is read at the output index's axis `from`, plus `offset`
// (from < 0: at 0, a broadcast axis of size 1).
struct ViewAxis {
  int from = -1;
  int64_t offset = 0;
};

// One operand read over a box of the output: [lo, hi) on each output axis (empty:
// all of it). The boxes of a map's reads do not overlap, and where several read,
// they tile one axis in order (concat).
struct ViewRead {
  size_t operand = 0;
  std::vector<ViewAxis> axes;  // one per operand axis
  std::vector<int64_t> lo, hi;
  bool whole() const { return lo.empty(); }
};

struct ViewMap {
  bool flat = false;            // reshape: the output's element i is operand 0's element i (row-major)
  std::vector<ViewRead> reads;  // elsewhere: an output element no read covers is 0
};

// A view op's map from its node (attributes, result type) and its operands' shapes.
using ViewFn = ViewMap (*)(const Node& n, const std::vector<Shape>& in);
OpTable<ViewFn>& view_maps();

// The maps, one function per kind of view.
std::vector<ViewAxis> broadcast_axes(const Shape& from, const Shape& to);  // NumPy: leading axes new, size 1 at 0
ViewMap reshape_view();
ViewMap broadcast_view(const Shape& from, const Shape& to);
ViewMap transpose_view(const std::vector<int64_t>& perm);
ViewMap slice_view(const std::vector<int64_t>& starts);
ViewMap pad_view(const Shape& in, const std::vector<int64_t>& lo);
ViewMap concat_view(const std::vector<Shape>& in, int axis);

}  // namespace gradc
