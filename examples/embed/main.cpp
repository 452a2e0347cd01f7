// Embeds layer.dg on the CPU: two ranks as threads of this process in gradc's
// in-process group, the data in the application's own arrays.
#include <thread>
#include <vector>

#include "check.h"
#include "layer.h"

int main() {
  const int world = layer::world;
  gradc::ThreadGroup group(world);
  std::vector<int> ok(world, 0);
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      float x[layer::x_size], w[layer::w_size], y[layer::y_size], s[layer::s_size], dw[layer::dw_size];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) x[3 * i + j] = embed::x_of(r, i, j);
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 2; ++j) w[2 * i + j] = embed::w_of(i, j);
      layer step(group, r);  // allocates its workspace once
      step.set_x(x);
      step.set_w(w);
      step.set_y_out(y);
      step.set_s_out(s);
      step.set_dw_out(dw);
      step.run();  // allocates nothing
      ok[r] = embed::check(r, world, y, s, dw);
    });
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < world; ++r)
    if (!ok[r]) return 1;
  return 0;
}
