// The language's composite builtins: functions of other ops, written as the math
// (ir/builder.h). The frontend (lower.cpp) checks a call's arguments, then builds its
// value here; every node is at the call's place (the builder's).
#pragma once
#include <utility>
#include <vector>

#include "ir/builder.h"

namespace gradc::composite {

// s with the reduced axes kept, as size 1.
Shape keep_shape(Shape s, const std::vector<int64_t>& axes);
// r, a reduction of a value of shape `in` over `axes`, with the axes kept (keepdims) or not.
ValueId finish_reduce(Builder& b, ValueId r, const Shape& in, const std::vector<int64_t>& axes, bool keep);

ValueId mean(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep);
ValueId logsumexp(Builder& b, ValueId x, const std::vector<int64_t>& axes, bool keep);
ValueId softmax(Builder& b, ValueId x, int axis);
ValueId log_softmax(Builder& b, ValueId x, int axis);
ValueId normalize(Builder& b, ValueId x, int axis, double eps);
// The first index among ties where x is greatest (least), or NaN.
ValueId arg_extremum(Builder& b, ValueId x, int axis, bool keep, bool max);
ValueId one_hot(Builder& b, ValueId labels, int64_t n);
// PyTorch's cross_entropy of logits [..., C] and labels [...] (checked, i32).
// With label_smoothing e, (1 - e) times that plus e / C times the same mean of the
// rows' -sum(log_softmax) (PyTorch's, ignored rows left out of both).
ValueId cross_entropy(Builder& b, ValueId logits, ValueId labels, int64_t ignore_index, double label_smoothing = 0);
ValueId layer_norm(Builder& b, ValueId x, const std::vector<int64_t>& axes, double eps);
ValueId rms_norm(Builder& b, ValueId x, const std::vector<int64_t>& axes, double eps);
ValueId dropout(Builder& b, ValueId x, double p, ValueId seed);
Ex silu(Ex x);
Ex softplus(Ex x, double beta = 1, double threshold = 20);
Ex logaddexp(Ex a, Ex b);
// PyTorch's logsigmoid: min(x, 0) - log1p(exp(-|x|)), which never overflows.
Ex log_sigmoid(Ex x);
// PyTorch's binary_cross_entropy_with_logits(x, target) (no weights, the mean):
// mean((1 - target) x - log_sigmoid(x)).
ValueId bce_with_logits(Builder& b, ValueId x, ValueId target);
// PyTorch's scaled_dot_product_attention (no dropout): softmax(q k^T * scale + bias) v,
// q [..., L, E], k [..., S, E], v [..., S, Ev]; `bias` (or -1: none) broadcasts to
// [..., L, S] (-inf where a key is masked). A row whose every score is -inf gives 0 and
// no gradient (PyTorch's _safe_softmax), not NaN.
ValueId attention(Builder& b, ValueId q, ValueId k, ValueId v, ValueId bias, double scale);
// [L, S]: 0 where col <= row (a query sees itself and the keys before it), else -inf.
ValueId causal_bias(Builder& b, int64_t rows, int64_t cols, DType dt);
// tril (upper false) and triu of the last two axes, diagonal k.
ValueId triangle(Builder& b, ValueId x, int64_t k, bool upper);
ValueId cumsum(Builder& b, ValueId x, int axis);
// PyTorch's gather and scatter_add (indices checked, src's shape), index_add (index i32[k]).
ValueId take_along_axis(Builder& b, ValueId x, ValueId indices, int axis);
ValueId scatter_add(Builder& b, ValueId x, ValueId indices, ValueId src, int axis);
ValueId index_add(Builder& b, ValueId x, ValueId index, ValueId src, int axis);
// Sorted along the last axis (stable, NaN the greatest): the first m values and their i32 indices.
std::pair<ValueId, ValueId> sort_last(Builder& b, ValueId x, int64_t m, bool descending);
Ex gelu(Ex x, bool tanh_approximation);

}  // namespace gradc::composite
