#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ir/print.h"
#include "passes/autodiff.h"
#include "passes/lower_kernels.h"
#include "passes/pass.h"

namespace gradc {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = {
      {"infer-shapes", [](Graph g, const PipelineOptions&) { return infer_shapes(std::move(g)); },
       "re-derive every type from the op's shape rule"},
      {"autodiff", [](Graph g, const PipelineOptions& o) { return autodiff(std::move(g), o.grads); },
       "replace every grad by its derived backward graph"},
      {"replication", [](Graph g, const PipelineOptions&) { return replication(std::move(g)); },
       "mark every value replicated or varying"},
      {"fold", [](Graph g, const PipelineOptions& o) { return fold(std::move(g), o.max_folded); },
       "evaluate local ops whose operands are constants; fold transposes of transposes and casts that change nothing"},
      {"cse", [](Graph g, const PipelineOptions&) { return cse(std::move(g)); },
       "merge identical local ops (never collectives)"},
      {"dce", [](Graph g, const PipelineOptions&) { return dce(std::move(g)); },
       "remove values nothing uses (never collectives or inputs)"},
      {"low-precision", [](Graph g, const PipelineOptions&) { return widen_low_precision(std::move(g)); },
       "every bf16 or f16 op as its f32 op and one rounding cast (the kernels compute f32)"},
  };
  return passes;
}

const std::vector<const PassInfo*>& pipeline(Pipeline p) {
  static const std::vector<const PassInfo*> grad = {find_pass("autodiff")};
  static const std::vector<const PassInfo*> optimise = {find_pass("fold"), find_pass("cse"), find_pass("dce")};
  // lower: optimise's passes, low-precision, then lower-kernels (lowered())
  static const std::vector<const PassInfo*> lower = {find_pass("fold"), find_pass("cse"), find_pass("dce"),
                                                     find_pass("low-precision")};
  return p == Pipeline::Grad ? grad : p == Pipeline::Optimise ? optimise : lower;
}

Graph run_pipeline(Graph g, Pipeline p, const PipelineOptions& opt, std::string* log) {
  std::string unused;
  return run_passes(std::move(g), pipeline(p), opt, log ? *log : unused);
}

Lowered lowered(Graph g, const PipelineOptions& opt, std::string* log) {
  std::string unused;
  std::string& out = log ? *log : unused;
  g = run_passes(std::move(g), pipeline(Pipeline::Lower), opt, out);
  auto t0 = std::chrono::steady_clock::now();
  Lowered l = lower_kernels(std::move(g), opt.check_finite, opt.any_size);
  l.tables16 = opt.tables16;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (opt.time_passes) out += fmt::format("// pass lower-kernels: {:.3f} ms\n", ms);
  if (opt.print_after_all) {
    char* text = nullptr;
    size_t size = 0;
    if (std::FILE* f = open_memstream(&text, &size)) {
      print_lowered(l, f);
      std::fclose(f);
      out += "// -----// IR after lower-kernels //----- //\n" + std::string(text, size);
    }
    std::free(text);
  }
  return l;
}

const PassInfo* find_pass(const std::string& name) {
  for (const PassInfo& p : all_passes())
    if (name == p.name) return &p;
  return nullptr;
}

Graph run_passes(Graph g, const std::vector<const PassInfo*>& passes, const PipelineOptions& opt, std::string& log) {
  for (const PassInfo* p : passes) {
    std::string before = opt.print_after_all ? print_text(g) : "";
    auto t0 = std::chrono::steady_clock::now();
    g = p->run(std::move(g), opt);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (opt.time_passes) log += fmt::format("// pass {}: {:.3f} ms\n", p->name, ms);
    if (opt.print_after_all) {
      std::string after = print_text(g);
      log += fmt::format("// -----// IR after {}{} //----- //\n", p->name, after == before ? " (unchanged)" : "");
      if (after != before) log += after;
    }
  }
  return g;
}

Graph rebuild(Graph&& g, const std::vector<bool>& keep, const std::vector<ValueId>& repl, std::vector<ValueId>* moved) {
  // In place: kept nodes move down over removed ones (no second node array).
  std::vector<ValueId> id(g.nodes.size(), -1);
  auto map = [&](ValueId v) {
    ValueId m = id[size_t(repl[size_t(v)])];
    GRADC_ASSERT(m >= 0, "value {} is used but was removed", v);
    return m;
  };
  // The nodes before the first removed or replaced one keep their places, and their
  // operands (defined before them) too: they are not touched.
  size_t kept = 0;
  while (kept < g.nodes.size() && keep[kept] && repl[kept] == ValueId(kept)) {
    id[kept] = ValueId(kept);
    ++kept;
  }
  for (size_t i = kept; i < g.nodes.size(); ++i) {
    __builtin_prefetch(&g.nodes[std::min(i + 8, g.nodes.size() - 1)]);  // the array streams from memory
    if (!keep[i]) continue;
    Node& n = g.nodes[i];
    for (ValueId& a : n.args) a = map(a);
    if (n.grad_of >= 0) n.grad_of = id[size_t(repl[size_t(n.grad_of)])];
    if (kept != i) g.nodes[kept] = std::move(n);
    id[i] = ValueId(kept++);
  }
  g.nodes.resize(kept);
  for (auto& o : g.outputs) o.second = map(o.second);
  if (moved)
    for (size_t v = 0; v < id.size(); ++v) (*moved)[v] = id[size_t(repl[v])];
  return std::move(g);
}

}  // namespace gradc
