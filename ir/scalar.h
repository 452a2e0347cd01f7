// The scalar meaning of every elementwise op, and of rand/randn: one definition,
// compiled by the host compiler for the interpreter and the CPU target and by
// nvcc for the CUDA target (gradc writes this file out beside generated code),
// so every backend computes the same function.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define GRADC_HD __host__ __device__
#else
#define GRADC_HD
#endif

namespace gradc {

// A float converted to i32, defined for every input as XLA does: truncation
// toward zero, saturating at the i32 limits, NaN to 0 (C++ leaves the
// out-of-range cases undefined).
GRADC_HD inline int32_t saturate_i32(double x) {
  if (x != x) return 0;
  if (x >= 2147483647.0) return 2147483647;
  if (x <= -2147483648.0) return -2147483647 - 1;
  return int32_t(x);
}

// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11, as in
// Random123, cuRAND and JAX). Element i of randn/rand(shape, seed=s) depends
// only on (s, i), so every rank and every backend produces the same values.
struct Philox4 {
  uint32_t v[4];
};
GRADC_HD inline Philox4 philox4x32(Philox4 c, uint32_t k0, uint32_t k1) {
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += W0;
      k1 += W1;
    }
    uint64_t p0 = uint64_t(M0) * c.v[0], p1 = uint64_t(M1) * c.v[2];
    c = Philox4{{uint32_t(p1 >> 32) ^ c.v[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c.v[3] ^ k1, uint32_t(p0)}};
  }
  return c;
}
GRADC_HD inline Philox4 philox_block(int32_t seed, int64_t i) {
  return philox4x32(Philox4{{uint32_t(uint64_t(i)), uint32_t(uint64_t(i) >> 32), 0, 0}}, uint32_t(seed),
                    0x6772646Du /* "grdm" */);
}
// Uniform in [0, 1): the top 24 bits, exact in f32.
GRADC_HD inline double uniform01(int32_t seed, int64_t i) { return double(philox_block(seed, i).v[0] >> 8) * 0x1p-24; }
// Standard normal by Box-Muller, computed in double and rounded by the caller.
GRADC_HD inline double normal01(int32_t seed, int64_t i) {
  Philox4 r = philox_block(seed, i);
  double u1 = double((r.v[0] >> 8) + 1) * 0x1p-24;  // (0, 1]: log is finite
  double u2 = double(r.v[1] >> 8) * 0x1p-24;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
}

// A float product, sum and difference, each rounded: nvcc merges a * b + c into one fma
// by default (-fmad=true), where the CPU backends are compiled with -ffp-contract=off and
// the interpreter rounds every op. On the GPU they are the intrinsics that are never
// merged, so the GPU gives the interpreter's bits whatever the flags it is built with.
#if defined(__CUDA_ARCH__)
GRADC_HD inline float mul_(float a, float b) { return __fmul_rn(a, b); }
GRADC_HD inline double mul_(double a, double b) { return __dmul_rn(a, b); }
GRADC_HD inline float add_(float a, float b) { return __fadd_rn(a, b); }
GRADC_HD inline double add_(double a, double b) { return __dadd_rn(a, b); }
GRADC_HD inline float sub_(float a, float b) { return __fsub_rn(a, b); }
GRADC_HD inline double sub_(double a, double b) { return __dsub_rn(a, b); }
#else
template <class T>
GRADC_HD inline T mul_(T a, T b) {
  return a * b;
}
template <class T>
GRADC_HD inline T add_(T a, T b) {
  return a + b;
}
template <class T>
GRADC_HD inline T sub_(T a, T b) {
  return a - b;
}
#endif

// op::NAME is the elementwise op NAME on one element (T: float, double or int32_t).
namespace op {
// c x^n + d x^(n-1) + ... by Horner's rule, one fma a step
GRADC_HD inline float horner(float, float c) { return c; }
template <class... C>
GRADC_HD inline float horner(float x, float c, float d, C... rest) {
  return horner(x, fmaf(c, x, d), rest...);
}
GRADC_HD inline double horner(double, double c) { return c; }
template <class... C>
GRADC_HD inline double horner(double x, double c, double d, C... rest) {
  return horner(x, fma(c, x, d), rest...);
}
// exp in f32, the same on every backend: within 0.91 ulp of the exact value over every
// float (glibc's expf: 0.51; tests/lit/exp_accuracy.dg), and a loop of it vectorises in
// 16 lanes with AVX-512, where clang calls glibc's vector expf 8 lanes at a time (0.24
// against 0.41 ns an element). x = n log(2) + r, |r| <= log(2) / 2 (n rounded by the
// 1.5 * 2^23 shift, log(2) in two parts, the first's product exact in the fma), e^r =
// 1 + r (1 + r Q(r)) with Q fitted for gradc in f64 (least squares on Chebyshev points,
// relative error 4e-9), and 2^n applied in two halves, so that a subnormal result is
// rounded once. Beyond [-104, 89] the result is 0 or infinity; a NaN stays a NaN.
GRADC_HD inline float exp_(float x) {
  const float c = fminf(fmaxf(x, -104.0f), 89.0f);
  const float t = fmaf(c, 1.44269504f, 12582912.0f);
  const float n = t - 12582912.0f;
  uint32_t tb, sb;
  memcpy(&tb, &t, 4);
  const int32_t k = int32_t(tb - 0x4B400000u), h = k >> 1;  // n, its lower half
  const float r = fmaf(-n, -1.90465432e-09f, fmaf(-n, 0.693147182f, c));
  const float q = horner(r, 1.3751407e-03f, 8.3689159e-03f, 4.1669533e-02f, 1.6666518e-01f, 4.9999988e-01f);
  float s1, s2;
  sb = uint32_t(h + 127) << 23;
  memcpy(&s1, &sb, 4);
  sb = uint32_t(k - h + 127) << 23;
  memcpy(&s2, &sb, 4);
  // (mul_, as every product here: a sum after exp, as sigmoid's 1 + exp(-x), is never
  // merged with it on the GPU)
  const float y = mul_(mul_(fmaf(r, fmaf(r, q, 1.0f), 1.0f), s1), s2);
  return x != x ? x : y;
}
GRADC_HD inline double exp_(double x) { return ::exp(x); }
// log and log1p in f32 are fdlibm's logf and log1pf as musl writes them, without
// branches, so that a loop of either vectorises and both are the same on every backend:
// the argument is 2^k (1 + f), 1 + f in [sqrt(2)/2, sqrt(2)), and log(1 + f) = f - f^2/2
// + s (f^2/2 + R(s^2)), s = f / (2 + f), R fdlibm's; c is added to k log(2)'s low part.
GRADC_HD inline float log_reduced(float f, float dk, float c) {
  const float s = f / add_(2.0f, f), z = mul_(s, s), w = mul_(z, z);
  const float t1 = mul_(w, add_(0x1.999c26p-2f, mul_(w, 0x1.f13c4cp-3f)));
  const float t2 = mul_(z, add_(0x1.555554p-1f, mul_(w, 0x1.23d3dcp-2f)));
  const float hfsq = mul_(mul_(0.5f, f), f);
  float r = mul_(s, add_(hfsq, add_(t2, t1)));
  r = add_(r, add_(mul_(dk, 9.0580006145e-06f), c));  // k log(2)'s low part, and c
  r = add_(sub_(r, hfsq), f);
  return add_(r, mul_(dk, 6.9313812256e-01f));  // k log(2)'s high part
}
// 1 + f and k of x > 0: x's exponent and significand, shifted so that 1 + f is in
// [sqrt(2)/2, sqrt(2))
GRADC_HD inline float log_split(float x, int32_t& k) {
  uint32_t ix;
  memcpy(&ix, &x, 4);
  ix += 0x3F800000u - 0x3F3504F3u;
  k += int32_t(ix >> 23) - 127;
  ix = (ix & 0x7FFFFFu) + 0x3F3504F3u;
  float m;
  memcpy(&m, &ix, 4);
  return m;
}
// log in f32: within 0.84 ulp of the exact value over every float (tests/lit/
// log_accuracy.dg), as glibc's scalar logf (0.82), where its vector logf, which clang
// would call in the native code's loops, is within 3.94. A subnormal x is scaled by 2^25
// first.
GRADC_HD inline float log_(float x) {
  const bool subnormal = x < 0x1p-126f;
  int32_t k = subnormal ? -25 : 0;
  const float m = log_split(subnormal ? mul_(x, 0x1p25f) : x, k);
  const float r = log_reduced(sub_(m, 1.0f), float(k), 0.0f);
  return x != x || x == INFINITY ? x : x == 0 ? -INFINITY : x < 0 ? NAN : r;
}
GRADC_HD inline double log_(double x) { return ::log(x); }
GRADC_HD inline float sqrt_(float x) { return sqrtf(x); }
GRADC_HD inline double sqrt_(double x) { return ::sqrt(x); }
// tanh in f32 from exp (Cephes' tanhf: within 2 ulp, 1.37 measured over every float),
// the same on every backend; a loop of it vectorises as exp does.
GRADC_HD inline float tanh_(float x) {
  const float a = x < 0 ? -x : x;
  float r;
  if (a > 0.625f) {
    r = 1.0f - 2.0f / (exp_(a + a) + 1.0f);
  } else {
    const float z = mul_(a, a);  // each op rounded, on the GPU too
    float p = -5.70498872745e-3f;
    p = add_(mul_(p, z), 2.06390887954e-2f);
    p = sub_(mul_(p, z), 5.37397155531e-2f);
    p = add_(mul_(p, z), 1.33314422036e-1f);
    p = sub_(mul_(p, z), 3.33332819422e-1f);
    r = add_(mul_(mul_(p, z), a), a);
  }
  return x < 0 ? -r : r;
}
GRADC_HD inline double tanh_(double x) { return ::tanh(x); }
GRADC_HD inline float sin_(float x) { return sinf(x); }
GRADC_HD inline double sin_(double x) { return ::sin(x); }
GRADC_HD inline float cos_(float x) { return cosf(x); }
GRADC_HD inline double cos_(double x) { return ::cos(x); }
// erf in f32 from exp, the same on every backend (within 1.27 ulp of the exact value
// over every float, against glibc erff's 0.97; tests/lit/erf_accuracy.dg): a loop of it
// vectorises as exp does, where glibc's erff stays a scalar call in every element
// (gelu's forward and backward: 1.9 against 15.8 ns an element). Fitted for gradc in f64
// (least squares on Chebyshev points): below 0.921875, x + x R(x^2); above, 1 - e^(G -
// x^2), G = log(erfc(x)) + x^2 in powers of x - 2.4296875, weighted by erfc. From
// 3.9375 on, erf(x) rounds to 1 in f32.
GRADC_HD inline float erf_(float x) {
  const float a = fabsf(x);
  if (a < 0.921875f) {
    const float p = horner(x * x, 8.392697782e-05f, -8.148507331e-04f, 5.201592110e-03f, -2.685964853e-02f,
                           1.128370017e-01f, -3.761263490e-01f, 1.283791661e-01f);
    return fmaf(p, x, x);
  }
  const float g = horner(fminf(a, 3.9375f) - 2.4296875f, -3.403038704e-07f, -1.093155333e-06f, 1.051628715e-06f,
                         -1.304997113e-05f, 8.532081847e-05f, -4.539072688e-04f, 2.319060499e-03f, -1.148883533e-02f,
                         5.846228823e-02f, -3.607347906e-01f, -1.531736255e+00f);
  const float r = a >= 3.9375f ? 1.0f : 1.0f - exp_(fmaf(-a, a, g));  // NaN stays NaN
  return x < 0 ? -r : r;
}
GRADC_HD inline double erf_(double x) { return ::erf(x); }
// log1p in f32: within 0.84 ulp of the exact value over every float (glibc's log1pf:
// 1.29; tests/lit/log1p_accuracy.dg), where glibc's log1pf stays a scalar call in every
// element of a loop (softplus, log_sigmoid, logaddexp and binary cross-entropy compute
// their values with it: 0.59 against 11 ns an element, one Zen 4 core). 1 + x = u + e, u
// rounded, c = e / u; where 1 + x is in [sqrt(2)/2, sqrt(2)) itself, f is x, exact.
GRADC_HD inline float log1p_(float x) {
  const float u = add_(1.0f, x);
  int32_t k = 0;
  const float m = log_split(u, k);
  const bool near = x < 0x1.a827a0p-2f && x >= -0x1.2bec32p-2f;
  const float e = k >= 2 ? sub_(1.0f, sub_(u, x)) : sub_(x, sub_(u, 1.0f));
  const float c = near || k >= 25 ? 0.0f : e / u;
  const float r = log_reduced(near ? x : sub_(m, 1.0f), near ? 0.0f : float(k), c);
  return x != x || x == INFINITY || fabsf(x) < 0x1p-24f ? x : x == -1.0f ? -INFINITY : x < -1.0f ? NAN : r;
}
GRADC_HD inline double log1p_(double x) { return ::log1p(x); }
// expm1 in f32, computed in f64 and rounded once: within 0.51 ulp of the exact value over
// every float (glibc's expm1f: 0.82; tests/lit/expm1_accuracy.dg), and a loop of it
// vectorises, where glibc's expm1f is a scalar call in every element (0.56 against 12 ns
// an element, one Zen 4 core). x = n log(2) + r, |r| <= log(2) / 2 (n rounded by the 1.5
// * 2^52 shift), e^r - 1 by its Taylor series to r^9 (relative error below 2^-35), and
// e^x - 1 = 2^n (e^r - 1) + (2^n - 1), 2^n made from the shift's bits. Beyond [-104, 89]
// the result is -1 or infinity; a NaN stays a NaN, a zero keeps its sign.
GRADC_HD inline float expm1_(float x) {
  const double c = fmin(fmax(double(x), -104.0), 89.0);
  const double t = fma(c, 1.4426950408889634, 0x1.8p52);
  const double n = t - 0x1.8p52;
  uint64_t bits;
  memcpy(&bits, &t, 8);
  bits = (bits << 52) + (uint64_t(1023) << 52);  // n's low bits into the exponent: 2^n
  double s;
  memcpy(&s, &bits, 8);
  const double r = fma(-n, 0.6931471805599453, c);
  // (e^r - 1 - r) / r^2 = 1/2! + r/3! + ... + r^7/9!
  const double q = horner(r, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5);
  const double p = fma(r * r, q, r);
  const float y = float(fma(s, p, s - 1.0));
  return x != x || x == 0 ? x : y;
}
GRADC_HD inline double expm1_(double x) { return ::expm1(x); }
GRADC_HD inline float pow_(float a, float b) { return powf(a, b); }
GRADC_HD inline double pow_(double a, double b) { return ::pow(a, b); }
// i32 operands (the shape rules allow them only where the op is defined on them)
GRADC_HD inline double exp_(int32_t x) { return ::exp(double(x)); }
GRADC_HD inline double log_(int32_t x) { return ::log(double(x)); }
GRADC_HD inline double sqrt_(int32_t x) { return ::sqrt(double(x)); }
GRADC_HD inline double tanh_(int32_t x) { return ::tanh(double(x)); }
GRADC_HD inline double sin_(int32_t x) { return ::sin(double(x)); }
GRADC_HD inline double cos_(int32_t x) { return ::cos(double(x)); }
GRADC_HD inline double erf_(int32_t x) { return ::erf(double(x)); }
GRADC_HD inline double log1p_(int32_t x) { return ::log1p(double(x)); }
GRADC_HD inline double expm1_(int32_t x) { return ::expm1(double(x)); }
GRADC_HD inline double pow_(int32_t a, int32_t b) { return ::pow(double(a), double(b)); }

// i32 arithmetic wraps around (two's complement), as PyTorch's and NumPy's does: C++
// leaves a signed overflow undefined (a compiler may assume it never happens), so the
// ops that can overflow compute an i32 in uint32_t. `integral<T>`: T is i32.
template <class T>
inline constexpr bool integral = T(1) / T(2) == T(0);
template <class T>
GRADC_HD T neg(T x) {
  if constexpr (integral<T>) return T(0u - uint32_t(x));
  return T(-x);
}
template <class T>
GRADC_HD T exp(T x) {
  return T(exp_(x));
}
template <class T>
GRADC_HD T log(T x) {
  return T(log_(x));
}
template <class T>
GRADC_HD T sqrt(T x) {
  return T(sqrt_(x));
}
template <class T>
GRADC_HD T rsqrt(T x) {
  return T(1 / sqrt_(x));
}
template <class T>
GRADC_HD T abs(T x) {
  return x < 0 ? neg(x) : x;
}
template <class T>
GRADC_HD T relu(T x) {  // NaN stays NaN, as PyTorch's
  return x <= 0 ? T(0) : x;
}
template <class T>
GRADC_HD T sigmoid(T x) {
  return T(1 / (1 + exp_(T(-x))));
}
template <class T>
GRADC_HD T tanh(T x) {
  return T(tanh_(x));
}
template <class T>
GRADC_HD T sin(T x) {
  return T(sin_(x));
}
template <class T>
GRADC_HD T cos(T x) {
  return T(cos_(x));
}
template <class T>
GRADC_HD T log1p(T x) {
  return T(log1p_(x));
}
template <class T>
GRADC_HD T expm1(T x) {
  return T(expm1_(x));
}
template <class T>
GRADC_HD T square(T x) {
  if constexpr (integral<T>)
    return T(uint32_t(x) * uint32_t(x));
  else
    return T(mul_(x, x));
}
template <class T>
GRADC_HD T reciprocal(T x) {
  return T(1 / x);
}
template <class T>
GRADC_HD T sign(T x) {
  return T((x > 0) - (x < 0));
}
template <class T>
GRADC_HD T stop_gradient(T x) {
  return x;
}
template <class T>
GRADC_HD T add(T a, T b) {
  if constexpr (integral<T>)
    return T(uint32_t(a) + uint32_t(b));
  else
    return T(add_(a, b));
}
template <class T>
GRADC_HD T sub(T a, T b) {
  if constexpr (integral<T>)
    return T(uint32_t(a) - uint32_t(b));
  else
    return T(sub_(a, b));
}
template <class T>
GRADC_HD T mul(T a, T b) {
  if constexpr (integral<T>)
    return T(uint32_t(a) * uint32_t(b));
  else
    return T(mul_(a, b));
}
template <class T>
GRADC_HD T div(T a, T b) {
  return T(a / b);
}
template <class T>
GRADC_HD T pow(T a, T b) {
  return T(pow_(a, b));
}
// Integer floor division and modulo with Python's signs (-7 // 2 == -4, -7 % 2 == 1).
// A zero divisor is a run-time error that the caller reports; the value is then 0.
// INT32_MIN // -1 wraps to INT32_MIN, as two's complement does.
// (Instantiated for floats by the interpreter's generic loops, never called there.)
template <class T>
GRADC_HD T floordiv(T a, T b) {
  if constexpr (!integral<T>) {
    return T(0);
  } else {
    if (b == 0) return 0;
    if (b == -1) return T(0u - uint32_t(a));
    T q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? T(q - 1) : q;
  }
}
template <class T>
GRADC_HD T mod(T a, T b) {
  if constexpr (!integral<T>) {
    return T(0);
  } else {
    if (b == 0 || b == -1) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? T(r + b) : r;
  }
}
template <class T>
GRADC_HD T erf(T x) {
  return T(erf_(x));
}
// A NaN operand gives NaN, as PyTorch's maximum and minimum (not fmax's rule).
template <class T>
GRADC_HD T maximum(T a, T b) {
  return (a > b || a != a) ? a : b;
}
template <class T>
GRADC_HD T minimum(T a, T b) {
  return (a < b || a != a) ? a : b;
}
// Comparisons give 1 or 0 in the result's float type R.
template <class R, class T>
GRADC_HD R eq(T a, T b) {
  return R(a == b);
}
template <class R, class T>
GRADC_HD R ne(T a, T b) {
  return R(a != b);
}
template <class R, class T>
GRADC_HD R lt(T a, T b) {
  return R(a < b);
}
template <class R, class T>
GRADC_HD R le(T a, T b) {
  return R(a <= b);
}
template <class R, class T>
GRADC_HD R gt(T a, T b) {
  return R(a > b);
}
template <class R, class T>
GRADC_HD R ge(T a, T b) {
  return R(a >= b);
}
template <class T, class C>
GRADC_HD T where(C c, T a, T b) {
  return c != 0 ? a : b;
}
// cast to R: float to i32 saturates (saturate_i32), the rest converts.
template <class R, class T>
GRADC_HD R cast(T x) {
  if constexpr (sizeof(R) == 4 && R(0.5) == R(0) && !(T(0.5) == T(0)))
    return saturate_i32(double(x));
  else
    return R(x);
}
}  // namespace op

// A max or min over axes, as every backend takes it: from max_start or min_start (-inf
// or +inf; the lowest or highest i32 for an integer accumulator), then a step per
// element: a NaN element makes the result NaN, as in NumPy and PyTorch; of equal values
// (0 and -0) the first stays. Exact in any order but for which NaN, or which zero, is
// the result.
template <class A>
GRADC_HD A max_start() {
  if constexpr (A(0.5) == A(0))
    return A(-2147483647 - 1);
  else
    return A(-INFINITY);
}
template <class A>
GRADC_HD A min_start() {
  if constexpr (A(0.5) == A(0))
    return A(2147483647);
  else
    return A(INFINITY);
}
template <class A>
GRADC_HD A max_step(A acc, A x) {
  return (acc < x || x != x) ? x : acc;
}
template <class A>
GRADC_HD A min_step(A acc, A x) {
  return (x < acc || x != x) ? x : acc;
}

}  // namespace gradc
