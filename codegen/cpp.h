// The C++ code generator: an emitter base with a cpu and a cuda emitter that
// override only what differs (codegen/cpp.cpp). It reads the lowered program
// (ir/lowered.h) and nothing above it. Every kernel body is a functor whose
// operator() both nvcc and the host compiler compile; what differs between
// targets at run time is in the runtime's files written out with the code
// (codegen/runtime/: gradc_common.h, then gradc_cpu.h, gradc_threads.h and
// gradc_mpi.h, or gradc_cuda.h and gradc_nccl.h), and the CMake and main() text
// are templates (codegen/templates/).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/lowered.h"

namespace gradc {

enum class Target { Cpu, Cuda, Torch };

// Whether a name would clash with C++ in generated code (a keyword, a macro or a name
// of the headers it includes): a program's class name that does takes a trailing _.
bool cpp_reserved(const std::string& name);
// A program's name (--name, else its file's stem) as its class's and files' names: a C++
// identifier (other characters are _, a leading digit or _ takes a p) with a trailing _
// while it is cpp_reserved, one of the class's own members (run, world, sizes, ...) or
// the stem of a C header (time.dg's class is time_, in time_.h).
std::string class_name(std::string name);

// Each input's and output's name in the class's API (set_x, y(), x_shape), by its name
// in the program: the name itself, or with a trailing _ where it would clash.
std::map<std::string, std::string> api_names(const Lowered& l, const std::string& cls);
// A mesh program's group communicators, each a set of axes (in its order) that a
// collective runs over or an input is shared along, short of the whole world: the
// order in which the class splits the world (Comm::split) and its Groups' members.
std::vector<std::vector<int>> mesh_group_axes(const Lowered& l);

// How generated code calls a collective, gradc::FN(comm, in, out, ARGS..., "where"), or
// a Loop kernel, gradc::FN(stream, ARGS..., operands..., out): a function every
// target's runtime headers define (codegen/runtime/). Each op's block in ops/ gives its call.
struct CallArg {
  enum Kind {
    Count,        // the operand's elements
    Blocks,       // gradc::Blocks of the operand along the attribute `key`
    GroupBlocks,  // the same, each block 1/N of that axis (N: the group's size)
    DType,        // the element type
    Reduction,    // gradc::ROp of the node's op=
    Int,          // the attribute `key` (root=)
    Axis,         // the tensor axis `key`, counted from the front
    Shape,        // a static array of the operand's shape, then its rank
    Pairs,        // a static array of pairs= flattened, then their number
    // A Loop kernel's layout around the axis `key`, the result as [outer, n, inner]:
    Outer,     // outer
    Len,       // n
    SrcLen,    // the length along the axis of its last operand (scatter_add's src)
    Inner,     // inner
    PerSlice,  // 1 when the second operand is one index per slice along the axis (i32[n]
               // beside a larger last operand), else 0
  } kind;
  const char* key = "";
};
// scatter_add's indices: one per slice along the axis (i32[m], index_add's) rather
// than one per element of src.
inline bool one_index_per_slice(const Shape& indices, const Shape& src) {
  return indices != src && indices.size() == 1;
}
struct RuntimeCall {
  const char* fn = nullptr;
  std::vector<CallArg> args;
};
OpTable<RuntimeCall>& runtime_calls();

// Fills in a template (codegen/templates/): each @KEY@ by its value.
std::string fill(std::string text, const std::map<std::string, std::string>& values);

struct GeneratedFile {
  std::string name;  // relative to the output folder
  std::string text;
};
// Writes `files` into `dir` (created, with their subfolders), all or none
// (write_files_atomic); a UserError that names what cannot be written.
void write_sources(const std::string& dir, const std::vector<GeneratedFile>& files);

// The sources of `gradc emit`: NAME.h (the class), NAME.cpp or NAME.cu, the
// runtime headers and a CMakeLists.txt defining the library NAME.
// A size chosen at run time (gradc emit --size B=any): its name, its default (0 for
// none), and the inputs whose declared shape has it as a dimension (input x : f32[B, 16]
// gives {x, 0}), from whose files an executable takes it.
struct AnySize {
  std::string name;
  int64_t value = 0;
  std::vector<std::pair<std::string, int>> from;
};
// With `any`, the class's any-size form, as fit_any_size reads it (codegen/any_size.h):
// the code at these sizes with the sizes in the class and its functors, the workspace
// planned at run time.
std::vector<GeneratedFile> generate(const Lowered& l, Target target, const std::string& name,
                                    const std::string& source_path, const std::vector<AnySize>& any = {});
// The standalone executable's main (gradc build), beside generate()'s files.
GeneratedFile generate_main(const Lowered& l, Target target, const std::string& name,
                            const std::vector<AnySize>& any = {});
// Whether the program has a shared input (its class then checks it: check_shared_inputs).
bool has_shared_input(const Lowered& l);
// The torch target (codegen/torch.cpp): the Python package NAME/ (docs/torch.md),
// from the program's two halves (passes/autodiff.h: linearize): forward, whose first
// `outputs` outputs are the program's, and pullback, which has no outputs when nothing
// is differentiable; `data_parallel` the mask of the axes the framework reduces
// gradients over (emit --data-parallel; linearize's); `grads` the float inputs whose
// gradients the pullback gives (emit --grad; empty: all of them).
// With `any`, the package's any-size form, as fit_any_size reads it:
// its classes' any-size form, the ops taking the sizes from the tensors.
std::vector<GeneratedFile> generate_torch(const Lowered& forward, const Lowered& pullback, size_t outputs,
                                          uint8_t data_parallel, const std::set<std::string>& grads,
                                          const std::string& name, const std::string& source_path,
                                          const std::vector<AnySize>& any = {});
// Whether a name is a Python keyword (a package or parameter named so takes a trailing _).
bool python_keyword(const std::string& name);
// A program's name as the torch target's package: with a trailing _ while it is a Python
// keyword or a name the package imports or binds (torch.dg is the package torch_, dist.dg dist_).
std::string package_name(std::string name);
// An element's C++ type in generated code: float, double, int32_t, gradc::bfloat16 or
// gradc::float16 (ir/dtype.h: the bits, converted only by name).
const char* cpp_type(DType t);
// The native backend's entry (cpu target): extern "C" gradc_native_run, which
// gradc run calls in the shared library built from it and generate()'s files.
GeneratedFile generate_native_entry(const Lowered& l, const std::string& name);

}  // namespace gradc
