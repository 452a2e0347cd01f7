// gradc's runtime, the CUDA target's communication: NCCL, and grouped send/recv for
// what NCCL lacks. See gradc_common.h.
#pragma once
#include <nccl.h>

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

inline void check_shared(Comm& c, Stream compute, const void* data, int64_t count, DType t, const char* name,
                         const char* where) {
  const size_t bytes = size_t(count * dtype_size(t));
  std::vector<char> first(bytes), mine(bytes);
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
  report_shared(all, name, where);
}

inline void check_shared_group(Comm& c, Stream compute, const void* data, int64_t count, DType t, const char* name,
                               const char* where, int32_t world_rank, const char* along) {
  const size_t bytes = size_t(count * dtype_size(t));
  std::vector<char> first(bytes), mine(bytes);
  const int size = c.size;
  GRADC_CUDA(cudaStreamSynchronize(compute), where);
  char* dev = static_cast<char*>(alloc(int64_t(bytes) + 8 * (size + 1)));
  int32_t* flags = reinterpret_cast<int32_t*>(dev + (bytes + 3) / 4 * 4);  // [differs..., world ranks...]
  GRADC_NCCL(ncclBroadcast(data, dev, size_t(count), nccl_type(t), 0, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  GRADC_CUDA(cudaMemcpy(first.data(), dev, bytes, cudaMemcpyDeviceToHost), where);
  GRADC_CUDA(cudaMemcpy(mine.data(), data, bytes, cudaMemcpyDeviceToHost), where);
  const int32_t mine_flags[2] = {std::memcmp(first.data(), mine.data(), bytes) != 0, world_rank};
  GRADC_CUDA(cudaMemcpy(flags + 2 * c.rank, mine_flags, 8, cudaMemcpyHostToDevice), where);
  GRADC_NCCL(ncclAllGather(flags + 2 * c.rank, flags, 2, ncclInt32, c.nccl, c.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(c.stream), where);
  std::vector<int32_t> both(2 * static_cast<size_t>(size)), all, ranks;
  GRADC_CUDA(cudaMemcpy(both.data(), flags, 8 * size_t(size), cudaMemcpyDeviceToHost), where);
  release(dev);
  for (int k = 0; k < size; ++k) {
    all.push_back(both[2 * size_t(k)]);
    ranks.push_back(both[2 * size_t(k) + 1]);
  }
  report_shared_group(all, ranks, name, where, along);
}

}  // namespace gradc
