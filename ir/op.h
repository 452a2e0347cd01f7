// The Op enum and its static facts, generated from ops.def.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gradc {

enum OpFlags : uint32_t { ELEM = 1, COLL = 2, DIFF = 4, LEAF = 8, FLOAT = 16, NAMED = 32 };

enum class Op : uint8_t {  // a byte: a node is one cache line (ir/graph.h)
#define OP(E, name, arity, flags) E,
#include "ops.def"
#undef OP
};
inline constexpr int kNumOps = 0
#define OP(E, name, arity, flags) +1
#include "ops.def"
#undef OP
    ;
static_assert(kNumOps <= 256);

std::string_view op_name(Op op);
int op_arity(Op op);  // -1: variadic
uint32_t op_flags(Op op);
std::optional<Op> op_by_name(std::string_view name);

// A table with one row per op, owned by the layer that reads it (ir/rules.h: shapes
// and replication; runtime/kernels.h: the interpreter's kernels; passes/ad.h:
// derivatives; passes/lower_kernels.h: kernel forms), as JAX's ad.py owns its
// primitive_jvps. ops/<group>.cpp fills in every table's row of an op in one block,
// when register_all() (ops/register.h) runs at the start of main.
template <class Row>
class OpTable {
 public:
  Row& operator[](Op op) { return rows_[size_t(op)]; }
  const Row& operator[](Op op) const { return rows_[size_t(op)]; }

 private:
  std::array<Row, size_t(kNumOps)> rows_{};
};

// For tests that show a check can fail: one op's row of a table replaced while it lives.
template <class Row>
class ScopedOverride {
 public:
  ScopedOverride(OpTable<Row>& t, Op op, Row r) : t_(t), op_(op), saved_(t[op]) { t[op] = r; }
  ~ScopedOverride() { t_[op_] = saved_; }
  ScopedOverride(const ScopedOverride&) = delete;
  ScopedOverride& operator=(const ScopedOverride&) = delete;

 private:
  OpTable<Row>& t_;
  Op op_;
  Row saved_;
};

inline bool is_elementwise(Op op) { return op_flags(op) & ELEM; }
inline bool is_collective(Op op) { return op_flags(op) & COLL; }
inline bool is_differentiable(Op op) { return op_flags(op) & DIFF; }
inline bool float_only(Op op) { return op_flags(op) & FLOAT; }  // operands must be float
inline bool named(Op op) { return op_flags(op) & NAMED; }       // the language calls it f(...)
// The op only moves or copies its operand's elements (an input, a view, take, a
// collective that reduces nothing): on bf16 or f16 values it rounds nothing, and they
// stay 16-bit through it (passes/low_precision.cpp).
inline bool moves_values(Op op) {
  switch (op) {
    case Op::Input:
    case Op::Reshape:
    case Op::Transpose:
    case Op::BroadcastTo:
    case Op::Concat:
    case Op::Slice:
    case Op::Take:
    case Op::AllGather:
    case Op::Broadcast:
    case Op::Gather:
    case Op::Scatter:
    case Op::AllToAll:
    case Op::Permute: return true;
    default: return false;
  }
}

}  // namespace gradc
