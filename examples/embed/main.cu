// Embeds layer.dg on CUDA: one GPU per rank, a host thread each, NCCL
// communicators from ncclCommInitAll, the data in device memory the
// application owns.
#include <thread>
#include <vector>

#include "check.h"
#include "layer.h"

int main() {
  const int world = layer::world;
  std::vector<ncclComm_t> comms(world);
  std::vector<int> devs(world);
  for (int r = 0; r < world; ++r) devs[r] = r;
  GRADC_NCCL(ncclCommInitAll(comms.data(), world, devs.data()), "embed: communicators");
  std::vector<int> ok(world, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      GRADC_CUDA(cudaSetDevice(r), "embed");
      cudaStream_t stream;
      GRADC_CUDA(cudaStreamCreate(&stream), "embed");
      float x[layer::x_size], w[layer::w_size], y[layer::y_size], s[layer::s_size], dw[layer::dw_size];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) x[3 * i + j] = embed::x_of(r, i, j);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) w[2 * i + j] = embed::w_of(i, j);
      float *dx, *dwt, *dy, *ds, *ddw;
      GRADC_CUDA(cudaMalloc(&dx, sizeof x), "embed");
      GRADC_CUDA(cudaMalloc(&dwt, sizeof w), "embed");
      GRADC_CUDA(cudaMalloc(&dy, sizeof y), "embed");
      GRADC_CUDA(cudaMalloc(&ds, sizeof s), "embed");
      GRADC_CUDA(cudaMalloc(&ddw, sizeof dw), "embed");
      GRADC_CUDA(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), "embed");
      GRADC_CUDA(cudaMemcpy(dwt, w, sizeof w, cudaMemcpyHostToDevice), "embed");
      layer step(comms[r], stream);
      step.set_x(dx);
      step.set_w(dwt);
      step.set_y_out(dy);
      step.set_s_out(ds);
      step.set_dw_out(ddw);
      step.run();
      GRADC_CUDA(cudaStreamSynchronize(stream), "embed");
      GRADC_CUDA(cudaMemcpy(y, dy, sizeof y, cudaMemcpyDeviceToHost), "embed");
      GRADC_CUDA(cudaMemcpy(s, ds, sizeof s, cudaMemcpyDeviceToHost), "embed");
      GRADC_CUDA(cudaMemcpy(dw, ddw, sizeof dw, cudaMemcpyDeviceToHost), "embed");
      ok[r] = embed::check(r, world, y, s, dw);
    });
  for (std::thread& t : ranks) t.join();
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  for (int r = 0; r < world; ++r)
    if (!ok[r]) return 1;
  return 0;
}
