// The op table's self-check, the random generator, .npy, and the IR's text form.
#include <filesystem>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include "codegen/any_size.h"
#include "frontend/ir_reader.h"
#include "ir/print.h"
#include "ir/rules.h"
#include "ops/register.h"
#include "passes/lower_kernels.h"
#include "passes/pass.h"
#include "runtime/blas_kernels.h"
#include "runtime/npy.h"
#include "runtime/plan.h"
#include "support/file.h"
#include "support/name_map.h"
#include "support/polynomial.h"

#include "ir/dtype.h"
#include "ir/scalar.h"
#include "util.h"

namespace gradc::test {
namespace {

TEST_CASE("every op has the rules it needs") {
  CHECK(missing_rules().empty());
  {  // an op without its lowering is named by the self-check
    ScopedOverride<KernelForm> swap(kernel_forms(), Op::Tanh, KernelForm::None);
    REQUIRE(missing_rules().size() == 1);
    CHECK(missing_rules()[0] == "tanh: no lowering (kernel form)");
  }
  for (int i = 0; i < kNumOps; ++i) CHECK(op_by_name(op_name(Op(i))) == Op(i));
}

TEST_CASE("a place with its def calls: printed, read back, the same chain the same site") {
  const int outer = call_site("block", Loc{15, 5});
  const int inner = call_site("norm", Loc{12, 10, outer});
  CHECK(inner != outer);
  CHECK(call_site("norm", Loc{12, 10, outer}) == inner);  // interned
  const Loc at{9, 12, inner};
  const std::string text = loc_str("p.dg", at);
  CHECK(text == "p.dg:9:12 in `norm` called at p.dg:12:10 in `block` called at p.dg:15:5");
  CHECK(loc_str("p.dg", at, false) == "p.dg:9 in `norm` called at p.dg:12 in `block` called at p.dg:15");
  size_t used = 0;
  const std::string message = text + ": cross_entropy: label 6";
  const Loc back = parse_loc_str("p.dg", message.c_str() + 5, &used);  // after "p.dg:"
  CHECK(back.line == 9);
  CHECK(back.col == 12);
  CHECK(back.site == inner);
  CHECK(message.substr(5 + used) == ": cross_entropy: label 6");
  CHECK(Loc{1, 100000}.col == 65535);  // columns saturate
  CHECK(parse_loc_str("p.dg", "x:1", &used).line == 0);
  CHECK(used == 0);
}

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors") {
  using A4 = std::array<uint32_t, 4>;
  auto philox = [](A4 c, uint32_t k0, uint32_t k1) {
    Philox4 r = philox4x32(Philox4{{c[0], c[1], c[2], c[3]}}, k0, k1);
    return A4{r.v[0], r.v[1], r.v[2], r.v[3]};
  };
  CHECK(philox({0, 0, 0, 0}, 0, 0) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffff, 0xffffffff) ==
        A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0xa4093822, 0x299f31d0) ==
        A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("randn and rand: same seed, same values on every rank; statistics") {
  auto o =
      run("a = randn([20000], seed=7)\nb = rand([20000], seed=7)\nc = randn([4], seed=7 + rank)\noutput a, b, c\n", 3);
  for (int r = 1; r < 3; ++r) {
    CHECK(out(o, r, "a").same_values(out(o, 0, "a")));
    CHECK(out(o, r, "b").same_values(out(o, 0, "b")));
    CHECK(!out(o, r, "c").same_values(out(o, 0, "c")));
  }
  // rank 1's seed-8 values are the seed-8 stream.
  auto o8 = run("c = randn([4], seed=8)\noutput c\n", 1);
  CHECK(out(o, 1, "c").same_values(out(o8, 0, "c")));
  double sa = 0, sa2 = 0, sb = 0, bmin = 1, bmax = 0;
  const Tensor& a = out(o, 0, "a");
  const Tensor& b = out(o, 0, "b");
  for (int64_t i = 0; i < a.size(); ++i) {
    sa += a.get(i);
    sa2 += a.get(i) * a.get(i);
    sb += b.get(i);
    bmin = std::min(bmin, b.get(i));
    bmax = std::max(bmax, b.get(i));
  }
  double n = double(a.size());
  CHECK(std::abs(sa / n) < 0.03);        // mean 0 (sd of the mean: 0.007)
  CHECK(std::abs(sa2 / n - 1) < 0.05);   // variance 1
  CHECK(std::abs(sb / n - 0.5) < 0.01);  // uniform mean 1/2
  CHECK(bmin >= 0);
  CHECK(bmax < 1);
}

TEST_CASE(".npy: round trip and the errors of bad files") {
  for (DType dt : {DType::F32, DType::F64, DType::I32})
    for (Shape s : {Shape{}, Shape{5}, Shape{2, 3}, Shape{2, 0, 4}}) {
      Tensor t = make(Type{dt, s}, [](int64_t i) { return double(i) - 2.5 * double(i % 2); });
      std::string bytes = npy_bytes(t);
      CHECK(bytes.size() % 16 == (size_t(t.size()) * size_t(dtype_size(dt))) % 16);  // header is 64-aligned
      CHECK(parse_npy(bytes, "t.npy").same_values(t));
    }
  Tensor t = make(Type{DType::F32, {2, 2}}, [](int64_t i) { return double(i); });
  std::string b = npy_bytes(t);
  CHECK(b.substr(10, 60).find("'shape': (2, 2)") != std::string::npos);
  CHECK(npy_bytes(make(Type{DType::F32, {3}}, [](int64_t) { return 0.0; })).find("(3,)") != std::string::npos);
  auto error_of = [](const std::string& bytes) -> std::string {
    try {
      parse_npy(bytes, "f.npy");
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of("hello") == "f.npy: not a .npy file");
  CHECK(error_of(b.substr(0, b.size() - 3)) == "f.npy: truncated: f32[2, 2] needs 16 bytes of data, the file has 13");
  std::string i8 = b;
  i8.replace(i8.find("<f4"), 3, "|c8");
  CHECK(error_of(i8) == "f.npy: unsupported dtype '|c8' (gradc reads floats, integers and bools)");
  // Fortran order: the bytes of [[0, 1], [2, 3]] read column-major are [[0, 2], [1, 3]].
  std::string fortran = b;
  fortran.replace(fortran.find("False"), 5, "True ");
  check_values(parse_npy(fortran, "f.npy"), {0, 2, 1, 3});
  // Big-endian i64 [1, -2] becomes i32.
  std::string be = std::string("\x93NUMPY\x01\x00", 8);
  std::string h = "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }";
  h += std::string(64 - (10 + h.size() + 1) % 64, ' ') + "\n";
  be += char(h.size()) + std::string(1, '\0') + h;
  be += std::string("\0\0\0\0\0\0\0\x01", 8) + std::string("\xff\xff\xff\xff\xff\xff\xff\xfe", 8);
  Tensor ints = parse_npy(be, "be.npy");
  CHECK(ints.dtype() == DType::I32);
  check_values(ints, {1, -2});
}

// f32 to bf16 and f16, against references that compute differently: the nearer of the
// two neighbours, measured in double (ties to the even one), and the compiler's own
// _Float16 conversion. Every sign, exponent and high mantissa bits (the high 16 bits),
// with low bits at the ties, beside them and at random.
uint16_t nearest_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if (f != f) return uint16_t((u >> 16) | 0x40);
  const uint32_t lo = u & 0xFFFF0000u;  // toward zero
  if (lo == u) return uint16_t(u >> 16);
  auto value = [](uint32_t bits) {
    float x;
    memcpy(&x, &bits, 4);
    return std::fabs(double(x));
  };
  // above the largest finite value the next one is 2^128, which rounds to infinity
  const double below = value(lo),
               above = (lo & 0x7FFFFFFFu) == 0x7F7F0000u ? std::ldexp(1.0, 128) : value(lo + 0x10000u);
  const double a = std::fabs(double(f));
  const uint16_t down = uint16_t(lo >> 16), up = uint16_t(down + 1);
  if (a - below != above - a) return a - below < above - a ? down : up;
  return down & 1 ? up : down;
}

TEST_CASE("OpenBLAS's kernels are chosen again only where they are narrower than the CPU's vectors") {
  // (OpenBLAS's choice, AVX-512, AVX2 and FMA): the kernels gradc asks for, or none
  CHECK(std::string(wider_blas_kernels("Prescott", true, true)) == "SkylakeX");  // a Xeon OpenBLAS 0.3.21 does not know
  CHECK(std::string(wider_blas_kernels("Haswell", true, true)) == "SkylakeX");
  CHECK(std::string(wider_blas_kernels("Zen", true, true)) == "SkylakeX");
  CHECK(wider_blas_kernels("SkylakeX", true, true) == nullptr);
  CHECK(wider_blas_kernels("Cooperlake", true, true) == nullptr);  // OpenBLAS's choice on a Zen 5
  CHECK(wider_blas_kernels("SapphireRapids", true, true) == nullptr);
  CHECK(std::string(wider_blas_kernels("Prescott", false, true)) == "Haswell");
  CHECK(std::string(wider_blas_kernels("Sandybridge", false, true)) == "Haswell");
  CHECK(wider_blas_kernels("Zen", false, true) == nullptr);
  CHECK(wider_blas_kernels("Excavator", false, true) == nullptr);
  CHECK(wider_blas_kernels("SkylakeX", false, true) == nullptr);  // OPENBLAS_CORETYPE's, on a smaller CPU: left
  CHECK(wider_blas_kernels("Prescott", false, false) == nullptr);
  // and in this process: OpenBLAS now runs kernels at least as wide as the CPU's vectors
  const BlasKernels& k = choose_blas_kernels();
  CHECK(!k.openblas.empty());
  if (!getenv("OPENBLAS_CORETYPE")) {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    CHECK(wider_blas_kernels(openblas_get_corename(), avx512,
                             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) == nullptr);
    CHECK(getenv("OPENBLAS_CORETYPE") == nullptr);  // set for OpenBLAS to read, then unset
  }
}

TEST_CASE("bf16 and f16 rounding: round-to-nearest-even on every exponent, NaNs kept NaN") {
  std::mt19937 rng(7);
  std::vector<uint32_t> lows = {0, 1, 0x0FFF, 0x1000, 0x1001, 0x3FFF, 0x7FFF, 0x8000, 0x8001, 0xC000, 0xFFFF};
  for (int k = 0; k < 8; ++k) lows.push_back(rng() & 0xFFFF);
  int64_t checked = 0, bf16_wrong = 0, f16_wrong = 0;
  for (uint32_t high = 0; high < 0x10000u; ++high)
    for (uint32_t low : lows) {
      const uint32_t u = high << 16 | low;
      float f;
      memcpy(&f, &u, 4);
      if (bf16_bits(f) != nearest_bf16(f) && bf16_wrong++ < 5) MESSAGE(fmt::format("bf16 of {:08x}", u));
      const _Float16 h = static_cast<_Float16>(f);
      uint16_t want;
      memcpy(&want, &h, 2);
      if (f != f) want = uint16_t((u >> 16 & 0x8000u) | 0x7E00u);  // one NaN, its sign kept
      if (f16_bits(f) != want && f16_wrong++ < 5) MESSAGE(fmt::format("f16 of {:08x}", u));
      ++checked;
    }
  CHECK(checked == 65536 * int64_t(lows.size()));
  CHECK(bf16_wrong == 0);
  CHECK(f16_wrong == 0);
  // the round trip is exact on every bf16 and f16 value but NaNs
  int64_t changed = 0;
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float x = bf16_value(uint16_t(b)), y = f16_value(uint16_t(b));
    changed += (x == x && bf16_bits(x) != b) + (y == y && f16_bits(y) != b);
  }
  CHECK(changed == 0);
}

TEST_CASE("textual IR round-trips: print, parse, print gives the same text") {
  for (const auto& entry : std::filesystem::directory_iterator(GRADC_SOURCE_DIR "/examples")) {
    if (entry.path().extension() != ".dg") continue;
    CAPTURE(entry.path().string());
    Graph g = compile(read_file(entry.path().string()));
    std::string text = print_text(g);
    CHECK(print_text(parse_text(text)) == text);
  }
}

TEST_CASE("textual IR: the reader checks types and names") {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_text(text);
    } catch (const UserError& e) {
      return fmt::format("{}:{}: {}", e.loc.line, e.loc.col, e.what());
    }
    return "";
  };
  CHECK(error_of("world 2\n%a = rank() : i32[]\n%b = neg(%c) : i32[]\n") == "3:10: unknown value %c");
  CHECK(error_of("%a = rank() : f32[]\n") == "1:15: rank: declared type f32[] but the operands give i32[]");
  CHECK(error_of("%a = frob() : f32[]\n") == "1:6: unknown op 'frob'");
  CHECK(error_of("%a = rank() : i32[]\n%a = rank() : i32[]\n") == "2:1: %a is defined twice");
  CHECK(error_of("world 2\n%x = const() {value=[1, 2]} : f32[4]\n") == "2:6: const: 2 values for f32[4]");
}

TEST_CASE("NameMap: bind, find, erase and bind again, grow, in order") {
  NameMap<int> m;
  auto x = [](int i) { return fmt::format("x{}", i); };
  CHECK(m.empty());
  CHECK(m.find("x") == nullptr);
  for (int i = 0; i < 1000; ++i) {  // grows from 16 slots, past many rehashes
    auto [v, fresh] = m.try_emplace(x(i), i);
    CHECK(fresh);
    CHECK(*v == i);
  }
  const int* x7 = m.find("x7");  // entries stay in place as the table grows
  for (int i = 1000; i < 5000; ++i) m.try_emplace(x(i), i);
  CHECK(m.find("x7") == x7);
  auto [old, fresh] = m.try_emplace("x42", -1);  // bound already: the old value stays
  CHECK(!fresh);
  CHECK(*old == 42);
  m.erase("x42");
  CHECK(m.find("x42") == nullptr);
  CHECK(m.try_emplace("x42", 7).second);  // bound again after erase: the new value
  CHECK(*m.find("x42") == 7);
  m.set("x43", 8);
  CHECK(*m.find("x43") == 8);
  m.erase("x0");
  std::vector<std::string> keys;
  m.for_each([&](const std::string& k, int) { keys.push_back(k); });
  REQUIRE(keys.size() == 4999);
  CHECK(keys[0] == "x1");  // first-bound order; an erased name is left out
  CHECK(keys[41] == "x42");
  CHECK(keys.back() == "x4999");
  CHECK(m.find("") == nullptr);
  CHECK(m.try_emplace("", 3).second);  // the empty name is a name too
  CHECK(*m.find("") == 3);
}

}  // namespace

TEST_CASE("polynomials fitted on a grid: exact coefficients, the text gradc cost prints") {
  // p(B, C) = 3/4 B^2 C - 5 B + 7, sampled at B, C = m t, t = 1..4 (C's t fastest).
  auto p = [](int64_t b, int64_t c) { return Rational(3 * b * b * c, 4) - Rational(5 * b) + Rational(7); };
  for (std::vector<int64_t> m : {std::vector<int64_t>{1, 1}, {3, 3}, {16, 2}}) {
    std::vector<Rational> values;
    for (int64_t tb = 1; tb <= 4; ++tb)
      for (int64_t tc = 1; tc <= 4; ++tc) values.push_back(p(m[0] * tb, m[1] * tc));
    const Polynomial fit = fit_on_grid({"B", "C"}, m, 3, values);
    CHECK(fit.str() == "3*B^2*C/4 - 5*B + 7");
    CHECK(fit.terms.size() == 3);
    CHECK(fit.at({11, 13}) == p(11, 13));  // off the grid too
  }
  // A cubic in one variable, and the zero polynomial.
  std::vector<Rational> cubic, zero(4);
  for (int64_t t = 1; t <= 4; ++t) cubic.push_back(Rational(t * t * t - 2 * t));
  CHECK(fit_on_grid({"T"}, {1}, 3, cubic).str() == "T^3 - 2*T");
  CHECK(fit_on_grid({"T"}, {1}, 3, zero).str() == "0");
  CHECK(fit_on_grid({"T"}, {2}, 3, {Rational(-1), Rational(-1), Rational(-1), Rational(-1)}).str() == "-1");
  // Counts computed in double: bytes averaged over 3 ranks, and what is no fraction.
  CHECK(rational_of(1024.0 * 2 / 3) == Rational(2048, 3));
  CHECK(rational_of(96.0) == Rational(96));
  CHECK(!rational_of(0.1234567890123));
  CHECK(Rational(6, -4).str() == "-3/2");
}

TEST_CASE("the grid's points and the least multiples at which a fit works") {
  // B at 2t and C at 3t, t = 1..2 (C's fastest), then (10, 15) and (14, 15).
  CHECK(grid_points({2, 3}, 1, 1, 5, 7) ==
        std::vector<std::vector<int64_t>>{{2, 3}, {2, 6}, {4, 3}, {4, 6}, {10, 15}, {14, 15}});
  // What works: B a multiple of 4 and C any; then B of 3 and C of 2 (6 found first,
  // then each made as small as works); nothing.
  const std::vector<int64_t> candidates = {1, 2, 4, 8, 3, 6};
  std::vector<std::vector<int64_t>> tried;
  auto divisible = [&](int64_t b, int64_t c) {
    return [&tried, b, c](const std::vector<int64_t>& m) {
      tried.push_back(m);
      return m[0] % b == 0 && m[1] % c == 0;
    };
  };
  CHECK(least_multiples(2, candidates, divisible(4, 1)) == std::vector<int64_t>{4, 1});
  CHECK(tried == std::vector<std::vector<int64_t>>{{1, 1}, {2, 2}, {4, 4}, {1, 4}, {2, 4}, {4, 1}});
  CHECK(least_multiples(2, candidates, divisible(3, 2)) == std::vector<int64_t>{3, 2});
  CHECK(!least_multiples(2, candidates, divisible(5, 1)));
}

TEST_CASE("polynomials fitted away from the origin, written as C++ (gradc emit --size B=any)") {
  // p(B, C) = 3/4 B^2 C - 5 B + 7 at B, C = m t, t = 89..92 (where the class for any size
  // is generated), then as an integer expression: its values are integers at even B.
  auto p = [](int64_t b, int64_t c) { return Rational(3 * b * b * c, 4) - Rational(5 * b) + Rational(7); };
  std::vector<Rational> values;
  for (int64_t tb = 89; tb <= 92; ++tb)
    for (int64_t tc = 89; tc <= 92; ++tc) values.push_back(p(2 * tb, tc));
  const Polynomial fit = fit_on_grid({"B", "C"}, {2, 1}, 3, values, 89);
  CHECK(fit.str() == "3*B^2*C/4 - 5*B + 7");
  CHECK(fit.cpp_str("sz.") == "(3*sz.B*sz.B*sz.C - 20*sz.B + 28) / 4");
  CHECK(fit.at({6, 5}) == p(6, 5));
  // integer coefficients need no division; a lone variable, a negative term, zero
  std::vector<Rational> line;
  for (int64_t t = 89; t <= 92; ++t) line.push_back(Rational(16 * t - 3));
  CHECK(fit_on_grid({"B"}, {1}, 3, line, 89).cpp_str("sz_.") == "16*sz_.B - 3");
  CHECK(fit_on_grid({"B"}, {1}, 3, {Rational(89), Rational(90), Rational(91), Rational(92)}, 89).cpp_str("") == "B");
  CHECK(fit_on_grid({"B"}, {1}, 3, std::vector<Rational>(4), 89).cpp_str("") == "0");
  CHECK(fit_on_grid({"B"}, {1}, 3, std::vector<Rational>(4, Rational(-5)), 89).cpp_str("") == "-5");
}

}  // namespace gradc::test

namespace gradc::test {

TEST_CASE("a class for any size: the numbers that differ become formulas, where they are") {
  // Texts made at each point as the emitter would make them: a functor's stride, a
  // class's count, a mean's divisor (1/n), a comment's shape and a number that does
  // not change.
  auto files_at = [](int64_t b, const std::string& extra) {
    const std::string text = fmt::format(
        "// x: f32[{0}, 16]\nnamespace c_kernels {{\nstruct k {{ int f(int o) const {{ return o * {1} + 3; }} }};\n"
        "}}  // namespace c_kernels\nvoid c::run() {{\n  gradc::map(stream_, {1}, k{{rank_, sz_}}, out);\n"
        "  float m = {2}f;  // 1 / {1}\n  check(@M_B@);{3}\n}}\n",
        b, 16 * b, fmt::format("{}", float(1.0 / double(16 * b))), extra);
    return std::vector<GeneratedFile>{{"c.cpp", text}};
  };
  std::vector<SizedFiles> at;
  for (const std::vector<int64_t>& x : any_size_points({2})) at.push_back({x, files_at(x[0], "")});
  const AnySizeResult r = fit_any_size({"B"}, {2}, at, "c");
  REQUIRE(r.why.empty());
  CHECK(r.files[0].text ==
        "// x: f32[B, 16]\nnamespace c_kernels {\nstruct k { int f(int o) const { return o * (16*sz.B) + 3; } };\n"
        "}  // namespace c_kernels\nvoid c::run() {\n  gradc::map(stream_, 16*sz_.B, k{rank_, sz_}, out);\n"
        "  float m = float(1.0 / double(16*sz_.B));  // 1 / 16*B\n  check(2);\n}\n");
  // a number in a string that depends on the size; code of another form at one point
  std::vector<SizedFiles> in_string, other_form;
  for (const std::vector<int64_t>& x : any_size_points({1})) {
    in_string.push_back({x, files_at(x[0], fmt::format(" f(\"{}\");", x[0]))});
    other_form.push_back({x, files_at(x[0], x[0] == 90 ? " g();" : "")});
  }
  CHECK(fit_any_size({"B"}, {1}, in_string, "c").why.find("is in a string, and depends on the sizes") !=
        std::string::npos);
  const AnySizeResult o = fit_any_size({"B"}, {1}, other_form, "c");
  CHECK(o.files.empty());
  CHECK(o.why ==
        "c.cpp, line 8 (check(@M_B@);): the code at B = 90 differs from the code at B = 89 in more "
        "than its numbers");
}

TEST_CASE("a class for any size: a float that is a whole number over a power of 2 is one, exactly") {
  // B / 4 (a sum over B as a mean over 4 ranks) and 3B / 8 in f32, as the emitter prints
  // them; B / 10 is no such number, and says so
  auto files_at = [](int64_t b, double tenth) {
    const std::string text =
        fmt::format("void c::run() {{\n  double q = {};\n  float e = {}f;\n  double t = {};\n}}\n", double(b) * 0.25,
                    float(3 * b) / 8.0f, tenth == 1.0 ? fmt::format("{}.0", b) : fmt::format("{}", double(b) * tenth));
    return std::vector<GeneratedFile>{{"c.cpp", text}};
  };
  std::vector<SizedFiles> at, tenth;
  for (const std::vector<int64_t>& x : any_size_points({1})) {
    at.push_back({x, files_at(x[0], 1.0)});
    tenth.push_back({x, files_at(x[0], 0.1)});
  }
  const AnySizeResult r = fit_any_size({"B"}, {1}, at, "c");
  REQUIRE(r.why.empty());
  CHECK(r.files[0].text ==
        "void c::run() {\n  double q = (double(sz_.B) / 4.0);\n  float e = float(double(3*sz_.B) / 8.0);\n"
        "  double t = double(sz_.B);\n}\n");
  CHECK(fit_any_size({"B"}, {1}, tenth, "c")
            .why.find("nor one over a power of 2 times one, nor one constant over "
                      "one, at every size") != std::string::npos);
}

TEST_CASE("least_sizes: the least size at which the program's numbers are the formulas'") {
  // a slice x[2:5] of an axis of B (clamped below B = 5), a mean's 1/B, a value id
  auto program = [](int64_t b, int64_t clamp_above) -> std::optional<std::string> {
    if (b < 2) return std::nullopt;  // an index out of range: no program
    const int64_t end = std::min<int64_t>(5, b), top = std::min<int64_t>(b, clamp_above);
    return fmt::format(
        "%1 = input() : f32[{}]\n%2 = slice(%1) {{ends=[{}], starts=[2]}} : f32[{}]\n"
        "%3 = const() {{value={}}} : f32[]\n",
        top, end, end - 2, 1.0 / double(b));
  };
  const LeastSizes one = least_sizes({"B"}, {1}, [&](const std::vector<int64_t>& x) { return program(x[0], 1 << 30); });
  CHECK(one.why.empty());
  CHECK(one.least == std::vector<int64_t>{5});
  // at multiples of 3: 6 is the least (3 is below 5)
  CHECK(least_sizes({"B"}, {3}, [&](const std::vector<int64_t>& x) { return program(x[0], 1 << 30); }).least ==
        std::vector<int64_t>{6});
  // a change above the grid: the axis stops growing at B = 5000
  const LeastSizes upper = least_sizes({"B"}, {1}, [&](const std::vector<int64_t>& x) { return program(x[0], 5000); });
  CHECK(upper.why ==
        "at B = 10000 the program is another than at B = 89 (line 1 of its IR has 5000 where the "
        "formula gives 10000)");
  // two sizes: each its own least (D's slice x[0:3] of an axis of D), the other at the grid
  const LeastSizes two =
      least_sizes({"B", "D"}, {1, 2}, [&](const std::vector<int64_t>& x) -> std::optional<std::string> {
        std::optional<std::string> t = program(x[0], 1 << 30);
        if (t) *t += fmt::format("%4 = input() : f32[{}, {}]\n", std::min<int64_t>(3, x[1]), x[0] * x[1]);
        return t;
      });
  CHECK(two.why.empty());
  CHECK(two.least == std::vector<int64_t>{5, 4});
}

// The kernels of the other stream that kernel j is ordered after, for each plan of the
// buffers' bytes: a kernel on one stream that uses memory a kernel on the other used
// before it must wait for that kernel or a later one of its stream (streams run in
// order). The number of such hazards over `trials` random plans where the waits miss one.
static int missed_hazards(const Lowered& l, int trials, int& hazards) {
  const size_t K = l.kernels.size(), nb = l.buffers.size();
  std::vector<int> after(K, -1);  // per kernel: the last kernel of the other stream waited for
  int waited[2] = {-1, -1};
  for (size_t j = 0; j < K; ++j) {
    for (int w : l.kernels[j].waits) waited[l.kernels[j].stream] = std::max(waited[l.kernels[j].stream], w);
    after[j] = waited[l.kernels[j].stream];
  }
  std::mt19937 rng(7);
  int missed = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<int64_t> bytes(nb), offset(nb, 0);
    for (int64_t& b : bytes) b = 1 + int64_t(rng() % 4096);
    plan_first_fit(l.plan_steps.data(), l.plan_steps.size(), bytes.data(), offset.data());
    auto overlap = [&](int a, int b) {
      a = base_buffer(l, a), b = base_buffer(l, b);
      if (a == b) return true;
      if (l.buffers[size_t(a)].kind != LBuffer::Work || l.buffers[size_t(b)].kind != LBuffer::Work) return false;
      return offset[size_t(a)] < offset[size_t(b)] + bytes[size_t(b)] &&
             offset[size_t(b)] < offset[size_t(a)] + bytes[size_t(a)];
    };
    for (size_t j = 0; j < K; ++j)
      for (size_t i = 0; i < j; ++i) {
        const LKernel &ki = l.kernels[i], &kj = l.kernels[j];
        if (ki.stream == kj.stream) continue;
        bool hazard = overlap(ki.out, kj.out);
        for (int r : kj.reads) hazard |= overlap(ki.out, r);
        for (int r : ki.reads) hazard |= overlap(r, kj.out);
        if (!hazard) continue;
        ++hazards;
        if (after[j] < int(i)) ++missed;
      }
  }
  return missed;
}

TEST_CASE("a class for any size: its stream waits hold for every buffer plan (lower_kernels any_size)") {
  // The CUDA class for any size plans its workspace at run time, for the sizes set: its
  // waits must cover every plan the first fit can make of the same steps.
  const std::string src =
      "world 2\nsize B = 4\ninput x : f32[B, 16] = randn([B, 16], seed=rank)\n"
      "input w : f32[16, 8] shared = randn([16, 8], seed=1) / 4\n"
      "z = normalize(tanh(matmul(x, w)), axis=-1)\nall_z = all_gather(z, axis=0)\n"
      "logits = matmul(z, transpose(all_z)) / 0.1\ncontrast = cross_entropy(logits, iota(B) + B * rank)\n"
      "h = layer_norm(matmul(x, w))\nstats = all_reduce(sum(h, axis=0)) / (B * 2)\n"
      "loss = contrast + sum(stats * stats) + mean(softmax(h, axis=0) * h)\n"
      "dw, dx = grad(loss, w, x, mode=mean)\noutput loss, dw, dx\n";
  PipelineOptions po;
  po.any_size = true;
  Lowered l = lowered(run_pipeline(test::compile(src), Pipeline::Grad), po);
  REQUIRE(std::count_if(l.kernels.begin(), l.kernels.end(),
                        [](const LKernel& k) { return k.stream == LKernel::Communication; }) >= 4);
  int hazards = 0;
  CHECK(missed_hazards(l, 300, hazards) == 0);
  CHECK(hazards > 1000);
  // without its waits, the same kernels miss hazards: the check can fail
  for (LKernel& k : l.kernels) k.waits.clear();
  CHECK(missed_hazards(l, 300, hazards) > 0);
}

}  // namespace gradc::test
