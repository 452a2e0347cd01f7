// Writing an op's rules: each ops/<group>.cpp defines its ops' rules (shape, replication,
// view map, interpreter kernel, derivative, kernel form) and registers them in one block per op,
// each into the table of the layer that reads it:
//   def(Op::Exp).infer(infer_unary).eval(eval_unary).vjp(vjp_exp).form(KernelForm::Scalar);
#pragma once
#include "ir/mesh.h"
#include "ir/rules.h"
#include "ir/view.h"
#include "passes/ad.h"
#include "passes/lower_kernels.h"
#include "runtime/kernels.h"

namespace gradc {

class OpDef {
 public:
  explicit OpDef(Op op) : op_(op) {}
  const OpDef& infer(InferFn f) const { return shape_rules()[op_].infer = f, *this; }
  const OpDef& rep(RepFn f) const { return shape_rules()[op_].rep = f, *this; }
  const OpDef& view(ViewFn f) const { return view_maps()[op_] = f, *this; }
  const OpDef& eval(LocalFn f) const { return kernels()[op_].local = f, *this; }
  const OpDef& collective(CollectiveFn f) const { return kernels()[op_].collective = f, *this; }
  const OpDef& vjp(VjpFn f) const { return derivatives()[op_] = f, *this; }
  const OpDef& form(KernelForm k) const { return kernel_forms()[op_] = k, *this; }
  const OpDef& cheap(bool is = true) const { return cheap_scalars()[op_] = is, *this; }  // recomputed where read

 private:
  Op op_;
};
inline OpDef def(Op op) { return OpDef(op); }

// One function per group file, called by register_all() (ops/register.h).
void register_leaf_ops();
void register_elementwise_ops();
void register_reduce_ops();
void register_shape_ops();
void register_axis_ops();
void register_collective_ops();
void register_grad_op();

}  // namespace gradc
