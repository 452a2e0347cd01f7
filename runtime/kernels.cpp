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
  const std::string how = n.attrs.has("op") ? n.attr_sym("op") : "";
  if (n.attrs.has("accum") && n.attr_sym("accum") == "same" && (how == "sum" || how == "avg" || how == "prod")) {
    // accum=same: the storage type's own arithmetic, as a transport that sums in it: the
    // ranks' values combined in rank order, each partial result rounded. The collective
    // then runs on that total in rank 0's place and the identity elsewhere.
    const DType t = n.type->dtype;
    Tensor total = wide[0].cast(DType::F32);
    float* acc = total.data<float>();
    for (size_t k = 1; k < wide.size(); ++k) {
      const float* v = wide[k].data<float>();
      for (int64_t i = 0; i < total.size(); ++i)
        acc[i] = low_value(t, low_bits(t, how == "prod" ? acc[i] * v[i] : acc[i] + v[i]));
    }
    const Tensor identity = Tensor::from(total.type, {how == "prod" ? 1.0 : 0.0});
    for (size_t k = 0; k < wide.size(); ++k) wide[k] = k == 0 ? total : identity;
  }
  std::vector<Tensor> out = f(in_f32(n), wide);
  for (Tensor& t : out) t = t.cast(n.type->dtype);
  return out;
}

}  // namespace gradc
