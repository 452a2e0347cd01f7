// gradc's runtime for the torch target (gradc emit --target=torch): the cache of the
// program's classes that the generated ops (NAME_ops.cpp) run, each on a communicator of
// PyTorch's process groups (gradc_torch.cpp). No PyTorch or Python header: the ops'
// translation units compile in seconds, and only gradc_torch.cpp includes ATen and c10d.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gradc_runtime.h"

namespace gradc {

// gradc's communicator interface on the op's process groups, as the package's
// __init__.py writes them: "axes=name:r0,r1,...;" for the world ("world") and each set
// of the mesh's axes ("dp", "dp+tp"); `splits` are the sets the class splits the world
// into, in its order (gradc_torch.cpp).
std::unique_ptr<Comm> torch_comm(const std::string& spec, const std::vector<std::string>& splits);

// The op's BLAS calls take as many threads as PyTorch's own ops (torch.set_num_threads;
// torchrun sets 1 a process), not OpenBLAS's default of one a core in every rank's
// process; OPENBLAS_NUM_THREADS, where set, wins (gradc_torch.cpp).
void match_blas_threads();

// The program's class on the groups of `spec`, made once per spec and kept (its
// workspace with it).
template <class Program>
Program& torch_program(const std::string& spec, const std::vector<std::string>& splits) {
  match_blas_threads();
  struct Made {
    std::unique_ptr<Comm> comm;
    std::unique_ptr<Program> program;
  };
  static std::mutex lock;
  static std::map<std::string, Made> made;
  std::lock_guard<std::mutex> hold(lock);
  Made& m = made[spec];
  if (!m.program) {
    m.comm = torch_comm(spec, splits);
    m.program = std::make_unique<Program>(*m.comm);
  }
  return *m.program;
}

}  // namespace gradc
