# Writes OUT, a C++ file defining gradc::runtime_header(), main_header(),
# scalar_header(), npy_header() and cmake_kernels() from the files' text (cmake -P, with SRC the source folder).
set(out "// Generated from the headers themselves by codegen/embed.cmake.\n#include \"codegen/runtime_files.h\"\n\nnamespace gradc {\n")
foreach(pair "runtime_header=codegen/runtime/gradc_runtime.h" "main_header=codegen/runtime/gradc_main.h"
             "scalar_header=ir/scalar.h" "npy_header=runtime/npy_format.h" "cmake_kernels=cmake/gradc_kernels.cmake")
  string(REPLACE "=" ";" parts "${pair}")
  list(GET parts 0 fn)
  list(GET parts 1 path)
  file(READ "${SRC}/${path}" text)
  string(APPEND out "const std::string& ${fn}() {\n  static const std::string text = R\"gradc_embed(${text})gradc_embed\";\n  return text;\n}\n")
endforeach()
string(APPEND out "}  // namespace gradc\n")
file(WRITE "${OUT}.tmp" "${out}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
