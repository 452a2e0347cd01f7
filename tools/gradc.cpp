// The gradc command line (docs/cli.md): check, ir, opt, run.
// Exit status: 0 success; 1 the program, its data or a check failed; 2 the
// command line was wrong.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "check/gradcheck.h"
#include "check/memory.h"
#include "check/prove.h"
#include "codegen/any_size.h"
#include "codegen/cpp.h"
#include "frontend/ast.h"
#include "frontend/ir_reader.h"
#include "frontend/lower.h"
#include "ir/mesh.h"
#include "ir/print.h"
#include "ir/rules.h"
#include "ops/register.h"
#include "passes/autodiff.h"
#include "passes/cost.h"
#include "passes/lower_kernels.h"
#include "passes/pass.h"
#include "runtime/blas_kernels.h"
#include "runtime/interp.h"
#include "runtime/npy.h"
#include "runtime/npy_format.h"
#include "runtime/report.h"
#include "support/file.h"
#include "support/polynomial.h"
#include "tools/native.h"
#include "tools/toolchain.h"

#include <CLI/CLI.hpp>
#ifdef GRADC_MIMALLOC
#include <mimalloc.h>
#endif

namespace fs = std::filesystem;
using namespace gradc;

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every option of every command, typed: parse_command binds each option a command
// takes (commands()) to its field here with CLI11, converting and checking the value
// in gradc's words as it is parsed.
struct Options {
  std::vector<std::string> files;                      // the positional arguments: FILE.dg (opt: FILE.ir)
  int ranks = 0;                                       // --ranks: 0 is the program's world, else 1
  std::vector<std::pair<std::string, int>> mesh;       // --mesh=dp=2,tp=2: the sizes of a program's mesh axes
  std::vector<std::pair<std::string, int64_t>> sizes;  // --size=B=32: values of the program's size parameters
  std::vector<std::string> any_sizes;                  // --size=B=any (emit): sizes chosen at run time
  std::string format = "text";                         // --format: each command checks the ones it can print
  bool verbose = false;                                // check -v
  bool no_grad = false;                                // emit --no-grad (torch: no backward)
  bool main = false;                                   // emit --main (cpu, cuda: the executable's main too)
  std::optional<std::string> data_parallel;            // emit, verify --data-parallel: the torch op's convention
  std::optional<std::string> grad;                     // emit, verify --grad: the inputs the torch op differentiates
  std::string stage = "parsed";                        // ir --stage
  bool loc = false;                                    // ir, opt --loc
  PipelineOptions pipeline;                            // --print-after-all, --time-passes, run --check-finite
  std::vector<const PassInfo*> passes;                 // opt --pass
  std::string inputs;                                  // run, verify --inputs (empty: the defaults)
  std::optional<std::string> outputs;                  // run --outputs
  std::string backend;                                 // run --backend (empty: native where its compiler is found)
  int iters = 0;                                       // run --iters
  bool quiet = false;                                  // run --quiet
  GradCheckOptions check;                              // verify --rtol, --atol, --samples
  std::string op;                                      // prove --op (empty: all)
  int max_ranks = 8;                                   // prove --max-ranks
  std::optional<Target> target;                        // emit, build --target
  std::optional<std::string> out;                      // emit, build -o
  std::optional<std::string> name;                     // emit --name

  const std::string& one_file(const char* what) const {
    if (files.size() != 1) throw UsageError(fmt::format("expected one {}", what));
    return files[0];
  }
};

int int_value(const char* key, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || n < lo || n > hi)
    throw UsageError(fmt::format("--{} must be an integer from {} to {}, got '{}'", key, lo, hi, v));
  return int(n);
}

double tolerance_value(const char* key, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end || !(x >= 0)) throw UsageError(fmt::format("--{} must be a number >= 0, got '{}'", key, v));
  return x;
}

// An option's comma-separated items ("a,b" is {a, b}; "" is {""}).
std::vector<std::string> comma_items(const std::string& v) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= v.size();) {
    const size_t end = std::min(v.find(',', at), v.size());
    out.push_back(v.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

std::vector<const PassInfo*> pass_list(const std::string& list) {
  std::vector<const PassInfo*> passes;
  if (list.empty()) return passes;
  for (const std::string& name : comma_items(list)) {
    const PassInfo* p = find_pass(name);
    if (!p) {
      std::string known;
      for (const PassInfo& q : all_passes()) known += std::string(known.empty() ? "" : ", ") + q.name;
      throw UsageError(fmt::format("unknown pass '{}' (known: {})", name, known));
    }
    passes.push_back(p);
  }
  return passes;
}

// A command's big structures are left for the process's exit to return instead of
// being freed object by object (clang's -disable-free, llvm/Support/BuryPointer.h;
// what it saves is in bench/README.md). They stay reachable, so LeakSanitizer is quiet.
void* g_graveyard[8];  // a plain array: nothing frees it at exit
int g_buried = 0;
template <class T>
void bury(T&& value) {
  auto* p = new std::decay_t<T>(std::forward<T>(value));
  if (g_buried < 8)
    g_graveyard[g_buried++] = p;
  else
    delete p;
}

// The .npy files --inputs holds for input `name`: DIR/name.npy and DIR/rank<r>/name.npy.
std::vector<std::string> input_files(const std::string& dir, const std::string& name) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return paths;
  if (fs::exists(fmt::format("{}/{}.npy", dir, name), ec)) paths.push_back(fmt::format("{}/{}.npy", dir, name));
  for (int r = 0; r < kMaxWorld; ++r) {
    const std::string sub = fmt::format("{}/rank{}", dir, r);
    if (!fs::is_directory(sub, ec)) continue;
    if (fs::exists(fmt::format("{}/{}.npy", sub, name), ec)) paths.push_back(fmt::format("{}/{}.npy", sub, name));
  }
  return paths;
}

// The values of the program's size parameters: --size's, then for each size it does
// not give, the files of the inputs whose declared shape has the size's name as a
// dimension (input x : f32[B, 16] and x.npy of shape [32, 16] give B = 32), which
// must agree on every rank. A size neither gives takes its default (frontend/lower.cpp).
std::vector<std::pair<std::string, int64_t>> size_values(const ast::Program& p, const Options& o) {
  std::vector<std::pair<std::string, int64_t>> values = o.sizes;
  const std::vector<std::string> declared = declared_sizes(p);
  std::map<std::string, std::pair<int64_t, std::string>> found;  // size: its value, and the file that gave it
  for (const ast::Stmt& s : p.stmts) {
    if (s.kind != ast::Stmt::Input) continue;
    for (size_t k = 0; k < s.type.dims.size(); ++k) {
      const ast::Expr& d = *s.type.dims[k];
      if (d.kind != ast::Expr::Name || std::find(declared.begin(), declared.end(), d.text) == declared.end()) continue;
      if (std::any_of(o.sizes.begin(), o.sizes.end(), [&](const auto& v) { return v.first == d.text; })) continue;
      for (const std::string& path : input_files(o.inputs, s.names[0].text)) {
        const Tensor t = read_npy(path);
        if (t.type.shape.size() != s.type.dims.size()) continue;  // load_inputs says what is wrong with it
        const int64_t n = t.type.shape[k];
        auto [at, fresh] = found.try_emplace(d.text, n, path);
        if (!fresh && at->second.first != n)
          throw UserError({}, fmt::format("size {} is {} in {} but {} in {}: a size is the same in every input "
                                          "file of every rank",
                                          d.text, at->second.first, at->second.second, n, path));
      }
    }
  }
  for (const auto& [name, v] : found) {
    if (v.first < 1 || v.first > kMaxSize)
      throw UserError(
          {}, fmt::format("{}: gives size {} = {}, but a size is from 1 to {}", v.second, name, v.first, kMaxSize));
    values.push_back({name, v.first});
  }
  return values;
}

// Reads FILE.dg into `src` (which main's diagnostics quote) and lowers it for the
// ranks and sizes asked for; `parsed`, where given, gets its syntax tree.
Graph load_program(const Options& o, SourceFile& src, bool f64 = false, ast::Program* parsed = nullptr) {
  if (!o.any_sizes.empty())
    throw UsageError(
        fmt::format("--size {}=any is for gradc emit and gradc build (here, give each size a value)", o.any_sizes[0]));
  src.path = o.one_file("FILE.dg");
  src.text = read_file(src.path);
  ast::Program p = parse_program(src.text);
  Graph g = lower_program(p, LowerOptions{o.ranks, f64, o.mesh, size_values(p, o)});
  if (parsed) *parsed = std::move(p);
  return g;
}

void check_text_or_json(const std::string& format) {
  if (format != "text" && format != "json")
    throw UsageError(fmt::format("--format must be text or json, got '{}'", format));
}

std::string format_graph(const Graph& g, const std::string& format, const std::string& loc_file = "") {
  if (format == "text") return print_text(g, loc_file);
  if (format == "dot") return print_dot(g);
  if (format == "json") return print_json(g);
  throw UsageError(fmt::format("--format must be text, dot or json, got '{}'", format));
}

// ---- commands ---------------------------------------------------------------

const char* kCheckHelp =
    "usage: gradc check FILE.dg [--ranks=N | --mesh=A=n,...] [--size=B=n,...] [-v]\n"
    "Parse and type-check FILE.dg for N ranks (default: its `world`, else 1).\n"
    "Prints diagnostics only; exit 1 if there are any. -v also prints one line per\n"
    "input, collective (those of the derived backward too) and output: types, where\n"
    "each is, and whether the value is replicated or varying.\n";

// An input's sharing as the program writes it: shared, shared(dp), shared([dp, pp]) or per rank.
std::string shared_str(const Graph& g, const Node& n) {
  if (!n.attrs.has("shared")) return "per rank";
  if (shared_everywhere(n)) return "shared";
  std::vector<std::string> axes;
  for (int k : shared_axes(g, n)) axes.push_back(axis_name(g, k));
  return axes.size() == 1 ? fmt::format("shared({})", axes[0]) : fmt::format("shared([{}])", fmt::join(axes, ", "));
}

int cmd_check(const Options& o, SourceFile& src) {
  std::vector<GradInfo> grads;
  PipelineOptions po;
  po.grads = &grads;
  Graph g = run_pipeline(load_program(o, src), Pipeline::Grad, po);
  verify(g);
  if (!o.verbose) return 0;
  // One line per input, collective (forward, then the derived backward) and output.
  auto at = [&](const Node& n) { return loc_str(src.path, n.loc); };
  auto rep = [&](const Node& n) { return n.rep == Rep::Unknown ? std::string() : rep_str(g, n.rep); };
  std::string s = fmt::format("{}: {} rank{}{}\n", src.path, g.world, g.world == 1 ? "" : "s",
                              g.mesh.axes.empty() ? "" : fmt::format(" (mesh {})", mesh_option(g.mesh)));
  for (const auto& [name, value] : g.sizes) s += fmt::format("size       {} = {}\n", name, value);
  for (const Node& n : g.nodes)
    if (n.op == Op::Input)
      s += fmt::format("input      {}: {} {}{}, at {}\n", n.attr_sym("name"), type_str(n.type), shared_str(g, n),
                       n.args.empty() ? ", no default" : ", with a default", at(n));
  std::vector<std::string> names = value_names(g);
  for (int backward = 0; backward < 2; ++backward)
    for (const Node& n : g.nodes) {
      if (!is_collective(n.op) || n.backward != bool(backward)) continue;
      std::vector<std::string> attrs;
      for (const auto& [k, v] : n.attrs->items) attrs.push_back(k + "=" + attr_str(v));
      s += fmt::format("collective {} = {}({}): {} -> {} {}, at {}{}\n",
                       n.backward       ? fmt::format("(gradient of {})", op_name(n.fwd_op))
                       : n.name.empty() ? "%" + names[size_t(&n - &g.nodes[0])]
                                        : n.name.str(),
                       op_name(n.op), fmt::join(attrs, ", "), type_str(g.type(n.args[0])), type_str(n.type), rep(n),
                       at(n), n.backward ? " (backward)" : "");
    }
  for (const GradInfo& gi : grads)  // a non-scalar loss means the sum of its elements (docs/language.md section 6)
    if (g.type(gi.loss).rank() > 0)
      s += fmt::format("grad       {}: of a {} loss, which is summed first, at {}\n",
                       gi.name.empty() ? "(unnamed)" : gi.name, type_str(g.type(gi.loss)), loc_str(src.path, gi.loc));
  for (const auto& [name, v] : g.outputs)
    s += fmt::format("output     {}: {} {}\n", name, type_str(g.type(v)), rep(g[v]));
  std::cout << s;
  return 0;
}

const char* kIrHelp =
    "usage: gradc ir FILE.dg [--stage=parsed|grad|opt] [--format=text|dot|json] [--ranks=N | --mesh=A=n,...] [--loc]\n"
    "                [--size=B=n,...] [--print-after-all] [--time-passes]\n"
    "Print the graph after a stage:\n"
    "  parsed  the forward graph as written, defs inlined, composites expanded\n"
    "  grad    every grad replaced by its derived backward graph; each value marked\n"
    "          replicated or varying, backward ops marked bwd, gradients grad_of=%w\n"
    "  opt     after the optimisation pipeline (fold, cse, dce)\n"
    "text is the IR's own textual form (gradc opt reads it back); dot is Graphviz\n"
    "(collectives filled orange, inputs green, backward ops dashed); json lists nodes\n"
    "and outputs. --loc ends each text line with the value's source location,\n"
    "loc(\"FILE.dg\":LINE:COL), which gradc opt reads back.\n";

int cmd_ir(const Options& o, SourceFile& src) {
  const std::string& stage = o.stage;
  const std::string& format = o.format;
  format_graph(Graph{}, format);  // reject a bad --format before any work
  const PipelineOptions& opt = o.pipeline;
  std::string log;
  // --time-passes times the stages around the passes too: parsing, lowering to kernels, printing.
  auto t0 = std::chrono::steady_clock::now();
  auto lap = [&](const char* what) {
    auto t = std::chrono::steady_clock::now();
    if (opt.time_passes)
      log += fmt::format("// {}: {:.3f} ms\n", what, std::chrono::duration<double, std::milli>(t - t0).count());
    t0 = t;
  };
  Graph g = load_program(o, src);
  lap("parse and check");
  if (stage != "parsed") g = run_pipeline(std::move(g), Pipeline::Grad, opt, &log);
  if (stage == "opt") g = run_pipeline(std::move(g), Pipeline::Optimise, opt, &log);
  t0 = std::chrono::steady_clock::now();
  std::string out;
  if (stage == "lowered") {
    Lowered l = lowered(std::move(g), opt, &log);  // the lower pipeline: optimise, then lower-kernels
    t0 = std::chrono::steady_clock::now();
    if (format == "text") {
      std::cout.flush();
      print_lowered(l, stdout);  // 28 MB for a 100k-statement program: written as it is made
    } else {
      out = format == "json" ? print_lowered_json(l) : print_lowered_dot(l);
    }
    bury(std::move(l));
  } else {
    out = format_graph(g, format, o.loc ? src.path : "");
    bury(std::move(g));
  }
  lap("print");
  std::cerr << log;
  std::cout << out;
  return 0;
}

const char* kOptHelp =
    "usage: gradc opt FILE.ir --pass=P[,P...] [--format=text|dot|json] [--loc] [--print-after-all] [--time-passes]\n"
    "Read textual IR, run the named passes in order, print the result (--loc: with the\n"
    "source locations the IR holds, named by FILE.ir).\n";

int cmd_opt(const Options& o, SourceFile& src) {
  format_graph(Graph{}, o.format);
  src.path = o.one_file("FILE.ir");
  src.text = read_file(src.path);
  Graph g = parse_text(src.text);
  std::string log;
  g = run_passes(std::move(g), o.passes, o.pipeline, log);
  std::cerr << log;
  std::cout << format_graph(g, o.format, o.loc ? src.path : "");
  bury(std::move(g));
  return 0;
}

const char* kRunHelp =
    "usage: gradc run FILE.dg [--ranks=N | --mesh=A=n,...] [--inputs=DIR] [--outputs=DIR] [--format=text|json]\n"
    "                 [--size=B=n,...] [--backend=native|interp] [--iters=K] [--quiet] [--check-finite]\n"
    "Run FILE.dg on this machine's CPU with N ranks in one process and print every\n"
    "output of every rank. Input x of rank r comes from DIR/rank<r>/x.npy, else\n"
    "DIR/x.npy, else its default. --outputs writes DIR/rank<r>/<name>.npy.\n"
    "--backend=native (the default where a C++ compiler is found) compiles the\n"
    "program's generated CPU code (cached in $XDG_CACHE_HOME/gradc) and runs the\n"
    "ranks as threads; interp is the reference interpreter. --iters=K runs K more\n"
    "times and prints the median wall time of one run on stderr (input defaults\n"
    "evaluated once, before).\n"
    "--quiet prints no outputs (errors, and --iters' median, still go to stderr).\n"
    "--check-finite stops at the first op whose result holds a NaN or an infinity\n"
    "(inputs and gradients included), naming the op, its location and the rank.\n";

// What NumPy calls a dtype, for the conversions input-file errors suggest.
const char* numpy_dtype(DType t) {
  switch (t) {
    case DType::F32: return "np.float32";
    case DType::F64: return "np.float64";
    case DType::F16: return "np.float16";
    case DType::BF16: return "ml_dtypes.bfloat16";
    case DType::I32: break;
  }
  return "np.int32";
}

// For an input file of another shape: the sizes the program was given, where it has any.
std::string sizes_note(const Graph& g) {
  std::vector<std::string> sizes;
  for (const auto& [size, value] : g.sizes) sizes.push_back(fmt::format("{} = {}", size, value));
  return sizes.empty() ? "" : fmt::format(" (with {})", fmt::join(sizes, ", "));
}

// Reads each input's .npy files; with `widen`, f32 data are read into f64 inputs
// (for checks that run an f32 program in f64).
RankInputs load_inputs(const Graph& g, const std::string& dir, bool widen = false) {
  RankInputs in(size_t(g.world));
  if (dir.empty()) return in;
  std::vector<std::string> names;
  for (const Node& n : g.nodes)
    if (n.op == Op::Input) names.push_back(n.attr_sym("name"));
  try {
    npy::check_input_dir(dir, names, g.world);
  } catch (const std::runtime_error& e) {
    throw UserError({}, e.what());
  }
  for (const Node& n : g.nodes) {
    if (n.op != Op::Input) continue;
    const std::string& name = n.attr_sym("name");
    for (int r = 0; r < g.world; ++r) {
      for (std::string path : {fmt::format("{}/rank{}/{}.npy", dir, r, name), fmt::format("{}/{}.npy", dir, name)}) {
        std::error_code ec;
        bool found = fs::exists(path, ec);
        if (ec) throw UserError({}, fmt::format("cannot read '{}': {}", path, ec.message()));
        if (!found) continue;
        Tensor t = read_npy(path);
        if (widen && is_float(t.dtype()) && n.type->dtype == DType::F64) t = t.cast(DType::F64);
        if (t.dtype() != n.type->dtype)  // float data must match exactly: say how to convert
          throw UserError({}, fmt::format("{}: holds {} data, but input '{}' is declared {}: convert it with "
                                          "a.astype({})",
                                          path, t.dtype() == DType::I32 ? "integer" : dtype_name(t.dtype()), name,
                                          type_str(n.type), numpy_dtype(n.type->dtype)));
        if (t.type != n.type)
          throw UserError({}, fmt::format("{}: holds {}, but input '{}' is declared {}{}", path, type_str(t.type), name,
                                          type_str(n.type), sizes_note(g)));
        in[size_t(r)][name] = t;
        break;
      }
    }
  }
  return in;
}

void write_outputs(const RankOutputs& outs, const std::string& dir) {
  // Everything is computed before anything is written, and every rank's files
  // land together or not at all (write_files_atomic); folders this run made are
  // removed again when writing fails.
  std::vector<std::string> made;
  std::vector<std::pair<std::string, std::string>> files;
  try {
    for (size_t r = 0; r < outs.size(); ++r) {
      std::string sub = fmt::format("{}/rank{}", dir, r);
      for (const std::string& d : {dir, sub}) {
        std::error_code ec;
        if (fs::is_directory(d, ec)) continue;
        if (!fs::create_directory(d, ec) || ec)
          throw UserError({}, fmt::format("--outputs: cannot create '{}': {}", d,
                                          ec ? ec.message() : "a file of that name is in the way"));
        made.push_back(d);
      }
      for (const auto& [name, t] : outs[r]) files.push_back({fmt::format("{}/{}.npy", sub, name), npy_bytes(t)});
    }
    write_files_atomic(files);
  } catch (const UserError&) {
    for (auto it = made.rbegin(); it != made.rend(); ++it) {
      std::error_code ec;
      fs::remove(*it, ec);  // empty folders only: nothing was written into them
    }
    throw;
  }
}

double median_ms(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
}

bool has_low_precision(const Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return is_low_precision(n.type->dtype); });
}

int cmd_run(const Options& o, SourceFile& src) {
  check_text_or_json(o.format);
  std::string backend = o.backend;
  std::string why_not;
  if (backend != "interp") {  // native by default, where its compiler is found
    const bool native = native_available(&why_not);
    if (backend == "native" && !native) throw UserError({}, fmt::format("--backend=native: {}", why_not));
    backend = native ? "native" : "interp";
  }
  const int iters = o.iters;
  Graph g = run_pipeline(load_program(o, src), Pipeline::Grad);
  Lowered l;
  if (backend == "native") {
    l = lowered(g, o.pipeline);
    check_memory_bytes(g, double(plan_bytes(l)), "the program (its buffer plan, as gradc cost reports it)");
  } else {
    check_memory(g, 1, "the program");
  }
  RankInputs inputs = load_inputs(g, o.inputs);
  RankOutputs outs;
  std::vector<double> ms;
  if (backend == "native") {
    NativeRun run = run_native(l, src.path, complete_inputs(g, inputs, false), iters);
    outs = std::move(run.outputs);
    ms = std::move(run.step_ms);
  } else {
    outs = interpret(g, inputs, o.pipeline.check_finite);
    if (iters > 0) {
      const RankInputs all = complete_inputs(g, inputs, true);  // defaults evaluated once, outside the timing
      for (int i = 0; i < iters; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        interpret(g, all);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
    }
  }
  if (iters > 0) std::cerr << fmt::format("median step: {:.3f} ms\n", median_ms(ms));
  if (o.outputs) write_outputs(outs, *o.outputs);
  if (!o.quiet) std::cout << (o.format == "json" ? outputs_json(outs, g) : outputs_text(outs));
  return 0;
}

// The torch op's gradient convention (docs/torch.md): the mask of the axes along which
// each rank's loss and inputs are its own (--data-parallel); along the others every
// rank's copy of a replicated output is one loss. A program without a mesh keeps DDP's
// convention by default; a mesh program must say.
uint8_t data_parallel_axes(const Options& o, const Graph& g) {
  if (!o.data_parallel) {
    if (g.mesh.axes.empty()) return full_mask(g);
    const std::string all = fmt::format("{}", fmt::join(g.mesh.axes, ","));
    throw UserError(
        {}, fmt::format(
                "the program has a mesh ({}): say which axes the training framework reduces gradients over, "
                "with --data-parallel=AXES (docs/torch.md, \"The gradient convention\").\n"
                "  Along those axes (DDP, FSDP) each rank's loss is its own, and each gradient is this rank's part, "
                "which the framework then averages.\n"
                "  Along the others (Megatron's tensor, sequence and expert parallelism) every rank's copy of a "
                "replicated output is the one loss, and an input shared along them gets the total gradient, the same "
                "on each.\n"
                "  So --data-parallel={} for tensor parallelism inside data parallelism, --data-parallel={} when "
                "every rank's loss is its own, --data-parallel=none when no axis is.",
                mesh_option(g.mesh), g.mesh.axes[0], all));
  }
  if (*o.data_parallel == "none") return 0;
  uint8_t mask = 0;
  for (const std::string& axis : comma_items(*o.data_parallel)) {
    const int k = g.mesh.axes.empty() && axis == "world" ? 0 : axis_index(g, axis);
    if (k < 0)
      throw UsageError(fmt::format("--data-parallel: '{}' is not an axis of the program (its axes: {}; or none)", axis,
                                   g.mesh.axes.empty() ? "world" : axes_list(g)));
    mask = uint8_t(mask | (1u << k));
  }
  return mask;
}

// The float inputs whose gradients the torch op gives (--grad=x,w; empty: every float
// input). A name that is no input, or an i32 input's, is an error.
std::set<std::string> grad_inputs(const Options& o, const Graph& g) {
  std::set<std::string> out;
  if (!o.grad) return out;
  std::vector<std::string> floats;
  std::map<std::string, DType> inputs;
  for (const Node& n : g.nodes)
    if (n.op == Op::Input) {
      inputs[n.attr_sym("name")] = n.type->dtype;
      if (is_float(n.type->dtype)) floats.push_back(n.attr_sym("name"));
    }
  for (const std::string& name : comma_items(*o.grad)) {
    const auto it = inputs.find(name);
    if (it == inputs.end())
      throw UsageError(fmt::format("--grad: '{}' is not an input of the program (its float inputs: {})", name,
                                   floats.empty() ? "none" : fmt::format("{}", fmt::join(floats, ", "))));
    if (!is_float(it->second))
      throw UsageError(fmt::format("--grad: '{}' is an {} input, which has no gradient", name, dtype_name(it->second)));
    out.insert(name);
  }
  if (out.empty()) throw UsageError("--grad: name at least one float input");
  return out;
}

const char* kVerifyHelp =
    "usage: gradc verify FILE.dg [--ranks=N | --mesh=A=n,...] [--rtol=R] [--atol=A] [--samples=K] "
    "[--format=text|json]\n"
    "                    [--inputs=DIR] [--size=B=n,...] [--data-parallel=AXES] [--grad=X,...]\n"
    "Check every grad of FILE.dg two ways, in f64: against central finite differences\n"
    "of the objective on at most K elements per gradient (default 64, chosen at random\n"
    "with a fixed seed; all of them when fewer), and against the single-process reference\n"
    "(all ranks' values in one process, each collective replaced by its local meaning).\n"
    "One row per gradient with the largest errors; exit 1 if any is out of tolerance:\n"
    "|a - b| <= atol + rtol |b| (defaults rtol=1e-5, atol=1e-7), plus, for finite\n"
    "differences, their own estimated error (shown as fd tol). An element where the\n"
    "one-sided differences jump (relu or abs at 0, a tie) and the gradient lies between\n"
    "them is reported as a kink, not a failure. Progress on stderr after a second.\n"
    "Inputs take their defaults, or --inputs as for run.\n"
    "A program with no grad() is checked as the torch op differentiates it: the gradient of\n"
    "each float input of the objective sum <y, ct_y> over its float outputs y, by the\n"
    "convention of --data-parallel (as for emit --target=torch), the cotangents ct_y random\n"
    "(or from --inputs: ct_y.npy), as are float inputs without a default or a file; with\n"
    "--grad, of the float inputs it names (as emit's). A program with nothing to check\n"
    "exits 1.\n";

// verify of a program with no grad of its own (the torch op's inputs come from the
// caller): random values for its float inputs that have no default and that --inputs
// does not give, and for the cotangents ct_y, the same on the ranks of each group they
// are shared along; quarters in [-1, 1], exact in every float dtype.
void add_random_inputs(const Graph& g, RankInputs& in) {
  std::mt19937 rng(20261125);
  for (const Node& n : g.nodes) {
    if (n.op != Op::Input || !n.args.empty() || !is_float(n.type->dtype) || in[0].count(n.attr_sym("name"))) continue;
    for (const std::vector<int>& group : mesh_groups(g, shared_axes(g, n))) {
      std::vector<double> v(size_t(n.type->size()));
      for (double& x : v) x = double(int(rng() % 9) - 4) / 4;
      for (int r : group) in[size_t(r)][n.attr_sym("name")] = Tensor::from(n.type, v);
    }
  }
}

int cmd_verify(const Options& o, SourceFile& src) {
  GradCheckOptions opt = o.check;
  check_text_or_json(o.format);
  opt.progress = [](const std::string& what) { std::cerr << "gradc verify: " << what << "\n"; };
  Graph g = load_program(o, src, /*f64=*/true);
  // No grad of its own: the program as the torch op differentiates it (its pullback program).
  const bool as_op = std::none_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == Op::Grad; });
  if (!as_op && o.data_parallel)
    throw UsageError("--data-parallel is the torch op's convention, for a program without grad() of its own");
  if (!as_op && o.grad) throw UsageError("--grad is the torch op's, for a program without grad() of its own");
  const std::set<std::string> only = as_op ? grad_inputs(o, g) : std::set<std::string>{};
  std::set<std::string> cts;
  const uint8_t data_parallel = as_op ? data_parallel_axes(o, g) : 0;
  Graph reference;  // the pullback's single-process reference is made from its own_as_unshared form
  if (as_op) {
    g = pullback_program(std::move(g), data_parallel, cts, only);
    reference = own_as_unshared(g, data_parallel);
  }
  RankInputs inputs = load_inputs(g, o.inputs, true);
  if (as_op) add_random_inputs(g, inputs);
  std::vector<GradCheckRow> rows = check_gradients(g, inputs, opt, as_op ? &reference : nullptr);
  if (rows.empty())
    throw UserError({}, as_op ? "nothing to check: the program has no grad(), and as the torch op it has no gradient "
                                "(it needs a float input and a float output)"
                              : "nothing to check: the program has no gradient");
  // What users run: the program as written on gradc run's default backend, against the interpreter.
  Graph written = load_program(o, src);
  if (native_available())
    opt.run_default = [&src](const Graph& p, const RankInputs& in) {
      return run_native(lowered(p), src.path, complete_inputs(p, in, false), 0).outputs;
    };
  RankInputs written_inputs = load_inputs(written, o.inputs);
  if (as_op) {
    std::set<std::string> same;
    written = pullback_program(std::move(written), data_parallel, same, only);
    for (const Node& n : written.nodes)  // the same random values, in the program's dtypes
      if (n.op == Op::Input && !written_inputs[0].count(n.attr_sym("name")) && inputs[0].count(n.attr_sym("name")))
        for (size_t r = 0; r < written_inputs.size(); ++r)
          written_inputs[r][n.attr_sym("name")] = inputs[r].at(n.attr_sym("name")).cast(n.type->dtype);
  }
  // bf16 and f16: how far the program as written is from the same in f64, which tells
  // how far apart two backends may be (check_backend)
  std::vector<PrecisionRow> precision;
  std::vector<double> rounding;
  if (has_low_precision(written))
    precision = check_precision(written, g, complete_inputs(written, written_inputs, true), &rounding);
  const std::vector<std::string> differ = check_backend(written, written_inputs, rows, opt, rounding);
  opt.source = src.path;
  if (o.format == "json") {
    std::string j = gradcheck_json(rows, opt, differ);
    if (!precision.empty()) j.insert(j.rfind('}'), ",\n \"precision\": " + precision_json(precision));
    std::cout << j;
  } else {
    std::cout << gradcheck_table(rows, opt, differ) << (precision.empty() ? "" : "\n" + precision_table(precision));
  }
  for (const GradCheckRow& r : rows)
    if (!r.ok) return 1;
  return differ.empty() ? 0 : 1;
}

const char* kCostHelp =
    "usage: gradc cost FILE.dg [--ranks=N | --mesh=A=n,...] [--size=B=n,...] [--format=text|json]\n"
    "For every collective of the forward and of the derived backward graph, named by\n"
    "its source value and line (a backward one by the forward op it differentiates): the bytes\n"
    "each rank sends and receives under ring algorithms (all_reduce 2(N-1)/N of its\n"
    "buffer; all_gather, reduce_scatter and all_to_all (N-1)/N of the whole buffer;\n"
    "the rooted ones averaged over ranks), with totals; flops per rank; and the memory per\n"
    "rank of the buffer plan the backends use (workspace, inputs and constants).\n"
    "text gives sizes in readable units (KiB, Mflop); json exact counts, for scripts.\n"
    "A program with size parameters also gets each count as a polynomial in its sizes\n"
    "(96*B + 768), fitted at several sizes and checked at others (docs/cli.md).\n";

// What the program (after autodiff) costs: graph_cost, with the buffer plan's peak.
GraphCost cost_of(const Graph& g) {
  GraphCost c = graph_cost(g);
  c.peak_bytes = double(plan_bytes(lowered(g)));
  return c;
}

// What a cost's rows are: each collective's op, place and phase. Counts at other sizes
// fit the rows' formulas only where the rows are the same.
std::vector<std::string> cost_rows(const Graph& g, const GraphCost& c) {
  std::vector<std::string> rows;
  for (const CollectiveCost& cc : c.collectives)
    rows.push_back(fmt::format("{} {} {} {}", op_name(g[cc.node].op), loc_str("", g[cc.node].loc, false),
                               g[cc.node].loc.col, cc.backward));
  return rows;
}

// The counts of a GraphCost in one list: each collective's sent and received bytes,
// the totals, flops and peak memory (the order CostFormulas' fields take them in).
std::vector<double> cost_counts(const GraphCost& c) {
  std::vector<double> v, totals(4, 0.0);
  for (const CollectiveCost& cc : c.collectives) {
    v.push_back(cc.sent);
    v.push_back(cc.received);
    totals[cc.backward * 2] += cc.sent;
    totals[cc.backward * 2 + 1] += cc.received;
  }
  v.insert(v.end(), totals.begin(), totals.end());
  v.insert(v.end(), {c.flops_forward, c.flops_backward, c.peak_bytes});
  return v;
}

// gradc cost on a program with sizes: each count as a polynomial of degree 3 or less
// in each size, fitted exactly at every size taking m, 2m, 3m and 4m (each combination)
// and checked at 5m and 7m. m is 1, else the least of a few multiples at which the
// program compiles with the same collectives and the count fits (a buffer plan rounds
// sizes up to an alignment, a size such as B // 2 is one only at even B); then each
// size's multiple is made as small as the fit allows, the others' kept.
CostFormulas cost_formulas(const Options& o, const ast::Program& p, const Graph& g, const GraphCost& given) {
  const std::vector<std::string> vars = declared_sizes(p);
  CostFormulas f;
  if (vars.size() > 3) {
    f.failure = fmt::format("the program has {} sizes (formulas are fitted for at most 3)", vars.size());
    return f;
  }
  constexpr int kDegree = 3;
  const std::vector<std::string> rows = cost_rows(g, given);
  const size_t ncounts = cost_counts(given).size();
  size_t grid = 1;
  for (size_t i = 0; i < vars.size(); ++i) grid *= kDegree + 1;
  // The grid's points at multiples m (one per size), then the two points each fit is
  // checked at: every size at 5m, and the first at 7m with the rest at 5m.
  auto points = [&](const std::vector<int64_t>& m) { return grid_points(m, kDegree, 1, 5, 7); };
  // The counts at one point (cached), or nothing where the program does not compile
  // there (a size it rejects, such as an odd B for B // 2) or has other collectives.
  std::map<std::vector<int64_t>, std::optional<std::vector<double>>> at_point;
  auto counts_at = [&](const std::vector<int64_t>& x) -> const std::optional<std::vector<double>>& {
    auto [it, fresh] = at_point.try_emplace(x);
    if (!fresh) return it->second;
    std::vector<std::pair<std::string, int64_t>> sizes;
    for (size_t i = 0; i < vars.size(); ++i) sizes.push_back({vars[i], x[i]});
    try {
      const Graph gx = run_pipeline(lower_program(p, LowerOptions{o.ranks, false, o.mesh, sizes}), Pipeline::Grad);
      const GraphCost cx = cost_of(gx);
      if (cost_rows(gx, cx) == rows) it->second = cost_counts(cx);
    } catch (const UserError&) {
    }
    return it->second;
  };
  // The counts at the points for multiples m, or nothing where one of them has none.
  using Samples = std::optional<std::vector<std::vector<double>>>;
  std::map<std::vector<int64_t>, Samples> sampled;
  auto samples = [&](const std::vector<int64_t>& m) -> const Samples& {
    auto [at, fresh] = sampled.try_emplace(m);
    if (!fresh) return at->second;
    std::vector<std::vector<double>> counts;
    for (const std::vector<int64_t>& x : points(m)) {
      const std::optional<std::vector<double>>& c = counts_at(x);
      if (!c) return at->second;
      counts.push_back(*c);
    }
    at->second = std::move(counts);
    return at->second;
  };
  // Far above the points fitted a count may take another form: a slice x[0:10] of an
  // axis of B is all of it only up to B = 10. Each size in turn at 200m, 1000m, 10^4 m
  // and 10^5 m (the others at 5m): where count q is not the formula's at one, the
  // formula holds below the least multiple where it is not, found by bisection
  // (" (for B < 11)"); nothing where it holds at all of them.
  auto below = [&](size_t q, const std::vector<int64_t>& m, const Polynomial& poly) -> std::string {
    std::vector<std::string> bounds;
    for (size_t i = 0; i < vars.size(); ++i) {
      std::vector<int64_t> x;
      for (int64_t mi : m) x.push_back(5 * mi);
      auto holds = [&](int64_t t) {
        x[i] = t * m[i];
        const std::optional<std::vector<double>>& c = counts_at(x);
        const std::optional<Rational> v = c ? rational_of((*c)[q]) : std::nullopt;
        return v && poly.at(x) == *v;
      };
      int64_t good = 7, bad = 0;
      for (int64_t t : {200, 1000, 10000, 100000})
        if (!holds(t)) {
          bad = t;
          break;
        } else {
          good = t;
        }
      if (!bad) continue;
      while (bad - good > 1) {
        const int64_t mid = good + (bad - good) / 2;
        (holds(mid) ? good : bad) = mid;
      }
      bounds.push_back(fmt::format("{} < {}", vars[i], bad * m[i]));
    }
    return bounds.empty() ? "" : fmt::format(" (for {})", fmt::join(bounds, ", "));
  };
  // Count q's polynomial at multiples m, where one fits.
  auto fit = [&](size_t q, const std::vector<int64_t>& m) -> std::optional<Polynomial> {
    const Samples& s = samples(m);
    if (!s) return std::nullopt;
    std::vector<Rational> values;
    for (size_t idx = 0; idx < grid; ++idx)
      if (auto r = rational_of((*s)[idx][q])) values.push_back(*r);
    if (values.size() != grid) return std::nullopt;
    Polynomial poly = fit_on_grid(vars, m, kDegree, values);
    const std::vector<std::vector<int64_t>> at = points(m);
    for (size_t k = grid; k < at.size(); ++k) {
      const std::optional<Rational> want = rational_of((*s)[k][q]);
      if (!want || !(poly.at(at[k]) == *want)) return std::nullopt;
    }
    return poly;
  };
  // "B a multiple of 4", "B and C multiples of 2", "B a multiple of 4, C of 2"
  auto domain = [&](const std::vector<int64_t>& m) {
    std::vector<std::string> names, parts;
    for (size_t i = 0; i < vars.size(); ++i)
      if (m[i] > 1) {
        names.push_back(vars[i]);
        parts.push_back(parts.empty() ? fmt::format("{} a multiple of {}", vars[i], m[i])
                                      : fmt::format("{} of {}", vars[i], m[i]));
      }
    if (names.empty()) return std::string();
    const bool same = std::all_of(m.begin(), m.end(), [&](int64_t v) { return v == m[0]; });
    if (same && names.size() > 1) return fmt::format(" ({} multiples of {})", fmt::join(names, " and "), m[0]);
    return fmt::format(" ({})", fmt::join(parts, ", "));
  };
  std::vector<std::string> text(ncounts);
  for (size_t q = 0; q < ncounts; ++q) {
    std::optional<Polynomial> poly;
    const std::optional<std::vector<int64_t>> m = least_multiples(
        vars.size(), {1, 2, 4, 8, 16, 32, 64, 3, 6, 12, 24, 48, 96}, [&](const std::vector<int64_t>& mq) {
          std::optional<Polynomial> fitted = fit(q, mq);
          if (!fitted) return false;
          poly = std::move(fitted);  // the last that fits is at the multiples found
          return true;
        });
    if (m) text[q] = poly->str() + domain(*m) + below(q, *m, *poly);
  }
  if (std::none_of(sampled.begin(), sampled.end(), [](const auto& s) { return s.second.has_value(); })) {
    f.failure = "the program compiles with these collectives at none of the sizes tried";
    return f;
  }
  for (std::string& t : text)
    if (t.empty()) t = "none (no polynomial of degree 3 or less in each size)";
  f.fitted = vars.size() == 1
                 ? fmt::format(
                       "fitted at {0} = 1, 2, 3, 4 and checked at {0} = 5 and 7; a count that is a "
                       "polynomial only at multiples of m, at m times those",
                       vars[0])
                 : fmt::format(
                       "fitted at {} = 1, 2, 3, 4 each and checked at 5 each and at {} = 7; a count that is "
                       "a polynomial only at multiples of m, at m times those",
                       fmt::join(vars, ", "), vars[0]);
  const size_t n = given.collectives.size();
  for (size_t i = 0; i < n; ++i) {
    f.sent.push_back(text[2 * i]);
    f.received.push_back(text[2 * i + 1]);
  }
  f.sent_total[0] = text[2 * n];
  f.received_total[0] = text[2 * n + 1];
  f.sent_total[1] = text[2 * n + 2];
  f.received_total[1] = text[2 * n + 3];
  f.flops[0] = text[2 * n + 4];
  f.flops[1] = text[2 * n + 5];
  f.peak = text[2 * n + 6];
  return f;
}

int cmd_cost(const Options& o, SourceFile& src) {
  check_text_or_json(o.format);
  ast::Program p;
  const Graph g = run_pipeline(load_program(o, src, false, &p), Pipeline::Grad);
  const GraphCost c = cost_of(g);
  std::optional<CostFormulas> f;
  if (!declared_sizes(p).empty()) f = cost_formulas(o, p, g, c);
  const CostFormulas* fp = f ? &*f : nullptr;
  std::cout << (o.format == "json" ? cost_json(g, c, src.path, fp) : cost_report(g, c, src.path, fp));
  return 0;
}

// ---- code generation ------------------------------------------------------------

// FILE.dg as the backends see it.
Lowered lowered_program(const Options& o, SourceFile& src) {
  return lowered(run_pipeline(load_program(o, src), Pipeline::Grad));
}

Target target_of(const Options& o) {
  if (!o.target) throw UsageError("--target=cpu or --target=cuda is needed");  // emit: or torch
  return *o.target;
}

// The class name: --name, else the file's stem, as a C++ identifier (default.dg is the
// class default_, run.dg run_).
std::string program_name(const Options& o) {
  return class_name(o.name ? *o.name : fs::path(o.one_file("FILE.dg")).stem().string());
}

const char* kEmitHelp =
    "usage: gradc emit FILE.dg --target=cuda|cpu|torch -o DIR [--name=NAME] [--main] [--no-grad]\n"
    "                  [--data-parallel=AXES] [--grad=X,...] [--ranks=N | --mesh=A=n,...] [--size=B=n,...]\n"
    "Write sources for embedding into DIR: NAME.h (one class: constructed on a communicator\n"
    "and stream, pointer setters and getters, run() that allocates nothing, constexpr shapes),\n"
    "NAME.cpp or NAME.cu, the runtime headers they include, and a CMakeLists.txt defining the\n"
    "library NAME. NAME defaults to the file's stem; N to the program's world. --main also\n"
    "writes NAME_main.cpp or .cu, the standalone executable's main that gradc build compiles.\n"
    "--target=torch writes the Python package DIR/NAME/ (and DIR/pyproject.toml): import NAME\n"
    "compiles it with torch.utils.cpp_extension, and NAME.NAME(...) is a differentiable\n"
    "PyTorch op whose backward is the gradient gradc derives (docs/torch.md); with --no-grad,\n"
    "an op for inference, without a backward (none is derived or compiled). --data-parallel\n"
    "names the axes the training framework reduces gradients over (each rank's loss its\n"
    "own); along the others every rank's copy of a replicated output is one loss. A\n"
    "program without a mesh defaults to its one axis (DDP); a mesh program must say.\n"
    "--grad names the float inputs the op differentiates (default: all): the backward\n"
    "computes only their gradients, and an input outside them that requires grad is an error.\n"
    "--size B=any: a class for any value of B, set per run (set_sizes; docs/cli.md).\n";

// gradc emit --size B=any: the class generated at the points of any_size_points(m), its
// numbers fitted as formulas in the sizes (codegen/any_size.h). m (least_multiples) is
// 1 for each size, else the least of a few multiples at which the texts agree but for
// numbers that fit (a size such as B // 2 is one only at even B), then each size's made
// as small as the fit allows; a size outside them is an error at run time (set_sizes).
// `make` writes the files at the sizes of the program `g` (lowered with `po`).
using MakeFiles =
    std::function<std::vector<GeneratedFile>(Graph g, const PipelineOptions& po, const std::vector<AnySize>& any)>;
std::vector<GeneratedFile> any_size_files(const Options& o, SourceFile& src, const std::string& name,
                                          const MakeFiles& make) {
  src.path = o.one_file("FILE.dg");
  src.text = read_file(src.path);
  const ast::Program p = parse_program(src.text);
  const std::vector<std::string> declared = declared_sizes(p);
  const std::vector<std::string>& vars = o.any_sizes;
  for (const std::string& v : vars) {
    if (std::find(declared.begin(), declared.end(), v) == declared.end())
      throw UsageError(fmt::format("--size {}=any: the program declares no size {}", v, v));
    if (std::any_of(o.sizes.begin(), o.sizes.end(), [&](const auto& s) { return s.first == v; }))
      throw UsageError(fmt::format("--size gives {} twice", v));
  }
  if (vars.size() > 3) throw UsageError("--size: at most 3 sizes may be any (their formulas are fitted on a grid)");
  // each size's default (the program's; 0 where it has none) and the inputs that have
  // it as a dimension
  std::vector<AnySize> any;
  std::map<std::string, int64_t> defaults;
  try {
    for (const auto& [n, v] : lower_program(p, LowerOptions{o.ranks, false, o.mesh, o.sizes}).sizes) defaults[n] = v;
  } catch (const UserError&) {
  }
  for (const ast::Stmt& st : p.stmts)  // a program that is none at its defaults: a literal default
    if (st.kind == ast::Stmt::Size && st.value && st.value->kind == ast::Expr::Number && st.value->is_int)
      defaults.try_emplace(st.names[0].text, st.value->ival);
  for (const std::string& v : vars) {
    AnySize a{v, defaults.count(v) ? defaults[v] : 0, {}};
    for (const ast::Stmt& st : p.stmts)
      if (st.kind == ast::Stmt::Input)
        for (size_t k = 0; k < st.type.dims.size(); ++k)
          if (st.type.dims[k]->kind == ast::Expr::Name && st.type.dims[k]->text == v)
            a.from.push_back({st.names[0].text, int(k)});
    any.push_back(std::move(a));
  }
  std::string first_why;
  // functions of one 16-bit value as tables (the CPU's Table16), until one would depend
  // on the sizes (its entries are computed when the program is loaded, at no size)
  bool tables = true;
  auto attempt = [&](const std::vector<int64_t>& m) -> std::vector<GeneratedFile> {
    for (;;) {
      std::vector<SizedFiles> at;
      for (const std::vector<int64_t>& x : any_size_points(m)) {
        std::vector<std::pair<std::string, int64_t>> sizes = o.sizes;
        for (size_t i = 0; i < vars.size(); ++i) sizes.push_back({vars[i], x[i]});
        try {
          PipelineOptions po;
          po.max_folded = kAnyMaxFolded;
          po.any_size = true;
          po.tables16 = tables;
          at.push_back({x, make(lower_program(p, LowerOptions{o.ranks, false, o.mesh, sizes}), po, any)});
        } catch (const UserError& e) {
          std::vector<std::string> point;
          for (size_t i = 0; i < vars.size(); ++i) point.push_back(fmt::format("{} = {}", vars[i], x[i]));
          if (first_why.empty())
            first_why = fmt::format("at {} the program is none: {}", fmt::join(point, ", "), e.what());
          return {};
        }
      }
      AnySizeResult r = fit_any_size(vars, m, at, name);
      if (r.in_table && tables) {
        tables = false;
        continue;
      }
      if (first_why.empty()) first_why = r.why;
      return std::move(r.files);
    }
  };
  std::vector<GeneratedFile> files;
  const std::optional<std::vector<int64_t>> m =
      least_multiples(vars.size(), {1, 2, 4, 8, 16, 32, 3, 6, 12, 24}, [&](const std::vector<int64_t>& mq) {
        std::vector<GeneratedFile> f = attempt(mq);
        if (f.empty()) return false;
        files = std::move(f);  // the last that fits is at the multiples found
        return true;
      });
  // each size's least value: where the program is the one the class computes
  // (least_sizes; its IR as `gradc ir` prints it, grad statements not yet derived: the
  // derivative rules leave out a broadcast or a sum over an axis of 1, where their
  // general form is the same function)
  LeastSizes least;
  if (m) {
    least = least_sizes(vars, *m, [&](const std::vector<int64_t>& x) -> std::optional<std::string> {
      std::vector<std::pair<std::string, int64_t>> sizes = o.sizes;
      for (size_t i = 0; i < vars.size(); ++i) sizes.push_back({vars[i], x[i]});
      try {
        return print_text(lower_program(p, LowerOptions{o.ranks, false, o.mesh, sizes}));
      } catch (const UserError&) {
        return std::nullopt;
      }
    });
    first_why = least.why;
  }
  if (m && least.why.empty()) {
    std::map<std::string, std::string> values;
    for (size_t i = 0; i < vars.size(); ++i) values["LEAST_" + vars[i]] = std::to_string(least.least[i]);
    for (GeneratedFile& f : files) f.text = fill(std::move(f.text), values);
    return files;
  }
  throw UserError({}, fmt::format("--size {}=any: no one set of sources fits every size: {} (emit for one value "
                                  "instead, --size {}=32)",
                                  fmt::join(vars, "=any,"), first_why, vars[0]));
}

// The class's sources for `target`, and the executable's main where `main`: for the
// sizes given, or for every size (--size B=any).
std::vector<GeneratedFile> class_sources(const Options& o, SourceFile& src, Target target, const std::string& name,
                                         bool main) {
  auto sources = [&](const Lowered& l, const std::vector<AnySize>& any) {
    std::vector<GeneratedFile> files = generate(l, target, name, src.path, any);
    if (main) files.push_back(generate_main(l, target, name, any));
    return files;
  };
  if (o.any_sizes.empty()) return sources(lowered_program(o, src), {});
  return any_size_files(o, src, name, [&](Graph g, const PipelineOptions& po, const std::vector<AnySize>& any) {
    return sources(lowered(run_pipeline(std::move(g), Pipeline::Grad), po), any);
  });
}

int cmd_emit(const Options& o, SourceFile& src) {
  Target target = target_of(o);
  if (!o.out) throw UsageError("-o DIR is needed");
  std::string name = program_name(o);
  if (target != Target::Torch) {
    if (o.no_grad) throw UsageError("--no-grad is for --target=torch (the cpu and cuda classes have no backward)");
    if (o.data_parallel) throw UsageError("--data-parallel is for --target=torch (the op's gradient convention)");
    if (o.grad) throw UsageError("--grad is for --target=torch (the inputs the op differentiates)");
    write_sources(*o.out, class_sources(o, src, target, name, o.main));  // --main: what gradc build compiles
    return 0;
  }
  if (o.main) throw UsageError("--main is for --target=cpu or cuda (the standalone executable's main)");
  name = package_name(name);  // pass.dg is the package pass_, torch.dg torch_
  if (o.no_grad && o.data_parallel) throw UsageError("--data-parallel is a gradient's convention; --no-grad has none");
  if (o.no_grad && o.grad) throw UsageError("--grad names the inputs the op differentiates; --no-grad has none");
  if (!o.any_sizes.empty()) {  // a package for any size: its sizes are parameters of Python functions
    for (const std::string& v : o.any_sizes)
      if (python_keyword(v) || v[0] == '_')
        throw UsageError(
            fmt::format("--size {}=any: the torch target names the sizes in Python, where '{}' is "
                        "reserved (rename the size)",
                        v, v));
    write_sources(
        *o.out, any_size_files(o, src, name, [&](Graph g, const PipelineOptions& po, const std::vector<AnySize>& any) {
          if (o.no_grad) {
            const Lowered forward = lowered(run_pipeline(std::move(g), Pipeline::Grad), po);
            return generate_torch(forward, Lowered{}, forward.outputs.size(), 0, {}, name, src.path, any);
          }
          const uint8_t data_parallel = data_parallel_axes(o, g);
          const std::set<std::string> only = grad_inputs(o, g);
          Linearized lin = linearize(std::move(g), data_parallel, only, po);
          const Lowered forward = lowered(std::move(lin.forward), po);
          const Lowered pullback = lin.pullback.outputs.empty() ? Lowered{} : lowered(std::move(lin.pullback), po);
          return generate_torch(forward, pullback, lin.outputs, data_parallel, only, name, src.path, any);
        }));
    return 0;
  }
  if (o.no_grad) {  // for inference: the forward alone, no pullback derived or compiled
    const Lowered forward = lowered_program(o, src);
    write_sources(*o.out, generate_torch(forward, Lowered{}, forward.outputs.size(), 0, {}, name, src.path));
    return 0;
  }
  Graph g = load_program(o, src);
  const uint8_t data_parallel = data_parallel_axes(o, g);
  const std::set<std::string> only = grad_inputs(o, g);
  Linearized lin = linearize(std::move(g), data_parallel, only, PipelineOptions{});
  const Lowered forward = lowered(std::move(lin.forward));
  const Lowered pullback = lin.pullback.outputs.empty() ? Lowered{} : lowered(std::move(lin.pullback));
  write_sources(*o.out, generate_torch(forward, pullback, lin.outputs, data_parallel, only, name, src.path));
  return 0;
}

const char* kBuildHelp =
    "usage: gradc build FILE.dg --target=cuda|cpu -o EXE [--ranks=N | --mesh=A=n,...] [--size=B=n,...]\n"
    "Emit FILE.dg and compile it into a standalone executable, built for N ranks (default:\n"
    "the program's world):  EXE [--ranks=N] [--inputs=DIR] [--outputs=DIR] [--iters=K]\n"
    "[--format=text|json], with gradc run's input and output rules. cpu: the ranks are\n"
    "threads of one process. cuda: one process drives N GPUs, compiled for sm_80 and sm_90\n"
    "or for those CMake's CUDAARCHS names (80;90, 90-real, native). `gradc --version` says which\n"
    "targets this gradc can compile. --size B=any: one executable for any B, which it\n"
    "takes from its input files (docs/cli.md).\n";

int cmd_build(const Options& o, SourceFile& src) {
  Target target = target_of(o);
  if (!o.out) throw UsageError("-o EXE is needed");
  const std::string exe = *o.out, name = program_name(o);
  const fs::path folder = fs::absolute(exe).parent_path();
  if (!fs::is_directory(folder))
    throw UserError({}, fmt::format("cannot write '{}': the folder '{}' does not exist", exe, folder.string()));
  Toolchain tc = target == Target::Cuda ? cuda_toolchain() : cpu_toolchain();
  if (!tc.found)
    throw UserError({},
                    fmt::format("gradc build --target={}: {}", target == Target::Cuda ? "cuda" : "cpu", tc.missing));
  if (target == Target::Cuda) cuda_arch_flags();  // a bad CUDAARCHS says so before anything is generated
  std::vector<GeneratedFile> files = class_sources(o, src, target, name, true);
  const std::string ext = target == Target::Cuda ? ".cu" : ".cpp";
  files.push_back(one_unit(name + "_unit" + ext, {name + ext, name + "_main" + ext}));
  std::string tmpl = (fs::temp_directory_path() / "gradc-build-XXXXXX").string();
  if (!mkdtemp(tmpl.data()))
    throw UserError({}, fmt::format("cannot create a folder for the sources: {}", std::strerror(errno)));
  const std::string dir = tmpl, unit = files.back().name;
  const SharedRuntime runtime = target == Target::Cpu ? shared_runtime(files, true) : SharedRuntime{};
  write_sources(dir, files);
  const bool cuda = target == Target::Cuda;
  const std::string err =
      runtime.compile([&](const std::string& flags) { return compile(cuda, dir, unit, exe + ".gradc-tmp", flags); });
  if (!err.empty())
    throw InternalError(fmt::format("internal error: the generated code did not compile; it is kept in {}{}\n{}", dir,
                                    runtime.where(), err));
  if (std::rename((exe + ".gradc-tmp").c_str(), exe.c_str()) != 0)
    throw UserError({}, fmt::format("cannot write '{}': {}", exe, std::strerror(errno)));
  fs::remove_all(dir);
  return 0;
}

const char* kProveHelp =
    "usage: gradc prove [--op=OP] [--max-ranks=K] [--format=text|json]\n"
    "For every collective and reduction op: its adjoint as the autodiff pass derives it,\n"
    "a proof that it is the transpose for every number of ranks and every shape (symbolic,\n"
    "over the collective's routing), and an exact check for 1..K ranks (default 8): the\n"
    "full matrices entry by entry and <A x, y> = <x, A^T y>; for avg, prod, max and min the\n"
    "derivative against its definition, zeros and ties included. --op=all_gather (or\n"
    "all_reduce, ...) prints the derivation step by step. Exit 1 if anything fails.\n";

int cmd_prove(const Options& o, SourceFile&) {
  ProveOptions opt;
  opt.max_ranks = o.max_ranks;
  const std::string& only = o.op;
  const std::string& format = o.format;
  if (!o.files.empty()) throw UsageError("prove takes no file");
  check_text_or_json(format);
  std::vector<ProofRow> rows;
  for (const ProofCase& c : all_proof_cases())
    if (only.empty() || only == op_name(c.op)) rows.push_back(prove(c, opt));
  if (rows.empty()) throw UsageError(fmt::format("--op: '{}' is not a collective", only));
  if (format == "json") {
    std::cout << proof_json(rows, opt.max_ranks);
  } else {
    std::cout << proof_table(rows, opt.max_ranks);
  }
  if (!only.empty() && format == "text")
    for (const ProofRow& r : rows)
      std::cout << fmt::format("\n== {}{} ==\n{}", op_name(r.c.op), r.c.reduction ? " op=" + r.c.reduction_str() : "",
                               r.derivation);
  for (const ProofRow& r : rows)
    if (!r.proved || !r.checked) return 1;
  return 0;
}

// An option: its long name ("o" is -o, "verbose" also -v), the line --help shows for
// it, and how its value sets its field of Options (a switch is set with "").
struct Flag {
  const char* name;
  const char* help;
  void (*set)(Options&, const std::string& value);
  bool is_switch = false;
};

struct Command {
  const char* name;
  int (*run)(const Options&, SourceFile& src);  // src: the file read, for main's diagnostics
  const char* help;                             // the usage line and what the command does, before CLI11's option list
  std::vector<Flag> flags;
};

// The options, each once: commands list the ones they take.
const Flag kRanks{"ranks", "N: the number of ranks (default: the program's world, else 1)",
                  [](Options& o, const std::string& v) { o.ranks = int_value("ranks", v, 1, kMaxWorld); }};
// NAME=n,NAME=m (--mesh, --size): the names and values in order, each value from 1 to `most`.
std::vector<std::pair<std::string, int>> name_values(const char* key, const std::string& v, const char* form,
                                                     int most) {
  std::vector<std::pair<std::string, int>> out;
  for (const std::string& item : comma_items(v)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError(fmt::format("--{} must be {}, got '{}'", key, form, v));
    out.push_back({item.substr(0, eq), int_value(key, item.substr(eq + 1), 1, most)});
  }
  return out;
}
// --mesh=dp=4,tp=2: each declared axis's size, in the declared order
const Flag kMesh{"mesh", "A=n,B=m: the sizes of the program's mesh axes (docs/language.md section 8)",
                 [](Options& o, const std::string& v) {
                   o.mesh = name_values("mesh", v, "AXIS=SIZE,... (such as dp=2,tp=4)", kMaxWorld);
                 }};
const Flag kSize{"size",
                 "B=n,C=m: values of the program's size parameters (docs/language.md section 3); emit "
                 "--target=cpu: B=any, a class for any B",
                 [](Options& o, const std::string& v) {
                   o.sizes.clear();
                   o.any_sizes.clear();
                   std::vector<std::string> given;
                   for (const std::string& item : comma_items(v))
                     if (item.size() > 4 && item.ends_with("=any"))
                       o.any_sizes.push_back(item.substr(0, item.size() - 4));
                     else
                       given.push_back(item);
                   if (given.empty()) return;
                   for (const auto& [name, n] : name_values("size", fmt::format("{}", fmt::join(given, ",")),
                                                            "NAME=VALUE,... (such as B=32)", INT32_MAX))
                     o.sizes.push_back({name, n});
                 }};
const Flag kDataParallel{"data-parallel",
                         "AXES: the axes the training framework reduces gradients over (dp,tp or none)",
                         [](Options& o, const std::string& v) { o.data_parallel = v; }};
const Flag kGrad{"grad", "X[,Y...]: torch: the float inputs the op differentiates (default: all)",
                 [](Options& o, const std::string& v) { o.grad = v; }};
Flag format_flag(const char* help) {
  return {"format", help, [](Options& o, const std::string& v) { o.format = v; }};
}
const Flag kLoc{"loc", "end each text line with loc(\"FILE\":LINE:COL)",
                [](Options& o, const std::string&) { o.loc = true; }, true};
const Flag kPrintAfterAll{"print-after-all", "print the graph after every pass",
                          [](Options& o, const std::string&) { o.pipeline.print_after_all = true; }, true};
Flag time_passes_flag(const char* help) {
  return {"time-passes", help, [](Options& o, const std::string&) { o.pipeline.time_passes = true; }, true};
}
const Flag kInputs{"inputs", "DIR: .npy files for the inputs", [](Options& o, const std::string& v) { o.inputs = v; }};
const Flag kTarget{"target", "cpu or cuda", [](Options& o, const std::string& v) {
                     if (v != "cpu" && v != "cuda")
                       throw UsageError(fmt::format("--target must be cpu or cuda, got '{}'", v));
                     o.target = v == "cuda" ? Target::Cuda : Target::Cpu;
                   }};
const Flag kEmitTarget{"target", "cpu, cuda or torch", [](Options& o, const std::string& v) {
                         if (v != "cpu" && v != "cuda" && v != "torch")
                           throw UsageError(fmt::format("--target must be cpu, cuda or torch, got '{}'", v));
                         o.target = v == "cuda" ? Target::Cuda : v == "torch" ? Target::Torch : Target::Cpu;
                       }};
Flag out_flag(const char* help) {
  return {"o", help, [](Options& o, const std::string& v) { o.out = v; }};
}

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"check",
       cmd_check,
       kCheckHelp,
       {kRanks,
        kMesh,
        kSize,
        {"verbose", "-v: one line per input, output and collective",
         [](Options& o, const std::string&) { o.verbose = true; }, true}}},
      {"ir",
       cmd_ir,
       kIrHelp,
       {{"stage", "parsed, grad, opt or lowered",
         [](Options& o, const std::string& v) {
           if (v != "parsed" && v != "grad" && v != "opt" && v != "lowered")
             throw UsageError(fmt::format("--stage must be parsed, grad, opt or lowered, got '{}'", v));
           o.stage = v;
         }},
        format_flag("text, dot or json"),
        kRanks,
        kMesh,
        kSize,
        kLoc,
        kPrintAfterAll,
        time_passes_flag("time each pass (and parsing, lowering to kernels, printing)")}},
      {"opt",
       cmd_opt,
       kOptHelp,
       {{"pass", "P[,P...]: the passes to run, in order",
         [](Options& o, const std::string& v) { o.passes = pass_list(v); }},
        format_flag("text, dot or json"),
        {"loc", "print the source locations the IR holds", kLoc.set, true},
        kPrintAfterAll,
        time_passes_flag("time each pass")}},
      {"run",
       cmd_run,
       kRunHelp,
       {kRanks,
        kMesh,
        kSize,
        kInputs,
        {"outputs", "DIR: write the outputs as .npy files", [](Options& o, const std::string& v) { o.outputs = v; }},
        format_flag("text or json"),
        {"backend", "native or interp",
         [](Options& o, const std::string& v) {
           if (v != "interp" && v != "native")
             throw UsageError(fmt::format("unknown --backend '{}' (available: native, interp)", v));
           o.backend = v;
         }},
        {"iters", "K: time K more runs",
         [](Options& o, const std::string& v) { o.iters = int_value("iters", v, 0, 1000000); }},
        {"quiet", "print no outputs", [](Options& o, const std::string&) { o.quiet = true; }, true},
        {"check-finite", "stop at the first NaN or infinity",
         [](Options& o, const std::string&) { o.pipeline.check_finite = true; }, true}}},
      {"verify",
       cmd_verify,
       kVerifyHelp,
       {kRanks,
        kMesh,
        kSize,
        {"rtol", "relative tolerance",
         [](Options& o, const std::string& v) { o.check.rtol = tolerance_value("rtol", v); }},
        {"atol", "absolute tolerance",
         [](Options& o, const std::string& v) { o.check.atol = tolerance_value("atol", v); }},
        {"inputs", "DIR: .npy inputs", kInputs.set},
        {"samples", "K: finite differences per gradient",
         [](Options& o, const std::string& v) { o.check.samples = int_value("samples", v, 1, 1 << 30); }},
        kDataParallel,
        kGrad,
        format_flag("text or json")}},
      {"cost", cmd_cost, kCostHelp, {kRanks, kMesh, kSize, format_flag("text or json")}},
      {"prove",
       cmd_prove,
       kProveHelp,
       {{"op", "OP: one collective, with its derivation", [](Options& o, const std::string& v) { o.op = v; }},
        {"max-ranks", "K: check 1..K ranks exactly",
         [](Options& o, const std::string& v) { o.max_ranks = int_value("max-ranks", v, 1, 64); }},
        format_flag("text or json")}},
      {"emit",
       cmd_emit,
       kEmitHelp,
       {kEmitTarget,
        out_flag("DIR: where the sources go"),
        {"name", "the class name", [](Options& o, const std::string& v) { o.name = v; }},
        {"no-grad", "torch: an op without a backward, for inference",
         [](Options& o, const std::string&) { o.no_grad = true; }, true},
        {"main", "cpu, cuda: also NAME_main.cpp or .cu, the executable's main (as gradc build compiles)",
         [](Options& o, const std::string&) { o.main = true; }, true},
        kDataParallel,
        kGrad,
        kRanks,
        kMesh,
        kSize}},
      {"build", cmd_build, kBuildHelp, {kTarget, out_flag("EXE: the executable"), kRanks, kMesh, kSize}},
  };
  return cmds;
}

UsageError needs_value(const char* flag) {
  return UsageError(fmt::format("{}{} needs a value", std::string(flag) == "o" ? "-" : "--", flag));
}

// An option's name: `--outputs=DIR` and `-o` without their dashes and value.
std::string option_name(const std::string& arg) {
  const std::string key = arg.substr(arg.rfind("--", 0) == 0 ? 2 : 1);
  return key.substr(0, key.find('='));
}

// "unknown option --out; did you mean --outputs?": the command's flags that the name
// begins (a shortened flag) or is two edits from.
UsageError unknown_option(const Command& c, const std::string& arg) {
  const bool two = arg.rfind("--", 0) == 0;
  const std::string key = option_name(arg);
  std::vector<std::string> near;
  for (const Flag& f : c.flags) {
    const std::string name = f.name;
    if (name.size() > 1 && !key.empty() && (name.rfind(key, 0) == 0 || edit_distance(key, name) <= 2))
      near.push_back("--" + name);
  }
  std::string msg = fmt::format("unknown option {}{}", two ? "--" : "-", key);
  if (!near.empty()) msg += fmt::format("; did you mean {}?", fmt::join(near, " or "));
  return UsageError(msg);
}

bool known_option(const Command& c, const std::string& arg) {
  if (arg == "-h" || arg == "--help" || arg == "-v") return true;
  const std::string key = option_name(arg);
  for (const Flag& f : c.flags)
    if (key == f.name) return true;
  return false;
}

// Parses a command's arguments with CLI11 into Options: `--key=value`, `--key value`,
// switches, -o, positional files. A mistake is a UsageError (exit 2) in gradc's words.
Options parse_command(const Command& c, int argc, char** argv, bool& help) {
  CLI::App app{c.help, std::string("gradc ") + c.name};
  app.set_help_flag("-h,--help", "print this help and exit");
  app.allow_extras(true);  // reported below, in gradc's words
  Options o;
  for (const Flag& f : c.flags) {
    const std::string spelling = std::string(f.name) == "o"         ? "-o"
                                 : std::string(f.name) == "verbose" ? "-v,--verbose"
                                                                    : std::string("--") + f.name;
    auto set = f.set;
    if (f.is_switch)
      app.add_flag_callback(spelling, [&o, set] { set(o, ""); }, f.help);
    else
      app.add_option_function<std::string>(
             spelling,
             [&o, set, name = f.name](const std::string& v) {
               // CLI11 gives `--outputs` the next argument even where that is an option
               // (`--outputs --quiet`, and `--outputs= --quiet`, wrote a folder `--quiet`)
               if (v.empty() || v.rfind("--", 0) == 0) throw needs_value(name);
               set(o, v);
             },
             f.help)
          ->type_name("VALUE");
  }
  if (std::string(c.name) != "prove")  // prove reads no program: a file given is an error below
    app.add_option("FILE", o.files, std::string(c.name) == "opt" ? "the textual IR file" : "the program (.dg) file")
        ->expected(0, 1)
        ->type_name("");
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 2; --i) args.push_back(argv[i]);  // CLI11 takes them reversed
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    help = true;
    std::cout << app.help();
    return o;
  } catch (const CLI::ParseError& e) {
    // an unknown option first: `--out o1` left `o1` a second FILE, and CLI11 said
    // "FILE: At Most 1 required but received 2"
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a.size() > 1 && a[0] == '-' && a != "--" && !known_option(c, a)) throw unknown_option(c, a);
    }
    // "--ranks: 1 required TEXT missing" and the like
    std::string what = e.what();
    for (const Flag& f : c.flags)
      if (what.find(std::string("--") + f.name) != std::string::npos || what.find(std::string("-") + f.name + ":") == 0)
        throw needs_value(f.name);
    throw UsageError(what);
  }
  for (const std::string& extra : app.remaining()) {
    if (extra.rfind("-", 0) == 0 && extra != "-") throw unknown_option(c, extra);
    o.files.push_back(extra);
  }
  return o;
}

const char* kUsage =
    "usage: gradc COMMAND [ARGS]\n"
    "gradc compiles per-rank (SPMD) tensor programs with collectives and derives their gradients.\n"
    "commands:\n"
    "  check FILE.dg     parse and type-check\n"
    "  ir FILE.dg        print the graph after a stage (--stage=parsed|grad|opt)\n"
    "  opt FILE.ir       run passes on textual IR (--pass=P,...)\n"
    "  run FILE.dg       run on the CPU with N ranks in one process\n"
    "  verify FILE.dg    check every gradient against finite differences and a single-process reference\n"
    "  cost FILE.dg      bytes each rank sends per collective, forward and backward; flops; memory\n"
    "  prove             prove every collective's derived adjoint, for all N and exactly for N=1..K\n"
    "  emit FILE.dg      write C++ sources to embed (--target=cpu|cuda -o DIR)\n"
    "  build FILE.dg     compile a standalone executable (--target=cpu|cuda -o EXE)\n"
    "Run `gradc COMMAND --help` for a command's options.\n";

}  // namespace

int main(int argc, char** argv) {
#ifdef GRADC_MIMALLOC
  // A gradc process is short: what one stage frees stays with the allocator for the
  // next, instead of going back to the OS and being faulted in again (a 100k-statement
  // program: 92k page faults instead of 99k).
  mi_option_set(mi_option_decommit_delay, 1000 * 1000);  // ms
#endif
  register_all();
  // OpenBLAS's kernels, chosen again where they are older than this CPU: before any
  // matmul, and before the interpreter's ranks start their threads
  const BlasKernels& blas = choose_blas_kernels();
  std::vector<std::string> missing = missing_rules();
  if (!missing.empty()) {
    for (const auto& m : missing) std::cerr << "gradc: internal error: " << m << "\n";
    return 1;
  }
  if (argc >= 2 && std::string(argv[1]) == "--version") {
    std::cout << fmt::format("gradc 0.2\ntargets this build can compile:\n  {}\n  {}\n  {}\n", cpu_toolchain().describe,
                             cuda_toolchain().describe, native_toolchain().describe);
    std::cout << fmt::format("OpenBLAS's kernels here: {}\n",
                             !blas.asked.empty()
                                 ? fmt::format("{} (OpenBLAS chose {}, narrower than this CPU's vectors)",
                                               openblas_get_corename(), blas.openblas)
                             : getenv("OPENBLAS_CORETYPE")
                                 ? fmt::format("{} (OPENBLAS_CORETYPE={})", blas.openblas, getenv("OPENBLAS_CORETYPE"))
                                 : fmt::format("{} (OpenBLAS's choice)", blas.openblas));
    return 0;
  }
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    (argc < 2 ? std::cerr : std::cout) << kUsage;
    return argc < 2 ? 2 : 0;
  }
  std::string name = argv[1];
  auto it = std::find_if(commands().begin(), commands().end(), [&](const Command& c) { return name == c.name; });
  if (it == commands().end()) {
    std::cerr << fmt::format("gradc: unknown command '{}'\n{}", name, kUsage);
    return 2;
  }
  SourceFile src;  // the file being compiled, for diagnostics with its source line
  try {
    bool help = false;
    const Options o = parse_command(*it, argc, argv, help);
    if (help) return 0;
    return it->run(o, src);
  } catch (const UsageError& e) {
    std::cerr << fmt::format("gradc {}: {}\n{}", name, e.what(), it->help);
    return 2;
  } catch (const UserError& e) {
    if (e.loc.known() && !src.path.empty())
      std::cerr << src.format(e);
    else
      std::cerr << fmt::format("gradc: error: {}\n", e.what());
    return 1;
  } catch (const InternalError& e) {
    std::cerr << fmt::format("gradc: {}\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "gradc: error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {  // a library's exception: still a message, not a crash
    std::cerr << fmt::format("gradc: internal error: {}\n", e.what());
    return 1;
  }
}
