// Gradients: every differentiable op from one table (as JAX's LAX_GRAD_OPS),
// every collective and reduction under all three modes, shared inputs against
// one process on the whole batch, a Hessian-vector product through all_reduce,
// and a check that gradient checking catches a wrong rule.
#include <fmt/format.h>

#include <algorithm>

#include "check/gradcheck.h"
#include "ir/rules.h"
#include "passes/ad.h"
#include "passes/autodiff.h"
#include "passes/pass.h"
#include "util.h"

namespace gradc::test {
namespace {

std::vector<GradCheckRow> check(const std::string& src, int ranks, GradCheckOptions opt = {}) {
  Graph g = lower_program(parse_program(src), LowerOptions{ranks, true});
  return check_gradients(g, RankInputs(size_t(g.world)), opt);
}

void require_ok(const std::vector<GradCheckRow>& rows, size_t expected_rows) {
  REQUIRE(rows.size() == expected_rows);
  for (const auto& r : rows) {
    INFO(gradcheck_table({r}, GradCheckOptions{}));
    CHECK(r.ok);
    CHECK(r.ref_err <= 1e-9);
  }
}

// One row per differentiable op: the expression (of a, b: f32[3, 4], and
// c: f32[4, 5]) and how to draw a and b, so each op is tested where it is smooth.
struct GradOp {
  const char* name;
  const char* expr;
  const char* a = "randn([3, 4], seed=1 + rank)";
  const char* b = "randn([3, 4], seed=11 + rank)";
};
const char* kPositive = "rand([3, 4], seed=1 + rank) + 0.5";
const char* kPositiveB = "rand([3, 4], seed=11 + rank) + 0.5";

const GradOp kGradOps[] = {
    {"neg", "-a"},
    {"exp", "exp(a)"},
    {"log", "log(a)", kPositive},
    {"sqrt", "sqrt(a)", kPositive},
    {"rsqrt", "rsqrt(a)", kPositive},
    {"abs", "abs(a)"},
    {"relu", "relu(a)"},
    {"sigmoid", "sigmoid(a)"},
    {"tanh", "tanh(a)"},
    {"sin", "sin(a)"},
    {"cos", "cos(a)"},
    {"square", "square(a)"},
    {"reciprocal", "reciprocal(a)", kPositive},
    {"add", "a + b"},
    {"sub", "a - b"},
    {"mul", "a * b"},
    {"div", "a / b", "randn([3, 4], seed=1 + rank)", kPositiveB},
    {"pow", "pow(a, b)", kPositive},
    {"power operator", "a ** 3"},
    {"maximum", "maximum(a, b)"},
    {"minimum", "minimum(a, b)"},
    {"where", "where(a > b, a * 2, b * 3)"},
    {"broadcasting", "a * b[1] + b[:, 0:1]"},
    {"sum", "sum(a * b, axis=1)"},
    {"mean", "mean(a * b, axis=0, keepdims=true)"},
    {"max", "max(a * b, axis=1)"},
    {"min", "min(a * b)"},
    {"logsumexp", "logsumexp(a * b, axis=-1)"},
    {"reshape", "reshape(a * b, [2, 6])"},
    {"transpose", "transpose(a * b)"},
    {"broadcast_to", "broadcast_to(a[0] * b[1], [2, 3, 4])"},
    {"concat", "concat([a, b * a], axis=1)"},
    {"slice", "slice(a * b, axis=1, start=1, end=3)"},
    {"indexing", "(a * b)[1:3, -1]"},
    {"expand_dims", "expand_dims(a * b, axis=1)"},
    {"squeeze", "squeeze(expand_dims(a * b, axis=0))"},
    {"matmul", "matmul(a * b, c)"},
    {"batched matmul", "matmul(reshape(a, [3, 2, 2]), reshape(b, [3, 2, 2]))"},
    {"cast", "cast(a * b, f64) * 2"},
    {"softmax", "softmax(a * b)"},
    {"log_softmax", "log_softmax(a * b, axis=0)"},
    {"normalize", "normalize(a * b)"},
    {"cross_entropy", "cross_entropy(a * b, [0, 3, 1])"},
    {"matmul operator", "(a * b) @ c"},
    {"erf", "erf(a)"},
    {"gelu", "gelu(a * b)"},
    {"gelu tanh", "gelu(a * b, approximate=tanh)"},
    {"silu", "silu(a * b)"},
    {"softplus", "softplus(a * 3)"},
    {"take", "take(a * b, [2, 0, 2, 1])"},
    {"take axis 1", "take(a * b, [[3, 3], [0, 1]], axis=1)"},
    {"dropout", "dropout(a * b, 0.25, seed=3 + rank)"},
    {"layer_norm", "layer_norm(a * b)"},
    {"layer_norm two axes", "layer_norm(a + b, axis=[0, 1], eps=1e-3)"},
    {"rms_norm", "rms_norm(a * b, axis=0)"},
    {"argmax as an index", "sum(take(transpose(a), argmax(b, axis=1)), axis=1, keepdims=true) * b"},
};

TEST_CASE("every differentiable op: finite differences and the reference, on 1 to 4 ranks") {
  for (const GradOp& op : kGradOps) {
    for (int n = 1; n <= 4; ++n) {
      CAPTURE(op.name);
      CAPTURE(n);
      // The loss mixes the ranks (all_reduce) and weights each rank differently.
      std::string src = fmt::format(
          "input a : f32[3, 4] = {}\n"
          "input b : f32[3, 4] = {}\n"
          "c = randn([4, 5], seed=5)\n"
          "y = {}\n"
          "loss = sum(all_reduce(y) * (rank + 1)) + sum(y * y)\n"
          "da, db = grad(loss, a, b)\n"
          "output da, db\n",
          op.a, op.b, op.expr);
      require_ok(check(src, n), 2);
    }
  }
}

// Collectives with every reduction op, each with a loss that differs per rank
// (modes sum and mean) and one that does not (all three modes).
struct CollectiveCase {
  const char* call;
  bool reduces;  // takes op=
};
const CollectiveCase kCollectives[] = {
    {"all_reduce(x, op=OP)", true},
    {"reduce(x, root=ROOT, op=OP)", true},
    {"reduce_scatter(x, axis=1, op=OP)", true},
    {"reduce_scatter(x, axis=0, op=OP)", true},
    {"all_gather(x, axis=0)", false},
    {"all_gather(x, axis=1)", false},
    {"broadcast(x, root=ROOT)", false},
    {"gather(x, root=ROOT, axis=1)", false},
    {"scatter(x, root=ROOT, axis=0)", false},
    {"all_to_all(x, split_axis=0, concat_axis=1)", false},
    {"all_to_all(x, split_axis=1, concat_axis=1)", false},
    {"permute(x, shift=1)", false},
    {"permute(x, shift=-2)", false},
    {"permute(x, pairs=[[0, LAST]])", false},
};

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

void check_collectives(const char* data, bool finite_differences) {
  for (const CollectiveCase& c : kCollectives)
    for (const char* op : {"sum", "avg", "prod", "max", "min"}) {
      if (!c.reduces && std::string(op) != "sum") continue;
      for (int n = 1; n <= 4; ++n) {
        std::string call = replace_all(replace_all(replace_all(c.call, "OP", op), "ROOT", std::to_string(n - 1)),
                                       "LAST", std::to_string(n - 1));
        CAPTURE(call);
        CAPTURE(n);
        std::string src = fmt::format(
            "input x : f32[{0}, {1}] = {2}\n"
            "y = {3}\n"
            "varying = sum(sin(y) * (rank + 1))\n"
            "same = all_reduce(varying)\n"
            "s = grad(varying, x)\n"
            "m = grad(varying, x, mode=mean)\n"
            "gs = grad(same, x, mode=sum)\n"
            "gm = grad(same, x, mode=mean)\n"
            "gg = grad(same, x, mode=global)\n"
            "output s, m, gs, gm, gg\n",
            2 * n, 3 * n, replace_all(replace_all(data, "R", std::to_string(2 * n)), "C", std::to_string(3 * n)), call);
        GradCheckOptions opt;
        opt.finite_differences = finite_differences;
        opt.samples = 16;
        require_ok(check(src, n, opt), 5);
      }
    }
}

TEST_CASE("every collective and reduction op, all three modes: random data") {
  check_collectives("randn([R, C], seed=rank) + 0.1", true);
}

TEST_CASE("every collective and reduction op, all three modes: zeros and ties, against the reference") {
  // Integers from {-1, 0, 1, 2}: many elements tie across ranks, many are zero.
  check_collectives("cast(cast(rand([R, C], seed=rank) * 4, i32), f32) - 1", false);
}

TEST_CASE("stop_gradient: the identity with derivative zero; logsumexp's gradient is the softmax, ties included") {
  auto grads = [](const std::string& src) {
    Graph g = run_pipeline(lower_program(parse_program(src), 1), Pipeline::Grad);
    return interpret(g, RankInputs(1));
  };
  // d/dx sum(stop_gradient(x) * x) = stop_gradient(x): x, not 2x.
  auto r = grads("input x : f32[3] = iota(3) + 1.0\ny = stop_gradient(x) * x\nd = grad(sum(y), x)\noutput y, d\n");
  check_values(out(r, 0, "y"), {1, 4, 9});
  check_values(out(r, 0, "d"), {1, 2, 3});
  // logsumexp shifts by the max under stop_gradient: two elements tie for the max and
  // the gradient is still exactly softmax(x).
  auto s = grads("input x : f32[4] = [1.0, 3.0, 3.0, 0.0]\nd = grad(logsumexp(x), x)\noutput d\n");
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + 1;
  check_values(out(s, 0, "d"), {std::exp(1.0) / z, std::exp(3.0) / z, std::exp(3.0) / z, 1 / z}, 1e-7);
}

TEST_CASE("exact values: prod with zeros, max and min with ties") {
  auto grads = [](const std::string& src) {
    Graph g = run_pipeline(lower_program(parse_program(src), 3), Pipeline::Grad);
    return interpret(g, RankInputs(3));
  };
  // L = 3 prod_k x_k: dL/dx_k = 3 prod_{j != k} x_j.
  auto one_zero =
      grads("input x : f32 = where(rank == 0, 0.0, rank + 1.0)\nd = grad(all_reduce(x, op=prod), x)\noutput d\n");
  check_values(out(one_zero, 0, "d"), {3 * 2 * 3});
  check_values(out(one_zero, 1, "d"), {0});
  check_values(out(one_zero, 2, "d"), {0});
  auto two_zeros = grads("input x : f32 = where(rank == 2, 5.0, 0.0)\nd = grad(all_reduce(x, op=prod), x)\noutput d\n");
  for (int r = 0; r < 3; ++r) check_values(out(two_zeros, r, "d"), {0});
  // Three ranks tie for the max: each gets a third of dL/dy = 3 (one per rank).
  auto ties =
      grads("input x : f32[2] = where(iota(2) == 0, 7.0, rank)\nd = grad(all_reduce(x, op=max), x)\noutput d\n");
  for (int r = 0; r < 3; ++r) check_values(out(ties, r, "d"), {1, r == 2 ? 3.0 : 0.0});
  // Two ranks tie for the min of reduce_scatter's block: each gets half.
  auto min_ties =
      grads("input x : f32[3] = where(rank == 1, 4.0, 2.0)\nd = grad(sum(reduce_scatter(x, op=min)), x)\noutput d\n");
  check_values(out(min_ties, 0, "d"), {0.5, 0.5, 0.5});
  check_values(out(min_ties, 1, "d"), {0, 0, 0});
  check_values(out(min_ties, 2, "d"), {0.5, 0.5, 0.5});
}

// docs/semantics.md: a gradient differentiated again with respect to an op's output
// has a path through that op's rule only where PyTorch's formula reads its result.
// The values are PyTorch's (torch.autograd.grad with create_graph, f64).
TEST_CASE("a gradient's gradient with respect to an intermediate: the paths PyTorch's rules give") {
  const char* src =
      "input x : f64 = 2.0\ninput b : f64 = 4.0\n"
      "y = x / b\ndx, db = grad(y, x, b)\nthrough_y, through_b = grad(db, y, b)\n"
      "z = exp(x)\ndz = grad(z, x)\nthrough_z = grad(dz, z)\n"
      "output through_y, through_b, through_z\n";
  Graph g = run_pipeline(lower_program(parse_program(src), 1), Pipeline::Grad);
  auto res = interpret(g, RankInputs(1));
  check_values(out(res, 0, "through_y"), {0});             // div's rule reads x and b, not y
  check_values(out(res, 0, "through_b"), {2 * 2.0 / 64});  // d/db (-x / b^2) = 2x / b^3
  check_values(out(res, 0, "through_z"), {1});             // exp's rule is g * z
}

// x[:] and a cast to x's own dtype are values of their own, as a PyTorch view is: a
// loss that reads x and not them has gradient 0 with respect to them.
TEST_CASE("a whole-range index and a same-dtype cast are values of their own") {
  const char* src =
      "input x : f64[3] = [1.0, 2.0, 3.0]\na = x[0:3]\nb = x[:]\nc = cast(x, f64)\n"
      "da, db, dc = grad(x, a, b, c)\nea, eb, ec = grad(a + 2.0 * b + 3.0 * c, a, b, c)\n"
      "output da, db, dc, ea, eb, ec\n";
  Graph g = run_pipeline(lower_program(parse_program(src), 1), Pipeline::Grad);
  auto res = interpret(g, RankInputs(1));
  for (const char* d : {"da", "db", "dc"}) check_values(out(res, 0, d), {0, 0, 0});
  check_values(out(res, 0, "ea"), {1, 1, 1});
  check_values(out(res, 0, "eb"), {2, 2, 2});
  check_values(out(res, 0, "ec"), {3, 3, 3});
}

TEST_CASE("shared inputs: mode=mean is data-parallel training's averaged gradient") {
  for (int n = 1; n <= 4; ++n) {
    CAPTURE(n);
    const char* model =
        "loss = mean(square(tanh(matmul(x, w)) - 0.5))\ndw = grad(loss, w, mode=mean)\noutput loss, dw\n";
    std::string spmd = fmt::format(
        "input x : f32[4, 3] = randn([4, 3], seed=10 + rank)\n"
        "input w : f32[3, 2] shared = randn([3, 2], seed=1)\n{}",
        model);
    std::string parts;
    for (int r = 0; r < n; ++r) parts += fmt::format("{}randn([4, 3], seed={})", r ? ", " : "", 10 + r);
    std::string whole = fmt::format(
        "input x : f32[{}, 3] = concat([{}], axis=0)\n"
        "input w : f32[3, 2] shared = randn([3, 2], seed=1)\n{}",
        4 * n, parts, model);
    auto a = interpret(run_pipeline(lower_program(parse_program(spmd), n), Pipeline::Grad), RankInputs(size_t(n)));
    auto b = interpret(run_pipeline(lower_program(parse_program(whole), 1), Pipeline::Grad), RankInputs(1));
    const Tensor& want = out(b, 0, "dw");
    for (int r = 0; r < n; ++r) check_values(out(a, r, "dw"), want.values(), 1e-5);
  }
}

TEST_CASE("a Hessian-vector product through all_reduce") {
  // s = sum_k x_k; L = sum_r s^2 = N s^2; H = 2N everywhere, so Hv = 2N sum_j v_j on every rank.
  auto o = interpret(
      run_pipeline(
          lower_program(parse_program("input x : f32 = 1\ninput v : f32 = rank + 1\n"
                                      "s = all_reduce(x)\ng = grad(s * s, x)\nhv = grad(g * v, x)\noutput g, hv\n"),
                        3),
          Pipeline::Grad),
      RankInputs(3));
  for (int r = 0; r < 3; ++r) {
    check_values(out(o, r, "g"), {2 * 3 * 3});
    check_values(out(o, r, "hv"), {2 * 3 * 6});
  }
  // A nonlinear one, checked against finite differences of the inner gradient.
  require_ok(check("input x : f32[3] = randn([3], seed=rank)\ninput v : f32[3] = randn([3], seed=10 + rank)\n"
                   "s = all_reduce(sum(x * x * x))\ng = grad(s * s + sum(sin(x)), x)\nhv = grad(sum(g * v), x)\n"
                   "output hv\n",
                   3),
             2);
}

// prod over ranks, differentiated two and three times, with zeros on one rank
// (element 0), on two ranks (element 1) and on all ranks (element 2): the
// zero-counting first derivative alone would lose prod_{i not in {j, k}} x_i.
// Expected values from the definition: for P = prod_i x_i (per element) and
// L = N P (mode=sum, every rank's loss is P),
//   hv_k = N sum_{j != k} v_j prod_{i not in {j,k}} x_i
//   t_k  = N sum_{j != k} u_j sum_{l not in {j,k}} v_l prod_{i not in {j,k,l}} x_i
TEST_CASE("prod over ranks: second and third order with zeros, exact and against finite differences") {
  const int N = 3;
  const double xs[N][3] = {{1.5, 0, 0}, {0, 2, 0}, {-0.5, 0, 0}};
  const char* src =
      "input x : f32[3] = where(rank == 0, [1.5, 0.0, 0.0], where(rank == 1, [0.0, 2.0, 0.0], [-0.5, 0.0, 0.0]))\n"
      "input v : f32[3] = where(rank == 0, [0.5, -1.0, 2.0], where(rank == 1, [1.5, 0.25, -1.0], [-2.0, 1.0, 0.5]))\n"
      "input u : f32[3] = where(rank == 0, [1.0, 2.0, -0.5], where(rank == 1, [-1.5, 0.5, 1.0], [0.75, -1.0, 2.0]))\n"
      "s = {}\n"
      "g = grad(sum(s), x)\n"
      "hv = grad(sum(g * v), x)\n"
      "t = grad(sum(hv * u), x)\n"
      "output g, hv, t\n";
  const double vs[N][3] = {{0.5, -1.0, 2.0}, {1.5, 0.25, -1.0}, {-2.0, 1.0, 0.5}};
  const double us[N][3] = {{1.0, 2.0, -0.5}, {-1.5, 0.5, 1.0}, {0.75, -1.0, 2.0}};
  auto prod_except = [&](int e, std::initializer_list<int> skip) {
    double p = 1;
    for (int i = 0; i < N; ++i)
      if (std::find(skip.begin(), skip.end(), i) == skip.end()) p *= xs[i][e];
    return p;
  };
  // The same derivatives through all_reduce, reduce (its root's value broadcast
  // back, so that every rank's loss is P again) and reduce_scatter of a tiled x.
  for (const char* s : {"all_reduce(x, op=prod)", "broadcast(reduce(x, root=1, op=prod), root=1)",
                        "all_gather(reduce_scatter(concat([x, x, x]), op=prod))[0:3]"}) {
    CAPTURE(s);
    std::string prog = fmt::format(fmt::runtime(src), s);
    auto o = interpret(run_pipeline(lower_program(parse_program(prog), LowerOptions{N, true}), Pipeline::Grad),
                       RankInputs(N));
    for (int k = 0; k < N; ++k) {
      std::vector<double> g(3), hv(3), t(3);
      for (int e = 0; e < 3; ++e) {
        g[e] = N * prod_except(e, {k});
        for (int j = 0; j < N; ++j) {
          if (j == k) continue;
          hv[e] += N * vs[j][e] * prod_except(e, {j, k});
          for (int l = 0; l < N; ++l)
            if (l != j && l != k) t[e] += N * us[j][e] * vs[l][e] * prod_except(e, {j, k, l});
        }
      }
      CAPTURE(k);
      check_values(out(o, k, "g"), g, 1e-12);
      check_values(out(o, k, "hv"), hv, 1e-12);
      check_values(out(o, k, "t"), t, 1e-12);
    }
    // And each order against central differences of the one below it (every
    // order below is exact, so differences of it are the truth up to rounding).
    require_ok(check(prog, N), 3);
  }
}

TEST_CASE("prod over ranks: a first-order gradient keeps the cheap exchange") {
  // Two all_reduces of x's size for the first derivative; the exact-to-every-order
  // form (an all_gather of N times x) only where the gradient is differentiated again.
  auto count = [](const std::string& src, Op op) {
    Graph g = run_pipeline(lower_program(parse_program(src), 4), Pipeline::Grad);
    return std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; });
  };
  const char* first = "input x : f32[3] = rank + 1.0\ng = grad(sum(all_reduce(x, op=prod)), x)\noutput g\n";
  const char* second =
      "input x : f32[3] = rank + 1.0\ng = grad(sum(all_reduce(x, op=prod)), x)\nh = grad(sum(g), x)\noutput h\n";
  CHECK(count(first, Op::AllGather) == 0);
  CHECK(count(first, Op::AllReduce) == 3);  // the forward prod, the zero count, the nonzero product
  CHECK(count(second, Op::AllGather) >= 1);
}

// all_gather's cotangent as the hand-written "GatherLayer" computes it: this
// rank's block of its own cotangent, not summed over ranks.
void gatherlayer_vjp(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  Attrs a;
  a.set("root", Attr::of_int(0));
  a.set("axis", Attr::of_int(ad.y().attr_int("axis")));
  ct[0] = ad.collective(Op::Scatter, g, a);
}

TEST_CASE("gradient checking catches a wrong collective rule") {
  const char* src =
      "input x : f32[2] = randn([2], seed=rank)\ng = all_gather(x)\nloss = sum(g * g * (rank + 1))\n"
      "dx = grad(loss, x)\noutput dx\n";
  require_ok(check(src, 2), 1);
  ScopedOverride<VjpFn> swap(derivatives(), Op::AllGather, gatherlayer_vjp);
  auto rows = check(src, 2);
  REQUIRE(rows.size() == 1);
  CHECK(!rows[0].ok);
  CHECK(rows[0].fd_err > 1e-3);
  CHECK(rows[0].ref_err > 1e-3);
}

// The torch op's gradient (passes/pullback.cpp: pullback_program) of a program with one
// scalar output, every cotangent 1 (each rank calls loss.backward()), by the convention
// of the data-parallel axes `dp`: the input x's gradient on each rank.
std::vector<double> op_gradient(const std::string& src, uint8_t dp, const std::string& x) {
  std::set<std::string> cts;
  Graph g = run_pipeline(pullback_program(compile(src), dp, cts), Pipeline::Grad);
  RankInputs in(size_t(g.world));
  for (auto& r : in)
    for (const std::string& c : cts) r[c] = Tensor::scalar(DType::F32, 1);
  std::vector<double> out;
  for (const auto& rank : interpret(g, in))
    for (const auto& [name, t] : rank)
      if (name == "grad_" + x) out.push_back(t.get(0));
  return out;
}

TEST_CASE("the torch op's convention per mesh axis: docs/language.md section 8's values") {
  // loss = 3(d + 1), replicated along tp: one loss per dp index under Megatron (dp), a
  // loss per rank under DDP over both axes (dp|tp), as mode=sum over=dp and mode=sum
  const std::string x =
      "mesh dp=2, tp=2\ninput x : f32 = 1\ns = all_reduce((rank(tp) + 1) * x, over=tp)\n"
      "loss = s * (rank(dp) + 1)\noutput loss\n";
  CHECK(op_gradient(x, 1, "x") == std::vector<double>{1, 2, 2, 4});
  CHECK(op_gradient(x, 3, "x") == std::vector<double>{2, 4, 4, 8});
  // w shared(dp): this rank's part along dp (DDP then averages it: 1.5, 3), and under
  // --data-parallel=none one variable along dp too, its total
  const std::string w =
      "mesh dp=2, tp=2\ninput w : f32 shared(dp) = 1\n"
      "loss = all_reduce((rank(tp) + 1) * (rank(dp) + 1) * w, over=tp)\noutput loss\n";
  CHECK(op_gradient(w, 1, "w") == std::vector<double>{1, 2, 2, 4});
  CHECK(op_gradient(w, 0, "w") == std::vector<double>{3, 6, 3, 6});
  // a weight replicated everywhere, under Megatron: the total over tp of one loss per dp
  const std::string b =
      "mesh dp=2, tp=2\ninput b : f32 shared = 1\nloss = all_reduce((rank(tp) + 1) * b, over=tp) * (rank(dp) + 1)\n"
      "output loss\n";
  CHECK(op_gradient(b, 1, "b") == std::vector<double>{3, 3, 6, 6});
  CHECK(op_gradient(b, 3, "b") == std::vector<double>{2, 4, 4, 8});  // each rank's part
}

TEST_CASE("verify checks the torch op's gradient under each convention") {
  const std::string src =
      "mesh dp=2, tp=2\ninput x : f64[2, 3] shared(tp) = randn([2, 3], seed=rank(dp))\n"
      "input w : f64[3, 2] shared = randn([3, 2], seed=9)\n"
      "loss = sum(square(all_reduce(x @ w * (rank(tp) + 1.0), over=tp)))\noutput loss\n";
  for (uint8_t dp = 0; dp < 4; ++dp) {
    std::set<std::string> cts;
    Graph g = pullback_program(lower_program(parse_program(src), LowerOptions{0, true}), dp, cts);
    RankInputs in(4);
    for (auto& r : in) r["ct_loss"] = Tensor::scalar(DType::F64, 1);
    const Graph reference = own_as_unshared(g, dp);
    require_ok(check_gradients(g, in, GradCheckOptions{}, &reference), 2);
  }
}

TEST_CASE("verify: a backend may differ from the interpreter by a 16-bit program's own rounding, no more") {
  // The native backend sums some f32 values in another order, or its vector cosf differs
  // from the scalar one in the last bit; where such a value sits on a bf16 rounding
  // boundary the two backends round it to its two neighbours, and every value after it
  // carries that. Here y = 1 + 2^-8 exactly, a tie, which rounds to 1 (even); the stand-in
  // backend gives the interpreter's outputs with y moved to the other neighbour, 1 + 2^-7,
  // or 64 ulps further.
  const std::string src =
      "input x : bf16[1, 2]\ninput w : f32[2, 1]\ny = x @ cast(w, bf16)\n"
      "loss = sum(cast(y, f32) * cast(y, f32))\ndw = grad(loss, w)\noutput y, dw\n";
  const Graph low = compile(src, 1), wide = lower_program(parse_program(src), LowerOptions{0, true});
  RankInputs in(1);
  in[0]["x"] = Tensor::from(Type{DType::BF16, {1, 2}}, {1, 0x1p-8});
  in[0]["w"] = Tensor::from(Type{DType::F32, {2, 1}}, {1});
  std::vector<double> rounding;
  REQUIRE(check_precision(low, wide, in, &rounding).size() == 2);
  REQUIRE(rounding.size() == 3);  // y, dw, and dw again as the gradient
  CHECK(rounding[0] == 0x1p-8);   // y is 1, half an ulp from 1 + 2^-8
  for (const double to : {1 + 0x1p-7, 1 + 0x1p-7 * 65}) {
    GradCheckOptions opt;
    opt.run_default = [to](const Graph& p, const RankInputs& ins) {
      RankOutputs o = interpret(p, ins);
      o[0][0].second = Tensor::from(o[0][0].second.type, {to});
      return o;
    };
    std::vector<GradCheckRow> rows(1);
    CHECK(check_backend(low, in, rows, opt).size() == 1);  // an ulp is past f32's tolerance
    CHECK(check_backend(low, in, rows, opt, rounding).size() == (to < 1.01 ? 0 : 1));
  }
}

}  // namespace
}  // namespace gradc::test
