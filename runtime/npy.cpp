#include "runtime/npy.h"

#include "runtime/npy_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "support/diag.h"
#include "support/file.h"

namespace gradc {

Tensor parse_npy(const std::string& s, const std::string& path) {
  npy::Array a;
  try {
    a = npy::parse(s, path);
  } catch (const std::runtime_error& e) {
    throw UserError({}, e.what());
  }
  const DType dt = a.kind == 'f'   ? DType::F32
                   : a.kind == 'd' ? DType::F64
                   : a.kind == 'h' ? DType::F16
                   : a.kind == 'B' ? DType::BF16
                                   : DType::I32;
  Tensor x = Tensor::empty(Type{dt, a.shape});
  std::memcpy(x.buf.get(), a.data.data(), a.data.size());
  return x;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

std::string npy_bytes(const Tensor& t) {
  // bf16 as ml_dtypes.bfloat16 saves it: 2-byte void (np.load(f).view(ml_dtypes.bfloat16))
  const char* descr = t.dtype() == DType::F32    ? "<f4"
                      : t.dtype() == DType::F64  ? "<f8"
                      : t.dtype() == DType::F16  ? "<f2"
                      : t.dtype() == DType::BF16 ? "<V2"
                                                 : "<i4";
  std::string shape = fmt::format("{}", fmt::join(t.shape(), ", "));
  if (t.shape().size() == 1) shape += ",";  // Python's one-element tuple
  std::string h = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  out += h;
  out.append(reinterpret_cast<const char*>(t.buf.get()), size_t(t.size()) * size_t(dtype_size(t.dtype())));
  return out;
}

}  // namespace gradc
