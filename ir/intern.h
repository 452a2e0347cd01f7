// Interning: each distinct value is stored once for the whole process, and a
// handle to it is a pointer, so copying one is free and comparing two is `==`.
// The IR interns what most of its nodes share (attribute sets, result types).
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace gradc {

// An open-addressing table over entries that are never freed or moved. Nodes
// are made from several threads (ranks, the prover), so it has a lock.
// `Traits` gives `static uint64_t hash(const T&)` and `static bool same(const T&, const T&)`.
template <class T, class Traits>
class InternPool {
 public:
  struct Entry {
    T value;
    uint64_t hash;
  };

  // The one pool of this kind; never destroyed, as nodes may outlive static destruction.
  static InternPool& get() {
    static InternPool* pool = new InternPool;
    return *pool;
  }

  const Entry* intern(const T& v) {
    const uint64_t h = Traits::hash(v);
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t s = h & (slots_.size() - 1); slots_[s]; s = (s + 1) & (slots_.size() - 1))
      if (slots_[s]->hash == h && Traits::same(slots_[s]->value, v)) return slots_[s];
    const Entry* e = &entries_.emplace_back(Entry{v, h});
    if (2 * entries_.size() > slots_.size()) {  // at most half full
      slots_.assign(2 * slots_.size(), nullptr);
      for (const Entry& x : entries_) place(&x);
    } else {
      place(e);
    }
    return e;
  }

 private:
  void place(const Entry* e) {
    size_t s = e->hash & (slots_.size() - 1);
    while (slots_[s]) s = (s + 1) & (slots_.size() - 1);
    slots_[s] = e;
  }
  std::mutex mu_;
  std::deque<Entry> entries_;
  std::vector<const Entry*> slots_ = std::vector<const Entry*>(64, nullptr);
};

}  // namespace gradc
