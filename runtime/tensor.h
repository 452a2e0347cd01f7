// Dense row-major tensors for the reference interpreter, and the one loop
// primitive (strided_loop) that elementwise ops, broadcasting, reductions,
// transposes, slices and pads are all written with.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/types.h"
#include "ir/view.h"

namespace gradc {

struct Tensor {
  Type type;
  std::shared_ptr<std::byte[]> buf;

  static Tensor empty(const Type& t);  // contents unspecified
  static Tensor zeros(const Type& t);
  static Tensor scalar(DType dt, double v);
  // From doubles (rounded to the dtype); `vals` has one element (a splat) or size(t).
  static Tensor from(const Type& t, const std::vector<double>& vals);

  int64_t size() const { return type.size(); }
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }
  template <class T>
  T* data() {
    return reinterpret_cast<T*>(buf.get());
  }
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(buf.get());
  }
  double get(int64_t i) const;  // element i as a double
  std::vector<double> values() const;
  Tensor cast(DType to) const;
  bool same_values(const Tensor& o) const;  // same type and bit-for-bit equal values
};

// bf16 and f16 data never reach a kernel: the interpreter runs each op on f32 copies
// of them (runtime/interp.cpp); one that does is an internal error.
[[noreturn]] void low_precision_in_kernel(DType t);

// Calls f with a value of the C++ type for `t` (int32_t, float or double).
template <class F>
decltype(auto) dispatch(DType t, F&& f) {
  switch (t) {
    case DType::I32: return f(int32_t{});
    case DType::F32: return f(float{});
    case DType::F64: break;
    case DType::BF16:
    case DType::F16: low_precision_in_kernel(t);
  }
  return f(double{});
}
// The same for code that only moves elements: the 2-byte types as uint16_t.
template <class F>
decltype(auto) dispatch_storage(DType t, F&& f) {
  if (is_low_precision(t)) return f(uint16_t{});
  return dispatch(t, f);
}
// A value rounded to a 2-byte float type (its bits), and back: exact.
inline uint16_t low_bits(DType t, float v) { return t == DType::BF16 ? bf16_bits(v) : f16_bits(v); }
inline float low_value(DType t, uint16_t b) { return t == DType::BF16 ? bf16_value(b) : f16_value(b); }

using Strides = std::vector<int64_t>;
// Strides for reading a tensor of shape `in` broadcast (NumPy rules) to `out`:
// aligned to `out`'s axes, 0 where `in` is missing the axis or has size 1.
Strides broadcast_strides(const Shape& in, const Shape& out);
Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok);

// Visits every element of `shape` in row-major order, calling body(i, off),
// where i is the flat index and off[k] = base[k] + sum_d idx[d] * strides[k][d]
// is operand k's element offset. The innermost axis runs as a tight loop.
template <size_t K, class Body>
void strided_loop(const Shape& shape, const std::array<Strides, K>& strides, std::array<int64_t, K> base, Body&& body) {
  const int r = int(shape.size());
  const int64_t n = num_elements(shape);
  if (n == 0) return;
  if (r == 0) {
    body(int64_t(0), base);
    return;
  }
  const int64_t inner = shape[r - 1];
  std::array<int64_t, K> istep;
  for (size_t k = 0; k < K; ++k) istep[k] = strides[k][r - 1];
  std::vector<int64_t> idx(size_t(r - 1), 0);
  std::array<int64_t, K> off = base;
  for (int64_t i = 0; i < n;) {
    std::array<int64_t, K> o = off;
    for (int64_t j = 0; j < inner; ++j, ++i) {
      body(i, o);
      for (size_t k = 0; k < K; ++k) o[k] += istep[k];
    }
    for (int d = r - 2; d >= 0; --d) {
      for (size_t k = 0; k < K; ++k) off[k] += strides[k][size_t(d)];
      if (++idx[size_t(d)] < shape[size_t(d)]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= strides[k][size_t(d)] * shape[size_t(d)];
      idx[size_t(d)] = 0;
    }
  }
}

// A view's result (ir/view.h): a fresh tensor of `out` holding the operands' elements
// the map reads, zero where none does; a reshape shares operand 0's buffer.
Tensor view(const ViewMap& m, const std::vector<const Tensor*>& xs, const Type& out);
// The communicator's data movement, as views.
Tensor concat(const std::vector<const Tensor*>& xs, int axis);
// Block `b` of `nblocks` equal blocks along `axis`.
Tensor block(const Tensor& x, int axis, int64_t b, int64_t nblocks);

// Elementwise combination of two same-type tensors of the same shape.
enum class Combine { Sum, Prod, Max, Min };
void combine_into(Tensor& acc, const Tensor& x, Combine how);

}  // namespace gradc
