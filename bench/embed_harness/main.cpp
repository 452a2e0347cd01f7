// Times the embedded class's step: its ranks as threads of this process in gradc's
// in-process group; a step is timed from a barrier to a barrier, as the
// executables time theirs. Prints "median step: X ms" after ITERS steps. With a second
// argument `nocheck`, the timed steps skip the shared-input check (check_shared_inputs(0)),
// which the class otherwise makes every step.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "prog.h"

// The class of a program with shared inputs has check_shared_inputs; another has none.
template <class P>
void no_shared_check(P& p) {
  if constexpr (requires { p.check_shared_inputs(0); }) p.check_shared_inputs(0);
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 50;
  const bool check = !(argc > 2 && std::strcmp(argv[2], "nocheck") == 0);
  const int world = prog::world;
  gradc::ThreadGroup group(world);
  std::barrier sync(world);
  std::vector<double> ms;
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r)
    ranks.emplace_back([&, r] {
      prog step(group, r);
      step.run();  // the inputs' defaults, once, as gradc run evaluates them before timing
      step.keep_defaults();
      if (!check) no_shared_check(step);
      for (int i = 0; i < iters; ++i) {
        sync.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        step.run();
        sync.arrive_and_wait();
        if (r == 0)
          ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    });
  for (std::thread& t : ranks) t.join();
  std::sort(ms.begin(), ms.end());
  std::printf("median step: %.3f ms\n", ms.empty() ? 0.0 : ms[ms.size() / 2]);
  return 0;
}
