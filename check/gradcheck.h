// `gradc verify`: every gradient of a program checked two ways, in f64:
// against central finite differences of the objective, and against the
// single-process reference (passes/unroll.h) differentiated with local rules.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "runtime/interp.h"

namespace gradc {

struct GradCheckOptions {
  double rtol = 1e-5, atol = 1e-7;
  // Finite differences on at most this many elements per gradient (over all ranks
  // together, chosen at random with a fixed seed; all of them when fewer), so that
  // the cost grows linearly with the number of ranks.
  int64_t samples = 64;
  bool finite_differences = true;  // off for data with ties or zeros, where only the reference applies
  std::function<void(const std::string&)> progress;  // called at most once a second after the first second
};

struct GradCheckRow {
  std::string name;  // the gradient's name in the program
  std::string wrt;   // the value it is the gradient of
  std::string type;
  std::string mode;
  double fd_err = 0;   // largest |gradient - finite difference| (kinks left out)
  double fd_tol = 0;   // the tolerance at the element closest to failing (see check_gradients)
  double ref_err = 0;  // largest |gradient - reference gradient|
  int64_t fd_checked = 0, fd_total = 0;
  int64_t kinks = 0;  // elements where the one-sided differences disagree and the gradient lies between them
  bool ok = true;
  std::string status() const;  // "ok", "ok, 2 kinks" or "MISMATCH"
};

// `g` is the program lowered in f64 (grad nodes still in it); `inputs` its data.
//
// The finite-difference tolerance of an element is atol + rtol |fd| + an estimate
// of the finite difference's own error: three times the difference between the
// central differences at steps h and 2h (truncation, and rounding noise at that
// step), plus the rounding of the objective, 16 eps max|L| / h. So a loss summed
// over 128 ranks, or over a 1000x1000 matmul, is not failed for its noise. With
// rtol = atol = 0 nothing is allowed, the estimate included.
std::vector<GradCheckRow> check_gradients(const Graph& g, const RankInputs& inputs, const GradCheckOptions& opt);
std::string gradcheck_table(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt);
std::string gradcheck_json(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt);

}  // namespace gradc
