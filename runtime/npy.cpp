#include "runtime/npy.h"

#include <fmt/format.h>

#include <cctype>
#include <cstring>

#include "ir/diag.h"

namespace gradc {

namespace {
[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw UserError({}, fmt::format("{}: {}", path, why));
}

// Header text as it may be shown in a message: bytes outside printable ASCII as \xNN.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c >= 0x20 && c < 0x7f) ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
  return out;
}

// The value of `key` in the header dict: the text after "'key':" up to the next top-level comma.
std::string dict_value(const std::string& h, const std::string& key, const std::string& path) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) bad(path, fmt::format("header has no '{}'", key));
  size_t colon = h.find(':', k);
  if (colon == std::string::npos) bad(path, "malformed header");
  size_t i = colon + 1, depth = 0, start = i;
  for (; i < h.size(); ++i) {
    char c = h[i];
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if ((c == ',' || c == '}') && depth == 0) break;
  }
  std::string v = h.substr(start, i - start);
  size_t a = v.find_first_not_of(" "), b = v.find_last_not_of(" ");
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}
}  // namespace

Tensor parse_npy(const std::string& s, const std::string& path) {
  if (s.size() < 10 || std::memcmp(s.data(), "\x93NUMPY", 6) != 0) bad(path, "not a .npy file");
  int major = static_cast<unsigned char>(s[6]);
  size_t hlen, hstart;
  if (major == 1) {
    hlen = static_cast<unsigned char>(s[8]) | size_t(static_cast<unsigned char>(s[9])) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (s.size() < 12) bad(path, "truncated header");
    hlen = 0;
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(s[size_t(8 + i)])) << (8 * i);
    hstart = 12;
  } else {
    bad(path, fmt::format("unsupported .npy version {}", major));
  }
  if (s.size() < hstart + hlen) bad(path, "truncated header");
  std::string h = s.substr(hstart, hlen);
  std::string descr = dict_value(h, "descr", path);
  Type t;
  if (descr == "'<f4'") t.dtype = DType::F32;
  else if (descr == "'<f8'") t.dtype = DType::F64;
  else if (descr == "'<i4'") t.dtype = DType::I32;
  else bad(path, fmt::format("unsupported dtype {} (gradc reads <f4, <f8 and <i4)", printable(descr)));
  if (dict_value(h, "fortran_order", path) != "False") bad(path, "Fortran-order arrays are not supported");
  std::string shape = dict_value(h, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') bad(path, "malformed shape in header");
  std::string dims = shape.substr(1, shape.size() - 2);
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i == dims.size()) break;
    size_t j = i;
    while (j < dims.size() && std::isdigit(static_cast<unsigned char>(dims[j]))) ++j;
    if (j == i || j - i > 12) bad(path, "malformed shape in header");
    t.shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
  }
  if (too_large(t.shape)) bad(path, fmt::format("shape {} is too large", shape_str(t.shape)));
  size_t need = size_t(t.size()) * size_t(dtype_size(t.dtype));
  size_t have = s.size() - hstart - hlen;
  if (have < need) bad(path, fmt::format("truncated: {} needs {} bytes of data, the file has {}", type_str(t), need, have));
  if (have > need) bad(path, fmt::format("{} extra bytes after the data of {}", have - need, type_str(t)));
  Tensor x = Tensor::empty(t);
  std::memcpy(x.buf.get(), s.data() + hstart + hlen, need);
  return x;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

std::string npy_bytes(const Tensor& t) {
  const char* descr = t.dtype() == DType::F32 ? "<f4" : t.dtype() == DType::F64 ? "<f8" : "<i4";
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
