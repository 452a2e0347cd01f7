// The rules of every op, registered under its Op enum: the shape rule, the
// reference interpreter's kernel and (for differentiable ops) the derivative.
// Each group of ops keeps all of its rules together in ir/ops/<group>.cpp.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"
#include "runtime/tensor.h"

namespace gradc {

struct EvalCtx {
  int rank = 0;
  int world = 1;
};
using Args = std::vector<const Tensor*>;

// Computes a node's result type from its operands and attributes, or throws
// UserError at the node's location.
using InferFn = Type (*)(const Graph& g, const Node& n);
// Evaluates a local op on one rank.
using LocalFn = Tensor (*)(const Node& n, const Args& args, const EvalCtx& ctx);
// Evaluates a collective: x[k] is rank k's operand; returns every rank's result.
using CollectiveFn = std::vector<Tensor> (*)(const Node& n, const std::vector<Tensor>& x);
// The derivative (a vector-Jacobian product): given the cotangent `ct` of node
// `y`'s result, sets cts[i] to the cotangent of operand i for each operand the
// Ad context says is needed (passes/ad.h has the builder the rules use).
class Ad;
using VjpFn = void (*)(Ad& ad, ValueId y, ValueId ct, std::vector<ValueId>& cts);
// Replication: is the result identical on every rank? (nullptr: replicated
// exactly when every operand is.)
using RepFn = Rep (*)(const Graph& g, const Node& n);

// How lowering (passes/lower_kernels.cpp) and the code generators treat an op:
//   Leaf    an input or constant, or computed from the element's index (rank, iota, rand)
//   Scalar  elementwise: its value per element is gradc::op::NAME (ir/scalar.h),
//           the function the interpreter's kernel calls too
//   View    index arithmetic on its operand (reshape, transpose, slice, pad, concat, broadcast_to)
//   Reduce  a reduction over axes, of a fused expression
//   Gemm    a BLAS call
//   Comm    a collective on buffers
//   Removed replaced by a pass before lowering (grad)
enum class KernelForm : uint8_t { None, Leaf, Scalar, View, Reduce, Gemm, Comm, Removed };

struct OpRule {
  InferFn infer = nullptr;
  LocalFn local = nullptr;            // every op but the collectives
  CollectiveFn collective = nullptr;  // the collectives
  VjpFn vjp = nullptr;                // every differentiable op
  RepFn rep = nullptr;
  KernelForm lower = KernelForm::None;  // every op
};

struct RuleTable {
  OpRule rules[kNumOps];
  OpRule& operator[](Op op) { return rules[int(op)]; }
};

const OpRule& rule(Op op);

// For tests that show a check can fail: replaces an op's rules while it lives.
class ScopedRuleOverride {
 public:
  ScopedRuleOverride(Op op, const OpRule& r);
  ~ScopedRuleOverride();
  ScopedRuleOverride(const ScopedRuleOverride&) = delete;
  ScopedRuleOverride& operator=(const ScopedRuleOverride&) = delete;

 private:
  Op op_;
  OpRule saved_;
};
Type infer_type(const Graph& g, const Node& n);
// The start-up self-check: one line for every op that lacks a rule it needs.
std::vector<std::string> missing_rules();

// Registration, one function per group file.
void register_leaf_ops(RuleTable& t);
void register_elementwise_ops(RuleTable& t);
void register_reduce_ops(RuleTable& t);
void register_shape_ops(RuleTable& t);
void register_collective_ops(RuleTable& t);
void register_grad_op(RuleTable& t);

// The replication of a node's result from its operands' (set on g's nodes).
Rep infer_rep(const Graph& g, const Node& n);

// Helpers shared by the shape rules.
const Type& arg_type(const Graph& g, const Node& n, size_t i);
// Normalises a possibly negative axis for a value of `t`; throws at `loc`,
// naming `what` (the op as the user wrote it), if it is out of range.
int norm_axis(Loc loc, std::string_view what, int64_t axis, const Type& t);
inline int norm_axis(const Node& n, int64_t axis, const Type& t) {
  return norm_axis(n.loc, op_name(n.op), axis, t);
}
// The names of a reduction op (`op=`): sum avg prod max min.
bool is_reduction_name(const std::string& s);

}  // namespace gradc
