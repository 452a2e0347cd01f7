#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "ops/register.h"

int main(int argc, char** argv) {
  gradc::register_all();  // every op's rules into every layer's tables, as gradc's main does
  doctest::Context context(argc, argv);
  return context.run();
}
