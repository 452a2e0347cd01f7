#include "passes/lower_kernels.h"

#include "support/name_map.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ir/print.h"
#include "ir/rules.h"
#include "passes/pass.h"
#include "runtime/plan.h"

namespace gradc {

OpTable<KernelForm>& kernel_forms() {
  static OpTable<KernelForm> t;
  return t;
}
OpTable<bool>& cheap_scalars() {
  static OpTable<bool> t;
  return t;
}

namespace {

KernelForm form(Op op) { return kernel_forms()[op]; }
// Leaves cheap enough to compute wherever they are used, however often.
bool splat_const(const Node& n) { return n.op == Op::Const && n.attrs.find("value")->kind != Attr::List; }
// A constant with one element, or a splat: what a BLAS call's alpha can be.
bool scalar_const(const Node& n) { return splat_const(n) && n.type->size() >= 1; }
bool is_cheap(const Node& n) { return n.op == Op::Rank || n.op == Op::Iota || splat_const(n); }

// matmul's operand as BLAS sees it: a buffer value, transposed or not (a
// transpose of the last two axes only is folded into the call's flag).
struct GemmOperand {
  ValueId v;
  bool trans = false;
};
// A transpose of the last two axes only (what a BLAS flag does).
bool swaps_last_two(const Node& n) {
  if (n.op != Op::Transpose) return false;
  std::vector<int64_t> perm = n.attr_ints("perm");
  const int64_t r = int64_t(perm.size());
  bool last_two = r >= 2 && perm[size_t(r - 2)] == r - 1 && perm[size_t(r - 1)] == r - 2;
  for (int64_t d = 0; d + 2 < r; ++d) last_two &= perm[size_t(d)] == d;
  return last_two;
}
GemmOperand gemm_operand(const Graph& g, ValueId v) {
  if (swaps_last_two(g[v])) return {g[v].args[0], true};
  return {v, false};
}
// A matmul's two operands as BLAS sees them. Where both are f32 widenings of values of
// one 16-bit type (passes/low_precision.cpp's casts, under or over a transpose of the
// last two axes: the derivative of matmul transposes its widened operand), the call
// reads the 16-bit buffers and computes in f32 (cublasGemmEx with f32 compute; on the
// CPU the call widens them for sgemm): the same f32 products and sums, without f32
// copies of the operands.
std::pair<GemmOperand, GemmOperand> gemm_operands(const Graph& g, const Node& mm) {
  auto narrow = [&](ValueId v) -> std::pair<GemmOperand, DType> {
    GemmOperand op = gemm_operand(g, v);
    const Node& c = g[op.v];
    if (c.op != Op::Cast || c.type->dtype != DType::F32 || !is_low_precision(g.type(c.args[0]).dtype))
      return {op, DType::F32};
    const GemmOperand under = gemm_operand(g, c.args[0]);
    return {{under.v, op.trans != under.trans}, g.type(under.v).dtype};
  };
  const auto [a, ta] = narrow(mm.args[0]);
  const auto [b, tb] = narrow(mm.args[1]);
  if (ta != DType::F32 && ta == tb) return {a, b};
  return {gemm_operand(g, mm.args[0]), gemm_operand(g, mm.args[1])};
}

// A value's name as an identifier in generated code: "h.1" -> "h_1", "12" -> "t12".
std::string ident(const std::string& name) {
  std::string s = name;
  std::replace(s.begin(), s.end(), '.', '_');
  return std::isdigit(static_cast<unsigned char>(s[0])) ? "t" + s : s;
}

class Lowerer {
 public:
  Lowerer(Graph g, bool check_finite, bool any_size) : l_(start(std::move(g), check_finite)), any_size_(any_size) {}

  static Lowered start(Graph g, bool check_finite) {
    Lowered l;
    l.graph = std::move(g);
    l.check_finite = check_finite;
    return l;
  }

  Lowered run() {
    const Graph& g = l_.graph;
    seen_.assign(g.nodes.size(), 0);
    mark_buffers();
    l_.buffer_of.assign(g.nodes.size(), -1);
    const size_t buffers = size_t(std::count(buffered_.begin(), buffered_.end(), true));
    l_.buffers.reserve(buffers);
    l_.kernels.reserve(buffers);
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (buffered_[i]) make_buffer_and_kernel(ValueId(i));
    for (const auto& [name, v] : g.outputs) {
      l_.buffers[size_t(l_.buffer_of[size_t(v)])].output = true;
      l_.outputs.push_back({name, l_.buffer_of[size_t(v)]});
    }
    group_rows();
    group_tiles();
    if (!l_.check_finite) fit_rows();
    plan_memory();
    schedule();
    return std::move(l_);
  }

 private:
  // ---- which values live in buffers ----------------------------------------
  void mark_buffers() {
    // Two passes over the nodes (at 100k statements each pass streams the node
    // array from memory, the node 8 on fetched ahead): what the whole graph
    // decides (uses, what BLAS calls and collectives read, leaf values), then each
    // value in order, as its operands' decisions are final.
    const Graph& g = l_.graph;
    const size_t count = g.nodes.size();
    std::vector<int>& uses = uses_;
    uses.assign(count, 0);
    buffered_.assign(count, false);
    // A value computed from rank, iota, constants and one-element buffers alone by a few
    // elementwise ops (labels, a one-hot mask, the gradient of a mean over them) reads
    // next to no memory: it is computed wherever it is used, however many use it,
    // instead of being written out and read back.
    std::vector<int> leaf_ops(count, 0);  // such a value's op count, 0 for any other
    // A transpose some BLAS call reads as a flag on its operand: that operand is the
    // buffer, so the transpose is never the one computing a folded matmul.
    std::vector<bool> gemm_flag(count, false);
    std::vector<ValueId> loops;  // the loop kernels' nodes (their index checks are decided once uses are known)
    for (size_t i = 0; i < count; ++i) {
      __builtin_prefetch(&g.nodes[std::min(i + 8, count - 1)]);
      const Node& n = g.nodes[i];
      for (ValueId a : n.args) ++uses[size_t(a)];
      // What BLAS calls and collectives read must be in buffers, as must outputs.
      const KernelForm f = form(n.op);
      GRADC_ASSERT(f != KernelForm::Removed, "lowering needs {} replaced first (the autodiff pass)", op_name(n.op));
      if (f == KernelForm::Gemm) {
        const auto [a, b] = gemm_operands(g, n);
        for (const GemmOperand& op : {a, b}) buffered_[size_t(op.v)] = true;
        for (ValueId arg : n.args)  // and the transposes a widening reads
          for (ValueId v = arg; swaps_last_two(g[v]) || g[v].op == Op::Cast; v = g[v].args[0])
            if (swaps_last_two(g[v])) gemm_flag[size_t(v)] = true;
      }
      if (f == KernelForm::Comm) buffered_[size_t(n.args[0])] = true;
      if (f == KernelForm::Loop) {
        for (ValueId a : n.args) buffered_[size_t(a)] = true;
        loops.push_back(ValueId(i));
      }
      // A one-element result of a reduction, BLAS call, collective or input is one load
      // wherever it is read (cross_entropy's count of labels, a learning rate): as cheap.
      const bool one_load = n.type->size() == 1 && (f == KernelForm::Reduce || f == KernelForm::Gemm ||
                                                    f == KernelForm::Comm || n.op == Op::Input);
      // Labels are checked once each, into a buffer, however many elements read them
      // (a loss's one-hot mask reads each label once per class). Another op's indices
      // (what=) are checked where they are read, as any elementwise value.
      const bool labels = n.op == Op::CheckLabels && !n.attrs.has("what");
      if (labels) buffered_[i] = true;
      if (is_cheap(n) || one_load || labels) {
        leaf_ops[i] = 1;
      } else if (is_elementwise(n.op) || n.op == Op::Reshape || n.op == Op::BroadcastTo) {
        int ops = 1;
        for (ValueId a : n.args) ops = leaf_ops[size_t(a)] ? ops + leaf_ops[size_t(a)] : kMaxLeafOps + 1;
        leaf_ops[i] = ops <= kMaxLeafOps ? ops : 0;
      }
    }
    for (const auto& o : g.outputs) {
      uses[size_t(o.second)] += 2;  // an output is always a buffer
      buffered_[size_t(o.second)] = true;
    }
    // Indices checked where they are made (check_labels with what=, as scatter_add's)
    // and read by a loop kernel alone: the loop checks each as it reads it, from the
    // unchecked buffer (the check's value is an alias of it), instead of a pass that
    // writes a checked copy.
    loop_check_.assign(count, false);
    for (ValueId l : loops)
      for (ValueId a : g[l].args)
        if (g[a].op == Op::CheckLabels && g[a].attrs.has("what") && uses[size_t(a)] == 1) {
          loop_check_[size_t(a)] = true;
          buffered_[size_t(g[a].args[0])] = true;
        }
    // A matmul read only by a transpose of its last two axes, or by a product or
    // quotient with a scalar constant: that op is the BLAS call, computing
    // C^T = op(B)^T op(A)^T, or alpha op(A) op(B) (no pass over the result).
    folded_mm_.assign(count, -1);
    auto lone_matmul = [&](ValueId v) {
      return form(g[v].op) == KernelForm::Gemm && uses[size_t(v)] == 1 && is_float(g.type(v).dtype);
    };
    auto folded_matmul = [&](const Node& n) -> ValueId {
      if (swaps_last_two(n) && lone_matmul(n.args[0]) && !gemm_flag[size_t(&n - &g.nodes[0])]) return n.args[0];
      if ((n.op == Op::Mul || n.op == Op::Div) && lone_matmul(n.args[0]) && scalar_const(g[n.args[1]]) &&
          n.type == g[n.args[0]].type)
        return n.args[0];
      if (n.op == Op::Mul && lone_matmul(n.args[1]) && scalar_const(g[n.args[0]]) && n.type == g[n.args[1]].type)
        return n.args[1];
      return -1;
    };
    // A kernel computes at most kMaxFused values: a longer chain (100k unary
    // minuses) is cut into kernels of that size, each compiled in good time.
    std::vector<int64_t> size(count, 0);
    for (size_t i = 0; i < count; ++i) {
      __builtin_prefetch(&g.nodes[std::min(i + 8, count - 1)]);
      const Node& n = g.nodes[i];
      // A value that a larger elementwise result reads along a broadcast (a row's
      // log-sum-exp beside each of the row's logits) is computed once, into a buffer, not
      // again for each element that reads it; a value as cheap as a leaf excepted.
      if (is_elementwise(n.op) || n.op == Op::BroadcastTo)
        for (ValueId a : n.args)
          if (!leaf_ops[size_t(a)] && g.type(a).size() < n.type->size()) buffered_[size_t(a)] = true;
      if (!l_.check_finite) folded_mm_[i] = folded_matmul(n);
      const KernelForm f = form(n.op);
      // A transpose of a buffer is index arithmetic wherever it is read (a flag in a
      // BLAS call), and a bf16 or f16 buffer's f32 value a shift or two
      // (passes/low_precision.cpp's widening casts): recomputed, never copied, however
      // many read them (an f32 copy would cost the bandwidth 16 bits save).
      const bool widens = n.op == Op::Cast && is_low_precision(g.type(n.args[0]).dtype);
      const bool view = (n.op == Op::Transpose || widens) && buffered_[size_t(n.args[0])];
      if (folded_mm_[i] >= 0 || n.op == Op::Input || (n.op == Op::Const && !splat_const(n)) ||
          f == KernelForm::Reduce || f == KernelForm::Gemm || f == KernelForm::Comm || f == KernelForm::Loop ||
          (l_.check_finite && !is_cheap(n) && !view && n.op != Op::Const) ||
          (uses[i] > 1 && !leaf_ops[i] && !view && !recomputed(ValueId(i), leaf_ops) && !of_one_16bit(ValueId(i))))
        buffered_[i] = true;
      // The folded matmul is read by this op alone: it is no buffer (and no kernel).
      if (folded_mm_[i] >= 0) buffered_[size_t(folded_mm_[i])] = false;
      if (buffered_[i]) continue;
      size[i] = 1;
      for (ValueId a : n.args) size[i] += buffered_[size_t(a)] ? 0 : size[size_t(a)];
      if (size[i] >= kMaxFused) {
        buffered_[i] = true;
        size[i] = 0;
      }
    }
  }
  static constexpr int64_t kMaxFused = 256;
  static constexpr int kMaxLeafOps = 24;

  // Whether a value that several kernels read is computed again in each instead of
  // being written out: it is a few cheap ops (cheap_scalars) on at most two buffers of
  // its size (a 16-bit one's widened value counting as the buffer), and its readers then
  // read fewer of those arrays than writing it out and
  // reading it back would move: r buffers read by each of u readers against r read, 1
  // written and u read (r = 1, or r = 2 with two readers: y = x * a + w, read by a loss
  // and a gradient). Values it reads that are not buffers are part of it; leaves and
  // smaller operands (a row's statistic) are free.
  bool recomputed(ValueId v, const std::vector<int>& leaf_ops) {
    const Graph& g = l_.graph;
    const int64_t elements = g.type(v).size();
    if (buffered_[size_t(v)] || !cheap_scalars()[g[v].op] || elements <= 1) return false;
    int r = 0, ops = 0;                    // buffers read, ops computed
    std::vector<ValueId>& stack = stack_;  // empty between walks (fuse's)
    ++epoch_;
    stack.push_back(v);
    bool ok = true;
    while (ok && !stack.empty()) {
      const ValueId x = stack.back();
      stack.pop_back();
      if (seen_[size_t(x)] == epoch_) continue;
      seen_[size_t(x)] = epoch_;
      if (x != v && (leaf_ops[size_t(x)] || g.type(x).size() < elements)) continue;
      if (x != v && buffered_[size_t(x)]) {
        ok = ++r <= 2;
        continue;
      }
      const Node& n = g[x];  // a 16-bit buffer's f32 value (a shift or two: the widening casts) is that buffer, read
      if (n.op == Op::Cast && is_low_precision(g.type(n.args[0]).dtype) && buffered_[size_t(n.args[0])]) {
        stack.push_back(n.args[0]);
        continue;
      }
      if (!cheap_scalars()[n.op] || ++ops > kMaxRecomputedOps) ok = false;
      for (ValueId a : g[x].args) stack.push_back(a);
    }
    stack.clear();
    return ok && r >= 1 && (r == 1 || uses_[size_t(v)] == 2);
  }
  static constexpr int kMaxRecomputedOps = 8;

  // A splat constant, or a broadcast, reshape or cast of one, that is no buffer (an
  // output's is read): the same value at every element, computed where it is read.
  bool splat(ValueId x) const {
    const Node& n = l_.graph[x];
    if (buffered_[size_t(x)]) return false;
    return splat_const(n) || ((n.op == Op::BroadcastTo || n.op == Op::Reshape || n.op == Op::Cast) && splat(n.args[0]));
  }
  // Whether an f32 value that several kernels read is computed again in each because it
  // is a function of one bf16 or f16 buffer of its size alone, with a costly op on the way
  // (up to kMaxLeafOps elementwise ops of its size, on that buffer and splat constants:
  // each of gelu's parts): each reader then reads the 16-bit buffer, 2 bytes an element,
  // where the value's would take 4 and a pass to write. On the CPU it is one table lookup,
  // whatever the ops (codegen's Table16); a GPU computes it again, on a value it reads
  // anyway. A 16-bit value stays a buffer: its readers would read as many bytes, and a
  // lookup (a gather) costs more than a load of a buffer in cache (the bf16 elementwise
  // chain's tanh, sigmoid and exp, each read again by the backward: 8% slower
  // recomputed, 10^6 values a rank).
  bool of_one_16bit(ValueId v) {
    const Graph& g = l_.graph;
    const Type& t = g.type(v);
    if (buffered_[size_t(v)] || t.size() <= 1 || t.dtype != DType::F32) return false;
    ValueId leaf = -1;
    int ops = 0;
    bool costly = false, ok = true;
    std::vector<ValueId>& stack = stack_;  // empty between walks
    ++epoch_;
    stack.push_back(v);
    while (ok && !stack.empty()) {
      const ValueId x = stack.back();
      stack.pop_back();
      if (seen_[size_t(x)] == epoch_) continue;
      seen_[size_t(x)] = epoch_;
      const Node& n = g[x];
      if (x != v && splat(x)) continue;
      if (n.type->shape != t.shape) {
        ok = false;
      } else if (x != v && buffered_[size_t(x)]) {  // the one buffer it reads
        ok = is_low_precision(n.type->dtype) && (leaf < 0 || leaf == x);
        leaf = x;
      } else {
        const bool same_shape_view = n.op == Op::Reshape && g.type(n.args[0]).shape == n.type->shape;
        ok = (same_shape_view ||
              (is_elementwise(n.op) && n.op != Op::CheckLabels && n.op != Op::FloorDiv && n.op != Op::Mod)) &&
             ++ops <= kMaxLeafOps;
        costly |= float_only(n.op) && !cheap_scalars()[n.op];
        for (ValueId a : n.args) stack.push_back(a);
      }
    }
    stack.clear();
    return ok && costly && leaf >= 0;
  }

  int add_buffer(ValueId v, LBuffer::Kind kind) {
    LBuffer b;
    b.kind = kind;
    // A C++ name of its own: the IR's names are unique, but the identifiers made of them
    // need not be (the unnamed value 12 is t12, which a program may name too).
    const std::string base = ident(names_[v]);
    b.name = base;
    for (int k = 2; !buffer_names_.try_emplace(b.name, 0).second; ++k) b.name = fmt::format("{}_{}", base, k);
    b.type = l_.graph.type(v);
    b.value = v;
    l_.buffers.push_back(std::move(b));
    l_.buffer_of[size_t(v)] = int(l_.buffers.size() - 1);
    return int(l_.buffers.size() - 1);
  }

  // The values a map or reduce kernel computes inside itself: from `root` (or,
  // for a reduction, its operand) down to buffered values, in graph order.
  std::vector<ValueId> fuse(ValueId root, bool include_root) {
    const Graph& g = l_.graph;
    ++epoch_;  // marks this walk's values in seen_ (no set per kernel)
    std::vector<ValueId> in;
    std::vector<ValueId>& stack = stack_;  // empty between walks
    if (include_root)
      stack.push_back(root);
    else
      stack = g[root].args;
    while (!stack.empty()) {
      ValueId v = stack.back();
      stack.pop_back();
      if (seen_[size_t(v)] == epoch_ || (buffered_[size_t(v)] && v != root)) continue;
      seen_[size_t(v)] = epoch_;
      in.push_back(v);
      for (ValueId a : g[v].args) stack.push_back(a);
    }
    std::sort(in.begin(), in.end());
    return in;
  }

  template <class T>
  static std::vector<T> sorted_unique(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  void finish_kernel(LKernel k) {
    const Graph& g = l_.graph;
    std::vector<int> reads, lines;
    auto fused = [&](ValueId v) { return std::binary_search(k.fused.begin(), k.fused.end(), v); };  // fuse() sorts
    auto note = [&](ValueId v) {
      if (g[v].loc.known()) lines.push_back(g[v].loc.line);
      for (ValueId a : g[v].args)
        if (buffered_[size_t(a)] && !fused(a)) reads.push_back(l_.buffer_of[size_t(a)]);
    };
    for (ValueId v : k.fused) note(v);
    if (k.kind == LKernel::Map && !fused(k.root)) {
      reads.push_back(l_.buffer_of[size_t(k.root)]);  // a copy: an input's default that is a buffer already
      if (g[k.root].loc.known()) lines.push_back(g[k.root].loc.line);
    } else
      note(k.root);
    std::erase(reads, k.out);
    if (k.kind == LKernel::Gemm) {
      reads.push_back(l_.gemms[size_t(k.gemm)].a);
      reads.push_back(l_.gemms[size_t(k.gemm)].b);
    }
    k.reads = sorted_unique(std::move(reads));
    k.lines = sorted_unique(std::move(lines));
    k.stream = k.kind == LKernel::Comm ? LKernel::Communication : LKernel::Compute;
    l_.kernels.push_back(std::move(k));
  }

  void make_buffer_and_kernel(ValueId v) {
    const Graph& g = l_.graph;
    const Node& n = g[v];
    LKernel k;
    k.root = v;
    if (n.op == Op::Input) {
      int b = add_buffer(v, LBuffer::Input);
      l_.inputs.push_back({n.attr_sym("name"), b});
      if (n.args.empty()) return;
      k.kind = LKernel::Map;  // the default value, computed only when the caller gives none
      k.root = n.args[0];
      if (!buffered_[size_t(k.root)]) k.fused = fuse(k.root, true);
      k.out = b;
      k.guard = b;
      return finish_kernel(std::move(k));
    }
    if (n.op == Op::Const && !splat_const(n)) {  // a splat that is an output is a map kernel
      add_buffer(v, LBuffer::Const);
      return;
    }
    if (loop_check_[size_t(v)]) {  // checked by the loop that reads it: its operand's buffer
      int b = add_buffer(v, LBuffer::Alias);
      l_.buffers[size_t(b)].alias_of = l_.buffer_of[size_t(n.args[0])];
      return;
    }
    if (n.op == Op::Reshape || n.op == Op::StopGradient) {  // a view of a buffer is that buffer,
      ValueId src = n.args[0];                              // through reshapes that are not buffered
      while (!buffered_[size_t(src)] && (g[src].op == Op::Reshape || g[src].op == Op::StopGradient))
        src = g[src].args[0];
      if (buffered_[size_t(src)]) {
        int b = add_buffer(v, LBuffer::Alias);
        l_.buffers[size_t(b)].alias_of = l_.buffer_of[size_t(src)];
        return;
      }
    }
    const ValueId folded = folded_mm_[size_t(v)];  // the matmul this op's BLAS call computes
    const KernelForm f = folded >= 0 ? KernelForm::Gemm : form(n.op);
    const int operand = f == KernelForm::Comm || f == KernelForm::Loop ? l_.buffer_of[size_t(n.args[0])] : -1;
    if ((n.op == Op::AllReduce || f == KernelForm::Loop) && l_.buffers[size_t(operand)].kind == LBuffer::Work &&
        uses_[size_t(n.args[0])] == 1) {
      k.out = add_buffer(v, LBuffer::Alias);  // in place: the operand is used by nothing else
      l_.buffers[size_t(k.out)].alias_of = operand;
    } else {
      k.out = add_buffer(v, LBuffer::Work);
    }
    if (f == KernelForm::Gemm) {
      k.kind = LKernel::Gemm;
      LGemm call;
      const bool t = folded >= 0 && n.op == Op::Transpose;
      const Node& mm = folded >= 0 ? g[folded] : n;  // the matmul
      if (folded >= 0 && n.op != Op::Transpose) {    // x * c, c * x, x / c
        const double c = g[n.args[n.args[0] == folded ? 1 : 0]].attr_num("value");
        call.alpha = n.op == Op::Div ? 1 / c : c;
      }
      auto [a, b] = gemm_operands(g, mm);
      if (t) {  // C^T = op(B)^T op(A)^T
        std::swap(a, b);
        a.trans = !a.trans;
        b.trans = !b.trans;
      }
      call.a = l_.buffer_of[size_t(a.v)];
      call.b = l_.buffer_of[size_t(b.v)];
      GRADC_ASSERT(call.a >= 0 && call.b >= 0, "gemm %{}: an operand is in no buffer", v);
      call.trans_a = a.trans;
      call.trans_b = b.trans;
      const Shape& ys = n.type->shape;
      call.m = ys[ys.size() - 2];
      call.n = ys[ys.size() - 1];
      call.k = g.type(mm.args[0]).shape.back();
      call.batch = num_elements(Shape(ys.begin(), ys.end() - 2));
      auto stride = [&](ValueId x) {
        const Shape& s = g.type(x).shape;
        int64_t b_count = num_elements(Shape(s.begin(), s.end() - 2));
        GRADC_ASSERT(b_count == 1 || b_count == call.batch, "matmul: batch axes broadcast partially");
        return b_count == 1 ? 0 : s[s.size() - 1] * s[s.size() - 2];
      };
      call.stride_a = stride(a.v);
      call.stride_b = stride(b.v);
      k.gemm = int(l_.gemms.size());
      l_.gemms.push_back(call);
    } else if (f == KernelForm::Comm) {
      k.kind = LKernel::Comm;
    } else if (f == KernelForm::Loop) {
      k.kind = LKernel::Loop;
      for (ValueId a : n.args)
        if (loop_check_[size_t(a)]) k.fused.push_back(a);  // the check it makes
    } else if (f == KernelForm::Reduce) {
      k.kind = LKernel::Reduce;
      k.fused = fuse(v, false);
    } else {
      k.kind = LKernel::Map;
      k.fused = fuse(v, true);
    }
    finish_kernel(std::move(k));
  }

  // ---- row groups ----------------------------------------------------------------
  // How a value of a candidate member reads what the group has written, in the
  // group's [rows, len] layout: not at all (Outside); element i reads only row
  // i / len (Full, rows * len elements); element r reads only row r (PerRow,
  // rows elements); or some other way (Bad).
  enum class Row { Outside, Full, PerRow, Bad };
  struct Layout {
    int64_t rows = 0, len = 0;
    std::set<int> written;  // the buffers the group's members write
    int64_t end = 0;        // a group of tiles: its size, where the last row is short (else rows * len)
    std::set<int> totals;   // a group of tiles: its reductions' results, whole after the last tile
    int64_t size() const { return end > 0 ? end : rows * len; }
    bool whole() const { return size() == rows * len; }
  };

  // A reduction over trailing axes reads its operand in whole rows: that layout.
  static bool reduce_layout(const Graph& g, const LKernel& k, int64_t& rows, int64_t& len) {
    if (k.kind != LKernel::Reduce) return false;
    const Node& r = g[k.root];
    const Shape& in = g.type(r.args[0]).shape;
    std::vector<int64_t> axes = r.attr_ints("axes");
    for (int64_t& a : axes)
      if (a < 0) a += int64_t(in.size());
    std::sort(axes.begin(), axes.end());
    const int64_t first = int64_t(in.size()) - int64_t(axes.size());
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != first + int64_t(i)) return false;
    rows = num_elements(Shape(in.begin(), in.begin() + first));
    len = num_elements(Shape(in.begin() + first, in.end()));
    return true;
  }

  // Form f of a value of shape `from` read at the elements of shape `to` (NumPy broadcasting).
  static Row widen(Row f, const Shape& from, const Shape& to, const Layout& lay) {
    if (f == Row::Outside || f == Row::Bad || from == to) return f;
    if (f == Row::Full || from.size() != to.size() || num_elements(to) != lay.size() || !lay.whole()) return Row::Bad;
    // A per-row value [a.., 1, 1] broadcast along the row: [a.., b, c] with a.. the rows.
    for (size_t k = 0; k <= to.size(); ++k) {
      if (k > 0 && from[k - 1] != to[k - 1]) return Row::Bad;
      if (num_elements(Shape(to.begin(), to.begin() + long(k))) != lay.rows) continue;
      bool ones = std::all_of(from.begin() + long(k), from.end(), [](int64_t d) { return d == 1; });
      return ones ? Row::Full : Row::Bad;
    }
    return Row::Bad;
  }

  Row buffer_form(ValueId v, const Layout& lay) const {
    if (lay.totals.count(base(l_.buffer_of[size_t(v)]))) return Row::Bad;  // complete after the last tile only
    if (!lay.written.count(base(l_.buffer_of[size_t(v)]))) return Row::Outside;
    const int64_t n = l_.graph.type(v).size();
    return n == lay.rows ? Row::PerRow : n == lay.size() ? Row::Full : Row::Bad;
  }

  // The form of `v` in kernel k: its fused values in graph order, each from its operands.
  Row form_in(const LKernel& k, ValueId v, const Layout& lay) const {
    const Graph& g = l_.graph;
    std::map<ValueId, Row> forms;
    auto of = [&](ValueId a) {
      auto it = forms.find(a);
      return it != forms.end() ? it->second : buffer_form(a, lay);
    };
    for (ValueId f : k.fused) {
      const Node& n = g[f];
      Row r = Row::Outside;
      const bool pointwise = is_elementwise(n.op) || n.op == Op::BroadcastTo || n.op == Op::Cast || n.op == Op::Where;
      for (ValueId a : n.args) {
        Row x = n.op == Op::Reshape ? of(a)
                : pointwise         ? widen(of(a), g.type(a).shape, n.type->shape, lay)
                                    : (of(a) == Row::Outside ? Row::Outside : Row::Bad);
        if (x == Row::Outside) continue;
        r = (r == Row::Outside || r == x) ? x : Row::Bad;
      }
      forms[f] = r;
    }
    return of(v);
  }

  // Whether kernel k can run row by row in the group's layout; sets its row length,
  // and `outside` for a map that reads nothing the group writes.
  bool joins(LKernel& k, const Layout& lay, bool& outside) const {
    outside = false;
    if (k.stream != LKernel::Compute || k.guard >= 0) return false;
    // a group of tiles: a map of its size, or a reduction of a value of its size to one element
    if (lay.end > 0 && (k.group >= 0 || tile_size(l_, k) != lay.end)) return false;
    if (k.kind == LKernel::Reduce && lay.end > 0) {
      k.row_len = lay.len;
      const Row f = form_in(k, l_.graph[k.root].args[0], lay);
      outside = f == Row::Outside;
      return f == Row::Full || f == Row::Outside;
    }
    if (k.kind == LKernel::Reduce) {
      int64_t rows = 0, len = 0;
      if (!reduce_layout(l_.graph, k, rows, len) || rows != lay.rows || len != lay.len) return false;
      k.row_len = len;
      return form_in(k, l_.graph[k.root].args[0], lay) != Row::Bad;
    }
    if (k.kind != LKernel::Map) return false;
    const int64_t n = l_.buffers[size_t(k.out)].type->size();
    if (n != lay.size() && n != lay.rows) return false;
    k.row_len = n == lay.rows ? 1 : lay.len;
    const Row f = form_in(k, k.root, lay);
    outside = f == Row::Outside;
    return f != Row::Bad;
  }

  // Greedily, from each reduction over trailing axes: the kernels after it that
  // run row by row in its layout. Rows of one element or longer than kMaxRowLen
  // (a row is one GPU block's work) stay separate kernels. A compute kernel that
  // does not join (cross_entropy's sum over the rows, between its forward and
  // backward rows) may be passed over, up to kMaxPassed of them: the members after
  // it that do not read what it (or another passed one) writes join, and the
  // passed kernels run after the group, in their order. No collective is passed.
  void group_rows() {
    std::vector<LKernel>& ks = l_.kernels;
    for (size_t s = 0; s < ks.size();) {
      Layout lay;
      if (ks[s].stream != LKernel::Compute || !reduce_layout(l_.graph, ks[s], lay.rows, lay.len) || lay.len < 2 ||
          lay.len > kMaxRowLen) {
        ++s;
        continue;
      }
      const size_t members = gather(s, lay);
      s += members > 0 ? members : 1;
    }
  }
  // The group from kernel s on, in layout lay: the kernels that join, and up to
  // kMaxPassed compute kernels that do not, passed over (a later member reads nothing
  // they write); its members then come first, the kernels passed over before the last
  // member after them, in their order. The members' count, or 0 where fewer than two
  // join (the ones at the end that read nothing the group writes are left out).
  size_t gather(size_t s, Layout& lay) {
    std::vector<LKernel>& ks = l_.kernels;
    std::vector<size_t> members, passed;  // members[0, useful) end with one reading the group
    std::set<int> passed_out;
    size_t useful = 1;
    for (size_t e = s; e < ks.size(); ++e) {
      bool reads_passed = false, outside = false;
      for (int r : ks[e].reads) reads_passed |= passed_out.count(base(r)) > 0;
      if (!reads_passed && joins(ks[e], lay, outside)) {
        members.push_back(e);
        (lay.end > 0 && ks[e].kind == LKernel::Reduce ? lay.totals : lay.written).insert(base(ks[e].out));
        if (!outside) useful = members.size();
      } else if (ks[e].stream == LKernel::Compute && ks[e].guard < 0 && ks[e].group < 0 && passed.size() < kMaxPassed) {
        passed.push_back(e);
        passed_out.insert(base(ks[e].out));
      } else {
        break;
      }
    }
    members.resize(std::min(useful, members.size()));
    if (members.size() < 2 || members[0] != s) return 0;
    std::vector<LKernel> order;
    for (size_t m : members) order.push_back(std::move(ks[m]));
    for (size_t p : passed)
      if (p < members.back()) order.push_back(std::move(ks[p]));
    for (size_t i = 0; i < order.size(); ++i) {
      const bool member = i < members.size();
      ks[s + i] = std::move(order[i]);
      ks[s + i].group = member ? int(s) : -1;
      ks[s + i].rows = member ? lay.rows : 0;
      ks[s + i].tiles = member && lay.end > 0;
    }
    return members.size();
  }
  static constexpr size_t kMaxPassed = 4;
  static constexpr int64_t kMaxRowLen = 1 << 16;

  // Consecutive map kernels of one large size that no row group took, where the later
  // ones read what the earlier wrote at the same element (tanh(x), sigmoid(x) and
  // exp(-x * x), each read by the backward too, then the forward's y from the three):
  // a row group whose rows are tiles of kTileMin to kTileMax elements, so that a tile
  // the first members write is still in cache when the later ones read it, and x is
  // read from memory once, not once a kernel. The tiles' length is the largest that
  // divides the size, else kTileMax with a shorter last tile. A class for any size
  // does not know its sizes here (the fit's sizes are small): its tiles are kTileMax
  // long, the last one short, at every size of two elements or more. A reduction of
  // a value of that size to one element (a loss's sum) joins too, each tile's part
  // added to the total as the tile is computed: what only it and the group read is
  // never written out. Its total is not a member's to read; as in group_rows, up to
  // kMaxPassed compute kernels (the loss's cast, a map of another size) are passed
  // over and run after the group, and no collective is.
  void group_tiles() {
    if (l_.check_finite) return;
    std::vector<LKernel>& ks = l_.kernels;
    for (size_t s = 0; s < ks.size();) {
      Layout lay;
      const int64_t n = ks[s].group < 0 && ks[s].kind == LKernel::Map ? tile_size(l_, ks[s]) : 0;
      lay.len = n < 2 ? 0 : any_size_ ? kTileMax : n >= kTiledMin ? tile_len(n) : 0;
      size_t members = 0;
      if (lay.len > 0) {
        lay.rows = tiles(n, lay.len);
        lay.end = n;
        members = gather(s, lay);
      }
      s += members > 0 ? members : 1;
    }
  }
  // The largest tile length from kTileMin to kTileMax that divides n, else kTileMax.
  static int64_t tile_len(int64_t n) {
    for (int64_t len = kTileMax; len >= kTileMin; --len)
      if (n % len == 0) return len;
    return kTileMax;
  }
  static int64_t tiles(int64_t n, int64_t len) { return (n + len - 1) / len; }
  static constexpr int64_t kTileMin = 256, kTileMax = 2048, kTiledMin = int64_t(1) << 19;

  // Within each row group: a map member's full-size result that only later members
  // read is row-local (LBuffer::row_local); a map member's result takes the place
  // of a buffer that only earlier members read, each element i in row i / len (an
  // alias of it: the member writes row r after every reader is done with row r).
  void fit_rows() {
    const std::vector<LKernel>& ks = l_.kernels;
    if (std::none_of(ks.begin(), ks.end(), [](const LKernel& k) { return k.group >= 0; })) return;
    readers_.assign(l_.buffers.size(), {});
    for (size_t i = 0; i < ks.size(); ++i)
      for (int r : ks[i].reads) readers_[size_t(base(r))].push_back(int(i));
    std::vector<bool> out_view(l_.buffers.size(), false);  // the base of an output
    for (const auto& o : l_.outputs) out_view[size_t(base(o.second))] = true;
    std::vector<bool> taken(l_.buffers.size(), false);  // a place already written in place
    for (size_t s = 0; s < ks.size(); ++s) {
      if (ks[s].group != int(s)) continue;
      size_t e = s;
      while (e < ks.size() && ks[e].group == int(s)) ++e;
      for (size_t m = s; m < e; ++m) {
        const LKernel& k = ks[m];
        LBuffer& out = l_.buffers[size_t(k.out)];
        if (k.kind != LKernel::Map || k.row_len < 2 || out.kind != LBuffer::Work || out_view[size_t(k.out)]) continue;
        if (!readers_[size_t(k.out)].empty() && read_only_in(k.out, m + 1, e)) {
          out.row_local = true;
          continue;
        }
        for (size_t r = s; r < m && out.kind == LBuffer::Work; ++r)
          for (int x : ks[r].reads) {
            const int xb = base(x);
            const LBuffer& place = l_.buffers[size_t(xb)];
            if (taken[size_t(xb)] || place.kind != LBuffer::Work || place.row_local || out_view[size_t(xb)] ||
                place.type->dtype != out.type->dtype || place.type->size() != out.type->size() ||
                !read_only_in(xb, s, m) || !read_in_rows(xb, Layout{ks[s].rows, k.row_len, {xb}, out.type->size(), {}}))
              continue;
            out.kind = LBuffer::Alias;
            out.alias_of = xb;
            taken[size_t(xb)] = true;
            break;
          }
      }
      s = e - 1;
    }
  }
  // Whether every kernel reading buffer b lies in [from, to).
  bool read_only_in(int b, size_t from, size_t to) const {
    return std::all_of(readers_[size_t(b)].begin(), readers_[size_t(b)].end(),
                       [&](int k) { return size_t(k) >= from && size_t(k) < to; });
  }
  // Whether every kernel reading buffer b (lay.written) reads element i of it in row i / len only.
  bool read_in_rows(int b, const Layout& lay) const {
    return std::all_of(readers_[size_t(b)].begin(), readers_[size_t(b)].end(), [&](int i) {
      const LKernel& k = l_.kernels[size_t(i)];
      return form_in(k, k.kind == LKernel::Reduce ? l_.graph[k.root].args[0] : k.root, lay) != Row::Bad;
    });
  }

  // ---- the buffer plan ---------------------------------------------------------
  int base(int b) const { return base_buffer(l_, b); }
  void plan_memory() {
    // Per buffer, the aliases being final: the buffer whose memory it is.
    const size_t nb = l_.buffers.size();
    base_of_.resize(nb);
    for (size_t b = 0; b < nb; ++b) base_of_[b] = base(int(b));
    const int K = int(l_.kernels.size());
    // A row group's members run interleaved, row by row: for liveness they are one
    // kernel, what they read and write live through the whole group (its members
    // are consecutive kernels). One pass, from the end: the kernels stream from memory.
    std::vector<int> last(nb, -1);
    for (int i = K - 1, group_end = -1; i >= 0; --i) {
      const LKernel& k = l_.kernels[size_t(i)];
      if (k.group >= 0 && (i + 1 == K || l_.kernels[size_t(i) + 1].group != k.group)) group_end = i;
      const int end = k.group >= 0 ? group_end : i;
      for (int x : k.reads) {
        int& r = last[size_t(base_of_[size_t(x)])];
        r = std::max(r, end);
      }
      int& o = last[size_t(base_of_[size_t(k.out)])];
      o = std::max(o, end);
    }
    std::vector<bool> placed(nb, false);
    for (const auto& out : l_.outputs) last[size_t(base_of_[size_t(out.second)])] = K;  // outputs live to the end
    live_.assign(nb, {-1, -1});
    // The plan's steps (runtime/plan.h): before kernel i, release what kernel i - 1 used
    // last; then place what kernel i writes. The placed buffers by last use: a list per
    // kernel, linked through next_freed (the order of releases does not change the
    // free blocks).
    std::vector<int> freed_after(size_t(K) + 1, -1), next_freed(nb, -1);
    std::vector<int32_t>& steps = l_.plan_steps;
    steps.clear();
    for (int i = 0; i < K; ++i) {
      if (i > 0)
        for (int b = freed_after[size_t(i - 1)]; b >= 0; b = next_freed[size_t(b)]) steps.push_back(-1 - b);
      int o = base_of_[size_t(l_.kernels[size_t(i)].out)];
      if (l_.buffers[size_t(o)].kind != LBuffer::Work || placed[size_t(o)]) continue;
      placed[size_t(o)] = true;
      live_[size_t(o)] = {i, last[size_t(o)]};
      steps.push_back(o);
      next_freed[size_t(o)] = freed_after[size_t(last[size_t(o)])];
      freed_after[size_t(last[size_t(o)])] = o;
    }
    std::vector<int64_t> bytes(nb), offset(nb, 0);
    for (size_t b = 0; b < nb; ++b) bytes[b] = l_.buffers[b].bytes();
    const int64_t top = plan_first_fit(steps.data(), steps.size(), bytes.data(), offset.data());
    for (int32_t b : steps)
      if (b >= 0) l_.buffers[size_t(b)].offset = offset[size_t(b)];
    for (size_t b = 0; b < nb; ++b)
      if (l_.buffers[b].kind == LBuffer::Alias) l_.buffers[b].offset = l_.buffers[size_t(base_of_[b])].offset;
    l_.workspace_bytes = top;
  }

  // ---- the schedule -------------------------------------------------------------
  // A kernel waits for the last kernel on the other stream that wrote what it
  // reads, or that used memory it writes (a buffer whose place it reuses). For any
  // size (any_size_), the plan is made at run time: two workspace buffers may share
  // memory wherever they are not alive at once (the first fit places a buffer only
  // in memory free when it is written), so that is a hazard too.
  void schedule() {
    // Per buffer, the bytes of the workspace it uses (in one pass: the buffers
    // would be read at random).
    std::vector<std::pair<int64_t, int64_t>> span(l_.buffers.size());
    for (size_t b = 0; b < span.size(); ++b) {
      const LBuffer& m = l_.buffers[b];
      if (m.kind == LBuffer::Work)
        span[b] = {m.offset, m.offset + std::max<int64_t>(m.bytes(), 1)};
      else
        span[b] = {-1 - int64_t(b), -int64_t(b)};  // its own memory: a range no other shares
    }
    auto overlap = [&](int a, int b) {
      const int x = base_of_[size_t(a)], y = base_of_[size_t(b)];
      if (any_size_ && x != y && l_.buffers[size_t(x)].kind == LBuffer::Work &&
          l_.buffers[size_t(y)].kind == LBuffer::Work) {
        const auto [x0, x1] = live_[size_t(x)];
        const auto [y0, y1] = live_[size_t(y)];
        return x1 < y0 || y1 < x0;
      }
      auto [a0, a1] = span[size_t(x)];
      auto [b0, b1] = span[size_t(y)];
      return a0 < b1 && b0 < a1;
    };
    // Streams run in order, so waiting for kernel i covers every kernel before it on
    // that stream: only the other stream's kernels after the last one waited for
    // are looked at, newest first, up to the first hazard.
    int waited[2] = {-1, -1};  // per stream: the last kernel of the other stream it has waited for
    std::vector<int> on[2];    // per stream: its kernels so far
    for (size_t j = 0; j < l_.kernels.size(); ++j) {
      LKernel& kj = l_.kernels[j];
      const std::vector<int>& other = on[1 - kj.stream];
      for (auto it = other.rbegin(); it != other.rend() && *it > waited[kj.stream]; ++it) {
        const LKernel& ki = l_.kernels[size_t(*it)];
        bool hazard = overlap(ki.out, kj.out);
        for (int r : kj.reads) hazard |= overlap(ki.out, r);
        for (int r : ki.reads) hazard |= overlap(r, kj.out);
        if (hazard) {
          kj.waits.push_back(*it);
          waited[kj.stream] = *it;
          break;
        }
      }
      on[kj.stream].push_back(int(j));
    }
  }

  Lowered l_;
  ValueNames names_{l_.graph};  // after l_: of its graph
  NameMap<int> buffer_names_;   // the buffers' names so far
  std::vector<bool> buffered_;
  std::vector<uint32_t> seen_;  // per value: the fuse() walk that last reached it
  uint32_t epoch_ = 0;
  std::vector<ValueId>
      folded_mm_;          // per value: the matmul whose BLAS call computes it (a transpose or scaling of it), or -1
  std::vector<int> uses_;  // readers of each value, an output counting twice
  std::vector<bool> loop_check_;           // an index check that the loop kernel reading it makes
  std::vector<std::vector<int>> readers_;  // per base buffer: the kernels reading it (fit_rows)
  std::vector<ValueId> stack_;             // fuse's walk
  std::vector<int> base_of_;               // per buffer, from plan_memory on: base_buffer
  std::vector<std::pair<int, int>> live_;  // per placed buffer: the kernels that write it first and use it last
  bool any_size_;                          // the buffer plan is made at run time (lower_kernels)
};

}  // namespace

Lowered lower_kernels(Graph g, bool check_finite, bool any_size) {
  return Lowerer(std::move(g), check_finite, any_size).run();
}

}  // namespace gradc
