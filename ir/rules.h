// The IR's rules of every op: its shape rule and its replication, in tables that
// ops/<group>.cpp fills in (each op's rules of every layer in one block there).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

// Computes a node's result type from its operands and attributes, or throws
// UserError at the node's location.
using InferFn = Type (*)(const Graph& g, const Node& n);
// Replication: is the result identical on every rank? (nullptr: replicated
// exactly when every operand is.)
using RepFn = Rep (*)(const Graph& g, const Node& n);

struct ShapeRule {
  InferFn infer = nullptr;  // every op
  RepFn rep = nullptr;
};
OpTable<ShapeRule>& shape_rules();

Type infer_type(const Graph& g, const Node& n);
// The replication of a node's result from its operands' (set on g's nodes).
Rep infer_rep(const Graph& g, const Node& n);

// Helpers shared by the shape rules.
const Type& arg_type(const Graph& g, const Node& n, size_t i);
// Normalises a possibly negative axis for a value of `t`; throws at `loc`,
// naming `what` (the op as the user wrote it), if it is out of range.
int norm_axis(Loc loc, std::string_view what, int64_t axis, const Type& t);
inline int norm_axis(const Node& n, int64_t axis, const Type& t) { return norm_axis(n.loc, op_name(n.op), axis, t); }

}  // namespace gradc
