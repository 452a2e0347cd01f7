// The element types, one enum for the IR and for the runtime of generated code
// (gradc emit writes this file out as gradc_dtype.h): self-contained, C++17.
#pragma once
#include <stdint.h>

namespace gradc {

enum class DType : uint8_t { I32, F32, F64 };  // in promotion order (ir/types.h: promote)
inline int64_t dtype_size(DType t) { return t == DType::F64 ? 8 : 4; }

}  // namespace gradc
