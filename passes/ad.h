// The derivative rules' table, and the builder they use to add backward ops (a
// Builder, ir/builder.h: the rules write their math as expressions). Every node it
// makes is marked `backward`, typed by its shape rule, given its replication, and
// located at the forward op it differentiates.
#pragma once
#include <vector>

#include "ir/builder.h"
#include "ir/rules.h"

namespace gradc {

// The derivative (a vector-Jacobian product): given the cotangent `ct` of node
// `y`'s result, sets cts[i] to the cotangent of operand i for each operand the
// Ad context says is needed. One row per differentiable op (ops/<group>.cpp).
class Ad;
using VjpFn = void (*)(Ad& ad, ValueId y, ValueId ct, std::vector<ValueId>& cts);
OpTable<VjpFn>& derivatives();
// Whether gradients flow from n to its operand i: to every operand of a differentiable
// op but given_derivative's value and factors (the odd operands are its variables).
inline bool flows_to(const Node& n, size_t i) { return n.op != Op::GivenDerivative || i % 2 == 1; }

class Ad : public Builder {
 public:
  explicit Ad(Graph& g) : Builder(g) {}

  // The forward node being differentiated, and which operands need cotangents.
  void begin(ValueId y, const std::vector<bool>& need);
  const Node& y() const { return g_[y_]; }
  ValueId arg(size_t i) const { return g_[y_].args[i]; }
  bool needs(size_t i) const { return need_[i]; }
  bool replicated(ValueId v) const { return !g_[v].rep.varies(); }
  // Is v the same on every rank of each of the forward collective's groups?
  bool replicated_in_group(ValueId v) const;
  // Whether the gradient being built is differentiated again (grad of grad):
  // rules whose cheapest form is exact only to first order then use an exact one.
  bool higher_order() const { return higher_order_; }
  void set_higher_order(bool h) { higher_order_ = h; }
  // The ranks of the forward collective's groups (docs/language.md section 8): the world
  // without over=. The collectives and ranks a collective's rule makes run over its
  // groups too (make() gives them its `over`).
  int group_size() const;
  const Graph& graph() const { return g_; }
  ValueId collective(Op op, ValueId a, Attrs attrs) { return emit(op, {a}, std::move(attrs)); }

 protected:
  // Backward nodes, at the forward op's location, with their replication.
  ValueId make(Op op, std::vector<ValueId> args, Attrs attrs) override;
  ValueId make_constant(const Type& t, double v) override;

 public:
  // bf16 and f16 (docs/language.md, "Low precision"): the backward of one op computes
  // in f32 and rounds each cotangent once. While the rule of an op with such a result
  // or operand runs, the nodes it makes take f32 copies of their bf16 and f16
  // operands, and its constants are f32; a collective it makes sends the storage type
  // (and sums in f32). `cotangent` rounds a cotangent the rule gave to operand i's type.
  ValueId cotangent(size_t i, ValueId ct);
  // The rule is done: what follows (cotangents that meet, added in their type) is not its math.
  void end_rule() { low_ = DType::F32; }
  // How the derived reductions of bf16 and f16 cotangents sum: "f32", or "same" for
  // those of the type grad's reduce_dtype= names (docs/language.md, Low precision).
  void set_reduce_dtype(DType t) { reduce_dtype_ = t; }

 private:
  ValueId append(Op op, std::vector<ValueId> args, Attrs attrs);
  ValueId y_ = -1;
  bool higher_order_ = false;
  std::vector<bool> need_;
  DType low_ = DType::F32;                         // the op's storage type while its rule runs (f32: none)
  ValueId rule_start_ = 0;                         // the first node its rule made
  DType reduce_dtype_ = DType::F32;                // grad's reduce_dtype=
  std::vector<std::pair<ValueId, ValueId>> wide_;  // the f32 copies made for it
};

}  // namespace gradc
