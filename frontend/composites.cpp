#include "frontend/composites.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

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

namespace {
// m + log(sum(exp(x - m))), m = max(x). The shift by the maximum is for range only: its
// derivative cancels exactly, so it is a stop_gradient (as JAX's logsumexp): no
// gradient through the max, its ties and its mask in the backward graph. Where
// `finite_shift`, an infinite maximum shifts by 0 instead (PyTorch's logsumexp: every x
// -inf gives -inf, an x +inf gives +inf); PyTorch's log_softmax does not (NaN there).
ValueId shifted_logsumexp(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep, bool finite_shift) {
  const Shape s = b.shape(x);
  Ex m = stop_gradient(reduce_max(b[x], axes));
  if (finite_shift) m = where(abs(m) < std::numeric_limits<double>::infinity(), m, 0.0);
  return finish_reduce(b, b(log(reduce_sum(exp(b[x] - reshape(m, keep_shape(s, axes))), axes)) + m), s, axes, keep);
}
}  // namespace

ValueId logsumexp(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep) {
  return shifted_logsumexp(b, x, axes, keep, true);
}

// exp(x - max(x)) / sum(exp(x - max(x)))
ValueId softmax(Builder& b, ValueId x, int axis) {
  const Shape keep = keep_shape(b.shape(x), {axis});
  const Ex e = exp(b[x] - reshape(reduce_max(b[x], {axis}), keep));
  return b(e / reshape(reduce_sum(e, {axis}), keep));
}

// x - logsumexp(x)
ValueId log_softmax(Builder& b, ValueId x, int axis) {
  return b(b[x] - b[shifted_logsumexp(b, x, {axis}, true, false)]);
}

// x / max(||x||, eps), as PyTorch's. The norm's derivative is 0 where it is 0 (as
// torch.norm's): sqrt(where(s != 0, s, 1)) * (s != 0), so a zero row's gradient is
// g / eps, finite, and not 0 * inf; a row with a NaN has a NaN norm (s != 0 holds for
// NaN, s > 0 would not), so it is NaN, not x / eps.
ValueId normalize(Builder& b, ValueId x, int axis, double eps) {
  const Ex X = b[x];
  const Ex s = reshape(reduce_sum(X * X, {axis}), keep_shape(b.shape(x), {axis}));
  const Ex some = cast(ne(s, 0.0), b.dtype(x));
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
ValueId cross_entropy(Builder& b, ValueId logits, ValueId labels, int64_t ignore_index, double label_smoothing) {
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
  const Ex nll = -(reduce_sum(reduce_sum(where(b[hit], b[ls], 0.0), {cls}), rows) / count);
  if (label_smoothing == 0) return b(nll);
  // every class's term, an ignored row's masked out (a -inf logit there gives no NaN)
  const Ex smooth = -(reduce_sum(where(b[kept], reduce_sum(b[ls], {cls}), 0.0), rows) / count);
  // / C last: a constant e / C would be no whole number nor one over one at every C, so no
  // class for any batch size could take it (codegen/any_size.cpp)
  return b(nll * (1 - label_smoothing) + smooth * label_smoothing / double(lt.shape.back()));
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
// and for every dtype of x: rand's f32 values compared with p in f32, as the formula reads
// (rounded to a bf16 x's dtype first, a value just under p would be kept).
ValueId dropout(Builder& b, ValueId x, double p, ValueId seed) {
  Attrs a;
  a.set("shape", Attr::of_ints(b.shape(x)));
  const Ex r(Op::Rand, {b[seed]}, a);
  return b(where(r >= p, b[x] / (1 - p), 0.0));
}

// The derivatives of the activations below are PyTorch's backward kernels' (aten's
// cpu/Activation.cpp, derivatives.yaml): one factor d(x), the cotangent g * d(x). As a
// sum of their ops' terms, an infinite cotangent (a loss that overflowed) would give
// inf - inf = NaN where PyTorch gives an infinity.
namespace {
// value, whose derivative with respect to each variable x is its factor d
Ex given_derivative(Ex value, std::initializer_list<std::pair<Ex, Ex>> x_and_d) {
  std::vector<Ex> args{value};
  for (const auto& [x, d] : x_and_d) args.insert(args.end(), {x, d});
  return Ex(Op::GivenDerivative, std::move(args));
}

// e = exp(-|x|), which never overflows, with -|x| written as a choice of x or -x (whose
// derivative at 0 is -1, not abs's 0); sigmoid(x) and sigmoid(-x) as e / (1 + e) or
// 1 / (1 + e) on the same sides of 0 as e's choice: the factors made of them have the
// function's own derivative at 0 too, so that a gradient differentiated again is the
// second derivative there. The value and its factor share e, one exponential and one
// pass over memory for both.
struct Sigmoids {
  Ex e, of_x, of_minus_x;
};
Sigmoids sigmoids(Ex x) {
  const Ex e = exp(where(x < 0.0, x, -x)), negative = x < 0.0;
  return {e, where(negative, e, 1.0) / (1.0 + e), where(negative, 1.0, e) / (1.0 + e)};
}
// log_sigmoid(x)'s value, min(x, 0) - log1p(exp(-|x|)), which never overflows
Ex log_sigmoid_value(Ex x, const Sigmoids& s) { return minimum(x, 0.0) - log1p(s.e); }
}  // namespace

// x sigmoid(x); derivative s (1 + x (1 - s)), s = sigmoid(x)
Ex silu(Ex x) {
  const Ex s = sigmoid(x);
  return given_derivative(x * s, {{x, s * (1.0 + x * (1.0 - s))}});
}
// PyTorch's: x where beta x > threshold, else log(1 + exp(beta x)) / beta, computed as
// (max(z, 0) + log1p(exp(-|z|))) / beta with z = beta x. Derivative 1 where z >
// threshold, else sigmoid(z): PyTorch's exp(z) / (exp(z) + 1), but where that
// exponential overflows (z > 88 in f32, below a threshold set above it: PyTorch's NaN,
// gradc's 1).
Ex softplus(Ex x, double beta, double threshold) {
  const Ex z = beta == 1 ? x : x * beta;
  const Sigmoids s = sigmoids(z);
  const Ex soft = maximum(z, 0.0) + log1p(s.e), above = z > threshold;
  return given_derivative(where(above, x, beta == 1 ? soft : soft / beta), {{x, where(above, 1.0, s.of_x)}});
}
// max(a, b) + log1p(exp(-|d|)), d = a - b taken as 0 at equal infinities (not inf -
// inf), which give themselves. Derivatives sigmoid(d) and sigmoid(-d), PyTorch's 1 / (1
// + exp(b - a)) and 1 / (1 + exp(a - b)): 1/2 to each at a tie (at equal infinities
// too, where PyTorch's is NaN).
Ex logaddexp(Ex a, Ex b) {
  const Ex infinite_tie = minimum(eq(a, b), eq(abs(a), std::numeric_limits<double>::infinity()));
  const Ex d = where(infinite_tie, 0.0, a - b);
  const Sigmoids s = sigmoids(d);
  return given_derivative(maximum(a, b) + log1p(s.e), {{a, s.of_x}, {b, s.of_minus_x}});
}
// min(x, 0) - log1p(exp(-|x|)); derivative sigmoid(-x), as PyTorch's log_sigmoid_backward
// computes it (1/2 at 0, 1 at -inf, 0 at inf).
Ex log_sigmoid(Ex x) {
  const Sigmoids s = sigmoids(x);
  return given_derivative(log_sigmoid_value(x, s), {{x, s.of_minus_x}});
}
// mean((1 - target) x - log_sigmoid(x)). Each term's derivatives: sigmoid(x) - target
// and -x (PyTorch's binary_cross_entropy_with_logits_backward and its target's).
ValueId bce_with_logits(Builder& b, ValueId x, ValueId target) {
  const Ex X = b[x], T = b[target];
  const Sigmoids s = sigmoids(X);
  const ValueId terms = b(given_derivative((1.0 - T) * X - log_sigmoid_value(X, s), {{X, s.of_x - T}, {T, -X}}));
  std::vector<int64_t> all;
  for (int64_t d = 0; d < int64_t(b.shape(x).size()); ++d) all.push_back(d);
  return mean(b, terms, all, false);
}

namespace {
Shape ones(size_t n) { return Shape(n, 1); }
// s with a 1 inserted before axis `at`.
Shape insert_one(Shape s, int at) {
  s.insert(s.begin() + at, 1);
  return s;
}
// iota(n) as the axis `at` of a value whose trailing `rank` axes it lines up with.
Ex iota_along(int64_t n, int at, int rank) {
  Shape s = ones(size_t(rank));
  s[size_t(at)] = n;
  return reshape(iota(n), s);
}
}  // namespace

ValueId causal_bias(Builder& b, int64_t rows, int64_t cols, DType dt) {
  const Ex diag = iota_along(cols, 1, 2) - iota_along(rows, 0, 2);
  return b(where(diag <= 0.0, b[b.scalar(0, dt)], -std::numeric_limits<double>::infinity()));
}

ValueId attention(Builder& b, ValueId q, ValueId k, ValueId v, ValueId bias, double scale) {
  Ex s = Ex(Op::Matmul, {b[q], b[b.swap_last_two(k)]}) * scale;
  if (bias >= 0) s = s + b[bias];
  const ValueId scores = b(s);
  const Shape shape = b.shape(scores);
  const int last = int(shape.size()) - 1;
  const Shape keep = keep_shape(shape, {last});
  // every key masked: the row's maximum is -inf (NaN is not, and stays NaN)
  const Ex none =
      stop_gradient(eq(reshape(reduce_max(b[scores], {last}), keep), -std::numeric_limits<double>::infinity()));
  const ValueId safe = b(where(none, 0.0, b[scores]));
  const ValueId p = b(where(none, 0.0, b[softmax(b, safe, last)]));
  return b.emit(Op::Matmul, {p, v});
}

// x where col - row <= k (tril) or >= k (triu) in its last two axes, else 0.
ValueId triangle(Builder& b, ValueId x, int64_t k, bool upper) {
  const Shape s = b.shape(x);
  const int64_t rows = s[s.size() - 2], cols = s.back();
  k = std::clamp<int64_t>(k, -rows, cols);  // col - row is in -(rows - 1)..cols - 1: any k beyond is one of these
  const Ex diag = iota_along(cols, 1, 2) - iota_along(rows, 0, 2);  // [rows, cols]: col - row
  return b(where(upper ? diag >= double(k) : diag <= double(k), b[x], 0.0));
}

// The running sum along the axis: one op, a loop down each column.
ValueId cumsum(Builder& b, ValueId x, int axis) {
  Attrs a;
  a.set("axis", Attr::of_int(axis));
  a.set("reverse", Attr::of_int(0));
  return b.emit(Op::Cumsum, {x}, a);
}

// x's elements at `indices` along `axis` (checked, i32, x's shape but along the axis):
// take from x flattened, at each element's own position with its index along the
// axis, a gather that the kernels fuse. (x of 2^31 elements or more: a reduction over
// a masked broadcast, which the kernels compute without making it.)
ValueId take_along_axis(Builder& b, ValueId x, ValueId indices, int axis) {
  const Shape xs = b.shape(x), is = b.shape(indices);
  const int rank = int(xs.size());
  if (num_elements(xs) >= (int64_t(1) << 31)) {
    const Ex hit = eq(reshape(b[indices], insert_one(is, axis + 1)), iota_along(xs[size_t(axis)], 0, rank - axis));
    return b(reduce_sum(where(hit, reshape(b[x], insert_one(xs, axis)), 0.0), {axis + 1}));
  }
  std::vector<double> stride(size_t(rank), 1);  // x's, in elements
  for (int d = rank - 2; d >= 0; --d) stride[size_t(d)] = stride[size_t(d) + 1] * double(xs[size_t(d) + 1]);
  Ex pos = stride[size_t(axis)] == 1 ? b[indices] : b[indices] * stride[size_t(axis)];
  for (int d = 0; d < rank; ++d)
    if (d != axis) pos = pos + iota_along(is[size_t(d)], d, rank) * stride[size_t(d)];
  Attrs a;
  a.set("axis", Attr::of_int(0));
  a.set("near", Attr::of_int(1));  // each position within its element's own row (codegen prefetches ahead)
  return b(Ex(Op::Take, {reshape(b[x], {num_elements(xs)}), pos}, a));
}

// x plus src's elements added at `indices` along `axis` (indices: src's shape; src: x's
// shape but along the axis): repeated indices accumulate, in order.
ValueId scatter_add(Builder& b, ValueId x, ValueId indices, ValueId src, int axis) {
  Attrs a;
  a.set("axis", Attr::of_int(axis));
  return b.emit(Op::ScatterAdd, {x, indices, src}, a);
}

// x plus src's slices added at index[i] along `axis` (index: i32[k]; src: x's shape
// with k along the axis): scatter_add with one index per slice.
ValueId index_add(Builder& b, ValueId x, ValueId index, ValueId src, int axis) {
  return scatter_add(b, x, index, src, axis);
}

// The first m of x sorted along its last axis, and their indices. Each element's place
// is the number of elements that go before it: smaller (greater when descending), NaN
// the greatest (as PyTorch's sort), or equal at a lower index (stable); the outputs
// select by place. n^2 comparisons a row, without making them: for the short axes of
// routers and top-k.
std::pair<ValueId, ValueId> sort_last(Builder& b, ValueId x, int64_t m, bool descending) {
  const Shape s = b.shape(x);
  const int r = int(s.size());
  const int64_t n = s.back();
  const Ex xi = reshape(b[x], insert_one(s, r)), xj = reshape(b[x], insert_one(s, r - 1));  // [..., i, 1], [..., 1, j]
  auto nan = [](Ex v) { return ne(v, v); };
  auto less = [&](Ex p, Ex q) { return maximum(p < q, nan(q) * (1.0 - nan(p))); };  // NaN the greatest
  const Ex first = descending ? less(xi, xj) : less(xj, xi);                        // x[j] goes before x[i]
  const Ex same = maximum(eq(xj, xi), nan(xj) * nan(xi));
  const Ex lower = cast(iota_along(n, 1, 2) < iota_along(n, 0, 2), float_of(b.dtype(x)));  // [i, j]: j < i
  // the count of elements before x[i], summed where it is exact: in bf16 a place past 256
  // would round (and f32 counts exactly to 2^24, f64 beyond)
  const DType count = is_low_precision(b.dtype(x)) ? DType::F32 : float_of(b.dtype(x));
  const ValueId place = b(cast(reduce_sum(cast(maximum(first, same * lower), count), {r}), DType::I32));  // [..., n]
  const Ex hit = eq(reshape(b[place], insert_one(s, r - 1)), iota_along(m, 0, 2));                        // [..., m, n]
  const ValueId values = b(reduce_sum(where(hit, xj, 0.0), {r}));
  const ValueId indices = b(reduce_sum(where(hit, iota_along(n, 1, 2), 0.0), {r}));
  return {values, indices};
}

// none: x/2 (1 + erf(x / sqrt(2))), PyTorch's default;
// tanh: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Derivatives as PyTorch's GeluBackward: none: cdf + x pdf, cdf = (1 + erf(x / sqrt(2))) / 2,
// pdf = exp(-x^2 / 2) / sqrt(2 pi); tanh: (1 + t) / 2 + (x / 2) (1 - t^2) sqrt(2/pi) (1 + 3
// 0.044715 x^2), t the tanh.
Ex gelu(Ex x, bool tanh_approximation) {
  if (tanh_approximation) {
    const Ex t = tanh(0.79788456080286535588 * (x + 0.044715 * (x * x * x)));
    const Ex inner_derivative = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * (x * x));
    return given_derivative(x * 0.5 * (1.0 + t), {{x, 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * inner_derivative}});
  }
  const Ex inner = erf(x * 0.70710678118654752440);
  const Ex cdf = 0.5 * (1.0 + inner), pdf = 0.39894228040143267794 * exp(x * x * -0.5);
  return given_derivative(x * 0.5 * (1.0 + inner), {{x, cdf + x * pdf}});
}

}  // namespace gradc::composite
