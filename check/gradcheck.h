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
  // The backend `gradc run` uses by default (the native one where its compiler is
  // found): runs a program (after grad) on every rank. Left empty, only the
  // interpreter's gradients are checked.
  std::function<RankOutputs(const Graph&, const RankInputs&)> run_default;
  std::string default_name = "native";
  std::string source;  // the program's path, for each gradient's place
};

struct GradCheckRow {
  std::string name;  // the gradient's name in the program
  std::string wrt;   // the value it is the gradient of
  std::string type;
  std::string mode;
  Loc loc;                  // where the grad is (with the def calls it was reached through)
  double fd_err = 0;        // largest |gradient - finite difference| (kinks left out)
  double fd_tol = 0;        // the tolerance at the element closest to failing (see check_gradients)
  double ref_err = 0;       // largest |gradient - reference gradient|
  double backend_err = -1;  // largest |default backend - interpreter| on the program as written (-1: not run)
  int64_t fd_checked = 0, fd_total = 0;
  int64_t kinks = 0;  // elements where the one-sided differences disagree and the gradient lies between them
  bool ok = true;
  // Where a failing row fails first: the check ("reference", "finite differences" or
  // the default backend's name), the rank and the element ("[1, 0]").
  std::string failed_check, failed_element;
  int failed_rank = -1;
  void fail(const std::string& check, int rank, const std::string& element);
  std::string status() const;  // "ok", "ok, 2 kinks" or "MISMATCH (reference, rank 1, [1, 0])"
};

// `g` is the program lowered in f64 (grad nodes still in it); `inputs` its data.
//
// The finite-difference tolerance of an element is atol + rtol |fd| + an estimate
// of the finite difference's own error: three times the difference between the
// central differences at steps h and 2h (truncation, and rounding noise at that
// step), plus the rounding of the objective, 16 eps max|L| / h. So a loss summed
// over 128 ranks, or over a 1000x1000 matmul, is not failed for its noise. With
// rtol = atol = 0 nothing is allowed, the estimate included.
// `reference` (default: g) is the program the single-process reference is made from:
// for a torch pullback program, its own_as_unshared form (passes/autodiff.h).
std::vector<GradCheckRow> check_gradients(const Graph& g, const RankInputs& inputs, const GradCheckOptions& opt,
                                          const Graph* reference = nullptr);

// What users run: the program as written (`g`, in its own dtypes, grad nodes still in
// it) on the default backend against the interpreter, on the same inputs. Each row's
// gradient is compared (backend_err; the row fails where they differ), and so is every
// output: the outputs that differ are returned, one line each (empty: they agree).
// Equal means |a - b| <= 1e-4 |b| + 1e-5 max(1, max |b|) + 2 rounding[o] per element of
// the o-th output (of the program, then its gradients), NaN for NaN. `rounding`, for a
// program with bf16 or f16 values, is each output's own rounding error (check_precision's
// abs_err): a sum in another order, or an f32 result a last bit apart, turns the
// rounding of a 16-bit value that sits on a boundary the other way, a whole ulp of the
// 16-bit type, which the values after it carry; each backend is then as close to the
// exact value, so at most twice that from the other, and a wrong kernel is far further.
std::vector<std::string> check_backend(const Graph& g, const RankInputs& inputs, std::vector<GradCheckRow>& rows,
                                       const GradCheckOptions& opt, const std::vector<double>& rounding = {});
// The precision of a program with bf16 or f16 values (docs/language.md, "Low
// precision"): each output and gradient of the program as written (`low`, grad nodes
// still in it) against the same of `wide`, the program widened to f64, on the same
// inputs (`inputs`: the low program's, defaults evaluated; widened for `wide`). Its
// relative error is max |low - wide| / max |wide| over every element of every rank; its
// estimate, k u: k the roundings to a 16-bit type on the longest path of ops to it, u
// the unit roundoff of the coarsest such type (2^-8 for bf16, 2^-11 for f16), a first-
// order bound for a chain whose ops are well conditioned.
struct PrecisionRow {
  std::string name, type;
  double rel_err = 0, estimate = 0;
  int roundings = 0;
};
// `abs_err`, when given, gets max |low - wide| of every output and gradient, in
// check_backend's order (0 where it is not finite).
std::vector<PrecisionRow> check_precision(const Graph& low, const Graph& wide, const RankInputs& inputs,
                                          std::vector<double>* abs_err = nullptr);
std::string precision_table(const std::vector<PrecisionRow>& rows);
std::string precision_json(const std::vector<PrecisionRow>& rows);  // a JSON list

// `outputs_differ`: check_backend's lines for outputs (they fail the check too).
std::string gradcheck_table(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt,
                            const std::vector<std::string>& outputs_differ = {});
std::string gradcheck_json(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt,
                           const std::vector<std::string>& outputs_differ = {});

}  // namespace gradc
