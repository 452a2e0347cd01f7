// Helpers for the unit tests: run a .dg source on N ranks, build and read tensors.
#pragma once
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "frontend/ast.h"
#include "frontend/lower.h"
#include "passes/autodiff.h"
#include "runtime/interp.h"

namespace gradc::test {

inline Graph compile(const std::string& src, int ranks = 0) { return lower_program(parse_program(src), ranks); }

// As gradc run --backend=interp runs it: after the autodiff pass (grads and the
// composites' given derivatives replaced).
inline RankOutputs run(const std::string& src, int ranks, RankInputs in = {}) {
  Graph g = autodiff(compile(src, ranks));
  if (in.empty()) in.resize(size_t(g.world));
  return interpret(g, in);
}

// Output `name` of rank r.
inline const Tensor& out(const RankOutputs& o, int r, const std::string& name) {
  for (const auto& [n, t] : o[size_t(r)])
    if (n == name) return t;
  FAIL("no output " << name);
  static Tensor none;
  return none;
}

inline Tensor make(const Type& t, const std::function<double(int64_t)>& f) {
  std::vector<double> v(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[size_t(i)] = f(i);
  return v.empty() ? Tensor::empty(t) : Tensor::from(t, v);
}

// Visits every multi-index of `shape` in row-major order.
inline void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> idx(shape.size(), 0);
  if (num_elements(shape) == 0) return;
  for (;;) {
    f(idx);
    int d = int(shape.size()) - 1;
    while (d >= 0 && ++idx[size_t(d)] == shape[size_t(d)]) idx[size_t(d--)] = 0;
    if (d < 0) return;
  }
}

inline int64_t flat(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
  return f;
}

inline double at(const Tensor& t, const std::vector<int64_t>& idx) { return t.get(flat(t.shape(), idx)); }

inline void check_values(const Tensor& t, const std::vector<double>& want, double tol = 0) {
  REQUIRE(t.size() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    if (tol == 0)
      CHECK(t.get(int64_t(i)) == want[i]);
    else
      CHECK(t.get(int64_t(i)) == doctest::Approx(want[i]).epsilon(tol));
  }
}

}  // namespace gradc::test
