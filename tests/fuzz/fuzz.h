// Shared by the libFuzzer targets: what counts as a finding. A UserError (a
// located diagnostic for a bad program or file) is the right answer to a bad
// input; anything else that escapes (an internal error, a library exception) is
// a bug, and so is a crash or a sanitizer report, which libFuzzer catches itself.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "ops/register.h"
#include "support/diag.h"

// libFuzzer's start-up hook: every op's rules into every layer's tables, as main does.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  gradc::register_all();
  return 0;
}

namespace gradc::fuzz {

// Programs a fuzzer builds may ask for any amount of memory; the targets that
// run them stay below this many bytes per rank (passes/cost.h's peak).
inline constexpr double kMaxPeakBytes = 16 << 20;

template <class F>
int guarded(F&& f) {
  try {
    f();
  } catch (const UserError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gradc fuzz: escaped exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace gradc::fuzz
