// tests/codegen/any_size.dg's class for any B (gradc emit --size B=any), one object per
// rank run at the batch sizes given in turn (argv: 5 13 1 13 ...): the workspace grows,
// shrinks back and grows again, and the inputs' defaults kept after the first run are
// computed again at each new size. Prints rank 0's outputs at each size as one JSON line
// ({"B": 5, "loss": [...], ...}), which any_size.test compares with the interpreter's.
// `differ B`: rank r runs at B + r, which its run() refuses (every rank must run at the
// same sizes): each rank prints the error and the program exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "any_size.h"

static std::string list(const float* p, int64_t n) {
  std::string s = "[";
  char buf[32];
  for (int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? ", " : "", double(p[i]));
    s += buf;
  }
  return s + "]";
}

int main(int argc, char** argv) {
  gradc::ThreadGroup group(any_size::world);
  if (argc == 3 && std::strcmp(argv[1], "differ") == 0) {
    std::vector<std::string> errors(any_size::world);
    std::vector<std::thread> ranks;
    for (int r = 0; r < any_size::world; ++r)
      ranks.emplace_back([&, r] {
        any_size step(group, r);
        try {
          step.run(any_size::Sizes{std::atoll(argv[2]) + r});
        } catch (const std::runtime_error& e) {
          errors[size_t(r)] = e.what();
        }
      });
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < any_size::world; ++r) std::printf("rank %d: %s\n", r, errors[size_t(r)].c_str());
    return 1;
  }
  std::vector<std::string> lines(size_t(argc), "");
  std::vector<std::thread> ranks;
  for (int r = 0; r < any_size::world; ++r)
    ranks.emplace_back([&, r] {
      any_size step(group, r);
      for (int a = 1; a < argc; ++a) {
        step.run(any_size::Sizes{std::atoll(argv[a])});
        if (a == 1) step.keep_defaults();
        if (r != 0) continue;
        lines[size_t(a)] =
            "{\"B\": " + std::to_string(step.sizes().B) + ", \"loss\": " + list(step.loss(), step.loss_size()) +
            ", \"dw\": " + list(step.dw(), step.dw_size()) + ", \"dx\": " + list(step.dx(), step.dx_size()) +
            ", \"dg\": " + list(step.dg(), step.dg_size()) +
            ", \"logits\": " + list(step.logits(), step.logits_size()) + "}";
      }
    });
  for (std::thread& t : ranks) t.join();
  for (int a = 1; a < argc; ++a) std::printf("%s\n", lines[size_t(a)].c_str());
  return 0;
}
