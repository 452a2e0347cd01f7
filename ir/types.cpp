#include "ir/types.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace gradc {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::I32: return "i32";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType& out) {
  for (DType t : {DType::I32, DType::F32, DType::F64, DType::BF16, DType::F16})
    if (s == dtype_name(t)) {
      out = t;
      return true;
    }
  return false;
}

uint64_t TypeTraits::hash(const Type& t) {
  uint64_t h = 0xcbf29ce484222325ull ^ uint64_t(t.dtype);
  for (int64_t d : t.shape) h = (h ^ uint64_t(d)) * 0x100000001b3ull;
  return (h ^ t.shape.size()) * 0x9e3779b97f4a7c15ull;
}

bool too_large(const Shape& s) {
  // An empty tensor holds nothing: its other dimensions may be as large as NumPy allows,
  // up to 2^62 multiplied, so that no product of them overflows int64.
  const bool empty = std::count(s.begin(), s.end(), 0) > 0;
  const int64_t most = empty ? int64_t(1) << 62 : kMaxElements;
  int64_t size = 1;
  for (int64_t d : s) {
    if (d == 0) continue;
    if (d < 0 || size > most / d) return true;
    size *= d;
  }
  return false;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    int64_t d = from[from.size() - 1 - i];
    if (d != 1 && d != to[to.size() - 1 - i]) return false;
  }
  return true;
}

Shape row_major_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t d = s.size(); d-- > 0;) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

int64_t num_elements(const Shape& s) {
  // A shape from a program or a .gir file is counted before too_large refuses it: its
  // product saturates at INT64_MAX rather than overflow (UBSan found the overflow), so
  // that it compares unequal to every real size. A 0 makes it 0 wherever it stands.
  if (std::count(s.begin(), s.end(), 0) > 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  return n;
}

std::string shape_str(const Shape& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

std::string type_str(const Type& t) { return dtype_name(t.dtype) + shape_str(t.shape); }

std::string element_str(int64_t flat, const Shape& s) {
  Shape idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] ? flat % s[d] : 0;
    flat = s[d] ? flat / s[d] : 0;
  }
  return shape_str(idx);
}

}  // namespace gradc
