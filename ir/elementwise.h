// An elementwise op's scalar function, chosen by its ops.def row: the one place that
// maps a UNARY, BINARY or COMPARE row to gradc::op::name (ir/scalar.h). The
// interpreter's kernels (ops/elementwise.cpp) and the frontend's folding of literal
// operands (frontend/lower.cpp) both call it, so an op cannot fold differently from
// how it runs; the generated code calls gradc::op::name by the row's name.
#pragma once
#include "ir/op.h"
#include "ir/scalar.h"
#include "support/diag.h"

namespace gradc {

// Calls body(f) with the scalar function of a unary op on T, so that each op runs its
// own tight loop (the switch is outside the loop, never per element).
template <class T, class Body>
void with_unary(Op op, Body&& body) {
  switch (op) {
#define OP(E, name, arity, flags)
#define UNARY(E, f, flags) \
  case Op::E: return body([](T x) { return op::f(x); });
#include "ir/ops.def"
#undef UNARY
#undef OP
    default: break;
  }
  GRADC_ASSERT(false, "{} is not unary", op_name(op));
}

// The same for a binary op on T; a comparison gives T here (1 or 0), which the caller
// converts to the result's float type.
template <class T, class Body>
void with_binary(Op op, Body&& body) {
  switch (op) {
#define OP(E, name, arity, flags)
#define BINARY(E, f, flags) \
  case Op::E: return body([](T a, T b) { return op::f(a, b); });
#define COMPARE(E, f, flags) \
  case Op::E: return body([](T a, T b) { return op::f<T>(a, b); });
#include "ir/ops.def"
#undef COMPARE
#undef BINARY
#undef OP
    default: break;
  }
  GRADC_ASSERT(false, "{} is not binary", op_name(op));
}

// A COMPARE row: 1 or 0 in its operands' float type (float_of).
inline bool is_comparison(Op op) {
  switch (op) {
#define OP(E, name, arity, flags)
#define COMPARE(E, f, flags) case Op::E:
#include "ir/ops.def"
#undef COMPARE
#undef OP
    return true;
    default: return false;
  }
}

}  // namespace gradc
