// NumPy's .npy format: version 1.0 written (little-endian f32, f64, f16, i32, and bf16
// as the 2-byte void '<V2' that ml_dtypes.bfloat16 saves; C order); versions 1.0 to 3.0
// read, either byte order, C or Fortran order. Float data are read as f32, f64 or f16,
// '<V2' as bf16; integer and bool data of any width as i32 when every value fits (else
// an error naming the first that does not).
#pragma once
#include <string>

#include "runtime/tensor.h"

namespace gradc {

// Reads `path`; a bad file is a UserError naming the path and what is wrong.
Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& path_for_errors);
std::string npy_bytes(const Tensor& t);

}  // namespace gradc
