// Every collective's forward values, with 1, 2, 3 and 4 ranks, against values
// this test computes independently from docs/language.md section 5.
#include <fmt/format.h>

#include <algorithm>

#include "util.h"

namespace gradc::test {
namespace {

// Rank k's operand: small integers (exact in f32 sums and products) with many ties.
double xval(int k, int64_t i) { return double((k * 7 + i * 3) % 5 + 1); }

struct Case {
  int n;
  Shape shape;
  std::vector<Tensor> x;
  RankInputs inputs;
};

Case make_case(int n) {
  Case c{n, {2 * n, 3 * n}, {}, RankInputs(size_t(n))};
  for (int k = 0; k < n; ++k) {
    c.x.push_back(make(Type{DType::F32, c.shape}, [&](int64_t i) { return xval(k, i); }));
    c.inputs[size_t(k)]["x"] = c.x.back();
  }
  return c;
}

RankOutputs run_collective(const Case& c, const std::string& call) {
  std::string src = fmt::format("input x : f32[{}, {}]\ny = {}\noutput y\n", c.shape[0], c.shape[1], call);
  return run(src, c.n, c.inputs);
}

double combine(const std::string& op, double a, double b) {
  if (op == "prod") return a * b;
  if (op == "max") return std::max(a, b);
  if (op == "min") return std::min(a, b);
  return a + b;
}

double reduce_at(const Case& c, const std::string& op, const std::vector<int64_t>& idx) {
  double acc = at(c.x[0], idx);
  for (int k = 1; k < c.n; ++k) acc = combine(op, acc, at(c.x[size_t(k)], idx));
  if (op == "avg") acc = double(float(acc) / float(c.n));
  return acc;
}

const std::vector<std::string> kOps = {"sum", "avg", "prod", "max", "min"};

TEST_CASE("all_reduce, reduce and reduce_scatter with every reduction op") {
  for (int n = 1; n <= 4; ++n) {
    Case c = make_case(n);
    for (const std::string& op : kOps) {
      CAPTURE(n);
      CAPTURE(op);
      RankOutputs ar = run_collective(c, fmt::format("all_reduce(x, op={})", op));
      for (int r = 0; r < n; ++r) {
        const Tensor& y = out(ar, r, "y");
        REQUIRE(y.shape() == c.shape);
        for_each_index(c.shape, [&](const auto& idx) { CHECK(at(y, idx) == reduce_at(c, op, idx)); });
      }
      for (int root = 0; root < n; ++root) {
        RankOutputs rd = run_collective(c, fmt::format("reduce(x, root={}, op={})", root, op));
        for (int r = 0; r < n; ++r)
          for_each_index(c.shape, [&](const auto& idx) {
            CHECK(at(out(rd, r, "y"), idx) == (r == root ? reduce_at(c, op, idx) : 0.0));
          });
      }
      for (int axis : {0, 1}) {
        RankOutputs rs = run_collective(c, fmt::format("reduce_scatter(x, axis={}, op={})", axis, op));
        for (int r = 0; r < n; ++r) {
          const Tensor& y = out(rs, r, "y");
          Shape want = c.shape;
          want[size_t(axis)] /= n;
          REQUIRE(y.shape() == want);
          for_each_index(want, [&](const auto& idx) {
            auto src = idx;
            src[size_t(axis)] += r * want[size_t(axis)];
            CHECK(at(y, idx) == reduce_at(c, op, src));
          });
        }
      }
    }
  }
}

TEST_CASE("all_gather and gather concatenate in rank order") {
  for (int n = 1; n <= 4; ++n) {
    Case c = make_case(n);
    for (int axis : {0, 1, -1}) {
      int a = axis < 0 ? axis + 2 : axis;
      CAPTURE(n);
      CAPTURE(axis);
      Shape want = c.shape;
      want[size_t(a)] *= n;
      auto gathered = [&](const std::vector<int64_t>& idx) {
        auto src = idx;
        int64_t k = idx[size_t(a)] / c.shape[size_t(a)];
        src[size_t(a)] %= c.shape[size_t(a)];
        return at(c.x[size_t(k)], src);
      };
      RankOutputs ag = run_collective(c, fmt::format("all_gather(x, axis={})", axis));
      for (int r = 0; r < n; ++r) {
        REQUIRE(out(ag, r, "y").shape() == want);
        for_each_index(want, [&](const auto& idx) { CHECK(at(out(ag, r, "y"), idx) == gathered(idx)); });
      }
      for (int root = 0; root < n; ++root) {
        RankOutputs g = run_collective(c, fmt::format("gather(x, root={}, axis={})", root, axis));
        for (int r = 0; r < n; ++r)
          for_each_index(want,
                         [&](const auto& idx) { CHECK(at(out(g, r, "y"), idx) == (r == root ? gathered(idx) : 0.0)); });
      }
    }
  }
}

TEST_CASE("broadcast and scatter take the root's value") {
  for (int n = 1; n <= 4; ++n) {
    Case c = make_case(n);
    for (int root = 0; root < n; ++root) {
      CAPTURE(n);
      CAPTURE(root);
      RankOutputs b = run_collective(c, fmt::format("broadcast(x, root={})", root));
      for (int r = 0; r < n; ++r) CHECK(out(b, r, "y").same_values(c.x[size_t(root)]));
      for (int axis : {0, 1}) {
        RankOutputs s = run_collective(c, fmt::format("scatter(x, root={}, axis={})", root, axis));
        Shape want = c.shape;
        want[size_t(axis)] /= n;
        for (int r = 0; r < n; ++r) {
          REQUIRE(out(s, r, "y").shape() == want);
          for_each_index(want, [&](const auto& idx) {
            auto src = idx;
            src[size_t(axis)] += r * want[size_t(axis)];
            CHECK(at(out(s, r, "y"), idx) == at(c.x[size_t(root)], src));
          });
        }
      }
    }
  }
}

TEST_CASE("all_to_all sends block r of every rank to rank r") {
  for (int n = 1; n <= 4; ++n) {
    Case c = make_case(n);
    for (int split : {0, 1})
      for (int cat : {0, 1}) {
        CAPTURE(n);
        CAPTURE(split);
        CAPTURE(cat);
        RankOutputs o = run_collective(c, fmt::format("all_to_all(x, split_axis={}, concat_axis={})", split, cat));
        Shape blk = c.shape;
        blk[size_t(split)] /= n;
        Shape want = blk;
        want[size_t(cat)] *= n;
        for (int r = 0; r < n; ++r) {
          REQUIRE(out(o, r, "y").shape() == want);
          for_each_index(want, [&](const auto& idx) {
            int64_t k = idx[size_t(cat)] / blk[size_t(cat)];
            auto src = idx;
            src[size_t(cat)] %= blk[size_t(cat)];
            src[size_t(split)] += r * blk[size_t(split)];
            CHECK(at(out(o, r, "y"), idx) == at(c.x[size_t(k)], src));
          });
        }
      }
  }
}

TEST_CASE("permute by shift and by pairs") {
  for (int n = 1; n <= 4; ++n) {
    Case c = make_case(n);
    for (int shift : {1, -1, 2, 5}) {
      CAPTURE(n);
      CAPTURE(shift);
      RankOutputs o = run_collective(c, fmt::format("permute(x, shift={})", shift));
      for (int r = 0; r < n; ++r) CHECK(out(o, r, "y").same_values(c.x[size_t(((r - shift) % n + n) % n)]));
    }
    // Only rank n-1 receives (from rank 0); every other rank gets zeros.
    RankOutputs o = run_collective(c, fmt::format("permute(x, pairs=[[0, {}]])", n - 1));
    for (int r = 0; r < n; ++r) {
      if (r == n - 1)
        CHECK(out(o, r, "y").same_values(c.x[0]));
      else
        CHECK(out(o, r, "y").same_values(Tensor::zeros(c.x[0].type)));
    }
  }
}

TEST_CASE("collectives on i32 and f64 values") {
  RankInputs in(3);
  for (int k = 0; k < 3; ++k) {
    in[size_t(k)]["a"] = make(Type{DType::I32, {3}}, [&](int64_t i) { return double(k * 10 + i); });
    in[size_t(k)]["b"] = make(Type{DType::F64, {3}}, [&](int64_t i) { return 0.1 * double(k + i); });
  }
  auto o =
      run("input a : i32[3]\ninput b : f64[3]\ns = all_reduce(a)\nm = all_reduce(b, op=max)\noutput s, m\n", 3, in);
  for (int r = 0; r < 3; ++r) {
    CHECK(out(o, r, "s").dtype() == DType::I32);
    check_values(out(o, r, "s"), {30, 33, 36});
    CHECK(out(o, r, "m").dtype() == DType::F64);
    check_values(out(o, r, "m"), {0.2, 0.1 * 3, 0.1 * 4});
  }
}

}  // namespace
}  // namespace gradc::test
