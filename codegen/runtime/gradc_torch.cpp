// gradc's runtime for the torch target: the communicator interface of gradc_cpu.h on a
// PyTorch process group (gloo for CPU tensors). The one source of the package that
// includes PyTorch's headers, and the same in every package of this gradc: __init__.py
// compiles it (torch.utils.cpp_extension) into a library of its own, once for them all,
// beside the package's library, and hands its entry (gradc_torch_runtime) to that one.
// <ATen/ATen.h> is, where it serves, the package's csrc/aten/ATen/ATen.h
// (gradc_torch_aten.h): the part of ATen this file and the c10d headers use.
//
// The one private PyTorch API the package uses is here: c10d::resolve_process_group,
// which finds a process group by its name (ProcessGroup.group_name in Python), as
// PyTorch's own functional collectives do. Tested with PyTorch 2.5.1.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/GroupRegistry.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <cstdlib>
#include <sstream>

#include "gradc_torch.h"

namespace gradc {
namespace {

// One group of the mesh (or the world) as the Python side names it: the process group,
// and for each of gradc's group ranks, in order, that rank's rank in the process group.
struct TorchGroup {
  std::string name;
  std::vector<int> order;
};

// gradc's collectives on a process group: gloo for CPU tensors. Every call waits for
// its work, except start_all_reduce (the shared-input check's), which finish_started
// waits for. The backend reads and writes the op's own buffers (at::from_blob), except
// where the blocks of a non-leading axis must be rearranged around its collectives, as
// MpiComm does; the ranks' blocks are placed by gradc's group order where it is not the
// process group's (over=[tp, dp]).
class TorchComm : public Comm {
 public:
  // `splits`: the groups the class asks for, in the order it splits (one each).
  TorchComm(const TorchGroup& g, std::vector<TorchGroup> splits = {})
      : pg_(c10d::resolve_process_group(g.name)), order_(g.order), splits_(std::move(splits)) {
    const int me = pg_->getRank();
    for (size_t k = 0; k < order_.size(); ++k)
      if (order_[k] == me) rank_ = int(k);
    if (rank_ < 0 || int(order_.size()) != pg_->getSize())
      throw std::runtime_error("gradc: the process group '" + g.name + "' of " + std::to_string(pg_->getSize()) +
                               " ranks is not the group this rank was given");
  }
  int rank() const override { return rank_; }
  int size() const override { return int(order_.size()); }

  void all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) override {
    copy(out, in, count, t);
    const bool keys = by_order_keys(op, t);  // a float max or min: its NaN rule (gradc_common.h)
    if (keys) order_keys(out, count, t, op, true);
    std::vector<at::Tensor> ts = {keys ? key_tensor(out, count, t) : tensor(out, count, t)};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op);
    pg_->allreduce(ts, o)->wait();
    if (keys) order_keys(out, count, t, op, false);
    if (op == ROp::Avg) divide(out, count, t);
  }
  void all_gather(const void* in, void* out, Blocks b, DType t) override {
    std::vector<std::vector<at::Tensor>> outs = {blocks(out, b, t, in)};
    std::vector<at::Tensor> ins = {tensor(const_cast<void*>(in), b.count(), t)};
    pg_->allgather(outs, ins)->wait();
    place(outs[0], out, b, t, in);
  }
  void reduce_scatter(const void* in, void* out, Blocks b, DType t, ROp op) override {
    // gloo has no reduce_scatter: each rank's blocks go to it (one all_to_all, as
    // torch.distributed.nn's all_gather backward does on gloo), and it combines them in
    // gradc's rank order, as the interpreter does
    const int n = size();
    const int64_t block = b.dim * b.inner * dtype_size(t), part = b.outer * block;
    bool in_order = b.outer == 1;  // the operand is the send buffer: blocks leading, groups in rank order
    for (int k = 0; k < n; ++k) in_order &= order_[size_t(k)] == k;
    at::Tensor recv = at::empty({part * n}, at::kByte);
    at::Tensor send =
        in_order ? at::from_blob(const_cast<void*>(in), {part * n}, at::kByte) : at::empty({part * n}, at::kByte);
    for (int64_t o = 0; o < b.outer && !in_order; ++o)
      for (int k = 0; k < n; ++k)
        memcpy(static_cast<char*>(send.data_ptr()) + order_[size_t(k)] * part + o * block,
               static_cast<const char*>(in) + (o * n + k) * block, size_t(block));
    std::vector<int64_t> sizes;
    pg_->alltoall_base(recv, send, sizes, sizes)->wait();
    const int64_t count = b.outer * b.dim * b.inner;
    typed(t, [&](auto z) {
      using T = decltype(z);
      const T* from = static_cast<const T*>(recv.data_ptr());
      combine_ranks(op, static_cast<T*>(out), n, count, [&](int k) { return from + order_[size_t(k)] * count; });
    });
  }
  void broadcast(const void* in, void* out, int64_t count, DType t, int root) override {
    if (rank_ == root) copy(out, in, count, t);
    std::vector<at::Tensor> ts = {tensor(out, count, t)};
    c10d::BroadcastOptions o;
    o.rootRank = order_[size_t(root)];
    pg_->broadcast(ts, o)->wait();
  }
  void reduce(const void* in, void* out, int64_t count, DType t, ROp op, int root) override {
    copy(out, in, count, t);
    const bool keys = by_order_keys(op, t);
    if (keys) order_keys(out, count, t, op, true);
    std::vector<at::Tensor> ts = {keys ? key_tensor(out, count, t) : tensor(out, count, t)};
    c10d::ReduceOptions o;
    o.reduceOp = reduce_op(op);
    o.rootRank = order_[size_t(root)];
    pg_->reduce(ts, o)->wait();
    if (keys && rank_ == root) order_keys(out, count, t, op, false);
    if (rank_ != root)
      memset(out, 0, size_t(count * dtype_size(t)));
    else if (op == ROp::Avg)
      divide(out, count, t);
  }
  void gather(const void* in, void* out, Blocks b, DType t, int root) override {
    std::vector<std::vector<at::Tensor>> outs;
    if (rank_ == root) outs.push_back(blocks(out, b, t, in));
    std::vector<at::Tensor> ins = {tensor(const_cast<void*>(in), b.count(), t)};
    c10d::GatherOptions o;
    o.rootRank = order_[size_t(root)];
    pg_->gather(outs, ins, o)->wait();
    if (rank_ == root)
      place(outs[0], out, b, t, in);
    else
      memset(out, 0, size_t(b.count() * size() * dtype_size(t)));
  }
  void scatter(const void* in, void* out, Blocks b, DType t, int root) override {
    std::vector<std::vector<at::Tensor>> parts;
    if (rank_ == root) {
      parts.push_back(blocks(const_cast<void*>(in), b, t, out));
      if (!views(in, b, t, out)) gather_blocks(in, parts[0], b, t);
    }
    std::vector<at::Tensor> outs = {tensor(out, b.count(), t)};
    c10d::ScatterOptions o;
    o.rootRank = order_[size_t(root)];
    pg_->scatter(outs, parts, o)->wait();
  }
  void all_to_all(const void* in, void* out, const int64_t* shape, int rank, int split, int concat, DType t) override {
    const int n = size();
    const AllToAllBlocks b = all_to_all_blocks(shape, rank, split, concat, n, t);
    const int64_t part = b.bytes / n;
    // part k (block k along split) goes to gradc rank k: process-group rank order_[k]
    at::Tensor send = at::empty({b.bytes}, at::kByte), recv = at::empty({b.bytes}, at::kByte);
    for (int64_t o = 0; o < b.so; ++o)
      for (int k = 0; k < n; ++k)
        memcpy(static_cast<char*>(send.data_ptr()) + order_[size_t(k)] * part + o * b.sblock,
               static_cast<const char*>(in) + (o * n + k) * b.sblock, size_t(b.sblock));
    std::vector<int64_t> sizes;
    pg_->alltoall_base(recv, send, sizes, sizes)->wait();
    for (int64_t o = 0; o < b.co; ++o)
      for (int k = 0; k < n; ++k)
        memcpy(static_cast<char*>(out) + (o * n + k) * b.cblock,
               static_cast<const char*>(recv.data_ptr()) + order_[size_t(k)] * part + o * b.cblock, size_t(b.cblock));
  }
  void permute(const void* in, void* out, int64_t count, DType t, const int* pairs, int n_pairs) override {
    std::vector<c10::intrusive_ptr<c10d::Work>> work;
    std::vector<std::vector<at::Tensor>> keep;
    bool received = false;
    for (int p = 0; p < n_pairs; ++p) {
      const int src = pairs[2 * p], dst = pairs[2 * p + 1];
      if (dst == rank_) received = true;
      if (src == rank_ && dst == rank_) {
        copy(out, in, count, t);
        continue;
      }
      if (src == rank_) {
        keep.push_back({tensor(const_cast<void*>(in), count, t)});
        work.push_back(pg_->send(keep.back(), order_[size_t(dst)], 7));
      }
      if (dst == rank_) {
        keep.push_back({tensor(out, count, t)});
        work.push_back(pg_->recv(keep.back(), order_[size_t(src)], 7));
      }
    }
    for (auto& w : work) w->wait();
    if (!received) memset(out, 0, size_t(count * dtype_size(t)));
  }
  // The shared-input check's all_reduce runs while the step's kernels do: on a copy of
  // its own, finished (and copied back) by finish_started. One that a failed step left
  // is waited for by the next start (every rank started it, so it completes) and
  // dropped: the buffer it was for is gone.
  bool start_all_reduce(const void* in, void* out, int64_t count, DType t, ROp op) override {
    if (work_) wait_started();
    started_ = at::empty({count}, options(t));
    memcpy(started_.data_ptr(), in, size_t(count * dtype_size(t)));
    std::vector<at::Tensor> ts = {started_};
    c10d::AllreduceOptions o;
    o.reduceOp = reduce_op(op);
    work_ = pg_->allreduce(ts, o);
    started_out_ = out, started_t_ = t, started_op_ = op;
    return true;
  }
  void finish_started() override {
    if (!work_) return;
    wait_started();
    memcpy(started_out_, started_.data_ptr(), started_.nbytes());
    if (started_op_ == ROp::Avg) divide(started_out_, started_.numel(), started_t_);
  }
  // A failing rank raises in its own process: the op's caller gets the message (the
  // other ranks wait in their next collective, as for any failed PyTorch collective).
  void abort_all(const char* why) override { throw std::runtime_error(why); }
  std::unique_ptr<Comm> split(int, int key) override {
    if (next_ >= splits_.size()) throw std::runtime_error("gradc: the program asked for more groups than it was given");
    auto c = std::make_unique<TorchComm>(splits_[next_++]);
    if (c->rank() != key) throw std::runtime_error("gradc: this rank's group is not in the mesh's order");
    return c;
  }

 private:
  // The started all_reduce waited for, and no longer pending (also when the wait throws).
  void wait_started() {
    c10::intrusive_ptr<c10d::Work> w = std::move(work_);
    work_.reset();
    w->wait();
  }
  // Whether a collective whose whole is `all` ([outer, size, block]) can run on views
  // of it: its blocks are the leading axis (outer = 1), and the rank's own buffer
  // (`mine`) is not inside it.
  bool views(const void* all, Blocks b, DType t, const void* mine) const {
    const char *a = static_cast<const char*>(all), *m = static_cast<const char*>(mine);
    return b.outer == 1 && (m + b.count() * dtype_size(t) <= a || m >= a + b.count() * size() * dtype_size(t));
  }
  // Its per-rank buffers, indexed by process-group rank: the views, or tensors of their
  // own, which place() and gather_blocks() copy.
  std::vector<at::Tensor> blocks(void* all, Blocks b, DType t, const void* mine) const {
    const bool v = views(all, b, t, mine);
    std::vector<at::Tensor> out(static_cast<size_t>(size()));
    for (int k = 0; k < size(); ++k)
      out[size_t(order_[size_t(k)])] = v ? tensor(static_cast<char*>(all) + k * b.count() * dtype_size(t), b.count(), t)
                                         : at::empty({b.count()}, options(t));
    return out;
  }
  void place(const std::vector<at::Tensor>& parts, void* all, Blocks b, DType t, const void* mine) const {
    if (views(all, b, t, mine)) return;
    const int64_t block = b.dim * b.inner * dtype_size(t);
    for (int64_t o = 0; o < b.outer; ++o)
      for (int k = 0; k < size(); ++k)
        memcpy(static_cast<char*>(all) + (o * size() + k) * block,
               static_cast<const char*>(parts[size_t(order_[size_t(k)])].data_ptr()) + o * block, size_t(block));
  }
  void gather_blocks(const void* all, std::vector<at::Tensor>& parts, Blocks b, DType t) const {
    const int64_t block = b.dim * b.inner * dtype_size(t);
    for (int64_t o = 0; o < b.outer; ++o)
      for (int k = 0; k < size(); ++k)
        memcpy(static_cast<char*>(parts[size_t(order_[size_t(k)])].data_ptr()) + o * block,
               static_cast<const char*>(all) + (o * size() + k) * block, size_t(block));
  }
  // bf16 and f16 only move here (their reductions are f32 ones: passes/low_precision.cpp):
  // both as 2-byte halves, which gloo and NCCL copy bit for bit (gloo moves no int16)
  static at::TensorOptions options(DType t) {
    switch (t) {
      case DType::F32: return at::TensorOptions().dtype(at::kFloat);
      case DType::F64: return at::TensorOptions().dtype(at::kDouble);
      case DType::BF16:
      case DType::F16: return at::TensorOptions().dtype(at::kHalf);
      case DType::I32: break;
    }
    return at::TensorOptions().dtype(at::kInt);
  }
  static at::Tensor tensor(void* p, int64_t count, DType t) { return at::from_blob(p, {count}, options(t)); }
  // the integers a float max or min goes by (order_keys)
  static at::Tensor key_tensor(void* p, int64_t count, DType t) {
    return at::from_blob(p, {count}, at::TensorOptions().dtype(t == DType::F64 ? at::kLong : at::kInt));
  }
  static void copy(void* out, const void* in, int64_t count, DType t) {
    if (out != in) memmove(out, in, size_t(count * dtype_size(t)));
  }
  static c10d::ReduceOp reduce_op(ROp op) {
    return op == ROp::Prod  ? c10d::ReduceOp::PRODUCT
           : op == ROp::Max ? c10d::ReduceOp::MAX
           : op == ROp::Min ? c10d::ReduceOp::MIN
                            : c10d::ReduceOp::SUM;  // avg: the sum, divided here (gloo has no avg)
  }
  void divide(void* p, int64_t count, DType t) { divide_by_ranks(p, count, t, size()); }
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  c10::intrusive_ptr<c10d::Work> work_;  // the started all_reduce, if any
  at::Tensor started_;
  void* started_out_ = nullptr;
  DType started_t_ = DType::I32;
  ROp started_op_ = ROp::Sum;
  std::vector<int> order_;
  std::vector<TorchGroup> splits_;
  size_t next_ = 0;
  int rank_ = -1;
};

// The op's groups, as the package's __init__.py writes them: "axes=name:r0,r1,...;"
// for the world ("world") and each set of the mesh's axes ("dp", "dp+tp").
std::map<std::string, TorchGroup> parse_groups(const std::string& spec) {
  std::map<std::string, TorchGroup> out;
  std::stringstream entries(spec);
  for (std::string e; std::getline(entries, e, ';');) {
    if (e.empty()) continue;
    const size_t eq = e.find('='), colon = e.rfind(':');
    TorchGroup g;
    g.name = e.substr(eq + 1, colon - eq - 1);
    std::stringstream ranks(e.substr(colon + 1));
    for (std::string r; std::getline(ranks, r, ',');) g.order.push_back(std::stoi(r));
    out[e.substr(0, eq)] = g;
  }
  return out;
}

void match_blas_threads() {
  static const bool fixed = getenv("OPENBLAS_NUM_THREADS") != nullptr;
  static std::atomic<int> set{0};
  const int n = at::get_num_threads();
  if (!fixed && set.exchange(n) != n) openblas_set_num_threads(n);
}

std::unique_ptr<Comm> torch_comm(const std::string& spec, const std::vector<std::string>& splits) {
  std::map<std::string, TorchGroup> groups = parse_groups(spec);
  std::vector<TorchGroup> split_groups;
  for (const std::string& axes : splits) split_groups.push_back(groups.at(axes));
  return std::make_unique<TorchComm>(groups.at("world"), split_groups);
}

}  // namespace
}  // namespace gradc

// The runtime library's one entry: its functions, which __init__.py hands to each
// package's library (NAME_op_bind).
extern "C" const void* gradc_torch_runtime() {
  static const gradc::TorchRuntime runtime{gradc::torch_comm, gradc::match_blas_threads};
  return &runtime;
}
