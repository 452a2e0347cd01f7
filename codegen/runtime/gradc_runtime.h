// gradc's runtime for generated code, written out beside it by `gradc emit`.
// Everything that differs between the two targets lives here: launching a
// kernel body (a grid-stride loop on CUDA, a plain loop the host compiler
// vectorises on the CPU), reductions, BLAS (cuBLAS / OpenBLAS), communication
// (NCCL on CUDA; gradc's in-process communicator for ranks as threads, or MPI,
// on the CPU) and memory. The kernel bodies themselves are the generated
// functors' operator(), compiled by both nvcc and the host compiler.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gradc_scalar.h"

#if defined(__CUDACC__)
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cub/cub.cuh>
#else
#include <cblas.h>
#endif
#if defined(GRADC_WITH_MPI)
#include <mpi.h>
#endif

// A kernel's functor is inlined wherever the runtime's loops call it. A large one
// (randn's 10 rounds of Philox, a chain of 256 ops) clang 19 otherwise leaves a
// call inside the loop, which then stays scalar.
#if defined(__CUDACC__)
#define GRADC_FUNCTOR __host__ __device__ __forceinline__
#else
#define GRADC_FUNCTOR __attribute__((always_inline)) inline
#endif

namespace gradc {

enum class DType { F32, F64, I32 };
enum class ROp { Sum, Avg, Prod, Max, Min };
inline int64_t dtype_size(DType t) { return t == DType::F64 ? 8 : 4; }

// A failed library call names the call, the library's message and the source
// location of the op, and ends the process at once with status 1: every rank in
// it stops (under a launcher, the others then fail in their next collective).
[[noreturn]] inline void fail(const char* call, const std::string& why, const char* where) {
  fprintf(stderr, "gradc: error: %s failed: %s (%s)\n", call, why.c_str(), where);
  fflush(stderr);
  _Exit(1);
}

// ---- errors in the program's data, found while a step runs ------------------
// `where` is the op's file:line:col, `dims` the shape of the value whose element
// (row-major `element`) is at fault. On the host the rank throws (its thread, or
// its process, then stops every rank, as a failed collective does); in a CUDA
// kernel the message is printed and the kernel traps, which the next checked
// CUDA call reports.
// The row-major `element` of a value of shape `dims` ("2, 3") as an index, "[1, 1]",
// in a fixed buffer: the same text on the host and in a CUDA kernel's printf.
struct ElementText {
  char s[16 * 22 + 3];  // up to 16 dimensions of up to 20 digits, ", " between them
};
GRADC_HD inline ElementText element_text(int64_t element, const char* dims) {
  int64_t shape[16], idx[16];
  int rank = 0;
  for (const char* p = dims; *p && rank < 16;) {
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
    shape[rank++] = v;
    while (*p == ',' || *p == ' ') ++p;
  }
  for (int d = rank; d-- > 0;) {
    idx[d] = shape[d] ? element % shape[d] : 0;
    element = shape[d] ? element / shape[d] : 0;
  }
  ElementText t;
  int n = 0;
  t.s[n++] = '[';
  for (int d = 0; d < rank; ++d) {
    if (d) t.s[n++] = ',', t.s[n++] = ' ';
    char digits[20];
    int k = 0;
    for (int64_t v = idx[d]; k == 0 || v; v /= 10) digits[k++] = char('0' + v % 10);
    while (k) t.s[n++] = digits[--k];
  }
  t.s[n++] = ']';
  t.s[n] = 0;
  return t;
}
inline std::string element_str(int64_t element, const char* dims) { return element_text(element, dims).s; }
GRADC_HD inline void division_error(const char* where, const char* op, int rank, int64_t element, const char* dims) {
#if defined(__CUDA_ARCH__)
  printf("%s: error: %s: division by zero on rank %d, at element %s of i32[%s]\n", where, op, rank,
         element_text(element, dims).s, dims);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": " + op + ": division by zero on rank " + std::to_string(rank) +
                           ", at element " + element_str(element, dims) + " of i32[" + dims + "]");
#endif
}
GRADC_HD inline void index_error(const char* where, int rank, int64_t index, int64_t n, int64_t element,
                                 const char* dims) {
#if defined(__CUDA_ARCH__)
  printf("%s: error: take: index %lld is out of range 0..%lld on rank %d, at element %s of the indices\n", where,
         (long long)index, (long long)(n - 1), rank, element_text(element, dims).s);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": take: index " + std::to_string(index) + " is out of range 0.." +
                           std::to_string(n - 1) + " on rank " + std::to_string(rank) + ", at element " +
                           element_str(element, dims) + " of the indices");
#endif
}

GRADC_HD inline void label_error(const char* where, int rank, int64_t label, int64_t n, int64_t ignore, int64_t element,
                                 const char* dims) {
#if defined(__CUDA_ARCH__)
  printf(
      "%s: error: cross_entropy: label %lld is out of range 0..%lld on rank %d, at element %s of the labels "
      "(ignore_index is %lld)\n",
      where, (long long)label, (long long)(n - 1), rank, element_text(element, dims).s, (long long)ignore);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": cross_entropy: label " + std::to_string(label) +
                           " is out of range 0.." + std::to_string(n - 1) + " on rank " + std::to_string(rank) +
                           ", at element " + element_str(element, dims) + " of the labels (ignore_index is " +
                           std::to_string(ignore) + ")");
#endif
}

// ---- reductions over ranks, in rank order (as the interpreter combines them) ---
template <class T>
GRADC_HD inline T combine(ROp op, T a, T b) {
  switch (op) {
    case ROp::Prod: return T(a * b);
    case ROp::Max: return a > b ? a : b;
    case ROp::Min: return a < b ? a : b;
    default: return T(a + b);
  }
}

// Reductions over axes accumulate in double (int64 for i32), as the interpreter does:
// a sum from 0, a max or min from -inf or +inf (the i32 limits) by max_step and min_step
// (gradc_scalar.h: a NaN element makes the result NaN).
template <class T>
struct Acc {
  using type = double;
};
template <>
struct Acc<int32_t> {
  using type = int64_t;
};
template <>
struct Acc<int64_t> {
  using type = int64_t;
};  // the GPU's partial results of an i32 reduction
template <class A>
GRADC_HD inline A reduce_init(ROp op) {
  return op == ROp::Sum ? A(0) : op == ROp::Max ? max_start<A>() : min_start<A>();
}
template <class A>
GRADC_HD inline A reduce_step(ROp op, A acc, A x) {
  return op == ROp::Max ? max_step(acc, x) : op == ROp::Min ? min_step(acc, x) : A(acc + x);
}

// A map kernel's functor gives the value of element i, f(i) (in a row group, of
// element j of row r, f(r, j)); a reduction's, the element r of output o, f(o, r).
// The runtime stores the results.
template <class T, class F>
struct MapRow;
template <class T, class F>
struct ReduceRow;
template <class T, class F>
MapRow<T, F> map_row(int64_t len, const F& f, T* out) {
  return MapRow<T, F>{len, f, out};
}
template <class T, class F>
ReduceRow<T, F> reduce_row(ROp op, int64_t len, const F& f, T* out) {
  return ReduceRow<T, F>{op, len, f, out};
}

#if defined(__CUDACC__)
// =============================== CUDA ========================================
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
inline unsigned grid(int64_t n) { return unsigned(n / 256 + 1 < 65535 ? n / 256 + 1 : 65535); }
template <class T, class F>
inline void map(cudaStream_t s, int64_t n, const F& f, T* out) {
  if (n == 0) return;
  map_kernel<<<grid((n + 3) / 4), 256, 0, s>>>(n, f, out);
  GRADC_CUDA(cudaGetLastError(), "a kernel launch");
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

// A row group: a block per row runs every member on that row in turn.
template <class T, class F>
struct MapRow {
  int64_t len;
  F f;
  T* out;
  __device__ void row(int64_t r) const {
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) out[r * len + j] = f(r, j);
    __syncthreads();
  }
};
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

// ---- communication: NCCL, and grouped send/recv for what NCCL lacks -------------
struct Blocks {
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t count() const { return outer * dim * inner; }
};
struct Comm {
  ncclComm_t nccl;
  cudaStream_t stream;
  char* scratch;  // room for the rearranged blocks of one collective
  int rank, size;
};
inline ncclDataType_t nccl_type(DType t) {
  return t == DType::F32 ? ncclFloat32 : t == DType::F64 ? ncclFloat64 : ncclInt32;
}
inline ncclRedOp_t nccl_op(ROp op) {
  switch (op) {
    case ROp::Avg: return ncclAvg;
    case ROp::Prod: return ncclProd;
    case ROp::Max: return ncclMax;
    case ROp::Min: return ncclMin;
    default: return ncclSum;
  }
}
// [outer, parts, block] <-> [parts, outer, block] element moves (bytes), for the
// collectives whose blocks are not contiguous along the block axis.
static __global__ void regroup_kernel(const char* src, char* dst, int64_t outer, int64_t parts, int64_t block,
                                      bool to_parts_first) {
  const int64_t n = outer * parts * block;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(blockDim.x) * gridDim.x) {
    int64_t o = e / (parts * block), p = e / block % parts, b = e % block;
    int64_t other = (p * outer + o) * block + b;
    if (to_parts_first)
      dst[other] = src[e];
    else
      dst[e] = src[other];
  }
}
inline void regroup(cudaStream_t s, const void* src, void* dst, int64_t outer, int64_t parts, int64_t block_bytes,
                    bool to_parts_first, const char* where) {
  if (outer * parts * block_bytes == 0) return;
  regroup_kernel<<<grid(outer * parts * block_bytes), 256, 0, s>>>(
      static_cast<const char*>(src), static_cast<char*>(dst), outer, parts, block_bytes, to_parts_first);
  GRADC_CUDA(cudaGetLastError(), where);
}

inline void all_reduce(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, const char* where) {
  GRADC_NCCL(ncclAllReduce(in, out, size_t(count), nccl_type(t), nccl_op(op), c.nccl, c.stream), where);
}
inline void all_gather(Comm& c, const void* in, void* out, Blocks b, DType t, const char* where) {
  const int64_t es = dtype_size(t);
  if (b.outer == 1) {
    GRADC_NCCL(ncclAllGather(in, out, size_t(b.count()), nccl_type(t), c.nccl, c.stream), where);
    return;
  }
  GRADC_NCCL(ncclAllGather(in, c.scratch, size_t(b.count()), nccl_type(t), c.nccl, c.stream), where);
  regroup(c.stream, c.scratch, out, b.outer, c.size, b.dim * b.inner * es, false, where);
}
inline void reduce_scatter(Comm& c, const void* in, void* out, Blocks b, DType t, ROp op, const char* where) {
  const int64_t es = dtype_size(t);
  const void* src = in;
  if (b.outer != 1) {
    regroup(c.stream, in, c.scratch, b.outer, c.size, b.dim * b.inner * es, true, where);
    src = c.scratch;
  }
  GRADC_NCCL(ncclReduceScatter(src, out, size_t(b.count()), nccl_type(t), nccl_op(op), c.nccl, c.stream), where);
}
inline void broadcast(Comm& c, const void* in, void* out, int64_t count, DType t, int root, const char* where) {
  GRADC_NCCL(ncclBroadcast(in, out, size_t(count), nccl_type(t), root, c.nccl, c.stream), where);
}
inline void reduce_to(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, int root, const char* where) {
  GRADC_NCCL(ncclReduce(in, out, size_t(count), nccl_type(t), nccl_op(op), root, c.nccl, c.stream), where);
  if (c.rank != root) fill_zero(c.stream, out, count * dtype_size(t));
}
inline void gather(Comm& c, const void* in, void* out, Blocks b, DType t, int root, const char* where) {
  const int64_t es = dtype_size(t), bytes = b.count() * es;
  GRADC_NCCL(ncclGroupStart(), where);
  GRADC_NCCL(ncclSend(in, size_t(b.count()), nccl_type(t), root, c.nccl, c.stream), where);
  if (c.rank == root)
    for (int k = 0; k < c.size; ++k)
      GRADC_NCCL(ncclRecv(c.scratch + k * bytes, size_t(b.count()), nccl_type(t), k, c.nccl, c.stream), where);
  GRADC_NCCL(ncclGroupEnd(), where);
  if (c.rank == root)
    regroup(c.stream, c.scratch, out, b.outer, c.size, b.dim * b.inner * es, false, where);
  else
    fill_zero(c.stream, out, bytes * c.size);
}
inline void scatter(Comm& c, const void* in, void* out, Blocks b, DType t, int root, const char* where) {
  const int64_t es = dtype_size(t), bytes = b.count() * es;
  if (c.rank == root) regroup(c.stream, in, c.scratch, b.outer, c.size, b.dim * b.inner * es, true, where);
  GRADC_NCCL(ncclGroupStart(), where);
  if (c.rank == root)
    for (int k = 0; k < c.size; ++k)
      GRADC_NCCL(ncclSend(c.scratch + k * bytes, size_t(b.count()), nccl_type(t), k, c.nccl, c.stream), where);
  GRADC_NCCL(ncclRecv(out, size_t(b.count()), nccl_type(t), root, c.nccl, c.stream), where);
  GRADC_NCCL(ncclGroupEnd(), where);
}
// y_r: block r (along split) of every x_k, concatenated along concat: each block
// is packed contiguously, exchanged with grouped send/recv, and unpacked.
inline void all_to_all(Comm& c, const void* in, void* out, const int64_t* shape, int rank, int split, int concat,
                       DType t, const char* where) {
  const int N = c.size;
  const int64_t es = dtype_size(t);
  int64_t so = 1, si = es, co = 1, ci = es;
  for (int d = 0; d < split; ++d) so *= shape[d];
  for (int d = split + 1; d < rank; ++d) si *= shape[d];
  int64_t count = so * shape[split] * si / es;
  const int64_t part = count / N * es;  // bytes each rank sends each other rank
  char* send = c.scratch;
  char* recv = c.scratch + count * es;
  regroup(c.stream, in, send, so, N, shape[split] / N * si, true, where);  // [N, so, split/N, rest]
  GRADC_NCCL(ncclGroupStart(), where);
  for (int k = 0; k < N; ++k) {
    GRADC_NCCL(ncclSend(send + k * part, size_t(part / es), nccl_type(t), k, c.nccl, c.stream), where);
    GRADC_NCCL(ncclRecv(recv + k * part, size_t(part / es), nccl_type(t), k, c.nccl, c.stream), where);
  }
  GRADC_NCCL(ncclGroupEnd(), where);
  // recv[k] is block `rank` of x_k, shaped as x with split/N: place it at block k along concat.
  std::vector<int64_t> ps(shape, shape + rank);
  ps[size_t(split)] /= N;
  for (int d = 0; d < concat; ++d) co *= ps[size_t(d)];
  for (int d = concat + 1; d < rank; ++d) ci *= ps[size_t(d)];
  regroup(c.stream, recv, out, co, N, ps[size_t(concat)] * ci, false, where);
}
inline void permute(Comm& c, const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs,
                    const char* where) {
  bool received = false;
  GRADC_NCCL(ncclGroupStart(), where);
  for (int p = 0; p < n_pairs; ++p) {
    const int src = pairs[2 * p], dst = pairs[2 * p + 1];
    if (src == c.rank && dst == c.rank) continue;
    if (src == c.rank) GRADC_NCCL(ncclSend(in, size_t(count), nccl_type(t), dst, c.nccl, c.stream), where);
    if (dst == c.rank) GRADC_NCCL(ncclRecv(out, size_t(count), nccl_type(t), src, c.nccl, c.stream), where);
  }
  GRADC_NCCL(ncclGroupEnd(), where);
  for (int p = 0; p < n_pairs; ++p) {
    if (pairs[2 * p + 1] != c.rank) continue;
    received = true;
    if (pairs[2 * p] == c.rank) copy(c.stream, out, in, count * dtype_size(t));
  }
  if (!received) fill_zero(c.stream, out, count * dtype_size(t));
}

#else
// =============================== CPU =========================================
#if defined(__AVX__)
#include <immintrin.h>
#endif
struct Stream {};    // the CPU runs a rank's kernels in order on its thread
struct Partials {};  // a reduction's partial results: the CPU needs none
inline Partials alloc_partials() { return {}; }
inline void release(Partials) {}

// A kernel's loop iterations are independent: a kernel never writes memory it
// reads (the buffer plan gives its result a place none of its operands has), so
// the compiler may vectorise without checking for overlap. GRADC_VECTORIZE_SUM
// also lets it split a sum into vector lanes.
#if defined(__clang__)
#define GRADC_VECTORIZE _Pragma("clang loop vectorize(assume_safety)")
#define GRADC_VECTORIZE_SUM _Pragma("clang loop vectorize(enable) interleave(enable)")
#elif defined(__GNUC__)
#define GRADC_VECTORIZE _Pragma("GCC ivdep")
#define GRADC_VECTORIZE_SUM
#else
#define GRADC_VECTORIZE
#define GRADC_VECTORIZE_SUM
#endif

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
template <class T, class F>
inline void map(Stream, int64_t n, const F& f, T* out) {
#if defined(__AVX__)
  if (n * int64_t(sizeof(T)) >= kStreamBytes) {
    constexpr int64_t B = 1024 / int64_t(sizeof(T));
    alignas(32) T block[B];
    const int64_t head = int64_t((32 - reinterpret_cast<uintptr_t>(out) % 32) % 32) / int64_t(sizeof(T));
    for (int64_t i = 0, nb = 0; i < n; i += nb) {
      nb = i == 0 && head > 0 ? head : n - i < B ? n - i : B;
      GRADC_VECTORIZE
      for (int64_t j = 0; j < nb; ++j) block[j] = f(i + j);
      if (nb == B)
        for (int64_t j = 0; j < B; j += 32 / int64_t(sizeof(T)))
          _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i + j),
                              _mm256_load_si256(reinterpret_cast<const __m256i*>(block + j)));
      else
        memcpy(out + i, block, size_t(nb) * sizeof(T));
    }
    _mm_sfence();
    return;
  }
#endif
  GRADC_VECTORIZE
  for (int64_t i = 0; i < n; ++i) out[i] = f(i);
}

// out[o] = op over r of f(o, r). A sum accumulates in Acc (f64; i64 for i32) and is
// vectorised: the compiler splits it into L lanes (L = vector width x interleave, at
// most 64 here), each summing every L-th element in order, then adds the lanes; the
// error of a sum of n terms stays within (n / L + log2 L + 1) u sum |x_r|, u the
// accumulator's unit roundoff (2^-53), before the one rounding to T. A max or min is
// exact in any order (max_step, min_step): 16 vector lanes in T, each taking every
// 16th element, then the lanes in order; only which NaN or which zero is the result
// can differ from one pass in order.
template <class T, class F>
inline void reduce_one(ROp op, int64_t n_red, const F& f, int64_t o, T* out) {
  using A = typename Acc<T>::type;
  if (op == ROp::Sum) {
    A acc = 0;
    GRADC_VECTORIZE_SUM
    for (int64_t r = 0; r < n_red; ++r) acc += A(f(o, r));
    out[o] = T(acc);
    return;
  }
  constexpr int64_t L = 16;
  const T init = T(reduce_init<A>(op));
  T lane[L];
  for (int64_t j = 0; j < L; ++j) lane[j] = init;
  int64_t r = 0;
  for (; r + L <= n_red; r += L)
    for (int64_t j = 0; j < L; ++j) {
      const T x = T(f(o, r + j));
      lane[j] = op == ROp::Max ? max_step(lane[j], x) : min_step(lane[j], x);
    }
  T acc = init;
  for (int64_t j = 0; j < L; ++j) acc = reduce_step<T>(op, acc, lane[j]);
  for (; r < n_red; ++r) acc = reduce_step<T>(op, acc, T(f(o, r)));
  out[o] = acc;
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

// A row group: per row, every member on that row in turn (the row stays in cache).
template <class T, class F>
struct MapRow {
  int64_t len;
  F f;
  T* out;
  int64_t stride = len;  // where row r is written: at out + r * stride (a row-local buffer's: 0)
  void row(int64_t r) const { fill(out + r * stride, r); }
  // The row's elements are written through a pointer nothing else reads: what
  // depends on the row alone (a row's sum, and what is computed from it) is
  // computed once per row, outside the loop.
  void fill(T* __restrict o, int64_t r) const {
    GRADC_VECTORIZE
    for (int64_t j = 0; j < len; ++j) o[j] = f(r, j);
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
// A row-local buffer (LBuffer::row_local): each row written where the last was.
template <class T, class F>
MapRow<T, F> local_row(int64_t len, const F& f, T* out) {
  return MapRow<T, F>{len, f, out, 0};
}
template <class... S>
inline void rows(Stream, int64_t n_rows, const S&... steps) {
  for (int64_t r = 0; r < n_rows; ++r) (steps.row(r), ...);
}

// C[b] = alpha op(A[b]) op(B[b]), row-major, for b < batch.
struct Blas {};
template <class T>
inline void gemm(Blas, Stream, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t sa, const T* b,
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

inline void* alloc(int64_t bytes) { return bytes ? aligned_alloc(256, size_t((bytes + 255) / 256 * 256)) : nullptr; }
inline void release(void* p) { free(p); }
inline void fill_zero(Stream, void* p, int64_t bytes) { memset(p, 0, size_t(bytes)); }

// ---- communication ------------------------------------------------------------
// A collective's operand and result as blocks: [outer, dim, inner] elements,
// the block axis in the middle (outer = 1, inner = 1 for a whole buffer).
struct Blocks {
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t count() const { return outer * dim * inner; }
};

// What every communicator provides; each rank calls the same collectives in the
// same order. `in` and `out` may be the same buffer for all_reduce.
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
};

// The in-process communicator: N ranks as threads of one process. A collective
// publishes each rank's buffers, and each rank then reads the others' operands
// directly, once (no staging copies); a barrier before and after.
// Each rank's BLAS calls get an equal share of this machine's cores: `ranks_here` ranks
// (threads of this process, or processes on this node) each calling a BLAS that starts
// a thread per core would oversubscribe them. OPENBLAS_NUM_THREADS, when set, wins.
inline void share_blas_threads(int ranks_here) {
  if (getenv("OPENBLAS_NUM_THREADS")) return;
  const unsigned cores = std::thread::hardware_concurrency();
  openblas_set_num_threads(int(cores > unsigned(ranks_here) ? cores / unsigned(ranks_here) : 1));
}

class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), in_(size_t(n)), out_(size_t(n)) { share_blas_threads(n); }
  int size() const { return n_; }
  void barrier() {
    std::unique_lock<std::mutex> lock(m_);
    if (failed_) throw_failed();
    const uint64_t gen = gen_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++gen_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return gen_ != gen || failed_; });
      if (failed_) throw_failed();
    }
  }
  void fail(const char* why) {
    std::lock_guard<std::mutex> lock(m_);
    if (!failed_) why_ = why;
    failed_ = true;
    cv_.notify_all();
  }
  struct Stopped {};  // thrown in every rank once one has failed
  const void*& in(int r) { return in_[size_t(r)]; }
  void*& out(int r) { return out_[size_t(r)]; }

 private:
  [[noreturn]] void throw_failed() { throw Stopped{}; }
  int n_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::mutex m_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t gen_ = 0;
  bool failed_ = false;
  std::string why_;
};

class ThreadComm : public Comm {
 public:
  ThreadComm(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_.size(); }

  void all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) override {
    // Rank r reduces chunk r of every rank's operand into its own result, then
    // copies the other chunks from their owners: in place is safe, as no chunk is
    // read by one rank while another writes it.
    publish(in, out);
    const int N = size();
    const int64_t lo = count * rank_ / N, hi = count * (rank_ + 1) / N;
    typed(t, [&](auto z) {
      using T = decltype(z);
      T* y = static_cast<T*>(out);
      for (int64_t e = lo; e < hi; ++e) {
        T acc = src<T>(0)[e];
        for (int k = 1; k < N; ++k) acc = combine<T>(op, acc, src<T>(k)[e]);
        if (op == ROp::Avg) acc = T(acc / T(N));
        y[e] = acc;
      }
      g_.barrier();
      for (int k = 0; k < N; ++k) {
        if (k == rank_) continue;
        const int64_t klo = count * k / N, khi = count * (k + 1) / N;
        memcpy(y + klo, static_cast<const T*>(g_.out(k)) + klo, size_t(khi - klo) * sizeof(T));
      }
    });
    g_.barrier();
  }
  void all_gather(const void* in, void* out, Blocks b, DType t) override {
    publish(in, out);
    const int N = size();
    copy_blocks(t, out, b, N, [&](int k) { return g_.in(k); }, 0, b.dim);
    g_.barrier();
  }
  void reduce_scatter(const void* in, void* out, Blocks b, DType t, ROp op) override {
    publish(in, out);
    const int N = size();
    typed(t, [&](auto z) {
      using T = decltype(z);
      T* y = static_cast<T*>(out);
      for (int64_t o = 0; o < b.outer; ++o)
        for (int64_t d = 0; d < b.dim; ++d)
          for (int64_t i = 0; i < b.inner; ++i) {
            const int64_t e = (o * b.dim * N + rank_ * b.dim + d) * b.inner + i;
            T acc = src<T>(0)[e];
            for (int k = 1; k < N; ++k) acc = combine<T>(op, acc, src<T>(k)[e]);
            if (op == ROp::Avg) acc = T(acc / T(N));
            y[(o * b.dim + d) * b.inner + i] = acc;
          }
    });
    g_.barrier();
  }
  void broadcast(const void* in, void* out, int64_t count, DType t, int root) override {
    publish(in, out);
    if (out != g_.in(root)) memmove(out, g_.in(root), size_t(count * dtype_size(t)));
    g_.barrier();
  }
  void reduce(const void* in, void* out, int64_t count, DType t, ROp op, int root) override {
    publish(in, out);
    if (rank_ == root) {
      typed(t, [&](auto z) {
        using T = decltype(z);
        T* y = static_cast<T*>(out);
        for (int64_t e = 0; e < count; ++e) {
          T acc = src<T>(0)[e];
          for (int k = 1; k < size(); ++k) acc = combine<T>(op, acc, src<T>(k)[e]);
          if (op == ROp::Avg) acc = T(acc / T(size()));
          y[e] = acc;
        }
      });
    }
    g_.barrier();
    if (rank_ != root) memset(out, 0, size_t(count * dtype_size(t)));
  }
  void gather(const void* in, void* out, Blocks b, DType t, int root) override {
    publish(in, out);
    if (rank_ == root)
      copy_blocks(t, out, b, size(), [&](int k) { return g_.in(k); }, 0, b.dim);
    else
      memset(out, 0, size_t(b.count() * size() * dtype_size(t)));
    g_.barrier();
  }
  void scatter(const void* in, void* out, Blocks b, DType t, int root) override {
    publish(in, out);
    // Block r of the root's operand [outer, N*dim, inner] into this rank's [outer, dim, inner].
    const int64_t es = dtype_size(t);
    const char* x = static_cast<const char*>(g_.in(root));
    char* y = static_cast<char*>(out);
    for (int64_t o = 0; o < b.outer; ++o)
      memcpy(y + o * b.dim * b.inner * es, x + (o * b.dim * size() + rank_ * b.dim) * b.inner * es,
             size_t(b.dim * b.inner * es));
    g_.barrier();
  }
  void all_to_all(const void* in, void* out, const int64_t* shape, int rank, int split, int concat, DType t) override {
    publish(in, out);
    const int N = size();
    // The operand's shape is `shape`; the result's has shape[split] / N and shape[concat] * N.
    std::vector<int64_t> xs(shape, shape + rank), ys = xs;
    ys[size_t(split)] /= N;
    ys[size_t(concat)] *= N;
    int64_t count = 1;
    for (int64_t d : ys) count *= d;
    const int64_t es = dtype_size(t);
    std::vector<int64_t> idx(size_t(rank), 0);
    for (int64_t e = 0; e < count; ++e) {
      // idx: the result's multi-index of element e; k: the source rank; xi: the operand's index.
      int64_t rest = e;
      for (int d = rank - 1; d >= 0; --d) {
        idx[size_t(d)] = rest % ys[size_t(d)];
        rest /= ys[size_t(d)];
      }
      const int64_t block = ys[size_t(concat)] / N;  // each rank's part along the concat axis
      const int k = int(idx[size_t(concat)] / block);
      std::vector<int64_t> xi = idx;
      xi[size_t(concat)] -= k * block;
      xi[size_t(split)] += int64_t(rank_) * (xs[size_t(split)] / N);
      int64_t off = 0;
      for (int d = 0; d < rank; ++d) off = off * xs[size_t(d)] + xi[size_t(d)];
      memcpy(static_cast<char*>(out) + e * es, static_cast<const char*>(g_.in(k)) + off * es, size_t(es));
    }
    g_.barrier();
  }
  void permute(const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs) override {
    publish(in, out);
    const void* from = nullptr;
    for (int p = 0; p < n_pairs; ++p)
      if (pairs[2 * p + 1] == rank_) from = g_.in(pairs[2 * p]);
    if (from)
      memcpy(out, from, size_t(count * dtype_size(t)));
    else
      memset(out, 0, size_t(count * dtype_size(t)));
    g_.barrier();
  }
  void abort_all(const char* why) override { g_.fail(why); }

 private:
  template <class F>
  static void typed(DType t, F&& f) {
    if (t == DType::F32)
      f(float());
    else if (t == DType::F64)
      f(double());
    else
      f(int32_t());
  }
  template <class T>
  const T* src(int k) {
    return static_cast<const T*>(g_.in(k));
  }
  void publish(const void* in, void* out) {
    g_.in(rank_) = in;
    g_.out(rank_) = out;
    g_.barrier();
  }
  // out [outer, N*dim, inner]: block k of the middle axis from part(k) [outer, dim, inner].
  template <class P>
  static void copy_blocks(DType t, void* out, Blocks b, int N, P&& part, int, int64_t) {
    const int64_t es = dtype_size(t), row = b.dim * b.inner * es;
    for (int k = 0; k < N; ++k)
      for (int64_t o = 0; o < b.outer; ++o)
        memcpy(static_cast<char*>(out) + (o * N + k) * row, static_cast<const char*>(part(k)) + o * row, size_t(row));
  }
  ThreadGroup& g_;
  int rank_;
};

#if defined(GRADC_WITH_MPI)
// Ranks as processes under mpirun: MPI's collectives, with the blocks of a
// non-leading axis rearranged on the host around them.
class MpiComm : public Comm {
 public:
  explicit MpiComm(MPI_Comm c) : c_(c) {
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
    MPI_Comm node;  // the ranks on this node share its cores
    int here = 1;
    if (MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
      MPI_Comm_size(node, &here);
      MPI_Comm_free(&node);
    }
    share_blas_threads(here);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) override {
    check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, int(count), type(t), mpi_op(op), c_), "MPI_Allreduce");
    if (op == ROp::Avg) divide(out, count, t);
  }
  void all_gather(const void* in, void* out, Blocks b, DType t) override {
    const int64_t bytes = b.count() * dtype_size(t);
    std::vector<char> all(size_t(bytes * size_));
    check(MPI_Allgather(in, int(bytes), MPI_BYTE, all.data(), int(bytes), MPI_BYTE, c_), "MPI_Allgather");
    regroup(all.data(), out, b.outer, size_, b.dim * b.inner * dtype_size(t), false);
  }
  void reduce_scatter(const void* in, void* out, Blocks b, DType t, ROp op) override {
    std::vector<char> parts(size_t(b.count() * size_ * dtype_size(t)));
    regroup(in, parts.data(), b.outer, size_, b.dim * b.inner * dtype_size(t), true);
    check(MPI_Reduce_scatter_block(parts.data(), out, int(b.count()), type(t), mpi_op(op), c_),
          "MPI_Reduce_scatter_block");
    if (op == ROp::Avg) divide(out, b.count(), t);
  }
  void broadcast(const void* in, void* out, int64_t count, DType t, int root) override {
    if (rank_ == root && in != out) memmove(out, in, size_t(count * dtype_size(t)));
    check(MPI_Bcast(out, int(count), type(t), root, c_), "MPI_Bcast");
  }
  void reduce(const void* in, void* out, int64_t count, DType t, ROp op, int root) override {
    check(MPI_Reduce(in, out, int(count), type(t), mpi_op(op), root, c_), "MPI_Reduce");
    if (rank_ != root)
      memset(out, 0, size_t(count * dtype_size(t)));
    else if (op == ROp::Avg)
      divide(out, count, t);
  }
  void gather(const void* in, void* out, Blocks b, DType t, int root) override {
    const int64_t bytes = b.count() * dtype_size(t);
    std::vector<char> all(rank_ == root ? size_t(bytes * size_) : 0);
    check(MPI_Gather(in, int(bytes), MPI_BYTE, all.data(), int(bytes), MPI_BYTE, root, c_), "MPI_Gather");
    if (rank_ == root)
      regroup(all.data(), out, b.outer, size_, b.dim * b.inner * dtype_size(t), false);
    else
      memset(out, 0, size_t(bytes * size_));
  }
  void scatter(const void* in, void* out, Blocks b, DType t, int root) override {
    const int64_t bytes = b.count() * dtype_size(t);
    std::vector<char> parts(rank_ == root ? size_t(bytes * size_) : 0);
    if (rank_ == root) regroup(in, parts.data(), b.outer, size_, b.dim * b.inner * dtype_size(t), true);
    check(MPI_Scatter(parts.data(), int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, root, c_), "MPI_Scatter");
  }
  void all_to_all(const void* in, void* out, const int64_t* shape, int rank, int split, int concat, DType t) override {
    const int64_t es = dtype_size(t);
    int64_t so = 1, si = es, co = 1, ci = es, count = 1;
    for (int d = 0; d < rank; ++d) count *= shape[d];
    for (int d = 0; d < split; ++d) so *= shape[d];
    for (int d = split + 1; d < rank; ++d) si *= shape[d];
    std::vector<char> send(size_t(count * es)), recv(size_t(count * es));
    regroup(in, send.data(), so, size_, shape[split] / size_ * si, true);
    const int part = int(count / size_ * es);
    check(MPI_Alltoall(send.data(), part, MPI_BYTE, recv.data(), part, MPI_BYTE, c_), "MPI_Alltoall");
    std::vector<int64_t> ps(shape, shape + rank);
    ps[size_t(split)] /= size_;
    for (int d = 0; d < concat; ++d) co *= ps[size_t(d)];
    for (int d = concat + 1; d < rank; ++d) ci *= ps[size_t(d)];
    regroup(recv.data(), out, co, size_, ps[size_t(concat)] * ci, false);
  }
  void permute(const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs) override {
    const int bytes = int(count * dtype_size(t));
    std::vector<MPI_Request> reqs;
    bool received = false;
    for (int p = 0; p < n_pairs; ++p) {
      const int src = pairs[2 * p], dst = pairs[2 * p + 1];
      if (dst == rank_) received = true;
      if (src == rank_ && dst == rank_) {
        memmove(out, in, size_t(bytes));
        continue;
      }
      if (src == rank_) {
        reqs.emplace_back();
        check(MPI_Isend(in, bytes, MPI_BYTE, dst, 7, c_, &reqs.back()), "MPI_Isend");
      }
      if (dst == rank_) {
        reqs.emplace_back();
        check(MPI_Irecv(out, bytes, MPI_BYTE, src, 7, c_, &reqs.back()), "MPI_Irecv");
      }
    }
    check(MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
    if (!received) memset(out, 0, size_t(bytes));
  }
  void abort_all(const char* why) override {
    fprintf(stderr, "gradc: error: rank %d: %s\n", rank_, why);
    fflush(stderr);
    MPI_Abort(c_, 1);
  }

 private:
  static MPI_Datatype type(DType t) { return t == DType::F32 ? MPI_FLOAT : t == DType::F64 ? MPI_DOUBLE : MPI_INT32_T; }
  static MPI_Op mpi_op(ROp op) {
    return op == ROp::Prod ? MPI_PROD : op == ROp::Max ? MPI_MAX : op == ROp::Min ? MPI_MIN : MPI_SUM;
  }
  void divide(void* p, int64_t count, DType t) {
    if (t == DType::F32)
      for (int64_t i = 0; i < count; ++i) static_cast<float*>(p)[i] /= float(size_);
    else if (t == DType::F64)
      for (int64_t i = 0; i < count; ++i) static_cast<double*>(p)[i] /= double(size_);
  }
  void check(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "gradc: error: %s failed: %s (rank %d)\n", call, msg, rank_);
    MPI_Abort(c_, 1);
  }
  // [outer, parts, block] <-> [parts, outer, block], block in bytes.
  static void regroup(const void* src, void* dst, int64_t outer, int64_t parts, int64_t block, bool to_parts_first) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t p = 0; p < parts; ++p) {
        const int64_t a = (o * parts + p) * block, b = (p * outer + o) * block;
        memcpy(static_cast<char*>(dst) + (to_parts_first ? b : a),
               static_cast<const char*>(src) + (to_parts_first ? a : b), size_t(block));
      }
  }
  MPI_Comm c_;
  int rank_ = 0, size_ = 1;
};
#endif

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
#endif  // __CUDACC__

// A program built for one world size, started in another.
[[noreturn]] inline void wrong_world(const char* name, int world, int size) {
  fprintf(stderr,
          "gradc: error: %s was generated for %d ranks, but the communicator has %d; run gradc again with --ranks=%d\n",
          name, world, size, size);
  abort();
}
[[noreturn]] inline void missing_input(const char* name, const char* input) {
  fprintf(stderr, "gradc: error: %s::run(): input '%s' has no default and was not set (set_%s)\n", name, input, input);
  abort();
}

// A step writes its outputs while it still reads its inputs (and the outputs it wrote
// before), so memory given with set_<name>_out must not overlap an input's or another
// output's: run() checks the pointers it was given (a few comparisons) and stops.
struct Span {
  const void* p;  // null: not set
  int64_t bytes;
  const char* what;  // "input 'x'", "output 'y'"
  bool output;
};
template <size_t N>
inline void check_disjoint(const char* name, const Span (&spans)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (!spans[i].output || !spans[i].p) continue;
    const char* a = static_cast<const char*>(spans[i].p);
    for (size_t j = 0; j < N; ++j) {
      const char* b = static_cast<const char*>(spans[j].p);
      if (j == i || !b || a >= b + spans[j].bytes || b >= a + spans[i].bytes) continue;
      fprintf(stderr,
              "gradc: error: %s::run(): the memory of %s overlaps that of %s: an output needs memory of its own\n",
              name, spans[i].what, spans[j].what);
      abort();
    }
  }
}

// A shared input (LANGUAGE.md section 3) must hold the same bytes on every rank: each
// rank compares its data with rank 0's, the ranks exchange the verdicts, and every rank
// stops with the first rank that differs, in the interpreter's words. It synchronises
// and allocates: a class checks in debug builds only (every step), unless told
// (check_shared_inputs(): executables and gradc run check their first step).
#if !defined(GRADC_CHECK_SHARED)
#if defined(NDEBUG)
#define GRADC_CHECK_SHARED 0
#else
#define GRADC_CHECK_SHARED -1
#endif
#endif
inline void check_shared(Comm& c, Stream compute, const void* data, int64_t count, DType t, const char* name,
                         const char* where) {
  const size_t bytes = size_t(count * dtype_size(t));
  std::vector<char> first(bytes), mine(bytes);
#if defined(__CUDACC__)
  const int rank = c.rank, size = c.size;
  GRADC_CUDA(cudaStreamSynchronize(compute), where);
  char* dev = static_cast<char*>(alloc(int64_t(bytes) + 4 * (size + 1)));
  int32_t* flags = reinterpret_cast<int32_t*>(dev + (bytes + 3) / 4 * 4);
  GRADC_NCCL(ncclBroadcast(data, dev, size_t(count), nccl_type(t), 0, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  GRADC_CUDA(cudaMemcpy(first.data(), dev, bytes, cudaMemcpyDeviceToHost), where);
  GRADC_CUDA(cudaMemcpy(mine.data(), data, bytes, cudaMemcpyDeviceToHost), where);
  const int32_t differs = std::memcmp(first.data(), mine.data(), bytes) != 0;
  std::vector<int32_t> all(static_cast<size_t>(size));
  GRADC_CUDA(cudaMemcpy(flags + rank, &differs, 4, cudaMemcpyHostToDevice), where);
  GRADC_NCCL(ncclAllGather(flags + rank, flags, 1, ncclInt32, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  GRADC_CUDA(cudaMemcpy(all.data(), flags, 4 * size_t(size), cudaMemcpyDeviceToHost), where);
  release(dev);
#else
  (void)compute;
  const int size = c.size();
  c.broadcast(data, first.data(), count, t, 0);
  const int32_t differs = std::memcmp(first.data(), data, bytes) != 0;
  std::vector<int32_t> all(static_cast<size_t>(size));
  c.all_gather(&differs, all.data(), Blocks{1, 1, 1}, DType::I32);
#endif
  for (int r = 1; r < size; ++r)
    if (all[size_t(r)])
      throw std::runtime_error(std::string(where) + ": shared input '" + name + "' differs between ranks 0 and " +
                               std::to_string(r));
}

// gradc run --check-finite: the first NaN or infinity of an op's result stops the
// rank (on CUDA after copying the result to the host: a check synchronises).
template <class T>
void check_finite(Stream stream, const T* data, int64_t n, int rank, const char* where, const char* what,
                  const char* type, const char* dims) {
#if defined(__CUDACC__)
  std::vector<T> host(static_cast<size_t>(n));
  GRADC_CUDA(cudaMemcpyAsync(host.data(), data, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost, stream), where);
  GRADC_CUDA(cudaStreamSynchronize(stream), where);
  data = host.data();
#else
  (void)stream;
#endif
  for (int64_t i = 0; i < n; ++i) {
    const T v = data[i];
    if (v - v == v - v) continue;  // finite
    const char* what_value = v != v ? "NaN" : v > 0 ? "inf" : "-inf";
    throw std::runtime_error(std::string(where) + ": " + what + ": the result holds " + what_value + " on rank " +
                             std::to_string(rank) + ", at element " + element_str(i, dims) + " of " + type +
                             " (--check-finite)");
  }
}

}  // namespace gradc
