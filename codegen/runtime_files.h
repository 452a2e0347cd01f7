// The files gradc writes beside generated code (the runtime headers, ir/dtype.h,
// ir/scalar.h, runtime/npy_format.h, cmake/gradc_kernels.cmake) and the templates of
// the text it fills in (codegen/templates/), embedded in gradc when it is built
// (codegen/embed.cmake) from the files themselves, so there is one copy of each.
#pragma once
#include <string>

namespace gradc {

// The file by the name gradc writes it as (gradc_runtime.h, gradc_cpu.h, ...), or a
// template by its name (CMakeLists.cpu.txt).
const std::string& embedded_file(const std::string& name);

}  // namespace gradc
