// gradc's runtime, the CUDA target's communication: NCCL, and grouped send/recv for
// what NCCL lacks. See gradc_common.h.
#pragma once
#include <nccl.h>

#include <algorithm>

#include "gradc_cuda.h"

namespace gradc {

// ---- communication: NCCL, and grouped send/recv for what NCCL lacks -------------
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

// The hash of gradc_common.h's hash_bytes, on the GPU: each thread sums its words, each
// warp its threads', and one atomic add per warp (a wrapping sum: any order gives it).
static __global__ void hash_kernel(const unsigned char* p, int64_t bytes, unsigned long long* out) {
  const int64_t words = (bytes + 7) / 8;
  uint64_t h = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < words; i += int64_t(blockDim.x) * gridDim.x) {
    uint64_t w = 0;
    memcpy(&w, p + 8 * i, size_t(bytes - 8 * i < 8 ? bytes - 8 * i : 8));
    h += hash_word(w, i);
  }
  for (int d = 16; d; d /= 2) h += __shfl_down_sync(0xffffffffu, h, d);
  if (threadIdx.x % 32 == 0) atomicAdd(out, (unsigned long long)h);
}

// A shared input's check (gradc_common.h): the hashes compared in one all_reduce; where
// they differ, the data compared with the group's first rank's, element by element.
inline void check_shared(Comm& c, Stream compute, const void* data, int64_t count, DType t, const char* what,
                         const char* where, const char* note, const char* dims, int32_t world_rank) {
  const int64_t size = dtype_size(t), bytes = count * size;
  GRADC_CUDA(cudaStreamSynchronize(compute), where);
  char* dev = static_cast<char*>(alloc(8 + 16 * int64_t(c.size + 1)));
  unsigned long long* hash = reinterpret_cast<unsigned long long*>(dev);
  int32_t* msg = reinterpret_cast<int32_t*>(dev + 8);
  GRADC_CUDA(cudaMemsetAsync(hash, 0, 8, c.stream), where);
  const int blocks = int(std::min<int64_t>(1024, (bytes / 8 + 256) / 256));
  if (bytes) hash_kernel<<<blocks, 256, 0, c.stream>>>(static_cast<const unsigned char*>(data), bytes, hash);
  GRADC_CUDA(cudaGetLastError(), where);
  uint64_t h = 0;
  GRADC_CUDA(cudaMemcpyAsync(&h, hash, 8, cudaMemcpyDeviceToHost, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  int32_t mine[4];
  hash_message(h + uint64_t(bytes), mine);
  GRADC_CUDA(cudaMemcpy(msg, mine, 16, cudaMemcpyHostToDevice), where);
  GRADC_NCCL(ncclAllReduce(msg, msg, 4, ncclInt32, ncclMax, c.nccl, c.stream), where);
  GRADC_CUDA(cudaMemcpyAsync(mine, msg, 16, cudaMemcpyDeviceToHost, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  release(dev);
  if (!hashes_differ(mine)) return;
  // a difference: every rank compares its data with the group's first rank's
  std::vector<char> first(static_cast<size_t>(bytes)), own(static_cast<size_t>(bytes));
  char* all = static_cast<char*>(alloc(bytes + 16 * int64_t(c.size + 1)));
  int32_t* rows = reinterpret_cast<int32_t*>(all + (bytes + 15) / 16 * 16);
  GRADC_NCCL(ncclBroadcast(data, all, size_t(count), nccl_type(t), 0, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  GRADC_CUDA(cudaMemcpy(first.data(), all, size_t(bytes), cudaMemcpyDeviceToHost), where);
  GRADC_CUDA(cudaMemcpy(own.data(), data, size_t(bytes), cudaMemcpyDeviceToHost), where);
  int32_t row[4];
  shared_row(first_difference(first.data(), own.data(), count, size), world_rank, row);
  GRADC_CUDA(cudaMemcpy(rows + 4 * c.rank, row, 16, cudaMemcpyHostToDevice), where);
  GRADC_NCCL(ncclAllGather(rows + 4 * c.rank, rows, 4, ncclInt32, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  std::vector<int32_t> got(4 * size_t(c.size));
  GRADC_CUDA(cudaMemcpy(got.data(), rows, 16 * size_t(c.size), cudaMemcpyDeviceToHost), where);
  release(all);
  report_shared(got, what, where, note, dims);
}

}  // namespace gradc
