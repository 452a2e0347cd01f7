// gradc's runtime, the CUDA target: launching a kernel body (a grid-stride loop),
// reductions (CUB), cuBLAS, memory and streams. See gradc_common.h.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cub/cub.cuh>
#include <type_traits>

#include "gradc_common.h"

namespace gradc {
#define GRADC_CHECK(kind, call, where, ok, message)                                  \
  do {                                                                               \
    auto gradc_status_ = (call);                                                     \
    if (!(gradc_status_ == (ok))) gradc::fail(#call, message(gradc_status_), where); \
  } while (0)
#define GRADC_CUDA(call, where) GRADC_CHECK(cuda, call, where, cudaSuccess, cudaGetErrorString)
#define GRADC_NCCL(call, where) GRADC_CHECK(nccl, call, where, ncclSuccess, ncclGetErrorString)
#define GRADC_CUBLAS(call, where) GRADC_CHECK(cublas, call, where, CUBLAS_STATUS_SUCCESS, cublasGetStatusString)

using Stream = cudaStream_t;
using Blas = cublasHandle_t;

inline void* alloc(int64_t bytes) {
  void* p = nullptr;
  if (bytes) GRADC_CUDA(cudaMalloc(&p, size_t(bytes)), "allocating the workspace");
  return p;
}
inline void release(void* p) { cudaFree(p); }
inline void wait(cudaStream_t s, cudaEvent_t e) { GRADC_CUDA(cudaStreamWaitEvent(s, e, 0), "a stream dependency"); }
inline void copy(cudaStream_t s, void* dst, const void* src, int64_t bytes) {
  if (dst != src && bytes) GRADC_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, s), "a copy");
}
inline void fill_zero(cudaStream_t s, void* p, int64_t bytes) {
  if (bytes) GRADC_CUDA(cudaMemsetAsync(p, 0, size_t(bytes), s), "zeros");
}
// A constant array's device address.
template <class T, size_t N>
const T* symbol(const T (&sym)[N]) {
  void* p = nullptr;
  GRADC_CUDA(cudaGetSymbolAddress(&p, sym), "a constant");
  return static_cast<const T*>(p);
}

// A kernel body over n elements: a grid-stride loop, each thread computing four
// elements at a time (their loads in flight together) while four strides remain.
template <class T, class F>
__global__ void map_kernel(int64_t n, F f, T* out) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const T a = f(i), b = f(i + stride), c = f(i + 2 * stride), d = f(i + 3 * stride);
    out[i] = a;
    out[i + stride] = b;
    out[i + 2 * stride] = c;
    out[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) out[i] = f(i);
}
// Two elements, loaded or stored by one instruction: a map kernel that reads or writes
// 16-bit elements has a `pair` (codegen/cpp.cpp, pair_functor), elements i and i + 1 from
// one load of two elements of each buffer it reads at its element, for a store of two.
template <class T>
struct alignas(2 * sizeof(T)) Pair {
  T a, b;
};
template <class T>
GRADC_FUNCTOR Pair<T> load_pair(const T* p) {
  return *reinterpret_cast<const Pair<T>*>(p);
}
template <class... T>
bool pair_aligned(const T*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % (2 * sizeof(T)) == 0) && ...);
}
template <class F, class = void>
struct HasPair : std::false_type {};
template <class F>
struct HasPair<F, std::void_t<decltype(&F::pair)>> : std::true_type {};

// The map kernel by pairs: pair j is elements 2j and 2j + 1, four pairs a thread at a
// time as map_kernel's elements; an odd last element alone.
template <class T, class F>
__global__ void map_pairs_kernel(int64_t n, F f, T* out) {
  Pair<T>* out2 = reinterpret_cast<Pair<T>*>(out);
  const int64_t stride = int64_t(blockDim.x) * gridDim.x, pairs = n / 2;
  int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (n % 2 && j == 0) out[n - 1] = f(n - 1);
  for (; j + 3 * stride < pairs; j += 4 * stride) {
    const Pair<T> a = f.pair(2 * j), b = f.pair(2 * (j + stride)), c = f.pair(2 * (j + 2 * stride)),
                  d = f.pair(2 * (j + 3 * stride));
    out2[j] = a;
    out2[j + stride] = b;
    out2[j + 2 * stride] = c;
    out2[j + 3 * stride] = d;
  }
  for (; j < pairs; j += stride) out2[j] = f.pair(2 * j);
}
inline unsigned grid(int64_t n) { return unsigned(n / 256 + 1 < 65535 ? n / 256 + 1 : 65535); }
template <class T, class F>
inline void map(cudaStream_t s, int64_t n, const F& f, T* out) {
  if (n == 0) return;
  if constexpr (HasPair<F>::value) {
    if (n > 1 && pair_aligned(out) && f.pairs_aligned()) {  // else (a view at an odd element) one at a time
      map_pairs_kernel<<<grid((n / 2 + 3) / 4), 256, 0, s>>>(n, f, out);
      GRADC_CUDA(cudaGetLastError(), "a kernel launch");
      return;
    }
  }
  map_kernel<<<grid((n + 3) / 4), 256, 0, s>>>(n, f, out);
  GRADC_CUDA(cudaGetLastError(), "a kernel launch");
}
// A map whose functor reads along rows of len (the CPU's loop over rows): one thread an
// element, as any map.
template <class T, class F>
inline void map_rows(cudaStream_t s, int64_t n, int64_t, const F& f, T* out) {
  map(s, n, f, out);
}
// A map of one element (a scalar).
template <class T, class F>
inline void map_one(cudaStream_t s, const F& f, T* out) {
  map(s, 1, f, out);
}

// out[o] = op over r of f(o, r). A block reduces a range of one output's elements
// (CUB's block reduction); where there are too few outputs to fill the GPU, each
// output's elements are split into `parts` consecutive chunks, a block each, whose
// results (Partials, allocated once with the program) a second pass combines in
// chunk order: the result does not depend on timing.
template <class A>
struct Step {
  ROp op;
  __device__ A operator()(A a, A b) const { return reduce_step<A>(op, a, b); }
};
constexpr int64_t kBlocks = 1024;     // the blocks a reduction aims for: 8 per SM of an H100
constexpr int64_t kPartials = 32768;  // accumulators in Partials
struct Partials {
  void* p = nullptr;
};
inline Partials alloc_partials() { return Partials{alloc(kPartials * 8)}; }
inline void release(Partials p) { release(p.p); }
// The whole block (256 threads) reduces f(o, r) for r in [lo, hi) into *dst.
template <class T, class F>
__device__ void block_reduce(ROp op, int64_t lo, int64_t hi, const F& f, int64_t o, T* dst) {
  using A = typename Acc<T>::type;
  using BlockReduce = cub::BlockReduce<A, 256>;
  __shared__ typename BlockReduce::TempStorage tmp;
  A acc = reduce_init<A>(op);
#pragma unroll 4
  for (int64_t r = lo + threadIdx.x; r < hi; r += 256) acc = reduce_step<A>(op, acc, A(f(o, r)));
  A total = BlockReduce(tmp).Reduce(acc, Step<A>{op});
  if (threadIdx.x == 0) *dst = T(total);
  __syncthreads();  // the block's threads see *dst, and tmp may be used again
}
// Block b reduces chunk b % parts of output b / parts: into out, or with parts > 1
// into partial[b].
template <class T, class F, class A = typename Acc<T>::type>
__global__ void reduce_kernel(ROp op, int64_t n_out, int64_t n_red, int64_t parts, F f, T* out, A* partial) {
  const int64_t chunk = (n_red + parts - 1) / parts;
  for (int64_t b = blockIdx.x; b < n_out * parts; b += gridDim.x) {
    const int64_t o = b / parts, lo = b % parts * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
    if (parts == 1)
      block_reduce(op, lo, hi, f, o, out + o);
    else
      block_reduce(op, lo, hi, f, o, partial + b);
  }
}
// Element r of output o in the second pass: chunk r's result.
template <class A>
struct PartialOf {
  const A* partial;
  int64_t parts;
  __device__ A operator()(int64_t o, int64_t r) const { return partial[o * parts + r]; }
};
inline unsigned blocks(int64_t n) { return unsigned(n < 65535 ? n : 65535); }
template <class T>
inline void combine_parts(cudaStream_t s, ROp op, int64_t n_out, int64_t parts, Partials scratch, T* out) {
  using A = typename Acc<T>::type;
  const PartialOf<A> f{static_cast<const A*>(scratch.p), parts};
  reduce_kernel<T, PartialOf<A>><<<blocks(n_out), 256, 0, s>>>(op, n_out, parts, 1, f, out, static_cast<A*>(nullptr));
  GRADC_CUDA(cudaGetLastError(), "a reduction launch");
}
// How many chunks each of `outputs` work items is split into: enough blocks to
// fill the GPU, each reducing at least `least` elements, within Partials.
inline int64_t split(int64_t items, int64_t outputs, int64_t n_red, int64_t least) {
  int64_t parts = kBlocks / items;
  if (parts > n_red / least) parts = n_red / least;
  if (parts > kPartials / outputs) parts = kPartials / outputs;
  return parts > 1 ? parts : 1;
}
template <class T, class F>
inline void reduce(cudaStream_t s, Partials scratch, ROp op, int64_t n_out, int64_t n_red, const F& f, T* out) {
  using A = typename Acc<T>::type;
  if (n_out == 0) return;
  const int64_t parts = split(n_out, n_out, n_red, 4096);
  reduce_kernel<<<blocks(n_out * parts), 256, 0, s>>>(op, n_out, n_red, parts, f, out, static_cast<A*>(scratch.p));
  GRADC_CUDA(cudaGetLastError(), "a reduction launch");
  if (parts > 1) combine_parts(s, op, n_out, parts, scratch, out);
}
// Reduced axes first (a column sum: element (r, o) at r * n_out + o). A block takes
// 32 adjacent outputs and a chunk of rows: each warp reads 32 adjacent elements of
// a row at a time, its 8 warps take every 8th row, and their sums are combined in
// shared memory in warp order.
template <class T, class F, class A = typename Acc<T>::type>
__global__ void reduce_leading_kernel(ROp op, int64_t n_out, int64_t n_red, int64_t parts, F f, T* out, A* partial) {
  __shared__ A lanes[8][32];
  const int64_t tiles = (n_out + 31) / 32, chunk = (n_red + parts - 1) / parts;
  const int col = int(threadIdx.x % 32), warp = int(threadIdx.x / 32);
  for (int64_t b = blockIdx.x; b < tiles * parts; b += gridDim.x) {
    const int64_t o = b / parts * 32 + col, p = b % parts, lo = p * chunk, hi = lo + chunk < n_red ? lo + chunk : n_red;
    A acc = reduce_init<A>(op);
    if (o < n_out) {
#pragma unroll 4
      for (int64_t r = lo + warp; r < hi; r += 8) acc = reduce_step<A>(op, acc, A(f(o, r)));
    }
    lanes[warp][col] = acc;
    __syncthreads();
    if (warp == 0 && o < n_out) {
      for (int w = 1; w < 8; ++w) acc = reduce_step<A>(op, acc, lanes[w][col]);
      if (parts == 1)
        out[o] = T(acc);
      else
        partial[o * parts + p] = acc;
    }
    __syncthreads();
  }
}
template <class T, class F>
inline void reduce_leading(cudaStream_t s, Partials scratch, ROp op, int64_t n_out, int64_t n_red, const F& f, T* out) {
  using A = typename Acc<T>::type;
  if (n_out == 0) return;
  const int64_t tiles = (n_out + 31) / 32, parts = split(tiles, n_out, n_red, 64);
  reduce_leading_kernel<<<blocks(tiles * parts), 256, 0, s>>>(op, n_out, n_red, parts, f, out,
                                                              static_cast<A*>(scratch.p));
  GRADC_CUDA(cudaGetLastError(), "a reduction launch");
  if (parts > 1) combine_parts(s, op, n_out, parts, scratch, out);
}

// Loops down each column of [outer, n, inner], a thread per column taking its
// elements in order (the interpreter's order: every backend gives the same values).
// out = running sums of in down each column (from its end with reverse), summed in
// the accumulator type and rounded once per element.
template <class T, class A = typename Acc<T>::type>
__global__ void cumsum_kernel(int64_t outer, int64_t n, int64_t inner, int64_t reverse, const T* in, T* out) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x, step = reverse ? -inner : inner;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < outer * inner; c += stride) {
    int64_t e = c / inner * n * inner + c % inner + (reverse ? (n - 1) * inner : 0);
    A acc = 0;
    for (int64_t s = 0; s < n; ++s, e += step) {
      acc += A(in[e]);
      out[e] = T(acc);
    }
  }
}
template <class T>
inline void cumsum(cudaStream_t s, int64_t outer, int64_t n, int64_t inner, int64_t reverse, const T* in, T* out) {
  if (outer * inner * n == 0) return;
  cumsum_kernel<<<grid(outer * inner), 256, 0, s>>>(outer, n, inner, reverse, in, out);
  GRADC_CUDA(cudaGetLastError(), "a cumsum launch");
}
// out = x, then src[o, j, i] added at out[o, idx[o, j, i], i] for j = 0, 1, .. m-1
// (per_slice: idx[j]), a thread per column (o, i): no two threads write one element,
// and no atomics. An index out of range is never written through: `bad(index,
// element)` is called for it (the check the kernel makes: an error), else skipped
// (checked where it was made), as on the CPU.
template <class T, class Check>
__global__ void scatter_add_kernel(int64_t outer, int64_t n, int64_t m, int64_t inner, int64_t per_slice,
                                   const int32_t* idx, const T* src, T* out, Check bad) {
  const int64_t stride = int64_t(blockDim.x) * gridDim.x;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < outer * inner; c += stride) {
    const int64_t o = c / inner, i = c % inner;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t e = (o * m + j) * inner + i;
      const int32_t k = idx[per_slice ? j : e];
      if (k >= 0 && k < n) {
        T& y = out[(o * n + k) * inner + i];
        y = op::add(y, src[e]);
      } else {
        bad(k, per_slice ? j : e);
      }
    }
  }
}
template <class T, class Check = NoCheck>
inline void scatter_add(cudaStream_t s, int64_t outer, int64_t n, int64_t m, int64_t inner, int64_t per_slice,
                        const T* x, const int32_t* idx, const T* src, T* out, Check bad = Check()) {
  copy(s, out, x, outer * n * inner * int64_t(sizeof(T)));
  if (outer * inner * m == 0) return;
  scatter_add_kernel<<<grid(outer * inner), 256, 0, s>>>(outer, n, m, inner, per_slice, idx, src, out, bad);
  GRADC_CUDA(cudaGetLastError(), "a scatter_add launch");
}

// A row group: a block per row runs every member on that row in turn.
template <class T, class F>
struct MapRow {
  int64_t len;
  F f;
  T* out;
  int64_t stride = len;      // the CPU's (a row-local buffer's 0); a GPU keeps every row
  int64_t end = kWholeRows;  // a group of tiles: the elements in all (the last row may be short)
  __device__ void row(int64_t r) const {
    const int64_t n = row_count(r, len, end);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[r * len + j] = f(r, j);
    __syncthreads();
  }
};
template <class T, class F>
struct StreamRow {  // the GPU writes it as any other member's
  int64_t rows, len;
  F f;
  T* out;
  int64_t end = kWholeRows;
  __device__ void row(int64_t r) const { MapRow<T, F>{len, f, out, len, end}.row(r); }
};
// A tile group's member (every member elementwise): row r is the map's elements r * len
// to r * len + len - 1 (the last row, to end - 1), two at a time where the functor has a
// pair form and every pointer and the tiles' starts are aligned to two elements.
template <class T, class F>
struct TileRow {
  int64_t len;
  F f;
  T* out;
  bool two;
  int64_t end;
  __device__ void row(int64_t r) const {
    const int64_t first = r * len, n = row_count(r, len, end);
    if constexpr (HasPair<F>::value) {
      if (two) {
        Pair<T>* out2 = reinterpret_cast<Pair<T>*>(out + first);
        for (int64_t j = threadIdx.x; j < n / 2; j += blockDim.x) out2[j] = f.pair(first + 2 * j);
        if (n % 2 != 0 && threadIdx.x == 0) out[first + n - 1] = f(first + n - 1);
        __syncthreads();
        return;
      }
    }
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) out[first + j] = f(first + j);
    __syncthreads();
  }
};
template <class T, class F>
TileRow<T, F> tile_row(int64_t len, const F& f, T* out, int64_t end = kWholeRows) {
  bool two = false;
  if constexpr (HasPair<F>::value) two = len % 2 == 0 && pair_aligned(out) && f.pairs_aligned();
  return {len, f, out, two, end};
}
template <class T, class F>
struct ReduceRow {
  ROp op;
  int64_t len;
  F f;
  T* out;
  __device__ void row(int64_t r) const { block_reduce(op, 0, len, f, r, out + r); }
};
template <class... S>
__global__ void rows_kernel(int64_t n_rows, S... steps) {
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) (steps.row(r), ...);
}
template <class... S>
inline void rows(cudaStream_t s, int64_t n_rows, const S&... steps) {
  if (n_rows == 0) return;
  rows_kernel<<<unsigned(n_rows < 65535 ? n_rows : 65535), 256, 0, s>>>(n_rows, steps...);
  GRADC_CUDA(cudaGetLastError(), "a row kernel launch");
}

// C[b] = alpha op(A[b]) op(B[b]), row-major: cuBLAS is column-major, so it computes
// C^T = op(B)^T op(A)^T, which is the same memory.
template <class T>
__global__ void gemm_i32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t sa, const T* b,
                         int64_t sb, T* c, int64_t batch) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < batch * m * n;
       e += int64_t(blockDim.x) * gridDim.x) {
    int64_t p = e / (m * n), i = e / n % m, j = e % n;
    T acc = 0;
    for (int64_t q = 0; q < k; ++q)
      acc += a[p * sa + (ta ? q * m + i : i * k + q)] * b[p * sb + (tb ? j * k + q : q * n + j)];
    c[e] = acc;
  }
}
template <class T>
inline void gemm(cublasHandle_t h, cudaStream_t s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a,
                 int64_t sa, const T* b, int64_t sb, T* c, int64_t batch, T alpha = T(1)) {
  GRADC_CUBLAS(cublasSetStream(h, s), "matmul");
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  if constexpr (sizeof(T) == 4 && T(0.5) != T(0)) {
    const float zero = 0;
    GRADC_CUBLAS(cublasSgemmStridedBatched(h, opb, opa, int(n), int(m), int(k), &alpha, b, ldb, sb, a, lda, sa, &zero,
                                           c, int(n), m * n, int(batch)),
                 "matmul");
  } else if constexpr (sizeof(T) == 8) {
    const double zero = 0;
    GRADC_CUBLAS(cublasDgemmStridedBatched(h, opb, opa, int(n), int(m), int(k), &alpha, b, ldb, sb, a, lda, sa, &zero,
                                           c, int(n), m * n, int(batch)),
                 "matmul");
  } else {
    gemm_i32<<<grid(batch * m * n), 256, 0, s>>>(ta, tb, m, n, k, a, sa, b, sb, c, batch);
    GRADC_CUDA(cudaGetLastError(), "matmul");
  }
}

// bf16 or f16 operands, an f32 result (lowered matmuls of widened 16-bit buffers):
// cuBLAS reads the 16-bit operands and computes in f32 (CUBLAS_COMPUTE_32F: exact
// products, f32 sums), on the tensor cores.
inline void gemm_16(cublasHandle_t h, cudaStream_t s, cudaDataType type, bool ta, bool tb, int64_t m, int64_t n,
                    int64_t k, const void* a, int64_t sa, const void* b, int64_t sb, float* c, int64_t batch,
                    float alpha) {
  GRADC_CUBLAS(cublasSetStream(h, s), "matmul");
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = int(ta ? m : k), ldb = int(tb ? k : n);
  const float zero = 0;
  GRADC_CUBLAS(
      cublasGemmStridedBatchedEx(h, opb, opa, int(n), int(m), int(k), &alpha, b, type, ldb, sb, a, type, lda, sa, &zero,
                                 c, CUDA_R_32F, int(n), m * n, int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "matmul");
}
inline void gemm(cublasHandle_t h, cudaStream_t s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bfloat16* a,
                 int64_t sa, const bfloat16* b, int64_t sb, float* c, int64_t batch, float alpha = 1) {
  gemm_16(h, s, CUDA_R_16BF, ta, tb, m, n, k, a, sa, b, sb, c, batch, alpha);
}
inline void gemm(cublasHandle_t h, cudaStream_t s, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float16* a,
                 int64_t sa, const float16* b, int64_t sb, float* c, int64_t batch, float alpha = 1) {
  gemm_16(h, s, CUDA_R_16F, ta, tb, m, n, k, a, sa, b, sb, c, batch, alpha);
}

// gradc run --check-finite: the first NaN or infinity of an op's result stops the
// rank (on CUDA after copying the result to the host: a check synchronises).
template <class T>
void check_finite(Stream stream, const T* data, int64_t n, int rank, const char* where, const char* what,
                  const char* type, const Dims& dims) {
  std::vector<T> host(static_cast<size_t>(n));
  GRADC_CUDA(cudaMemcpyAsync(host.data(), data, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost, stream), where);
  GRADC_CUDA(cudaStreamSynchronize(stream), where);
  data = host.data();
  check_finite_values(data, n, rank, where, what, type, dims);
}

}  // namespace gradc
