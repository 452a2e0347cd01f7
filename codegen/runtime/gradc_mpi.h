// gradc's runtime, the CPU target's ranks as MPI processes (under mpirun). Included
// where GRADC_WITH_MPI is defined (gradc_add_program(... MPI)). See gradc_cpu.h.
#pragma once
#include <mpi.h>

#include "gradc_cpu.h"

namespace gradc {

// Ranks as processes under mpirun: MPI's collectives, with the blocks of a
// non-leading axis rearranged on the host around them.
class MpiComm : public Comm {
 public:
  // A group's communicator (split from the world's, `world`, which failures abort, and
  // then freed with this; or the application's, `owned` false).
  MpiComm(MPI_Comm c, MPI_Comm world, bool owned = true) : c_(c), world_(world), owned_(owned) {
    MPI_Comm_rank(c, &rank_);
    MPI_Comm_size(c, &size_);
    MPI_Comm_rank(world, &world_rank_);
  }
#if defined(GRADC_RUNTIME_OBJECT)
  ~MpiComm() override;  // compiled once, with the vtable: gradc_runtime_object.cpp
#else
  ~MpiComm() override { release(); }
#endif
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;
  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(c_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiComm>(sub, world_);
  }
  explicit MpiComm(MPI_Comm c) : c_(c), world_(c) {
    MPI_Comm_rank(c, &rank_);
    world_rank_ = rank_;
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
    if (by_order_keys(op, t)) {  // a float max or min: its NaN rule (gradc_common.h)
      if (in != out) memmove(out, in, size_t(count * dtype_size(t)));
      order_keys(out, count, t, op, true);
      check(MPI_Allreduce(MPI_IN_PLACE, out, int(count), key_type(t), mpi_op(op), c_), "MPI_Allreduce");
      order_keys(out, count, t, op, false);
      return;
    }
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
    const bool keys = by_order_keys(op, t);
    if (keys) order_keys(parts.data(), b.count() * size_, t, op, true);
    check(MPI_Reduce_scatter_block(parts.data(), out, int(b.count()), keys ? key_type(t) : type(t), mpi_op(op), c_),
          "MPI_Reduce_scatter_block");
    if (keys) order_keys(out, b.count(), t, op, false);
    if (op == ROp::Avg) divide(out, b.count(), t);
  }
  void broadcast(const void* in, void* out, int64_t count, DType t, int root) override {
    if (rank_ == root && in != out) memmove(out, in, size_t(count * dtype_size(t)));
    check(MPI_Bcast(out, int(count), type(t), root, c_), "MPI_Bcast");
  }
  void reduce(const void* in, void* out, int64_t count, DType t, ROp op, int root) override {
    if (by_order_keys(op, t)) {  // a float max or min: its NaN rule (gradc_common.h)
      std::vector<char> keys(size_t(count * dtype_size(t)));
      memcpy(keys.data(), in, keys.size());
      order_keys(keys.data(), count, t, op, true);
      check(MPI_Reduce(keys.data(), out, int(count), key_type(t), mpi_op(op), root, c_), "MPI_Reduce");
      if (rank_ == root) order_keys(out, count, t, op, false);
    } else {
      check(MPI_Reduce(in, out, int(count), type(t), mpi_op(op), root, c_), "MPI_Reduce");
    }
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
    const AllToAllBlocks b = all_to_all_blocks(shape, rank, split, concat, size_, t);
    std::vector<char> send(size_t(b.bytes)), recv(size_t(b.bytes));
    regroup(in, send.data(), b.so, size_, b.sblock, true);
    const int part = int(b.bytes / size_);
    check(MPI_Alltoall(send.data(), part, MPI_BYTE, recv.data(), part, MPI_BYTE, c_), "MPI_Alltoall");
    regroup(recv.data(), out, b.co, size_, b.cblock, false);
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
    fprintf(stderr, "gradc: error: rank %d: %s\n", world_rank_, why);
    fflush(stderr);
    MPI_Abort(world_, 1);
  }

 private:
  void release() {
    if (owned_) MPI_Comm_free(&c_);
  }
  // bf16 and f16 values only move here (a broadcast): the low-precision pass makes
  // their reductions moves and f32 sums, so no MPI arithmetic sees them.
  static MPI_Datatype type(DType t) {
    switch (t) {
      case DType::F32: return MPI_FLOAT;
      case DType::F64: return MPI_DOUBLE;
      case DType::BF16:
      case DType::F16: return MPI_UINT16_T;
      case DType::I32: break;
    }
    return MPI_INT32_T;
  }
  // the integers a float max or min goes by (order_keys)
  static MPI_Datatype key_type(DType t) { return t == DType::F64 ? MPI_INT64_T : MPI_INT32_T; }
  static MPI_Op mpi_op(ROp op) {
    return op == ROp::Prod ? MPI_PROD : op == ROp::Max ? MPI_MAX : op == ROp::Min ? MPI_MIN : MPI_SUM;
  }
  void divide(void* p, int64_t count, DType t) { divide_by_ranks(p, count, t, size_); }
  void check(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fprintf(stderr, "gradc: error: %s failed: %s (rank %d)\n", call, msg, world_rank_);
    MPI_Abort(world_, 1);
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
  MPI_Comm world_;      // failures abort the world
  bool owned_ = false;  // a group's: freed with it
  int rank_ = 0, size_ = 1, world_rank_ = 0;
};

}  // namespace gradc
