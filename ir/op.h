// The Op enum and its static facts, generated from ops.def.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace gradc {

enum OpFlags : uint32_t { ELEM = 1, COLL = 2, DIFF = 4, LEAF = 8 };

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

inline bool is_elementwise(Op op) { return op_flags(op) & ELEM; }
inline bool is_collective(Op op) { return op_flags(op) & COLL; }
inline bool is_differentiable(Op op) { return op_flags(op) & DIFF; }

}  // namespace gradc
