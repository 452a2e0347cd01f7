// Polynomials in named variables with exact rational coefficients, fitted to values
// on a grid: `gradc cost` gives a program's bytes and flops as functions of its
// `size` parameters by fitting the counts it computes at several sizes.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gradc {

__extension__ typedef __int128 int128;  // GCC's and clang's 128-bit integer

// n/d in lowest terms, d > 0. The counts fitted here stay far inside 128 bits.
struct Rational {
  int128 num = 0, den = 1;
  Rational() = default;
  Rational(int128 n, int128 d = 1);
  bool operator==(const Rational&) const = default;
  std::string str() const;  // "3", "-3/4"
};
Rational operator+(const Rational& a, const Rational& b);
Rational operator-(const Rational& a, const Rational& b);
Rational operator*(const Rational& a, const Rational& b);
Rational operator/(const Rational& a, const Rational& b);

// A count computed in double (bytes averaged over N ranks, say) as n/d with d at most
// `max_den`; nothing where no such fraction is within rounding of it.
std::optional<Rational> rational_of(double v, int64_t max_den = 1024);

struct Polynomial {
  std::vector<std::string> vars;
  std::map<std::vector<int>, Rational> terms;  // exponents (one per variable) -> nonzero coefficient
  Rational at(const std::vector<int64_t>& x) const;
  // "2*B^2 + 36*B + 8", "B*C/2 - 3", "0": terms by total degree, highest first.
  std::string str() const;
  // As an integer expression in C++, each variable v written prefix + v: "16*sz.B + 4",
  // "(sz.B*sz.B + sz.B) / 2" (a division that is exact wherever the values are integers).
  std::string cpp_str(const std::string& prefix) const;
};

// The polynomial of degree at most `degree` in each variable that takes `values` at
// the grid's points: variable i at m[i]*t, t = first..first+degree, every combination,
// the first variable's t slowest (values.size() == (degree+1)^vars.size()).
Polynomial fit_on_grid(const std::vector<std::string>& vars, const std::vector<int64_t>& m, int degree,
                       const std::vector<Rational>& values, int first = 1);

// fit_on_grid's points (the first (degree+1)^k), then the two a fit is checked at:
// every variable at m[i]*check, and the first at m[0]*check2 with the rest at m[i]*check.
std::vector<std::vector<int64_t>> grid_points(const std::vector<int64_t>& m, int degree, int first, int64_t check,
                                              int64_t check2);

// The multiples (one per variable) at which `works` holds, the least found: each
// candidate c in turn for every variable at once; at the first that works, each
// variable's in turn made the least candidate dividing c that still works, the others'
// kept. Nothing where no candidate works. `gradc cost` (a count's formula) and `gradc
// emit --size B=any` (the class's) search so.
std::optional<std::vector<int64_t>> least_multiples(size_t vars, const std::vector<int64_t>& candidates,
                                                    const std::function<bool(const std::vector<int64_t>&)>& works);

}  // namespace gradc
