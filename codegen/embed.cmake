# Writes OUT, a C++ file defining gradc::embedded_file(NAME) from the files' text
# (cmake -P, with SRC the source folder): each file gradc writes beside generated code,
# under the name it is written as, and the templates of the text it fills in. One copy
# of each: the file itself.
set(files
    "gradc_runtime.h=codegen/runtime/gradc_runtime.h"
    "gradc_common.h=codegen/runtime/gradc_common.h"
    "gradc_cpu.h=codegen/runtime/gradc_cpu.h"
    "gradc_threads.h=codegen/runtime/gradc_threads.h"
    "gradc_mpi.h=codegen/runtime/gradc_mpi.h"
    "gradc_cuda.h=codegen/runtime/gradc_cuda.h"
    "gradc_nccl.h=codegen/runtime/gradc_nccl.h"
    "gradc_torch.h=codegen/runtime/gradc_torch.h"
    "gradc_torch.cpp=codegen/runtime/gradc_torch.cpp"
    "gradc_runtime_object.cpp=codegen/runtime/gradc_runtime_object.cpp"
    "gradc_torch_cuda.h=codegen/runtime/gradc_torch_cuda.h"
    "gradc_torch_aten.h=codegen/runtime/gradc_torch_aten.h"
    "torch_init.py.in=codegen/templates/torch_init.py.in"
    "gradc_main.h=codegen/runtime/gradc_main.h"
    "gradc_dtype.h=ir/dtype.h"
    "gradc_scalar.h=ir/scalar.h"
    "gradc_npy.h=runtime/npy_format.h"
    "gradc_plan.h=runtime/plan.h"
    "gradc_blas.h=runtime/blas_kernels.h"
    "gradc_kernels.cmake=cmake/gradc_kernels.cmake"
    "CMakeLists.cpu.txt=codegen/templates/CMakeLists.cpu.txt"
    "CMakeLists.cuda.txt=codegen/templates/CMakeLists.cuda.txt"
    "main.cpu.cpp.in=codegen/templates/main.cpu.cpp.in"
    "main.cuda.cu.in=codegen/templates/main.cuda.cu.in"
    "native.cpp.in=codegen/templates/native.cpp.in")
set(out "// Generated from the files themselves by codegen/embed.cmake.\n#include <map>\n\n#include \"codegen/runtime_files.h\"\n#include \"support/diag.h\"\n\nnamespace gradc {\n\n")
string(APPEND out "const std::string& embedded_file(const std::string& name) {\n  static const std::map<std::string, std::string> files = {\n")
foreach(pair ${files})
  string(REPLACE "=" ";" parts "${pair}")
  list(GET parts 0 name)
  list(GET parts 1 path)
  file(READ "${SRC}/${path}" text)
  string(APPEND out "      {\"${name}\", R\"gradc_embed(${text})gradc_embed\"},\n")
endforeach()
string(APPEND out "  };\n  auto it = files.find(name);\n  GRADC_ASSERT(it != files.end(), \"no embedded file {}\", name);\n  return it->second;\n}\n\n}  // namespace gradc\n")
file(WRITE "${OUT}.tmp" "${out}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
