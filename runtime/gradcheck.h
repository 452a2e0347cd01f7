// `gradc verify`: every gradient of a program checked two ways, in f64:
// against central finite differences of the objective, and against the
// single-process reference (passes/unroll.h) differentiated with local rules.
#pragma once
#include <string>
#include <vector>

#include "runtime/interp.h"

namespace gradc {

struct GradCheckOptions {
  double rtol = 1e-5, atol = 1e-7;
  int64_t max_fd_elements = 48;  // per gradient and rank; larger values are sampled evenly
  bool finite_differences = true;  // off for data with ties or zeros, where only the reference applies
};

struct GradCheckRow {
  std::string name;  // the gradient's name in the program
  std::string wrt;   // the value it is the gradient of
  std::string type;
  std::string mode;
  double fd_err = 0;   // largest |gradient - finite difference|
  double ref_err = 0;  // largest |gradient - reference gradient|
  int64_t fd_checked = 0, fd_total = 0;
  bool ok = true;
};

// `g` is the program lowered in f64 (grad nodes still in it); `inputs` its data.
std::vector<GradCheckRow> check_gradients(const Graph& g, const RankInputs& inputs, const GradCheckOptions& opt);
std::string gradcheck_table(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt);

}  // namespace gradc
