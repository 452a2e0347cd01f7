// Interning: each distinct value is stored once for the whole process, and a
// handle to it is a pointer, so copying one is free and comparing two is `==`.
// The IR interns what most of its nodes share (attribute sets, result types, name
// hints).
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace gradc {

// An open-addressing table over entries that are never freed or moved. Nodes
// are made from several threads (ranks, the prover), so it has a lock.
// `Traits` gives `static uint64_t hash(const T&)`, `static bool same(const T&, const T&)`
// and `static bool none(const T&)` (the empty value, which Interned stores as null).
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
    for (size_t s = h & (slots_.size() - 1); slots_[s].entry; s = (s + 1) & (slots_.size() - 1))
      if (slots_[s].hash == h && Traits::same(slots_[s].entry->value, v)) return slots_[s].entry;
    const Entry* e = &entries_.emplace_back(Entry{v, h});
    if (2 * entries_.size() > slots_.size()) {  // at most half full
      std::vector<Slot> old(2 * slots_.size());
      old.swap(slots_);
      for (const Slot& x : old)
        if (x.entry) place(x);
    }
    place({e, h});
    return e;
  }

 private:
  // A slot holds its entry's hash, so a lookup reads no other entry.
  struct Slot {
    const Entry* entry = nullptr;
    uint64_t hash = 0;
  };
  void place(Slot x) {
    size_t s = x.hash & (slots_.size() - 1);
    while (slots_[s].entry) s = (s + 1) & (slots_.size() - 1);
    slots_[s] = x;
  }
  std::mutex mu_;
  std::deque<Entry> entries_;
  std::vector<Slot> slots_ = std::vector<Slot>(64);
};

// A handle to an interned T: a pointer, null for T's empty value (Traits::none),
// so copying one is free and two are equal exactly when their values are (as
// Traits::same compares them). It reads as the const T it stands for.
template <class T, class Traits>
class Interned {
 public:
  Interned() = default;                                                                             // the empty value
  Interned(const T& v) : e_(Traits::none(v) ? nullptr : InternPool<T, Traits>::get().intern(v)) {}  // NOLINT: implicit
  operator const T&() const { return e_ ? e_->value : kNone; }                                      // NOLINT
  const T& operator*() const { return *this; }
  const T* operator->() const { return &static_cast<const T&>(*this); }
  bool operator==(const Interned& o) const { return e_ == o.e_; }
  uint64_t hash() const { return e_ ? e_->hash : 0; }  // of the value, the same in every run

 private:
  static inline const T kNone{};
  const typename InternPool<T, Traits>::Entry* e_ = nullptr;
};

}  // namespace gradc
