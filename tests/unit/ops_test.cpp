// Local ops (docs/language.md section 4) against values computed by hand or by
// independent loops here; dtype promotion and broadcasting; the language's rules.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "passes/pass.h"
#include "util.h"

namespace gradc::test {
namespace {

Tensor run1(const std::string& src, const std::string& name = "y") { return out(run(src, 1), 0, name); }

TEST_CASE("elementwise ops on f32 against <cmath>") {
  const std::vector<double> x = {-2.0, -0.5, 0.0, 0.25, 1.5, 3.0};
  struct U {
    const char* name;
    double (*f)(double);
  };
  const U ops[] = {{"neg", [](double v) { return -v; }},
                   {"exp", [](double v) { return std::exp(v); }},
                   {"abs", [](double v) { return std::fabs(v); }},
                   {"relu", [](double v) { return v > 0 ? v : 0.0; }},
                   {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }},
                   {"tanh", [](double v) { return std::tanh(v); }},
                   {"sin", [](double v) { return std::sin(v); }},
                   {"cos", [](double v) { return std::cos(v); }},
                   {"square", [](double v) { return v * v; }},
                   {"sign", [](double v) { return double((v > 0) - (v < 0)); }}};
  for (const U& u : ops) {
    CAPTURE(u.name);
    Tensor y = run1(fmt::format("x = [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]\ny = {}(x)\noutput y\n", u.name));
    std::vector<double> want;
    for (double v : x) want.push_back(double(float(u.f(double(float(v))))));
    check_values(y, want, 1e-6);
  }
  check_values(run1("y = log([1.0, 4.0])\noutput y\n"), {0.0, std::log(4.0)}, 1e-6);
  check_values(run1("y = sqrt([4.0, 2.0])\noutput y\n"), {2.0, std::sqrt(2.0)}, 1e-6);
  check_values(run1("y = rsqrt([4.0, 2.0])\noutput y\n"), {0.5, 1 / std::sqrt(2.0)}, 1e-6);
  check_values(run1("y = reciprocal([4.0, -0.5])\noutput y\n"), {0.25, -2.0});
  check_values(run1("y = pow([2.0, 9.0], [3.0, 0.5])\noutput y\n"), {8.0, 3.0});
  check_values(run1("y = maximum([1, 5, 3], [4, 2, 3])\noutput y\n"), {4, 5, 3});
  check_values(run1("y = minimum([1, 5, 3], 2)\noutput y\n"), {1, 2, 2});
  check_values(run1("y = where([1.0, 0.0, 2.0], [1, 2, 3], -1)\noutput y\n"), {1, -1, 3});
}

TEST_CASE("broadcasting follows NumPy") {
  Tensor y = run1("a = [[1.0], [2.0], [3.0]]\nb = [10.0, 20.0]\ny = a * b + 1\noutput y\n");
  CHECK(y.shape() == Shape{3, 2});
  check_values(y, {11, 21, 21, 41, 31, 61});
  Tensor z = run1("a = reshape(iota(24), [2, 3, 4])\nb = reshape(iota(3), [3, 1])\ny = a - b\noutput y\n");
  CHECK(z.shape() == Shape{2, 3, 4});
  for_each_index({2, 3, 4}, [&](const auto& i) { CHECK(at(z, i) == double(i[0] * 12 + i[1] * 4 + i[2] - i[1])); });
}

TEST_CASE("dtype promotion: i32 -> f32 -> f64; true division; comparisons give floats") {
  CHECK(run1("y = 7 / 2\noutput y\n").dtype() == DType::F32);
  check_values(run1("y = 7 / 2\noutput y\n"), {3.5});
  check_values(run1("y = -2 ** 2\noutput y\n"), {-4});
  check_values(run1("y = 2 ** 3 ** 2\noutput y\n"), {512});
  check_values(run1("y = 1 + 2 * 3 - 4 / 8\noutput y\n"), {6.5});
  CHECK(run1("y = iota(3) + 1\noutput y\n").dtype() == DType::I32);
  CHECK(run1("y = iota(3) * 1.5\noutput y\n").dtype() == DType::F32);
  CHECK(run1("y = cast(iota(3), f64) * 1.5\noutput y\n").dtype() == DType::F64);
  Tensor c = run1("y = iota(4) >= 2\noutput y\n");
  CHECK(c.dtype() == DType::F32);
  check_values(c, {0, 0, 1, 1});
  CHECK(run1("y = cast(iota(2), f64) == 1\noutput y\n").dtype() == DType::F64);
  check_values(run1("y = exp(iota(2))\noutput y\n"), {1.0, std::exp(1.0)}, 1e-6);
  check_values(run1("y = 0.1 + 0.2\noutput y\n"), {double(0.1f + 0.2f)});
  check_values(run1("y = cast([1.7, -1.7], i32)\noutput y\n"), {1, -1});
}

TEST_CASE("reductions over axes, keepdims, mean, logsumexp") {
  const char* x = "x = reshape(cast(iota(24), f32), [2, 3, 4])\n";
  Tensor s = run1(std::string(x) + "y = sum(x, axis=1)\noutput y\n");
  CHECK(s.shape() == Shape{2, 4});
  for_each_index({2, 4}, [&](const auto& i) {
    double want = 0;
    for (int64_t j = 0; j < 3; ++j) want += double(i[0] * 12 + j * 4 + i[1]);
    CHECK(at(s, i) == want);
  });
  CHECK(run1(std::string(x) + "y = sum(x, axis=[0, 2], keepdims=true)\noutput y\n").shape() == Shape{1, 3, 1});
  check_values(
      run1(std::string(x) + "y = sum(x, axis=[0, 2])\noutput y\n"),
      {0 + 1 + 2 + 3 + 12 + 13 + 14 + 15, 4 + 5 + 6 + 7 + 16 + 17 + 18 + 19, 8 + 9 + 10 + 11 + 20 + 21 + 22 + 23});
  check_values(run1(std::string(x) + "y = mean(x)\noutput y\n"), {11.5});
  check_values(run1(std::string(x) + "y = max(x, axis=-1)\noutput y\n"), {3, 7, 11, 15, 19, 23});
  check_values(run1(std::string(x) + "y = min(x - 12 * (x > 11), axis=0)\noutput y\n"),
               {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  check_values(run1("y = logsumexp([1.0, 2.0, 3.0])\noutput y\n"),
               {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))}, 1e-6);
  check_values(run1("y = mean(iota(4))\noutput y\n"), {1.5});
  check_values(run1("y = sum(iota(4))\noutput y\n"), {6});
  // max and min: a NaN makes the result NaN wherever it is (NumPy's and PyTorch's max);
  // infinities are values; an empty axis gives -inf and +inf.
  Tensor m = run1(
      "nan = 0.0 / 0.0\nx = [[1.0, nan, 3.0], [nan, -1.0, 2.0], [1.0, 2.0, nan], [-1.0 / 0.0, 0.0, 1.0 / 0.0]]\n"
      "y = concat([max(x, axis=1), min(x, axis=1)], axis=0)\noutput y\n");
  const double inf = std::numeric_limits<double>::infinity();
  for (int i : {0, 1, 2, 4, 5, 6}) CHECK(std::isnan(m.get(i)));
  CHECK(m.get(3) == inf);
  CHECK(m.get(7) == -inf);
  check_values(run1("y = concat([max(zeros([2, 0]), axis=1), min(zeros([2, 0]), axis=1)], axis=0)\noutput y\n"),
               {-inf, -inf, inf, inf});
}

TEST_CASE("shape ops and indexing") {
  const char* x = "x = reshape(iota(6), [2, 3])\n";
  check_values(run1(std::string(x) + "y = transpose(x)\noutput y\n"), {0, 3, 1, 4, 2, 5});
  Tensor t3 = run1("x = reshape(iota(24), [2, 3, 4])\ny = transpose(x, [1, 2, 0])\noutput y\n");
  CHECK(t3.shape() == Shape{3, 4, 2});
  for_each_index({3, 4, 2}, [&](const auto& i) { CHECK(at(t3, i) == double(i[2] * 12 + i[0] * 4 + i[1])); });
  check_values(run1(std::string(x) + "y = concat([x, x * 10], axis=1)\noutput y\n"),
               {0, 1, 2, 0, 10, 20, 3, 4, 5, 30, 40, 50});
  check_values(run1(std::string(x) + "y = concat([x, x], axis=0)\noutput y\n"), {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5});
  check_values(run1(std::string(x) + "y = slice(x, axis=1, start=1, end=3)\noutput y\n"), {1, 2, 4, 5});
  check_values(run1(std::string(x) + "y = x[:, 1:3]\noutput y\n"), {1, 2, 4, 5});
  check_values(run1(std::string(x) + "y = x[1]\noutput y\n"), {3, 4, 5});
  check_values(run1(std::string(x) + "y = x[-1, -2]\noutput y\n"), {4});
  check_values(run1(std::string(x) + "y = x[0:1, :]\noutput y\n"), {0, 1, 2});
  CHECK(run1(std::string(x) + "y = expand_dims(x, axis=1)\noutput y\n").shape() == Shape{2, 1, 3});
  CHECK(run1(std::string(x) + "y = squeeze(expand_dims(x, axis=-1))\noutput y\n").shape() == Shape{2, 3});
  CHECK(run1(std::string(x) + "y = reshape(x, [3, -1])\noutput y\n").shape() == Shape{3, 2});
  check_values(run1(std::string(x) + "y = broadcast_to([1, 2, 3], [2, 3])\noutput y\n"), {1, 2, 3, 1, 2, 3});
  check_values(run1("y = zeros([2]) + ones([2]) + full([2], 2.5)\noutput y\n"), {3.5, 3.5});
  check_values(run1("y = one_hot([2, 0], 3)\noutput y\n"), {0, 0, 1, 1, 0, 0});
}

// The maps of ir/view.h as the interpreter reads them (the generator writes the same
// maps as index expressions: the golden check and the difftests compare the two).
TEST_CASE("view maps: pad fills its box and zeros the rest; concat skips an empty operand; size-1 axes broadcast") {
  const Tensor x = Tensor::from(Type{DType::F32, {2, 2}}, {1, 2, 3, 4});
  check_values(view(pad_view(x.shape(), {1, 0}), {&x}, Type{DType::F32, {3, 3}}), {0, 0, 0, 1, 2, 0, 3, 4, 0});
  const Tensor e = Tensor::empty(Type{DType::F32, {2, 0}});
  check_values(view(concat_view({x.shape(), e.shape(), x.shape()}, 1), {&x, &e, &x}, Type{DType::F32, {2, 4}}),
               {1, 2, 1, 2, 3, 4, 3, 4});
  const Tensor c = Tensor::from(Type{DType::F32, {2, 1}}, {5, 6});
  check_values(view(broadcast_view(c.shape(), {2, 2, 3}), {&c}, Type{DType::F32, {2, 2, 3}}),
               {5, 5, 5, 6, 6, 6, 5, 5, 5, 6, 6, 6});
  // transpose then slice: [2, 3] -> [3, 2] -> rows 1..2
  const Tensor t = Tensor::from(Type{DType::F32, {2, 3}}, {0, 1, 2, 3, 4, 5});
  const Tensor tt = view(transpose_view({1, 0}), {&t}, Type{DType::F32, {3, 2}});
  check_values(view(slice_view({1, 0}), {&tt}, Type{DType::F32, {2, 2}}), {1, 4, 2, 5});
  CHECK(view(reshape_view(), {&t}, Type{DType::F32, {6}}).buf == t.buf);  // a reshape shares the buffer
}

TEST_CASE("matmul, 2-D and batched with broadcast batch axes, against a naive loop") {
  Tensor y = run1(
      "a = reshape(cast(iota(24), f32), [2, 3, 4]) / 7\n"
      "b = reshape(cast(iota(20), f32), [4, 5]) - 3\n"
      "y = matmul(a, b)\noutput y\n");
  CHECK(y.shape() == Shape{2, 3, 5});
  for_each_index({2, 3, 5}, [&](const auto& i) {
    double want = 0;
    for (int64_t k = 0; k < 4; ++k)
      want += double(float(double(i[0] * 12 + i[1] * 4 + k) / 7)) * double(k * 5 + i[2] - 3);
    CHECK(at(y, i) == doctest::Approx(want).epsilon(1e-5));
  });
  check_values(run1("y = matmul([[1, 2], [3, 4]], [[5], [6]])\noutput y\n"), {17, 39});
  check_values(run1("y = matmul(cast([[1, 2]], f64), [[3.0], [4.0]])\noutput y\n"), {11});
}

TEST_CASE("composites: softmax, log_softmax, normalize, cross_entropy") {
  Tensor s = run1("y = softmax([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])\noutput y\n");
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_values(s, {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 1 / 3.0, 1 / 3.0, 1 / 3.0}, 1e-6);
  check_values(run1("y = log_softmax([1.0, 2.0, 3.0])\noutput y\n"),
               {1 - std::log(z), 2 - std::log(z), 3 - std::log(z)}, 1e-6);
  check_values(run1("y = normalize([[3.0, 4.0]])\noutput y\n"), {0.6, 0.8}, 1e-6);
  check_values(run1("y = normalize([[3.0], [4.0]], axis=0)\noutput y\n"), {0.6, 0.8}, 1e-6);
  // -(log_softmax[0][2] + log_softmax[1][0]) / 2
  double z2 = std::exp(0.5) + std::exp(-1.0) + std::exp(2.0);
  check_values(run1("y = cross_entropy([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]], [2, 0])\noutput y\n"),
               {-((3 - std::log(z)) + (0.5 - std::log(z2))) / 2}, 1e-6);
}

TEST_CASE("defs are inlined; rank and world; input defaults broadcast and convert") {
  auto o =
      run("def affine(v, s) { t = v * s; return t + 1, t }\n"
          "input x : f64[3] = rank\n"
          "a, b = affine(x, world)\n"
          "output a, b\n",
          3);
  for (int r = 0; r < 3; ++r) {
    CHECK(out(o, r, "a").dtype() == DType::F64);
    check_values(out(o, r, "a"), {3.0 * r + 1, 3.0 * r + 1, 3.0 * r + 1});
    check_values(out(o, r, "b"), {3.0 * r, 3.0 * r, 3.0 * r});
  }
  auto first =
      run("input x : f32[2, 2] = where(rank == 0, 1.0, 0.0)\n"
          "y = x + 2\nz = y * y\ng = all_gather(z, axis=0)\nr = g[0:2] * g[2:4]\nloss = mean(r)\noutput loss\n",
          2);
  check_values(out(first, 0, "loss"), {36});  // (1+2)^2 * (0+2)^2 everywhere
  check_values(out(first, 1, "loss"), {36});
}

TEST_CASE("shared inputs must agree across ranks") {
  Graph g = compile("input w : f32[2] shared\nout = w * 2\noutput out\n", 2);
  RankInputs in(2);
  in[0]["w"] = Tensor::from(Type{DType::F32, {2}}, {1.0, 2.0});
  in[1]["w"] = Tensor::from(Type{DType::F32, {2}}, {1.0, 2.0});
  CHECK_NOTHROW(interpret(g, in));
  in[1]["w"] = Tensor::from(Type{DType::F32, {2}}, {1.0, 3.0});
  CHECK_THROWS_WITH_AS(interpret(g, in), "shared input 'w' differs between ranks 0 and 1 at element [1]", UserError);
  CHECK_THROWS_WITH_AS(run("input w : f32 shared = rank\noutput w\n", 3),
                       "shared input 'w' differs between ranks 0 and 1", UserError);
}

}  // namespace
}  // namespace gradc::test

namespace gradc::test {
namespace {

TEST_CASE("ops keep i32 and f64: dtypes and values") {
  struct Row {
    const char* expr;
    DType dtype;
    std::vector<double> want;
  };
  const Row rows[] = {
      {"abs(iota(3) - 1)", DType::I32, {1, 0, 1}},
      {"relu(iota(3) - 1)", DType::I32, {0, 0, 1}},
      {"sign(iota(3) - 1)", DType::I32, {-1, 0, 1}},
      {"stop_gradient(iota(3) - 1)", DType::I32, {-1, 0, 1}},
      {"square(iota(3))", DType::I32, {0, 1, 4}},
      {"maximum(iota(3), 1)", DType::I32, {1, 1, 2}},
      {"max(reshape(iota(6), [2, 3]), axis=0)", DType::I32, {3, 4, 5}},
      {"transpose(reshape(iota(4), [2, 2]))", DType::I32, {0, 2, 1, 3}},
      {"matmul(reshape(iota(4), [2, 2]), reshape(iota(4), [2, 2]))", DType::I32, {2, 3, 6, 11}},
      {"where(iota(3) > 0, iota(3), -5)", DType::I32, {-5, 1, 2}},
      {"concat([iota(2), iota(1)], axis=0)", DType::I32, {0, 1, 0}},
      {"exp(cast(iota(2), f64))", DType::F64, {1, std::exp(1.0)}},
      {"sqrt(cast([2, 8], f64))", DType::F64, {std::sqrt(2.0), std::sqrt(8.0)}},
      {"sum(cast([0.1, 0.2], f64))", DType::F64, {0.1 + 0.2}},
      {"softmax(cast([0, 0], f64))", DType::F64, {0.5, 0.5}},
      {"cast([1, 2], f64) / 3", DType::F64, {1.0 / 3, 2.0 / 3}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.expr);
    Tensor y = out(run(fmt::format("y = {}\noutput y\n", r.expr), 1), 0, "y");
    CHECK(y.dtype() == r.dtype);
    check_values(y, r.want);
  }
}

// The ops models use, against PyTorch 1.13's values (Debian's python3-torch, in f32:
// torch.erf, F.gelu, F.gelu(approximate='tanh'), F.silu, F.softplus, F.layer_norm,
// a * rsqrt(mean(a * a) + 1e-6) for rms_norm, argmax/argmin, F.embedding and its
// gradient, // and torch.remainder), printed by the script in docs/language.md.
TEST_CASE("erf, gelu, silu, softplus, layer_norm, rms_norm: PyTorch's values") {
  const std::string x = "x = [-2.0, -0.5, 0.0, 0.25, 1.5, 3.0]\n";
  check_values(
      run1(x + "y = erf(x)\noutput y\n"),
      {-0.9953222870826721, -0.5204998850822449, 0.0, 0.27632638812065125, 0.9661051630973816, 0.9999778866767883},
      1e-6);
  check_values(
      run1(x + "y = gelu(x)\noutput y\n"),
      {-0.045500099658966064, -0.1542687863111496, 0.0, 0.14967656135559082, 1.3997890949249268, 2.995950222015381},
      1e-6);
  check_values(
      run1(x + "y = gelu(x, approximate=tanh)\noutput y\n"),
      {-0.04540228843688965, -0.1542859971523285, 0.0, 0.14967535436153412, 1.3995715379714966, 2.9963626861572266},
      1e-6);
  check_values(
      run1(x + "y = silu(x)\noutput y\n"),
      {-0.23840583860874176, -0.1887703388929367, 0.0, 0.140544131398201, 1.226361632347107, 2.857722520828247}, 1e-6);
  check_values(run1(x + "y = softplus(x)\noutput y\n"),
               {0.12692800164222717, 0.4740769863128662, 0.6931471824645996, 0.825939416885376, 1.7014132738113403,
                3.0485873222351074},
               1e-6);
  const std::string a = "a = [[1.0, 2.0, 4.0], [3.0, -1.0, 0.5]]\n";
  check_values(run1(a + "y = layer_norm(a)\noutput y\n"),
               {-1.06904137134552, -0.2672603130340576, 1.3363018035888672, 1.313195824623108, -1.1111656427383423,
                -0.20203009247779846},
               1e-5);
  check_values(run1(a + "y = rms_norm(a, axis=-1)\noutput y\n"),
               {0.37796443700790405, 0.7559288740158081, 1.5118577480316162, 1.6230050325393677, -0.5410016775131226,
                0.2705008387565613},
               1e-6);
}

TEST_CASE("argmax, argmin: the first index among ties; take and its gradient; // and % with Python's signs") {
  const std::string b = "b = [[1.0, 3.0, 3.0], [2.0, 0.0, 0.0]]\n";
  Tensor am = run1(b + "y = argmax(b)\noutput y\n");
  CHECK(am.dtype() == DType::I32);
  check_values(am, {1, 0});
  check_values(run1(b + "y = argmin(b, axis=1)\noutput y\n"), {0, 1});
  check_values(run1(b + "y = argmax(b, axis=0, keepdims=true)\noutput y\n"), {1, 0, 0});
  check_values(run1("y = argmax([[1.0, 0.0 / 0.0, 5.0]])\noutput y\n"), {1});  // NaN is the maximum, as in PyTorch
  // F.embedding(ids, e) with ids = [2, 0, 2]; its gradient for the weights g below
  const std::string emb =
      "input e : f32[3, 2] = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]\n"
      "y = take(e, [2, 0, 2])\nl = sum(y * [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])\nde = grad(l, e)\n";
  check_values(run1(emb + "output y\n"), {5, 6, 1, 2, 5, 6});
  check_values(out(interpret(run_pipeline(compile(emb + "output de\n"), Pipeline::Grad), RankInputs(1)), 0, "de"),
               {3, 4, 0, 0, 6, 8});
  Tensor t = run1("y = take(reshape(iota(12), [2, 3, 2]), [[2, 2], [0, 1]], axis=1)\noutput y\n");
  CHECK(t.shape() == Shape{2, 2, 2, 2});
  check_values(t, {4, 5, 4, 5, 0, 1, 2, 3, 10, 11, 10, 11, 6, 7, 8, 9});
  check_values(run1("y = [-7, 7, -7, 7] // [2, 2, -2, -2]\noutput y\n"), {-4, 3, 3, -4});
  check_values(run1("y = [-7, 7, -7, 7] % [2, 2, -2, -2]\noutput y\n"), {1, 1, -1, -1});
  check_values(run1("k = [-7, 7, -7, 7]\ny = k // 2 + k % 3\noutput y\n"), {-4 + 2, 3 + 1, -4 + 2, 3 + 1});
}

// The value of `y` in a program that binds y = EXPR, run by the interpreter, and
// whether the program was an error.
std::optional<Tensor> value_or_error(const std::string& src) {
  try {
    return run1(src);
  } catch (const UserError&) {
    return std::nullopt;
  }
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.size(); ++i) {
    const double x = a.get(i), y = b.get(i);
    if (!(x == y && std::signbit(x) == std::signbit(y)) && !(std::isnan(x) && std::isnan(y))) return false;
  }
  return true;
}

TEST_CASE("an op on literals folds to what it computes on tensors: every UNARY, BINARY and COMPARE row") {
  // How the language writes each binary op of ir/ops.def; a row added without one fails here.
  const std::map<Op, std::string> spelling = {{Op::Add, "{} + {}"},
                                              {Op::Sub, "{} - {}"},
                                              {Op::Mul, "{} * {}"},
                                              {Op::Div, "{} / {}"},
                                              {Op::Pow, "pow({}, {})"},
                                              {Op::Maximum, "maximum({}, {})"},
                                              {Op::Minimum, "minimum({}, {})"},
                                              {Op::FloorDiv, "{} // {}"},
                                              {Op::Mod, "{} % {}"},
                                              {Op::Eq, "{} == {}"},
                                              {Op::Ne, "{} != {}"},
                                              {Op::Lt, "{} < {}"},
                                              {Op::Le, "{} <= {}"},
                                              {Op::Gt, "{} > {}"},
                                              {Op::Ge, "{} >= {}"}};
  std::vector<Op> binary, unary;
#define OP(E, name, arity, flags)
#define UNARY(E, f, flags) unary.push_back(Op::E);
#define BINARY(E, f, flags) binary.push_back(Op::E);
#define COMPARE(E, f, flags) binary.push_back(Op::E);
#include "ir/ops.def"
#undef COMPARE
#undef BINARY
#undef UNARY
#undef OP
  // Literal operands, and their dtype as an input: ints, floats, negative, zero, -0, inf, nan.
  const std::vector<std::string> ints = {"-7", "-2", "0", "1", "3"};
  const std::vector<std::string> floats = {"-2.5", "-0.0",        "0.0",          "0.5",        "3.0",
                                           "1e30", "(1.0 / 0.0)", "(-1.0 / 0.0)", "(0.0 / 0.0)"};
  int checked = 0;
  auto check = [&](const std::string& expr, const std::string& inputs, const std::string& on_inputs) {
    CAPTURE(expr);
    std::optional<Tensor> folded = value_or_error("y = " + expr + "\noutput y\n");
    std::optional<Tensor> ran = value_or_error(inputs + "y = " + on_inputs + "\noutput y\n");
    REQUIRE(folded.has_value() == ran.has_value());  // an error either way (a division by zero)
    if (folded) CHECK(same_bits(*folded, *ran));
    ++checked;
  };
  for (Op op : binary) {
    CAPTURE(op_name(op));
    REQUIRE(spelling.count(op));
    const std::string& form = spelling.at(op);
    for (const auto* operands : {&ints, &floats}) {
      const bool is_int = operands == &ints;
      if (!is_int && (op == Op::FloorDiv || op == Op::Mod)) continue;  // i32 only: an error that says so
      for (const std::string& a : *operands)
        for (const std::string& b : *operands) {
          const std::string dt = is_int ? "i32" : "f32";
          check(fmt::format(fmt::runtime(form), a, b),
                fmt::format("input p : {} = {}\ninput q : {} = {}\n", dt, a, dt, b),
                fmt::format(fmt::runtime(form), "p", "q"));
        }
    }
  }
  for (Op op : unary)
    for (const std::string& a : floats) {
      CAPTURE(op_name(op));
      check(fmt::format("{}({})", op_name(op), a), fmt::format("input p : f32 = {}\n", a),
            fmt::format("{}(p)", op_name(op)));
    }
  CHECK(checked > 600);
  // The ones that were wrong: a fold of its own whose default case was >=.
  check_values(run1("y = maximum(2.0, 3.0)\noutput y\n"), {3});
  check_values(run1("y = minimum(2.0, 3.0)\noutput y\n"), {2});
  check_values(run1("lo = 0.5\ny = maximum(lo, 2.0)\noutput y\n"), {2});
  check_values(run1("y = maximum(2, -3)\noutput y\n"), {2});
  CHECK(run1("y = maximum(2, -3)\noutput y\n").dtype() == DType::I32);
  // ** of two static integers is a static integer (a shape); pow is the float op
  CHECK(run1("y = zeros([2 ** 3 ** 1])\noutput y\n").shape() == Shape{8});
  CHECK(run1("y = pow(2, 3)\noutput y\n").dtype() == DType::F32);
  CHECK(run1("y = 2 ** -1\noutput y\n").dtype() == DType::F32);
  // an op on static integers that gives an integer is a static integer, with its value
  CHECK(out(run("y = zeros([maximum(world, 2) + minimum(world, 2)])\noutput y\n", 3), 0, "y").shape() == Shape{5});
}

TEST_CASE("static integers: // and % fold with Python's signs; shapes from world; loops") {
  check_values(run1("y = iota(-7 // 2 + 10)\noutput y\n"), {0, 1, 2, 3, 4, 5});
  Tensor r = out(run("H = 12 // world\ninput w : f32[H, 2] = 1.0\ny = w\noutput y\n", 4), 0, "y");
  CHECK(r.shape() == Shape{3, 2});
  // a loop-carried static integer stays static: a shape from it
  check_values(run1("n = 1\nfor i in range(3) {\n  n = n * 2 + i\n}\ny = zeros([n])\noutput y\n"),
               std::vector<double>(12, 0.0));
  // range(A, B) and a zero-trip loop, Python's range
  check_values(run1("s = 0\nfor i in range(2, 5) {\n  s = s + i\n}\nfor j in range(5, 2) {\n  s = s + 100\n}\n"
                    "y = s + [0]\noutput y\n"),
               {9});
  // nested loops, a name first bound in the body belongs to one iteration
  check_values(
      run1("acc = [0, 0]\nfor i in range(3) {\n  t = [1, 10] * i\n  for j in range(i) {\n    acc = acc + t\n  }\n}\n"
           "t = 5\ny = acc + t\noutput y\n"),
      {5 + 5, 50 + 5});
}

}  // namespace
}  // namespace gradc::test
