// NumPy's .npy format (version 1.0 written; 1.0, 2.0 and 3.0 read), for
// little-endian f32 (<f4), f64 (<f8) and i32 (<i4) arrays in C order.
#pragma once
#include <string>

#include "runtime/tensor.h"

namespace gradc {

// Reads `path`; a bad file is a UserError naming the path and what is wrong.
Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& path_for_errors);
std::string npy_bytes(const Tensor& t);

}  // namespace gradc
