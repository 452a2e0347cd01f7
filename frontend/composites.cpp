#include "frontend/composites.h"

namespace gradc::composite {

using namespace build;

Shape keep_shape(Shape s, const std::vector<int64_t>& axes) {
  for (int64_t a : axes) s[size_t(a)] = 1;
  return s;
}

ValueId finish_reduce(Builder& b, ValueId r, const Shape& in, const std::vector<int64_t>& axes, bool keep) {
  return keep ? b.reshape(r, keep_shape(in, axes)) : r;
}

namespace {
int64_t count(const Shape& s, const std::vector<int64_t>& axes) {
  int64_t n = 1;
  for (int64_t a : axes) n *= s[size_t(a)];
  return n;
}
}  // namespace

// sum(x) / n
ValueId mean(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep) {
  const Shape s = b.shape(x);
  return finish_reduce(b, b(reduce_sum(b[x], axes) / double(count(s, axes))), s, axes, keep);
}

// m + log(sum(exp(x - m))), m = max(x). The shift by the maximum is for range only: its
// derivative cancels exactly, so it is a stop_gradient (as JAX's logsumexp): no
// gradient through the max, its ties and its mask in the backward graph.
ValueId logsumexp(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep) {
  const Shape s = b.shape(x);
  const Ex m = stop_gradient(reduce_max(b[x], axes));
  return finish_reduce(b, b(log(reduce_sum(exp(b[x] - reshape(m, keep_shape(s, axes))), axes)) + m), s, axes, keep);
}

// exp(x - max(x)) / sum(exp(x - max(x)))
ValueId softmax(Builder& b, ValueId x, int axis) {
  const Shape keep = keep_shape(b.shape(x), {axis});
  const Ex e = exp(b[x] - reshape(reduce_max(b[x], {axis}), keep));
  return b(e / reshape(reduce_sum(e, {axis}), keep));
}

// x - logsumexp(x)
ValueId log_softmax(Builder& b, ValueId x, int axis) { return b(b[x] - b[logsumexp(b, x, {axis}, true)]); }

// x / max(||x||, eps), as PyTorch's. The norm's derivative is 0 where it is 0 (as
// torch.norm's): sqrt(where(s > 0, s, 1)) * (s > 0), so a zero row's gradient is
// g / eps, finite, and not 0 * inf.
ValueId normalize(Builder& b, ValueId x, int axis, double eps) {
  const Ex X = b[x];
  const Ex s = reshape(reduce_sum(X * X, {axis}), keep_shape(b.shape(x), {axis}));
  const Ex some = cast(s > 0.0, b.dtype(x));
  return b(X / maximum(sqrt(where(some, s, 1.0)) * some, eps));
}

// The least index where x is extreme, or NaN (as PyTorch): min over where(hit, index, n).
ValueId arg_extremum(Builder& b, ValueId x, int axis, bool keep, bool max) {
  const Shape s = b.shape(x);
  const int64_t n = s[size_t(axis)];
  const Ex X = b[x];
  const Ex m = reshape(max ? reduce_max(X, {axis}) : reduce_min(X, {axis}), keep_shape(s, {axis}));
  Shape along(s.size(), 1);
  along[size_t(axis)] = n;
  const Ex hit = maximum(eq(X, m), ne(X, X));
  return finish_reduce(b, b(reduce_min(where(hit, reshape(iota(n), along), double(n)), {axis})), s, {axis}, keep);
}

// labels[..., None] == iota(n): float ones and zeros
ValueId one_hot(Builder& b, ValueId labels, int64_t n) {
  Shape s = b.shape(labels);
  s.push_back(1);
  return b(eq(reshape(b[labels], s), iota(n)));
}

// The mean over the rows whose label is not ignore_index of -log_softmax at the
// label. The label's entry is selected (a where, not a product with one_hot: a -inf
// logit elsewhere stays out).
ValueId cross_entropy(Builder& b, ValueId logits, ValueId labels, int64_t ignore_index) {
  const Type lt = b.type(logits);
  const int cls = lt.rank() - 1;
  std::vector<int64_t> rows;
  for (int64_t d = 0; d < cls; ++d) rows.push_back(d);
  // The count first: the rows' forward and backward then run as one row group after it.
  const ValueId kept = b(ne(b[labels], double(ignore_index)));
  // an ignored row selects no class, even when ignore_index is one (-1 is none)
  const bool a_class = ignore_index >= 0 && ignore_index < lt.shape.back();
  const ValueId hit = one_hot(b, a_class ? b(where(b[kept], b[labels], -1.0)) : labels, lt.shape.back());
  const Ex count = reduce_sum(cast(b[kept], lt.dtype), rows);  // 0 when every row is ignored: NaN, as PyTorch's
  b(count);
  const ValueId ls = log_softmax(b, logits, cls);
  return b(-(reduce_sum(reduce_sum(where(b[hit], b[ls], 0.0), {cls}), rows) / count));
}

// (x - mean(x)) / sqrt(var(x) + eps), the variance biased; no affine part, as PyTorch's functional form.
ValueId layer_norm(Builder& b, ValueId x, const std::vector<int64_t>& axes, double eps) {
  const Shape keep = keep_shape(b.shape(x), axes);
  const double n = double(count(b.shape(x), axes));
  auto mean_keep = [&](Ex v) { return reshape(reduce_sum(v, axes) / n, keep); };
  const ValueId d = b(b[x] - mean_keep(b[x]));
  const Ex D = b[d];
  return b(D * rsqrt(mean_keep(D * D) + eps));
}

// x / sqrt(mean(x^2) + eps)
ValueId rms_norm(Builder& b, ValueId x, const std::vector<int64_t>& axes, double eps) {
  const Shape keep = keep_shape(b.shape(x), axes);
  const double n = double(count(b.shape(x), axes));
  const Ex X = b[x];
  return b(X * rsqrt(reshape(reduce_sum(X * X, axes) / n, keep) + eps));
}

// where(rand(shape(x), seed) >= p, x / (1 - p), 0): rand's mask, the same on every backend
ValueId dropout(Builder& b, ValueId x, double p, ValueId seed) {
  Attrs a;
  a.set("shape", Attr::of_ints(b.shape(x)));
  const Ex r = cast(Ex(Op::Rand, {b[seed]}, a), b.dtype(x));
  return b(where(r >= p, b[x] / (1 - p), 0.0));
}

// x sigmoid(x)
Ex silu(Ex x) { return x * sigmoid(x); }
// log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), which never overflows
Ex softplus(Ex x) { return maximum(x, 0.0) + log(1.0 + exp(-abs(x))); }
// none: x/2 (1 + erf(x / sqrt(2))), PyTorch's default;
// tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
Ex gelu(Ex x, bool tanh_approximation) {
  const Ex inner = tanh_approximation ? tanh(0.79788456080286535588 * (x + 0.044715 * (x * x * x)))
                                      : erf(x * 0.70710678118654752440);
  return x * 0.5 * (1.0 + inner);
}

}  // namespace gradc::composite
