// Textual IR through the reader and every pass of `gradc opt`.
#include "frontend/ir_reader.h"
#include "fuzz.h"
#include "ir/print.h"
#include "passes/pass.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  return gradc::fuzz::guarded([&] {
    gradc::Graph g = gradc::parse_text(text);
    std::vector<const gradc::PassInfo*> passes;
    for (const char* p : {"infer-shapes", "autodiff", "replication", "fold", "cse", "dce", "low-precision"})
      passes.push_back(gradc::find_pass(p));
    std::string log;
    g = gradc::run_passes(std::move(g), passes, {}, log);
    gradc::print_text(g);
  });
}
