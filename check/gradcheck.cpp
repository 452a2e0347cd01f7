#include "check/gradcheck.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <set>

#include "check/memory.h"
#include "ir/mesh.h"
#include "ir/print.h"
#include "passes/pass.h"
#include "passes/unroll.h"

namespace gradc {

namespace {

bool close(double a, double b, const GradCheckOptions& o) { return std::fabs(a - b) <= o.atol + o.rtol * std::fabs(b); }

// The objective a grad differentiates, from every rank's loss (docs/language.md sections 6
// and 8): the loss of each group of ranks that share their coordinates on `over`
// counts once; summed, or averaged over the groups.
double objective(const Graph& g, const std::vector<Tensor>& loss, const GradInfo& gi) {
  auto total = [](const Tensor& t) {
    double s = 0;
    for (int64_t i = 0; i < t.size(); ++i) s += t.get(i);
    return s;
  };
  const std::vector<int> reps = loss_representatives(g, gi.over);
  double s = 0;
  for (int r : reps) s += total(loss[size_t(r)]);
  return gi.mode == GradMode::Mean ? s / double(reps.size()) : s;
}

constexpr double kEps = 2.220446049250313e-16;  // f64's machine epsilon

// At most k of the indices 0..n-1, distinct, in increasing order, chosen at random
// with a fixed seed (the k-th gradient's own), so that a run is repeatable.
std::vector<int64_t> sample(int64_t n, int64_t k, size_t seed) {
  std::vector<int64_t> out;
  if (n <= k) {
    for (int64_t i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::mt19937_64 rng(0x9e3779b97f4a7c15ULL + seed);
  std::set<int64_t> chosen;  // Floyd's algorithm: k draws, no rejection loop
  for (int64_t j = n - k; j < n; ++j) {
    int64_t t = int64_t(rng() % uint64_t(j + 1));
    chosen.insert(chosen.count(t) ? j : t);
  }
  return {chosen.begin(), chosen.end()};
}

Tensor with_element(const Tensor& t, int64_t i, double v) {
  std::vector<double> vals = t.values();
  vals[size_t(i)] = v;
  return Tensor::from(t.type, vals);
}

// The grad pipeline, recording what it made of each grad.
Graph grad_pipeline(Graph g, std::vector<GradInfo>& info) {
  PipelineOptions o;
  o.grads = &info;
  return run_pipeline(std::move(g), Pipeline::Grad, o);
}

}  // namespace

std::vector<GradCheckRow> check_gradients(const Graph& g, const RankInputs& inputs, const GradCheckOptions& opt,
                                          const Graph* reference) {
  const int N = g.world;
  // Progress, once a second after the first second.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last = start;
  auto tick = [&](const std::string& what) {
    Clock::time_point now = Clock::now();
    if (!opt.progress || now - start < std::chrono::seconds(1) || now - last < std::chrono::seconds(1)) return;
    last = now;
    opt.progress(what);
  };
  std::vector<GradInfo> info;
  Graph spmd = grad_pipeline(g, info);
  check_memory(spmd, 2, "gradc verify (the program and its single-process reference)");
  std::vector<ValueId> wanted;  // every gradient, and every value it is taken with respect to
  for (const GradInfo& gi : info) {
    wanted.push_back(gi.result);
    wanted.push_back(gi.w);
    wanted.push_back(gi.loss);
  }
  auto vals = evaluate(spmd, inputs, wanted);

  // The single-process reference, with rank r's input x renamed x#r.
  const Graph& stated = reference ? *reference : g;
  Unrolled u = unroll(stated);
  std::vector<GradInfo> uinfo;
  Graph ref = grad_pipeline(u.g, uinfo);
  RankInputs ref_in(1);
  for (const Node& n : stated.nodes) {
    if (n.op != Op::Input) continue;
    const std::string& name = n.attr_sym("name");
    for (int r = 0; r < N; ++r) {
      auto it = inputs[size_t(r)].find(name);
      if (it == inputs[size_t(r)].end()) continue;
      const bool all = shared_everywhere(n);
      ref_in[0][all ? name : unrolled_input_name(name, r)] = it->second;  // shared(A): the group's first rank's
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
    row.wrt = spmd[gi.w].name.empty() ? "%" + names[size_t(gi.w)] : spmd[gi.w].name.str();
    row.type = type_str(spmd.type(gi.w));
    row.mode = grad_mode_name(gi.mode);
    row.loc = gi.loc;
    const std::vector<Tensor>& got = vals[size_t(gi.result)];

    // A value replicated along axes R is one variable for each group of ranks that
    // differ only along R (docs/language.md sections 6 and 8): its gradient is the total of
    // the reference's distinct copies' in the group (a shared input is one copy there
    // already; an all_reduce's result may be one copy for all ranks, or one per rank).
    // (Along the axes of the torch pullback's own=, each rank's copy is its own variable.)
    const uint8_t R = uint8_t(full_mask(spmd) & ~spmd[gi.w].rep.axes() & ~gi.own);
    std::vector<int> group_of(static_cast<size_t>(N), 0);  // each rank's group along R
    const std::vector<std::vector<int>> groups = groups_along(spmd, R);
    for (size_t j = 0; j < groups.size(); ++j)
      for (int q : groups[j]) group_of[size_t(q)] = int(j);
    const bool one_variable = R != 0 && groups[0].size() > 1;
    auto ref_grad = [&](int r) -> const Tensor& {
      return ref_vals[size_t(uinfo[size_t(u.grads[k][size_t(r)])].result)][0];
    };
    for (int r = 0; r < N; ++r) {
      Tensor want = ref_grad(r);
      if (one_variable) {
        want = Tensor::zeros(want.type);  // a new buffer: tensors share theirs when copied
        std::set<ValueId> seen;
        for (int q : groups[size_t(group_of[size_t(r)])])
          if (seen.insert(uinfo[size_t(u.grads[k][size_t(q)])].w).second) combine_into(want, ref_grad(q), Combine::Sum);
      }
      for (int64_t i = 0; i < want.size(); ++i) {
        double a = got[size_t(r)].get(i), b = want.get(i);
        row.ref_err = std::max(row.ref_err, std::fabs(a - b));
        if (!close(a, b, opt)) row.fail("reference", r, element_str(i, want.type.shape));
      }
    }

    // Central differences of the objective at sampled elements, perturbing w on one
    // rank (on all ranks of its group at once for a replicated value: it is one
    // variable there); a replicated value is sampled on the first rank of each group.
    const std::vector<Tensor>& base = vals[size_t(gi.w)];
    std::vector<int> sampled;
    for (int r = 0; r < N; ++r)
      if (!one_variable || groups[size_t(group_of[size_t(r)])][0] == r) sampled.push_back(r);
    const int64_t size = base[0].size(), ranks = int64_t(sampled.size());
    row.fd_total = size * ranks;
    if (!opt.finite_differences) {
      rows.push_back(row);
      continue;
    }
    auto loss_at = [&](int r, int64_t i, double v) {
      Overrides ov;
      ov[gi.w] = base;
      for (int q = 0; q < N; ++q)
        if (q == r || (one_variable && group_of[size_t(q)] == group_of[size_t(r)]))
          ov[gi.w][size_t(q)] = with_element(base[size_t(q)], i, v);
      return objective(spmd, evaluate(spmd, inputs, {gi.loss}, &ov, false)[size_t(gi.loss)], gi);
    };
    const double L0 = objective(spmd, vals[size_t(gi.loss)], gi);
    const bool exact = opt.rtol == 0 && opt.atol == 0;
    double worst = -1;  // the largest err / tol seen
    const std::vector<int64_t> picks = sample(row.fd_total, opt.samples, k);
    for (size_t p = 0; p < picks.size(); ++p) {
      const int r = sampled[size_t(picks[p] / size)];
      const int64_t i = picks[p] % size;
      tick(fmt::format("gradient {}/{} ({}): finite differences {}/{}", k + 1, info.size(), row.name, p + 1,
                       picks.size()));
      const double w0 = base[size_t(r)].get(i);
      const double h = 1e-5 * std::max(1.0, std::fabs(w0));
      const double Lp = loss_at(r, i, w0 + h), Lm = loss_at(r, i, w0 - h);
      const double Lp2 = loss_at(r, i, w0 + 2 * h), Lm2 = loss_at(r, i, w0 - 2 * h);
      const double fd = (Lp - Lm) / (2 * h), fd2 = (Lp2 - Lm2) / (4 * h);
      const double scale = std::max({std::fabs(L0), std::fabs(Lp), std::fabs(Lm), std::fabs(Lp2), std::fabs(Lm2)});
      const double estimate = 3 * std::fabs(fd - fd2) + 16 * kEps * scale / h;
      const double tol = exact ? 0 : opt.atol + opt.rtol * std::fabs(fd) + estimate;
      const double a = got[size_t(r)].get(i), err = std::fabs(a - fd);
      ++row.fd_checked;
      if (err > tol) {
        // A kink (relu or abs at 0, a tie of max or min, of a collective or a reduction,
        // however many ways): the one-sided slopes jump, so no finite difference is the
        // derivative there, and the gradient is PyTorch's choice (0, or the derivative
        // split evenly among the tied values), which the reference checks.
        const double up = (Lp - L0) / h, down = (L0 - Lm) / h;
        const double slack = opt.atol + opt.rtol * std::max(std::fabs(up), std::fabs(down)) + estimate;
        if (!exact && std::fabs(up - down) > 2 * slack) {
          ++row.kinks;
          continue;
        }
        row.fail("finite differences", r, element_str(i, base[0].type.shape));
      }
      row.fd_err = std::max(row.fd_err, err);
      const double ratio = tol > 0 ? err / tol : (err > 0 ? HUGE_VAL : 0);
      if (ratio > worst) {
        worst = ratio;
        row.fd_tol = tol;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

namespace {
// The largest difference between two runs' tensors, or infinity where they differ
// by more than the backends' rounding (see check_backend), and then the element.
struct BackendDiff {
  double err = 0;
  int64_t at = -1;
};
BackendDiff backend_diff(const Tensor& got, const Tensor& want, double allowance) {
  BackendDiff d;
  double scale = 1;
  for (int64_t i = 0; i < want.size(); ++i)
    if (std::isfinite(want.get(i))) scale = std::max(scale, std::fabs(want.get(i)));
  for (int64_t i = 0; i < want.size(); ++i) {
    const double a = got.get(i), b = want.get(i);
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    const double e = std::fabs(a - b);
    if (!(e <= 1e-4 * std::fabs(b) + 1e-5 * scale + allowance)) return {HUGE_VAL, i};
    d.err = std::max(d.err, e);
  }
  return d;
}
}  // namespace

namespace {
// The program after grad, with each gradient an output of its own after the program's
// `outputs` (the gradient's name in the program, else verify_grad<k>, apart from the
// program's inputs and outputs).
Graph with_gradient_outputs(const Graph& g, size_t* outputs) {
  std::vector<GradInfo> info;
  Graph run = grad_pipeline(g, info);
  *outputs = run.outputs.size();
  std::set<std::string> taken;
  for (const Node& n : run.nodes)
    if (n.op == Op::Input) taken.insert(n.attr_sym("name"));
  for (const auto& o : run.outputs) taken.insert(o.first);
  for (size_t k = 0; k < info.size(); ++k) {
    std::string name = info[k].name.empty() ? fmt::format("verify_grad{}", k + 1) : info[k].name;
    while (!taken.insert(name).second) name += "_";
    run.outputs.push_back({name, info[k].result});
  }
  return run;
}
}  // namespace

std::vector<std::string> check_backend(const Graph& g, const RankInputs& inputs, std::vector<GradCheckRow>& rows,
                                       const GradCheckOptions& opt, const std::vector<double>& rounding) {
  if (!opt.run_default) return {};
  size_t outputs = 0;
  const Graph run = with_gradient_outputs(g, &outputs);
  const RankOutputs want = interpret(run, inputs), got = opt.run_default(run, inputs);
  std::vector<std::string> bad;
  for (size_t o = 0; o < run.outputs.size(); ++o) {
    BackendDiff worst;
    int worst_rank = 0;
    for (size_t r = 0; r < want.size() && std::isfinite(worst.err); ++r) {
      const BackendDiff d =
          backend_diff(got[r][o].second, want[r][o].second, o < rounding.size() ? 2 * rounding[o] : 0);
      if (d.err > worst.err) worst = d, worst_rank = int(r);
    }
    const std::string at = worst.at >= 0 ? element_str(worst.at, want[0][o].second.type.shape) : "";
    if (o >= outputs) {
      GradCheckRow& row = rows[o - outputs];
      row.backend_err = worst.err;
      if (!std::isfinite(worst.err)) row.fail(opt.default_name + " backend", worst_rank, at);
    } else if (!std::isfinite(worst.err)) {
      bad.push_back(fmt::format("output {} differs on rank {}, at {}: the {} backend against the interpreter",
                                run.outputs[o].first, worst_rank, at, opt.default_name));
    }
  }
  return bad;
}

namespace {
// Ops that round their result: every op but those that only move elements, pad's zeros
// and where's choice.
bool rounds(const Node& n) { return !moves_values(n.op) && n.op != Op::Pad && n.op != Op::Where; }
}  // namespace

std::vector<PrecisionRow> check_precision(const Graph& low, const Graph& wide, const RankInputs& inputs,
                                          std::vector<double>* abs_err) {
  size_t outputs = 0;
  const Graph lg = with_gradient_outputs(low, &outputs), wg = with_gradient_outputs(wide, &outputs);
  RankInputs win = inputs;
  for (auto& rank : win)
    for (auto& [name, t] : rank)
      if (is_float(t.dtype())) t = t.cast(DType::F64);
  const RankOutputs lo = interpret(lg, inputs), hi = interpret(wg, win);
  // the roundings on the longest path to each value, and the coarsest 16-bit type
  std::vector<int> depth(lg.nodes.size(), 0);
  double u = 0;
  for (size_t i = 0; i < lg.nodes.size(); ++i) {
    const Node& n = lg.nodes[i];
    for (ValueId a : n.args) depth[i] = std::max(depth[i], depth[size_t(a)]);
    if (is_low_precision(n.type->dtype) && rounds(n)) {
      ++depth[i];
      u = std::max(u, n.type->dtype == DType::BF16 ? 0x1p-8 : 0x1p-11);
    }
  }
  std::vector<PrecisionRow> rows;
  if (abs_err) abs_err->assign(lg.outputs.size(), 0);
  for (size_t o = 0; o < lg.outputs.size() && o < wg.outputs.size(); ++o) {
    double err = 0, scale = 0;
    for (size_t r = 0; r < lo.size(); ++r) {
      const Tensor &a = lo[r][o].second, &b = hi[r][o].second;
      for (int64_t i = 0; i < b.size(); ++i) {
        err = std::max(err, std::fabs(a.get(i) - b.get(i)));
        // the larger of the two: a value about 0 in f64 (a difference of two ways to the
        // same number) that rounding made larger reads 1, all rounding, not 10^13
        scale = std::max({scale, std::fabs(b.get(i)), std::fabs(a.get(i))});
      }
    }
    if (abs_err && std::isfinite(err)) (*abs_err)[o] = err;
    const ValueId v = lg.outputs[o].second;  // a gradient the program outputs has its row already
    if (o >= outputs && std::any_of(lg.outputs.begin(), lg.outputs.begin() + long(outputs),
                                    [&](const auto& out) { return out.second == v; }))
      continue;
    PrecisionRow row;
    row.name = lg.outputs[o].first;
    row.type = type_str(lg.type(lg.outputs[o].second));
    row.rel_err = scale > 0 ? err / scale : err;
    row.roundings = depth[size_t(lg.outputs[o].second)];
    row.estimate = row.roundings * u;
    rows.push_back(row);
  }
  return rows;
}

std::string precision_table(const std::vector<PrecisionRow>& rows) {
  std::string s = fmt::format("{:<25} {:<16} {:>12} {:>10} {:>12}\n", "value (16-bit program)", "type", "rel err",
                              "roundings", "estimate");
  for (const PrecisionRow& r : rows)
    s += fmt::format("{:<25} {:<16} {:>12.3e} {:>10} {:>12.3e}\n", r.name, r.type, r.rel_err, r.roundings, r.estimate);
  s += "each output and gradient against the program widened to f64 on the same inputs: max |err| / max |value| (of "
       "either); "
       "estimate: roundings on the longest path times the unit roundoff\n";
  return s;
}

std::string precision_json(const std::vector<PrecisionRow>& rows) {
  std::vector<std::string> items;
  for (const PrecisionRow& r : rows)
    items.push_back(fmt::format(
        "{{\"value\": \"{}\", \"type\": \"{}\", \"rel_err\": {}, \"roundings\": {}, "
        "\"estimate\": {}}}",
        r.name, r.type, std::isfinite(r.rel_err) ? fmt::format("{}", r.rel_err) : "Infinity", r.roundings, r.estimate));
  return fmt::format("[{}]", fmt::join(items, ", "));
}

void GradCheckRow::fail(const std::string& check, int rank, const std::string& element) {
  if (!ok) return;  // the first failure found is the one reported
  ok = false;
  failed_check = check;
  failed_rank = rank;
  failed_element = element;
}

std::string GradCheckRow::status() const {
  if (!ok)
    return fmt::format("MISMATCH ({}, rank {}{})", failed_check, failed_rank,
                       failed_element.empty() ? "" : ", " + failed_element);
  if (kinks) return fmt::format("ok, {} kink{}", kinks, kinks == 1 ? "" : "s");
  return "ok";
}

namespace {
bool all_ok(const std::vector<GradCheckRow>& rows) {
  return std::all_of(rows.begin(), rows.end(), [](const GradCheckRow& r) { return r.ok; });
}
}  // namespace

std::string gradcheck_table(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt,
                            const std::vector<std::string>& outputs_differ) {
  const bool backend = std::any_of(rows.begin(), rows.end(), [](const GradCheckRow& r) { return r.backend_err >= 0; });
  auto backend_col = [&](const GradCheckRow& r) {
    if (!backend) return std::string();
    return fmt::format(" {:>12}", std::isfinite(r.backend_err) ? fmt::format("{:.3e}", r.backend_err) : "DIFFERS");
  };
  // Where each grad is, when some are inside a def's body: two calls of one def give
  // rows of the same name, told apart by their call sites.
  const bool in_defs = std::any_of(rows.begin(), rows.end(), [](const GradCheckRow& r) { return r.loc.site != 0; });
  size_t status_width = 6;
  for (const GradCheckRow& r : rows) status_width = std::max(status_width, r.status().size());
  auto at_col = [&](const GradCheckRow& r) { return in_defs ? "  " + loc_str(opt.source, r.loc) : std::string(); };
  std::string s = fmt::format("{:<12} {:<12} {:<16} {:<7} {:>12} {:>12} {:>14} {:>12}{}  {}\n", "gradient", "of",
                              "type", "mode", "fd max err", "fd tol", "fd elements", "ref max err",
                              backend ? fmt::format(" {:>12}", opt.default_name + " err") : "",
                              in_defs ? fmt::format("{:<{}}  at", "status", status_width) : "status");
  for (const GradCheckRow& r : rows)
    s += fmt::format("{:<12} {:<12} {:<16} {:<7} {:>12.3e} {:>12.3e} {:>14} {:>12.3e}{}  {}{}\n", r.name, r.wrt, r.type,
                     r.mode, r.fd_err, r.fd_tol, fmt::format("{}/{}", r.fd_checked, r.fd_total), r.ref_err,
                     backend_col(r), in_defs ? fmt::format("{:<{}}", r.status(), status_width) : r.status(), at_col(r));
  for (const std::string& o : outputs_differ) s += "MISMATCH: " + o + "\n";
  s += fmt::format(
      "{} gradient{} checked in f64 (rtol {}, atol {}, plus each finite difference's estimated error){}: {}\n",
      rows.size(), rows.size() == 1 ? "" : "s", opt.rtol, opt.atol,
      opt.run_default
          ? fmt::format("; outputs and gradients of the {} backend against the interpreter", opt.default_name)
          : "",
      all_ok(rows) && outputs_differ.empty() ? "all ok" : "MISMATCH");
  return s;
}

std::string gradcheck_json(const std::vector<GradCheckRow>& rows, const GradCheckOptions& opt,
                           const std::vector<std::string>& outputs_differ) {
  auto quoted = [](const std::string& x) {
    std::string q = "\"";
    for (char c : x) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    return q + "\"";
  };
  auto num = [](double x) { return std::isfinite(x) ? fmt::format("{}", x) : std::string(x > 0 ? "Infinity" : "NaN"); };
  std::vector<std::string> differ;
  for (const std::string& o : outputs_differ) differ.push_back(quoted(o));
  std::string s = fmt::format(
      "{{\"rtol\": {}, \"atol\": {}, \"ok\": {},\n \"outputs_differ\": [{}],\n \"gradients\": [", num(opt.rtol),
      num(opt.atol), all_ok(rows) && outputs_differ.empty() ? "true" : "false", fmt::join(differ, ", "));
  for (size_t k = 0; k < rows.size(); ++k) {
    const GradCheckRow& r = rows[k];
    s += fmt::format(
        "{}\n  {{\"gradient\": {}, \"of\": {}, \"type\": {}, \"mode\": {}, \"fd_max_err\": {}, \"fd_tol\": {}, "
        "\"fd_checked\": {}, \"fd_total\": {}, \"kinks\": {}, \"ref_max_err\": {}{}, \"ok\": {}, \"status\": {}}}",
        k ? "," : "", quoted(r.name), quoted(r.wrt), quoted(r.type), quoted(r.mode), num(r.fd_err), num(r.fd_tol),
        r.fd_checked, r.fd_total, r.kinks, num(r.ref_err),
        r.backend_err >= 0
            ? fmt::format(", \"backend\": {}, \"backend_max_err\": {}", quoted(opt.default_name), num(r.backend_err))
            : "",
        r.ok ? "true" : "false", quoted(r.status()));
    if (r.loc.known()) s.insert(s.size() - 1, fmt::format(", \"at\": {}", quoted(loc_str(opt.source, r.loc))));
    if (!r.ok)
      s.insert(s.size() - 1, fmt::format(", \"failed\": {{\"check\": {}, \"rank\": {}, \"element\": {}}}",
                                         quoted(r.failed_check), r.failed_rank, quoted(r.failed_element)));
  }
  return s + "]}\n";
}

}  // namespace gradc
