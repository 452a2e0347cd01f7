#include "runtime/tensor.h"

#include <algorithm>
#include <cstring>

#include "support/diag.h"

namespace gradc {

Tensor Tensor::empty(const Type& t) {
  Tensor x;
  x.type = t;
  size_t bytes = size_t(std::max<int64_t>(t.size(), 1)) * size_t(dtype_size(t.dtype));
  x.buf = std::shared_ptr<std::byte[]>(new std::byte[bytes]);
  return x;
}

Tensor Tensor::zeros(const Type& t) {
  Tensor x = empty(t);
  std::memset(x.buf.get(), 0, size_t(t.size()) * size_t(dtype_size(t.dtype)));
  return x;
}

Tensor Tensor::scalar(DType dt, double v) { return from(Type{dt, {}}, {v}); }

Tensor Tensor::from(const Type& t, const std::vector<double>& vals) {
  GRADC_ASSERT(vals.size() == 1 || int64_t(vals.size()) == t.size(), "{} values for {}", vals.size(), type_str(t));
  Tensor x = empty(t);
  dispatch(t.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = x.data<T>();
    if (vals.size() == 1)
      std::fill(p, p + t.size(), T(vals[0]));
    else
      for (size_t i = 0; i < vals.size(); ++i) p[i] = T(vals[i]);
  });
  return x;
}

double Tensor::get(int64_t i) const {
  return dispatch(dtype(), [&](auto tag) { return double(data<decltype(tag)>()[i]); });
}

std::vector<double> Tensor::values() const {
  std::vector<double> v(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) v[size_t(i)] = get(i);
  return v;
}

Tensor Tensor::cast(DType to) const {
  Tensor y = empty(Type{to, shape()});
  dispatch(dtype(), [&](auto a) {
    dispatch(to, [&](auto b) {
      using A = decltype(a);
      using B = decltype(b);
      const A* src = data<A>();
      B* dst = y.data<B>();
      for (int64_t i = 0; i < size(); ++i) dst[i] = op::cast<B>(src[i]);
    });
  });
  return y;
}

bool Tensor::same_values(const Tensor& o) const {
  return type == o.type && std::memcmp(buf.get(), o.buf.get(), size_t(size()) * size_t(dtype_size(dtype()))) == 0;
}

Strides broadcast_strides(const Shape& in, const Shape& out) {
  Strides src = row_major_strides(in);
  Strides st(out.size(), 0);
  size_t shift = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) st[d + shift] = (in[d] == 1 && out[d + shift] != 1) ? 0 : src[d];
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok) {
  *ok = true;
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) *ok = false;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {
// Copies x, read with `src` strides from offset `base`, into a fresh tensor of `shape`.
Tensor gather_strided(const Tensor& x, const Shape& shape, const Strides& src, int64_t base) {
  Tensor y = Tensor::empty(Type{x.dtype(), shape});
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = x.data<T>();
    T* d = y.data<T>();
    strided_loop<1>(shape, {src}, {base}, [&](int64_t i, auto off) { d[i] = s[off[0]]; });
  });
  return y;
}
}  // namespace

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  Strides in = row_major_strides(x.shape());
  Shape shape(perm.size());
  Strides st(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    shape[d] = x.shape()[size_t(perm[d])];
    st[d] = in[size_t(perm[d])];
  }
  return gather_strided(x, shape, st, 0);
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends) {
  Strides in = row_major_strides(x.shape());
  Shape shape(starts.size());
  int64_t base = 0;
  for (size_t d = 0; d < starts.size(); ++d) {
    shape[d] = ends[d] - starts[d];
    base += starts[d] * in[d];
  }
  return gather_strided(x, shape, in, base);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  Shape shape = x.shape();
  for (size_t d = 0; d < shape.size(); ++d) shape[d] += lo[d] + hi[d];
  Tensor y = Tensor::zeros(Type{x.dtype(), shape});
  Strides out = row_major_strides(shape);
  int64_t base = 0;
  for (size_t d = 0; d < shape.size(); ++d) base += lo[d] * out[d];
  dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = x.data<T>();
    T* d = y.data<T>();
    strided_loop<1>(x.shape(), {out}, {base}, [&](int64_t i, auto off) { d[off[0]] = s[i]; });
  });
  return y;
}

Tensor concat(const std::vector<const Tensor*>& xs, int axis) {
  Shape shape = xs[0]->shape();
  shape[size_t(axis)] = 0;
  for (const Tensor* x : xs) shape[size_t(axis)] += x->shape()[size_t(axis)];
  Tensor y = Tensor::empty(Type{xs[0]->dtype(), shape});
  Strides out = row_major_strides(shape);
  int64_t at = 0;
  dispatch(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = y.data<T>();
    for (const Tensor* x : xs) {
      const T* s = x->data<T>();
      strided_loop<1>(x->shape(), {out}, {at * out[size_t(axis)]}, [&](int64_t i, auto off) { d[off[0]] = s[i]; });
      at += x->shape()[size_t(axis)];
    }
  });
  return y;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  return gather_strided(x, shape, broadcast_strides(x.shape(), shape), 0);
}

Tensor block(const Tensor& x, int axis, int64_t b, int64_t nblocks) {
  std::vector<int64_t> starts(x.shape().size(), 0);
  std::vector<int64_t> ends(x.shape().begin(), x.shape().end());
  int64_t len = x.shape()[size_t(axis)] / nblocks;
  starts[size_t(axis)] = b * len;
  ends[size_t(axis)] = (b + 1) * len;
  return slice(x, starts, ends);
}

void combine_into(Tensor& acc, const Tensor& x, Combine how) {
  dispatch(acc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* a = acc.data<T>();
    const T* b = x.data<T>();
    const int64_t n = acc.size();
    switch (how) {
      case Combine::Sum:
        for (int64_t i = 0; i < n; ++i) a[i] += b[i];
        break;
      case Combine::Prod:
        for (int64_t i = 0; i < n; ++i) a[i] *= b[i];
        break;
      case Combine::Max:
        for (int64_t i = 0; i < n; ++i) a[i] = std::max(a[i], b[i]);
        break;
      case Combine::Min:
        for (int64_t i = 0; i < n; ++i) a[i] = std::min(a[i], b[i]);
        break;
    }
  });
}

}  // namespace gradc
