#include "runtime/npy.h"

#include <fmt/format.h>

#include <algorithm>
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

// The file's element type, from its descr ('<f4', '>i8', '|b1', ...).
struct Elem {
  char kind;          // f, i, u or b
  int size;           // bytes
  bool swap = false;  // big-endian on this little-endian host
  std::string name;   // as NumPy names it: float32, int64, bool, ...
};
Elem parse_descr(const std::string& descr, const std::string& path) {
  if (descr.size() != 5 || descr.front() != '\'' || descr.back() != '\'' || !std::strchr("<>|=", descr[1]) ||
      !std::strchr("fiub", descr[2]) || !std::isdigit(static_cast<unsigned char>(descr[3])))
    bad(path, fmt::format("unsupported dtype {} (gradc reads floats, integers and bools)", printable(descr)));
  Elem e{descr[2], descr[3] - '0', false, ""};
  e.swap = descr[1] == '>' && e.size > 1;
  const bool ok = e.kind == 'f' ? (e.size == 2 || e.size == 4 || e.size == 8)
                  : e.kind == 'b' ? e.size == 1
                                  : (e.size == 1 || e.size == 2 || e.size == 4 || e.size == 8);
  if (!ok) bad(path, fmt::format("unsupported dtype {}", printable(descr)));
  // gradc's names for its own dtypes, NumPy's for the others
  e.name = e.kind == 'b'                        ? "bool"
           : e.kind == 'f' && e.size != 2         ? fmt::format("f{}", 8 * e.size)
           : e.kind == 'i' && e.size == 4         ? "i32"
                                                  : fmt::format("{}{}", e.kind == 'f' ? "float" : e.kind == 'i' ? "int" : "uint", 8 * e.size);
  return e;
}

// Element i of raw little-endian (after swapping) data as an integer.
template <class T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
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
  const Elem e = parse_descr(dict_value(h, "descr", path), path);
  const std::string order = dict_value(h, "fortran_order", path);
  if (order != "False" && order != "True") bad(path, "malformed fortran_order in header");
  const bool fortran = order == "True";
  std::string shape = dict_value(h, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') bad(path, "malformed shape in header");
  std::string dims = shape.substr(1, shape.size() - 2);
  Shape sh;
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i == dims.size()) break;
    size_t j = i;
    while (j < dims.size() && std::isdigit(static_cast<unsigned char>(dims[j]))) ++j;
    if (j == i || j - i > 12) bad(path, "malformed shape in header");
    sh.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
  }
  if (too_large(sh)) bad(path, fmt::format("shape {} is too large", shape_str(sh)));
  if (e.kind == 'f' && e.size == 2)
    bad(path, "holds float16 data, which gradc does not read: convert it with a.astype(np.float32)");
  const int64_t count = num_elements(sh);
  const size_t need = size_t(count) * size_t(e.size);
  const size_t have = s.size() - hstart - hlen;
  const std::string what = fmt::format("{}{}", e.name, shape_str(sh));
  if (have < need) bad(path, fmt::format("truncated: {} needs {} bytes of data, the file has {}", what, need, have));
  if (have > need) bad(path, fmt::format("{} extra bytes after the data of {}", have - need, what));
  std::string raw = s.substr(hstart + hlen, need);
  if (e.swap)
    for (size_t k = 0; k < raw.size(); k += size_t(e.size)) std::reverse(raw.begin() + long(k), raw.begin() + long(k) + e.size);
  // Fortran order holds the C-order array of the reversed shape, transposed.
  Shape stored = sh;
  if (fortran) std::reverse(stored.begin(), stored.end());
  Tensor x;
  if (e.kind == 'f') {
    x = Tensor::empty(Type{e.size == 4 ? DType::F32 : DType::F64, stored});
    std::memcpy(x.buf.get(), raw.data(), need);
  } else {
    // Integers and bools become i32 when every value fits (NumPy's and PyTorch's
    // default integer is 64-bit); the first that does not is an error.
    x = Tensor::empty(Type{DType::I32, stored});
    int32_t* out = x.data<int32_t>();
    for (int64_t k = 0; k < count; ++k) {
      const char* p = raw.data() + k * e.size;
      bool fits;
      int64_t v = 0;
      uint64_t u = 0;
      if (e.kind == 'u' || e.kind == 'b') {
        u = e.size == 1 ? load<uint8_t>(p) : e.size == 2 ? load<uint16_t>(p) : e.size == 4 ? load<uint32_t>(p) : load<uint64_t>(p);
        fits = u <= uint64_t(INT32_MAX);
        v = int64_t(u);
      } else {
        v = e.size == 1 ? load<int8_t>(p) : e.size == 2 ? load<int16_t>(p) : e.size == 4 ? load<int32_t>(p) : load<int64_t>(p);
        fits = v >= INT32_MIN && v <= INT32_MAX;
      }
      if (!fits) {
        Shape idx(stored.size());  // the element's index as NumPy shows it
        for (size_t d = stored.size(), rest = size_t(k); d-- > 0; rest /= size_t(stored[d])) idx[d] = int64_t(rest % size_t(stored[d]));
        if (fortran) std::reverse(idx.begin(), idx.end());
        bad(path, fmt::format("holds {} data, and element {} is {}, which does not fit in i32", e.name, shape_str(idx),
                              e.kind == 'u' ? std::to_string(u) : std::to_string(v)));
      }
      out[k] = int32_t(v);
    }
  }
  if (fortran && sh.size() > 1) {
    std::vector<int64_t> perm;
    for (int64_t d = int64_t(sh.size()) - 1; d >= 0; --d) perm.push_back(d);
    x = transpose(x, perm);
  }
  x.type.shape = sh;
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
