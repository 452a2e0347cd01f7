// The native backend, gradc run's default: the program's generated CPU code
// (codegen/, target cpu) compiled into a shared library with clang++-19 at -O3
// for this machine, cached under $XDG_CACHE_HOME/gradc (~/.cache/gradc) by a
// hash of the sources and the compile command, and run in this process with the
// ranks as threads. Inputs are read and outputs printed by gradc itself, as for
// the interpreter, so both backends accept and print exactly the same things.
#pragma once
#include <string>
#include <vector>

#include "ir/lowered.h"
#include "runtime/interp.h"

namespace gradc {

struct NativeRun {
  RankOutputs outputs;
  std::vector<double> step_ms;  // the timed steps (all ranks, defaults evaluated once before)
};

// Whether this machine can compile the native backend's code; why not, if not.
bool native_available(std::string* why = nullptr);

// Runs the lowered program on every rank with `inputs` (checked by complete_inputs;
// a missing one takes its default), 1 + iters steps.
NativeRun run_native(const Lowered& l, const std::string& source_path, const RankInputs& inputs, int iters);

}  // namespace gradc
