#include "runtime/tensor.h"

#include <algorithm>
#include <cstring>

#include "ir/scalar.h"
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

void low_precision_in_kernel(DType t) {
  throw InternalError(fmt::format("{} data reached an interpreter kernel (they run on f32 copies)", dtype_name(t)));
}

Tensor Tensor::from(const Type& t, const std::vector<double>& vals) {
  GRADC_ASSERT(vals.size() == 1 || int64_t(vals.size()) == t.size(), "{} values for {}", vals.size(), type_str(t));
  Tensor x = empty(t);
  if (is_low_precision(t.dtype)) {  // through f32, as PyTorch converts a double
    uint16_t* p = x.data<uint16_t>();
    for (int64_t i = 0; i < t.size(); ++i) p[i] = low_bits(t.dtype, float(vals[vals.size() == 1 ? 0 : size_t(i)]));
    return x;
  }
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
  if (is_low_precision(dtype())) return low_value(dtype(), data<uint16_t>()[i]);
  return dispatch(dtype(), [&](auto tag) { return double(data<decltype(tag)>()[i]); });
}

std::vector<double> Tensor::values() const {
  std::vector<double> v(static_cast<size_t>(size()));
  for (int64_t i = 0; i < size(); ++i) v[size_t(i)] = get(i);
  return v;
}

Tensor Tensor::cast(DType to) const {
  // bf16 and f16 go through f32 (exact from them; to them, one rounding of the f32
  // value, as PyTorch converts f64 and i32 to them)
  if (is_low_precision(dtype())) {
    Tensor f = empty(Type{DType::F32, shape()});
    for (int64_t i = 0; i < size(); ++i) f.data<float>()[i] = low_value(dtype(), data<uint16_t>()[i]);
    return to == DType::F32 ? f : f.cast(to);
  }
  if (is_low_precision(to)) {
    const Tensor f = cast(DType::F32);
    Tensor y = empty(Type{to, shape()});
    for (int64_t i = 0; i < size(); ++i) y.data<uint16_t>()[i] = low_bits(to, f.data<float>()[i]);
    return y;
  }
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
  Strides src = row_major_strides(in), st(out.size(), 0);
  const std::vector<ViewAxis> axes = broadcast_axes(in, out);
  for (size_t d = 0; d < in.size(); ++d)
    if (axes[d].from >= 0) st[size_t(axes[d].from)] = src[d];
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

Tensor view(const ViewMap& m, const std::vector<const Tensor*>& xs, const Type& out) {
  if (m.flat) {
    Tensor y = *xs[0];  // shares the buffer: values are never written after they are made
    y.type = out;
    return y;
  }
  int64_t covered = 0;  // the boxes do not overlap
  for (const ViewRead& r : m.reads) {
    int64_t n = 1;
    for (size_t e = 0; e < out.shape.size(); ++e) n *= r.whole() ? out.shape[e] : r.hi[e] - r.lo[e];
    covered += n;
  }
  Tensor y = covered == out.size() ? Tensor::empty(out) : Tensor::zeros(out);
  const Strides dst = row_major_strides(out.shape);
  for (const ViewRead& r : m.reads) {
    const Tensor& x = *xs[r.operand];
    Shape box = out.shape;
    std::vector<int64_t> lo(out.shape.size(), 0);
    if (!r.whole())
      for (size_t e = 0; e < box.size(); ++e) lo[e] = r.lo[e], box[e] = r.hi[e] - r.lo[e];
    // operand axis d moves with output axis `from`: its stride adds to that axis's
    const Strides in = row_major_strides(x.shape());
    Strides src(out.shape.size(), 0);
    int64_t src_base = 0, dst_base = 0;
    for (size_t d = 0; d < r.axes.size(); ++d) {
      const ViewAxis& a = r.axes[d];
      if (a.from < 0) continue;
      src[size_t(a.from)] += in[d];
      src_base += (lo[size_t(a.from)] + a.offset) * in[d];
    }
    for (size_t e = 0; e < lo.size(); ++e) dst_base += lo[e] * dst[e];
    dispatch_storage(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* s = x.data<T>();
      T* d = y.data<T>();
      strided_loop<2>(box, {dst, src}, {dst_base, src_base}, [&](int64_t, auto off) { d[off[0]] = s[off[1]]; });
    });
  }
  return y;
}

Tensor concat(const std::vector<const Tensor*>& xs, int axis) {
  std::vector<Shape> in;
  for (const Tensor* x : xs) in.push_back(x->shape());
  Type out = xs[0]->type;
  out.shape[size_t(axis)] = 0;
  for (const Shape& s : in) out.shape[size_t(axis)] += s[size_t(axis)];
  return view(concat_view(in, axis), xs, out);
}

Tensor block(const Tensor& x, int axis, int64_t b, int64_t nblocks) {
  std::vector<int64_t> starts(x.shape().size(), 0);
  Type out = x.type;
  out.shape[size_t(axis)] /= nblocks;
  starts[size_t(axis)] = b * out.shape[size_t(axis)];
  return view(slice_view(starts), {&x}, out);
}

void combine_into(Tensor& acc, const Tensor& x, Combine how) {
  dispatch(acc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* a = acc.data<T>();
    const T* b = x.data<T>();
    const int64_t n = acc.size();
    switch (how) {
      case Combine::Sum:
        for (int64_t i = 0; i < n; ++i) a[i] = op::add(a[i], b[i]);  // i32 wraps around
        break;
      case Combine::Prod:
        for (int64_t i = 0; i < n; ++i) a[i] = op::mul(a[i], b[i]);
        break;
      case Combine::Max:  // a NaN on any rank gives NaN, as max over an axis
        for (int64_t i = 0; i < n; ++i) a[i] = max_step(a[i], b[i]);
        break;
      case Combine::Min:
        for (int64_t i = 0; i < n; ++i) a[i] = min_step(a[i], b[i]);
        break;
    }
  });
}

}  // namespace gradc
