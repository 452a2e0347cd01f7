// What the main of an executable from `gradc build` uses, on both targets (host
// code only): its command line, .npy inputs and outputs, and the text and JSON
// that `gradc run` prints, for the ranks it runs as threads of this process.
#pragma once
#include <sys/stat.h>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <thread>

#include "gradc_npy.h"
#include "gradc_runtime.h"
#if defined(GRADC_WITH_MPI)
#include <mpi.h>  // an executable's ranks as processes under mpirun, on either target
#endif

// gradc's own compiles of CPU code (the native backend, gradc build --target=cpu, with
// GRADC_RUNTIME_OBJECT) compile this file's functions once, in the runtime's object
// (gradc_runtime_object.cpp, which defines GRADC_RUNTIME_OBJECT_SOURCE): a program sees
// the declarations of the three it calls (find_sizes, run_threads, main), not their
// code and that of the helpers under them.
#if defined(GRADC_RUNTIME_OBJECT) && !defined(GRADC_RUNTIME_OBJECT_SOURCE) && !defined(__CUDACC__)
#define GRADC_MAIN_DECLARED_ONLY
#endif
#if defined(GRADC_RUNTIME_OBJECT_SOURCE)
#define GRADC_MAIN_ENTRY
#else
#define GRADC_MAIN_ENTRY inline
#endif

namespace gradc::exe {

struct Arg {  // an input or output of the program
  const char* name;
  DType dtype;
  int rank;
  int64_t shape[8];
  bool has_default;  // inputs: may be left unset
  int64_t size() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= shape[d];
    return n;
  }
  int64_t bytes() const { return size() * dtype_size(dtype); }
};

struct Program {
  const char* source;  // the .dg file it was built from
  const char* name;
  int world;
  std::vector<Arg> inputs, outputs;
  std::vector<std::pair<const char*, int>> mesh;  // a mesh's axes and their sizes (none without one)
  const char* sizes;                              // the size parameters it is built for ("B = 8"; empty without any)
  bool any_size = false;                          // built for any size (sizes: those its input files give)
};

// One rank's host data: inputs (null where the default applies) and outputs.
struct RankData {
  std::vector<std::vector<char>> inputs, outputs;
  std::vector<double> step_ms;
};

struct Error {
  std::string message;
};

// The command line's options, and an executable's sizes (which a program declares).
struct Options {
  int ranks = 0, iters = 0;
  std::string inputs, outputs, format = "text";
  bool quiet = false;  // print no outputs (errors and the median step still go to stderr)
};

// An executable for any size (gradc build --size B=any): an input whose declared shape
// has size `size` as its dimension `axis` (input -1: none has it).
struct SizeSource {
  const char* size;
  int64_t* value;
  int input, axis;
};

#if defined(GRADC_MAIN_DECLARED_ONLY)
std::string find_sizes(const Program& p, int argc, char** argv, const SizeSource* s, size_t n);
#else

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I32: break;
  }
  return "i32";
}
inline std::string type_str(DType t, const int64_t* shape, int rank) {
  std::string s = std::string(dtype_name(t)) + "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

// ---- numbers as gradc run prints them (shortest round-trip digits, fixed
// notation for exponents -4 to 15, else d.ddde+XX) ----------------------------
template <class T>
std::string number(T v) {
  if constexpr (sizeof(T) == 4 && T(0.5) == T(0)) {
    return std::to_string(v);
  } else {
    if (v != v) return "nan";
    if (v == T(1) / T(0)) return "inf";
    if (v == -T(1) / T(0)) return "-inf";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
    std::string s(buf, r.ptr);
    size_t e = s.find('e');
    int exp = std::atoi(s.c_str() + e + 1);
    std::string mant = s.substr(0, e), sign;
    if (mant[0] == '-') {
      sign = "-";
      mant = mant.substr(1);
    }
    std::string digits;
    for (char c : mant)
      if (c != '.') digits += c;
    if (exp >= -4 && exp < 16) {
      std::string out;
      if (exp >= 0) {
        while (int(digits.size()) < exp + 1) digits += '0';
        out = digits.substr(0, size_t(exp + 1));
        std::string frac = digits.substr(size_t(exp + 1));
        if (!frac.empty()) out += "." + frac;
      } else {
        out = "0." + std::string(size_t(-exp - 1), '0') + digits;
      }
      return sign + out;
    }
    std::string m = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ex[16];
    snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return sign + m + ex;
  }
}
inline std::string element(const Arg& a, const char* data, int64_t i, bool json) {
  std::string s;
  if (a.dtype == DType::F32)
    s = number(reinterpret_cast<const float*>(data)[i]);
  else if (a.dtype == DType::F64)
    s = number(reinterpret_cast<const double*>(data)[i]);
  else if (a.dtype == DType::BF16)
    s = number(to_float(reinterpret_cast<const bfloat16*>(data)[i]));
  else if (a.dtype == DType::F16)
    s = number(to_float(reinterpret_cast<const float16*>(data)[i]));
  else
    s = number(reinterpret_cast<const int32_t*>(data)[i]);
  if (json && s == "nan") return "NaN";
  if (json && s == "inf") return "Infinity";
  if (json && s == "-inf") return "-Infinity";
  return s;
}
// NumPy's layout, as gradc run prints it: rows on lines of their own, aligned.
inline void nested(const Arg& a, const char* data, int axis, int64_t off, bool elide, size_t pad, std::string& out) {
  if (axis == a.rank) {
    out += element(a, data, off, false);
    return;
  }
  int64_t n = a.shape[axis], stride = 1;
  for (int d = axis + 1; d < a.rank; ++d) stride *= a.shape[d];
  std::string sep = ",";
  if (axis == a.rank - 1) {
    sep += ' ';
  } else {
    sep.append(size_t(a.rank - axis - 1), '\n');
    sep.append(pad + size_t(axis) + 1, ' ');
  }
  out += "[";
  for (int64_t i = 0; i < n; ++i) {
    if (elide && n > 6 && i == 3) {
      out += sep + "...";
      i = n - 3;
    }
    if (i > 0) out += sep;
    nested(a, data, axis + 1, off + i * stride, elide, pad, out);
  }
  out += "]";
}
inline std::string text(const Program& p, const std::vector<RankData>& ranks) {
  std::string s;
  for (size_t r = 0; r < ranks.size(); ++r) {
    s += "rank " + std::to_string(r) + ":\n";
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      const Arg& a = p.outputs[k];
      const bool block = a.rank >= 2 && a.size() > 0;  // a matrix or more starts on a line of its own
      std::string v;
      if (a.size() == 0)
        v = "[]";
      else
        nested(a, ranks[r].outputs[k].data(), 0, 0, a.size() > 1000, block ? 4 : 0, v);
      s += "  " + std::string(a.name) + ": " + type_str(a.dtype, a.shape, a.rank) + (block ? " =\n    " : " = ") + v +
           "\n";
    }
  }
  return s;
}
// A mesh's axes as JSON, {"dp": 2, "tp": 2}, with each axis's value(k).
template <class F>
std::string mesh_json(const Program& p, F&& value) {
  std::string s = "{";
  for (size_t k = 0; k < p.mesh.size(); ++k)
    s += std::string(k ? ", " : "") + "\"" + p.mesh[k].first + "\": " + std::to_string(value(k));
  return s + "}";
}
inline std::string json(const Program& p, const std::vector<RankData>& ranks) {
  std::string s = "{\"world\": " + std::to_string(ranks.size()) + ",";
  if (!p.mesh.empty()) s += " \"mesh\": " + mesh_json(p, [&](size_t k) { return p.mesh[k].second; }) + ",";
  s += "\n \"ranks\": [";
  for (size_t r = 0; r < ranks.size(); ++r) {
    s += std::string(r ? "," : "") + "\n  {\"rank\": " + std::to_string(r);
    if (!p.mesh.empty())  // row-major over the axes, the last fastest
      s += ", \"coords\": " + mesh_json(p, [&](size_t k) {
             int stride = 1;
             for (size_t j = k + 1; j < p.mesh.size(); ++j) stride *= p.mesh[j].second;
             return int(r) / stride % p.mesh[k].second;
           });
    s += ", \"outputs\": {";
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      const Arg& a = p.outputs[k];
      std::string shape, data;
      for (int d = 0; d < a.rank; ++d) shape += (d ? ", " : "") + std::to_string(a.shape[d]);
      for (int64_t i = 0; i < a.size(); ++i) data += (i ? ", " : "") + element(a, ranks[r].outputs[k].data(), i, true);
      s += std::string(k ? ", " : "") + "\"" + a.name + "\": {\"dtype\": \"" + dtype_name(a.dtype) +
           "\", \"shape\": [" + shape + "], \"data\": [" + data + "]}";
    }
    s += "}}";
  }
  return s + "]}\n";
}

// ---- .npy files ------------------------------------------------------------------
inline bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
// Rank r's value of input a from path, read and checked as gradc run does (gradc_npy.h).
inline std::vector<char> read_npy(const std::string& path, const Arg& a, const char* sizes, bool any_size) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error{"cannot read '" + path + "'"};
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  npy::Array x;
  try {
    x = npy::parse(s, path);
  } catch (const std::runtime_error& e) {
    throw Error{e.what()};
  }
  const DType t = x.kind == 'f'   ? DType::F32
                  : x.kind == 'd' ? DType::F64
                  : x.kind == 'h' ? DType::F16
                  : x.kind == 'B' ? DType::BF16
                                  : DType::I32;
  const std::string want = type_str(a.dtype, a.shape, a.rank);
  if (t != a.dtype)  // float data must match exactly: say how to convert
    throw Error{path + ": holds " + (t == DType::I32 ? "integer" : dtype_name(t)) + " data, but input '" + a.name +
                "' is declared " + want + ": convert it with a.astype(" +
                (a.dtype == DType::F32    ? "np.float32"
                 : a.dtype == DType::F64  ? "np.float64"
                 : a.dtype == DType::BF16 ? "ml_dtypes.bfloat16"
                 : a.dtype == DType::F16  ? "np.float16"
                                          : "np.int32") +
                ")"};
  const std::string got = type_str(t, x.shape.data(), int(x.shape.size()));
  if (got != want)
    throw Error{path + ": holds " + got + ", but input '" + a.name + "' is declared " + want +
                (any_size ? std::string(" (with ") + sizes + ", which the input files give)"
                 : *sizes ? std::string(" (the executable is built for ") + sizes +
                                ": `gradc build --size` makes one for other sizes)"
                          : "")};
  return std::vector<char>(x.data.begin(), x.data.end());
}
inline std::string npy_bytes(const Arg& a, const std::vector<char>& data) {
  std::string shape;
  for (int d = 0; d < a.rank; ++d) shape += (d ? ", " : "") + std::to_string(a.shape[d]);
  if (a.rank == 1) shape += ",";
  // bf16 as ml_dtypes.bfloat16 saves it: 2-byte void
  const char* descr = a.dtype == DType::F32    ? "<f4"
                      : a.dtype == DType::F64  ? "<f8"
                      : a.dtype == DType::BF16 ? "<V2"
                      : a.dtype == DType::F16  ? "<f2"
                                               : "<i4";
  std::string h = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + std::string(data.begin(), data.end());
}

// ---- the command line and the run ------------------------------------------------------
constexpr const char* kUsage = "[--ranks=N] [--inputs=DIR] [--outputs=DIR] [--iters=K] [--format=text|json] [--quiet]";
[[noreturn]] inline void usage(const Program& p, const std::string& why) {
  fprintf(stderr, "%s: %s\nusage: %s %s\n", p.name, why.c_str(), p.name, kUsage);
  exit(2);
}
inline Options parse(const Program& p, int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    size_t eq = a.find('=');
    std::string key = a.substr(0, eq), value = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto number = [&](int lo, int hi) {
      char* end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end || n < lo || n > hi)
        usage(p, key + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
      return int(n);
    };
    // a folder's option without one (`--inputs DIR`, a trailing `--inputs`) would read
    // no files, or write none, without a word
    auto folder = [&] {
      if (value.empty()) usage(p, key + " needs a folder: " + key + "=DIR");
      return value;
    };
    if (a == "--help") {
      printf("%s: built by gradc from %s\nusage: %s %s\n", p.name, p.source, p.name, kUsage);
      exit(0);
    } else if (key == "--ranks")
      o.ranks = number(1, 4096);
    else if (key == "--iters")
      o.iters = number(0, 1000000);
    else if (key == "--inputs")
      o.inputs = folder();
    else if (key == "--outputs")
      o.outputs = folder();
    else if (key == "--format")
      o.format = value;
    else if (a == "--quiet")
      o.quiet = true;
    else {  // `--out DIR`, `--rank=2`: the options it shortens
      std::string near;
      for (const char* opt : {"--ranks", "--inputs", "--outputs", "--iters", "--format", "--quiet"})
        if (key.size() > 2 && key.rfind("--", 0) == 0 && std::string(opt).rfind(key, 0) == 0)
          near += std::string(near.empty() ? "; did you mean " : " or ") + opt;
      usage(p, "unknown option " + key + (near.empty() ? "" : near + "?"));
    }
  }
  if (o.format != "text" && o.format != "json") usage(p, "--format must be text or json, got '" + o.format + "'");
  return o;
}

inline RankData load_rank(const Program& p, const Options& o, int r) {
  RankData d;
  if (!o.inputs.empty()) {
    std::vector<std::string> names;
    for (const Arg& a : p.inputs) names.push_back(a.name);
    try {
      npy::check_input_dir(o.inputs, names, p.world);
    } catch (const std::runtime_error& e) {
      throw Error{e.what()};
    }
  }
  {
    for (const Arg& a : p.inputs) {
      std::vector<char> data;
      bool found = false;
      for (std::string path :
           {o.inputs + "/rank" + std::to_string(r) + "/" + a.name + ".npy", o.inputs + "/" + a.name + ".npy"}) {
        if (o.inputs.empty() || !exists(path)) continue;
        data = read_npy(path, a, p.sizes, p.any_size);
        found = true;
        break;
      }
      if (!found && !a.has_default)
        throw Error{std::string(p.source) + ": input '" + a.name + "' has no value for rank " + std::to_string(r) +
                    " and no default"};
      d.inputs.push_back(std::move(data));
    }
    for (const Arg& a : p.outputs) d.outputs.emplace_back(size_t(a.bytes()));
  }
  return d;
}
inline std::vector<RankData> load(const Program& p, const Options& o, int world) {
  std::vector<RankData> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(load_rank(p, o, r));
  return ranks;
}

// Every rank's files or none: each is written under a temporary name first
// (stage_outputs), and all take their names only when every one is complete.
inline void discard(const std::vector<std::string>& staged) {
  for (const std::string& t : staged) std::remove(t.c_str());
}
inline std::vector<std::string> stage_outputs(const Program& p, const std::string& dir, int r, const RankData& d) {
  std::vector<std::string> staged;
  auto fail = [&](const std::string& what) {
    int err = errno;
    discard(staged);
    throw Error{"cannot write '" + what + "': " + std::strerror(err)};
  };
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) fail(dir);
  std::string sub = dir + "/rank" + std::to_string(r);
  if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) fail(sub);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    std::string path = sub + "/" + p.outputs[k].name + ".npy", tmp = path + ".gradc-tmp";
    std::ofstream f(tmp, std::ios::binary);
    std::string bytes = npy_bytes(p.outputs[k], d.outputs[k]);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    f.close();
    if (!f) fail(path);
    staged.push_back(tmp);
  }
  return staged;
}
inline void commit(const std::vector<std::string>& staged) {
  for (const std::string& t : staged)
    if (std::rename(t.c_str(), t.substr(0, t.size() - 10).c_str()) != 0)
      throw Error{"cannot write '" + t.substr(0, t.size() - 10) + "': " + std::strerror(errno)};
}
inline void write_outputs(const Program& p, const std::string& dir, const std::vector<RankData>& ranks) {
  std::vector<std::string> staged;
  try {
    for (size_t r = 0; r < ranks.size(); ++r) {
      std::vector<std::string> mine = stage_outputs(p, dir, int(r), ranks[r]);
      staged.insert(staged.end(), mine.begin(), mine.end());
    }
  } catch (const Error&) {
    discard(staged);
    throw;
  }
  commit(staged);
}

// Sets each size from the files of --inputs (every rank's, of every input that has it
// as a dimension: they must agree), else leaves its default. The sizes as text ("B =
// 32"), or "" after printing why there are none.
GRADC_MAIN_ENTRY std::string find_sizes(const Program& p, int argc, char** argv, const SizeSource* s, size_t n) {
  const Options o = parse(p, argc, argv);
  const int world = o.ranks ? o.ranks : p.world;
  std::vector<std::pair<std::string, std::string>> found;  // size: the file that gave it
  std::string text;
  try {
    for (size_t k = 0; k < n; ++k) {
      if (s[k].input < 0 || o.inputs.empty()) continue;
      const Arg& a = p.inputs[size_t(s[k].input)];
      for (int r = 0; r < world; ++r)
        for (const std::string& path :
             {o.inputs + "/rank" + std::to_string(r) + "/" + a.name + ".npy", o.inputs + "/" + a.name + ".npy"}) {
          if (!exists(path)) continue;
          std::ifstream f(path, std::ios::binary);
          const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
          npy::Array x;
          try {
            x = npy::parse(bytes, path);
          } catch (const std::runtime_error& e) {
            throw Error{e.what()};
          }
          if (int(x.shape.size()) != a.rank) break;  // reading it says what is wrong with it
          const int64_t v = x.shape[size_t(s[k].axis)];
          if (v < 1)
            throw Error{path + ": gives size " + s[k].size + " = " + std::to_string(v) + ", but a size is at least 1"};
          auto at = std::find_if(found.begin(), found.end(), [&](const auto& g) { return g.first == s[k].size; });
          if (at == found.end()) {
            found.push_back({s[k].size, path});
            *s[k].value = v;
          } else if (*s[k].value != v) {
            throw Error{std::string("size ") + s[k].size + " is " + std::to_string(*s[k].value) + " in " + at->second +
                        " but " + std::to_string(v) + " in " + path +
                        ": a size is the same in every input file of every rank"};
          }
          break;
        }
    }
    for (size_t k = 0; k < n; ++k) {
      const std::string name = s[k].size;
      if (text.find(name + " = ") == 0 || text.find(", " + name + " = ") != std::string::npos) continue;
      if (*s[k].value < 1)
        throw Error{"size " + name + " has no default, and no input file gives it" +
                    (s[k].input < 0 ? std::string(" (no input has it as a dimension)") : std::string())};
      text += (text.empty() ? "" : ", ") + name + " = " + std::to_string(*s[k].value);
    }
  } catch (const Error& e) {
    fprintf(stderr, "%s: error: %s\n", p.name, e.message.c_str());
    return "";
  }
  return text;
}

// The start of every main: the world size the executable was built for.
// A mesh program is rebuilt with --mesh (gradc build refuses --ranks there): its first
// axis scaled to the ranks where the others' sizes divide them.
inline bool wrong_size(const Program& p, int world, const char* how) {
  if (world == p.world) return false;
  std::string flag = "--ranks=" + std::to_string(world), note;
  if (!p.mesh.empty()) {
    const int rest = p.world / p.mesh[0].second;
    flag = "--mesh=";
    for (size_t i = 0; i < p.mesh.size(); ++i)
      flag += std::string(i ? "," : "") + p.mesh[i].first + "=" +
              (i              ? std::to_string(p.mesh[i].second)
               : world % rest ? "?"
                              : std::to_string(world / rest));
    if (world % rest) note = " (sizes whose product is " + std::to_string(world) + ")";
  }
  fprintf(
      stderr,
      "%s: error: built for %d ranks, %s %d (shapes depend on the world size); rebuild with `gradc build %s %s`%s\n",
      p.name, p.world, how, world, p.source, flag.c_str(), note.c_str());
  return true;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The end of a run in one process: a failed rank's message, else the step time,
// the output files and the document gradc run prints.
inline int finish(const Program& p, const Options& o, const std::vector<std::string>& errors,
                  const std::vector<RankData>& ranks) {
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) throw Error{"rank " + std::to_string(r) + ": " + errors[r]};
  if (o.iters > 0) fprintf(stderr, "median step: %.3f ms\n", median(ranks[0].step_ms));
  if (!o.outputs.empty()) write_outputs(p, o.outputs, ranks);
  if (o.quiet) return 0;
  std::string out = o.format == "json" ? json(p, ranks) : text(p, ranks);
  fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

#if defined(GRADC_WITH_MPI)
// Under mpirun each process is one rank: it reads its own inputs and writes its
// own outputs, and rank 0 prints the one document for all ranks. A failing rank
// stops every rank (MPI_Abort), so none is left waiting in a collective.
// `run_rank` runs this process's rank on its data (it may throw Error).
using RankRun = std::function<void(int rank, int size, RankData& data)>;
[[noreturn]] inline void mpi_abort(const Program& p, int rank, const std::string& why) {
  fprintf(stderr, "%s: error: rank %d: %s\n", p.name, rank, why.c_str());
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  _Exit(1);
}
inline int main_mpi(const Program& p, const Options& o, const RankRun& run_rank) {
  MPI_Init(nullptr, nullptr);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != p.world) {
    if (rank == 0) wrong_size(p, size, "started by a launcher with");
    MPI_Finalize();
    return 1;
  }
  RankData d;
  try {
    d = load_rank(p, o, rank);
    run_rank(rank, size, d);
  } catch (const Error& e) {
    mpi_abort(p, rank, e.message);
  } catch (const std::exception& e) {
    mpi_abort(p, rank, e.what());
  }
  std::vector<RankData> all(rank == 0 ? static_cast<size_t>(size) : 0);
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const int bytes = int(p.outputs[k].bytes());
    std::vector<char> gathered(rank == 0 ? size_t(bytes) * size_t(size) : 0);
    MPI_Gather(d.outputs[k].data(), bytes, MPI_BYTE, gathered.data(), bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    for (size_t r = 0; r < all.size(); ++r)
      all[r].outputs.emplace_back(gathered.begin() + long(r) * bytes, gathered.begin() + long(r + 1) * bytes);
  }
  if (!o.outputs.empty()) {  // every rank's files or none
    std::vector<std::string> staged;
    std::string why;
    try {
      staged = stage_outputs(p, o.outputs, rank, d);
    } catch (const Error& e) {
      why = e.message;
    }
    int ok = why.empty(), all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
      discard(staged);
      if (!why.empty()) fprintf(stderr, "%s: error: rank %d: %s\n", p.name, rank, why.c_str());
      MPI_Finalize();
      return 1;
    }
    commit(staged);
  }
  if (rank == 0) {
    if (o.iters > 0) fprintf(stderr, "median step: %.3f ms\n", median(d.step_ms));
    if (!o.quiet) {
      std::string out = o.format == "json" ? json(p, all) : text(p, all);
      fwrite(out.data(), 1, out.size(), stdout);
    }
  }
  MPI_Finalize();
  return 0;
}
#endif

inline bool under_launcher() { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE"); }
#endif  // GRADC_MAIN_DECLARED_ONLY

#if !defined(__CUDACC__)
// Runs `step` for every rank (a thread each, with its communicator), then
// prints and writes what gradc run would. `step` constructs the program, binds
// the rank's data, runs it 1 + iters times and records each timed step.
using Barrier = std::function<void()>;
using Step = std::function<void(Comm& comm, RankData& data, int iters, const Barrier& barrier)>;

// The first step, then `iters` more, each timed over all ranks: they start
// together and a step ends when the slowest rank ends it. Between the first step
// and the timed ones, `after_first` (inputs keep their computed defaults: the
// timed steps do not evaluate them again).
template <class F, class G>
void timed_steps(const Barrier& barrier, std::vector<double>& step_ms, int iters, F&& run_once, G&& after_first) {
  run_once();
  after_first();
  for (int i = 0; i < iters; ++i) {
    barrier();
    auto t0 = std::chrono::steady_clock::now();
    run_once();
    barrier();
    step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// Runs body(comm, r, barrier) for every rank r, a thread each with its
// communicator; a failing rank stops the others. The first failure's message
// ("rank R: why"), or "".
#if defined(GRADC_MAIN_DECLARED_ONLY)
std::string run_threads(int world, const std::function<void(Comm&, int, const Barrier&)>& body);
int main(const Program& p, int argc, char** argv, const Step& step);
#else
GRADC_MAIN_ENTRY std::string run_threads(int world, const std::function<void(Comm&, int, const Barrier&)>& body) {
  ThreadGroup group(world);  // which shares the cores among the ranks' BLAS calls
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ThreadComm comm(group, r);
      try {
        body(comm, r, [&] { group.barrier(); });
      } catch (const ThreadGroup::Stopped&) {
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        group.fail(e.what());
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty()) return "rank " + std::to_string(r) + ": " + errors[r];
  return "";
}

GRADC_MAIN_ENTRY int main(const Program& p, int argc, char** argv, const Step& step) {
  Options o = parse(p, argc, argv);
#if defined(GRADC_WITH_MPI)
  if (under_launcher())
    return main_mpi(p, o, [&](int, int, RankData& d) {
      MpiComm comm(MPI_COMM_WORLD);
      step(comm, d, o.iters, [] { MPI_Barrier(MPI_COMM_WORLD); });
    });
#else
  if (under_launcher()) {
    fprintf(stderr, "%s: error: started by a launcher, but built without MPI (gradc found no MPI)\n", p.name);
    return 1;
  }
#endif
  const int world = o.ranks ? o.ranks : p.world;
  if (wrong_size(p, world, "started for")) return 1;
  try {
    std::vector<RankData> ranks = load(p, o, world);
    std::string why = run_threads(
        world, [&](Comm& comm, int r, const Barrier& barrier) { step(comm, ranks[size_t(r)], o.iters, barrier); });
    if (!why.empty()) throw Error{why};
    return finish(p, o, {}, ranks);
  } catch (const Error& e) {
    fprintf(stderr, "%s: error: %s\n", p.name, e.message.c_str());
    return 1;
  }
}
#endif  // GRADC_MAIN_DECLARED_ONLY

#else
// One process drives N GPUs, one rank each, a host thread per GPU; NCCL
// communicates. A failing rank aborts every communicator, so none is left
// waiting in a collective.
struct DeviceData {
  std::vector<void*> inputs, outputs;  // device memory; an input left null takes its default
  int iters = 0;
  std::vector<double> step_ms;
};
// The first step, then `iters` more, each timed with CUDA events on this GPU.
template <class F, class G>
void cuda_steps(cudaStream_t stream, DeviceData& d, F&& run_once, G&& after_first) {
  run_once();
  after_first();
  cudaEvent_t start, stop;
  GRADC_CUDA(cudaEventCreate(&start), "timing");
  GRADC_CUDA(cudaEventCreate(&stop), "timing");
  for (int i = 0; i < d.iters; ++i) {
    GRADC_CUDA(cudaEventRecord(start, stream), "timing");
    run_once();
    GRADC_CUDA(cudaEventRecord(stop, stream), "timing");
    GRADC_CUDA(cudaEventSynchronize(stop), "a step");
    float ms = 0;
    GRADC_CUDA(cudaEventElapsedTime(&ms, start, stop), "timing");
    d.step_ms.push_back(ms);
  }
  GRADC_CUDA(cudaStreamSynchronize(stream), "the step");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}
using CudaStep = std::function<void(ncclComm_t comm, cudaStream_t stream, DeviceData& data)>;
// One rank on this process's GPU: inputs to the device, the steps, outputs back.
inline void cuda_rank(const CudaStep& setup, ncclComm_t comm, const Program& p, const Options& o, RankData& d) {
  cudaStream_t stream;
  GRADC_CUDA(cudaStreamCreate(&stream), "creating a stream");
  DeviceData dd;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    void* ptr = nullptr;
    if (!d.inputs[k].empty()) {
      GRADC_CUDA(cudaMalloc(&ptr, d.inputs[k].size()), "input memory");
      GRADC_CUDA(cudaMemcpy(ptr, d.inputs[k].data(), d.inputs[k].size(), cudaMemcpyHostToDevice), "an input");
    }
    dd.inputs.push_back(ptr);
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    void* ptr = nullptr;
    GRADC_CUDA(cudaMalloc(&ptr, d.outputs[k].size() ? d.outputs[k].size() : 1), "output memory");
    dd.outputs.push_back(ptr);
  }
  dd.iters = o.iters;
  setup(comm, stream, dd);
  d.step_ms = dd.step_ms;
  for (size_t k = 0; k < p.outputs.size(); ++k)
    GRADC_CUDA(cudaMemcpy(d.outputs[k].data(), dd.outputs[k], d.outputs[k].size(), cudaMemcpyDeviceToHost),
               "an output");
  for (void* ptr : dd.inputs) cudaFree(ptr);
  for (void* ptr : dd.outputs) cudaFree(ptr);
  cudaStreamDestroy(stream);
}

inline int main_cuda(const Program& p, int argc, char** argv, const CudaStep& setup) {
  Options o = parse(p, argc, argv);
#if defined(GRADC_WITH_MPI)
  // Under mpirun: a process per GPU (across nodes too), the NCCL id sent over MPI.
  if (under_launcher())
    return main_mpi(p, o, [&](int rank, int size, RankData& d) {
      const char* local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
      int devices = 0;
      GRADC_CUDA(cudaGetDeviceCount(&devices), "counting GPUs");
      GRADC_CUDA(cudaSetDevice((local ? atoi(local) : rank) % devices), "choosing the GPU");
      ncclUniqueId id;
      if (rank == 0) GRADC_NCCL(ncclGetUniqueId(&id), "creating the NCCL id");
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      ncclComm_t comm;
      GRADC_NCCL(ncclCommInitRank(&comm, size, id, rank), "joining the NCCL communicator");
      cuda_rank(setup, comm, p, o, d);
      ncclCommDestroy(comm);
    });
#endif
  const int world = o.ranks ? o.ranks : p.world;
  if (wrong_size(p, world, "started for")) return 1;
  try {
    int devices = 0;
    GRADC_CUDA(cudaGetDeviceCount(&devices), "counting GPUs");
    if (devices < world)
      throw Error{std::to_string(world) + " ranks need " + std::to_string(world) + " GPUs, this machine has " +
                  std::to_string(devices)};
    std::vector<RankData> ranks = load(p, o, world);
    std::vector<ncclComm_t> comms(static_cast<size_t>(world));
    std::vector<int> ids(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) ids[size_t(r)] = r;
    GRADC_NCCL(ncclCommInitAll(comms.data(), world, ids.data()), "creating the NCCL communicators");
    std::vector<std::string> errors(static_cast<size_t>(world));
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r)
      threads.emplace_back([&, r] {
        try {
          GRADC_CUDA(cudaSetDevice(r), "choosing the GPU");
          cuda_rank(setup, comms[size_t(r)], p, o, ranks[size_t(r)]);
        } catch (const Error& e) {
          errors[size_t(r)] = e.message;
          for (ncclComm_t c : comms) ncclCommAbort(c);
        }
      });
    for (std::thread& t : threads) t.join();
    for (ncclComm_t c : comms) ncclCommDestroy(c);
    return finish(p, o, errors, ranks);
  } catch (const Error& e) {
    fprintf(stderr, "%s: error: %s\n", p.name, e.message.c_str());
    return 1;
  }
}
#endif

}  // namespace gradc::exe
