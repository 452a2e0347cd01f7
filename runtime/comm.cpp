#include "runtime/comm.h"

#include "support/diag.h"

namespace gradc::comm {

Tensor reduce_all(const PerRank& x, ReduceOp op) {
  Tensor acc = x[0].cast(x[0].dtype());  // a copy
  Combine how = op == ReduceOp::Prod  ? Combine::Prod
                : op == ReduceOp::Max ? Combine::Max
                : op == ReduceOp::Min ? Combine::Min
                                      : Combine::Sum;
  for (size_t k = 1; k < x.size(); ++k) combine_into(acc, x[k], how);
  if (op == ReduceOp::Avg) {
    dispatch(acc.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* p = acc.data<T>();
      for (int64_t i = 0; i < acc.size(); ++i) p[i] = T(p[i] / T(x.size()));
    });
  }
  return acc;
}

PerRank all_reduce(const PerRank& x, ReduceOp op) {
  return PerRank(x.size(), reduce_all(x, op));  // every rank holds the same (immutable) value
}

PerRank all_gather(const PerRank& x, int axis) {
  std::vector<const Tensor*> parts;
  for (const Tensor& t : x) parts.push_back(&t);
  return PerRank(x.size(), concat(parts, axis));
}

PerRank reduce_scatter(const PerRank& x, int axis, ReduceOp op) {
  Tensor total = reduce_all(x, op);
  PerRank y;
  for (size_t r = 0; r < x.size(); ++r) y.push_back(block(total, axis, int64_t(r), int64_t(x.size())));
  return y;
}

PerRank broadcast(const PerRank& x, int root) { return PerRank(x.size(), x[size_t(root)]); }

PerRank reduce(const PerRank& x, int root, ReduceOp op) {
  PerRank y(x.size(), Tensor::zeros(x[0].type));
  y[size_t(root)] = reduce_all(x, op);
  return y;
}

PerRank gather(const PerRank& x, int root, int axis) {
  PerRank all = all_gather(x, axis);
  PerRank y(x.size(), Tensor::zeros(all[0].type));
  y[size_t(root)] = all[size_t(root)];
  return y;
}

PerRank scatter(const PerRank& x, int root, int axis) {
  PerRank y;
  for (size_t r = 0; r < x.size(); ++r) y.push_back(block(x[size_t(root)], axis, int64_t(r), int64_t(x.size())));
  return y;
}

PerRank all_to_all(const PerRank& x, int split_axis, int concat_axis) {
  const int64_t n = int64_t(x.size());
  PerRank y;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<Tensor> blocks;
    for (int64_t k = 0; k < n; ++k) blocks.push_back(block(x[size_t(k)], split_axis, r, n));
    std::vector<const Tensor*> parts;
    for (const Tensor& b : blocks) parts.push_back(&b);
    y.push_back(concat(parts, concat_axis));
  }
  return y;
}

PerRank permute(const PerRank& x, const Pairs& pairs) {
  PerRank y(x.size(), Tensor::zeros(x[0].type));
  for (const auto& p : pairs) y[size_t(p[1])] = x[size_t(p[0])];
  return y;
}

}  // namespace gradc::comm
