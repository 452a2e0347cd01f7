// Reading NumPy's .npy format, with no dependencies, so that gradc (runtime/npy.cpp)
// and the executables it builds (written out beside generated code as gradc_npy.h)
// read files by one set of rules (docs/language.md section 7): versions 1.0 to 3.0, either
// byte order, C or Fortran order; float data as f32, f64 or f16; 2-byte void data ('<V2',
// what NumPy writes for ml_dtypes.bfloat16) as bf16; integer and bool data of any width
// as i32 when every value fits. A bad file throws std::runtime_error
// ("PATH: what is wrong").
#pragma once
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradc::npy {

// The array, in C order: `kind` 'f' (f32), 'd' (f64), 'i' (i32), 'h' (f16) or 'B' (bf16).
struct Array {
  char kind = 'f';
  std::vector<int64_t> shape;
  std::string data;
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t d = 0; d < s.size(); ++d) out += (d ? ", " : "") + std::to_string(s[d]);
  return out + "]";
}

[[noreturn]] inline void bad(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

// Header text as it may be shown in a message: bytes outside printable ASCII as \xNN.
inline std::string printable(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s)
    if (c >= 0x20 && c < 0x7f)
      out += char(c);
    else
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
  return out;
}

// The value of `key` in the header dict: the text after "'key':" up to the next top-level comma.
inline std::string dict_value(const std::string& h, const std::string& key, const std::string& path) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) bad(path, "header has no '" + key + "'");
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
  size_t a = v.find_first_not_of(' '), b = v.find_last_not_of(' ');
  return a == std::string::npos ? "" : v.substr(a, b - a + 1);
}

// Too many elements to hold (or to index without overflow, for an empty array's other dimensions).
inline bool too_large(const std::vector<int64_t>& s) {
  double n = 1;
  for (int64_t d : s) n *= d ? double(d) : 1.0;
  return n > double(int64_t(1) << 40);
}

inline Array parse(const std::string& s, const std::string& path) {
  if (s.size() < 10 || memcmp(s.data(), "\x93NUMPY", 6) != 0) bad(path, "not a .npy file");
  const int major = static_cast<unsigned char>(s[6]);
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(s[8]) | size_t(static_cast<unsigned char>(s[9])) << 8;
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (s.size() < 12) bad(path, "truncated header");
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(s[size_t(8 + i)])) << (8 * i);
    hstart = 12;
  } else {
    bad(path, "unsupported .npy version " + std::to_string(major));
  }
  if (s.size() < hstart + hlen) bad(path, "truncated header");
  const std::string h = s.substr(hstart, hlen);
  // The element type: '<f4', '>i8', '|b1', ...
  const std::string descr = dict_value(h, "descr", path);
  if (descr.size() != 5 || descr.front() != '\'' || descr.back() != '\'' || !strchr("<>|=", descr[1]) ||
      !strchr("fiubV", descr[2]) || descr[3] < '1' || descr[3] > '8')
    bad(path, "unsupported dtype " + printable(descr) + " (gradc reads floats, integers and bools)");
  const char kind = descr[2];
  const int size = descr[3] - '0';
  const bool ok = kind == 'f'   ? (size == 2 || size == 4 || size == 8)
                  : kind == 'b' ? size == 1
                  : kind == 'V' ? size == 2
                                : (size == 1 || size == 2 || size == 4 || size == 8);
  if (!ok)
    bad(path, "unsupported dtype " + printable(descr) +
                  (kind == 'V' ? " (gradc reads 2-byte void data, '<V2', as bfloat16)" : ""));
  // gradc's names for its own dtypes, NumPy's for the others
  std::string name = kind == 'b'   ? "bool"
                     : kind == 'V' ? "bf"
                     : kind == 'f' ? "f"
                     : kind == 'i' ? (size == 4 ? "i" : "int")
                                   : "uint";
  if (kind != 'b') name += std::to_string(8 * size);
  const std::string order = dict_value(h, "fortran_order", path);
  if (order != "False" && order != "True") bad(path, "malformed fortran_order in header");
  const bool fortran = order == "True";
  const std::string shape = dict_value(h, "shape", path);
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') bad(path, "malformed shape in header");
  Array out;
  const std::string dims = shape.substr(1, shape.size() - 2);
  for (size_t i = 0; i < dims.size();) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i == dims.size()) break;
    size_t j = i;
    while (j < dims.size() && dims[j] >= '0' && dims[j] <= '9') ++j;
    if (j == i || j - i > 12) bad(path, "malformed shape in header");
    out.shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
  }
  if (too_large(out.shape)) bad(path, "shape " + shape_str(out.shape) + " is too large");
  const int64_t count = out.size();
  const size_t need = size_t(count) * size_t(size), have = s.size() - hstart - hlen;
  const std::string what = name + shape_str(out.shape);
  if (have < need)
    bad(path, "truncated: " + what + " needs " + std::to_string(need) + " bytes of data, the file has " +
                  std::to_string(have));
  if (have > need) bad(path, std::to_string(have - need) + " extra bytes after the data of " + what);
  std::string raw = s.substr(hstart + hlen, need);
  if (descr[1] == '>' && size > 1)  // to this host's little-endian order
    for (size_t k = 0; k < raw.size(); k += size_t(size))
      std::reverse(raw.begin() + long(k), raw.begin() + long(k) + size);
  // Fortran order holds the C-order array of the reversed shape, transposed.
  std::vector<int64_t> stored = out.shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  if (kind == 'f' || kind == 'V') {
    out.kind = kind == 'V' ? 'B' : size == 2 ? 'h' : size == 4 ? 'f' : 'd';
    out.data = std::move(raw);
  } else {
    // Integers and bools become i32 when every value fits (NumPy's and PyTorch's
    // default integer is 64-bit); the first that does not is an error.
    out.kind = 'i';
    out.data.resize(size_t(count) * 4);
    for (int64_t k = 0; k < count; ++k) {
      const char* p = raw.data() + k * size;
      uint8_t u1;
      uint16_t u2;
      uint32_t u4;
      uint64_t u8;
      int8_t i1;
      int16_t i2;
      int32_t i4;
      int64_t i8;
      int64_t v = 0;
      uint64_t u = 0;
      bool fits;
      if (kind == 'u' || kind == 'b') {
        if (size == 1)
          memcpy(&u1, p, 1), u = u1;
        else if (size == 2)
          memcpy(&u2, p, 2), u = u2;
        else if (size == 4)
          memcpy(&u4, p, 4), u = u4;
        else
          memcpy(&u8, p, 8), u = u8;
        fits = u <= uint64_t(INT32_MAX);
        v = int64_t(u);
      } else {
        if (size == 1)
          memcpy(&i1, p, 1), v = i1;
        else if (size == 2)
          memcpy(&i2, p, 2), v = i2;
        else if (size == 4)
          memcpy(&i4, p, 4), v = i4;
        else
          memcpy(&i8, p, 8), v = i8;
        fits = v >= INT32_MIN && v <= INT32_MAX;
      }
      if (!fits) {
        std::vector<int64_t> idx(stored.size());  // the element's index as NumPy shows it
        int64_t rest = k;
        for (size_t d = stored.size(); d-- > 0; rest /= stored[d]) idx[d] = rest % stored[d];
        if (fortran) std::reverse(idx.begin(), idx.end());
        bad(path, "holds " + name + " data, and element " + shape_str(idx) + " is " +
                      (kind == 'i' ? std::to_string(v) : std::to_string(u)) + ", which does not fit in i32");
      }
      const int32_t w = int32_t(v);
      memcpy(&out.data[size_t(k) * 4], &w, 4);
    }
  }
  if (fortran && out.shape.size() > 1) {  // gather into C order
    const size_t es = out.kind == 'd' ? 8 : out.kind == 'h' || out.kind == 'B' ? 2 : 4, r = out.shape.size();
    std::string c(out.data.size(), '\0');
    std::vector<int64_t> idx(r, 0);
    for (int64_t k = 0; k < count; ++k) {  // k: C-order position; idx: its index
      int64_t f = 0;
      for (size_t d = r; d-- > 0;) f = f * out.shape[d] + idx[d];  // column-major position
      memcpy(&c[size_t(k) * es], &out.data[size_t(f) * es], es);
      for (size_t d = r; d-- > 0;) {
        if (++idx[d] < out.shape[d]) break;
        idx[d] = 0;
      }
    }
    out.data = std::move(c);
  }
  return out;
}

// The files of an --inputs folder: a folder that is not there (a misspelt --inputs=
// would run every input from its default), a .npy named after no input (a misspelt
// wi.npy for input Wi) and a rank<r> folder for a rank that does not run are errors, as
// silently ignored files give silently wrong results; other files and folders are ignored.
inline void check_input_dir(const std::string& dir, const std::vector<std::string>& inputs, int world) {
  namespace fs = std::filesystem;
  std::string names;
  for (const std::string& n : inputs) names += (names.empty() ? "" : ", ") + n;
  std::error_code dir_ec;
  if (!fs::is_directory(dir, dir_ec)) throw std::runtime_error("--inputs: '" + dir + "' is not a directory");
  auto check_files = [&](const fs::path& d) {
    std::error_code ec;
    std::vector<fs::path> files;
    fs::directory_iterator listing(d, ec);
    if (ec) throw std::runtime_error("cannot read '" + d.string() + "': " + ec.message());
    for (const auto& e : listing)
      if (std::error_code e2; e.path().extension() == ".npy" && !e.is_directory(e2)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files)
      if (std::find(inputs.begin(), inputs.end(), f.stem().string()) == inputs.end())
        throw std::runtime_error(f.string() + ": no input of the program is named '" + f.stem().string() +
                                 "' (its inputs: " + names + ")");
  };
  check_files(dir);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string sub = e.path().filename().string();
    std::error_code e2;
    if (!e.is_directory(e2) || sub.rfind("rank", 0) != 0 || sub.size() == 4 ||
        sub.find_first_not_of("0123456789", 4) != std::string::npos)
      continue;  // not rank<r>
    if (sub.size() > 12 || std::stoll(sub.substr(4)) >= world)
      throw std::runtime_error(e.path().string() + ": the program runs " + std::to_string(world) + " rank" +
                               (world == 1 ? "" : "s") + ", so there is no " + sub);
    check_files(e.path());
  }
}

}  // namespace gradc::npy
