#include "runtime/kernels.h"

#include "support/diag.h"

namespace gradc {

OpTable<KernelRule>& kernels() {
  static OpTable<KernelRule> t;
  return t;
}

namespace {
Tensor widened(const Tensor& t) { return is_low_precision(t.dtype()) ? t.cast(DType::F32) : t; }
// The node as its f32 op: its result type f32 where it is bf16 or f16.
Node in_f32(const Node& n) {
  Node w = n;
  if (is_low_precision(n.type->dtype)) w.type = Type{DType::F32, n.type->shape};
  return w;
}
}  // namespace

Tensor run_local(const Node& n, const Args& args, const EvalCtx& ctx) {
  LocalFn f = kernels()[n.op].local;
  GRADC_ASSERT(f, "{} has no kernel", op_name(n.op));
  bool low = is_low_precision(n.type->dtype);
  for (const Tensor* a : args) low |= is_low_precision(a->dtype());
  if (!low) return f(n, args, ctx);
  std::vector<Tensor> wide;
  wide.reserve(args.size());
  Args w;
  for (const Tensor* a : args) w.push_back(&wide.emplace_back(widened(*a)));
  return f(in_f32(n), w, ctx).cast(n.type->dtype);
}

std::vector<Tensor> run_collective_kernel(const Node& n, const std::vector<Tensor>& x) {
  CollectiveFn f = kernels()[n.op].collective;
  if (!is_low_precision(n.type->dtype) && (x.empty() || !is_low_precision(x[0].dtype()))) return f(n, x);
  std::vector<Tensor> wide;
  for (const Tensor& t : x) wide.push_back(widened(t));
  std::vector<Tensor> out = f(in_f32(n), wide);
  for (Tensor& t : out) t = t.cast(n.type->dtype);
  return out;
}

}  // namespace gradc
