#include "runtime/gradcheck.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ir/print.h"
#include "passes/autodiff.h"
#include "passes/unroll.h"
#include "runtime/memory.h"

namespace gradc {

namespace {

bool close(double a, double b, const GradCheckOptions& o) { return std::fabs(a - b) <= o.atol + o.rtol * std::fabs(b); }

// The objective a grad differentiates, from every rank's loss (LANGUAGE.md section 6).
double objective(const std::vector<Tensor>& loss, const std::string& mode) {
  auto total = [](const Tensor& t) {
    double s = 0;
    for (int64_t i = 0; i < t.size(); ++i) s += t.get(i);
    return s;
  };
  if (mode == "global") return total(loss[0]);
  double s = 0;
  for (const Tensor& t : loss) s += total(t);
  return mode == "mean" ? s / double(loss.size()) : s;
}

Tensor with_element(const Tensor& t, int64_t i, double v) {
  std::vector<double> vals = t.values();
  vals[size_t(i)] = v;
  return Tensor::from(t.type, vals);
}

}  // namespace

std::vector<GradCheckRow> check_gradients(const Graph& g, const RankInputs& inputs, const GradCheckOptions& opt) {
  const int N = g.world;
  std::vector<GradInfo> info;
  Graph spmd = autodiff(g, &info);
  check_memory(spmd, 2, "gradc verify (the program and its single-process reference)");
  std::vector<ValueId> wanted;  // every gradient, and every value it is taken with respect to
  for (const GradInfo& gi : info) {
    wanted.push_back(gi.result);
    wanted.push_back(gi.w);
  }
  auto vals = evaluate(spmd, inputs, wanted);

  // The single-process reference, with rank r's input x renamed x#r.
  Unrolled u = unroll(g);
  std::vector<GradInfo> uinfo;
  Graph ref = autodiff(u.g, &uinfo);
  RankInputs ref_in(1);
  for (const Node& n : g.nodes) {
    if (n.op != Op::Input) continue;
    const std::string& name = n.attr_sym("name");
    for (int r = 0; r < N; ++r) {
      auto it = inputs[size_t(r)].find(name);
      if (it == inputs[size_t(r)].end()) continue;
      ref_in[0][n.attrs.has("shared") ? name : unrolled_input_name(name, r)] = it->second;
    }
  }
  std::vector<ValueId> ref_results;
  for (const GradInfo& gi : uinfo) ref_results.push_back(gi.result);
  auto ref_vals = evaluate(ref, ref_in, ref_results);

  std::vector<std::string> names = value_names(spmd);
  std::vector<GradCheckRow> rows;
  for (size_t k = 0; k < info.size(); ++k) {
    const GradInfo& gi = info[k];
    GradCheckRow row;
    row.name = gi.name.empty() ? fmt::format("grad #{}", k + 1) : gi.name;
    row.wrt = spmd[gi.w].name.empty() ? "%" + names[size_t(gi.w)] : spmd[gi.w].name;
    row.type = type_str(spmd.type(gi.w));
    row.mode = gi.mode;
    const std::vector<Tensor>& got = vals[size_t(gi.result)];

    for (int r = 0; r < N; ++r) {
      const Tensor& want = ref_vals[size_t(uinfo[size_t(u.grads[k][size_t(r)])].result)][0];
      for (int64_t i = 0; i < want.size(); ++i) {
        double a = got[size_t(r)].get(i), b = want.get(i);
        row.ref_err = std::max(row.ref_err, std::fabs(a - b));
        if (!close(a, b, opt)) row.ok = false;
      }
    }

    // Central differences of the objective, perturbing w on one rank (on all
    // ranks at once for a shared input: it is one variable).
    const bool shared = spmd[gi.w].op == Op::Input && spmd[gi.w].attrs.has("shared");
    const std::vector<Tensor>& base = vals[size_t(gi.w)];
    const int64_t size = base[0].size();
    const int64_t step = std::max<int64_t>(1, (size + opt.max_fd_elements - 1) / opt.max_fd_elements);
    for (int r = 0; opt.finite_differences && r < (shared ? 1 : N); ++r) {
      row.fd_total += size;
      for (int64_t i = 0; i < size; i += step) {
        double w0 = base[size_t(r)].get(i);
        double h = 1e-5 * std::max(1.0, std::fabs(w0));
        double L[2];
        for (int s = 0; s < 2; ++s) {
          Overrides ov;
          ov[gi.w] = base;
          for (int q = 0; q < N; ++q)
            if (shared || q == r) ov[gi.w][size_t(q)] = with_element(base[size_t(q)], i, w0 + (s ? -h : h));
          L[s] = objective(evaluate(spmd, inputs, {gi.loss}, &ov)[size_t(gi.loss)], gi.mode);
        }
        double fd = (L[0] - L[1]) / (2 * h);
        double a = got[size_t(r)].get(i);
        row.fd_err = std::max(row.fd_err, std::fabs(a - fd));
        if (!close(a, fd, opt)) row.ok = false;
        ++row.fd_checked;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

std::string gradcheck_table(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt) {
  std::string s = fmt::format("{:<12} {:<12} {:<16} {:<7} {:>12} {:>14} {:>12}  {}\n", "gradient", "of", "type", "mode",
                              "fd max err", "fd elements", "ref max err", "status");
  for (const GradCheckRow& r : rows)
    s += fmt::format("{:<12} {:<12} {:<16} {:<7} {:>12.3e} {:>14} {:>12.3e}  {}\n", r.name, r.wrt, r.type, r.mode,
                     r.fd_err, fmt::format("{}/{}", r.fd_checked, r.fd_total), r.ref_err, r.ok ? "ok" : "MISMATCH");
  s += fmt::format("{} gradient{} checked in f64 (rtol {}, atol {}): {}\n", rows.size(), rows.size() == 1 ? "" : "s",
                   opt.rtol, opt.atol,
                   std::all_of(rows.begin(), rows.end(), [](const GradCheckRow& r) { return r.ok; }) ? "all ok"
                                                                                                   : "MISMATCH");
  return s;
}

}  // namespace gradc
