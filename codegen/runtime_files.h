// The headers gradc writes out beside generated code, embedded in gradc when it
// is built (codegen/embed.cmake) from the files themselves: codegen/runtime/*.h
// ir/scalar.h and runtime/npy_format.h, so there is one copy of each.
#pragma once
#include <string>

namespace gradc {

const std::string& runtime_header();  // codegen/runtime/gradc_runtime.h
const std::string& main_header();     // codegen/runtime/gradc_main.h: what an executable's main uses
const std::string& scalar_header();   // ir/scalar.h
const std::string& npy_header();      // runtime/npy_format.h: reading .npy files (gradc_npy.h)
const std::string& cmake_kernels();   // cmake/gradc_kernels.cmake: the CPU library's CMake function

}  // namespace gradc
