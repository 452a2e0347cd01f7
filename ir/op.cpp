#include "ir/op.h"

#include <string>
#include <unordered_map>

namespace gradc {
namespace {
struct OpInfo {
  std::string_view name;
  int arity;
  uint32_t flags;
};
constexpr OpInfo kOps[] = {
#define OP(E, name, arity, flags) {name, arity, flags},
#include "ops.def"
#undef OP
};
}  // namespace

std::string_view op_name(Op op) { return kOps[int(op)].name; }
int op_arity(Op op) { return kOps[int(op)].arity; }
uint32_t op_flags(Op op) { return kOps[int(op)].flags; }

std::optional<Op> op_by_name(std::string_view name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string_view, Op>();
    for (int i = 0; i < kNumOps; ++i) (*m)[kOps[i].name] = Op(i);
    return m;
  }();
  auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

}  // namespace gradc
