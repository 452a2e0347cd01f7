// The torch target (docs/torch.md): a Python package
// NAME/ whose op runs the program's cpu class, and whose derivative runs the class of
// its pullback (passes/autodiff.h), both on the caller's process groups
// (codegen/runtime/gradc_torch.h). The Python text that is the same for every program
// is the template codegen/templates/torch_init.py.in; this file writes what differs:
// the program's inputs and outputs, the ops' signatures, and their C++ bindings.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "codegen/cpp.h"
#include "codegen/runtime_files.h"
#include "ir/mesh.h"

namespace gradc {
namespace {

// Python's keywords, and the names the package's __init__.py uses beside the parameters.
const char* kPythonKeywords[] = {"False",  "None",   "True",    "and",      "as",       "assert", "async",
                                 "await",  "break",  "class",   "continue", "def",      "del",    "elif",
                                 "else",   "except", "finally", "for",      "from",     "global", "if",
                                 "import", "in",     "is",      "lambda",   "nonlocal", "not",    "or",
                                 "pass",   "raise",  "return",  "try",      "while",    "with",   "yield"};
const char* kPackageNames[] = {"group",  "mesh",     "groups", "torch", "dist",
                               "Tensor", "Optional", "List",   "os",    "hashlib"};

// A program's name as a Python parameter: with a trailing _ where it is a keyword or a
// name the package uses.
std::string py_name(std::string n) {
  for (;;) {
    bool taken = n[0] == '_' || python_keyword(n);
    for (const char* k : kPackageNames) taken |= n == k;
    if (!taken) return n;
    n += "_";
  }
}

struct Value {
  std::string name, py;  // in the program; as a Python parameter
  std::string api;       // in the class's API (set_x, set_y_out)
  DType dtype;
  Shape shape;
  bool has_default = false;
};

// The class's inputs (with whether each has a default) or outputs, in program order.
std::vector<Value> values_of(const Lowered& l, const std::string& cls, bool inputs) {
  const std::map<std::string, std::string> api = api_names(l, cls);
  std::vector<Value> out;
  for (const auto& [name, b] : inputs ? l.inputs : l.outputs) {
    const LBuffer& buf = l.buffers[size_t(b)];
    out.push_back({name, py_name(name), api.at(name), buf.type->dtype, buf.type->shape,
                   inputs && !l.graph[buf.value].args.empty()});
  }
  return out;
}
std::vector<Value> inputs_of(const Lowered& l, const std::string& cls) { return values_of(l, cls, true); }
std::vector<Value> outputs_of(const Lowered& l, const std::string& cls) { return values_of(l, cls, false); }

std::string dims(const Shape& s) { return fmt::format("{}", fmt::join(s, ", ")); }
std::string py_list(const Shape& s) { return fmt::format("[{}]", dims(s)); }

std::vector<std::string> split_names(const Lowered& l) {
  std::vector<std::string> out;
  for (const auto& axes : mesh_group_axes(l)) out.push_back(axes_names(l.graph, axes, "+"));
  return out;
}

// The package's two ops. forward takes the program's inputs and returns its outputs, then
// the values the pullback reads (passes/autodiff.h: linearize); pullback takes the
// program's inputs, the float outputs' cotangents and those saved values, and returns
// the float inputs' gradients.
struct Package {
  const Lowered &fwd, &pb;
  std::string name;
  std::vector<AnySize> any;             // a package for any size: its sizes
  std::vector<Value> ins, outs, saved;  // forward's inputs; its outputs: the program's, then saved
  std::vector<Value> cts, grads;        // pullback's cotangent inputs; its outputs
  std::vector<size_t> fwd_at, pb_at;    // each class input's place among the op's arguments

  Package(const Lowered& f, const Lowered& p, size_t outputs, std::string n) : fwd(f), pb(p), name(std::move(n)) {
    ins = inputs_of(fwd, name);
    outs = outputs_of(fwd, name);
    saved.assign(outs.begin() + std::ptrdiff_t(outputs), outs.end());
    outs.resize(outputs);
    for (size_t i = 0; i < ins.size(); ++i) fwd_at.push_back(i);
    if (pb.outputs.empty()) return;
    grads = outputs_of(pb, name + "_pullback");
    // the pullback op's arguments: the program's inputs, the cotangents, the saved values
    std::map<std::string, size_t> place;
    for (size_t i = 0; i < ins.size(); ++i) place[ins[i].name] = i;
    const std::vector<Value> pins = inputs_of(pb, name + "_pullback");
    for (const Value& v : pins)
      if (!place.count(v.name) &&
          std::none_of(saved.begin(), saved.end(), [&](const Value& s) { return s.name == v.name; })) {
        place[v.name] = ins.size() + cts.size();
        cts.push_back(v);
      }
    for (size_t k = 0; k < saved.size(); ++k) place[saved[k].name] = ins.size() + cts.size() + k;
    for (const Value& v : pins) pb_at.push_back(place.at(v.name));
  }
};

// What an op's entry does with the tensors' addresses `in` and `out` (the op's
// arguments in order, nullptr for None; the outputs __init__.py allocated): set the
// class's inputs and outputs, and run it. Indented as the body of c_call's lambda.
// In a package for any size, the class is first given this call's sizes.
// A class for any size checks its sizes with its shared inputs (gradc::StepSizes); a
// pullback with no shared input leaves that to the forward of its call, whose sizes are
// its own.
std::string run_class(const Lowered& l, const std::string& cls, const char* type, const std::vector<size_t>& at,
                      const std::vector<AnySize>& any, bool pullback) {
  std::string s = has_shared_input(l) || (!any.empty() && !pullback)
                      ? "    p.check_shared_inputs(check ? 1 : 0);  // this call's\n"
                  : any.empty() ? "    (void)check;  // no shared input\n"
                                : "    (void)check;\n    p.check_shared_inputs(0);  // the sizes: the forward's\n";
  if (any.empty()) {
    s += "    (void)sizes;  // a package for one size\n";
  } else {
    std::vector<std::string> values;
    for (size_t k = 0; k < any.size(); ++k) values.push_back(fmt::format("sizes[{}]", k));
    s += fmt::format("    p.set_sizes({}::Sizes{{{}}});\n", type, fmt::join(values, ", "));
  }
  const std::vector<Value> ins = inputs_of(l, cls), outs = outputs_of(l, cls);
  for (size_t i = 0; i < ins.size(); ++i)
    s += fmt::format("    p.set_{}(static_cast<const {}*>(in[{}]));\n", ins[i].api, cpp_type(ins[i].dtype), at[i]);
  for (size_t i = 0; i < outs.size(); ++i)
    s += fmt::format("    p.set_{}_out(static_cast<{}*>(out[{}]));\n", outs[i].api, cpp_type(outs[i].dtype), i);
  return s + "    p.run();\n  });\n}\n";
}

// One op's entry, with a C interface: 0, or 1 with what went wrong in error[0..size).
// CPU: the class on the process groups of `groups`; CUDA: the cuda class on PyTorch's
// stream and the process group's NCCL communicator. `type` is the class's alias.
std::string entry(const Lowered& l, const std::string& name, const std::string& cls, const char* type, const char* fn,
                  Target target, const std::vector<size_t>& at, const std::vector<AnySize>& any) {
  std::string s;
  if (target == Target::Cuda) {
    s = fmt::format(
        "int {0}_op_{1}(void* comm, int64_t stream, int device, int check, const int64_t* sizes,\n"
        "{2:>{3}}const void* const* in, void* const* out, char* error, int64_t error_size) {{\n"
        "  return gradc::c_call(error, error_size, [&] {{\n"
        "    gradc::OnDevice on(device);\n"
        "    gradc::Held<{4}> held = gradc::torch_cuda_program<{4}>(comm, stream);  // until the call ends\n"
        "    {4}& p = held.program;\n",
        name, fn, "", name.size() + std::string_view(fn).size() + 9, type);
  } else {
    std::vector<std::string> splits;
    for (const std::string& sp : split_names(l)) splits.push_back(fmt::format("\"{}\"", sp));
    s = fmt::format(
        "int {0}_op_{1}(const void* const* in, void* const* out, const char* groups, int check,\n"
        "{2:>{3}}const int64_t* sizes, char* error, int64_t error_size) {{\n"
        "  return gradc::c_call(error, error_size, [&] {{\n"
        "    gradc::Held<{4}> held = gradc::torch_program<{4}>(groups, {{{5}}});  // until the call ends\n"
        "    {4}& p = held.program;\n",
        name, fn, "", name.size() + std::string_view(fn).size() + 9, type, fmt::join(splits, ", "));
  }
  return s + run_class(l, cls, type, at, any, std::string_view(fn) == "pullback");
}

// NAME_ops.cpp or NAME_cuda.cu: the ops __init__.py calls through ctypes, with no
// PyTorch or Python header (the CPU ops' collectives are in gradc_torch.cpp).
std::string ops_source(const Package& p, const std::string& source, Target target) {
  const std::string& name = p.name;
  const bool grad = !p.pb.outputs.empty(), cuda = target == Target::Cuda;
  std::string s = fmt::format(
      "// Generated by gradc from {0}: the package {1}'s {2} (gradc emit\n"
      "// --target=torch), which its __init__.py calls through ctypes.\n"
      "// {1}_op_forward runs the class {1}: the program's outputs, then the values the\n"
      "// pullback reads.{3}\n"
      "// Each takes the addresses of the inputs in declaration order (nullptr: the input's\n"
      "// default) and of the outputs, which __init__.py checked and allocated, {4}.\n"
      "// And the call's sizes, which a package for any size reads.\n"
      "#include \"{1}.h\"\n{5}#include \"{6}\"\n\n"
      "// The program's class{7} (`class` names {8} where a function of the C library has {9} name).\n"
      "using Forward = class {1};\n{10}\nextern \"C\" {{\n\n",
      source, name, cuda ? "CUDA ops, for nvcc" : "ops",
      grad ? fmt::format(" {0}_op_pullback runs {0}_pullback: from the program's inputs,\n"
                         "// its float outputs' cotangents and the saved values, the float inputs' gradients.",
                         name)
           : " No pullback: nothing in the program is differentiable.",
      cuda ? "the process\n// group's NCCL communicator (NAME_op_nccl_comm) and PyTorch's current stream"
           : "and the op's\n// process groups (gradc_torch.h: torch_program)",
      grad ? fmt::format("#include \"{}_pullback.h\"\n", name) : "", cuda ? "gradc_torch_cuda.h" : "gradc_torch.h",
      grad ? "es" : "", grad ? "them" : "it", grad ? "a" : "its",
      grad ? fmt::format("using Pullback = class {}_pullback;\n", name) : "");
  if (cuda)
    s += fmt::format(
        "int {0}_op_nccl_id(char* id, char* error, int64_t error_size) {{\n"
        "  return gradc::c_call(error, error_size, [&] {{ gradc::torch_nccl_id(id); }});\n}}\n\n"
        "int {0}_op_nccl_comm(const char* id, int rank, int size, int device, void** comm, char* error,\n"
        "{1:>{2}}int64_t error_size) {{\n"
        "  return gradc::c_call(error, error_size, [&] {{ *comm = gradc::torch_nccl_comm(id, rank, size, device); "
        "}});\n}}\n\n",
        name, "", name.size() + 18);
  else
    s += fmt::format(
        "// The runtime library's functions (gradc_torch.cpp's gradc_torch_runtime), which\n"
        "// __init__.py hands over once it has loaded both libraries.\n"
        "void {0}_op_bind(const void* runtime) {{\n"
        "  gradc::torch_runtime() = *static_cast<const gradc::TorchRuntime*>(runtime);\n}}\n\n",
        name);
  s += entry(p.fwd, name, name, "Forward", "forward", target, p.fwd_at, p.any);
  if (grad)
    s += fmt::format("\n{}", entry(p.pb, name, name + "_pullback", "Pullback", "pullback", target, p.pb_at, p.any));
  return s + "\n}  // extern \"C\"\n";
}

std::string fake_dims(const std::vector<Value>& vs) {
  std::vector<std::string> out;
  for (const Value& v : vs) out.push_back(fmt::format("(\"{}\", {})", dtype_name(v.dtype), py_list(v.shape)));
  return fmt::format("[{}]", fmt::join(out, ", "));
}

// The ops, their fake implementations and derivative, and the function users call. Each
// op takes its tensors as one list (Tensor?[]) and returns one (Tensor[]): PyTorch's
// schemas take at most 64 arguments, and a program may have hundreds of parameters.
std::string python_ops(const Package& p) {
  const std::string& name = p.name;
  const std::vector<Value>&ins = p.ins, &outs = p.outs;
  std::vector<std::string> args;
  for (const Value& v : ins) args.push_back(v.py);
  const std::string a = fmt::format("{}", fmt::join(args, ", "));
  std::string s = fmt::format(
      "@torch.library.custom_op(\"gradc_{0}::forward\", mutates_args=())\n"
      "def _forward(args: List[Optional[Tensor]], groups: str) -> List[Tensor]:\n"
      "    \"\"\"The program's inputs, in order (None: the default) -> its outputs, then the saved values.\"\"\"\n"
      "    return _run(\"forward\", args, groups, _FORWARD)\n\n\n"
      "@_forward.register_fake\n"
      "def _(args, groups):\n"
      "    return _empty(args, _FORWARD)\n\n\n",
      name);
  if (!p.pb.outputs.empty()) {
    s += fmt::format(
        "@torch.library.custom_op(\"gradc_{0}::pullback\", mutates_args=())\n"
        "def _pullback(args: List[Optional[Tensor]], groups: str) -> List[Tensor]:\n"
        "    \"\"\"The inputs, the float outputs' cotangents, the saved values -> the float inputs' "
        "gradients.\"\"\"\n"
        "    return _run(\"pullback\", args, groups, _PULLBACK)\n\n\n"
        "@_pullback.register_fake\n"
        "def _(args, groups):\n"
        "    return _empty(args, _PULLBACK)\n\n\n"
        "torch.library.register_autograd(\"gradc_{0}::forward\", _derivative, setup_context=_setup_context)\n"
        "torch.library.register_autograd(\"gradc_{0}::pullback\", _no_double_backward, "
        "setup_context=_no_context)\n\n\n",
        name);
  }
  std::vector<std::string> defaults;
  for (const Value& v : ins) defaults.push_back(v.py + "=None");
  std::string doc;
  for (const Value& v : ins)
    doc += fmt::format("      {}: {}[{}]{}\n", v.py, dtype_name(v.dtype), dims(v.shape),
                       v.has_default ? " (has a default)" : "");
  std::string odoc;
  for (const Value& v : outs) odoc += fmt::format("      {}: {}[{}]\n", v.name, dtype_name(v.dtype), dims(v.shape));
  s += fmt::format(
      "def {0}({1}{2}*, group=None, mesh=None):\n"
      "    \"\"\"The program's outputs{3}, from its inputs (positional in this order, or by name):\n{4}"
      "    Outputs:\n{5}"
      "    group: the process group (default: the default group); mesh: the DeviceMesh of a\n"
      "    program with a mesh.\n"
      "    \"\"\"\n"
      "    args = [{6}]\n"
      "    sizes = _check(args)\n"
      "    out = _call(args, _groups(group, mesh), sizes)\n"
      "    return {7}\n",
      name, fmt::join(defaults, ", "), ins.empty() ? "" : ", ", outs.size() > 1 ? " (a tuple)" : "", doc, odoc, a,
      outs.size() == 1 ? "out[0]" : fmt::format("tuple(out[:{}])", outs.size()));
  return s;
}

std::string py_values(const std::vector<Value>& vs, bool input) {
  std::vector<std::string> out;
  for (const Value& v : vs)
    out.push_back(input ? fmt::format("(\"{}\", \"{}\", {}, {})", v.name, dtype_name(v.dtype), py_list(v.shape),
                                      v.has_default ? "True" : "False")
                        : fmt::format("(\"{}\", \"{}\", {})", v.name, dtype_name(v.dtype), py_list(v.shape)));
  return fmt::format("[{}]", fmt::join(out, ", "));
}

}  // namespace

bool python_keyword(const std::string& name) {
  return std::find(std::begin(kPythonKeywords), std::end(kPythonKeywords), name) != std::end(kPythonKeywords);
}

std::string package_name(std::string name) {
  // the modules the package imports and the names it binds: the op's function, of the
  // package's name, would hide them (its own names start with _, which a program's
  // name does not: class_name)
  const char* imported[] = {"torch", "os",   "hashlib",  "typing", "concurrent",  "ctypes",
                            "dist",  "List", "Optional", "Tensor", "check_shared"};
  while (python_keyword(name) || std::find(std::begin(imported), std::end(imported), name) != std::end(imported))
    name += "_";
  return name;
}

// The gradient's convention in the package's words (__init__.py): the data-parallel
// axes, and per float output the axes along which it is one loss (its cotangent's
// shared axes in the pullback, passes/pullback.cpp).
std::string one_loss(const Lowered& pb) {
  std::vector<std::string> out;
  const Graph& g = pb.graph;
  for (const auto& [name, b] : pb.inputs) {
    const Node& n = g[pb.buffers[size_t(b)].value];
    if (const Attr* y = n.attrs.find("cotangent")) {
      std::vector<std::string> axes;
      for (int k : shared_axes(g, n)) axes.push_back(fmt::format("\"{}\"", axis_name(g, k)));
      out.push_back(fmt::format("\"{}\": [{}]", y->s, fmt::join(axes, ", ")));
    }
  }
  return fmt::format("{{{}}}", fmt::join(out, ", "));
}

std::vector<GeneratedFile> generate_torch(const Lowered& fwd, const Lowered& pb, size_t outputs, uint8_t data_parallel,
                                          const std::set<std::string>& grads, const std::string& name,
                                          const std::string& source_path, const std::vector<AnySize>& any) {
  const Graph& g = fwd.graph;
  Package p(fwd, pb, outputs, name);
  p.any = any;
  std::vector<GeneratedFile> out;
  // The program's and the pullback's classes for `target` into `dir`, with the runtime
  // headers they include (each once; not an executable's main and .npy files).
  auto add_classes = [&](Target target, const std::string& dir) {
    const char* source = target == Target::Cuda ? ".cu" : ".cpp";
    std::set<std::string> written;
    auto add = [&](const std::vector<GeneratedFile>& files) {
      for (const GeneratedFile& f : files)
        if ((f.name.ends_with(".h") || f.name.ends_with(source)) && f.name != "gradc_main.h" &&
            f.name != "gradc_npy.h" && written.insert(f.name).second)
          out.push_back({dir + f.name, f.text});
    };
    add(generate(fwd, target, name, source_path, any));
    if (!pb.outputs.empty()) add(generate(pb, target, name + "_pullback", source_path, any));
  };
  add_classes(Target::Cpu, name + "/csrc/");
  out.push_back({name + "/csrc/gradc_torch.h", embedded_file("gradc_torch.h")});
  out.push_back({name + "/csrc/gradc_torch.cpp", embedded_file("gradc_torch.cpp")});
  out.push_back({name + "/csrc/aten/ATen/ATen.h", embedded_file("gradc_torch_aten.h")});
  out.push_back({name + "/csrc/" + name + "_ops.cpp", ops_source(p, source_path, Target::Cpu)});
  // csrc/cuda/: the same classes for CUDA tensors (the cuda target's), built on first use
  add_classes(Target::Cuda, name + "/csrc/cuda/");
  out.push_back({name + "/csrc/cuda/gradc_torch_cuda.h", embedded_file("gradc_torch_cuda.h")});
  out.push_back({name + "/csrc/cuda/" + name + "_cuda.cu", ops_source(p, source_path, Target::Cuda)});

  // The sets of axes either class splits the world into, each once.
  std::vector<std::string> splits = split_names(fwd);
  for (const std::string& s : split_names(pb))
    if (std::find(splits.begin(), splits.end(), s) == splits.end()) splits.push_back(s);
  std::vector<std::string> split_lists, mesh;
  for (const std::string& s : splits) {
    std::string list;
    for (size_t b = 0, e; b <= s.size(); b = e + 1) {
      e = s.find('+', b);
      if (e == std::string::npos) e = s.size();
      list += fmt::format("\"{}\", ", s.substr(b, e - b));
    }
    const bool one = s.find('+') == std::string::npos;  // ("dp",) or ("tp", "dp")
    split_lists.push_back(fmt::format("({})", list.substr(0, list.size() - (one ? 1 : 2))));
  }
  for (size_t k = 0; k < g.mesh.axes.size(); ++k)
    mesh.push_back(fmt::format("(\"{}\", {})", g.mesh.axes[k], g.mesh.sizes[k]));
  const std::vector<Value>&ins = p.ins, &outs = p.outs;
  std::vector<std::string> call_args;
  for (const Value& v : ins) call_args.push_back(v.py);
  std::vector<std::string> results;
  for (const Value& v : outs) results.push_back(v.name);
  const std::string call = fmt::format("{} = {}.{}({}{})", fmt::join(results, ", "), name, name,
                                       fmt::join(call_args, ", "), g.mesh.axes.empty() ? "" : ", mesh=mesh");
  // the DeviceMesh a mesh program takes, as the docstring shows it
  std::string sizes, axes;
  for (size_t k = 0; k < g.mesh.axes.size(); ++k) {
    sizes += fmt::format("{}{}", k ? ", " : "", g.mesh.sizes[k]);
    axes += fmt::format("{}\"{}\"", k ? ", " : "", g.mesh.axes[k]);
  }
  if (g.mesh.axes.size() == 1) sizes += ",", axes += ",";
  const std::string mesh_note =
      g.mesh.axes.empty() ? ""
                          : fmt::format(
                                "\nThe program has a mesh: mesh = torch.distributed.device_mesh.init_device_mesh("
                                "\"cpu\", ({}), mesh_dim_names=({})).\n",
                                sizes, axes);
  std::vector<std::string> dp_axes;
  for (int k = 0; k < num_axes(g); ++k)
    if (data_parallel & (1u << k)) dp_axes.push_back(fmt::format("\"{}\"", axis_name(g, k)));
  const std::string dp_list = fmt::format("[{}]", fmt::join(dp_axes, ", "));
  std::vector<std::string> size_items;
  for (const auto& [size, value] : g.sizes)
    if (std::none_of(any.begin(), any.end(), [&](const AnySize& a) { return a.name == size; }))
      size_items.push_back(fmt::format("\"{}\": {}", size, value));
  // A package for any size: each size's default, the inputs (index, axis) that have it
  // as a dimension, the multiple it must be and its least value (@M_B@ and @LEAST_B@,
  // filled in once fitted); the shapes as functions of the sizes.
  std::vector<std::string> any_items, params, defaults;
  for (const AnySize& a : any) {
    std::vector<std::string> from;
    for (const auto& [input, axis] : a.from)
      for (size_t i = 0; i < ins.size(); ++i)
        if (ins[i].name == input) from.push_back(fmt::format("({}, {})", i, axis));
    any_items.push_back(fmt::format("\"{0}\": ({1}, [{2}], @M_{0}@, @LEAST_{0}@)", a.name, a.value,
                                    fmt::format("{}", fmt::join(from, ", "))));
    params.push_back(a.name);
    defaults.push_back(std::to_string(std::max<int64_t>(a.value, 1)));
  }
  // the float inputs the pullback gives gradients of (in order), and the others
  std::vector<std::string> grad_in, no_grad;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].dtype != DType::I32 && !pb.outputs.empty())
      (grads.empty() || grads.count(ins[i].name) ? grad_in : no_grad).push_back(std::to_string(i));
  std::vector<Value> forward_results = outs;  // the outputs, then the saved values
  forward_results.insert(forward_results.end(), p.saved.begin(), p.saved.end());
  const std::string tables = fmt::format(
      "def _tables({0}):\n"
      "    \"\"\"{1}each input's name, gradc dtype, shape and whether it has a default; each\n"
      "    output's name, dtype and shape; the dtypes and shapes of the forward op's results (the\n"
      "    outputs, then the values the pullback reads) and of the pullback op's (the float\n"
      "    inputs' gradients, from the inputs, the float outputs' cotangents and the saved values).\"\"\"\n"
      "    return ({2},\n            {3},\n            {4},\n            {5})\n\n\n"
      "_INPUTS, _OUTPUTS, _FORWARD_OUT, _PULLBACK_OUT = _tables({6})\n"
      "_FORWARD, _PULLBACK = 2, 3  # their places in _tables' result",
      fmt::join(params, ", "), any.empty() ? "The tables: " : "At the sizes: ", py_values(ins, true),
      py_values(outs, false), fake_dims(forward_results), fake_dims(p.grads), fmt::join(defaults, ", "));
  out.push_back({name + "/__init__.py",
                 fill(embedded_file("torch_init.py.in"), {{"NAME", name},
                                                          {"SOURCE", source_path},
                                                          {"CALL", call},
                                                          {"MESH_NOTE", mesh_note},
                                                          {"WORLD", std::to_string(g.world)},
                                                          {"SIZES", fmt::format("{{{}}}", fmt::join(size_items, ", "))},
                                                          {"MESH", fmt::format("[{}]", fmt::join(mesh, ", "))},
                                                          {"SPLITS", fmt::format("[{}]", fmt::join(split_lists, ", "))},
                                                          {"ANY", fmt::format("{{{}}}", fmt::join(any_items, ", "))},
                                                          {"TABLES", tables},
                                                          {"DATA_PARALLEL", pb.outputs.empty() ? "[]" : dp_list},
                                                          {"ONE_LOSS", pb.outputs.empty() ? "{}" : one_loss(pb)},
                                                          {"GRAD_IN", fmt::format("[{}]", fmt::join(grad_in, ", "))},
                                                          {"NO_GRAD", fmt::format("[{}]", fmt::join(no_grad, ", "))},
                                                          {"OPS", python_ops(p)}})});
  out.push_back(
      {"pyproject.toml",
       fmt::format("# Generated by gradc from {1}: `pip install .` installs the package {0}, which\n"
                   "# compiles its C++ on first import (torch.utils.cpp_extension).\n"
                   "[build-system]\nrequires = [\"setuptools>=61\"]\nbuild-backend = \"setuptools.build_meta\"\n\n"
                   "[project]\nname = \"{0}\"\nversion = \"0.2\"\n"
                   "description = \"The gradc program {1} as a PyTorch op\"\n"
                   "requires-python = \">=3.9\"\ndependencies = [\"torch>=2.4\"]\n\n"
                   "[tool.setuptools]\npackages = [\"{0}\"]\n\n"
                   "[tool.setuptools.package-data]\n{0} = [\"csrc/*\", \"csrc/aten/ATen/*\", \"csrc/cuda/*\"]\n",
                   name, source_path)});
  return out;
}

}  // namespace gradc
