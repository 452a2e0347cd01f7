// The CUDA map kernels that compute two 16-bit elements at a time (docs/codegen.md, "Two
// 16-bit elements at a time") fall back to one at a time where a pointer is not aligned
// to two elements, as a PyTorch tensor sliced at an odd element is. tests/codegen/pairs.dg's
// class, run with every input and output at element 0 of its buffer (the pairs) and at
// element 1 (one at a time), must give the same bytes. scripts/gpu_check.sh builds and
// runs it (the case pairs_offsets); it needs one GPU.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "pairs.h"

namespace {

// A device buffer of n elements of T, one element longer, used from element `at`.
template <class T>
struct Buffer {
  T* base = nullptr;
  T* at = nullptr;
  int64_t n;
  Buffer(int64_t count, int offset) : n(count) {
    GRADC_CUDA(cudaMalloc(&base, size_t(n + 1) * sizeof(T)), "pairs_offsets");
    at = base + offset;
  }
  ~Buffer() { cudaFree(base); }
  void put(const std::vector<T>& v) {
    GRADC_CUDA(cudaMemcpy(at, v.data(), size_t(n) * sizeof(T), cudaMemcpyHostToDevice), "pairs_offsets");
  }
  std::vector<unsigned char> bytes() const {
    std::vector<unsigned char> b(size_t(n) * sizeof(T));
    GRADC_CUDA(cudaMemcpy(b.data(), at, b.size(), cudaMemcpyDeviceToHost), "pairs_offsets");
    return b;
  }
};

struct Inputs {
  std::vector<gradc::bfloat16> x;
  std::vector<float> w;
  std::vector<gradc::float16> h, b;
};

// Every output's bytes, with every pointer at element `offset` of its buffer.
std::vector<std::vector<unsigned char>> run(ncclComm_t comm, cudaStream_t stream, const Inputs& in, int offset) {
  Buffer<gradc::bfloat16> x(pairs::x_size, offset), y(pairs::y_size, offset), dx(pairs::dx_size, offset);
  Buffer<float> w(pairs::w_size, offset), loss(pairs::loss_size, offset);
  Buffer<gradc::float16> h(pairs::h_size, offset), b(pairs::b_size, offset), z(pairs::z_size, offset),
      dh(pairs::dh_size, offset);
  x.put(in.x), w.put(in.w), h.put(in.h), b.put(in.b);
  pairs step(comm, stream);
  step.set_x(x.at), step.set_w(w.at), step.set_h(h.at), step.set_b(b.at);
  step.set_y_out(y.at), step.set_z_out(z.at), step.set_loss_out(loss.at), step.set_dx_out(dx.at);
  step.set_dh_out(dh.at);
  step.run();
  GRADC_CUDA(cudaStreamSynchronize(stream), "pairs_offsets");
  return {y.bytes(), z.bytes(), loss.bytes(), dx.bytes(), dh.bytes()};
}

}  // namespace

int main() {
  ncclComm_t comm;
  int device = 0;
  GRADC_NCCL(ncclCommInitAll(&comm, 1, &device), "pairs_offsets: the communicator");
  cudaStream_t stream;
  GRADC_CUDA(cudaStreamCreate(&stream), "pairs_offsets");
  Inputs in;
  for (int64_t i = 0; i < pairs::x_size; ++i) in.x.push_back(gradc::to_bfloat16(float(std::sin(0.37 * double(i)))));
  for (int64_t i = 0; i < pairs::w_size; ++i) in.w.push_back(float(std::cos(0.11 * double(i))));
  for (int64_t i = 0; i < pairs::h_size; ++i) in.h.push_back(gradc::to_float16(float(std::sin(0.7 * double(i)) * 2)));
  for (int64_t i = 0; i < pairs::b_size; ++i) in.b.push_back(gradc::to_float16(float(i) / 4 - 1));
  const auto aligned = run(comm, stream, in, 0), odd = run(comm, stream, in, 1);
  const char* names[] = {"y", "z", "loss", "dx", "dh"};
  int equal = 0;
  for (size_t k = 0; k < aligned.size(); ++k) {
    const bool same = aligned[k] == odd[k];
    equal += same;
    if (!same) std::printf("%s differs between the aligned and the odd pointers\n", names[k]);
  }
  std::printf("pairs_offsets: %d of %zu outputs equal at element 0 and at element 1\n", equal, aligned.size());
  ncclCommDestroy(comm);
  return equal == int(aligned.size()) ? 0 : 1;
}
