// gradc's runtime, the CPU target's ranks as threads of one process: gradc's
// in-process communicator. See gradc_cpu.h.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "gradc_cpu.h"

namespace gradc {

// The in-process communicator: N ranks as threads of one process. A collective
// publishes each rank's buffers, and each rank then reads the others' operands
// directly, once (no staging copies); a barrier before and after.
class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : n_(n), in_(size_t(n)), out_(size_t(n)), split_(size_t(n)) { share_blas_threads(n); }
  // A group of some of parent's ranks (a mesh's group): a failure anywhere stops all of them.
  ThreadGroup(int n, ThreadGroup* parent)
      : n_(n), in_(size_t(n)), out_(size_t(n)), split_(size_t(n)), root_(parent->root_ ? parent->root_ : parent) {}
  ThreadGroup(const ThreadGroup&) = delete;
  ThreadGroup& operator=(const ThreadGroup&) = delete;
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
  // Stops every rank of the world: this group's root and each group split from it.
  void fail(const char* why) {
    ThreadGroup& root = root_ ? *root_ : *this;
    root.stop(why);
    std::vector<std::weak_ptr<ThreadGroup>> children;
    {
      std::lock_guard<std::mutex> lock(root.m_);
      children = root.children_;
    }
    for (const auto& c : children)
      if (auto g = c.lock()) g->stop(why);
  }
  // Rank `rank`'s group of those that give the same color, and its rank there (by key).
  std::pair<std::shared_ptr<ThreadGroup>, int> split(int rank, int color, int key) {
    split_[size_t(rank)] = {color, key, nullptr, 0};
    barrier();
    if (rank == 0) {
      std::map<int, std::vector<std::pair<int, int>>> by_color;  // (key, rank)
      for (int r = 0; r < n_; ++r) by_color[split_[size_t(r)].color].push_back({split_[size_t(r)].key, r});
      for (auto& [c, members] : by_color) {
        std::sort(members.begin(), members.end());
        auto g = std::make_shared<ThreadGroup>(int(members.size()), this);
        ThreadGroup& root = root_ ? *root_ : *this;
        {
          std::lock_guard<std::mutex> lock(root.m_);
          root.children_.push_back(g);
        }
        for (size_t k = 0; k < members.size(); ++k) {
          split_[size_t(members[k].second)].group = g;
          split_[size_t(members[k].second)].rank = int(k);
        }
      }
    }
    barrier();
    auto mine = std::make_pair(split_[size_t(rank)].group, split_[size_t(rank)].rank);
    barrier();  // every rank has its group before the next split overwrites them
    return mine;
  }
  struct Stopped {};  // thrown in every rank once one has failed
  const void*& in(int r) { return in_[size_t(r)]; }
  void*& out(int r) { return out_[size_t(r)]; }

 private:
  [[noreturn]] void throw_failed() { throw Stopped{}; }
  void stop(const char* why) {
    std::lock_guard<std::mutex> lock(m_);
    if (!failed_) why_ = why;
    failed_ = true;
    cv_.notify_all();
  }
  struct Split {
    int color = 0, key = 0;
    std::shared_ptr<ThreadGroup> group;
    int rank = 0;
  };
  int n_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
  std::mutex m_;
  std::condition_variable cv_;
  int waiting_ = 0;
  uint64_t gen_ = 0;
  bool failed_ = false;
  std::string why_;
  std::vector<Split> split_;
  ThreadGroup* root_ = nullptr;                       // the world's group, for a group split from it
  std::vector<std::weak_ptr<ThreadGroup>> children_;  // the world's: the groups split from it
};

class ThreadComm : public Comm {
 public:
  ThreadComm(ThreadGroup& g, int rank) : g_(g), rank_(rank) {}
  ThreadComm(std::shared_ptr<ThreadGroup> g, int rank) : owned_(std::move(g)), g_(*owned_), rank_(rank) {}
#if defined(GRADC_RUNTIME_OBJECT)
  ~ThreadComm() override;  // compiled once, with the vtable: gradc_runtime_object.cpp
#endif
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
      combine_ranks(op, y + lo, N, hi - lo, [&](int k) { return src<T>(k) + lo; });
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
      const int64_t run = b.dim * b.inner;  // this rank's block of each outer index
      for (int64_t o = 0; o < b.outer; ++o)
        combine_ranks(op, y + o * run, N, run, [&](int k) { return src<T>(k) + (o * N + rank_) * run; });
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
        combine_ranks(op, static_cast<T*>(out), size(), count, [&](int k) { return src<T>(k); });
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
    // Rank k's operand (shape `shape`) holds, at block `rank_` along split, the box this
    // rank's result holds at block k along concat; a box is copied a row (its last axis,
    // contiguous in both) at a time.
    std::vector<int64_t> xs(shape, shape + rank), ys = xs;
    ys[size_t(split)] /= N;
    ys[size_t(concat)] *= N;
    std::vector<int64_t> box = xs, xst(size_t(rank), 1), yst(size_t(rank), 1);
    box[size_t(split)] /= N;
    for (int d = rank - 2; d >= 0; --d) {
      xst[size_t(d)] = xst[size_t(d) + 1] * xs[size_t(d) + 1];
      yst[size_t(d)] = yst[size_t(d) + 1] * ys[size_t(d) + 1];
    }
    int64_t rows = 1;
    for (int d = 0; d + 1 < rank; ++d) rows *= box[size_t(d)];
    const int64_t es = dtype_size(t), run = box[size_t(rank) - 1] * es;
    std::vector<int64_t> idx(size_t(rank), 0);
    for (int k = 0; k < N && run > 0; ++k) {
      const char* x = static_cast<const char*>(g_.in(k)) + rank_ * box[size_t(split)] * xst[size_t(split)] * es;
      char* y = static_cast<char*>(out) + k * box[size_t(concat)] * yst[size_t(concat)] * es;
      std::fill(idx.begin(), idx.end(), 0);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t xo = 0, yo = 0;
        for (int d = 0; d + 1 < rank; ++d) {
          xo += idx[size_t(d)] * xst[size_t(d)];
          yo += idx[size_t(d)] * yst[size_t(d)];
        }
        memcpy(y + yo * es, x + xo * es, size_t(run));
        for (int d = rank - 2; d >= 0 && ++idx[size_t(d)] == box[size_t(d)]; --d) idx[size_t(d)] = 0;
      }
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
  std::unique_ptr<Comm> split(int color, int key) override {
    auto [group, rank] = g_.split(rank_, color, key);
    return std::make_unique<ThreadComm>(std::move(group), rank);
  }

 private:
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
  std::shared_ptr<ThreadGroup> owned_;  // a group split from the world's
  ThreadGroup& g_;
  int rank_;
};

}  // namespace gradc
