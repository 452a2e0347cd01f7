// A class for any value of a program's sizes (gradc emit --size B=any), made from the
// classes generated at several values of them. Shapes stay concrete through every
// pass; what depends on a size in generated code is its numbers (counts, strides, BLAS
// dimensions, byte counts, a mean's divisor), and the emitter in its any-size form
// (set_any in codegen/cpp.cpp) prints everything else the same at every size: each
// functor and the class hold the sizes (sz, sz_), the workspace is planned again when
// they change (runtime/plan.h). So the texts generated at the sizes tried must be the
// same but for numbers, and each number that differs becomes a formula in the sizes:
// the polynomial (of degree at most 3 in each size) fitted through its values, or for
// a float one over such a polynomial, checked at sizes outside the fit.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/cpp.h"

namespace gradc {

// The files generated with the sizes at one point.
struct SizedFiles {
  std::vector<int64_t> sizes;  // one value per variable
  std::vector<GeneratedFile> files;
};

// The points fit_any_size needs, as multiples of m (t = kAnyFirst..kAnyFirst+kAnyDegree,
// each combination, the first size's slowest, then two check points, every size at 97m
// and the first at 101m): their sizes. Sizes unlike a program's own numbers, so that
// no size's value equals another constant of the program (which a pass would then
// merge with it, at that size only).
constexpr int kAnyDegree = 3, kAnyFirst = 89;
// The largest constant the class for any size has folded into an array (the fold
// pass's max_folded): a value with a size among its dimensions has more elements at
// every point tried, so it stays the op that computes it at run time.
constexpr int64_t kAnyMaxFolded = 64;
std::vector<std::vector<int64_t>> any_size_points(const std::vector<int64_t>& m);

struct AnySizeResult {
  std::vector<GeneratedFile> files;  // the class for any size; empty where none fits
  std::string why;                   // else, what differs where
  // a number in a table (gradc::Table16, computed once when the program is loaded)
  // depends on the sizes: the files must be made again without tables
  bool in_table = false;
};

// The files of `at` (generated at any_size_points(m), in that order) merged into one set
// whose numbers are formulas in `vars`: in a functor (namespace X_kernels in the file
// X.cpp) and in CLASS_main.cpp written with `sz.`, elsewhere in C++ code with `sz_.`, in
// Python code (a .py file) with the sizes' names, in a comment (and a Python string) as
// text. @M_V@ becomes m of size V.
AnySizeResult fit_any_size(const std::vector<std::string>& vars, const std::vector<int64_t>& m,
                           const std::vector<SizedFiles>& at, const std::string& class_name);

// The least value of each size at which the program is the one the class was fitted
// to. Shapes and attributes are polynomials in the sizes only where the program's
// piecewise rules stay on one piece: a slice's bound clamped to its axis at small B
// (x[1:2] of an axis of 1 is empty), an index or a top-k in range, a divisor above 0.
// `program_at` gives the program's IR text at some sizes (nothing where the program is
// none there); at every multiple below the grid (each size in turn, the others at the
// grid's first point) its numbers must be the polynomials through the grid's, else the
// least size is above it. Above the grid it is checked at 200m, 1000m, 10^4 m and
// 10^5 m (a change past a threshold below 10^5 m shows at the next of them; one
// beyond, or one the program changes back after, is not seen): `why` says where it
// differs there, and then no class fits.
struct LeastSizes {
  std::vector<int64_t> least;  // one per size, each a multiple of its m
  std::string why;             // non-empty where the program changes above the grid
};
LeastSizes least_sizes(const std::vector<std::string>& vars, const std::vector<int64_t>& m,
                       const std::function<std::optional<std::string>(const std::vector<int64_t>&)>& program_at);

}  // namespace gradc
