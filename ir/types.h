// Element types, static shapes and value types.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"   // DType, dtype_size: shared with generated code's runtime
#include "ir/scalar.h"  // saturate_i32
#include "support/intern.h"

namespace gradc {

inline bool is_float(DType t) { return t != DType::I32; }
inline bool is_low_precision(DType t) { return t == DType::BF16 || t == DType::F16; }
// PyTorch's promotion of two tensors: i32 < bf16, f16 < f32 < f64, and bf16 with f16 is f32.
inline DType promote(DType a, DType b) {
  auto rank = [](DType t) { return t == DType::I32 ? 0 : is_low_precision(t) ? 1 : t == DType::F32 ? 2 : 3; };
  if (a == b) return a;
  if (rank(a) == rank(b)) return DType::F32;  // bf16 and f16
  return rank(a) > rank(b) ? a : b;
}
// The float type an i32 value becomes in float contexts (exp, /, comparisons).
inline DType float_of(DType t) { return t == DType::I32 ? DType::F32 : t; }
const char* dtype_name(DType t);
bool parse_dtype(const std::string& s, DType& out);

using Shape = std::vector<int64_t>;

int64_t num_elements(const Shape& s);
// A value of shape s as [outer, n, inner] around `axis` (0 <= axis < rank): the
// elements before the axis, along it, and after it.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
  AxisSplit(const Shape& s, int axis) : n(s[size_t(axis)]) {
    for (int d = 0; d < axis; ++d) outer *= s[size_t(d)];
    for (size_t d = size_t(axis) + 1; d < s.size(); ++d) inner *= s[d];
  }
};
// Row-major strides in elements: the last axis is contiguous.
// Whether a value of shape `from` broadcasts (NumPy rules) to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to);
Shape row_major_strides(const Shape& s);
// Sizes and strides are int64: a shape is too large when its dimensions multiply to
// more than 2^40 elements, or, for an empty one (a dimension 0, as f32[10^9, 10^9, 0]),
// when its nonzero dimensions multiply to more than 2^62 (f32[0, 2^62, 2^62] would
// overflow its strides).
inline constexpr int64_t kMaxElements = int64_t(1) << 40;
bool too_large(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// Element `flat` (row-major) of a value of shape `s`, as its index: "[1, 0]".
std::string element_str(int64_t flat, const Shape& s);

struct Type {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const Type&) const = default;
  int rank() const { return int(shape.size()); }
  int64_t size() const { return num_elements(shape); }
};
std::string type_str(const Type& t);  // "f32[2, 3]"

// A node's result type: a handle to an interned Type (support/intern.h). A program's
// values share a few types, so a node holds a pointer, not a shape of its own,
// and two types are equal exactly when their handles are.
struct TypeTraits {
  static uint64_t hash(const Type& t);
  static bool same(const Type& a, const Type& b) { return a == b; }
  static bool none(const Type& t) { return t == Type{}; }  // f32[]
};
class TypeRef : public Interned<Type, TypeTraits> {
 public:
  using Interned::Interned;
  bool operator==(const TypeRef& o) const { return Interned::operator==(o); }  // not ambiguous in C++20
  bool operator==(const Type& t) const { return **this == t; }
};

// Replication (docs/language.md section 8): the set of mesh axes along which a value may
// differ between ranks, bit k for axis k (a program without a mesh has one axis).
// Empty: identical on every rank. The analysis keeps only the mesh's axes
// (infer_rep), so Varying (every bit) is "along every axis" in any mesh.
struct Rep {
  static constexpr uint8_t kUnknown = 0x80, kAll = 0x7F;  // at most 7 axes
  uint8_t bits = kUnknown;
  static const Rep Unknown, Replicated, Varying;
  static constexpr Rep along(uint8_t axes) { return Rep{uint8_t(axes & kAll)}; }
  bool known() const { return bits != kUnknown; }
  bool varies() const { return known() && bits != 0; }
  bool varies_along(uint8_t axes) const { return known() && (bits & axes); }
  uint8_t axes() const { return known() ? bits : 0; }
  bool operator==(const Rep&) const = default;
};
inline constexpr Rep Rep::Unknown{Rep::kUnknown};
inline constexpr Rep Rep::Replicated{0};
inline constexpr Rep Rep::Varying{Rep::kAll};

}  // namespace gradc
