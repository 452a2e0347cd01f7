// .dg source through the whole front of the compiler: parse, lower (defs
// inlined, composites expanded, shapes checked), autodiff, verifier; then the
// optimisation and kernel lowering the code generators start from (fusion, values
// computed again where read, the buffer plan, the schedule).
#include "frontend/ast.h"
#include "frontend/lower.h"
#include "fuzz.h"
#include "ir/graph.h"
#include "ir/print.h"
#include "passes/pass.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  return gradc::fuzz::guarded([&] {
    gradc::Graph g = gradc::run_pipeline(gradc::lower_program(gradc::parse_program(text), 0), gradc::Pipeline::Grad);
    gradc::verify(g);
    gradc::lowered(std::move(g));
  });
}
