#include "support/polynomial.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace gradc {

namespace {
int128 gcd128(int128 a, int128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) {
    const int128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}

std::string int128_str(int128 v) {
  char digits[48];  // 39 digits at most, and the sign
  char* p = digits + sizeof digits;
  const bool neg = v < 0;
  do *--p = char('0' + int(neg ? -(v % 10) : v % 10));
  while (v /= 10);
  if (neg) *--p = '-';
  return std::string(p, size_t(digits + sizeof digits - p));
}
}  // namespace

Rational::Rational(int128 n, int128 d) {
  if (d == 0) throw std::domain_error("a rational with denominator 0");
  if (d < 0) n = -n, d = -d;
  const int128 g = gcd128(n, d);
  num = g ? n / g : 0;
  den = g ? d / g : 1;
}

std::string Rational::str() const { return den == 1 ? int128_str(num) : int128_str(num) + "/" + int128_str(den); }

Rational operator+(const Rational& a, const Rational& b) { return {a.num * b.den + b.num * a.den, a.den * b.den}; }
Rational operator-(const Rational& a, const Rational& b) { return {a.num * b.den - b.num * a.den, a.den * b.den}; }
Rational operator*(const Rational& a, const Rational& b) { return {a.num * b.num, a.den * b.den}; }
Rational operator/(const Rational& a, const Rational& b) { return {a.num * b.den, a.den * b.num}; }

std::optional<Rational> rational_of(double v, int64_t max_den) {
  if (!std::isfinite(v) || std::fabs(v) > 1e30) return std::nullopt;
  for (int64_t d = 1; d <= max_den; ++d) {
    const double n = std::round(v * double(d));
    if (std::fabs(v * double(d) - n) <= 1e-9 * std::max(1.0, std::fabs(n))) return Rational(int128(n), d);
  }
  return std::nullopt;
}

Rational Polynomial::at(const std::vector<int64_t>& x) const {
  Rational sum;
  for (const auto& [exps, c] : terms) {
    Rational t = c;
    for (size_t i = 0; i < exps.size(); ++i)
      for (int e = 0; e < exps[i]; ++e) t = t * Rational(x[i]);
    sum = sum + t;
  }
  return sum;
}

namespace {
// The terms by total degree, highest first, then by their exponents (the keys are
// distinct, so the order is total).
std::vector<std::pair<std::vector<int>, Rational>> by_degree(const std::map<std::vector<int>, Rational>& terms) {
  std::vector<std::pair<std::vector<int>, Rational>> order(terms.begin(), terms.end());
  auto degree = [](const std::vector<int>& e) {
    int d = 0;
    for (int x : e) d += x;
    return d;
  };
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return degree(a.first) != degree(b.first) ? degree(a.first) > degree(b.first) : a.first > b.first;
  });
  return order;
}
}  // namespace

std::string Polynomial::str() const {
  std::string s;
  for (const auto& [exps, c] : by_degree(terms)) {
    std::string mono;
    for (size_t i = 0; i < exps.size(); ++i) {
      if (!exps[i]) continue;
      if (!mono.empty()) mono += "*";
      mono += vars[i];
      if (exps[i] > 1) mono += fmt::format("^{}", exps[i]);
    }
    const Rational a = c.num < 0 ? Rational(-c.num, c.den) : c;
    std::string term;
    if (mono.empty())
      term = a.str();
    else if (a.den == 1)
      term = a.num == 1 ? mono : int128_str(a.num) + "*" + mono;
    else
      term = (a.num == 1 ? mono : int128_str(a.num) + "*" + mono) + "/" + int128_str(a.den);
    s += s.empty() ? (c.num < 0 ? "-" : "") : (c.num < 0 ? " - " : " + ");
    s += term;
  }
  return s.empty() ? "0" : s;
}

std::string Polynomial::cpp_str(const std::string& prefix) const {
  int128 den = 1;  // the least common multiple of the coefficients' denominators
  for (const auto& [exps, c] : terms) {
    int128 a = den, b = c.den;
    while (b) a %= b, std::swap(a, b);
    den = den / a * c.den;
  }
  std::string s;
  for (const auto& [exps, c] : by_degree(terms)) {
    const int128 k = c.num * (den / c.den);
    std::vector<std::string> factors;
    if (k != 1 && k != -1) factors.push_back(int128_str(k < 0 ? -k : k));
    for (size_t i = 0; i < exps.size(); ++i)
      for (int e = 0; e < exps[i]; ++e) factors.push_back(prefix + vars[i]);
    if (factors.empty()) factors.push_back("1");
    s += s.empty() ? (k < 0 ? "-" : "") : (k < 0 ? " - " : " + ");
    s += fmt::format("{}", fmt::join(factors, "*"));
  }
  if (s.empty()) return "0";
  if (den != 1) return fmt::format("({}) / {}", s, int128_str(den));
  return s;
}

Polynomial fit_on_grid(const std::vector<std::string>& vars, const std::vector<int64_t>& m, int degree,
                       const std::vector<Rational>& values, int first) {
  const size_t k = vars.size(), n = size_t(degree) + 1;
  size_t count = 1;
  for (size_t i = 0; i < k; ++i) count *= n;
  if (values.size() != count || m.size() != k) throw std::invalid_argument("fit_on_grid: values do not fill the grid");
  // w = the inverse of the Vandermonde matrix v[t-first][a] = t^a (Gauss-Jordan, exact):
  // w times a variable's values at t = first..first+degree gives the coefficients of
  // t^0..t^degree.
  std::vector<std::vector<Rational>> v(n, std::vector<Rational>(2 * n));
  for (size_t r = 0; r < n; ++r) {
    Rational p(1);
    for (size_t a = 0; a < n; ++a, p = p * Rational(int128(r) + first)) v[r][a] = p;
    v[r][n + r] = Rational(1);
  }
  for (size_t col = 0; col < n; ++col) {
    size_t piv = col;
    while (v[piv][col].num == 0) ++piv;  // the matrix is invertible: some row has it
    std::swap(v[piv], v[col]);
    const Rational d = v[col][col];
    for (Rational& x : v[col]) x = x / d;
    for (size_t r = 0; r < n; ++r) {
      if (r == col || v[r][col].num == 0) continue;
      const Rational f = v[r][col];
      for (size_t c = 0; c < 2 * n; ++c) v[r][c] = v[r][c] - f * v[col][c];
    }
  }
  // Along each variable in turn: the values of its t's become its coefficients.
  std::vector<Rational> c = values;
  size_t stride = count;
  for (size_t i = 0; i < k; ++i) {
    stride /= n;
    for (size_t base = 0; base < count; ++base) {
      if ((base / stride) % n != 0) continue;  // the first element of a fiber along variable i
      std::vector<Rational> fiber(n);
      for (size_t a = 0; a < n; ++a) {
        for (size_t t = 0; t < n; ++t) fiber[a] = fiber[a] + v[a][n + t] * c[base + t * stride];
      }
      for (size_t a = 0; a < n; ++a) c[base + a * stride] = fiber[a];
    }
  }
  // t_i = x_i / m_i: the coefficient of t^a is that of x^a times the m_i^a_i.
  Polynomial p;
  p.vars = vars;
  for (size_t idx = 0; idx < count; ++idx) {
    if (c[idx].num == 0) continue;
    std::vector<int> exps(k);
    Rational scale(1);
    for (size_t i = 0, rest = idx, s = count; i < k; ++i) {
      s /= n;
      exps[i] = int(rest / s);
      rest %= s;
      for (int e = 0; e < exps[i]; ++e) scale = scale * Rational(m[i]);
    }
    p.terms[exps] = c[idx] / scale;
  }
  return p;
}

std::vector<std::vector<int64_t>> grid_points(const std::vector<int64_t>& m, int degree, int first, int64_t check,
                                              int64_t check2) {
  const size_t k = m.size(), n = size_t(degree) + 1;
  size_t grid = 1;
  for (size_t i = 0; i < k; ++i) grid *= n;
  std::vector<std::vector<int64_t>> points;
  for (size_t idx = 0; idx < grid; ++idx) {
    std::vector<int64_t> x(k);
    for (size_t i = k, rest = idx; i-- > 0; rest /= n) x[i] = m[i] * (int64_t(rest % n) + first);
    points.push_back(x);
  }
  points.push_back(std::vector<int64_t>(k));
  points.push_back(std::vector<int64_t>(k));
  for (size_t i = 0; i < k; ++i) points[grid][i] = points[grid + 1][i] = check * m[i];
  if (k > 0) points[grid + 1][0] = check2 * m[0];
  return points;
}

std::optional<std::vector<int64_t>> least_multiples(size_t vars, const std::vector<int64_t>& candidates,
                                                    const std::function<bool(const std::vector<int64_t>&)>& works) {
  for (int64_t c : candidates) {
    std::vector<int64_t> m(vars, c);
    if (!works(m)) continue;
    for (size_t i = 0; i < vars && c > 1; ++i)
      for (int64_t d : candidates) {
        if (d >= m[i] || c % d != 0) continue;
        std::vector<int64_t> looser = m;
        looser[i] = d;
        if (works(looser)) {
          m = looser;
          break;
        }
      }
    return m;
  }
  return std::nullopt;
}

}  // namespace gradc
