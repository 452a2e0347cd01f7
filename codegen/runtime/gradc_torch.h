// gradc's runtime for the torch target (gradc emit --target=torch): the cache of the
// program's classes that the generated ops (NAME_ops.cpp) run, each on a communicator of
// PyTorch's process groups (gradc_torch.cpp). No PyTorch or Python header: the ops'
// translation units compile in seconds, and only gradc_torch.cpp includes ATen and c10d.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "gradc_runtime.h"

namespace gradc {

// What the ops take from the runtime library (gradc_torch.cpp, compiled once and shared
// by every package of this gradc: with PyTorch's headers it is the longest compile),
// which __init__.py loads and hands to the package's library ({NAME}_op_bind):
// - comm: gradc's communicator interface on the op's process groups, as __init__.py
//   writes them: "axes=name:r0,r1,...;" for the world ("world") and each set of the
//   mesh's axes ("dp", "dp+tp"); `splits` are the sets the class splits the world into,
//   in its order;
// - match_blas_threads: the op's BLAS calls take as many threads as PyTorch's own ops
//   (torch.set_num_threads; torchrun sets 1 a process), not OpenBLAS's default of one a
//   core in every rank's process; OPENBLAS_NUM_THREADS, where set, wins.
struct TorchRuntime {
  std::unique_ptr<Comm> (*comm)(const std::string& spec, const std::vector<std::string>& splits) = nullptr;
  void (*match_blas_threads)() = nullptr;
};
inline TorchRuntime& torch_runtime() {
  static TorchRuntime runtime;
  return runtime;
}

// The program's class on the groups of `spec`, made once per spec and kept (its
// workspace with it), and held by this call: ctypes lets go of Python's lock, so two
// threads may call the op at once, and the second waits for the first's run (without
// it the two would share the class's inputs and workspace).
template <class Program>
Held<Program> torch_program(const std::string& spec, const std::vector<std::string>& splits) {
  const TorchRuntime& runtime = torch_runtime();
  if (!runtime.comm) throw std::runtime_error("gradc: the package's library was not given its runtime library");
  runtime.match_blas_threads();
  struct Made {
    std::unique_ptr<Comm> comm;
    std::unique_ptr<Program> program;
    std::mutex running;
  };
  static std::mutex lock;
  static std::map<std::string, Made> made;
  std::lock_guard<std::mutex> hold(lock);
  Made& m = made[spec];
  if (!m.program) {
    m.comm = runtime.comm(spec, splits);
    m.program = std::make_unique<Program>(*m.comm);
  }
  return {*m.program, std::unique_lock<std::mutex>(m.running)};
}

}  // namespace gradc
