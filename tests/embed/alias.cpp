// An application that gives layer.dg's class an output in the memory of an input
// (argv[1] = "output-input") or of another output ("output-output"): run() must stop
// with a message, as a step would otherwise read what it has overwritten.
#include <cstring>
#include <thread>
#include <vector>

#include "layer.h"

int main(int argc, char** argv) {
  const bool outputs = argc > 1 && std::strcmp(argv[1], "output-output") == 0;
  gradc::ThreadGroup group(layer::world);
  std::vector<std::thread> ranks;
  for (int r = 0; r < layer::world; ++r)
    ranks.emplace_back([&, r] {
      float x[layer::x_size] = {}, w[layer::w_size] = {}, y[layer::y_size], dw[layer::dw_size];
      layer step(group, r);
      step.set_x(x);
      step.set_w(w);
      step.set_y_out(outputs ? y : x);  // x holds 6 floats, y 4
      step.set_dw_out(outputs ? y + 2 : dw);
      step.run();
    });
  for (std::thread& t : ranks) t.join();
  return 0;
}
