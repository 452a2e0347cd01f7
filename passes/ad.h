// The derivative rules' table, and the builder they use to emit backward ops. Every
// node it makes is marked `backward`, typed by its shape rule, given its replication,
// and located at the forward op it differentiates.
#pragma once
#include <vector>

#include "ir/rules.h"

namespace gradc {

// The derivative (a vector-Jacobian product): given the cotangent `ct` of node
// `y`'s result, sets cts[i] to the cotangent of operand i for each operand the
// Ad context says is needed. One row per differentiable op (ops/<group>.cpp).
class Ad;
using VjpFn = void (*)(Ad& ad, ValueId y, ValueId ct, std::vector<ValueId>& cts);
OpTable<VjpFn>& derivatives();

class Ad {
 public:
  Ad(Graph& g) : g_(g) {}

  // The forward node being differentiated, and which operands need cotangents.
  void begin(ValueId y, const std::vector<bool>& need);
  const Node& y() const { return g_[y_]; }
  ValueId arg(size_t i) const { return g_[y_].args[i]; }
  bool needs(size_t i) const { return need_[i]; }
  const Type& type(ValueId v) const { return g_.type(v); }
  Shape shape(ValueId v) const { return g_.type(v).shape; }  // a copy, for the same reason
  DType dtype(ValueId v) const { return g_.type(v).dtype; }
  bool replicated(ValueId v) const { return g_[v].rep == Rep::Replicated; }
  // Whether the gradient being built is differentiated again (grad of grad):
  // rules whose cheapest form is exact only to first order then use an exact one.
  bool higher_order() const { return higher_order_; }
  void set_higher_order(bool h) { higher_order_ = h; }
  int world() const { return g_.world; }
  Graph& graph() { return g_; }

  ValueId emit(Op op, std::vector<ValueId> args, Attrs attrs = {});
  ValueId constant(const Type& t, double v);
  ValueId scalar(double v, DType dt) { return constant(Type{dt, {}}, v); }  // broadcast by the ops that use it
  ValueId zeros(const Type& t) { return constant(t, 0); }
  ValueId add(ValueId a, ValueId b) { return emit(Op::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return emit(Op::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return emit(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return emit(Op::Div, {a, b}); }
  ValueId neg(ValueId a) { return emit(Op::Neg, {a}); }
  ValueId mul(ValueId a, double k) { return k == 1 ? a : mul(a, scalar(k, dtype(a))); }
  ValueId unary(Op op, ValueId a) { return emit(op, {a}); }
  ValueId cmp(Op op, ValueId a, ValueId b) { return emit(op, {a, b}); }  // 1 or 0 in a's float type
  ValueId where(ValueId c, ValueId a, ValueId b) { return emit(Op::Where, {c, a, b}); }
  ValueId cast(ValueId a, DType dt);
  ValueId reshape(ValueId a, Shape s);  // shapes by value: emitting may move the nodes
  ValueId broadcast(ValueId a, Shape s);
  ValueId transpose(ValueId a, const std::vector<int64_t>& perm);
  ValueId slice(ValueId a, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends);
  ValueId pad(ValueId a, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi);
  ValueId reduce_sum(ValueId a, const std::vector<int64_t>& axes);
  // Sums a broadcast cotangent back to `s` (the shape of the operand that was broadcast).
  ValueId sum_to(ValueId a, Shape s);
  ValueId collective(Op op, ValueId a, Attrs attrs);

 private:
  Graph& g_;
  ValueId y_ = -1;
  bool higher_order_ = false;
  std::vector<bool> need_;
};

}  // namespace gradc
