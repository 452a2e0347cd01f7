// gradc's runtime, the CPU target: kernel bodies in plain loops the host compiler
// vectorises, reductions, OpenBLAS, memory, and the communicator interface the
// ranks' communicators implement (gradc_threads.h, gradc_mpi.h, or an application's
// own). See gradc_common.h.
#pragma once
#include <cblas.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <type_traits>
#include <vector>

#include "gradc_blas.h"
#include "gradc_common.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif
#if defined(__AMX_TILE__)
#include <sys/syscall.h>  // arch_prctl: the tiles' state (amx_gemm)
#include <unistd.h>
#endif

// Two warnings that are the compilers' and not this code's, off in this header only
// (popped at its end): clang's at each loop it leaves scalar that GRADC_VECTORIZE asks it
// to vectorise (a loop that calls a function; any loop at -O0), and GCC 12's inside its
// own AVX-512 intrinsics, which pass an undefined vector as the masked-off source.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wpass-failed"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace gradc {

struct Stream {};    // the CPU runs a rank's kernels in order on its thread
struct Partials {};  // a reduction's partial results: the CPU needs none
inline Partials alloc_partials() { return {}; }
inline void release(Partials) {}

// A kernel's loop iterations are independent: a kernel never writes memory it
// reads (the buffer plan gives its result a place none of its operands has), so
// the compiler may vectorise without checking for overlap. GRADC_VECTORIZE_SUM
// also lets it split a sum into 32 lanes: 16 wide, twice interleaved. Left to choose,
// clang takes the width of the accumulator (8 f64 with AVX-512), so that the f32 work
// of a bf16 sum's terms (widening, product, rounding) ran 8 lanes at a time, on the
// two vector ports a 512-bit accumulator leaves: 16 lanes took a bf16 product's sum
// from 0.40 to 0.27 ns an element in L1 (0.62 to 0.47 with AVX2), an f32 one's from
// 0.16 to 0.14 (Emerald Rapids, 2026-12-02).
#if defined(__clang__)
#define GRADC_VECTORIZE _Pragma("clang loop vectorize(assume_safety)")
#define GRADC_VECTORIZE_SUM _Pragma("clang loop vectorize_width(16) interleave_count(2)")
#elif defined(__GNUC__)
#define GRADC_VECTORIZE _Pragma("GCC ivdep")
#define GRADC_VECTORIZE_SUM
#else
#define GRADC_VECTORIZE
#define GRADC_VECTORIZE_SUM
#endif
// A hint that the cache line at p is read soon: a kernel's gathered reads that move
// ahead in order (take_along_axis's, codegen's prefetch_ahead).
#define GRADC_PREFETCH(p) __builtin_prefetch(p)

// An output of kStreamBytes or more (far past a core's caches) is computed 1 KiB at a
// time into a block that stays in L1, which streaming stores then write out: whole
// 32-byte vectors that go to memory without the cache lines being read first (a
// plain store reads each line before writing it), as memcpy does for large copies.
// The values are the same. The functor is called in two places only (it is
// inlined in each): the first block ends where `out` is 32-byte aligned, so the
// others are whole aligned vectors, and the last may be short.
inline constexpr int64_t kStreamBytes = int64_t(16) << 20;
// A map of one element (a scalar): no loop, so a long chain of scalar ops is not
// compiled again as vector code that would never run.
template <class T, class F>
inline void map_one(Stream, const F& f, T* out) {
  out[0] = f(0);
}
// A map_rows functor's checks of what depends on its row alone, made once a row before
// its elements (codegen/cpp.cpp, split_row_checks): where it has them.
template <class F, class = void>
struct HasCheckRow : std::false_type {};
template <class F>
struct HasCheckRow<F, std::void_t<decltype(&F::check_row)>> : std::true_type {};
template <class F>
inline void check_row(const F& f, int64_t r) {
  if constexpr (HasCheckRow<F>::value) f.check_row(r);
}
#if defined(__AVX__)
// nb elements of a block to `to`: streamed where both are 32-byte aligned, else stored.
template <class T>
inline void put_block(T* to, const T* block, int64_t nb) {
  if (int64_t(sizeof(T)) * nb % 32 == 0 && reinterpret_cast<uintptr_t>(to) % 32 == 0)
    for (int64_t j = 0; j < nb; j += 32 / int64_t(sizeof(T)))
      _mm256_stream_si256(reinterpret_cast<__m256i*>(to + j),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(block + j)));
  else
    memcpy(to, block, size_t(nb) * sizeof(T));
}
template <class T, class F>
inline void stream(int64_t n, const F& f, T* out) {
  constexpr int64_t B = 1024 / int64_t(sizeof(T));
  alignas(32) T block[B];
  const int64_t head = int64_t((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / int64_t(sizeof(T));
  for (int64_t i = 0, nb = 0; i < n; i += nb) {
    nb = i == 0 && head > 0 ? head : n - i < B ? n - i : B;
    GRADC_VECTORIZE
    for (int64_t j = 0; j < nb; ++j) block[j] = f(i + j);
    put_block(out + i, block, nb);
  }
  _mm_sfence();
}
// stream() for map_rows: each block a part of one row, or whole rows where they are
// shorter than a block, so that the place in the row is the inner loop's own index.
template <class T, class F>
inline void stream_rows(int64_t n, int64_t len, const F& f, T* out) {
  constexpr int64_t B = 1024 / int64_t(sizeof(T));
  alignas(32) T block[B];
  if (len >= B) {
    for (int64_t r = 0; r < n / len; ++r) {
      check_row(f, r);
      for (int64_t c = 0; c < len; c += B) {
        const int64_t nb = len - c < B ? len - c : B;
        GRADC_VECTORIZE
        for (int64_t j = 0; j < nb; ++j) block[j] = f(r, c + j);
        put_block(out + r * len + c, block, nb);
      }
    }
  } else {
    const int64_t per = B / len;  // rows to a block
    for (int64_t r0 = 0; r0 < n / len; r0 += per) {
      const int64_t rows = n / len - r0 < per ? n / len - r0 : per;
      for (int64_t k = 0; k < rows; ++k) {
        check_row(f, r0 + k);
        T* row = block + k * len;
        GRADC_VECTORIZE
        for (int64_t j = 0; j < len; ++j) row[j] = f(r0 + k, j);
      }
      put_block(out + r0 * len, block, rows * len);
    }
  }
  _mm_sfence();
}
#endif
template <class T, class F>
inline void map(Stream, int64_t n, const F& f, T* out) {
#if defined(__AVX__)
  if (n * int64_t(sizeof(T)) >= kStreamBytes) return stream(n, f, out);
#endif
  GRADC_VECTORIZE
  for (int64_t i = 0; i < n; ++i) out[i] = f(i);
}
// The same, for a functor that reads at the element's place in its row of `len` (i %
// len: a bias added along rows) or at its row (i / len), n a multiple of len: a loop
// over each row, so that the place in the row is the inner loop's own index, the
// functor's f(r, j) (element j of row r). Over the flat index, clang 19 leaves such a
// loop scalar (it vectorises it only for a count of at most len), without a word:
// gelu(x @ w + b)'s erf took 7.5 ns an element, against 1.2 in rows (16 lanes; 131072
// elements, rows of 512).
template <class T, class F>
inline void map_rows(Stream, int64_t n, int64_t len, const F& f, T* out) {
#if defined(__AVX__)
  if (n * int64_t(sizeof(T)) >= kStreamBytes) return stream_rows(n, len, f, out);
#endif
  for (int64_t r = 0; r < n / len; ++r) {
    check_row(f, r);
    GRADC_VECTORIZE
    for (int64_t j = 0; j < len; ++j) out[r * len + j] = f(r, j);
  }
}

// out[o] = op over r of f(o, r). A sum accumulates in Acc (f64; i64 for i32) and is
// vectorised: clang splits it into L = 32 lanes (GRADC_VECTORIZE_SUM; GCC keeps one),
// each summing every L-th element in order, then adds the lanes; the
// error of a sum of n terms stays within (n / L + log2 L + 1) u sum |x_r|, u the
// accumulator's unit roundoff (2^-53), before the one rounding to T. A max or min is
// exact in any order (max_step, min_step): 16 vector lanes in T, each taking every
// 16th element, then the lanes in order; only which NaN or which zero is the result
// can differ from one pass in order.
// f(o, first + r) for r < n_red reduced, in the accumulator's type.
template <class T, class F>
inline typename Acc<T>::type reduce_part(ROp op, int64_t n_red, const F& f, int64_t o, int64_t first) {
  using A = typename Acc<T>::type;
  if (op == ROp::Sum) {
    A acc = 0;
    GRADC_VECTORIZE_SUM
    for (int64_t r = 0; r < n_red; ++r) acc += A(f(o, first + r));
    return acc;
  }
  constexpr int64_t L = 16;
  const T init = T(reduce_init<A>(op));
  T lane[L];
  for (int64_t j = 0; j < L; ++j) lane[j] = init;
  const int64_t whole = n_red - n_red % L;  // (not r + L <= n_red: GCC then warns of overflow)
  for (int64_t r = 0; r < whole; r += L)
    for (int64_t j = 0; j < L; ++j) {
      const T x = T(f(o, first + r + j));
      lane[j] = op == ROp::Max ? max_step(lane[j], x) : min_step(lane[j], x);
    }
  T acc = init;
  for (int64_t j = 0; j < L; ++j) acc = reduce_step<T>(op, acc, lane[j]);
  for (int64_t r = whole; r < n_red; ++r) acc = reduce_step<T>(op, acc, T(f(o, first + r)));
  return A(acc);
}
template <class T, class F>
inline void reduce_one(ROp op, int64_t n_red, const F& f, int64_t o, T* out) {
  out[o] = T(reduce_part<T>(op, n_red, f, o, 0));
}
template <class T, class F>
inline void reduce(Stream, Partials, ROp op, int64_t n_out, int64_t n_red, const F& f, T* out) {
  for (int64_t o = 0; o < n_out; ++o) reduce_one(op, n_red, f, o, out);
}
// The same where the reduced axes come first (a column sum: element (r, o) at
// r * n_out + o): rows outer, a block of outputs inner, so memory is read in
// order; each output still takes its elements in order of r.
template <class T, class F>
inline void reduce_leading(Stream, Partials, ROp op, int64_t n_out, int64_t n_red, const F& f, T* out) {
  using A = typename Acc<T>::type;
  constexpr int64_t kBlock = 256;
  A acc[kBlock];
  for (int64_t o0 = 0; o0 < n_out; o0 += kBlock) {
    const int64_t nb = n_out - o0 < kBlock ? n_out - o0 : kBlock;
    for (int64_t j = 0; j < nb; ++j) acc[j] = reduce_init<A>(op);
    for (int64_t r = 0; r < n_red; ++r) {
      GRADC_VECTORIZE
      for (int64_t j = 0; j < nb; ++j) acc[j] = reduce_step<A>(op, acc[j], A(f(o0 + j, r)));
    }
    for (int64_t j = 0; j < nb; ++j) out[o0 + j] = T(acc[j]);
  }
}

// A function of one 16-bit value (bf16 or f16) that costs more than a load: its value at
// each of the 65536 values, computed once, when the program is loaded, by the same code
// as a kernel's (one value at a time, with the interpreter's own scalar functions), and
// looked up with one 32-bit load an element (a vector gather) where the kernel reads it
// (codegen's table_lookup). The entries are the values' bits, so every value, NaNs and
// subnormals included, is the one the code gives.
template <class L, class V>
struct Table16 {
  static_assert(sizeof(V) <= 4, "an entry is 32 bits");
  uint32_t entries[65536];
  template <class F>
  explicit Table16(const F& f) {
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
    for (uint32_t u = 0; u < 65536; ++u) {
      const V y = f(L{uint16_t(u)});
      uint32_t e = 0;
      memcpy(&e, &y, sizeof(V));
      entries[u] = e;
    }
  }
  GRADC_FUNCTOR V at(L x) const {
    const uint32_t e = entries[x.bits];
    V y;
    memcpy(&y, &e, sizeof(V));
    return y;
  }
};

// A row group: per row, every member on that row in turn (the row stays in cache).
template <class T, class F>
struct MapRow {
  int64_t len;
  F f;
  T* out;
  int64_t stride = len;      // where row r is written: at out + r * stride (a row-local buffer's: 0)
  int64_t end = kWholeRows;  // a group of tiles: the elements in all (the last row may be short)
  void row(int64_t r) const { fill(out + r * stride, r, row_count(r, len, end)); }
  // The row's elements are written through a pointer nothing else reads: what
  // depends on the row alone (a row's sum, and what is computed from it) is
  // computed once per row, outside the loop.
  void fill(T* __restrict o, int64_t r, int64_t n) const {
    GRADC_VECTORIZE
    for (int64_t j = 0; j < n; ++j) o[j] = f(r, j);
  }
};
template <class T, class F>
struct ReduceRow {
  ROp op;
  int64_t len;
  F f;
  T* out;
  void row(int64_t r) const { reduce_one(op, len, f, r, out); }
};
// A group of tiles' reduction to one element (a loss's sum): each tile reduced as
// reduce_one reduces a row (its functor takes the tile and the flat element), its part
// added to the total in tile order, the total written at the last tile. A sum of n
// elements in tiles of len so stays within (len / L + log2 L + 1 + n / len) u sum |x_r|
// (reduce_one's bound, u the accumulator's unit roundoff).
template <class T, class F>
struct TileReduce {
  using A = typename Acc<T>::type;
  ROp op;
  int64_t len;
  F f;
  T* out;
  int64_t end;
  mutable A total = A(0);
  void row(int64_t r) const {
    const A part = reduce_part<T>(op, row_count(r, len, end), f, r, r * len);
    total = r == 0 ? part : reduce_step<A>(op, total, part);
    if ((r + 1) * len >= end) *out = T(total);
  }
};
template <class T, class F>
TileReduce<T, F> tile_reduce(ROp op, int64_t len, const F& f, T* out, int64_t end) {
  return {op, len, f, out, end};
}
// A result of kStreamBytes or more that no later member reads: each row streamed out.
template <class T, class F>
struct StreamRow {
  int64_t rows, len;
  F f;
  T* out;
  int64_t end = kWholeRows;
  void row(int64_t r) const {
#if defined(__AVX__)
    if (rows * len * int64_t(sizeof(T)) >= kStreamBytes)
      return stream(row_count(r, len, end), [&](int64_t j) { return f(r, j); }, out + r * len);
#endif
    MapRow<T, F>{len, f, out, len, end}.row(r);
  }
};
// A row-local buffer (LBuffer::row_local): each row written where the last was.
template <class T, class F>
MapRow<T, F> local_row(int64_t len, const F& f, T* out, int64_t end = kWholeRows) {
  return MapRow<T, F>{len, f, out, 0, end};
}
template <class... S>
inline void rows(Stream, int64_t n_rows, const S&... steps) {
  for (int64_t r = 0; r < n_rows; ++r) (steps.row(r), ...);
}

// C[b] = alpha op(A[b]) op(B[b]), row-major, for b < batch.
// The BLAS calls' state, one per program (per rank): the f32 copies that a call of
// bf16 or f16 operands widens them into, grown to the largest call. Made with the
// program's class, before its first matmul: OpenBLAS's kernels are chosen then
// (gradc_blas.h), once a process.
struct Blas {
  Blas() { choose_blas_kernels(); }
  std::vector<float> a, b;
  std::vector<uint32_t> pa, pb;  // gemm_bf16's packed operands (and amx's B)
  std::vector<uint16_t> a16;     // amx's packed A
};
template <class T>
inline void gemm(Blas&, Stream, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t sa, const T* b,
                 int64_t sb, T* c, int64_t batch, T alpha = T(1)) {
  for (int64_t p = 0; p < batch; ++p) {
    const T* A = a + p * sa;
    const T* B = b + p * sb;
    T* C = c + p * m * n;
    if constexpr (sizeof(T) == 4 && T(0.5) != T(0)) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                  alpha, A, int(ta ? m : k), B, int(tb ? k : n), 0.0f, C, int(n));
    } else if constexpr (sizeof(T) == 8) {
      cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
                  alpha, A, int(ta ? m : k), B, int(tb ? k : n), 0.0, C, int(n));
    } else {  // i32: no BLAS routine
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          T s = 0;
          for (int64_t q = 0; q < k; ++q) s += A[ta ? q * m + i : i * k + q] * B[tb ? j * k + q : q * n + j];
          C[i * n + j] = s;
        }
    }
  }
}

// bf16 or f16 operands, an f32 result (lowered matmuls of widened 16-bit buffers):
// the operands widened to f32 here, once a call, then sgemm, as the interpreter
// multiplies their f32 values.
template <class L>
inline void gemm_widened(Blas& h, Stream s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const L* a, int64_t sa,
                         const L* b, int64_t sb, float* c, int64_t batch, float alpha) {
  auto widen = [](std::vector<float>& w, const L* x, int64_t count) {
    if (int64_t(w.size()) < count) w.resize(size_t(count));
    for (int64_t i = 0; i < count; ++i) w[size_t(i)] = to_float(x[i]);
  };
  widen(h.a, a, sa ? sa * batch : m * k);
  widen(h.b, b, sb ? sb * batch : k * n);
  gemm(h, s, ta, tb, m, n, k, h.a.data(), sa, h.b.data(), sb, c, batch, alpha);
}
#if defined(__AVX2__)
// An 8 x 8 transpose of 32-bit lanes: lane j of r[i] becomes lane i of r[j].
inline void transpose8x8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#endif
#if defined(__AVX512BF16__) && defined(__AVX512F__)
// bf16 operands on a CPU with AVX512-BF16: vdpbf16ps multiplies a pair of bf16 values
// in each f32 lane exactly and adds the products to the lane one after the other
// (the high half's first), each sum rounded to nearest even. With k's even element in
// the high half and every slab of k continuing from C's sums, each C element is the
// sequential f32 sum over k that sgemm's kernels compute within one of their k blocks,
// so small matmuls give sgemm's bits and large ones are within the f32 summation-order
// tolerance. Subnormal bf16 operands and products count as zero (the instruction's
// own rule). Debian's OpenBLAS has no sbgemm, so this is gradc's: the blocking of
// GotoBLAS (a KC-deep slab of B packed in panels of NR columns, MC rows of A in panels
// of MR, a register tile of MR x NR), each packed element a pair of k-adjacent values
// (zero past the edges). About 3.5x sgemm on a Zen 5 core (bench/README.md).
namespace bf16_gemm {
constexpr int64_t MR = 8, NR = 32, KC = 384, MC = 96, NC = 2048;  // KC even

// op(X)[row, q] for X [rows, k] row-major, or [k, rows] transposed
inline uint32_t at(const uint16_t* x, bool t, int64_t rows, int64_t k, int64_t row, int64_t q) {
  return t ? x[q * rows + row] : x[row * k + q];
}
// The first `pairs` or a multiple of 8 of them (returned) of a panel with no rows past
// the edge, for X not transposed (pairs contiguous along each row): 8 rows' next 8
// pairs, halves swapped, transposed; the same words as pack's loop.
inline int64_t pack_rows(const uint16_t* x, int64_t k, int64_t r0, int64_t width, int64_t q0, int64_t pairs,
                         uint32_t* out) {
  int64_t p = 0;
  for (; p + 8 <= pairs; p += 8)
    for (int64_t r = 0; r < width; r += 8) {
      __m256 v[8];
      for (int64_t i = 0; i < 8; ++i) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + (r0 + r + i) * k + q0 + 2 * p));
        v[i] = _mm256_castsi256_ps(_mm256_or_si256(_mm256_slli_epi32(w, 16), _mm256_srli_epi32(w, 16)));
      }
      transpose8x8(v);
      for (int64_t i = 0; i < 8; ++i) _mm256_storeu_ps(reinterpret_cast<float*>(out + (p + i) * width + r), v[i]);
    }
  return p;
}
// `width` rows of op(X) (panel rows past `real` zero) over k pairs from q0 into
// out[pair * width + row]: A's panels (rows of op(A)) and B's (columns of op(B), which
// are rows of op(B)^T, so `t` is flipped by the caller)
inline void pack(const uint16_t* x, bool t, int64_t rows, int64_t k, int64_t r0, int64_t real, int64_t width,
                 int64_t q0, int64_t kc, uint32_t* out) {
  const int64_t done = real == width && !t ? pack_rows(x, k, r0, width, q0, kc / 2, out) : 0;
  for (int64_t p = done; p < (kc + 1) / 2; ++p) {
    const int64_t q = q0 + 2 * p;
    const bool odd = 2 * p + 1 < kc;
    for (int64_t r = 0; r < width; ++r)
      out[p * width + r] =
          r >= real ? 0u : at(x, t, rows, k, r0 + r, q) << 16 | (odd ? at(x, t, rows, k, r0 + r, q + 1) : 0u);
  }
}
// `count` rows of op(X) from r0 into panels of `width` rows (the panel of rows rr..
// at out + rr * kp). X transposed: rows of op(X) are contiguous in X, so each pair of
// X's rows is read once, in full, for every whole panel (two X rows' 8 values
// interleave into 8 pairs); the rest as pack's.
inline void pack_panels(const uint16_t* x, bool t, int64_t rows, int64_t k, int64_t r0, int64_t count, int64_t width,
                        int64_t q0, int64_t kc, uint32_t* out) {
  const int64_t kp = (kc + 1) / 2, whole = t ? count / width * width : 0;
  for (int64_t p = 0; whole > 0 && p < kc / 2; ++p) {  // (no whole panels: nothing to interleave)
    const uint16_t* even = x + (q0 + 2 * p) * rows + r0;
    for (int64_t r = 0; r < whole; r += 8) {
      const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + r));
      const __m128i o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + rows + r));
      uint32_t* to = out + r / width * width * kp + p * width + r % width;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to), _mm_unpacklo_epi16(o, e));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to + 4), _mm_unpackhi_epi16(o, e));
    }
  }
  for (int64_t rr = 0; rr < count; rr += width) {
    const int64_t real = count - rr < width ? count - rr : width;
    if (rr < whole) {  // the last pair where kc is odd
      if (kc % 2) pack(x, t, rows, k, r0 + rr, real, width, q0 + kc - 1, 1, out + rr * kp + (kp - 1) * width);
      continue;
    }
    pack(x, t, rows, k, r0 + rr, real, width, q0, kc, out + rr * kp);
  }
}
// C's MR x NR tile (mr x nr of it real) from kp pairs: the first slab's sums start
// from zero, the others' from C's; the last slab scales by alpha
inline void tile(int64_t kp, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc, int64_t mr, int64_t nr,
                 bool first, bool last, float alpha) {
  const __mmask16 mask[2] = {__mmask16(nr >= 16 ? 0xFFFFu : (1u << nr) - 1),
                             __mmask16(nr >= 32   ? 0xFFFFu
                                       : nr <= 16 ? 0u
                                                  : (1u << (nr - 16)) - 1)};
  __m512 acc[MR][2];
  for (int64_t r = 0; r < MR; ++r)
    for (int h = 0; h < 2; ++h)
      acc[r][h] = first || r >= mr ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask[h], c + r * ldc + 16 * h);
  for (int64_t p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * NR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * NR + 16);
    for (int64_t r = 0; r < MR; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(ap[p * MR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  for (int64_t r = 0; r < mr; ++r)
    for (int h = 0; h < 2; ++h)
      _mm512_mask_storeu_ps(c + r * ldc + 16 * h, mask[h],
                            last && alpha != 1.0f ? _mm512_mul_ps(acc[r][h], _mm512_set1_ps(alpha)) : acc[r][h]);
}
inline void gemm(Blas& h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b,
                 float* c, float alpha) {
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0;
    return;
  }
  const int64_t kp_max = (KC + 1) / 2;
  h.pb.resize(size_t((((NC < n ? NC : n) + NR - 1) / NR) * NR * kp_max));
  h.pa.resize(size_t(((MC + MR - 1) / MR) * MR * kp_max));
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = n - jc < NC ? n - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = k - pc < KC ? k - pc : KC, kp = (kc + 1) / 2;
      pack_panels(b, !tb, n, k, jc, nc, NR, pc, kc, h.pb.data());
      for (int64_t ic = 0; ic < m; ic += MC) {
        const int64_t mc = m - ic < MC ? m - ic : MC;
        pack_panels(a, ta, m, k, ic, mc, MR, pc, kc, h.pa.data());
        for (int64_t jr = 0; jr < nc; jr += NR)
          for (int64_t ir = 0; ir < mc; ir += MR)
            tile(kp, h.pa.data() + ir * kp, h.pb.data() + jr * kp, c + (ic + ir) * n + jc + jr, n,
                 mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR, pc == 0, pc + KC >= k, alpha);
      }
    }
  }
}
}  // namespace bf16_gemm
#endif
#if defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__AVX512BW__)
// bf16 operands on a CPU with AMX (an Intel Xeon from Sapphire Rapids on): TDPBF16PS
// multiplies a 16 x 32 tile of A by a 32 x 16 tile of B (k's pairs side by side) into a
// 16 x 16 tile of f32 sums, the products exact and added in f32 in an order of the
// unit's own, subnormal operands and sums counting as zero: within the f32
// summation-order tolerance of sgemm's, not its bits. A 32 x 32 block of C is four tiles
// in the unit's 8 registers, with two of A and two of B (four tile loads for four
// products, 548 GFLOP/s from L1 on an Emerald Rapids core, where the products alone
// run at 1080). The blocking is bf16_gemm's: a KC-deep slab of op(B) packed in panels of
// 16 columns (a row per pair of k, its 16 columns' pairs, k's even value in the low
// half), MC rows of op(A) in rows of the slab's k values, both zero past the edges
// (op(A)'s rows are copied; a transposed operand's are made by 16 x 16 transposes of
// pairs). Linux gives a process the tiles' state once asked (arch_prctl), once; where
// it refuses, the kernel above or sgemm runs.
namespace amx_gemm {
constexpr int64_t KC = 384, MC = 128, NC = 1024;  // KC a multiple of 32
inline bool usable() {
  static const bool ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
  return ok;
}
// 16 x 16 32-bit lanes: lane j of r[i] becomes lane i of r[j]
inline void transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xDD);
  }
}
// 16 values at x (`n` of them real, 0 to 16) and the 16 at x2 (present when `second`)
// as 16 pairs, x's in the low halves: two k-adjacent values of 16 rows or columns.
inline __m512i pairs16(const uint16_t* x, const uint16_t* x2, int64_t n, bool first, bool second) {
  const __mmask16 m = __mmask16((1u << n) - 1);
  const __m256i e = first ? _mm256_maskz_loadu_epi16(m, x) : _mm256_setzero_si256();
  const __m256i o = second ? _mm256_maskz_loadu_epi16(m, x2) : _mm256_setzero_si256();
  return _mm512_or_si512(_mm512_cvtepu16_epi32(e), _mm512_slli_epi32(_mm512_cvtepu16_epi32(o), 16));
}
// op(A)'s rows r0 .. r0 + count - 1 (count rounded up to 16) over k from q0, kc of them,
// into out[row * kcp + q] (kcp: kc rounded up to 32), zero past the edges. A is
// [rows, k] row-major, or [k, rows] where t.
inline void pack_a(const uint16_t* x, bool t, int64_t rows, int64_t k, int64_t r0, int64_t count, int64_t q0,
                   int64_t kc, int64_t kcp, uint16_t* out) {
  const int64_t padded = (count + 15) / 16 * 16;
  if (!t) {
    for (int64_t r = 0; r < padded; ++r) {
      const int64_t real = r < count ? kc : 0;
      if (real) memcpy(out + r * kcp, x + (r0 + r) * k + q0, size_t(real) * 2);
      memset(out + r * kcp + real, 0, size_t(kcp - real) * 2);
    }
    return;
  }
  for (int64_t rb = 0; rb < padded; rb += 16) {  // 16 rows' 16 pairs at a time: pairs of A's rows, transposed
    const int64_t n = count - rb < 16 ? count - rb : 16;
    for (int64_t pb = 0; pb < kcp / 2; pb += 16) {
      __m512i v[16];
      for (int64_t i = 0; i < 16; ++i) {
        const int64_t q = 2 * (pb + i);
        v[i] = pairs16(x + (q0 + q) * rows + r0 + rb, x + (q0 + q + 1) * rows + r0 + rb, n, q < kc, q + 1 < kc);
      }
      transpose16x16(v);
      for (int64_t r = 0; r < 16; ++r) _mm512_storeu_si512(out + (rb + r) * kcp + 2 * pb, v[r]);
    }
  }
}
// op(B)'s columns c0 .. c0 + count - 1 over k from q0, kc of them, in panels of 16
// columns, [kcp / 2][16] pairs each (op(B)[q0 + 2p][c] in the low half of pair p's
// column c, op(B)[q0 + 2p + 1][c] in the high), zero past the edges. B is [k, cols]
// row-major, or [cols, k] where t.
inline void pack_b(const uint16_t* x, bool t, int64_t cols, int64_t k, int64_t c0, int64_t count, int64_t q0,
                   int64_t kc, int64_t kcp, uint32_t* out) {
  const int64_t np = kcp / 2;
  for (int64_t cb = 0; cb < count; cb += 16) {
    const int64_t n = count - cb < 16 ? count - cb : 16;
    uint32_t* panel = out + cb * np;
    if (!t) {
      for (int64_t p = 0; p < np; ++p)
        _mm512_storeu_si512(panel + p * 16,
                            pairs16(x + (q0 + 2 * p) * cols + c0 + cb, x + (q0 + 2 * p + 1) * cols + c0 + cb, n,
                                    2 * p < kc, 2 * p + 1 < kc));
      continue;
    }
    for (int64_t pb = 0; pb < np; pb += 16) {  // a pair is 32 bits of a row of B: 16 rows' 16 pairs, transposed
      const int64_t left = kc - 2 * pb;
      const __mmask32 m = left >= 32 ? ~__mmask32(0) : left > 0 ? __mmask32((1u << left) - 1) : 0;
      __m512i v[16];
      for (int64_t i = 0; i < 16; ++i)
        v[i] = i < n ? _mm512_maskz_loadu_epi16(m, x + (c0 + cb + i) * k + q0 + 2 * pb) : _mm512_setzero_si512();
      transpose16x16(v);
      for (int64_t p = 0; p < 16; ++p) _mm512_storeu_si512(panel + (pb + p) * 16, v[p]);
    }
  }
}
// C's 32 x 32 block at c (rows x cols of it real; ldc its row stride) from the packed A
// rows a (row stride kcp) and B panels b: tiles 4 to 7 are C's, 0 and 1 A's, 2 and 3
// B's. The first slab's sums start from zero, the others' from C's.
inline void block(const uint16_t* a, const uint32_t* b, int64_t kcp, float* c, int64_t ldc, int64_t rows, int64_t cols,
                  bool first) {
  alignas(64) float part[32 * 32];  // a block past C's edges
  const bool whole = rows == 32 && cols == 32;
  float* const at = whole ? c : part;
  const int64_t ld = whole ? ldc : 32;
  if (first) {
    _tile_zero(4);  // (GCC's tile intrinsics are statements: no comma between them)
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
  } else {
    if (!whole)
      for (int64_t r = 0; r < 32; ++r)
        for (int64_t q = 0; q < 32; ++q) part[r * 32 + q] = r < rows && q < cols ? c[r * ldc + q] : 0.0f;
    _tile_loadd(4, at, ld * 4);
    _tile_loadd(5, at + 16, ld * 4);
    _tile_loadd(6, at + 16 * ld, ld * 4);
    _tile_loadd(7, at + 16 * ld + 16, ld * 4);
  }
  const int64_t np = kcp / 2;
  for (int64_t q = 0; q < kcp; q += 32) {
    _tile_loadd(0, a + q, kcp * 2);
    _tile_loadd(2, b + q / 2 * 16, 64);
    _tile_dpbf16ps(4, 0, 2);
    if (cols > 16) {
      _tile_loadd(3, b + 16 * np + q / 2 * 16, 64);
      _tile_dpbf16ps(5, 0, 3);
    }
    if (rows > 16) {
      _tile_loadd(1, a + 16 * kcp + q, kcp * 2);
      _tile_dpbf16ps(6, 1, 2);
      if (cols > 16) _tile_dpbf16ps(7, 1, 3);
    }
  }
  _tile_stored(4, at, ld * 4);
  _tile_stored(5, at + 16, ld * 4);
  _tile_stored(6, at + 16 * ld, ld * 4);
  _tile_stored(7, at + 16 * ld + 16, ld * 4);
  if (!whole)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t q = 0; q < cols; ++q) c[r * ldc + q] = part[r * 32 + q];
}
inline void gemm(Blas& h, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const uint16_t* a, const uint16_t* b,
                 float* c, float alpha) {
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0;
    return;
  }
  h.a16.resize(size_t(MC * KC));
  h.pb.resize(size_t((NC < n ? NC : (n + 15) / 16 * 16) * KC / 2));
  struct {
    uint8_t palette = 1, start = 0, reserved[14] = {};
    uint16_t bytes[16] = {64, 64, 64, 64, 64, 64, 64, 64};  // 8 tiles of 16 rows of 64 bytes
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } config;
  _tile_loadconfig(&config);
  for (int64_t jc = 0; jc < n; jc += NC) {
    const int64_t nc = n - jc < NC ? n - jc : NC;
    for (int64_t pc = 0; pc < k; pc += KC) {
      const int64_t kc = k - pc < KC ? k - pc : KC, kcp = (kc + 31) / 32 * 32;
      pack_b(b, tb, n, k, jc, nc, pc, kc, kcp, h.pb.data());
      for (int64_t ic = 0; ic < m; ic += MC) {
        const int64_t mc = m - ic < MC ? m - ic : MC;
        pack_a(a, ta, m, k, ic, mc, pc, kc, kcp, h.a16.data());
        for (int64_t jr = 0; jr < nc; jr += 32)
          for (int64_t ir = 0; ir < mc; ir += 32)
            block(h.a16.data() + ir * kcp, h.pb.data() + jr * (kcp / 2), kcp, c + (ic + ir) * n + jc + jr, n,
                  mc - ir < 32 ? mc - ir : 32, nc - jr < 32 ? nc - jr : 32, pc == 0);
      }
    }
  }
  _tile_release();  // the thread's tile state, for its next context switch
  if (alpha != 1.0f)
    for (int64_t i = 0; i < m * n; ++i) c[i] *= alpha;
}
}  // namespace amx_gemm
#endif
// bf16 operands, an f32 result: AMX's kernel where the CPU has it (and the process may
// use it), else AVX512-BF16's, else sgemm on the operands widened.
inline void gemm(Blas& h, Stream s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bfloat16* a, int64_t sa,
                 const bfloat16* b, int64_t sb, float* c, int64_t batch, float alpha = 1) {
#if defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__AVX512BW__)
  if (amx_gemm::usable()) {
    for (int64_t p = 0; p < batch; ++p)
      amx_gemm::gemm(h, ta, tb, m, n, k, &a[p * sa].bits, &b[p * sb].bits, c + p * m * n, alpha);
    return;
  }
#endif
#if defined(__AVX512BF16__) && defined(__AVX512F__)
  (void)s;
  for (int64_t p = 0; p < batch; ++p)
    bf16_gemm::gemm(h, ta, tb, m, n, k, &a[p * sa].bits, &b[p * sb].bits, c + p * m * n, alpha);
#else
  gemm_widened(h, s, ta, tb, m, n, k, a, sa, b, sb, c, batch, alpha);
#endif
}
inline void gemm(Blas& h, Stream s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float16* a, int64_t sa,
                 const float16* b, int64_t sb, float* c, int64_t batch, float alpha = 1) {
  gemm_widened(h, s, ta, tb, m, n, k, a, sa, b, sb, c, batch, alpha);
}

#if defined(__AVX2__)
// 8 rows of f32 (each `n` long, `stride` apart) summed along the rows together: an 8x8
// transpose puts element s of the 8 rows in one vector, added to their running sums
// (in double) and rounded once, and a transpose back stores them. Each row's
// additions are the scalar loop's, in the same order.
// The 8 rows' running sums in double: one vector of 8 with AVX-512, else two of 4.
struct Sums8 {
#if defined(__AVX512F__)
  __m512d v = _mm512_setzero_pd();
  // adds element s of the 8 rows; their sums rounded to f32
  __m256 add(__m256 x) {
    v = _mm512_add_pd(v, _mm512_cvtps_pd(x));
    return _mm512_cvtpd_ps(v);
  }
  void get(double* a) const { _mm512_storeu_pd(a, v); }
  void set(const double* a) { v = _mm512_loadu_pd(a); }
#else
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  __m256 add(__m256 x) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
  }
  void get(double* a) const { _mm256_storeu_pd(a, lo), _mm256_storeu_pd(a + 4, hi); }
  void set(const double* a) { lo = _mm256_loadu_pd(a), hi = _mm256_loadu_pd(a + 4); }
#endif
};
// Element s of the 8 rows (the ends that are not a whole 8x8 block).
inline void cumsum_8x1(int64_t s, int64_t stride, const float* in, float* out, Sums8& sums) {
  double acc[8];
  sums.get(acc);
  for (int k = 0; k < 8; ++k) {
    acc[k] += double(in[k * stride + s]);
    out[k * stride + s] = float(acc[k]);
  }
  sums.set(acc);
}
// 8 rows of `n` summed along the rows (from their ends with Reverse), 8 elements of each
// at a time. With Stream (`out`'s rows 32-byte aligned), a row's two halves of a 64-byte
// line are written by two streaming stores one after the other, the half that comes
// first held until the other comes (in registers: held in memory, through a helper's
// pointer, the forward sums took 40 times as long on an Intel Xeon), so that every line
// is streamed whole; a half line at a row's ends, which the next or the previous row
// shares, is a plain store. Streamed as each half line came, 8 rows' lines open at once
// (likely more than the write-combining buffers hold), that Xeon took 2 to 7 times as
// long as with plain stores (docs/codegen.md, `loop`). `next`: the next 8 rows (or
// null), fetched as these are summed (a line of each per 16 elements, 64 elements past
// these rows' current ones), so that their sums find most of them in cache: 10^7 f32
// along rows of 1000 took 3.3 ms a pass instead of 3.6 on a Zen 4 (a stand-alone loop).
template <bool Reverse, bool Stream>
inline void cumsum_rows8(int64_t n, const float* in, float* out, const float* next) {
  Sums8 sums;
  __m256 held[8];
  const int64_t whole = n / 8 * 8;
  if (Reverse)
    for (int64_t s = n - 1; s >= whole; --s) cumsum_8x1(s, n, in, out, sums);
  for (int64_t i = 0; i < whole; i += 8) {
    const int64_t s0 = Reverse ? whole - 8 - i : i;
    if (next && i % 16 == 0) {
      const int64_t at = Reverse ? s0 - 64 : s0 + 64;
      if (at >= 0 && at < n)
        for (int k = 0; k < 8; ++k) __builtin_prefetch(next + k * n + at);
    }
    __m256 r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(in + k * n + s0);
    transpose8x8(r);
    for (int k = 0; k < 8; ++k) r[Reverse ? 7 - k : k] = sums.add(r[Reverse ? 7 - k : k]);
    transpose8x8(r);
    for (int k = 0; k < 8; ++k) {
      float* p = out + k * n + s0;
      const bool upper = reinterpret_cast<uintptr_t>(p) % 64 != 0;  // the line's second half
      if (!Stream || (upper ? s0 < 8 : s0 + 16 > n)) {              // the other half is another row's
        _mm256_storeu_ps(p, r[k]);
      } else if (upper == Reverse) {  // the other half comes next
        held[k] = r[k];
      } else {
        _mm256_stream_ps(upper ? p - 8 : p, upper ? held[k] : r[k]);
        _mm256_stream_ps(upper ? p : p + 8, upper ? r[k] : held[k]);
      }
    }
  }
  if (!Reverse)
    for (int64_t s = whole; s < n; ++s) cumsum_8x1(s, n, in, out, sums);
}
#endif

// Loops down each column of [outer, n, inner], a column's elements in order (the
// interpreter's order: every backend gives the same values).
// out = running sums of in down each column (from its end with reverse), summed in
// the accumulator type and rounded once per element. Columns side by side: inner
// ones 64 at a time (contiguous loads, vectorised; a large result not in place is
// written with streaming stores, as map's); for short rows, 8 columns at a time, so
// that their chains of additions overlap.
template <class T>
inline void cumsum(Stream, int64_t outer, int64_t n, int64_t inner, int64_t reverse, const T* in, T* out) {
  using A = typename Acc<T>::type;
  const int64_t step = reverse ? -inner : inner, first = reverse ? (n - 1) * inner : 0;
  if (inner >= 16) {
    constexpr int64_t W = 64;
#if defined(__AVX__)
    const bool stream = out != in && outer * n * inner * int64_t(sizeof(T)) >= kStreamBytes;
#endif
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i0 = 0; i0 < inner; i0 += W) {
        const int64_t w = inner - i0 < W ? inner - i0 : W;
        A acc[W] = {};
        int64_t e = o * n * inner + first + i0;
        for (int64_t s = 0; s < n; ++s, e += step) {
#if defined(__AVX__)
          if (stream && w == W && reinterpret_cast<uintptr_t>(out + e) % 32 == 0) {
            alignas(32) T row[W];
            for (int64_t i = 0; i < W; ++i) {
              acc[i] += A(in[e + i]);
              row[i] = T(acc[i]);
            }
            for (int64_t j = 0; j < W; j += 32 / int64_t(sizeof(T)))
              _mm256_stream_si256(reinterpret_cast<__m256i*>(out + e + j),
                                  _mm256_load_si256(reinterpret_cast<const __m256i*>(row + j)));
            continue;
          }
#endif
          for (int64_t i = 0; i < w; ++i) {
            acc[i] += A(in[e + i]);
            out[e + i] = T(acc[i]);
          }
        }
      }
#if defined(__AVX__)
    if (stream) _mm_sfence();
#endif
    return;
  }
  constexpr int64_t W = 8;
  const int64_t columns = outer * inner;
  int64_t c0 = 0;
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>)
    if (inner == 1) {  // rows: 8 at a time, as vectors; a large result streamed where rows are aligned
      if (out != in && outer * n * int64_t(sizeof(T)) >= kStreamBytes && n % 8 == 0 &&
          reinterpret_cast<uintptr_t>(out) % 32 == 0) {
        for (; c0 + W <= columns; c0 += W) {
          const float* next = c0 + 2 * W <= columns ? in + (c0 + W) * n : nullptr;
          reverse ? cumsum_rows8<true, true>(n, in + c0 * n, out + c0 * n, next)
                  : cumsum_rows8<false, true>(n, in + c0 * n, out + c0 * n, next);
        }
        _mm_sfence();
      }
      for (; c0 + W <= columns; c0 += W) {
        const float* next = c0 + 2 * W <= columns ? in + (c0 + W) * n : nullptr;
        reverse ? cumsum_rows8<true, false>(n, in + c0 * n, out + c0 * n, next)
                : cumsum_rows8<false, false>(n, in + c0 * n, out + c0 * n, next);
      }
    }
#endif
  for (; c0 < columns; c0 += W) {
    const int64_t w = columns - c0 < W ? columns - c0 : W;
    A acc[W] = {};
    int64_t e[W] = {};
    for (int64_t c = 0; c < w; ++c) e[c] = (c0 + c) / inner * n * inner + (c0 + c) % inner + first;
    for (int64_t s = 0; s < n; ++s)
      for (int64_t c = 0; c < w; ++c) {
        acc[c] += A(in[e[c]]);
        out[e[c]] = T(acc[c]);
        e[c] += step;
      }
  }
}
#if defined(__AVX__)
// scatter_add's rows (an index per element) where the result is large: each row in a
// block that stays in L1, x's row copied in, the row's indices checked first (vector
// compares; one by one, in order, only in a row with a bad one), the adds made there in
// order, then the block written out with streaming stores (no line of `out` read first)
// as x's next row is copied into the other block, one pass; the next rows of x, idx and
// src are fetched a row ahead. A block holds its row at the row's offset in its first
// 64-byte line of `out`, after the previous row's last elements in that line (carried
// over), so that every line is streamed whole, once; the result's first and last
// lines, which may be shared with other memory, take plain stores. Where the adds go
// straight into `out`, each row's lines are read before they are written, and the
// loads wait on memory between rows.
inline constexpr int64_t kScatterRowBytes = 8192;
// The adds of elements j0 .. j1 - 1 of a row whose indices are in range, in order, two
// at a time: one 64-bit load takes two indices (and in f32 two values), where a load
// each made four memory operations an element, more than the three a cycle the core
// issues (in L1: 0.33 against 0.45 ns an element, Zen 4).
template <class T>
inline void scatter_add_in_order(T* row, const int32_t* k, const T* from, int64_t j0, int64_t j1) {
  int64_t j = j0;
  for (; j + 2 <= j1; j += 2) {
    uint64_t two;
    memcpy(&two, k + j, 8);
    const int32_t k0 = int32_t(uint32_t(two)), k1 = int32_t(two >> 32);
    if constexpr (std::is_same_v<T, float>) {
      const __m128 v = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(from + j)));
      row[k0] = op::add(row[k0], _mm_cvtss_f32(v));
      row[k1] = op::add(row[k1], _mm_cvtss_f32(_mm_movehdup_ps(v)));
    } else {
      row[k0] = op::add(row[k0], from[j]);
      row[k1] = op::add(row[k1], from[j + 1]);
    }
  }
  if (j < j1) row[k[j]] = op::add(row[k[j]], from[j]);
}
template <class T, class Check>
inline void scatter_add_rows(int64_t outer, int64_t n, int64_t m, const T* x, const int32_t* idx, const T* src, T* out,
                             const Check& bad) {
  const uint64_t len = uint64_t(n);               // an index k is in range when uint64_t(k) < len
  constexpr int64_t E = 64 / int64_t(sizeof(T));  // elements in a line
  alignas(64) T blocks[2][kScatterRowBytes / sizeof(T) + E];
  T* cur = blocks[0];
  T* next = blocks[1];
  int64_t a = int64_t(reinterpret_cast<uintptr_t>(out) % 64) / int64_t(sizeof(T));  // the row's offset in its line
  memcpy(cur + a, x, size_t(n) * sizeof(T));
  for (int64_t o = 0; o < outer; ++o) {
    const int32_t* k = idx + o * m;
    const T* from = src + o * m;
    const bool ahead = o + 1 < outer;
    const char* next_x = reinterpret_cast<const char*>(x + (o + 1) * n);
    const char* const next_x_end = next_x + n * int64_t(sizeof(T));
    T* row = cur + a;
    uint32_t out_of_range = 0;  // the row's indices checked at once (vector compares)
    for (int64_t j = 0; j < m; ++j) out_of_range |= uint32_t(k[j]) >= uint32_t(len);
    for (int64_t j0 = 0; j0 < m; j0 += 16) {
      if (ahead) {  // a line of each of the next rows per 16 elements
        __builtin_prefetch(k + m + j0);
        __builtin_prefetch(from + m + j0);
        if constexpr (sizeof(T) > 4) __builtin_prefetch(from + m + j0 + 8);
        if (next_x < next_x_end) __builtin_prefetch(next_x);
        next_x += 64;
      }
      const int64_t j1 = m - j0 < 16 ? m : j0 + 16;
      if (!out_of_range) {
        scatter_add_in_order(row, k, from, j0, j1);
        continue;
      }
      for (int64_t j = j0; j < j1; ++j)
        if (uint64_t(int64_t(k[j])) < len)
          row[k[j]] = op::add(row[k[j]], from[j]);
        else
          bad(k[j], o * m + j);
    }
    const int64_t end = a + n, lines = end / E, next_a = end % E;
    const int64_t line = o * n - a;  // where the row's first line starts in `out`: 64-byte aligned
    const T* nx = x + (o + 1) * n;
    int64_t l = 0, copied = 0;  // lines written, elements of x's next row copied
    if (o == 0 && a > 0) {      // the result's first line: the elements before it are not ours
      memcpy(out, row, size_t(E - a) * sizeof(T));
      l = 1;
    }
    for (; l < lines; ++l) {
      const __m256i lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(cur + l * E));
      const __m256i hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(cur + l * E + E / 2));
      if (ahead && copied + E <= n) {
        memcpy(next + next_a + copied, nx + copied, 64);
        copied += E;
      }
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + (line + l * E)), lo);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out + (line + l * E + E / 2)), hi);
    }
    if (ahead) {
      memcpy(next + next_a + copied, nx + copied, size_t(n - copied) * sizeof(T));
      memcpy(next, cur + lines * E, size_t(next_a) * sizeof(T));  // carried into the next row's first line
    } else {
      memcpy(out + (line + lines * E), cur + lines * E, size_t(next_a) * sizeof(T));  // the result's last line
    }
    T* const done = cur;
    cur = next;
    next = done;
    a = next_a;
  }
  _mm_sfence();
}
#endif

// out = x, then src[o, j, i] added at out[o, idx[o, j, i], i] for j = 0, 1, .. m-1
// (src and idx: [outer, m, inner]; per_slice: idx[j] for the whole slice, the adds
// contiguous and vectorised), in the value's type. An index out of range is never
// written through: `bad(index, element)` is called for it (the check of the indices,
// where the kernel makes it: an error at the first in the indices' order), else it is
// skipped (checked where it was made).
template <class T, class Check = NoCheck>
inline void scatter_add(Stream, int64_t outer, int64_t n, int64_t m, int64_t inner, int64_t per_slice, const T* x,
                        const int32_t* idx, const T* src, T* out, const Check& bad = Check()) {
  const uint64_t len = uint64_t(n);  // an index k is in range when uint64_t(k) < len
#if defined(__AVX__)
  if (!per_slice && inner == 1 && n * int64_t(sizeof(T)) >= 64 && n * int64_t(sizeof(T)) <= kScatterRowBytes &&
      outer * n * int64_t(sizeof(T)) >= kStreamBytes)
    return scatter_add_rows(outer, n, m, x, idx, src, out, bad);
#endif
  for (int64_t o = 0; o < outer; ++o) {
    // each slab copied just before its adds, which then find it in cache
    T* to = out + o * n * inner;
    if (out != x) memcpy(to, x + o * n * inner, size_t(n * inner) * sizeof(T));
    if (!per_slice && inner == 1) {  // an index per element of a row: the adds one after another
      const int32_t* k = idx + o * m;
      const T* from = src + o * m;
      for (int64_t j = 0; j < m; ++j)
        if (uint64_t(int64_t(k[j])) < len)
          to[k[j]] = op::add(to[k[j]], from[j]);
        else
          bad(k[j], o * m + j);
      continue;
    }
    for (int64_t j = 0; j < m; ++j) {
      const T* from = src + (o * m + j) * inner;
      if (per_slice) {
        if (uint64_t(int64_t(idx[j])) >= len) {
          bad(idx[j], j);
          continue;
        }
        T* __restrict__ row = to + idx[j] * inner;
        for (int64_t i = 0; i < inner; ++i) row[i] = op::add(row[i], from[i]);
        continue;
      }
      const int32_t* k = idx + (o * m + j) * inner;
      for (int64_t i = 0; i < inner; ++i)
        if (uint64_t(int64_t(k[i])) < len) {
          T& y = to[k[i] * inner + i];
          y = op::add(y, from[i]);
        } else {
          bad(k[i], (o * m + j) * inner + i);
        }
    }
  }
}

inline void* alloc(int64_t bytes) { return bytes ? aligned_alloc(256, size_t((bytes + 255) / 256 * 256)) : nullptr; }
inline void release(void* p) { free(p); }
inline void fill_zero(Stream, void* p, int64_t bytes) { memset(p, 0, size_t(bytes)); }

// Each rank's BLAS calls get an equal share of this machine's cores: `ranks_here` ranks
// (threads of this process, or processes on this node) each calling a BLAS that starts
// a thread per core would oversubscribe them. OPENBLAS_NUM_THREADS, when set, wins.
inline void share_blas_threads(int ranks_here) {
  choose_blas_kernels();  // here too: before the ranks' threads start (it sets an environment variable)
  if (getenv("OPENBLAS_NUM_THREADS")) return;
  const unsigned cores = std::thread::hardware_concurrency();
  openblas_set_num_threads(int(cores > unsigned(ranks_here) ? cores / unsigned(ranks_here) : 1));
}

// ---- communication ------------------------------------------------------------
// What every communicator provides; each rank calls the same collectives in the
// same order. `in` and `out` may be the same buffer for all_reduce.
// all_to_all over n ranks as blocks of bytes: the operand is [so, n, sblock] (block k
// along the split axis goes to rank k), the result [co, n, cblock] (rank k's block along
// the concat axis), `bytes` the whole of either.
struct AllToAllBlocks {
  int64_t bytes = 0, so = 1, sblock = 0, co = 1, cblock = 0;
};
inline AllToAllBlocks all_to_all_blocks(const int64_t* shape, int rank, int split, int concat, int n, DType t) {
  AllToAllBlocks b;
  int64_t si = dtype_size(t), ci = dtype_size(t);
  b.bytes = dtype_size(t);
  for (int d = 0; d < rank; ++d) b.bytes *= shape[d];
  for (int d = 0; d < split; ++d) b.so *= shape[d];
  for (int d = split + 1; d < rank; ++d) si *= shape[d];
  b.sblock = shape[split] / n * si;
  std::vector<int64_t> ps(shape, shape + rank);  // a rank's part
  ps[size_t(split)] /= n;
  for (int d = 0; d < concat; ++d) b.co *= ps[size_t(d)];
  for (int d = concat + 1; d < rank; ++d) ci *= ps[size_t(d)];
  b.cblock = ps[size_t(concat)] * ci;
  return b;
}

// f(T()) with T the C++ type of t: a communicator's loop over elements of any dtype.
template <class F>
inline void typed(DType t, F&& f) {
  if (t == DType::F32)
    f(float());
  else if (t == DType::F64)
    f(double());
  else
    f(int32_t());
}

// y[i] = from(0)[i] op from(1)[i] op ... op from(n - 1)[i] for i < count, in rank order
// (combine's; an avg then divides by n), where from(k) is rank k's operand and y may be
// one of them: a communicator's reduction of what it has received. The op is chosen
// once, not per element, and each rank's operand is a vectorised pass over a tile
// that stays in L1; the passes before the last combine into a buffer of their own, so
// that y is written only after every operand's tile is read.
template <class T, class From>
void combine_ranks(ROp op, T* y, int n, int64_t count, From&& from) {
  constexpr int64_t kTile = 2048;
  T acc[kTile];
  auto passes = [&](auto f) {
    for (int64_t t0 = 0; t0 < count; t0 += kTile) {
      const int64_t m = std::min(kTile, count - t0);
      T* yt = y + t0;
      if (n == 1 && yt != from(0) + t0) memmove(yt, from(0) + t0, size_t(m) * sizeof(T));
      for (int k = 1; k < n; ++k) {
        const T* a = k == 1 ? from(0) + t0 : acc;  // the ranks before k, combined
        const T* b = from(k) + t0;
        T* to = k == n - 1 ? yt : acc;
        GRADC_VECTORIZE
        for (int64_t i = 0; i < m; ++i) to[i] = f(a[i], b[i]);
      }
      if (op == ROp::Avg) {
        GRADC_VECTORIZE
        for (int64_t i = 0; i < m; ++i) yt[i] = T(yt[i] / T(n));
      }
    }
  };
  auto with = [&](auto o) { passes([](T a, T b) { return combine<T>(decltype(o)::value, a, b); }); };
  switch (op) {
    case ROp::Prod: return with(std::integral_constant<ROp, ROp::Prod>{});
    case ROp::Max: return with(std::integral_constant<ROp, ROp::Max>{});
    case ROp::Min: return with(std::integral_constant<ROp, ROp::Min>{});
    default: return with(std::integral_constant<ROp, ROp::Sum>{});
  }
}

// An avg over n ranks where the backend has only the sum: the sum, divided (floats only).
inline void divide_by_ranks(void* p, int64_t count, DType t, int n) {
  if (t == DType::F32)
    for (int64_t i = 0; i < count; ++i) static_cast<float*>(p)[i] /= float(n);
  else if (t == DType::F64)
    for (int64_t i = 0; i < count; ++i) static_cast<double*>(p)[i] /= double(n);
}

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) = 0;
  virtual void all_gather(const void* in, void* out, Blocks b, DType t) = 0;              // b: the operand's blocks
  virtual void reduce_scatter(const void* in, void* out, Blocks b, DType t, ROp op) = 0;  // b: the result's
  virtual void broadcast(const void* in, void* out, int64_t count, DType t, int root) = 0;
  virtual void reduce(const void* in, void* out, int64_t count, DType t, ROp op, int root) = 0;
  virtual void gather(const void* in, void* out, Blocks b, DType t, int root) = 0;   // b: the operand's
  virtual void scatter(const void* in, void* out, Blocks b, DType t, int root) = 0;  // b: the result's
  // y_r: block r (along split) of every x_k, concatenated in k order (along concat).
  virtual void all_to_all(const void* in, void* out, const int64_t* shape, int rank, int split, int concat,
                          DType t) = 0;
  // y_r = x_src for the pair (src, r), zeros where none ends at r.
  virtual void permute(const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs) = 0;
  virtual void abort_all(const char* why) = 0;  // a failing rank stops every rank
  // An all_reduce that may still be under way when it returns true: the caller overlaps
  // it with its work, keeps `out` alive, and calls finish_started() before reading it.
  // By default it is all_reduce, done when it returns (false).
  virtual bool start_all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) {
    all_reduce(in, out, count, t, op);
    return false;
  }
  virtual void finish_started() {}
  // The communicator of this rank's group (a mesh's axes): the ranks that give the same
  // color, ordered by key, as MPI_Comm_split. Every rank calls it, once per group kind,
  // in the same order; a failing rank still stops every rank of the world.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
};

// The calls generated code makes, one per collective; `where` is the op's source location.
inline void all_reduce(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, const char*) {
  c.all_reduce(in, out, count, t, op);
}
inline void all_gather(Comm& c, const void* in, void* out, Blocks b, DType t, const char*) {
  c.all_gather(in, out, b, t);
}
inline void reduce_scatter(Comm& c, const void* in, void* out, Blocks b, DType t, ROp op, const char*) {
  c.reduce_scatter(in, out, b, t, op);
}
inline void broadcast(Comm& c, const void* in, void* out, int64_t count, DType t, int root, const char*) {
  c.broadcast(in, out, count, t, root);
}
inline void reduce_to(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, int root, const char*) {
  c.reduce(in, out, count, t, op, root);
}
inline void gather(Comm& c, const void* in, void* out, Blocks b, DType t, int root, const char*) {
  c.gather(in, out, b, t, root);
}
inline void scatter(Comm& c, const void* in, void* out, Blocks b, DType t, int root, const char*) {
  c.scatter(in, out, b, t, root);
}
inline void all_to_all(Comm& c, const void* in, void* out, const int64_t* shape, int rank, int split, int concat,
                       DType t, const char*) {
  c.all_to_all(in, out, shape, rank, split, concat, t);
}
inline void permute(Comm& c, const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs,
                    const char*) {
  c.permute(in, out, count, t, pairs, n_pairs);
}
inline void copy(Stream, void* dst, const void* src, int64_t bytes) {
  if (dst != src) memmove(dst, src, size_t(bytes));
}

// The shared inputs' check (gradc_common.h): every input's hash in one all_reduce over
// the world; for an input whose hashes differ, its data compared element by element.
// In two halves where the communicator starts the all_reduce and lets it run while the
// step's kernels do (Comm::start_all_reduce: the torch target's): start_check_shared
// returns true while it is under way, and finish_check_shared, at the step's end,
// compares. Elsewhere start_check_shared does the whole check.
// A class for any size adds its sizes (StepSizes), compared first; it finishes the check
// before its first collective, so that ranks at other sizes stop there, every one.
//
// The all_reduce a step makes is not that message's: a small all_reduce takes longer the
// more elements it has (gloo's ring, the torch op's: 0.2 to 0.35 ms for 1 or 2 elements
// on 2 processes, 0.6 to 1.3 ms for 3 to 16; on 4 processes sharing 2 cores 0.7 to 1.3
// ms against 2.8 to 5.4), and the message has four per slot, a slot per group of each
// input. The step's carries two f64 sums (quick_sums): each rank adds each checked
// value's hash, mixed with the value's place and cut to b bits (two cuts, one per sum),
// times a weight within the value's group, -(n - 1) on its first rank and 1 on the n - 1
// others, so that a group whose ranks hold the same bytes adds 0. b leaves every sum's
// terms below 2^52 in all, so that the sums are exact integers in any order, the same on
// every rank: where both are 0 no value differs (unless differences cancel each other
// exactly, about one chance in 2^b per sum); else every rank makes the message's
// all_reduce, and it names what differs, as before.
inline void compare_shared(Comm& world, const SharedInput<Comm>* in, int n, int32_t world_rank, HashMessage& msg,
                           const StepSizes& sizes);
inline uint64_t mix64(uint64_t x) {  // MurmurHash3's finaliser
  x ^= x >> 33, x *= 0xFF51AFD7ED558CCDull, x ^= x >> 33, x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}
// The quick message's terms of one value: its group's rank and size, its hash, its place.
inline void quick_terms(double quick[2], int b, int group_rank, int group_size, uint64_t hash, int place) {
  const double weight = group_rank == 0 ? -double(group_size - 1) : 1.0;
  for (int part = 0; part < 2; ++part) {
    const uint64_t cut = mix64(hash + 0x9E3779B97F4A7C15ull * uint64_t(2 * place + part + 1)) >> (64 - b);
    quick[part] += weight * double(cut);
  }
}
inline void quick_sums(Comm& world, const SharedInput<Comm>* in, int n, const uint64_t* hashes, const StepSizes& sizes,
                       HashMessage& msg) {
  // every rank's terms, over the world, are at most 2 * world * (n + 1) times 2^b in all
  const uint64_t bound = 2 * uint64_t(world.size()) * uint64_t(n + 1);
  int b = 48;
  while (b > 1 && bound > (uint64_t(1) << (52 - b))) --b;
  msg.quick[0] = msg.quick[1] = 0;
  for (int k = 0; k < n; ++k) quick_terms(msg.quick, b, in[k].group->rank(), in[k].group->size(), hashes[k], k);
  if (sizes.n > 0)
    quick_terms(msg.quick, b, world.rank(), world.size(), hash_bytes(sizes.values, 8 * int64_t(sizes.n)), n);
}
inline bool start_check_shared(Comm& world, Stream compute, const SharedInput<Comm>* in, int n, int32_t world_rank,
                               HashMessage& msg, const StepSizes& sizes = {}) {
  (void)compute;
  msg = HashMessage(in, n, sizes);
  std::vector<uint64_t> hashes(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) {
    hashes[size_t(k)] = hash_bytes(in[k].data, in[k].count * dtype_size(in[k].t));
    msg.put(k, in[k].slot, hashes[size_t(k)]);
  }
  quick_sums(world, in, n, hashes.data(), sizes, msg);
  if (world.start_all_reduce(msg.quick, msg.quick, 2, DType::F64, ROp::Sum)) return true;
  compare_shared(world, in, n, world_rank, msg, sizes);
  return false;
}
inline void finish_check_shared(Comm& world, Stream compute, const SharedInput<Comm>* in, int n, int32_t world_rank,
                                HashMessage& msg, const StepSizes& sizes = {}) {
  (void)compute;
  world.finish_started();
  compare_shared(world, in, n, world_rank, msg, sizes);
}
inline void check_shared(Comm& world, Stream compute, const SharedInput<Comm>* in, int n, int32_t world_rank) {
  HashMessage msg;
  if (start_check_shared(world, compute, in, n, world_rank, msg))
    finish_check_shared(world, compute, in, n, world_rank, msg);
}
inline void compare_shared(Comm& world, const SharedInput<Comm>* in, int n, int32_t world_rank, HashMessage& msg,
                           const StepSizes& sizes) {
  if (msg.quick[0] == 0 && msg.quick[1] == 0) return;  // no value differs
  world.all_reduce(msg.m.data(), msg.m.data(), int64_t(msg.m.size()), DType::I32, ROp::Max);
  if (msg.sizes_differ()) sizes_differ(sizes);  // before the inputs, whose lengths may be the sizes'
  for (int k = 0; k < n; ++k) {
    if (!msg.differs(k)) continue;
    const SharedInput<Comm>& x = in[k];
    const int64_t size = dtype_size(x.t);
    std::vector<char> first(static_cast<size_t>(x.count * size));
    x.group->broadcast(x.data, first.data(), x.count, x.t, 0);
    int32_t first_rank = world_rank, row[kSharedRow];
    x.group->broadcast(&world_rank, &first_rank, 1, DType::I32, 0);
    shared_row(first_difference(first.data(), x.data, x.count, size), first_rank, world_rank, row);
    std::vector<int32_t> rows(kSharedRow * static_cast<size_t>(world.size()));
    world.all_gather(row, rows.data(), Blocks{1, kSharedRow, 1}, DType::I32);
    report_shared(rows, x);
  }
}

// gradc run --check-finite: the first NaN or infinity of an op's result stops the
// rank (on CUDA after copying the result to the host: a check synchronises).
template <class T>
void check_finite(Stream stream, const T* data, int64_t n, int rank, const char* where, const char* what,
                  const char* type, const Dims& dims) {
  (void)stream;
  check_finite_values(data, n, rank, where, what, type, dims);
}

}  // namespace gradc

#if defined(__clang__) || defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
