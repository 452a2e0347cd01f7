// The native backend, gradc run's default: the program's generated CPU code
// (codegen/, target cpu) compiled into a shared library with clang++-19 at -O3
// for this machine, cached under $XDG_CACHE_HOME/gradc (~/.cache/gradc) by a
// hash of the sources and the compile command, and run in this process with the
// ranks as threads. Inputs are read and outputs printed by gradc itself, as for
// the interpreter, so both backends accept and print exactly the same things.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "codegen/cpp.h"
#include "ir/lowered.h"
#include "runtime/interp.h"

namespace gradc {

struct NativeRun {
  RankOutputs outputs;
  std::vector<double> step_ms;  // the timed steps (all ranks, defaults evaluated once before)
};

// The runtime's headers among `files` (gradc_*.h), taken out of them into a folder
// of the cache that every program compiled with the same flags shares; with clang,
// precompiled there once (-include-pch: parsing them is about 2 s of each compile,
// a third of a small program's), and their shared part compiled there once into an
// object that each program links (gradc_runtime_object.cpp: the communicators'
// virtual functions and an executable's main, about 2 s more of a small program's).
// Flags of the native backend's compile, or with `exe` of an executable's (gradc
// build --target=cpu). Where the folder cannot be written, the files stay as they are
// and the flags are empty.
struct SharedRuntime {
  std::string folder;  // "" where not shared
  std::string pch;     // the precompiled header, "" where not precompiled
  std::string object;  // the runtime's object, which a program compiled with the header links
  // What the program's compile and link add; with_pch false: the headers alone.
  std::string flags(bool with_pch) const;
  std::string where() const;  // for a message: where the headers are
  // Runs `compile` with the flags it adds (empty on success, else why not), and once
  // more without the precompiled header where that fails: a header another compiler
  // wrote, or one left broken, does not stop a compile.
  std::string compile(const std::function<std::string(const std::string& flags)>& compile) const;
};
SharedRuntime shared_runtime(std::vector<GeneratedFile>& files, bool exe);

// Whether this machine can compile the native backend's code; why not, if not.
bool native_available(std::string* why = nullptr);

// Runs the lowered program on every rank with `inputs` (checked by complete_inputs;
// a missing one takes its default), 1 + iters steps.
NativeRun run_native(const Lowered& l, const std::string& source_path, const RankInputs& inputs, int iters);

}  // namespace gradc
