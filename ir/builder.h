// Building IR that reads like the math, as Halide's IROperator.h: an `Ex` is a value
// of the graph, a number, or an op on Exs, written with operators and named functions
// (`log(1.0 + exp(-abs(x)))`); a `Builder` adds an Ex's nodes to its graph. The
// frontend's composites, the derivative rules (passes/ad.h) and the tests use it.
//
// The nodes are added in the expression's own order, on every compiler: operands
// first, left to right, then the numbers (constants in the dtype of the value beside
// them), then the op; a sub-expression used twice is added once. (Nested calls that
// add nodes as they are evaluated would not be: C++ leaves the order of a call's
// arguments open, and GCC and clang differ.)
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "ir/graph.h"

namespace gradc {

class Builder;

namespace build {

class Ex {
 public:
  explicit Ex(ValueId v);  // explicit: a ValueId is an integer, never a number
  template <class T>
    requires std::is_floating_point_v<T>
  Ex(T k) : Ex(double(k), 0) {}  // a number, in the dtype of the value beside it (1.0 + x)
  Ex(Op op, std::vector<Ex> args, Attrs attrs = {});

 private:
  friend class gradc::Builder;
  Ex(double k, int);
  struct Rep {
    enum Kind : uint8_t { Value, Number, Apply } kind;
    Op op = Op::Const;
    ValueId value = -1;
    double k = 0;
    std::vector<Ex> args;
    Attrs attrs;
    mutable ValueId made = -1;                 // its value, once added
    mutable const Builder* made_by = nullptr;  // by this builder
  };
  std::shared_ptr<const Rep> r_;
};

Ex operator+(Ex a, Ex b);
Ex operator-(Ex a, Ex b);
Ex operator*(Ex a, Ex b);
Ex operator/(Ex a, Ex b);
Ex operator-(Ex a);
// Comparisons: 1 or 0, in the operands' float type.
Ex operator<(Ex a, Ex b);
Ex operator<=(Ex a, Ex b);
Ex operator>(Ex a, Ex b);
Ex operator>=(Ex a, Ex b);
Ex eq(Ex a, Ex b);
Ex ne(Ex a, Ex b);
Ex pow(Ex a, Ex b);
Ex maximum(Ex a, Ex b);
Ex minimum(Ex a, Ex b);
Ex where(Ex cond, Ex a, Ex b);
// Every unary op of ir/ops.def by its name: exp(x), log(x), abs(x), stop_gradient(x), ...
#define OP(E, name, arity, flags)
#define UNARY(E, f, flags) Ex f(Ex x);
#include "ir/ops.def"
#undef UNARY
#undef OP
Ex cast(Ex x, DType to);
Ex reduce_sum(Ex x, const std::vector<int64_t>& axes);
Ex reduce_max(Ex x, const std::vector<int64_t>& axes);
Ex reduce_min(Ex x, const std::vector<int64_t>& axes);
Ex reshape(Ex x, const Shape& s);
Ex broadcast_to(Ex x, const Shape& s);
Ex slice(Ex x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends);
Ex iota(int64_t n);  // 0, 1, ..., n-1 as i32
Ex rank();           // this rank's number, i32
Ex all_reduce(Ex x, Reduction op);

}  // namespace build

using build::Ex;

// Adds nodes to a graph: Exs with operator(), and single ops (a shape given as data,
// a value summed over a broadcast) with the named methods.
// What a node gets besides its op, operands and type (its location, whether it is
// part of a backward graph, its replication) is the subclass's: make() and
// make_constant().
class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  virtual ~Builder() = default;
  Builder(const Builder&) = delete;
  Builder& operator=(const Builder&) = delete;

  ValueId operator()(const Ex& e);  // e's nodes, in its order; its value
  Ex operator[](ValueId v) const { return Ex(v); }

  const Type& type(ValueId v) const { return g_.type(v); }
  Shape shape(ValueId v) const { return g_.type(v).shape; }  // a copy: adding nodes moves the graph
  DType dtype(ValueId v) const { return g_.type(v).dtype; }
  Graph& graph() { return g_; }

  ValueId emit(Op op, std::vector<ValueId> args, Attrs attrs = {}) {
    return make(op, std::move(args), std::move(attrs));
  }
  ValueId constant(const Type& t, double v) { return make_constant(t, v); }
  ValueId scalar(double v, DType dt) {  // broadcast by the ops that use it
    // an i32 one must be an i32 (the frontend refuses a number that is not; a composite
    // clamps or refuses its arguments first), never wrapped or truncated in silence
    GRADC_ASSERT(dt != DType::I32 || (v >= INT32_MIN && v <= INT32_MAX && v == std::trunc(v)), "{} is no i32", v);
    return constant(Type{dt, {}}, v);
  }
  ValueId zeros(const Type& t) { return constant(t, 0); }
  ValueId add(ValueId a, ValueId b) { return emit(Op::Add, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return emit(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return emit(Op::Div, {a, b}); }
  ValueId mul(ValueId a, double k) { return k == 1 ? a : mul(a, scalar(k, dtype(a))); }
  ValueId cmp(Op op, ValueId a, ValueId b) { return emit(op, {a, b}); }  // 1 or 0 in a's float type
  // These return their operand when there is nothing to do (the same dtype or shape, no axes).
  ValueId cast(ValueId a, DType dt);
  ValueId reshape(ValueId a, Shape s);  // shapes by value: adding nodes may move the graph
  ValueId broadcast(ValueId a, Shape s);
  ValueId transpose(ValueId a, const std::vector<int64_t>& perm);
  ValueId swap_last_two(ValueId a);  // a^T of a matrix, of each matrix of a batch
  ValueId slice(ValueId a, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends);
  ValueId pad(ValueId a, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi);
  ValueId reduce_sum(ValueId a, const std::vector<int64_t>& axes);
  // Sums a broadcast value back to `s` (the shape of the operand that was broadcast).
  ValueId sum_to(ValueId a, Shape s);

 protected:
  // A node of op on args, typed by its shape rule (emit() of ir/graph.h, by default
  // at no location); a constant node.
  virtual ValueId make(Op op, std::vector<ValueId> args, Attrs attrs);
  virtual ValueId make_constant(const Type& t, double v);

  Graph& g_;
};

}  // namespace gradc
