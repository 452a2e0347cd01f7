#include "codegen/any_size.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "support/polynomial.h"

namespace gradc {

std::vector<std::vector<int64_t>> any_size_points(const std::vector<int64_t>& m) {
  return grid_points(m, kAnyDegree, kAnyFirst, 97, 101);  // checked at 97m, and at 101m for the first size
}

namespace {

// Where a number is: what its formula is written with.
enum class Context { Functor, Class, Comment, String, Python };

// How a file is read: C++ (its functors in the namespace NAME_kernels, NAME the file's
// stem), an executable's main (read as a functor is: its sizes are `sz`), or Python (the
// torch package's __init__.py: numbers in code are Python expressions in the sizes'
// names, those in strings and comments, documentation, their formulas' text).
enum class FileKind { Cpp, Main, Python };

struct Piece {
  std::string text;  // the text before the number, then the number (empty at the end)
  std::string number;
  Context context = Context::Class;
  int line = 1;
};

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A file cut at its numbers: each number's text, with what precedes it since the last.
std::vector<Piece> pieces(const std::string& t, const std::string& class_name, FileKind kind) {
  const bool main = kind == FileKind::Main, python = kind == FileKind::Python;
  const std::string open = "namespace " + class_name + "_kernels {", close = "// namespace " + class_name + "_kernels";
  const size_t kernels_begin = main ? 0 : t.find(open);
  const size_t kernels_end = main                                 ? t.size()
                             : kernels_begin == std::string::npos ? kernels_begin
                                                                  : t.find(close, kernels_begin);
  std::vector<Piece> out;
  std::string text;
  enum { Code, LineComment, BlockComment, Str, Chr } state = Code;
  int line = 1;
  for (size_t i = 0; i < t.size();) {
    const char c = t[i];
    if (state == Code) {
      if ((!python && c == '/' && i + 1 < t.size() && t[i + 1] == '/') || (python && c == '#'))
        state = LineComment;
      else if (!python && c == '/' && i + 1 < t.size() && t[i + 1] == '*')
        state = BlockComment;
      else if (c == '"')
        state = Str;
      else if (c == '\'')
        state = Chr;
    } else if (state == LineComment && c == '\n') {
      state = Code;
    } else if (state == BlockComment && c == '*' && i + 1 < t.size() && t[i + 1] == '/') {
      text += "*/";
      i += 2;
      state = Code;
      continue;
    } else if ((state == Str || state == Chr) && c == '\\' && i + 1 < t.size()) {
      text += t.substr(i, 2);
      i += 2;
      continue;
    } else if ((state == Str && c == '"') || (state == Chr && c == '\'')) {
      text += c;
      ++i;
      state = Code;
      continue;
    }
    const bool starts_number = std::isdigit(static_cast<unsigned char>(c)) && (i == 0 || !ident_char(t[i - 1])) &&
                               (i == 0 || t[i - 1] != '.') && (state != Chr || python);
    if (!starts_number) {
      if (c == '\n') ++line;
      text += c;
      ++i;
      continue;
    }
    size_t j = i;
    const bool hex = c == '0' && i + 1 < t.size() && (t[i + 1] == 'x' || t[i + 1] == 'X');
    while (j < t.size() && (ident_char(t[j]) || t[j] == '.' ||
                            (!hex && (t[j] == '+' || t[j] == '-') && (t[j - 1] == 'e' || t[j - 1] == 'E'))))
      ++j;
    Piece p;
    p.text = std::move(text);
    text.clear();
    p.number = t.substr(i, j - i);
    p.line = line;
    p.context = state == Str && !python                                                       ? Context::String
                : state != Code                                                               ? Context::Comment
                : python                                                                      ? Context::Python
                : kernels_begin != std::string::npos && i >= kernels_begin && i < kernels_end ? Context::Functor
                                                                                              : Context::Class;
    out.push_back(std::move(p));
    i = j;
  }
  Piece last;
  last.text = std::move(text);
  out.push_back(std::move(last));
  return out;
}

bool is_float_literal(const std::string& s) {
  if (s.size() > 1 && (s[1] == 'x' || s[1] == 'X')) return false;
  return s.find_first_of(".eEfF") != std::string::npos;
}

// An integer literal's value ("256", "16u"), or nothing.
std::optional<int64_t> int_value(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 0);
  while (*end == 'u' || *end == 'U' || *end == 'l' || *end == 'L') ++end;
  if (*end) return std::nullopt;
  return int64_t(v);
}

// How a number that differs between the points is read as an integer: an integer
// literal as written, a float as the whole number it is, as a whole number times
// 2^-shift (a mean over 4 ranks of a sum over B is B / 4; shift 1 to 16), where double(k)
// / 2^shift is exact, or as the whole number k of `num / k` for one float `num` at every
// point: a mean's 1 / n, and a constant divided by a size and folded into one number
// (label smoothing's 0.1 / C, C = 4 B, is 0.025 / B; 0.1f / B in f32).
struct Reading {
  enum Kind { Int, Whole, Scaled, Ratio } kind = Int;
  int shift = 0;
  double num = 0;  // Ratio's numerator
};

// A double as a C++ expression of the same value: the shortest literal that round-trips,
// with a point or an exponent ("0.025", "3.0", "1e-05"), or an f32 literal's value where
// that is shorter ("double(0.3f)" for 0.30000001192092896).
std::string double_literal(double x) {
  auto literal = [](const std::string& t) { return t.find_first_of(".eEn") == std::string::npos ? t + ".0" : t; };
  const std::string d = literal(fmt::format("{}", x));
  if (double(float(x)) != x) return d;
  const std::string f = literal(fmt::format("{}", float(x)));
  return f.size() + 9 < d.size() ? "double(" + f + "f)" : d;
}

// `n` read as an integer the way `r` says; nothing where it is not one so.
std::optional<int64_t> read_as(const std::string& n, Reading r) {
  if (r.kind == Reading::Int) return int_value(n);
  const bool single = !n.empty() && (n.back() == 'f' || n.back() == 'F');
  double v = single ? double(std::strtof(n.c_str(), nullptr)) : std::strtod(n.c_str(), nullptr);
  if (r.kind == Reading::Scaled) v = std::ldexp(v, r.shift);  // exact
  if (r.kind == Reading::Whole || r.kind == Reading::Scaled) {
    if (std::fabs(v) < 9e15 && v == std::floor(v)) return int64_t(v);
    return std::nullopt;
  }
  const double num = r.num;
  if (v == 0 || !std::isfinite(num / v) || std::fabs(num / v) > 9e15) return std::nullopt;
  const int64_t k = std::llround(num / v);
  if (k != 0 && (single ? double(float(num / double(k))) == v : num / double(k) == v)) return k;
  return std::nullopt;
}

// The Ratio reading of `numbers` (floats, the first point's first), if any: over each
// whole k at the first point, at most 2^20, for which the others' values over the first
// one's make each of theirs whole too (to their precision), the numerators that give
// every value exactly, k at the first point included: 1, a decimal of 1 to 9 significant
// digits near k times the first value, that product or a double next to it; of an f32
// value, f32 numbers only (an f32 program's constants are folded in f32: 0.3 / B is
// 0.3f / B, 0.3f being 0.30000001192092896). The numerator of the fewest digits, then the
// least k: 0.1f / (B^2 + 1), not 1 / (10 B^2 + 10), and 0.5 / (3 B), not 0.16666667 / B,
// which give the same f32 values at the points tried and others elsewhere. A numerator
// 2^-j is written as 1 over 2^j k (the same doubles): 1 / (16 B), not 0.5 / (8 B).
std::optional<Reading> ratio_reading(const std::vector<std::string>& numbers) {
  const bool single = numbers[0].back() == 'f' || numbers[0].back() == 'F';
  std::vector<double> v;
  for (const std::string& n : numbers) v.push_back(std::strtod(n.c_str(), nullptr));
  for (double x : v)
    if (x == 0 || !std::isfinite(x)) return std::nullopt;
  std::optional<std::pair<int, Reading>> best;  // (digits, reading)
  for (int64_t k = 1; k <= (int64_t(1) << 20) && !(best && best->first == 1); ++k) {
    const double tol = std::min(0.01, double(k) * (single ? 1e-6 : 1e-13));
    bool whole = true;
    for (size_t s = 1; s < v.size() && whole; ++s) {
      const double ks = double(k) * (v[0] / v[s]);
      whole = std::fabs(ks - std::round(ks)) < tol;
    }
    if (!whole) continue;
    const double num = v[0] * double(k);
    std::vector<std::pair<double, int>> candidates = {{1.0, 1}};  // by their digits
    for (int digits = 1; digits <= 9; ++digits) {
      const double x = std::strtod(fmt::format("{:.{}g}", num, digits).c_str(), nullptr);
      candidates.push_back({single ? double(float(x)) : x, digits});
    }
    for (const double c : {num, std::nextafter(num, HUGE_VAL), std::nextafter(num, -HUGE_VAL)})
      candidates.push_back({c, 17});
    for (const auto& [c, digits] : candidates) {
      const Reading r{Reading::Ratio, 0, c};
      if ((best && digits >= best->first) || (single && double(float(c)) != c) || std::llround(c / v[0]) != k ||
          !std::all_of(numbers.begin(), numbers.end(), [&](const std::string& n) { return read_as(n, r).has_value(); }))
        continue;
      int e = 0;
      best = {digits,
              std::frexp(std::fabs(c), &e) == 0.5 && e <= 0 ? Reading{Reading::Ratio, 0, c < 0 ? -1.0 : 1.0} : r};
      break;
    }
  }
  if (!best) return std::nullopt;
  return best->second;
}

// The readings under which each of `numbers` is an integer, in this order: an integer
// literal's one; a float's whole value, its value times the least 2^shift that makes
// every one whole, and where neither is, its Ratio reading. Each with those integers.
std::vector<std::pair<Reading, std::vector<int64_t>>> read_all(const std::vector<std::string>& numbers) {
  std::vector<Reading> readings = {{Reading::Int, 0}};
  if (is_float_literal(numbers[0])) {
    readings = {{Reading::Whole, 0}};
    for (int shift = 1; shift <= 16; ++shift) readings.push_back({Reading::Scaled, shift});
  }
  std::vector<std::pair<Reading, std::vector<int64_t>>> out;
  for (Reading r : readings) {
    std::vector<int64_t> values;
    for (const std::string& n : numbers)
      if (std::optional<int64_t> v = read_as(n, r)) values.push_back(*v);
    if (values.size() != numbers.size()) continue;
    out.push_back({r, std::move(values)});
    if (r.kind == Reading::Scaled) break;  // the least shift (a larger one fits the same way)
  }
  if (out.empty() && is_float_literal(numbers[0]))
    if (const std::optional<Reading> r = ratio_reading(numbers)) {
      std::vector<int64_t> values;
      for (const std::string& n : numbers) values.push_back(*read_as(n, *r));
      out.push_back({*r, std::move(values)});
    }
  return out;
}

// The first of `reads` (read_all of one number at each of any_size_points(m)) whose
// integers are one polynomial of degree kAnyDegree or less in the sizes: fitted on the
// grid's points, checked at the rest. Where none is, `misfit` (if given) is the first
// point where the first reading's polynomial is not.
std::optional<std::pair<Reading, Polynomial>> fit_numbers(
    const std::vector<std::string>& vars, const std::vector<int64_t>& m,
    const std::vector<std::pair<Reading, std::vector<int64_t>>>& reads, size_t* misfit = nullptr) {
  const std::vector<std::vector<int64_t>> points = any_size_points(m);
  const size_t grid = points.size() - 2;
  for (size_t k = 0; k < reads.size(); ++k) {
    const std::vector<int64_t>& values = reads[k].second;
    std::vector<Rational> fit_values;
    for (size_t s = 0; s < grid; ++s) fit_values.push_back(Rational(values[s]));
    Polynomial poly = fit_on_grid(vars, m, kAnyDegree, fit_values, kAnyFirst);
    size_t s = 0;
    while (s < points.size() && poly.at(points[s]) == Rational(values[s])) ++s;
    // a Ratio's denominator has whole coefficients, but for one over it (1 / (B / 2) at
    // even B): an f32 value has other numerators over other k that give it at the points
    // by chance (0.1f / (B / 3) for 0.3f / B at B a multiple of 3), and elsewhere an f32
    // ulp apart
    const bool whole =
        reads[k].first.kind != Reading::Ratio || std::fabs(reads[k].first.num) == 1 ||
        std::all_of(poly.terms.begin(), poly.terms.end(), [](const auto& t) { return t.second.den == 1; });
    if (s == points.size() && whole) return std::pair{reads[k].first, std::move(poly)};
    if (k == 0 && misfit) *misfit = std::min(s, points.size() - 1);  // (all fit: a Ratio not whole)
  }
  return std::nullopt;
}

// Whether the end of a file's text is in a table of a 16-bit value's function (one begun
// and not ended): read as the text grows, each part once (a search of the whole text at
// each number made a large program's class for any size take minutes).
class InTable {
 public:
  bool operator()(const std::string& text) {
    static const std::string begin = "\nconst gradc::Table16<", end = "\n});";
    const size_t from = scanned_ > begin.size() ? scanned_ - begin.size() : 0;
    for (size_t t = text.find(begin, from); t != std::string::npos; t = text.find(begin, t + 1)) {
      table_ = t;
      open_ = true;
    }
    if (open_ &&
        text.find(end, std::max(table_, scanned_ > end.size() ? scanned_ - end.size() : 0)) != std::string::npos)
      open_ = false;
    scanned_ = text.size();
    return open_;
  }

 private:
  size_t scanned_ = 0, table_ = 0;
  bool open_ = false;
};

// "B = 89, D = 178"
std::string sizes_text(const std::vector<std::string>& vars, const std::vector<int64_t>& x) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < vars.size(); ++i) parts.push_back(fmt::format("{} = {}", vars[i], x[i]));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

AnySizeResult fit_any_size(const std::vector<std::string>& vars, const std::vector<int64_t>& m,
                           const std::vector<SizedFiles>& at, const std::string& class_name) {
  AnySizeResult r;
  if (at.size() != any_size_points(m).size())
    throw std::invalid_argument("fit_any_size: not the points of any_size_points");
  std::map<std::string, std::string> multiples;
  for (size_t i = 0; i < vars.size(); ++i) multiples["M_" + vars[i]] = std::to_string(m[i]);
  for (size_t f = 0; f < at[0].files.size(); ++f) {
    const GeneratedFile& first = at[0].files[f];
    std::vector<std::vector<Piece>> cut;
    for (const SizedFiles& s : at) {
      if (s.files.size() != at[0].files.size() || s.files[f].name != first.name) {
        r.why = fmt::format("at {} gradc writes other files", sizes_text(vars, s.sizes));
        return {{}, r.why};
      }
      const std::string stem = first.name.substr(0, first.name.rfind('.'));
      const FileKind kind = first.name.ends_with(".py")    ? FileKind::Python
                            : stem == class_name + "_main" ? FileKind::Main  // .cpp or .cu
                                                           : FileKind::Cpp;
      cut.push_back(pieces(s.files[f].text, stem.substr(stem.rfind('/') + 1), kind));
    }
    std::string text;
    InTable in_table;
    for (size_t p = 0; p < cut[0].size(); ++p) {
      const Piece& here = cut[0][p];
      for (size_t s = 1; s < cut.size(); ++s)
        if (cut[s].size() != cut[0].size() || cut[s][p].text != here.text ||
            cut[s][p].number.empty() != here.number.empty()) {
          // the first line that differs, as the first point's code has it
          const std::string& t0 = at[0].files[f].text;
          size_t pos = 0;  // where piece p starts in it
          for (size_t q = 0; q < p; ++q) pos += cut[0][q].text.size() + cut[0][q].number.size();
          const std::string& other = p < cut[s].size() ? cut[s][p].text : std::string();
          size_t k = 0;
          while (k < here.text.size() && k < other.size() && here.text[k] == other[k]) ++k;
          pos += k;
          const size_t nl = pos == 0 ? std::string::npos : t0.rfind('\n', pos - 1);
          const size_t start = nl == std::string::npos ? 0 : nl + 1;
          const size_t line = size_t(std::count(t0.begin(), t0.begin() + long(start), '\n')) + 1;
          std::string code = t0.substr(start, t0.find('\n', start) - start);
          code = code.substr(std::min(code.size(), code.find_first_not_of(' ')));
          if (code.size() > 100) code = code.substr(0, 100) + "...";
          r.why = fmt::format("{}, line {} ({}): the code at {} differs from the code at {} in more than its numbers",
                              first.name, line, code, sizes_text(vars, at[s].sizes), sizes_text(vars, at[0].sizes));
          return {{}, r.why};
        }
      text += here.text;
      if (here.number.empty()) continue;
      bool same = true;
      for (size_t s = 1; s < cut.size(); ++s) same = same && cut[s][p].number == here.number;
      if (same) {
        text += here.number;
        continue;
      }
      auto fail = [&](const char* what) {
        std::vector<std::string> values;
        for (size_t s = 0; s < cut.size(); ++s) values.push_back(cut[s][p].number);
        r.why = fmt::format("{}, line {}: the number {} ({} at the sizes tried: {}) {}", first.name, here.line,
                            here.number, sizes_text(vars, at[0].sizes), fmt::join(values, ", "), what);
      };
      if (here.context == Context::String) {
        fail("is in a string, and depends on the sizes");
        return {{}, r.why};
      }
      // The values as integers (read_all), then the polynomial through them.
      const bool is_float = is_float_literal(here.number);
      const bool single = !here.number.empty() && (here.number.back() == 'f' || here.number.back() == 'F');
      std::vector<std::string> numbers;
      for (size_t s = 0; s < cut.size(); ++s) numbers.push_back(cut[s][p].number);
      const auto reads = read_all(numbers);
      if (reads.empty()) {
        fail(is_float ? "is not a whole number, nor one over a power of 2 times one, nor one constant over "
                        "one, at every size"
                      : "is not an integer");
        return {{}, r.why};
      }
      size_t misfit = 0;  // the first point where the first reading's polynomial is not
      const auto fitted = fit_numbers(vars, m, reads, &misfit);
      if (!fitted) {
        fail(fmt::format("is no polynomial of degree {} or less in each size (checked at {})", kAnyDegree,
                         sizes_text(vars, at[misfit].sizes))
                 .c_str());
        return {{}, r.why};
      }
      const Reading how = fitted->first;
      const Polynomial& poly = fitted->second;
      if (here.context == Context::Comment) {
        text += poly.str();
        continue;
      }
      if (here.context == Context::Class || here.context == Context::Functor) {
        // a static's initializer is computed at the first call only, and a constant
        // array at the file's scope (the CUDA target's in device memory) has no sizes to
        // read: either at one size only
        const size_t bol = text.rfind('\n') + 1, code = text.find_first_not_of(' ', bol);
        if (code != std::string::npos && (text.compare(code, 7, "static ") == 0 ||
                                          (code == bol && (text.compare(code, 6, "const ") == 0 ||
                                                           text.compare(code, 17, "__device__ const ") == 0)))) {
          fail("is in a constant's initializer, and depends on the sizes");
          return {{}, r.why};
        }
        // a table's entries are computed when the program is loaded, at no size
        if (in_table(text)) {
          fail("is in a table of a 16-bit value's function, and depends on the sizes");
          r.in_table = true;
          r.files.clear();  // the files before this one
          return r;
        }
      }
      std::string e = poly.cpp_str(here.context == Context::Functor  ? "sz."
                                   : here.context == Context::Python ? ""
                                                                     : "sz_.");
      if (here.context == Context::Python) {  // Python's integer division
        if (is_float) {
          fail("is a float in Python code, and depends on the sizes");
          return {{}, r.why};
        }
        if (const size_t d = e.rfind(") / "); d != std::string::npos) e.replace(d, 4, ") // ");
      }
      // in parentheses, but where it stands alone between ( { [ , = and ) } ] , ;
      const size_t before = text.find_last_not_of(' ');
      const std::string& next = cut[0][p + 1].text;
      const size_t after = next.find_first_not_of(' ');
      const bool opens = before != std::string::npos &&
                         (std::string("({[,=").find(text[before]) != std::string::npos || text.ends_with(" return "));
      const bool alone =
          opens && after != std::string::npos && std::string(")}],;").find(next[after]) != std::string::npos &&
          !(text[before] == '=' && before > 0 && std::string("=!<>").find(text[before - 1]) != std::string::npos);
      const bool plain = poly.terms.size() <= 1 && e.find_first_of("*/ ") == std::string::npos;
      if (!plain && !alone && !is_float) e = "(" + e + ")";
      if (!is_float)
        text += e;
      else if (how.kind == Reading::Ratio)  // the numerator as the double it is: {} round-trips
        text += single ? fmt::format("float({} / double({}))", double_literal(how.num), e)
                       : fmt::format("({} / double({}))", double_literal(how.num), e);
      else if (how.kind == Reading::Scaled)  // exact: a whole number over a power of 2
        text += single ? fmt::format("float(double({}) / {}.0)", e, int64_t(1) << how.shift)
                       : fmt::format("(double({}) / {}.0)", e, int64_t(1) << how.shift);
      else
        text += fmt::format("{}({})", single ? "float" : "double", e);
    }
    r.files.push_back({first.name, fill(text, multiples)});
  }
  return r;
}

namespace {

// What the program's texts at the grid's points share: the first point's text cut at
// its numbers, and each number's polynomial in the sizes (nothing where it is the same
// at every point, or where it is no polynomial: a float such as 0.5/B, left unchecked).
struct TextModel {
  std::vector<Piece> cut;
  std::vector<std::optional<std::pair<Reading, Polynomial>>> poly;  // per piece
  std::vector<bool> checked;                                        // per piece
};

std::optional<TextModel> model_of(const std::vector<std::string>& vars, const std::vector<int64_t>& m,
                                  const std::vector<std::string>& texts) {
  std::vector<std::vector<Piece>> cut;
  for (const std::string& t : texts) cut.push_back(pieces(t, "", FileKind::Cpp));
  TextModel model{cut[0], {}, {}};
  for (size_t p = 0; p < cut[0].size(); ++p) {
    for (size_t s = 1; s < cut.size(); ++s)
      if (cut[s].size() != cut[0].size() || cut[s][p].text != cut[0][p].text ||
          cut[s][p].number.empty() != cut[0][p].number.empty())
        return std::nullopt;
    std::vector<std::string> numbers;
    for (size_t s = 0; s < cut.size(); ++s) numbers.push_back(cut[s][p].number);
    model.poly.emplace_back();
    model.checked.push_back(true);
    if (std::all_of(numbers.begin(), numbers.end(), [&](const std::string& n) { return n == numbers[0]; })) continue;
    if (auto fitted = fit_numbers(vars, m, read_all(numbers)))
      model.poly.back() = std::move(*fitted);
    else
      model.checked.back() = false;
  }
  return model;
}

// Where the program's text at `x` is not the model's (empty where it is).
std::string differs(const TextModel& model, const std::vector<int64_t>& x, const std::string& text) {
  const std::vector<Piece> cut = pieces(text, "", FileKind::Cpp);
  if (cut.size() != model.cut.size()) return "its IR has other ops";
  for (size_t p = 0; p < cut.size(); ++p) {
    const Piece& want = model.cut[p];
    if (cut[p].text != want.text || cut[p].number.empty() != want.number.empty())
      return fmt::format("its IR differs at line {} in more than its numbers", cut[p].line);
    if (want.number.empty() || !model.checked[p]) continue;
    const auto& poly = model.poly[p];
    const std::optional<int64_t> v = poly ? read_as(cut[p].number, poly->first) : std::nullopt;
    if (poly ? !v || !(poly->second.at(x) == Rational(*v)) : cut[p].number != want.number)
      return fmt::format("line {} of its IR has {} where the formula gives {}", cut[p].line, cut[p].number,
                         poly ? poly->second.at(x).str() : want.number);
  }
  return "";
}

}  // namespace

LeastSizes least_sizes(const std::vector<std::string>& vars, const std::vector<int64_t>& m,
                       const std::function<std::optional<std::string>(const std::vector<int64_t>&)>& program_at) {
  LeastSizes r;
  const std::vector<std::vector<int64_t>> points = any_size_points(m);
  std::vector<std::string> texts;
  for (const std::vector<int64_t>& x : points) {
    std::optional<std::string> t = program_at(x);
    if (!t) throw std::invalid_argument("least_sizes: the program is none at a point the class was fitted at");
    texts.push_back(std::move(*t));
  }
  const std::optional<TextModel> model = model_of(vars, m, texts);
  std::vector<int64_t> first;  // the grid's first point
  for (int64_t mi : m) first.push_back(mi * kAnyFirst);
  r.least = first;
  if (!model) {  // the IR has another form at the grid's points: the class is checked there alone
    r.why = fmt::format("the program's IR at {} differs from the IR at {} in more than its numbers",
                        sizes_text(vars, points.back()), sizes_text(vars, first));
    return r;
  }
  auto is_model = [&](const std::vector<int64_t>& x) {
    const std::optional<std::string> t = program_at(x);
    return t ? differs(*model, x, *t) : "the program is none there";
  };
  for (size_t i = 0; i < vars.size(); ++i) {
    std::vector<int64_t> x = first;
    for (int64_t t : {200, 1000, 10000, 100000}) {
      x[i] = m[i] * t;
      if (std::string d = is_model(x); !d.empty()) {
        r.why = fmt::format("at {} the program is another than at {} ({})", sizes_text(vars, x),
                            sizes_text(vars, first), d);
        return r;
      }
    }
    int64_t t = kAnyFirst - 1;
    for (; t >= 1; --t) {
      x[i] = m[i] * t;
      if (!is_model(x).empty()) break;
    }
    r.least[i] = m[i] * (t + 1);
  }
  // the sizes each at its least: where the program is another there, the grid's first
  if (vars.size() > 1 && !is_model(r.least).empty()) r.least = first;
  return r;
}

}  // namespace gradc
