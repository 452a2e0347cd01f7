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
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F64: return ncclFloat64;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    case DType::I32: break;
  }
  return ncclInt32;
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
// [outer, parts, block] <-> [parts, outer, block] element moves, for the collectives
// whose blocks are not contiguous along the block axis; U is the unit moved (16 bytes
// where the pointers and the block allow it, down to one byte).
template <class U>
__global__ void regroup_kernel(const U* src, U* dst, int64_t outer, int64_t parts, int64_t block, bool to_parts_first) {
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
template <class U>
inline void regroup_in(cudaStream_t s, const void* src, void* dst, int64_t outer, int64_t parts, int64_t block_bytes,
                       bool to_parts_first) {
  const int64_t block = block_bytes / int64_t(sizeof(U)), n = outer * parts * block;
  regroup_kernel<U>
      <<<grid(n), 256, 0, s>>>(static_cast<const U*>(src), static_cast<U*>(dst), outer, parts, block, to_parts_first);
}
inline void regroup(cudaStream_t s, const void* src, void* dst, int64_t outer, int64_t parts, int64_t block_bytes,
                    bool to_parts_first, const char* where) {
  const int64_t bytes = outer * parts * block_bytes;
  if (bytes == 0) return;
  if (outer == 1 || parts == 1) {  // the same order either way: a copy
    GRADC_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), cudaMemcpyDeviceToDevice, s), where);
    return;
  }
  const uint64_t align =
      uint64_t(reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) | uint64_t(block_bytes);
  if (align % 16 == 0)
    regroup_in<uint4>(s, src, dst, outer, parts, block_bytes, to_parts_first);
  else if (align % 8 == 0)
    regroup_in<uint2>(s, src, dst, outer, parts, block_bytes, to_parts_first);
  else if (align % 4 == 0)
    regroup_in<uint32_t>(s, src, dst, outer, parts, block_bytes, to_parts_first);
  else if (align % 2 == 0)
    regroup_in<uint16_t>(s, src, dst, outer, parts, block_bytes, to_parts_first);
  else
    regroup_in<char>(s, src, dst, outer, parts, block_bytes, to_parts_first);
  GRADC_CUDA(cudaGetLastError(), where);
}

// A float max or min goes by order keys (gradc_common.h): NCCL's own is fmaxf, which
// drops a NaN. from -> to (the same buffer, or not), n values of t, to the keys or back.
template <class F>
__global__ void order_keys_kernel(const void* from, void* to, int64_t n, bool max, bool to_keys) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(blockDim.x) * gridDim.x)
    order_key_at<F>(from, to, i, max, to_keys);
}
inline void order_keys(cudaStream_t s, const void* from, void* to, int64_t n, DType t, ROp op, bool to_keys,
                       const char* where) {
  if (n == 0) return;
  if (t == DType::F32)
    order_keys_kernel<float><<<grid(n), 256, 0, s>>>(from, to, n, op == ROp::Max, to_keys);
  else
    order_keys_kernel<double><<<grid(n), 256, 0, s>>>(from, to, n, op == ROp::Max, to_keys);
  GRADC_CUDA(cudaGetLastError(), where);
}
inline ncclDataType_t key_type(DType t) { return t == DType::F64 ? ncclInt64 : ncclInt32; }

inline void all_reduce(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, const char* where) {
  if (by_order_keys(op, t)) {
    order_keys(c.stream, in, out, count, t, op, true, where);
    GRADC_NCCL(ncclAllReduce(out, out, size_t(count), key_type(t), nccl_op(op), c.nccl, c.stream), where);
    order_keys(c.stream, out, out, count, t, op, false, where);
    return;
  }
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
  if (by_order_keys(op, t)) {  // the operand's keys in the scratch (twice its bytes)
    order_keys(c.stream, src, c.scratch, b.count() * c.size, t, op, true, where);
    GRADC_NCCL(ncclReduceScatter(c.scratch, out, size_t(b.count()), key_type(t), nccl_op(op), c.nccl, c.stream), where);
    order_keys(c.stream, out, out, b.count(), t, op, false, where);
    return;
  }
  GRADC_NCCL(ncclReduceScatter(src, out, size_t(b.count()), nccl_type(t), nccl_op(op), c.nccl, c.stream), where);
}
inline void broadcast(Comm& c, const void* in, void* out, int64_t count, DType t, int root, const char* where) {
  GRADC_NCCL(ncclBroadcast(in, out, size_t(count), nccl_type(t), root, c.nccl, c.stream), where);
}
inline void reduce_to(Comm& c, const void* in, void* out, int64_t count, DType t, ROp op, int root, const char* where) {
  if (by_order_keys(op, t)) {
    order_keys(c.stream, in, c.scratch, count, t, op, true, where);
    GRADC_NCCL(ncclReduce(c.scratch, out, size_t(count), key_type(t), nccl_op(op), root, c.nccl, c.stream), where);
    if (c.rank == root) order_keys(c.stream, out, out, count, t, op, false, where);
  } else {
    GRADC_NCCL(ncclReduce(in, out, size_t(count), nccl_type(t), nccl_op(op), root, c.nccl, c.stream), where);
  }
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

// The shared inputs' check (gradc_common.h): every input's hash in one all_reduce over
// the world; for an input whose hashes differ, its data compared element by element.
// A class for any size adds its sizes (StepSizes: hashed on the host), compared first.
inline void check_shared(Comm& world, Stream compute, const SharedInput<Comm>* in, int n, int32_t world_rank,
                         const StepSizes& sizes = {}) {
  const char* where = n ? in[0].where : sizes.n ? sizes.where : "check_shared";
  if (n) GRADC_CUDA(cudaStreamSynchronize(compute), where);  // the inputs' producers (the sizes are the host's)
  HashMessage msg(in, n, sizes);
  const int64_t bytes_msg = int64_t(msg.m.size()) * 4;
  char* dev = static_cast<char*>(alloc(8 * int64_t(n) + bytes_msg + kSharedRow * 4 * int64_t(world.size + 1)));
  unsigned long long* hashes = reinterpret_cast<unsigned long long*>(dev);
  int32_t* m = reinterpret_cast<int32_t*>(dev + 8 * n);
  int32_t* rows = reinterpret_cast<int32_t*>(dev + 8 * n + bytes_msg);
  GRADC_CUDA(cudaMemsetAsync(hashes, 0, 8 * size_t(n), world.stream), where);
  for (int k = 0; k < n; ++k) {
    const int64_t bytes = in[k].count * dtype_size(in[k].t);
    const int blocks = int(std::min<int64_t>(1024, (bytes / 8 + 256) / 256));
    if (bytes)
      hash_kernel<<<blocks, 256, 0, world.stream>>>(static_cast<const unsigned char*>(in[k].data), bytes, hashes + k);
    GRADC_CUDA(cudaGetLastError(), where);
  }
  std::vector<uint64_t> h(static_cast<size_t>(n));
  if (n) {
    GRADC_CUDA(cudaMemcpyAsync(h.data(), hashes, 8 * size_t(n), cudaMemcpyDeviceToHost, world.stream), where);
    GRADC_CUDA(cudaStreamSynchronize(world.stream), where);
  }
  for (int k = 0; k < n; ++k) msg.put(k, in[k].slot, h[size_t(k)] + uint64_t(in[k].count * dtype_size(in[k].t)));
  // on the stream the collective reads it on: a cudaMemcpy from pageable memory may
  // return before its copy lands, and the class's streams do not wait for it
  GRADC_CUDA(cudaMemcpyAsync(m, msg.m.data(), size_t(bytes_msg), cudaMemcpyHostToDevice, world.stream), where);
  GRADC_NCCL(ncclAllReduce(m, m, msg.m.size(), ncclInt32, ncclMax, world.nccl, world.stream), where);
  GRADC_CUDA(cudaMemcpyAsync(msg.m.data(), m, size_t(bytes_msg), cudaMemcpyDeviceToHost, world.stream), where);
  GRADC_CUDA(cudaStreamSynchronize(world.stream), where);
  if (msg.sizes_differ()) {  // before the inputs, whose lengths may be the sizes'
    release(dev);
    sizes_differ(sizes);
  }
  for (int k = 0; k < n; ++k) {
    if (!msg.differs(k)) continue;
    const SharedInput<Comm>& x = in[k];
    const int64_t size = dtype_size(x.t), bytes = x.count * size;
    std::vector<char> first(static_cast<size_t>(bytes)), own(static_cast<size_t>(bytes));
    char* buf = static_cast<char*>(alloc(bytes + 4));
    GRADC_NCCL(ncclBroadcast(x.data, buf, size_t(x.count), nccl_type(x.t), 0, x.group->nccl, x.group->stream), where);
    GRADC_CUDA(cudaMemcpyAsync(buf + bytes, &world_rank, 4, cudaMemcpyHostToDevice, x.group->stream), where);
    GRADC_NCCL(ncclBroadcast(buf + bytes, buf + bytes, 1, ncclInt32, 0, x.group->nccl, x.group->stream), where);
    GRADC_CUDA(cudaStreamSynchronize(x.group->stream), where);
    int32_t first_rank = 0, row[kSharedRow];
    GRADC_CUDA(cudaMemcpy(first.data(), buf, size_t(bytes), cudaMemcpyDeviceToHost), where);
    GRADC_CUDA(cudaMemcpy(&first_rank, buf + bytes, 4, cudaMemcpyDeviceToHost), where);
    GRADC_CUDA(cudaMemcpy(own.data(), x.data, size_t(bytes), cudaMemcpyDeviceToHost), where);
    release(buf);
    shared_row(first_difference(first.data(), own.data(), x.count, size), first_rank, world_rank, row);
    GRADC_CUDA(
        cudaMemcpyAsync(rows + kSharedRow * world.rank, row, 4 * kSharedRow, cudaMemcpyHostToDevice, world.stream),
        where);
    GRADC_NCCL(ncclAllGather(rows + kSharedRow * world.rank, rows, kSharedRow, ncclInt32, world.nccl, world.stream),
               where);
    GRADC_CUDA(cudaStreamSynchronize(world.stream), where);
    std::vector<int32_t> got(kSharedRow * size_t(world.size));
    GRADC_CUDA(cudaMemcpy(got.data(), rows, 4 * kSharedRow * size_t(world.size), cudaMemcpyDeviceToHost), where);
    release(dev);
    report_shared(got, x);
  }
  release(dev);
}
// The check in one piece: the CPU target's can leave its all_reduce running while the
// step's kernels do (gradc_cpu.h); NCCL's is ordered on the stream already.
inline bool start_check_shared(Comm& world, Stream compute, const SharedInput<Comm>* in, int n, int32_t world_rank,
                               HashMessage&, const StepSizes& sizes = {}) {
  check_shared(world, compute, in, n, world_rank, sizes);
  return false;
}
inline void finish_check_shared(Comm&, Stream, const SharedInput<Comm>*, int, int32_t, const HashMessage&,
                                const StepSizes& = {}) {}

}  // namespace gradc
