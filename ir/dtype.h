// The element types, one enum for the IR and for the runtime of generated code
// (gradc emit writes this file out as gradc_dtype.h): self-contained, C++17.
#pragma once
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)  // as ir/scalar.h: the conversions run in kernels too
#define GRADC_HD __host__ __device__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#else
#define GRADC_HD
#endif

namespace gradc {

// bf16 and f16 are storage types: every op computes in f32 and rounds its result once
// to them, round-to-nearest-even (docs/language.md, "Low precision").
enum class DType : uint8_t { I32, F32, F64, BF16, F16 };
inline int64_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: return 8;
    case DType::BF16:
    case DType::F16: return 2;
    case DType::I32:
    case DType::F32: break;
  }
  return 4;
}

// f32 to bf16's bits, round-to-nearest-even; a NaN stays a (quiet) NaN. On a GPU the
// conversion instruction rounds the same way (subnormals kept: no -ftz), all but NaNs,
// whose bits it does not keep.
GRADC_HD inline uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
#if defined(__CUDA_ARCH__)
  return f == f ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : uint16_t((u >> 16) | 0x40);
#else
  // One select of two 32-bit values, then the shift: a vectorised round trip
  // (to_float(to_bfloat16(x)), every bf16 op's rounding) is 7 instructions, a mask for
  // the shifts, where a NaN test on the bits and an early return made it 9 (the same
  // bits for all 2^32 inputs).
  const uint32_t r = f != f ? u | 0x400000u : u + 0x7FFFu + ((u >> 16) & 1u);
  return uint16_t(r >> 16);
#endif
}
GRADC_HD inline float bf16_value(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// f32 to IEEE binary16's bits, round-to-nearest-even, subnormals included; beyond
// 65520 an infinity; a NaN stays a (quiet) NaN.
GRADC_HD inline uint16_t f16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
#if defined(__CUDA_ARCH__)  // as bf16_bits
  return f == f ? __half_as_ushort(__float2half_rn(f)) : uint16_t(sign | 0x7E00u);
#else
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return uint16_t(sign | 0x7E00u);
  if (a >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // 65520 and above round to infinity
  if (a < 0x38800000u) {                                  // below 2^-14: a subnormal (or zero), in units of 2^-24
    if (a < 0x33000000u) return sign;                     // below 2^-25: rounds to zero
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - int(a >> 23);  // 14..24 bits dropped from the 24-bit significand
    const uint32_t half = 1u << (shift - 1), rest = mant & ((1u << shift) - 1);
    uint32_t r = mant >> shift;
    if (rest > half || (rest == half && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  // normal: rebias the exponent (127 to 15) and round away 13 bits
  uint32_t r = a - 0x38000000u;
  r += 0xFFFu + ((r >> 13) & 1u);
  return uint16_t(sign | (r >> 13));
#endif
}
GRADC_HD inline float f16_value(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  uint32_t u;
#if defined(__CUDA_ARCH__)  // exact, as below; an infinity's or a NaN's bits as below
  u = sign | 0x7F800000u | (m << 13);
  return e != 0x1F ? __half2float(__ushort_as_half(h)) : __uint_as_float(u);
#else
  if (e == 0x1F) {
    u = sign | 0x7F800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112) << 23) | (m << 13);
  } else {  // zero or a subnormal: m * 2^-24, exact in f32
    float f = float(m) * 5.9604644775390625e-8f;
    return sign ? -f : f;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}

// bf16 and f16 elements as generated code stores them: the bits, and nothing that
// computes on them. Kernels widen them with to_float and round with to_bfloat16 or
// to_float16 (the rounding of ir/dtype.h above), so a 16-bit value can never take part
// in arithmetic by accident. Any 16-bit bf16 or f16 type of a user's (c10::BFloat16,
// __nv_bfloat16, std::bfloat16_t) has this layout.
struct bfloat16 {
  uint16_t bits;
};
struct float16 {
  uint16_t bits;
};
GRADC_HD inline bfloat16 to_bfloat16(float f) { return bfloat16{bf16_bits(f)}; }
GRADC_HD inline float16 to_float16(float f) { return float16{f16_bits(f)}; }
GRADC_HD inline float to_float(bfloat16 x) { return bf16_value(x.bits); }
GRADC_HD inline float to_float(float16 x) { return f16_value(x.bits); }

}  // namespace gradc
