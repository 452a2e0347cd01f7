// A map from names to values, for tables that grow with the program (the names a
// program binds, the names taken when values are named). Open addressing over
// 8-byte slots, each a tag of the name's hash and the index of its entry; the
// entries sit in insertion order, where pointers to them stay valid. Inserting a
// new name reads one slot: the slots of 100k names fit in a core's L2 cache, where
// std::unordered_map's buckets and nodes (three dependent loads a lookup) did not.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gradc {

template <class T>
class NameMap {
 public:
  // Room for n names without growing.
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;  // at most half full
    if (cap > slots_.size()) rehash(cap);
  }
  T* find(std::string_view key) {
    if (slots_.empty()) return nullptr;
    const size_t s = slot_of(key, std::hash<std::string_view>()(key));
    const int32_t e = slots_[s].entry;
    return e >= 0 && !entries_[size_t(e)].erased ? &entries_[size_t(e)].value : nullptr;
  }
  // The value of `key`, and whether it is new (then `value` is stored).
  std::pair<T*, bool> try_emplace(std::string_view key, T value) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const size_t h = std::hash<std::string_view>()(key);
    const size_t s = slot_of(key, h);
    if (slots_[s].entry >= 0) {
      Entry& e = entries_[size_t(slots_[s].entry)];
      if (!e.erased) return {&e.value, false};
      e = Entry{e.key, std::move(value), false};  // erased before: bound again
      ++live_;
      return {&e.value, true};
    }
    slots_[s] = {uint32_t(h >> 32), int32_t(entries_.size())};
    entries_.push_back(Entry{std::string(key), std::move(value), false});
    ++live_;
    return {&entries_.back().value, true};
  }
  // Sets `key` to `value`, new or not.
  void set(std::string_view key, T value) {
    auto [v, fresh] = try_emplace(key, value);
    if (!fresh) *v = std::move(value);
  }
  void erase(std::string_view key) {
    if (slots_.empty()) return;
    const int32_t e = slots_[slot_of(key, std::hash<std::string_view>()(key))].entry;
    if (e >= 0 && !entries_[size_t(e)].erased) {
      entries_[size_t(e)].erased = true;
      --live_;
    }
  }
  bool empty() const { return live_ == 0; }
  // f(name, value) for each name, in the order they were first bound.
  template <class F>
  void for_each(F f) const {
    for (const Entry& e : entries_)
      if (!e.erased) f(e.key, e.value);
  }

 private:
  struct Slot {
    uint32_t tag = 0;    // the hash's high half
    int32_t entry = -1;  // -1: empty
  };
  struct Entry {
    std::string key;
    T value;
    bool erased = false;  // erased names keep their slot and entry (bound again, they take it back)
  };
  // The slot holding `key`, or the empty slot where it goes.
  size_t slot_of(std::string_view key, size_t h) const {
    const size_t mask = slots_.size() - 1;
    const uint32_t tag = uint32_t(h >> 32);
    for (size_t s = h & mask;; s = (s + 1) & mask) {
      const Slot& x = slots_[s];
      if (x.entry < 0 || (x.tag == tag && entries_[size_t(x.entry)].key == key)) return s;
    }
  }
  void rehash(size_t cap) {
    slots_.assign(cap, Slot{});
    for (size_t i = 0; i < entries_.size(); ++i) {
      const size_t h = std::hash<std::string_view>()(entries_[i].key);
      slots_[slot_of(entries_[i].key, h)] = {uint32_t(h >> 32), int32_t(i)};
    }
  }

  std::vector<Slot> slots_;
  std::deque<Entry> entries_;
  size_t live_ = 0;
};

}  // namespace gradc
