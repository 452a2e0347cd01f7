// Shape and data-movement ops, and matmul.
#include <cblas.h>

#include <algorithm>

#include "ops/ops.h"
#include "runtime/blas_kernels.h"

namespace gradc {
namespace {

Shape shape_attr(const Node& n, const char* key) {
  Shape s = n.attr_ints(key);
  for (int64_t d : s)
    if (d < 0) user_error(n.loc, "{}: negative dimension {} in {}", op_name(n.op), d, shape_str(s));
  return s;
}

// ---- reshape ------------------------------------------------------------
Type infer_reshape(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  Shape s = shape_attr(n, "shape");
  if (num_elements(s) != x.size())
    user_error(n.loc, "reshape: cannot reshape {} ({} elements) to {}", type_str(x), x.size(), shape_str(s));
  return Type{x.dtype, s};
}
ViewMap view_reshape(const Node&, const std::vector<Shape>&) { return reshape_view(); }

// ---- transpose ----------------------------------------------------------
Type infer_transpose(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (int(perm.size()) != x.rank())
    user_error(n.loc, "transpose: permutation {} has {} axes, {} has {}", shape_str(perm), perm.size(), type_str(x),
               x.rank());
  std::vector<bool> seen(perm.size(), false);
  Type out{x.dtype, {}};
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[size_t(p)])
      user_error(n.loc, "transpose: {} is not a permutation of 0..{}", shape_str(perm), x.rank() - 1);
    seen[size_t(p)] = true;
    out.shape.push_back(x.shape[size_t(p)]);
  }
  return out;
}
ViewMap view_transpose(const Node& n, const std::vector<Shape>&) { return transpose_view(n.attr_ints("perm")); }

// ---- broadcast_to -------------------------------------------------------
Type infer_broadcast_to(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  Shape s = shape_attr(n, "shape");
  if (!broadcasts_to(x.shape, s))
    user_error(n.loc, "broadcast_to: cannot broadcast {} to {}", type_str(x), shape_str(s));
  return Type{x.dtype, s};
}
ViewMap view_broadcast_to(const Node& n, const std::vector<Shape>& in) { return broadcast_view(in[0], n.type->shape); }

// ---- concat -------------------------------------------------------------
Type infer_concat(const Graph& g, const Node& n) {
  if (n.args.empty()) user_error(n.loc, "concat: needs at least one operand");
  Type out = arg_type(g, n, 0);
  int axis = norm_axis(n, n.attr_int("axis"), out);
  for (size_t i = 1; i < n.args.size(); ++i) {
    const Type& t = arg_type(g, n, i);
    bool ok = t.dtype == out.dtype && t.rank() == out.rank();
    for (int d = 0; ok && d < t.rank(); ++d) ok = d == axis || t.shape[size_t(d)] == out.shape[size_t(d)];
    if (!ok)
      user_error(n.loc, "concat: {} and {} do not fit together along axis {}", type_str(arg_type(g, n, 0)), type_str(t),
                 axis);
    out.shape[size_t(axis)] += t.shape[size_t(axis)];
  }
  return out;
}
ViewMap view_concat(const Node& n, const std::vector<Shape>& in) {
  return concat_view(in, norm_axis(n, n.attr_int("axis"), *n.type));
}

// ---- slice and pad --------------------------------------------------------
Type infer_slice(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  std::vector<int64_t> starts = n.attr_ints("starts"), ends = n.attr_ints("ends");
  if (int(starts.size()) != x.rank() || int(ends.size()) != x.rank())
    user_error(n.loc, "slice: needs {} starts and ends for {}", x.rank(), type_str(x));
  Type out{x.dtype, {}};
  for (size_t d = 0; d < starts.size(); ++d) {
    if (starts[d] < 0 || ends[d] > x.shape[d] || starts[d] > ends[d])
      user_error(n.loc, "slice: {}:{} is out of range for axis {} of {}", starts[d], ends[d], d, type_str(x));
    out.shape.push_back(ends[d] - starts[d]);
  }
  return out;
}
ViewMap view_slice(const Node& n, const std::vector<Shape>&) { return slice_view(n.attr_ints("starts")); }

Type infer_pad(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  std::vector<int64_t> lo = n.attr_ints("lo"), hi = n.attr_ints("hi");
  if (int(lo.size()) != x.rank() || int(hi.size()) != x.rank())
    user_error(n.loc, "pad: needs {} lo and hi widths for {}", x.rank(), type_str(x));
  Type out = x;
  for (size_t d = 0; d < lo.size(); ++d) {
    if (lo[d] < 0 || hi[d] < 0) user_error(n.loc, "pad: negative width on axis {}", d);
    out.shape[d] += lo[d] + hi[d];
  }
  return out;
}
ViewMap view_pad(const Node& n, const std::vector<Shape>& in) { return pad_view(in[0], n.attr_ints("lo")); }

// Every view's interpreter kernel: its map (registered below) read with strides.
Tensor eval_view(const Node& n, const Args& a, const EvalCtx&) {
  std::vector<Shape> in;
  for (const Tensor* x : a) in.push_back(x->shape());
  return view(view_maps()[n.op](n, in), a, *n.type);
}

// ---- matmul: [..., m, k] x [..., k, n], batch axes broadcast -------------
Type infer_matmul(const Graph& g, const Node& n) {
  const Type& a = arg_type(g, n, 0);
  const Type& b = arg_type(g, n, 1);
  if (a.rank() < 2 || b.rank() < 2)
    user_error(n.loc, "matmul: operands must have at least 2 axes, got {} and {}", type_str(a), type_str(b));
  if (a.dtype != b.dtype)
    user_error(n.loc, "matmul: operands have different dtypes {} and {}", dtype_name(a.dtype), dtype_name(b.dtype));
  int64_t k1 = a.shape[size_t(a.rank() - 1)], k2 = b.shape[size_t(b.rank() - 2)];
  if (k1 != k2) user_error(n.loc, "matmul: inner dimensions differ: {} and {}", type_str(a), type_str(b));
  bool ok;
  Shape batch =
      broadcast_shapes(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2), &ok);
  if (!ok) user_error(n.loc, "matmul: batch axes of {} and {} do not broadcast", type_str(a), type_str(b));
  batch.push_back(a.shape[size_t(a.rank() - 2)]);
  batch.push_back(b.shape[size_t(b.rank() - 1)]);
  return Type{a.dtype, batch};
}

template <class T>
void gemm(int64_t m, int64_t n, int64_t k, const T* a, const T* b, T* c) {
  choose_blas_kernels();  // done at gradc's start (tools/gradc.cpp); a no-op here
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, a, int(k), b, int(n), 0.0f, c,
                int(n));
  } else if constexpr (std::is_same_v<T, double>) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, a, int(k), b, int(n), 0.0, c,
                int(n));
  } else {  // i32: no BLAS routine exists
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T s = 0;
        for (int64_t p = 0; p < k; ++p) s += a[i * k + p] * b[p * n + j];
        c[i * n + j] = s;
      }
  }
}

Tensor eval_matmul(const Node& nd, const Args& args, const EvalCtx&) {
  const Tensor& a = *args[0];
  const Tensor& b = *args[1];
  Tensor y = Tensor::empty(nd.type);
  const Shape& ys = nd.type->shape;
  int64_t m = ys[ys.size() - 2], n = ys[ys.size() - 1], k = a.shape().back();
  Shape batch(ys.begin(), ys.end() - 2);
  Shape abatch(a.shape().begin(), a.shape().end() - 2), bbatch(b.shape().begin(), b.shape().end() - 2);
  dispatch(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (m * n == 0) return;
    if (k == 0) {
      std::fill(y.data<T>(), y.data<T>() + y.size(), T(0));
      return;
    }
    strided_loop<3>(
        batch, {broadcast_strides(abatch, batch), broadcast_strides(bbatch, batch), row_major_strides(batch)},
        {0, 0, 0}, [&](int64_t, auto o) {
          gemm<T>(m, n, k, a.data<T>() + o[0] * m * k, b.data<T>() + o[1] * k * n, y.data<T>() + o[2] * m * n);
        });
  });
  return y;
}

// ---- derivative rules (all of these ops are linear: each rule is the transpose) ----

// reshape^T = reshape back
void vjp_reshape(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) { ct[0] = ad.reshape(g, ad.shape(ad.arg(0))); }
// transpose(perm)^T = transpose(perm^-1)
void vjp_transpose(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  std::vector<int64_t> perm = ad.y().attr_ints("perm"), inv(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) inv[size_t(perm[d])] = int64_t(d);
  ct[0] = ad.transpose(g, inv);
}
// broadcast^T = sum over the broadcast axes
void vjp_broadcast_to(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  ct[0] = ad.sum_to(g, ad.shape(ad.arg(0)));
}
// concat^T = the slices of each operand's part
void vjp_concat(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  int axis = int(ad.y().attr_int("axis"));
  if (axis < 0) axis += ad.type(y).rank();
  int64_t at = 0;
  for (size_t i = 0; i < ad.y().args.size(); ++i) {
    const Shape s = ad.shape(ad.arg(i));
    if (ad.needs(i)) {
      std::vector<int64_t> starts(s.size(), 0), ends = ad.shape(y);
      starts[size_t(axis)] = at;
      ends[size_t(axis)] = at + s[size_t(axis)];
      ct[i] = ad.slice(g, starts, ends);
    }
    at += s[size_t(axis)];
  }
}
// slice^T = pad with zeros
void vjp_slice(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  std::vector<int64_t> lo = ad.y().attr_ints("starts"), hi = ad.y().attr_ints("ends");
  const Shape s = ad.shape(ad.arg(0));
  for (size_t d = 0; d < hi.size(); ++d) hi[d] = s[d] - hi[d];
  ct[0] = ad.pad(g, lo, hi);
}
// pad^T = slice out the middle
void vjp_pad(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  std::vector<int64_t> starts = ad.y().attr_ints("lo"), ends = starts;
  const Shape s = ad.shape(ad.arg(0));
  for (size_t d = 0; d < s.size(); ++d) ends[d] += s[d];
  ct[0] = ad.slice(g, starts, ends);
}
// y = a b:  d/da = g b^T,  d/db = a^T g  (over the last two axes; batch axes summed
// back where they were broadcast)
void vjp_matmul(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  ValueId a = ad.arg(0), b = ad.arg(1);
  if (ad.needs(0)) ct[0] = ad.sum_to(ad.emit(Op::Matmul, {g, ad.swap_last_two(b)}), ad.shape(a));
  if (ad.needs(1)) ct[1] = ad.sum_to(ad.emit(Op::Matmul, {ad.swap_last_two(a), g}), ad.shape(b));
}

}  // namespace

// take(x, indices, axis): x.shape[:axis] + indices.shape + x.shape[axis+1:]
Type infer_take(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  const Type& ix = arg_type(g, n, 1);
  if (ix.dtype != DType::I32) user_error(n.loc, "take: indices must be i32, got {}", type_str(ix));
  if (x.rank() == 0) user_error(n.loc, "take: cannot take from a scalar");
  const int axis = norm_axis(n, n.attr_int("axis"), x);
  Type t{x.dtype, Shape(x.shape.begin(), x.shape.begin() + axis)};
  t.shape.insert(t.shape.end(), ix.shape.begin(), ix.shape.end());
  t.shape.insert(t.shape.end(), x.shape.begin() + axis + 1, x.shape.end());
  return t;
}
// The layout both take and its gradient use: x as [outer, n, inner], indices flat.
struct TakeLayout : AxisSplit {
  int axis;
  int64_t count;
  TakeLayout(const Type& x, const Shape& indices, int64_t axis_attr, const Node& node)
      : TakeLayout(x.shape, norm_axis(node, axis_attr, x), indices) {}
  TakeLayout(const Shape& x, int a, const Shape& indices) : AxisSplit(x, a), axis(a), count(num_elements(indices)) {}
};
// An index outside 0..n-1 is an error naming the index and the rank (not wrapped).
Tensor eval_take(const Node& nd, const Args& a, const EvalCtx& ctx) {
  TakeLayout L(a[0]->type, a[1]->shape(), nd.attr_int("axis"), nd);
  const int32_t* ix = a[1]->data<int32_t>();
  for (int64_t j = 0; j < L.count; ++j)
    if (ix[j] < 0 || ix[j] >= L.n)
      throw UserError(
          nd.loc, fmt::format("take: index {} is out of range 0..{} on rank {}, at element {} of the indices", ix[j],
                              L.n - 1, ctx.rank, element_str(j, a[1]->shape())));
  Tensor y = Tensor::empty(nd.type);
  dispatch(nd.type->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = a[0]->data<T>();
    T* out = y.data<T>();
    for (int64_t o = 0; o < L.outer; ++o)
      for (int64_t j = 0; j < L.count; ++j)
        std::copy_n(x + (o * L.n + ix[j]) * L.inner, L.inner, out + (o * L.count + j) * L.inner);
  });
  return y;
}

// d/dx take(x, ix): the cotangent's rows added into the rows they were taken from,
// repeated indices accumulating in order: a scatter_add into zeros, x as [outer, n,
// inner], one index per slice of the cotangent [outer, count, inner].
void vjp_take(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  if (!ad.needs(0)) return;
  const ValueId x = ad.arg(0), ix = ad.arg(1);
  TakeLayout L(ad.type(x), ad.shape(ix), ad.y().attr_int("axis"), ad.y());
  const Shape cols{L.outer, L.count, L.inner};
  Attrs a;
  a.set("axis", Attr::of_int(1));
  const ValueId at = ad.reshape(ix, {L.count});
  const ValueId sum =
      ad.emit(Op::ScatterAdd, {ad.zeros(Type{ad.dtype(x), {L.outer, L.n, L.inner}}), at, ad.reshape(g, cols)}, a);
  ct[0] = ad.reshape(sum, ad.shape(x));
}

void register_shape_ops() {
  // A view is its map (ir/view.h): index arithmetic in the kernel that reads it, a strided copy in the interpreter.
  def(Op::Reshape).infer(infer_reshape).view(view_reshape).eval(eval_view).vjp(vjp_reshape).form(KernelForm::View);
  def(Op::Transpose)
      .infer(infer_transpose)
      .view(view_transpose)
      .eval(eval_view)
      .vjp(vjp_transpose)
      .form(KernelForm::View);
  def(Op::BroadcastTo)
      .infer(infer_broadcast_to)
      .view(view_broadcast_to)
      .eval(eval_view)
      .vjp(vjp_broadcast_to)
      .form(KernelForm::View);
  def(Op::Concat).infer(infer_concat).view(view_concat).eval(eval_view).vjp(vjp_concat).form(KernelForm::View);
  def(Op::Slice).infer(infer_slice).view(view_slice).eval(eval_view).vjp(vjp_slice).form(KernelForm::View);
  def(Op::Pad).infer(infer_pad).view(view_pad).eval(eval_view).vjp(vjp_pad).form(KernelForm::View);
  def(Op::Take).infer(infer_take).eval(eval_take).vjp(vjp_take).form(KernelForm::View);
  def(Op::Matmul).infer(infer_matmul).eval(eval_matmul).vjp(vjp_matmul).form(KernelForm::Gemm);
}

}  // namespace gradc
