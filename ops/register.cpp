#include "ops/register.h"

#include <fmt/format.h>

#include <mutex>

#include "codegen/cpp.h"
#include "ir/collectives.h"
#include "ops/ops.h"
#include "passes/cost.h"

namespace gradc {

void register_all() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_leaf_ops();
    register_elementwise_ops();
    register_reduce_ops();
    register_shape_ops();
    register_axis_ops();
    register_collective_ops();
    register_grad_op();
  });
}

std::vector<std::string> missing_rules() {
  std::vector<std::string> out;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    if (!shape_rules()[op].infer) out.push_back(fmt::format("{}: no shape rule", op_name(op)));
    if (kernel_forms()[op] == KernelForm::None)
      out.push_back(fmt::format("{}: no lowering (kernel form)", op_name(op)));
    if (kernel_forms()[op] == KernelForm::Removed) continue;  // replaced by the autodiff pass before any backend
    if (is_collective(op) && !kernels()[op].collective)
      out.push_back(fmt::format("{}: no collective kernel", op_name(op)));
    if (kernel_forms()[op] == KernelForm::Loop && !runtime_calls()[op].fn)
      out.push_back(fmt::format("{}: no runtime call (a Loop kernel)", op_name(op)));
    if (is_collective(op) && (!collective_rules()[op].routing || !bytes_sent()[op] || !runtime_calls()[op].fn))
      out.push_back(fmt::format("{}: no routing, byte count or runtime call (ops/collective.cpp)", op_name(op)));
    if (!is_collective(op) && !kernels()[op].local)
      out.push_back(fmt::format("{}: no interpreter kernel", op_name(op)));
    if (is_differentiable(op) && !derivatives()[op]) out.push_back(fmt::format("{}: no derivative rule", op_name(op)));
  }
  return out;
}

}  // namespace gradc
