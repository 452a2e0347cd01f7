// gradc's runtime for the torch target's CUDA ops (gradc emit --target=torch): the
// program's cuda classes (the cuda target's, the same kernels) on PyTorch's current
// stream, and an NCCL communicator per process group and device. Compiled by nvcc, with
// no PyTorch header: the package's NAME_cuda.cu includes it, and its functions, with a C
// interface of plain pointers and integers, are what __init__.py calls (ctypes).
//
// The communicator is the package's own, not the process group's: PyTorch 2.5 keeps
// ProcessGroupNCCL's communicators protected. Every rank of the group makes it at once
// (ncclCommInitRank) from an id that __init__.py broadcasts over the group, with gradc's
// rank k being the group's rank k; a class of a mesh program splits its groups from it
// (ncclCommSplit), as it does from an application's world communicator.
#pragma once
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "gradc_runtime.h"

namespace gradc {

// Runs on `device` (PyTorch's index), leaving the caller's current device as it was.
struct OnDevice {
  int before = -1;
  explicit OnDevice(int device) {
    GRADC_CUDA(cudaGetDevice(&before), "finding the current GPU");
    if (before != device) GRADC_CUDA(cudaSetDevice(device), "choosing the tensors' GPU");
  }
  ~OnDevice() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != before) cudaSetDevice(before);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
};

// A new NCCL id, NCCL_UNIQUE_ID_BYTES of them into `out` (group rank 0 makes it).
inline void torch_nccl_id(char* out) {
  ncclUniqueId id;
  GRADC_NCCL(ncclGetUniqueId(&id), "making the NCCL id");
  memcpy(out, id.internal, NCCL_UNIQUE_ID_BYTES);
}

// This rank's communicator of `size` ranks on `device`, from group rank 0's id. Kept
// until the process ends (as PyTorch keeps its own).
inline void* torch_nccl_comm(const char* id, int rank, int size, int device) {
  OnDevice on(device);
  ncclUniqueId uid;
  memcpy(uid.internal, id, NCCL_UNIQUE_ID_BYTES);
  ncclComm_t comm = nullptr;
  GRADC_NCCL(ncclCommInitRank(&comm, size, uid, rank), "making the NCCL communicator of the process group");
  return comm;
}

// The program's class on a communicator and stream, made once for each pair and kept
// until the process ends (its workspace with it), as torch_program keeps the CPU's, and
// held by this call as there: two threads enqueue its steps one after the other.
template <class Program>
Held<Program> torch_cuda_program(void* comm, int64_t stream) {
  struct Made {
    Program* program = nullptr;
    std::mutex running;
  };
  static std::mutex lock;
  static std::map<std::pair<void*, int64_t>, Made> made;
  std::lock_guard<std::mutex> hold(lock);
  Made& m = made[{comm, stream}];
  if (!m.program) m.program = new Program(static_cast<ncclComm_t>(comm), reinterpret_cast<cudaStream_t>(stream));
  return {*m.program, std::unique_lock<std::mutex>(m.running)};
}

}  // namespace gradc
