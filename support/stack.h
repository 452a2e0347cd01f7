// Recursion that cannot overflow the stack. A recursive walk calls
// `deep([&] { return recurse(...); })` at each level: while this thread's stack
// has room the call is direct; near its end the rest of the walk continues on a
// fresh 256 MiB segment (a helper thread that runs it while this one waits), as
// rustc's ensure_sufficient_stack does. So a long chain in a program
// (x + x + ... + x, 100k terms; 10k chained slices or nested function calls)
// works, limited only by memory; exceptions pass through unchanged.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

namespace gradc {

size_t stack_left();                                      // bytes left below the current frame
void on_new_stack(const std::function<void()>& f);        // runs f on a fresh segment and waits
inline constexpr size_t kStackRedZone = size_t(2) << 20;  // room one level of any walk may need

template <class F>
decltype(auto) deep(F&& f) {
  using R = decltype(f());
  if (stack_left() > kStackRedZone) return f();
  if constexpr (std::is_void_v<R>) {
    on_new_stack([&] { f(); });
  } else {
    std::optional<R> r;
    on_new_stack([&] { r.emplace(f()); });
    return R(std::move(*r));
  }
}

}  // namespace gradc
