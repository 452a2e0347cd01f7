#include "check/prove.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "ir/collectives.h"
#include "ir/mesh.h"
#include "ir/print.h"
#include "passes/ad.h"
#include "passes/pass.h"
#include "runtime/interp.h"
#include "runtime/kernels.h"

namespace gradc {

namespace {

// Symbols for the symbolic proof: an axis a (and a second one b), the root, and
// ranks p, q, s, t, u for permute's pairs. The routing functions only copy and
// compare them, so what holds for the symbols holds for every value.
constexpr int64_t kSymAxis = 101, kSymAxis2 = 102, kSymRoot = 1001, kSymRank = 2001;

// ---- the instances: a forward collective for N ranks --------------------------

struct Instance {
  Graph g;        // x (per-rank input) then the collective
  ValueId y = 1;  // the collective
  std::string label;
};

Shape shape_with(int64_t axis, int N) { return axis == 0 ? Shape{N, 2} : Shape{2, N}; }

Instance instance(Op op, std::optional<Reduction> reduction, const Attrs& attrs, const Shape& shape, int N,
                  std::string label) {
  Instance in;
  in.g.world = N;
  Node x;
  x.op = Op::Input;
  x.type = Type{DType::F64, shape};
  x.attrs.set("name", Attr::of_str("x"));
  x.name = "x";
  in.g.append(x);
  Attrs a = attrs;
  if (reduction) a.set("op", Attr::of_sym(reduction_name(*reduction)));
  in.y = emit(in.g, op, {0}, a, Loc{}, "y");
  in.label = std::move(label);
  return in;
}

std::vector<std::vector<std::vector<int64_t>>> pair_sets(int N) {
  std::vector<std::vector<std::vector<int64_t>>> sets;
  for (int64_t shift : {1, -1, 2}) {
    std::vector<std::vector<int64_t>> p;
    for (int64_t k = 0; k < N; ++k) p.push_back({k, ((k + shift) % N + N) % N});
    sets.push_back(p);
  }
  sets.push_back({{0, N - 1}});           // one message; every other rank receives zeros
  std::vector<std::vector<int64_t>> fan;  // rank 0 sends to every rank
  for (int64_t r = 0; r < N; ++r) fan.push_back({0, r});
  sets.push_back(fan);
  return sets;
}

// Every variant of a case for N ranks, from the collective's parameters (ir/collectives.h):
// each tensor axis 0 or 1 (the operand's first such axis N long), each root (all of them
// up to 4 ranks, the first and last beyond), and for pairs= shifts and explicit pairs.
std::vector<Instance> instances(const ProofCase& c, int N) {
  std::vector<Instance> out;
  const std::optional<Reduction> red = c.reduction;
  if (has_param(c.op, "pairs")) {
    for (const auto& p : pair_sets(N)) {
      Attrs a;
      a.set("pairs", pairs_attr(p));
      out.push_back(instance(c.op, red, a, {N, 2}, N, "pairs=" + attr_str(pairs_attr(p))));
    }
    return out;
  }
  std::vector<int64_t> roots;
  for (int r = 0; r < N; ++r)
    if (N <= 4 || r == 0 || r == N - 1) roots.push_back(r);
  std::vector<std::pair<std::string, std::vector<int64_t>>> dims;  // each parameter's values
  for (const std::string& p : collective_rules()[c.op].params) {
    if (is_axis_param(p)) dims.push_back({p, {0, 1}});
    if (p == "root") dims.push_back({p, roots});
  }
  std::vector<size_t> at(dims.size(), 0);  // every combination, the first parameter slowest
  for (;;) {
    Attrs a;
    std::vector<std::string> label;
    int64_t first_axis = -1;
    for (size_t k = 0; k < dims.size(); ++k) {
      const int64_t v = dims[k].second[at[k]];
      a.set(dims[k].first, Attr::of_int(v));
      label.push_back(fmt::format("{}={}", dims[k].first, v));
      if (is_axis_param(dims[k].first) && first_axis < 0) first_axis = v;
    }
    out.push_back(instance(c.op, red, a, first_axis < 0 ? Shape{N, 2} : shape_with(first_axis, N), N,
                           fmt::format("{}", fmt::join(label, ", "))));
    size_t k = dims.size();
    while (k > 0 && ++at[k - 1] == dims[k - 1].second.size()) at[--k] = 0;
    if (k == 0) break;
  }
  return out;
}

// ---- matrices over all ranks' elements --------------------------------------------

using Matrix = std::map<std::pair<int64_t, int64_t>, double>;  // (row, column) -> nonzero value

std::string element_str(int64_t index, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  int64_t rank = index / num_elements(s), flat = index % num_elements(s);
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return fmt::format("rank {} [{}]", rank, fmt::join(idx, ", "));
}

Tensor unit(const Type& t, int64_t i) {
  Tensor x = Tensor::zeros(t);
  x.data<double>()[i] = 1;
  return x;
}

// The collective with op=sum: the linear map whose transpose is checked.
Node sum_version(const Node& n) {
  Node lin = n;
  if (lin.attrs.has("op")) lin.attrs.set("op", Attr::of_sym("sum"));
  return lin;
}

// The forward kernel's matrix of the op=sum map: A[(r, i), (k, j)].
Matrix kernel_matrix(const Instance& in) {
  const Node& n = in.g[in.y];
  const Node lin = sum_version(n);
  const Type& xt = in.g.type(0);
  const int N = in.g.world;
  Matrix A;
  for (int k = 0; k < N; ++k)
    for (int64_t j = 0; j < xt.size(); ++j) {
      std::vector<Tensor> x(size_t(N), Tensor::zeros(xt));
      x[size_t(k)] = unit(xt, j);
      std::vector<Tensor> y = run_collective(in.g, lin, x);
      for (int r = 0; r < N; ++r)
        for (int64_t i = 0; i < y[size_t(r)].size(); ++i)
          if (double v = y[size_t(r)].get(i); v != 0) A[{r * n.type->size() + i, k * xt.size() + j}] += v;
    }
  return A;
}

// The matrix the routing description says: for each (k, r) of the domain, the
// source selection of rank k goes element for element into the destination
// selection of rank r.
Matrix term_matrix(const Term& t, const Shape& xs, const Shape& ys, int N) {
  Matrix A;
  auto selection = [&](const Side& s, const Shape& shape, int64_t other, std::vector<int64_t>& origin) {
    Shape sel = shape;
    origin.assign(shape.size(), 0);
    if (s.axis >= 0) {
      sel[size_t(s.axis)] /= N;
      origin[size_t(s.axis)] = other * sel[size_t(s.axis)];
    }
    return sel;
  };
  auto flat = [](const Shape& shape, const std::vector<int64_t>& idx) {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
  };
  std::vector<std::pair<int64_t, int64_t>> domain;
  if (t.has_pairs) {
    for (const auto& p : t.pairs) domain.push_back({p[0], p[1]});
  } else {
    for (int64_t k = 0; k < N; ++k)
      for (int64_t r = 0; r < N; ++r)
        if ((t.src.root < 0 || t.src.root == k) && (t.dst.root < 0 || t.dst.root == r)) domain.push_back({k, r});
  }
  for (const auto& [k, r] : domain) {
    std::vector<int64_t> so, dor;
    Shape sel = selection(t.src, xs, r, so);
    selection(t.dst, ys, k, dor);
    std::vector<int64_t> idx(sel.size(), 0);
    for (int64_t e = 0; e < num_elements(sel); ++e) {
      std::vector<int64_t> si = idx, di = idx;
      for (size_t d = 0; d < idx.size(); ++d) si[d] += so[d], di[d] += dor[d];
      A[{r * num_elements(ys) + flat(ys, di), k * num_elements(xs) + flat(xs, si)}] += 1;
      for (size_t d = idx.size(); d-- > 0;) {
        if (++idx[d] < sel[d]) break;
        idx[d] = 0;
      }
    }
  }
  return A;
}

// ---- the adjoint under test, as a graph from the cotangent v to dx ----------------

// What the autodiff pass builds: grad(sum(y * v), x) for the instance's collective
// (with its own reduction op), evaluated at the point `x`.
struct AdjointGraph {
  Graph g;
  ValueId dx = -1;
};

AdjointGraph autodiff_adjoint(const Instance& in) {
  Graph g = in.g;
  const Node& y = g[in.y];
  Node v;
  v.op = Op::Input;
  v.type = y.type;
  v.attrs.set("name", Attr::of_str("v"));
  ValueId vid = g.append(v);
  ValueId p = emit(g, Op::Mul, {in.y, vid}, {}, Loc{});
  std::vector<int64_t> axes;
  for (int d = 0; d < g.type(p).rank(); ++d) axes.push_back(d);
  Attrs ra;
  ra.set("axes", Attr::of_ints(axes));
  ValueId loss = emit(g, Op::ReduceSum, {p}, ra, Loc{});
  Attrs ma;
  ma.set("mode", Attr::of_sym("sum"));
  ValueId d = emit(g, Op::Grad, {loss, 0}, ma, Loc{}, "dx");
  g.outputs.push_back({"dx", d});
  AdjointGraph out;
  out.g = run_pipeline(std::move(g), Pipeline::Grad);
  out.dx = out.g.outputs[0].second;
  return out;
}

// What a claim says: the sum of its collectives applied to the cotangent v.
AdjointGraph claimed_adjoint(const Instance& in, const std::vector<CollectiveCall>& calls) {
  AdjointGraph out;
  out.g.world = in.g.world;
  out.g.mesh = in.g.mesh;  // the claimed collectives run over the forward one's axes
  Node v;
  v.op = Op::Input;
  v.type = in.g.type(in.y);
  v.attrs.set("name", Attr::of_str("v"));
  ValueId vid = out.g.append(v);
  ValueId acc = -1;
  for (const CollectiveCall& c : calls) {
    Attrs a = c.attrs;
    if (const Attr* over = in.g[in.y].attrs.find("over")) a.set("over", *over);
    ValueId part = emit(out.g, c.op, {vid}, a, Loc{});
    acc = acc < 0 ? part : emit(out.g, Op::Add, {acc, part}, {}, Loc{});
  }
  out.dx = acc < 0 ? vid : acc;
  return out;
}

// Rank k's dx for cotangent v (per rank), at the point x.
std::vector<Tensor> apply(const AdjointGraph& a, const std::vector<Tensor>& x, const std::vector<Tensor>& v) {
  RankInputs in(v.size());
  for (size_t r = 0; r < v.size(); ++r) {
    in[r]["v"] = v[r];
    if (!x.empty()) in[r]["x"] = x[r];
  }
  return evaluate(a.g, in, {a.dx})[size_t(a.dx)];
}

// The adjoint's matrix: column (r, i) is dx for the cotangent e_(r, i). Returns
// false (with `why`) when it does not map y's shape to x's.
bool adjoint_matrix(const AdjointGraph& a, const Instance& in, const std::vector<Tensor>& x, Matrix& B,
                    std::string& why) {
  const Type yt = in.g.type(in.y), xt = in.g.type(0);
  if (a.g.type(a.dx) != xt) {
    why = fmt::format("the adjoint maps {} to {}, but x is {}", type_str(yt), type_str(a.g.type(a.dx)), type_str(xt));
    return false;
  }
  const int N = in.g.world;
  for (int r = 0; r < N; ++r)
    for (int64_t i = 0; i < yt.size(); ++i) {
      std::vector<Tensor> v(size_t(N), Tensor::zeros(yt));
      v[size_t(r)] = unit(yt, i);
      std::vector<Tensor> dx = apply(a, x, v);
      for (int k = 0; k < N; ++k)
        for (int64_t j = 0; j < xt.size(); ++j)
          if (double d = dx[size_t(k)].get(j); d != 0) B[{k * xt.size() + j, r * yt.size() + i}] = d;
    }
  return true;
}

Matrix transposed(const Matrix& A) {
  Matrix T;
  for (const auto& [rc, v] : A) T[{rc.second, rc.first}] = v;
  return T;
}

// The first entry where two matrices differ, described; "" if they are equal.
std::string first_difference(const Matrix& want, const Matrix& got, const Shape& rows, const Shape& cols,
                             const char* want_name, const char* got_name) {
  auto at = [](const Matrix& m, std::pair<int64_t, int64_t> k) {
    auto it = m.find(k);
    return it == m.end() ? 0.0 : it->second;
  };
  std::map<std::pair<int64_t, int64_t>, bool> keys;
  for (const auto& e : want) keys[e.first] = true;
  for (const auto& e : got) keys[e.first] = true;
  for (const auto& [k, unused] : keys) {
    double a = at(want, k), b = at(got, k);
    if (a != b && !(std::isnan(a) && std::isnan(b)))
      return fmt::format("entry ({} <- {}): {} has {}, {} has {}", element_str(k.first, rows),
                         element_str(k.second, cols), want_name, a, got_name, b);
  }
  return "";
}

// ---- readable math ---------------------------------------------------------

std::string sym(int64_t v) {
  if (v == kSymAxis) return "a";
  if (v == kSymAxis2) return "b";
  if (v == kSymRoot) return "root";
  if (v >= kSymRank && v < kSymRank + 5) return std::string(1, "pqstu"[v - kSymRank]);
  return std::to_string(v);
}

std::string term_math(const Term& t, const char* src, const char* dst) { return term_str(t, src, dst, sym); }
std::string call_math(const CollectiveCall& c) { return call_str(c, sym); }

std::string calls_math(const std::vector<CollectiveCall>& calls) {
  if (calls.empty()) return "the identity";
  std::vector<std::string> parts;
  for (const auto& c : calls) parts.push_back(call_math(c));
  return fmt::format("{}", fmt::join(parts, " + "));
}

const char* partial_math(Reduction red) {
  switch (red) {
    case Reduction::Avg: return "1/N";
    case Reduction::Prod: return "prod_{j != k} x[j] (zeros counted, no division by zero)";
    case Reduction::Max: return "[x[k] = max] / #ties";
    case Reduction::Min: return "[x[k] = min] / #ties";
    case Reduction::Sum: break;
  }
  return "1";
}
// The reductions whose derivative is not a routing: a partial derivative per element.
bool nonlinear(std::optional<Reduction> r) {
  return r == Reduction::Prod || r == Reduction::Max || r == Reduction::Min;
}

// ---- the symbolic proof ------------------------------------------------------

// Symbolic forward nodes: parameters as symbols (and, for all_to_all, a = b too;
// for permute, a pair set with a repeated source, whose transpose needs two rounds).
std::vector<Node> symbolic_nodes(const ProofCase& c) {
  auto node = [&](Attrs a) {
    Node n;
    n.op = c.op;
    if (c.reduction) a.set("op", Attr::of_sym(reduction_name(*c.reduction)));
    n.attrs = a;
    return n;
  };
  if (has_param(c.op, "pairs")) {
    const int64_t p = kSymRank, q = kSymRank + 1, s = kSymRank + 2, t = kSymRank + 3, u = kSymRank + 4;
    Attrs a, b;
    a.set("pairs", pairs_attr({{p, q}, {q, p}, {s, t}, {u, u}}));
    b.set("pairs", pairs_attr({{p, q}, {p, s}}));
    return {node(a), node(b)};
  }
  Attrs a;
  std::vector<std::string> axes;
  for (const std::string& p : collective_rules()[c.op].params) {
    if (is_axis_param(p)) {
      a.set(p, Attr::of_int(axes.empty() ? kSymAxis : kSymAxis2));
      axes.push_back(p);
    }
    if (p == "root") a.set(p, Attr::of_int(kSymRoot));
  }
  std::vector<Node> out = {node(a)};
  if (axes.size() == 2) {  // two axes the same
    a.set(axes[1], Attr::of_int(kSymAxis));
    out.push_back(node(a));
  }
  return out;
}

// The routing of a sum of collectives: one term, or permutes whose pairs add up.
bool routing_of_calls(const std::vector<CollectiveCall>& calls, Term& out, std::string& why) {
  if (calls.empty()) {
    why = "it claims the identity, which moves no data between ranks";
    return false;
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const CollectiveCall& c = calls[i];
    if (!is_collective(c.op)) {
      why = fmt::format("{} is not a collective", op_name(c.op));
      return false;
    }
    if (c.attrs.has("op") && c.attrs.find("op")->s != "sum") {
      why = fmt::format("{} reduces with op={}; a transpose adds", call_math(c), c.attrs.find("op")->s);
      return false;
    }
    Node n;
    n.op = c.op;
    n.attrs = c.attrs;
    Term t = routing(n, 1);
    if (i == 0) {
      out = t;
    } else if (out.has_pairs && t.has_pairs) {
      out.pairs.insert(out.pairs.end(), t.pairs.begin(), t.pairs.end());
      std::sort(out.pairs.begin(), out.pairs.end());
    } else {
      why = "a sum of collectives other than permutes";
      return false;
    }
  }
  return true;
}

void prove_symbolic(const ProofCase& c, const ProveOptions& opt, ProofRow& row) {
  row.proved = true;
  std::string& d = row.derivation;
  for (const Node& n : symbolic_nodes(c)) {
    Term fwd = routing(n, 0);
    Term want = transpose(fwd);
    std::vector<CollectiveCall> calls = opt.claim ? opt.claim(n, 0) : transpose_of(n, 0);
    Term got;
    std::string why;
    bool ok = routing_of_calls(calls, got, why);
    if (ok && !(got == want)) {
      ok = false;
      why = fmt::format("{} routes {}, but A^T is {}", calls_math(calls), term_math(got, "ybar", "xbar"),
                        term_math(want, "ybar", "xbar"));
    }
    if (row.forward.empty()) {
      row.forward = term_math(fwd, "x", "y");
      row.adjoint = calls_math(calls);
      if (c.reduction == Reduction::Avg) row.adjoint += " / N";
      if (nonlinear(c.reduction)) row.adjoint += fmt::format(" * d{}", c.reduction_str());
    }
    d += call_math(CollectiveCall{n.op, n.attrs}) + "\n";
    d += fmt::format("  1. forward, as a linear map A (its op=sum part):\n     A:    {}\n", term_math(fwd, "x", "y"));
    d += "     A has a 1 exactly where an element of x on rank k lands in y on rank r.\n";
    d += fmt::format(
        "  2. transpose: every entry of A moves to its mirror, so data flows back (with k and r\n     renamed so that "
        "k is again the source rank):\n     A^T:  {}\n",
        term_math(want, "ybar", "xbar"));
    d += fmt::format("  3. the adjoint the autodiff pass derives: {}\n", calls_math(calls));
    if (ok) {
      d += fmt::format("     its routing:  {}\n", term_math(got, "ybar", "xbar"));
      d += "  4. the two are the same statement, term for term, with the ranks k and r, the root,\n"
           "     the axes and the pairs as symbols and every block of any size: the adjoint is A^T\n"
           "     for every number of ranks and every shape.\n";
    } else {
      d += fmt::format("  4. NOT PROVED: {}\n", why);
      row.proved = false;
      if (row.proof_note.empty()) row.proof_note = why;
    }
  }
  if (c.reduction == Reduction::Avg)
    d += "  5. op=avg is op=sum times 1/N, a scalar: its adjoint is A^T times 1/N.\n";
  else if (nonlinear(c.reduction))
    d += fmt::format(
        "  5. op={} is not linear: rank k's cotangent is the A^T-routed cotangent times the\n"
        "     local partial {}, checked against the definition below.\n",
        c.reduction_str(), partial_math(*c.reduction));
}

// ---- the exact checks --------------------------------------------------------

uint64_t mix(uint64_t a) {
  a ^= a >> 33;
  a *= 0xff51afd7ed558ccdULL;
  a ^= a >> 33;
  return a;
}

// Rank k's vector of integers from lo..hi, a fixed function of (seed, k, element).
std::vector<Tensor> integer_vector(const Type& t, int N, uint64_t seed, int lo, int hi) {
  std::vector<Tensor> v;
  for (int k = 0; k < N; ++k) {
    Tensor x = Tensor::zeros(t);
    for (int64_t j = 0; j < t.size(); ++j)
      x.data<double>()[j] =
          double(lo + int(mix(seed * 1000003 + uint64_t(k) * 7919 + uint64_t(j)) % uint64_t(hi - lo + 1)));
    v.push_back(x);
  }
  return v;
}

double dot(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double s = 0;
  for (size_t r = 0; r < a.size(); ++r)
    for (int64_t i = 0; i < a[r].size(); ++i) s += a[r].get(i) * b[r].get(i);
  return s;
}

std::string values_str(const std::vector<Tensor>& v) {
  std::vector<std::string> parts;
  for (const Tensor& t : v) {
    std::vector<std::string> e;
    for (int64_t i = 0; i < t.size(); ++i) e.push_back(fmt::format("{}", t.get(i)));
    parts.push_back(fmt::format("[{}]", fmt::join(e, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, " "));
}

// The description over a mesh's groups: the direct sum of the 1-D description over
// each group, its ranks renumbered from the group's to the world's.
Matrix description(const Instance& in) {
  const Shape xs = in.g.type(0).shape, ys = in.g.type(in.y).shape;
  const Node& n = in.g[in.y];
  const int N = group_size(in.g, n);
  const Matrix one = term_matrix(routing(n, N), xs, ys, N);
  if (!has_groups(in.g, n)) return one;
  const int64_t nx = num_elements(xs), ny = num_elements(ys);
  Matrix D;
  for (const std::vector<int>& group : mesh_groups(in.g, over_axes(in.g, n)))
    for (const auto& [rc, v] : one)
      D[{group[size_t(rc.first / ny)] * ny + rc.first % ny, group[size_t(rc.second / nx)] * nx + rc.second % nx}] = v;
  return D;
}

std::string description_vs_kernel(const Instance& in, const Matrix& A) {
  const Shape xs = in.g.type(0).shape, ys = in.g.type(in.y).shape;
  std::string diff = first_difference(description(in), A, ys, xs, "the description", "the kernel");
  return diff.empty() ? "" : "the kernel differs from the routing description: " + diff;
}

// The linear checks for one instance: the kernel is its description, the adjoint
// is the kernel's transpose entry by entry, and <A x, y> = <x, A^T y>.
std::string check_linear(const Instance& in, const ProveOptions& opt) {
  const int N = in.g.world;
  const Node& n = in.g[in.y];
  const Shape xs = in.g.type(0).shape, ys = in.g.type(in.y).shape;
  Matrix A = kernel_matrix(in);
  if (std::string d = description_vs_kernel(in, A); !d.empty()) return d;
  AdjointGraph adj = opt.claim ? claimed_adjoint(in, opt.claim(n, group_size(in.g, n))) : autodiff_adjoint(in);
  Matrix B;
  std::string why;
  if (!adjoint_matrix(adj, in, integer_vector(in.g.type(0), N, 1, -3, 3), B, why)) return why;
  if (std::string diff = first_difference(transposed(A), B, xs, ys, "A^T", "the adjoint"); !diff.empty()) return diff;
  const Node lin = sum_version(n);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::vector<Tensor> x = integer_vector(in.g.type(0), N, seed, -5, 5);
    std::vector<Tensor> y = integer_vector(in.g.type(in.y), N, seed + 100, -5, 5);
    double lhs = dot(run_collective(in.g, lin, x), y);
    double rhs = dot(x, apply(adj, x, y));
    if (lhs != rhs)
      return fmt::format("<A x, y> = {} but <x, A^T y> = {} for x = {}, y = {}", lhs, rhs, values_str(x),
                         values_str(y));
  }
  return "";
}

// The points where a nonlinear reduction's derivative is compared with its definition.
std::vector<std::pair<std::string, std::vector<Tensor>>> points(const Type& t, int N) {
  std::vector<std::pair<std::string, std::vector<Tensor>>> out;
  for (uint64_t seed = 1; seed <= 2; ++seed) out.push_back({"integers", integer_vector(t, N, seed, -2, 3)});
  const double dyadic[] = {0.5, -0.75, 1.25, -1.5, 2, 0.125, -0.5, 3};
  std::vector<Tensor> q = integer_vector(t, N, 7, 0, 7);
  for (Tensor& x : q)
    for (int64_t j = 0; j < x.size(); ++j) x.data<double>()[j] = dyadic[int64_t(x.get(j))];
  out.push_back({"rationals", q});
  out.push_back({"all zero", std::vector<Tensor>(size_t(N), Tensor::zeros(t))});
  std::vector<Tensor> one_zero;
  for (int k = 0; k < N; ++k) {
    Tensor x = Tensor::zeros(t);
    for (int64_t j = 0; j < t.size(); ++j) x.data<double>()[j] = (j % N == k) ? 0 : 2;
    one_zero.push_back(x);
  }
  out.push_back({"one zero, the rest tied", one_zero});
  return out;
}

// d red_m x[m][j] / d x[k][j], from the definition: m over k's group (every rank
// without a mesh).
double partial(Reduction red, const std::vector<Tensor>& x, const std::vector<int>& group, int k, int64_t j) {
  const int N = int(group.size());
  if (red == Reduction::Sum) return 1;
  if (red == Reduction::Avg) return 1.0 / N;
  if (red == Reduction::Prod) {
    double p = 1;
    for (int m : group)
      if (m != k) p *= x[size_t(m)].get(j);
    return p;
  }
  double best = x[size_t(group[0])].get(j);
  for (int m : group)
    best = red == Reduction::Max ? std::max(best, x[size_t(m)].get(j)) : std::min(best, x[size_t(m)].get(j));
  int ties = 0;
  for (int m : group) ties += x[size_t(m)].get(j) == best;
  return x[size_t(k)].get(j) == best ? 1.0 / ties : 0.0;
}

// The nonlinear reductions: the Jacobian the autodiff pass derives, against the
// definition (the routing times the reduction's partial) at each point.
std::string check_definition(const Instance& in) {
  const int N = in.g.world;
  const Reduction red = reduction_of(in.g[in.y]);
  const Shape xs = in.g.type(0).shape, ys = in.g.type(in.y).shape;
  Matrix A = kernel_matrix(in);
  if (std::string d = description_vs_kernel(in, A); !d.empty()) return d;
  AdjointGraph adj = autodiff_adjoint(in);
  std::vector<std::vector<int>> group_of(static_cast<size_t>(N));  // each rank's group
  for (const std::vector<int>& group : mesh_groups(in.g, over_axes(in.g, in.g[in.y])))
    for (int r : group) group_of[size_t(r)] = group;
  for (const auto& [what, x] : points(in.g.type(0), N)) {
    Matrix want;
    for (const auto& [rc, one] : A) {
      int k = int(rc.second / num_elements(xs));
      int64_t j = rc.second % num_elements(xs);
      if (double p = partial(red, x, group_of[size_t(k)], k, j); p != 0) want[{rc.second, rc.first}] = p;
    }
    Matrix got;
    std::string why;
    if (!adjoint_matrix(adj, in, x, got, why)) return why;
    if (std::string diff = first_difference(want, got, xs, ys, "the definition", "the derived rule"); !diff.empty())
      return fmt::format("at {} x = {}: {}", what, values_str(x), diff);
  }
  return "";
}

// The low-precision pass's lowering of a reduction over ranks of bf16 or f16 values
// (passes/low_precision.cpp: exchanges of the 16-bit values, an f32 sum in rank order,
// rounded once with accum=f32 or after each term with accum=same) against the
// collective itself on the interpreter, bit for bit on every rank, for both types and
// both accum= at values whose sums round, tie and cancel.
std::string check_lowering(const Instance& in) {
  const Node& n = in.g[in.y];
  const int N = in.g.world;
  for (DType t : {DType::BF16, DType::F16})
    for (const char* accum : {"f32", "same"}) {
      Graph g;
      g.world = in.g.world;
      g.mesh = in.g.mesh;
      Node x = in.g[0];
      x.type = Type{t, in.g.type(0).shape};
      g.append(x);
      Attrs a = *n.attrs;
      a.set("accum", Attr::of_sym(accum));
      g.outputs = {{"y", emit(g, n.op, {0}, a, Loc{}, "y")}};
      const Graph lowered = widen_low_precision(g);
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        // 1 + m 2^-8 (m in -3..3): sums past 2 lose bf16's last bit, ties included; and
        // values of either sign that cancel
        RankInputs inputs{size_t(N)};
        const std::vector<Tensor> m = integer_vector(in.g.type(0), N, seed, -3, 3);
        for (int k = 0; k < N; ++k) {
          std::vector<double> v;
          for (double e : m[size_t(k)].values())
            v.push_back(seed == 3 ? e * 0.75 : 1 + e * (t == DType::BF16 ? 0x1p-8 : 0x1p-11));
          inputs[size_t(k)]["x"] = Tensor::from(x.type, v);
        }
        const std::vector<Tensor> want = evaluate(g, inputs, {g.outputs[0].second})[size_t(g.outputs[0].second)];
        const ValueId ly = lowered.outputs[0].second;
        const std::vector<Tensor> got = evaluate(lowered, inputs, {ly})[size_t(ly)];
        for (int k = 0; k < N; ++k)
          if (!got[size_t(k)].same_values(want[size_t(k)])) {
            std::vector<Tensor> xs;
            for (int r = 0; r < N; ++r) xs.push_back(inputs[size_t(r)].at("x"));
            return fmt::format("{}, accum={}: the lowering gives {} on rank {}, the collective {}, for x = {}",
                               dtype_name(t), accum, values_str({got[size_t(k)]}), k, values_str({want[size_t(k)]}),
                               values_str(xs));
          }
      }
    }
  return "";
}

// The meshes of 2 and 3 axes, each of size 2 or more, of at most K ranks.
std::vector<std::vector<int>> meshes(int K) {
  std::vector<std::vector<int>> out;
  for (int a = 2; a <= K; ++a)
    for (int b = 2; a * b <= K; ++b) out.push_back({a, b});
  for (int a = 2; a <= K; ++a)
    for (int b = 2; a * b <= K; ++b)
      for (int c = 2; a * b * c <= K; ++c) out.push_back({a, b, c});
  return out;
}

// Every case's 1-D variants, run over each proper subset of a mesh's axes (in each
// order): the same attributes, and over= those axes.
std::vector<Instance> mesh_instances(const ProofCase& c, const std::vector<int>& sizes) {
  Mesh mesh;
  int world = 1;
  for (size_t k = 0; k < sizes.size(); ++k) {
    mesh.axes.push_back(std::string(1, char('a' + k)));
    mesh.sizes.push_back(sizes[k]);
    world *= sizes[k];
  }
  std::vector<std::vector<int>> subsets;  // proper, non-empty, each order
  const int A = int(sizes.size());
  for (unsigned m = 1; m + 1 < (1u << A); ++m) {
    std::vector<int> axes;
    for (int k = 0; k < A; ++k)
      if (m & (1u << k)) axes.push_back(k);
    do subsets.push_back(axes);
    while (std::next_permutation(axes.begin(), axes.end()));
  }
  std::vector<Instance> out;
  for (const std::vector<int>& axes : subsets) {
    int N = 1;
    Attr over;
    over.kind = Attr::List;
    for (int k : axes) {
      N *= sizes[size_t(k)];
      over.list.push_back(Attr::of_sym(mesh.axes[size_t(k)]));
    }
    for (const Instance& one : instances(c, N)) {
      Instance in;
      in.g.world = world;
      in.g.mesh = mesh;
      in.g.append(one.g[0]);
      Attrs a = *one.g[one.y].attrs;
      a.set("over", over);
      in.y = emit(in.g, c.op, {0}, a, Loc{}, "y");
      in.label = fmt::format("mesh {}, over={}{}", mesh_option(mesh), attr_str(over),
                             one.label.empty() ? "" : ", " + one.label);
      out.push_back(std::move(in));
    }
  }
  return out;
}

}  // namespace

std::vector<ProofCase> all_proof_cases() {
  std::vector<ProofCase> cases;
  for (int i = 0; i < kNumOps; ++i) {  // in the op table's order
    const Op op = Op(i);
    if (is_collective(op) && has_param(op, "op"))
      for (Reduction r : {Reduction::Sum, Reduction::Avg, Reduction::Prod, Reduction::Max, Reduction::Min})
        cases.push_back({op, r});
    else if (is_collective(op))
      cases.push_back({op, std::nullopt});
  }
  return cases;
}

ProofRow prove(const ProofCase& c, const ProveOptions& opt) {
  ProofRow row;
  row.c = c;
  prove_symbolic(c, opt, row);
  std::unique_ptr<ScopedOverride<VjpFn>> swap;
  if (opt.rule) swap = std::make_unique<ScopedOverride<VjpFn>>(derivatives(), c.op, opt.rule);
  const bool linear = !c.reduction || c.reduction == Reduction::Sum;
  row.checked = true;
  row.derivation +=
      fmt::format("  exact checks (integer and dyadic values in f64: no rounding), N = 1..{}:\n", opt.max_ranks);
  for (int N = 1; N <= opt.max_ranks && row.checked; ++N) {
    std::vector<Instance> ins = instances(c, N);
    for (const Instance& in : ins) {
      std::string failure = linear ? check_linear(in, opt) : check_definition(in);
      if (!failure.empty()) {
        row.checked = false;
        row.counterexample = fmt::format("N={}{}: {}", N, in.label.empty() ? "" : ", " + in.label, failure);
        break;
      }
    }
    if (row.checked)
      row.derivation += fmt::format(
          "    N={}: {} variant{}: {}\n", N, ins.size(), ins.size() == 1 ? "" : "s",
          linear ? "kernel = description; adjoint = A^T entry by entry; <A x, y> = <x, A^T y>"
                 : "kernel = description; derived Jacobian = definition at integer, rational, zero and tied points");
  }
  // Over a proper subset S of a mesh's axes the collective runs in each group: its
  // matrix is the direct sum of the 1-D one over the groups (ranks renumbered), and
  // the transpose of a direct sum is the direct sum of the transposes, which is the
  // adjoint collective over S: the 1-D proof, in every group. Checked exactly as above.
  if (row.checked) {
    row.derivation +=
        "  over mesh axes: over a subset S of the axes, the ranks that agree on every other axis form a\n"
        "     group, and the collective runs in each group as on a world of its own, with N = |S|'s\n"
        "     product and in-group ranks. Numbering the ranks group by group (a permutation P),\n"
        "     A_S = P^T (A_1 + ... + A_G) P, a direct sum of the 1-D map above, one block per group;\n"
        "     A_S^T = P^T (A_1^T + ... + A_G^T) P: the 1-D adjoint in every group, which is the\n"
        "     adjoint collective over S. Checked exactly for every proper subset of the axes, in\n"
        "     every order, of every mesh of 2 or 3 axes up to " +
        std::to_string(opt.max_ranks) + " ranks:\n";
    for (const std::vector<int>& sizes : meshes(opt.max_ranks)) {
      std::vector<Instance> ins = mesh_instances(c, sizes);
      for (const Instance& in : ins) {
        std::string failure = linear ? check_linear(in, opt) : check_definition(in);
        if (!failure.empty()) {
          row.checked = false;
          row.counterexample = fmt::format("{}: {}", in.label, failure);
          break;
        }
      }
      if (!row.checked) break;
      row.derivation +=
          fmt::format("    mesh {}: {} variant{}\n", fmt::join(sizes, "x"), ins.size(), ins.size() == 1 ? "" : "s");
    }
  }
  const bool sums = c.reduction && *c.reduction != Reduction::Max && *c.reduction != Reduction::Min;
  if (row.checked && sums) {
    row.derivation +=
        "  bf16 and f16 (the low-precision pass): the 16-bit values exchanged, then summed in f32 in rank\n"
        "     order on the receiving rank, rounded once (accum=f32) or after each term (accum=same): equal to\n"
        "     the collective on the interpreter bit for bit, on every rank, checked for N = 1..";
    row.derivation += fmt::format("{} and every mesh above\n", opt.max_ranks);
    std::vector<Instance> all;
    for (int N = 1; N <= opt.max_ranks; ++N)
      for (Instance& in : instances(c, N)) {
        in.label = fmt::format("N={}{}", N, in.label.empty() ? "" : ", " + in.label);
        all.push_back(std::move(in));
      }
    for (const std::vector<int>& sizes : meshes(opt.max_ranks))
      for (Instance& in : mesh_instances(c, sizes)) all.push_back(std::move(in));
    for (const Instance& in : all)
      if (std::string failure = check_lowering(in); !failure.empty()) {
        row.checked = false;
        row.counterexample = fmt::format("{}: {}", in.label, failure);
        break;
      }
  }
  if (!row.checked) row.derivation += fmt::format("    COUNTEREXAMPLE: {}\n", row.counterexample);
  return row;
}

std::string proof_table(const std::vector<ProofRow>& rows, int max_ranks) {
  std::string s =
      fmt::format("{:<15} {:<5} {:<54} {:<38} {:<11} {}\n", "collective", "op", "forward (its op=sum routing)",
                  "adjoint (derived)", "for all N", fmt::format("N=1..{}", max_ranks));
  for (const ProofRow& r : rows) {
    s += fmt::format("{:<15} {:<5} {:<54} {:<38} {:<11} {}\n", op_name(r.c.op),
                     r.c.reduction ? r.c.reduction_str() : "-", r.forward, r.adjoint,
                     r.proved ? "proved" : "NOT PROVED", r.checked ? "checked" : "COUNTEREXAMPLE");
    if (!r.proved) s += fmt::format("    not proved: {}\n", r.proof_note);
    if (!r.checked) s += fmt::format("    counterexample: {}\n", r.counterexample);
  }
  size_t bad = 0;
  for (const ProofRow& r : rows) bad += !(r.proved && r.checked);
  s += bad ? fmt::format("{} of {} FAILED\n", bad, rows.size())
           : fmt::format(
                 "all {} proved for every N and checked exactly for N=1..{} and over the axes of every mesh "
                 "up to {} ranks\n",
                 rows.size(), max_ranks, max_ranks);
  return s;
}

std::string proof_json(const std::vector<ProofRow>& rows, int max_ranks) {
  size_t bad = 0;
  std::string s;
  for (const ProofRow& r : rows) {
    bad += !(r.proved && r.checked);
    s += fmt::format(
        "{}\n  {{\"collective\": {}, \"op\": {}, \"forward\": {}, \"adjoint\": {}, \"proved\": {}, "
        "\"proof_note\": {}, \"checked\": {}, \"counterexample\": {}}}",
        s.empty() ? "" : ",", quote(std::string(op_name(r.c.op))), quote(r.c.reduction_str()), quote(r.forward),
        quote(r.adjoint), r.proved ? "true" : "false", quote(r.proof_note), r.checked ? "true" : "false",
        quote(r.counterexample));
  }
  return fmt::format("{{\"max_ranks\": {}, \"ok\": {},\n \"collectives\": [{}]}}\n", max_ranks, bad ? "false" : "true",
                     s);
}

}  // namespace gradc
