#include "frontend/lower.h"

#include "frontend/composites.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "ir/collectives.h"
#include "ir/elementwise.h"
#include "ir/mesh.h"
#include "ir/rules.h"
#include "support/name_map.h"
#include "support/stack.h"

namespace gradc {
namespace {

using ast::Expr;

// A lowered expression: a value in the graph, or a scalar literal not yet
// materialised (so `2 * world` folds and `x + 2` gets a constant of x's dtype).
// An integer literal is exact in int64 (`ival`): static integers (slice bounds,
// dimensions) never pass through a double, and it is range-checked only when it
// becomes an i32 value.
struct V {
  ValueId id = -1;
  double num = 0;
  DType lit_dtype = DType::I32;
  int64_t ival = 0;       // the literal's value when lit_dtype is i32
  Loc loc = {};           // where the literal was written (its range errors point there)
  bool from_div = false;  // a literal made by `/` (where a static integer is needed, suggest `//`)
  bool is_lit() const { return id < 0; }
  bool is_int_lit() const { return is_lit() && lit_dtype == DType::I32; }
  static V integer(int64_t i, Loc at = {}) { return V{-1, double(i), DType::I32, i, at}; }
  static V real(double x, DType dt) { return V{-1, x, dt, 0, {}}; }
};

// The names of a program, a function body or one iteration of a loop. A loop's
// scope sees the names of the scope around it (`parent`) and may rebind them:
// they are loop-carried.
using Binding = std::pair<V, Loc>;  // a name's value, and where it was bound
struct Scope {
  NameMap<Binding> names;
  bool in_function = false;
  Scope* parent = nullptr;  // a loop body's enclosing scope
};

// Arguments of a builtin call, bound to its parameter names.
struct Call {
  const Expr* e = nullptr;
  std::string name;
  std::map<std::string, const Expr*> args;
  std::map<std::string, Loc> locs;
  const Expr* get(const std::string& p) const {
    auto it = args.find(p);
    return it == args.end() ? nullptr : it->second;
  }
  Loc loc_of(const std::string& p) const {
    auto it = locs.find(p);
    return it == locs.end() ? e->loc : it->second;
  }
};

class Lowerer {
 public:
  Lowerer(const ast::Program& p, int world, const Mesh& mesh, const LowerOptions& opt)
      : prog_(p), f64_(opt.f64), given_sizes_(opt.sizes) {
    g_.world = world;
    g_.mesh = mesh;
  }

  Graph run() {
    Scope top;
    top.names.reserve(prog_.stmts.size());  // about a name a statement
    // About 4 nodes a statement, and room for the backward graphs the autodiff pass
    // adds in place: a 100k-statement program's array is not copied (unused pages cost nothing).
    g_.nodes.reserve(prog_.stmts.size() * 24);
    scopes_.push_back(&top);
    for (const ast::Stmt& s : prog_.stmts) statement(s);
    return std::move(g_);
  }

 private:
  // ---- values and constants -------------------------------------------------
  // The float type: f32, or f64 when the whole program is lowered in f64.
  DType F() const { return f64_ ? DType::F64 : DType::F32; }
  DType flt(DType t) const { return t == DType::I32 ? F() : t; }
  // A declared dtype; lowered in f64, every float type is f64 (bf16 and f16 too: `verify`'s widened program).
  DType declared(DType t) const { return f64_ && is_float(t) ? DType::F64 : t; }
  DType dtype(const V& v) const { return v.is_lit() ? v.lit_dtype : g_.type(v.id).dtype; }
  // The dtype two operands meet in: PyTorch's promotion of tensors, where a literal (a
  // Python scalar) takes a float tensor's dtype, as it does there (bf16 * 0.5 is bf16).
  DType common(const V& a, const V& b) const {
    if (a.is_lit() != b.is_lit() && is_float(dtype(a.is_lit() ? b : a))) return dtype(a.is_lit() ? b : a);
    return promote(dtype(a), dtype(b));
  }
  const Type& type(const V& v) const { return g_.type(v.id); }

  ValueId constant(const Type& t, double value, Loc loc) { return add(const_node(t, value, loc)); }
  // A place in the source as a node keeps it: with the def calls being lowered.
  Loc here(Loc loc) const {
    if (loc.site == 0) loc.site = site_;
    return loc;
  }
  ValueId add(Node n) {
    n.loc = here(n.loc);
    n.type = infer_type(g_, n);
    return g_.append(std::move(n));
  }
  // An op that leaves its argument as it is (x[:], a cast to its own dtype) still makes
  // a value of its own: a grad with respect to it holds x fixed, as PyTorch's view
  // does. A reshape to its own shape, which costs nothing once lowered.
  ValueId copy_of(ValueId x, Loc loc) {
    Attrs a;
    a.set("shape", Attr::of_ints(g_.type(x).shape));
    return op(Op::Reshape, {x}, loc, a).id;
  }
  V op(Op o, std::vector<ValueId> args, Loc loc, Attrs attrs = {}) {
    return V{emit(g_, o, std::move(args), std::move(attrs), here(loc))};
  }
  // The value as a tensor of dtype `dt`: a literal becomes a constant, a value of
  // another dtype is cast.
  ValueId tensor(const V& v, DType dt, Loc loc) {
    if (v.is_lit()) return constant(Type{dt, {}}, literal(v, dt, loc), loc);
    if (g_.type(v.id).dtype == dt) return v.id;
    const Node& c = g_[v.id];
    if (c.op == Op::Const && is_float(dt)) {
      // A constant takes the new float type directly: [0.1, 0.2] in f64 context holds
      // the f64 values 0.1 and 0.2, not f32 roundings of them.
      Node n = c;
      n.type = Type{dt, c.type->shape};
      n.loc = loc;
      n.name.clear();
      return add(std::move(n));
    }
    Attrs a;
    a.set("to", Attr::of_sym(dtype_name(dt)));
    return op(Op::Cast, {v.id}, loc, a).id;
  }
  ValueId tensor(const V& v, Loc loc) { return tensor(v, dtype(v), loc); }
  // A literal's value as an element of dtype `dt`: an i32 must be an integer in range.
  static double literal(const V& v, DType dt, Loc loc) {
    if (dt != DType::I32) return v.num;
    if (!v.is_int_lit()) {
      if (v.num != std::trunc(v.num)) user_error(loc, "{} is not an integer", v.num);
      return v.num;
    }
    if (v.ival < INT32_MIN || v.ival > INT32_MAX)
      user_error(v.loc.line ? v.loc : loc, "{} does not fit in i32 (-2147483648 to 2147483647)", v.ival);
    return double(v.ival);
  }
  ValueId float_tensor(const V& v, Loc loc) { return tensor(v, flt(dtype(v)), loc); }

  // ---- names ----------------------------------------------------------------
  Scope& scope() { return *scopes_.back(); }
  // The binding of `name` visible here: this scope's, or an enclosing one's through loop bodies.
  Binding* find(const std::string& name, bool outside = false) {
    for (Scope* s = outside ? scope().parent : &scope(); s; s = s->parent) {
      if (Binding* b = s->names.find(name)) return b;
    }
    return nullptr;
  }
  void bind(const ast::Name& n, V v) {
    if (n.text == "rank" || n.text == "world") user_error(n.loc, "'{}' is built in and cannot be rebound", n.text);
    auto [bound, fresh] = scope().names.try_emplace(n.text, {v, n.loc});
    if (!fresh)
      user_error(n.loc, "'{}' is already bound (at line {}); each name is bound once", n.text, bound->second.line);
    if (Binding* carried = scope().parent ? find(n.text, true) : nullptr) {
      scope().names.erase(n.text);
      // Loop-carried: a name bound before the loop takes the body's new value.
      const V& old = carried->first;
      const Type was = old.is_lit() ? Type{old.lit_dtype, {}} : g_.type(old.id);
      const Type now = v.is_lit() ? Type{v.lit_dtype, {}} : g_.type(v.id);
      if (was != now)
        user_error(n.loc, "'{}' is loop-carried and must keep its type: it was {} (at line {}), here {}", n.text,
                   type_str(was), carried->second.line, type_str(now));
      if (!v.is_lit() && g_[v.id].name.empty()) g_[v.id].name = n.text;
      carried->first = v;
      if (find_top(n.text) == carried) note_static(n.text, *carried);
      return;
    }
    if (!v.is_lit() && g_[v.id].name.empty()) g_[v.id].name = n.text;
    if (&scope() == scopes_.front()) note_static(n.text, *bound);
  }
  // The program's constants (top-level names bound to a static integer or a float
  // literal: `D = 64 // world`, `lr = 0.01`), which defaults and functions see too.
  Binding* find_top(const std::string& name) { return scopes_.front()->names.find(name); }
  void note_static(const std::string& name, const Binding& b) {
    if (b.first.is_lit())
      statics_.set(name, b);
    else if (!statics_.empty())
      statics_.erase(name);
  }
  V lookup(const std::string& name, Loc loc) {
    if (Binding* b = find(name)) return b->first;
    if (name == "rank") {  // one node per use, so diagnostics point at the use
      Node n;
      n.op = Op::Rank;
      n.loc = loc;
      n.name = "rank";
      return V{add(std::move(n))};
    }
    if (name == "world") return V::integer(g_.world);
    if (name == "inf") return V::real(std::numeric_limits<double>::infinity(), F());  // as math.inf
    if (name == "nan") return V::real(std::numeric_limits<double>::quiet_NaN(), F());
    if (name == "True" || name == "False")
      user_error(loc, "unknown name '{}': gradc writes {} (an i32 1 or 0)", name, name == "True" ? "true" : "false");
    if (name == "None")
      user_error(loc, "unknown name 'None': gradc has no None; leave an optional argument out to get its default");
    if (in_default_)
      user_error(loc,
                 "unknown name '{}' (a default value may use only rank, world, literals and the program's constants: "
                 "static integers and names bound to a number)",
                 name);
    if (scope().in_function)
      user_error(loc,
                 "unknown name '{}' (a function sees only its parameters, its own names and the program's constants: "
                 "static integers and names bound to a number)",
                 name);
    user_error(loc, "unknown name '{}'", name);
  }

  // ---- statements -----------------------------------------------------------
  void statement(const ast::Stmt& s) {
    switch (s.kind) {
      case ast::Stmt::World:
      case ast::Stmt::Mesh: return;  // read before lowering (declared_world, declared_mesh)
      case ast::Stmt::Size: return size_param(s);
      case ast::Stmt::Input: return input(s);
      case ast::Stmt::Assign: {
        std::vector<V> vals = expr_multi(*s.value, s.names.size());
        for (size_t i = 0; i < s.names.size(); ++i) bind(s.names[i], vals[i]);
        return;
      }
      case ast::Stmt::For: return for_loop(s);
      case ast::Stmt::Output:
        for (const ast::Name& n : s.names) {
          for (const auto& o : g_.outputs)
            if (o.first == n.text) user_error(n.loc, "'{}' is output twice", n.text);
          V v = lookup(n.text, n.loc);
          g_.outputs.push_back({n.text, tensor(v, n.loc)});
        }
        return;
    }
  }

  // for i in range(K) { ... }: unrolled, each iteration in a scope of its own whose
  // assignments to names bound before the loop carry over (docs/language.md section 3).
  void for_loop(const ast::Stmt& s) {
    const Expr& r = *s.value;
    if (in_default_) user_error(s.loc, "loops cannot appear in an input's default value");
    Call c = bind_args(r, {"a", "b"}, 1);
    int64_t a = static_int(*c.get("a"), "a range bound"), b = 0;
    if (c.get("b"))
      b = static_int(*c.get("b"), "a range bound");
    else
      std::swap(a, b);  // range(K) is range(0, K)
    const ast::Name& var = s.names[0];
    if (var.text == "rank" || var.text == "world" || find(var.text))
      user_error(var.loc, "the loop variable '{}' must not name an existing value", var.text);
    if (b - a > kMaxIterations)
      user_error(r.loc, "this loop runs {} times; loops are unrolled, at most {} iterations", b - a, kMaxIterations);
    for (int64_t i = a; i < b; ++i) {
      Scope body;
      body.parent = &scope();
      body.in_function = scope().in_function;
      body.names.set(var.text, {V::integer(i, var.loc), var.loc});
      scopes_.push_back(&body);
      for (const ast::Stmt& st : s.body) statement(st);
      scopes_.pop_back();
    }
  }
  static constexpr int64_t kMaxIterations = 1000000;

  // size B = 8: a static integer whose value the caller gives (--size B=32, or the
  // shape of an input file declared with it); the default when none is given.
  void size_param(const ast::Stmt& s) {
    const ast::Name& name = s.names[0];
    int64_t value = 0;
    auto given =
        std::find_if(given_sizes_.begin(), given_sizes_.end(), [&](const auto& g) { return g.first == name.text; });
    if (given != given_sizes_.end()) {
      value = given->second;
    } else if (s.value) {
      Scope defaults;  // as an input's default: static integers and world
      defaults.names = statics_;
      scopes_.push_back(&defaults);
      in_default_ = true;
      value = static_int(*s.value, "a size's default");
      in_default_ = false;
      scopes_.pop_back();
      if (value < 1 || value > kMaxSize)
        user_error(s.value->loc, "size {} must be from 1 to {}, got {}", name.text, kMaxSize, value);
    } else {
      user_error(name.loc,
                 "size {} has no value: give it with --size {}=N, or in the shape of an input file (--inputs), or "
                 "declare a default (size {} = N)",
                 name.text, name.text, name.text);
    }
    g_.sizes.push_back({name.text, value});
    bind(name, V::integer(value, name.loc));
  }

  void input(const ast::Stmt& s) {
    const ast::Name& name = s.names[0];
    Type t;
    parse_dtype(s.type.dtype, t.dtype);
    t.dtype = declared(t.dtype);
    for (const auto& d : s.type.dims) {
      int64_t n = static_int(*d, "a dimension");
      if (n < 0) user_error(d->loc, "dimension {} is negative", n);
      t.shape.push_back(n);
    }
    Node n;
    n.op = Op::Input;
    n.type = t;
    n.loc = name.loc;
    n.name = name.text;
    n.attrs.set("name", Attr::of_str(name.text));
    if (s.shared && s.shared_over.empty()) n.attrs.set("shared", Attr::of_int(1));
    if (!s.shared_over.empty()) n.attrs.set("shared", axes_attr(s.shared_over, "shared"));
    if (s.value) {
      Scope defaults;  // a default sees no other values, but static integers (H = 64 // world)
      defaults.names = statics_;
      scopes_.push_back(&defaults);
      in_default_ = true;
      V v = expr(*s.value);
      in_default_ = false;
      scopes_.pop_back();
      Loc loc = s.value->loc;
      if (v.is_lit()) {
        n.args.push_back(constant(t, literal(v, t.dtype, loc), loc));
      } else {
        ValueId d = tensor(v, t.dtype, loc);
        if (g_.type(d).shape != t.shape) {
          if (!broadcasts_to(g_.type(d).shape, t.shape))
            user_error(loc, "the default value of '{}' is {}, which does not broadcast to {}", name.text,
                       type_str(g_.type(d)), type_str(t));
          Attrs a;
          a.set("shape", Attr::of_ints(t.shape));
          d = op(Op::BroadcastTo, {d}, loc, a).id;
        }
        n.args.push_back(d);
      }
    }
    bind(name, V{add(std::move(n))});
  }

  // ---- static (compile-time) values ----------------------------------------
  int64_t static_int(const Expr& e, const char* what) {
    V v = expr(e);
    if (v.is_int_lit()) return v.ival;
    if (v.from_div)
      user_error(e.loc,
                 "{} must be a static integer, but '/' is true division and gives a float: write '//' "
                 "for integer division",
                 what);
    if (mentions_rank(e))
      user_error(e.loc,
                 "{} must be a static integer, and rank is a value (it differs by rank): this rank's block "
                 "of n rows of x is take(x, iota(n) + rank * n, axis=0)",
                 what);
    user_error(e.loc,
               "{} must be a static integer (integer literals, world, loop variables, shape(x)[i] and names "
               "bound to them, with + - * // %)",
               what);
  }
  // Whether `e` reads the rank (`rank`, `rank(tp)`), directly.
  static bool mentions_rank(const Expr& e) {
    if ((e.kind == Expr::Name || e.kind == Expr::Call) && e.text == "rank") return true;
    if (e.kind != Expr::Unary && e.kind != Expr::Binary) return false;
    for (const auto& a : e.args)
      if (mentions_rank(*a)) return true;
    return false;
  }
  std::vector<int64_t> static_ints(const Expr& e, const char* what) {
    std::vector<int64_t> out;
    if (is_shape_call(e)) return shape_of(e);
    if (e.kind == Expr::List)
      for (const auto& x : e.args) out.push_back(static_int(*x, what));
    else
      out.push_back(static_int(e, what));
    return out;
  }
  // `shape(x)`: a value's shape, a list of static integers (PyTorch's x.shape), where a
  // shape or a list of integers goes; `shape(x)[i]` is one of them. Its argument is a
  // name, so that asking a shape never adds an op (a collective in it would still run).
  bool is_shape_call(const Expr& e) const {
    return e.kind == Expr::Call && e.text == "shape" && !prog_.funcs.count("shape");
  }
  Shape shape_of(const Expr& e) {
    if (e.args.size() != 1 || !e.kwargs.empty() || e.args[0]->kind != Expr::Name)
      user_error(e.loc, "shape takes one value's name: shape(x)");
    V v = lookup(e.args[0]->text, e.args[0]->loc);
    return v.is_lit() ? Shape{} : type(v).shape;
  }

  // An enum-like argument: a bare name (op=sum, dtype=f32); `example` is one of its names.
  std::string symbol(const Expr& e, const char* what, const char* example) {
    if (e.kind != Expr::Name) user_error(e.loc, "{} must be a name, such as {}", what, example);
    return e.text;
  }

  // ---- expressions -----------------------------------------------------------
  V expr(const Expr& e) {
    std::vector<V> vs = expr_multi(e, 1);
    return vs[0];
  }

  std::vector<V> expr_multi(const Expr& e, size_t want) {
    return deep([&] { return expr_multi_here(e, want); });  // chains recurse as deep as they are long
  }
  std::vector<V> expr_multi_here(const Expr& e, size_t want) {
    std::vector<V> vs;
    if (e.kind == Expr::Call)
      vs = call(e);
    else
      vs.push_back(single(e));
    if (vs.size() != want) {  // (split's number is a size, not NumPy's and JAX's count of pieces)
      const std::string f = e.kind == Expr::Call && !prog_.funcs.count(e.text) ? e.text : "";
      user_error(e.loc, "{} gives {} value{}, but {} name{} to bind{}",
                 e.kind == Expr::Call ? e.text : "this expression", vs.size(), vs.size() == 1 ? "" : "s", want,
                 want == 1 ? " is" : "s are",
                 f == "split"   ? " (split's number or list is the pieces' sizes, as PyTorch's, not NumPy's count of "
                                  "pieces or points to split at; chunk(x, n) makes n pieces)"
                 : f == "chunk" ? " (chunk(x, n) makes pieces of ceil(size / n), as PyTorch's: fewer than n where "
                                  "they run out)"
                                : "");
    }
    return vs;
  }

  V single(const Expr& e) {
    switch (e.kind) {
      case Expr::Number:
        if (e.is_int) return V::integer(e.ival, e.loc);
        return V::real(e.fval, F());  // exact until it takes a type: f32 rounds it then
      case Expr::Name: return lookup(e.text, e.loc);
      case Expr::Unary: {
        V x = expr(*e.args[0]);
        if (x.is_int_lit()) return int_arith(Op::Sub, V::integer(0), x, e.loc);
        if (x.is_lit()) return V::real(-x.num, x.lit_dtype);
        return op(Op::Neg, {x.id}, e.loc);
      }
      case Expr::Binary: return binary(e);
      case Expr::Subscript: return subscript(e);
      case Expr::List: return array_literal(e);
      case Expr::String: user_error(e.loc, "a string is not a value (strings are einsum's equations)");
      case Expr::Call: break;
    }
    return expr(e);
  }

  V binary(const Expr& e) {
    static const std::map<std::string, Op> ops = {{"+", Op::Add},  {"-", Op::Sub}, {"*", Op::Mul}, {"/", Op::Div},
                                                  {"**", Op::Pow}, {"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt},
                                                  {"<=", Op::Le},  {">", Op::Gt},  {">=", Op::Ge}, {"//", Op::FloorDiv},
                                                  {"%", Op::Mod}};
    V a = expr(*e.args[0]);
    V b = expr(*e.args[1]);
    if (e.text == "@") return matmul(a, b, e.loc);
    // `**` of two static integers with a non-negative exponent is a static integer, as
    // Python's int ** int (`zeros([10**9, 0])`); pow() and ** on i32 values are float ops.
    if (e.text == "**" && a.is_int_lit() && b.is_int_lit() && b.ival >= 0) return int_arith(Op::Pow, a, b, e.loc);
    return binary_op(ops.at(e.text), a, b, e.loc);
  }
  V matmul(V a, V b, Loc loc) {
    if (a.is_lit() || b.is_lit()) user_error(loc, "matmul: operands must be tensors, not scalars");
    DType dt = promote(dtype(a), dtype(b));
    return op(Op::Matmul, {tensor(a, dt, loc), tensor(b, dt, loc)}, loc);
  }

  V binary_op(Op o, V a, V b, Loc loc) {
    DType dt = common(a, b);
    if ((o == Op::FloorDiv || o == Op::Mod) && dt != DType::I32)
      user_error(loc, "'{}' is integer {} on i32 values; for floats write {}", o == Op::Mod ? "%" : "//",
                 o == Op::Mod ? "modulo" : "floor division",
                 o == Op::Mod ? "a - b * cast(cast(a / b, i32), f32), or cast(a, i32) % b"
                              : "cast(a, i32) // b, or '/' for true division");
    if (a.is_int_lit() && b.is_int_lit() && (o == Op::FloorDiv || o == Op::Mod)) {
      if (b.ival == 0) user_error(loc, "static integer {} by zero", o == Op::Mod ? "modulo" : "division");
      if (a.ival == INT64_MIN && b.ival == -1) user_error(loc, "integer overflow in a constant");
      int64_t q = a.ival / b.ival, r = a.ival % b.ival;
      if (r != 0 && ((r < 0) != (b.ival < 0))) {  // Python's signs: round toward -inf
        --q;
        r += b.ival;
      }
      return V::integer(o == Op::Mod ? r : q, loc);
    }
    if (o == Op::Div || o == Op::Pow) dt = flt(dt);
    const bool arith = o == Op::Add || o == Op::Sub || o == Op::Mul;
    if (a.is_int_lit() && b.is_int_lit() && arith) return int_arith(o, a, b, loc);
    if (a.is_lit() && b.is_lit()) return fold(o, a, b, dt, loc);
    // bf16 or f16 with a literal: the literal stays f32, as a Python scalar does in
    // PyTorch (x * 0.3 is x times 0.3f, rounded once)
    if (is_low_precision(dt) && (a.is_lit() || b.is_lit()))
      return V{tensor(op(o, {tensor(a, DType::F32, loc), tensor(b, DType::F32, loc)}, loc), dt, loc)};
    return op(o, {tensor(a, dt, loc), tensor(b, dt, loc)}, loc);
  }
  // An op on two literals, computed as it runs: by the op's own scalar function
  // (ir/elementwise.h) on the literals as elements of dtype `dt`, their promoted dtype.
  // The result is a literal of the op's result dtype, so folding never changes a value.
  V fold(Op o, const V& a, const V& b, DType dt, Loc loc) {
    double r = 0;
    auto eval = [&](auto x, auto y) {
      using T = decltype(x);
      with_binary<T>(o, [&](auto f) { r = double(f(x, y)); });
    };
    if (dt == DType::I32)
      eval(int32_t(literal(a, dt, loc)), int32_t(literal(b, dt, loc)));
    else if (dt == DType::F32)
      eval(float(a.num), float(b.num));
    else
      eval(a.num, b.num);
    const DType rt = is_comparison(o) ? float_of(dt) : dt;  // as the comparisons' shape rule
    if (rt == DType::I32) return V::integer(int64_t(r), loc);
    V out = V::real(r, rt);
    out.from_div = o == Op::Div;
    return out;
  }
  // + - * ** of two integer literals, exact in int64.
  static V int_arith(Op o, const V& a, const V& b, Loc loc) {
    int64_t x = a.ival, y = b.ival, r = 0;
    bool overflow = false;
    switch (o) {
      case Op::Add: overflow = __builtin_add_overflow(x, y, &r); break;
      case Op::Sub: overflow = __builtin_sub_overflow(x, y, &r); break;
      case Op::Mul: overflow = __builtin_mul_overflow(x, y, &r); break;
      default:  // Pow, y >= 0
        r = 1;
        for (int64_t k = 0; k < y && !overflow && r != 0 && (r != 1 || x != 1); ++k)
          overflow = __builtin_mul_overflow(r, x, &r);
        break;
    }
    if (overflow) user_error(loc, "integer overflow in a constant");
    return V::integer(r, loc);
  }

  V array_literal(const Expr& e) {
    // A rectangular, constant, nested list: [[1, 2], [3, 4]].
    Shape shape;
    std::vector<std::pair<V, Loc>> vals;
    DType dt = DType::I32;
    std::function<void(const Expr&, size_t)> walk = [&](const Expr& x, size_t depth) {
      if (x.kind == Expr::List) {
        if (depth == shape.size())
          shape.push_back(int64_t(x.args.size()));
        else if (depth > shape.size() || shape[depth] != int64_t(x.args.size()))
          user_error(x.loc, "array literal is not rectangular");
        for (const auto& y : x.args) walk(*y, depth + 1);
        return;
      }
      if (depth != shape.size()) user_error(x.loc, "array literal is not rectangular");
      V v = expr(x);
      if (!v.is_lit()) user_error(x.loc, "array literals may hold only constants");
      dt = promote(dt, v.lit_dtype);
      vals.push_back({v, x.loc});
    };
    walk(e, 0);
    if (vals.empty()) user_error(e.loc, "empty array literal");
    Node n;
    n.op = Op::Const;
    n.type = Type{dt, shape};
    n.loc = e.loc;
    Attr list;
    list.kind = Attr::List;
    for (const auto& [v, loc] : vals)
      list.list.push_back(dt == DType::I32 ? Attr::of_int(int64_t(literal(v, dt, loc))) : Attr::of_float(v.num));
    n.attrs.set("value", list);
    return V{add(std::move(n))};
  }

  V subscript(const Expr& e) {
    if (is_shape_call(*e.args[0])) {  // shape(x)[i]: a static integer
      const Shape s = shape_of(*e.args[0]);
      if (e.index.size() != 1 || e.index[0].is_slice)
        user_error(e.loc, "shape(x) takes one index: shape(x)[0] (it is a list of {} integers)", s.size());
      const int64_t n = int64_t(s.size());
      int64_t i = static_int(*e.index[0].start, "an index of shape(x)");
      if (i < -n || i >= n) user_error(e.loc, "index {} is out of range for shape(x) = {}", i, shape_str(s));
      return V::integer(s[size_t(i < 0 ? i + n : i)], e.loc);
    }
    for (size_t d = 0; d < e.index.size(); ++d)  // NumPy's x[:, None]
      if (const ast::Index& ix = e.index[d]; !ix.is_slice && ix.start->kind == Expr::Name && ix.start->text == "None")
        user_error(ix.loc, "an index of None adds an axis in NumPy and PyTorch: write expand_dims(x, axis={})", d);
    V base = expr(*e.args[0]);
    if (base.is_lit()) user_error(e.loc, "cannot index a scalar");
    const Type t = type(base);
    if (int(e.index.size()) > t.rank()) user_error(e.loc, "too many indices ({}) for {}", e.index.size(), type_str(t));
    std::vector<int64_t> starts(size_t(t.rank()), 0), ends(t.shape.begin(), t.shape.end());
    Shape out;
    for (int d = 0; d < t.rank(); ++d) {
      int64_t dim = t.shape[size_t(d)];
      if (d >= int(e.index.size())) {
        out.push_back(dim);
        continue;
      }
      const ast::Index& ix = e.index[size_t(d)];
      if (!ix.is_slice) {
        int64_t i = static_int(*ix.start, "an index");
        if (i < -dim || i >= dim) user_error(ix.loc, "index {} is out of range for axis {} of {}", i, d, type_str(t));
        if (i < 0) i += dim;
        starts[size_t(d)] = i;
        ends[size_t(d)] = i + 1;
        continue;
      }
      auto clamp = [&](const ast::ExprPtr& x, int64_t dflt) {
        if (!x) return dflt;
        int64_t i = static_int(*x, "a slice bound");
        if (i < 0) i += dim;
        return std::clamp<int64_t>(i, 0, dim);
      };
      int64_t s = clamp(ix.start, 0), en = clamp(ix.end, dim);
      if (en < s) en = s;
      starts[size_t(d)] = s;
      ends[size_t(d)] = en;
      out.push_back(en - s);
    }
    ValueId v = base.id;
    if (starts != std::vector<int64_t>(size_t(t.rank()), 0) || ends != t.shape) {
      Attrs a;
      a.set("starts", Attr::of_ints(starts));
      a.set("ends", Attr::of_ints(ends));
      v = op(Op::Slice, {v}, e.loc, a).id;
    }
    if (v == base.id && out == t.shape) return V{copy_of(v, e.loc)};  // x[:]: a value of its own
    v = at(e.loc).reshape(v, out);
    return V{v};
  }

  // ---- IR-building helpers used by the builtins ----------------------------

  // The reduced axes of call `c` (its `axis=`, default all), normalised.
  std::vector<int64_t> axes_of(const Call& c, const Type& t, const char* param = "axis") {
    std::vector<int64_t> axes;
    if (const Expr* ax = c.get(param)) {
      for (int64_t a : static_ints(*ax, "axis")) {
        int n = norm_axis(ax->loc, c.name, a, t);
        if (std::find(axes.begin(), axes.end(), n) != axes.end())
          user_error(ax->loc, "{}: axis {} is repeated", c.name, a);
        axes.push_back(n);
      }
      std::sort(axes.begin(), axes.end());
    } else {
      for (int d = 0; d < t.rank(); ++d) axes.push_back(d);
    }
    return axes;
  }
  // A constant argument (a literal, or literals with + - * /), `dflt` where it is not given.
  double static_number(const Call& c, const char* param, double dflt) {
    const Expr* e = c.get(param);
    if (!e) return dflt;
    V v = expr(*e);
    if (!v.is_lit()) user_error(e->loc, "{}: {} must be a constant", c.name, param);
    return v.num;
  }
  int axis1(const Call& c, const char* param, const Type& t, int64_t dflt) {
    const Expr* ax = c.get(param);
    int64_t a = ax ? static_int(*ax, param) : dflt;
    return norm_axis(ax ? ax->loc : c.e->loc, c.name, a, t);
  }
  bool keepdims(const Call& c) {
    const Expr* k = c.get("keepdims");
    return k && static_int(*k, "keepdims") != 0;
  }
  Shape static_shape(const Call& c, const char* param) {
    const Expr* e = c.get(param);
    Shape s = static_ints(*e, "a shape");
    for (int64_t d : s)
      if (d < 0 && !(c.name == "reshape" && d == -1))
        user_error(e->loc, "{}: negative dimension {} in {}", c.name, d, shape_str(s));
    return s;
  }
  ValueId fill(const Shape& s, const V& v, Loc loc) {
    if (v.is_lit()) return constant(Type{F(), s}, v.num, loc);
    ValueId x = tensor(v, F(), loc);
    if (g_.type(x).rank() != 0) user_error(loc, "full: the value must be a scalar, got {}", type_str(g_.type(x)));
    Attrs a;
    a.set("shape", Attr::of_ints(s));
    return op(Op::BroadcastTo, {x}, loc, a).id;
  }

  // ---- calls ---------------------------------------------------------------
  Call bind_args(const Expr& e, const std::vector<std::string>& params, size_t required) {
    Call c;
    c.e = &e;
    c.name = e.text;
    if (e.args.size() > params.size())
      user_error(e.args[params.size()]->loc, "{}: takes at most {} positional argument{}", e.text, params.size(),
                 params.size() == 1 ? "" : "s");
    for (size_t i = 0; i < e.args.size(); ++i) {
      c.args[params[i]] = e.args[i].get();
      c.locs[params[i]] = e.args[i]->loc;
    }
    for (const ast::KwArg& kw : e.kwargs) {
      if (std::find(params.begin(), params.end(), kw.name) == params.end()) {
        const bool dim = kw.name == "dim" && std::find(params.begin(), params.end(), "axis") != params.end();
        user_error(kw.loc, "{}: unknown argument '{}' (expected {}){}", e.text, kw.name, fmt::join(params, ", "),
                   dim ? ": gradc calls PyTorch's dim= axis=" : "");
      }
      if (c.args.count(kw.name)) user_error(kw.loc, "{}: argument '{}' is given twice", e.text, kw.name);
      c.args[kw.name] = kw.value.get();
      c.locs[kw.name] = kw.loc;
    }
    for (size_t i = 0; i < required; ++i)
      if (!c.args.count(params[i])) user_error(e.loc, "{}: missing argument '{}'", e.text, params[i]);
    return c;
  }

  V arg(const Call& c, const std::string& p) {
    const DType low = composite_low_;
    composite_low_ = DType::I32;  // the operand's own expression is not the composite
    V v = expr(*c.get(p));
    composite_low_ = low;
    if (low != DType::I32 && !v.is_lit() && is_low_precision(dtype(v))) {  // the composite's f32 copy of it
      if (low == DType::F32) composite_low_ = dtype(v);
      v = V{tensor(v, DType::F32, c.loc_of(p))};
    }
    return v;
  }
  ValueId targ(const Call& c, const std::string& p) {
    V v = arg(c, p);
    return tensor(v, c.loc_of(p));
  }

  std::vector<V> call(const Expr& e) {
    auto f = prog_.funcs.find(e.text);
    if (f != prog_.funcs.end()) return inline_call(e, f->second);
    if (e.text == "grad") return grad(e);
    if (e.text == "sort" || e.text == "topk") return sort_builtin(e);
    if (e.text == "chunk" || e.text == "split") return split_builtin(e);
    return {builtin(e)};
  }

  std::vector<V> inline_call(const Expr& e, const ast::Func& f) {
    for (const std::string& s : stack_)
      if (s == f.name.text)
        user_error(e.loc, "recursion: '{}' calls itself ({} -> {})", f.name.text, fmt::join(stack_, " -> "),
                   f.name.text);
    std::vector<std::string> params;
    for (const auto& p : f.params) params.push_back(p.text);
    Call c = bind_args(e, params, params.size());
    std::vector<V> args;
    for (const auto& p : params) args.push_back(arg(c, p));
    Scope s;
    s.in_function = true;
    for (size_t i = 0; i < params.size(); ++i) s.names.set(params[i], {args[i], f.params[i].loc});
    // and the program's static integers (D = 64 // world)
    statics_.for_each([&](const std::string& k, const Binding& b) { s.names.try_emplace(k, b); });
    stack_.push_back(f.name.text);
    scopes_.push_back(&s);
    // The body's values and errors keep this call with their places (in `f` called at ...).
    const uint16_t outer = site_;
    site_ = uint16_t(call_site(f.name.text, here(e.loc)));
    std::vector<V> out;
    try {
      for (const ast::Stmt& st : f.body) statement(st);
      for (const auto& r : f.results) out.push_back(expr(*r));
    } catch (UserError& err) {
      err.loc = here(err.loc);
      for (auto& note : err.notes) note.first = here(note.first);
      site_ = outer;
      throw;
    }
    site_ = outer;
    scopes_.pop_back();
    stack_.pop_back();
    return out;
  }

  std::vector<V> grad(const Expr& e) {
    if (in_default_) user_error(e.loc, "grad cannot be used in an input's default value");
    std::string mode = "sum", reduce_dtype;
    std::optional<Attr> over;
    Loc over_loc;
    for (const ast::KwArg& kw : e.kwargs) {
      if (kw.name == "over") {
        over = over_attr(*kw.value, "grad");
        over_loc = kw.loc;
        continue;
      }
      if (kw.name == "reduce_dtype") {
        reduce_dtype = symbol(*kw.value, "reduce_dtype", "bf16");
        DType dt;
        if (!parse_dtype(reduce_dtype, dt) || !is_float(dt) || dt == DType::F64)
          user_error(kw.value->loc, "grad: reduce_dtype={} (expected f32, bf16 or f16)", reduce_dtype);
        continue;
      }
      if (kw.name != "mode")
        user_error(kw.loc, "grad: unknown argument '{}' (expected mode, over or reduce_dtype)", kw.name);
      mode = symbol(*kw.value, "mode", "sum");
      if (!grad_mode_by_name(mode))
        user_error(kw.value->loc, "grad: unknown mode={} (expected sum, mean or global)", mode);
    }
    if (over && mode == "global")
      user_error(over_loc, "grad: mode=global takes no over= (it is over=[]: the loss is the same on every rank)");
    if (e.args.size() < 2) user_error(e.loc, "grad: needs a loss and at least one value to differentiate by");
    V loss = expr(*e.args[0]);
    if (loss.is_lit()) user_error(e.args[0]->loc, "grad: the loss is a constant");
    std::vector<V> out;
    for (size_t i = 1; i < e.args.size(); ++i) {
      V w = expr(*e.args[i]);
      if (w.is_lit()) user_error(e.args[i]->loc, "grad: cannot differentiate with respect to a constant");
      if (!is_float(g_.type(w.id).dtype))
        user_error(e.args[i]->loc, "grad: cannot differentiate with respect to an {} value", type_str(g_.type(w.id)));
      Attrs a;
      a.set("mode", Attr::of_sym(mode));
      if (over) a.set("over", *over);
      if (!reduce_dtype.empty()) a.set("reduce_dtype", Attr::of_sym(reduce_dtype));
      out.push_back(op(Op::Grad, {loss.id, w.id}, e.loc, a));
    }
    return out;
  }

  V builtin(const Expr& e);  // by the table builtins()
  [[noreturn]] void unknown_function(const Expr& e);

  // The builder of a builtin's nodes (ir/builder.h): each at the call's place, with
  // the def calls being lowered.
  class At final : public Builder {
   public:
    At(Lowerer& l, Loc loc) : Builder(l.g_), l_(l), loc_(loc) {}

   protected:
    ValueId make(Op o, std::vector<ValueId> args, Attrs attrs) override {
      return l_.op(o, std::move(args), loc_, std::move(attrs)).id;
    }
    ValueId make_constant(const Type& t, double v) override { return l_.constant(t, v, loc_); }

   private:
    Lowerer& l_;
    Loc loc_;
  };
  At at(Loc loc) { return At(*this, loc); }

 public:
  // The builtins (builtins() maps each name to one of these).
  V unary_builtin(const Expr& e);
  V binary_builtin(const Expr& e);
  V where_builtin(const Expr& e);
  V reduction_builtin(const Expr& e);
  V arg_builtin(const Expr& e);
  V softmax_builtin(const Expr& e);
  V cross_entropy_builtin(const Expr& e);
  V one_hot_builtin(const Expr& e);
  V cast_builtin(const Expr& e);
  DType creation_dtype(const Call& c, const std::string& f);
  V reshape_builtin(const Expr& e);
  V transpose_builtin(const Expr& e);
  V concat_builtin(const Expr& e);
  V slice_builtin(const Expr& e);
  V expand_dims_builtin(const Expr& e);
  V squeeze_builtin(const Expr& e);
  V matmul_builtin(const Expr& e);
  V filled_builtin(const Expr& e);
  V full_builtin(const Expr& e);
  V iota_builtin(const Expr& e);
  V random_builtin(const Expr& e);
  V take_builtin(const Expr& e);
  V activation_builtin(const Expr& e);
  V dropout_builtin(const Expr& e);
  V norm_builtin(const Expr& e);
  V collective_builtin(const Expr& e);
  V mesh_builtin(const Expr& e);
  V logaddexp_builtin(const Expr& e);
  V bce_builtin(const Expr& e);
  V attention_builtin(const Expr& e);
  V clamp_builtin(const Expr& e);
  V masked_fill_builtin(const Expr& e);
  V shape_builtin(const Expr& e);
  V triangle_builtin(const Expr& e);
  V variance_builtin(const Expr& e);
  V cumsum_builtin(const Expr& e);
  V take_along_axis_builtin(const Expr& e);
  V scatter_builtin(const Expr& e);
  V argsort_builtin(const Expr& e);
  std::vector<V> sort_builtin(const Expr& e);   // sort, topk: values and indices
  std::vector<V> split_builtin(const Expr& e);  // chunk, split: the pieces
  V stack_builtin(const Expr& e);
  std::vector<ValueId> value_list(const Call& c);
  V repeat_interleave_builtin(const Expr& e);
  V einsum_builtin(const Expr& e);
  // The indices of op `what` (i32, each in 0..n-1: checked where they are made).
  ValueId checked_indices(const Call& c, const char* param, int64_t n);
  ValueId einsum(const std::string& eq, const std::vector<ValueId>& xs, Loc loc);

  // Axis names as an `over` or `shared` attribute: a list of symbols, each an axis
  // of the mesh, none twice (else an error at the name, listing the axes).
  Attr axes_attr(const std::vector<ast::Name>& names, const char* what) {
    Attr a;
    a.kind = Attr::List;
    for (const ast::Name& n : names) {
      if (axis_index(g_, n.text) < 0)
        user_error(n.loc, "{}: '{}' is not an axis of the mesh (its axes: {})", what, n.text, axes_list(g_));
      for (const Attr& seen : a.list)
        if (seen.s == n.text) user_error(n.loc, "{}: axis '{}' is named twice", what, n.text);
      a.list.push_back(Attr::of_sym(n.text));
    }
    return a;
  }
  // over=tp or over=[dp, tp]
  Attr over_attr(const Expr& e, const char* what) {
    std::vector<ast::Name> names;
    auto one = [&](const Expr& x) {
      if (x.kind != Expr::Name)
        user_error(x.loc, "{}: over must name mesh axes, such as over=tp or over=[dp, tp]", what);
      names.push_back({x.text, x.loc});
    };
    if (e.kind == Expr::List)
      for (const auto& x : e.args) one(*x);
    else
      one(e);
    return axes_attr(names, what);
  }

 private:
  const ast::Program& prog_;
  uint16_t site_ = 0;  // the def calls being lowered (a call_site), 0 at the top level
  bool f64_;
  const std::vector<std::pair<std::string, int64_t>>& given_sizes_;
  Graph g_;
  std::vector<Scope*> scopes_;
  NameMap<Binding> statics_;  // the program's constants, kept by bind
  std::vector<std::string> stack_;
  bool in_default_ = false;
  // While a composite's operands are read: F32, or the bf16 or f16 type of the first
  // such operand (whose f32 copy it takes); I32 elsewhere.
  DType composite_low_ = DType::I32;
  // The builtins that expand into several ops, each of which counts as one op for
  // bf16 and f16: one rounding of its result.
  static inline const std::set<std::string> kComposites = {"mean",
                                                           "logsumexp",
                                                           "softmax",
                                                           "log_softmax",
                                                           "normalize",
                                                           "cross_entropy",
                                                           "gelu",
                                                           "silu",
                                                           "softplus",
                                                           "layer_norm",
                                                           "rms_norm",
                                                           "logaddexp",
                                                           "var",
                                                           "std",
                                                           "log_sigmoid",
                                                           "binary_cross_entropy_with_logits",
                                                           "scaled_dot_product_attention"};
};

using BuiltinFn = V (Lowerer::*)(const Expr& e);

// Every builtin by its name, for calls and for "did you mean"; the ops the language
// calls by name (every NAMED row of ir/ops.def: f(x), f(a, b)) and the collectives
// (every COLL row) enter it from ir/ops.def.
// (grad, which has a value per differentiated value, is Lowerer::grad.)
const std::map<std::string, BuiltinFn>& builtins() {
  static const std::map<std::string, BuiltinFn> table = [] {
    std::map<std::string, BuiltinFn> t = {
        {"where", &Lowerer::where_builtin},
        {"sum", &Lowerer::reduction_builtin},
        {"mean", &Lowerer::reduction_builtin},
        {"max", &Lowerer::reduction_builtin},
        {"min", &Lowerer::reduction_builtin},
        {"logsumexp", &Lowerer::reduction_builtin},
        {"argmax", &Lowerer::arg_builtin},
        {"argmin", &Lowerer::arg_builtin},
        {"softmax", &Lowerer::softmax_builtin},
        {"log_softmax", &Lowerer::softmax_builtin},
        {"normalize", &Lowerer::softmax_builtin},
        {"cross_entropy", &Lowerer::cross_entropy_builtin},
        {"one_hot", &Lowerer::one_hot_builtin},
        {"cast", &Lowerer::cast_builtin},
        {"reshape", &Lowerer::reshape_builtin},
        {"broadcast_to", &Lowerer::reshape_builtin},
        {"transpose", &Lowerer::transpose_builtin},
        {"concat", &Lowerer::concat_builtin},
        {"slice", &Lowerer::slice_builtin},
        {"expand_dims", &Lowerer::expand_dims_builtin},
        {"squeeze", &Lowerer::squeeze_builtin},
        {"matmul", &Lowerer::matmul_builtin},
        {"zeros", &Lowerer::filled_builtin},
        {"ones", &Lowerer::filled_builtin},
        {"full", &Lowerer::full_builtin},
        {"iota", &Lowerer::iota_builtin},
        {"randn", &Lowerer::random_builtin},
        {"rand", &Lowerer::random_builtin},
        {"take", &Lowerer::take_builtin},
        {"gelu", &Lowerer::activation_builtin},
        {"silu", &Lowerer::activation_builtin},
        {"softplus", &Lowerer::activation_builtin},
        {"dropout", &Lowerer::dropout_builtin},
        {"layer_norm", &Lowerer::norm_builtin},
        {"rms_norm", &Lowerer::norm_builtin},
        {"rank", &Lowerer::mesh_builtin},
        {"size", &Lowerer::mesh_builtin},
        {"logaddexp", &Lowerer::logaddexp_builtin},
        {"clamp", &Lowerer::clamp_builtin},
        {"masked_fill", &Lowerer::masked_fill_builtin},
        {"tril", &Lowerer::triangle_builtin},
        {"triu", &Lowerer::triangle_builtin},
        {"var", &Lowerer::variance_builtin},
        {"std", &Lowerer::variance_builtin},
        {"cumsum", &Lowerer::cumsum_builtin},
        {"take_along_axis", &Lowerer::take_along_axis_builtin},
        {"scatter_add", &Lowerer::scatter_builtin},
        {"index_add", &Lowerer::scatter_builtin},
        {"argsort", &Lowerer::argsort_builtin},
        {"einsum", &Lowerer::einsum_builtin},
        {"stack", &Lowerer::stack_builtin},
        {"repeat_interleave", &Lowerer::repeat_interleave_builtin},
        {"shape", &Lowerer::shape_builtin},
        {"log_sigmoid", &Lowerer::activation_builtin},
        {"binary_cross_entropy_with_logits", &Lowerer::bce_builtin},
        {"scaled_dot_product_attention", &Lowerer::attention_builtin},
    };
    for (int i = 0; i < kNumOps; ++i) {
      const Op op = Op(i);
      const std::string name(op_name(op));
      if (named(op)) t[name] = op_arity(op) == 1 ? &Lowerer::unary_builtin : &Lowerer::binary_builtin;
      if (is_collective(op)) t[name] = &Lowerer::collective_builtin;
    }
    return t;
  }();
  return table;
}

// Names from PyTorch and NumPy that gradc spells differently.
const std::map<std::string, std::string> kAliases = {{"mm", "matmul (or a @ b)"},
                                                     {"bmm", "matmul (or a @ b)"},
                                                     {"dot", "matmul (or a @ b)"},
                                                     {"cat", "concat([a, b], axis=0)"},
                                                     {"concatenate", "concat([a, b], axis=0)"},
                                                     {"view", "reshape"},
                                                     {"unsqueeze", "expand_dims"},
                                                     {"amax", "max"},
                                                     {"amin", "min"},
                                                     {"embedding", "take"},
                                                     {"index_select", "take"},
                                                     {"clip", "clamp(x, min=, max=)"},
                                                     {"swapaxes", "transpose"},
                                                     {"sigmoid_", "sigmoid"},
                                                     {"average", "mean"},
                                                     {"expand", "broadcast_to"},
                                                     {"full_like", "full(shape(x), v)"},
                                                     {"zeros_like", "zeros(shape(x))"},
                                                     {"ones_like", "ones(shape(x))"},
                                                     {"randn_like", "randn(shape(x), seed=)"},
                                                     {"rand_like", "rand(shape(x), seed=)"},
                                                     {"len", "shape(x)[0]"},
                                                     {"numel", "the product of shape(x)"},
                                                     {"arange", "iota"},
                                                     {"normal", "randn"},
                                                     {"uniform", "rand"},
                                                     {"rsqrt_", "rsqrt"},
                                                     {"detach", "stop_gradient"},
                                                     {"layernorm", "layer_norm"},
                                                     {"rmsnorm", "rms_norm"},
                                                     {"logsigmoid", "log_sigmoid"},
                                                     {"mse_loss", "mean(square(x - y))"},
                                                     {"l1_loss", "mean(abs(x - y))"},
                                                     {"cosine_similarity", "sum(normalize(a) * normalize(b), axis=-1)"},
                                                     {"nll_loss",
                                                      "cross_entropy of the logits (or -mean(take_along_axis(logp, "
                                                      "expand_dims(labels, axis=1), 1)))"},
                                                     {"linear", "x @ transpose(w) + b"},
                                                     {"bce_with_logits", "binary_cross_entropy_with_logits"}};

V Lowerer::builtin(const Expr& e) {
  const std::string& f = e.text;
  if (auto it = builtins().find(f); it != builtins().end()) {
    if (!kComposites.count(f)) return (this->*it->second)(e);
    // bf16 and f16 (docs/language.md, "Low precision"): a composite is one op. Its
    // operands of those types are taken as f32 copies (arg), its math runs in f32, and
    // its float result is rounded once to their type.
    const DType outer = composite_low_;
    composite_low_ = DType::F32;
    V r = (this->*it->second)(e);
    const DType low = composite_low_;
    composite_low_ = outer;
    if (low != DType::F32 && !r.is_lit() && dtype(r) == DType::F32) r = V{tensor(r, low, e.loc)};
    return r;
  }
  if (f == "input" || f == "output" || f == "world") user_error(e.loc, "'{}' cannot be called", f);
  unknown_function(e);
}

// ---- builtins ----------------------------------------------------------------
// Each builtin is a small function: it binds and checks its arguments, then builds its
// value (the composites' math is in composites.cpp). builtins() is the table from a
// name to its function, which calls and the did-you-mean suggestions read.

V Lowerer::unary_builtin(const Expr& e) {  // every NAMED unary op of ir/ops.def, f(x)
  const Op o = *op_by_name(e.text);
  Call c = bind_args(e, {"x"}, 1);
  V x = arg(c, "x");
  ValueId t = float_only(o) ? float_tensor(x, e.loc) : tensor(x, e.loc);  // others keep i32
  return op(o, {t}, e.loc);
}

V Lowerer::binary_builtin(const Expr& e) {  // every NAMED binary op of ir/ops.def: pow, maximum, minimum
  Call c = bind_args(e, {"a", "b"}, 2);
  V a = arg(c, "a");  // operands in order: a function's arguments are evaluated in no fixed order
  V b = arg(c, "b");
  return binary_op(*op_by_name(e.text), a, b, e.loc);
}

V Lowerer::where_builtin(const Expr& e) {
  Call c = bind_args(e, {"cond", "a", "b"}, 3);
  V cond = arg(c, "cond");
  V a = arg(c, "a");
  V b = arg(c, "b");
  DType dt = common(a, b);
  return op(Op::Where, {tensor(cond, e.loc), tensor(a, dt, e.loc), tensor(b, dt, e.loc)}, e.loc);
}

V Lowerer::reduction_builtin(const Expr& e) {  // sum, mean, max, min, logsumexp
  const std::string& f = e.text;
  Call c = bind_args(e, {"x", "axis", "keepdims"}, 1);
  V xv = arg(c, "x");
  ValueId x = (f == "mean" || f == "logsumexp") ? float_tensor(xv, e.loc) : tensor(xv, e.loc);
  const Shape s = g_.type(x).shape;
  const std::vector<int64_t> axes = axes_of(c, g_.type(x));
  const bool keep = keepdims(c);
  At b = at(e.loc);
  if (f == "logsumexp") return V{composite::logsumexp(b, x, axes, keep)};
  if (f == "mean") return V{composite::mean(b, x, axes, keep)};
  const Ex r = f == "max" ? reduce_max(b[x], axes) : f == "min" ? reduce_min(b[x], axes) : reduce_sum(b[x], axes);
  return V{composite::finish_reduce(b, b(r), s, axes, keep)};
}

V Lowerer::arg_builtin(const Expr& e) {  // argmax, argmin: the first index among ties
  Call c = bind_args(e, {"x", "axis", "keepdims"}, 1);
  ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "{}: needs an axis to search, got a scalar", e.text);
  const int axis = axis1(c, "axis", t, -1);
  At b = at(e.loc);
  return V{composite::arg_extremum(b, x, axis, keepdims(c), e.text == "argmax")};
}

V Lowerer::softmax_builtin(const Expr& e) {  // softmax, log_softmax, normalize
  const std::string& f = e.text;
  Call c = bind_args(
      e, f == "normalize" ? std::vector<std::string>{"x", "axis", "eps"} : std::vector<std::string>{"x", "axis"}, 1);
  ValueId x = float_tensor(arg(c, "x"), e.loc);
  const int axis = axis1(c, "axis", g_.type(x), -1);
  double eps = 1e-12;
  if (const Expr* ee = c.get("eps")) {
    V ev = expr(*ee);
    if (!ev.is_lit() || !(ev.num > 0)) user_error(ee->loc, "normalize: eps must be a constant > 0");
    eps = ev.num;
  }
  At b = at(e.loc);
  if (f == "log_softmax") return V{composite::log_softmax(b, x, axis)};
  if (f == "softmax") return V{composite::softmax(b, x, axis)};
  return V{composite::normalize(b, x, axis, eps)};
}

V Lowerer::cross_entropy_builtin(const Expr& e) {
  Call c = bind_args(e, {"logits", "labels", "ignore_index", "label_smoothing"}, 2);
  ValueId logits = float_tensor(arg(c, "logits"), e.loc);
  ValueId labels = targ(c, "labels");
  const Type lt = g_.type(logits);
  if (lt.rank() < 1) user_error(e.loc, "cross_entropy: logits must have a class axis, got {}", type_str(lt));
  Shape batch(lt.shape.begin(), lt.shape.end() - 1);
  if (g_.type(labels).shape != batch || g_.type(labels).dtype != DType::I32)
    user_error(c.loc_of("labels"), "cross_entropy: labels must be i32{} for logits {}, got {}", shape_str(batch),
               type_str(lt), type_str(g_.type(labels)));
  // PyTorch's; a label out of range that is not ignore_index is an error at run time.
  const int64_t ignore = c.get("ignore_index") ? static_int(*c.get("ignore_index"), "ignore_index") : -100;
  if (ignore != int32_t(ignore))  // compared with i32 labels: it must be one (else it wraps onto a class)
    user_error(c.loc_of("ignore_index"), "cross_entropy: ignore_index {} does not fit in i32 ({} to {})", ignore,
               INT32_MIN, INT32_MAX);
  const double smoothing = static_number(c, "label_smoothing", 0);
  if (!(smoothing >= 0 && smoothing <= 1))  // PyTorch's range
    user_error(c.loc_of("label_smoothing"), "cross_entropy: label_smoothing must be from 0 to 1, got {}", smoothing);
  Attrs ca;
  ca.set("n", Attr::of_int(lt.shape.back()));
  ca.set("ignore", Attr::of_int(ignore));
  labels = op(Op::CheckLabels, {labels}, e.loc, ca).id;
  At b = at(e.loc);
  return V{composite::cross_entropy(b, logits, labels, ignore, smoothing)};
}

V Lowerer::one_hot_builtin(const Expr& e) {
  Call c = bind_args(e, {"labels", "n"}, 2);
  int64_t n = static_int(*c.get("n"), "n");
  if (n < 0) user_error(c.loc_of("n"), "one_hot: n must not be negative");
  if (n > INT32_MAX) user_error(c.loc_of("n"), "one_hot: n={} is more than 2^31 - 1 (labels are i32)", n);
  ValueId labels = targ(c, "labels");
  if (g_.type(labels).dtype != DType::I32)
    user_error(e.loc, "one_hot: labels must be i32, got {}", type_str(g_.type(labels)));
  At b = at(e.loc);
  return V{composite::one_hot(b, labels, n)};
}

V Lowerer::cast_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "dtype"}, 2);
  std::string name = symbol(*c.get("dtype"), "dtype", "f32");
  DType dt;
  if (!parse_dtype(name, dt))
    user_error(c.loc_of("dtype"), "cast: unknown dtype '{}' (expected f32, f64, bf16, f16 or i32)", name);
  V x = arg(c, "x");
  if (x.is_lit() && !x.is_int_lit() && dt == DType::I32) return V::integer(saturate_i32(x.num), e.loc);
  if (!x.is_lit() && g_.type(x.id).dtype == declared(dt)) return V{copy_of(x.id, e.loc)};  // a value of its own
  return V{tensor(x, declared(dt), e.loc)};
}

V Lowerer::reshape_builtin(const Expr& e) {  // f == "reshape" || f == "broadcast_to"
  const std::string& f = e.text;
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "shape"}, 2);
  ValueId x = targ(c, "x");
  Shape s = static_shape(c, "shape");
  if (f == "reshape") {
    int64_t infer = -1;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != -1) continue;
      if (infer >= 0) user_error(c.loc_of("shape"), "reshape: only one dimension may be -1");
      infer = int64_t(i);
    }
    Shape rest = s;  // the dimensions given (saturating: they may be too large)
    if (infer >= 0) rest.erase(rest.begin() + infer);
    const int64_t known = num_elements(rest);
    if (infer >= 0 && known > 0 && g_.type(x).size() % known == 0) s[size_t(infer)] = g_.type(x).size() / known;
    if (num_elements(s) != g_.type(x).size() || (infer >= 0 && s[size_t(infer)] < 0))
      user_error(loc, "reshape: cannot reshape {} ({} elements) to {}", type_str(g_.type(x)), g_.type(x).size(),
                 shape_str(s));
  }
  Attrs a;
  a.set("shape", Attr::of_ints(s));
  return op(f == "reshape" ? Op::Reshape : Op::BroadcastTo, {x}, loc, a);
}

V Lowerer::transpose_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "perm"}, 1);
  ValueId x = targ(c, "x");
  std::vector<int64_t> perm;
  if (c.get("perm")) {
    perm = static_ints(*c.get("perm"), "perm");
    for (int64_t& p : perm)
      if (p < 0) p += g_.type(x).rank();
  } else {
    for (int d = g_.type(x).rank() - 1; d >= 0; --d) perm.push_back(d);
  }
  Attrs a;
  a.set("perm", Attr::of_ints(perm));
  return op(Op::Transpose, {x}, loc, a);
}

// concat's and stack's list of values, as tensors of their promoted dtype
std::vector<ValueId> Lowerer::value_list(const Call& c) {
  const Expr* list = c.get("xs");
  if (list->kind != Expr::List || list->args.empty())
    user_error(list->loc, "{}: expects a list of values, such as [a, b]", c.name);
  std::vector<V> vs;
  DType dt = DType::I32;
  for (const auto& x : list->args) {
    vs.push_back(expr(*x));
    dt = promote(dt, dtype(vs.back()));
  }
  std::vector<ValueId> ids;
  for (size_t i = 0; i < vs.size(); ++i) ids.push_back(tensor(vs[i], dt, list->args[i]->loc));
  return ids;
}

V Lowerer::concat_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"xs", "axis"}, 1);
  const std::vector<ValueId> ids = value_list(c);
  Attrs a;
  a.set("axis", Attr::of_int(axis1(c, "axis", g_.type(ids[0]), 0)));
  return op(Op::Concat, ids, loc, a);
}

V Lowerer::slice_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "axis", "start", "end"}, 1);
  ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  int axis = axis1(c, "axis", t, 0);
  int64_t dim = t.shape[size_t(axis)];
  auto bound = [&](const char* p, int64_t dflt) {
    if (!c.get(p)) return dflt;
    int64_t i = static_int(*c.get(p), p);
    if (i < 0) i += dim;
    if (i < 0 || i > dim)
      user_error(c.loc_of(p), "slice: {}={} is out of range for axis {} of {}", p, i, axis, type_str(t));
    return i;
  };
  std::vector<int64_t> starts(size_t(t.rank()), 0), ends(t.shape.begin(), t.shape.end());
  starts[size_t(axis)] = bound("start", 0);
  ends[size_t(axis)] = bound("end", dim);
  if (ends[size_t(axis)] < starts[size_t(axis)])
    user_error(loc, "slice: end {} is before start {}", ends[size_t(axis)], starts[size_t(axis)]);
  Attrs a;
  a.set("starts", Attr::of_ints(starts));
  a.set("ends", Attr::of_ints(ends));
  return op(Op::Slice, {x}, loc, a);
}

V Lowerer::expand_dims_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "axis"}, 2);
  ValueId x = targ(c, "x");
  Shape s = g_.type(x).shape;
  Type grown{g_.type(x).dtype, Shape(s.size() + 1, 1)};
  int axis = norm_axis(c.loc_of("axis"), "expand_dims", static_int(*c.get("axis"), "axis"), grown);
  s.insert(s.begin() + axis, 1);
  return V{at(loc).reshape(x, s)};
}

V Lowerer::squeeze_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "axis"}, 1);
  ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  std::vector<int64_t> axes;
  if (c.get("axis")) {
    axes = axes_of(c, t);
    for (int64_t a : axes)
      if (t.shape[size_t(a)] != 1)
        user_error(c.loc_of("axis"), "squeeze: axis {} of {} has size {}, not 1", a, type_str(t), t.shape[size_t(a)]);
  } else {
    for (int d = 0; d < t.rank(); ++d)
      if (t.shape[size_t(d)] == 1) axes.push_back(d);
  }
  Shape s;
  for (int d = 0; d < t.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) s.push_back(t.shape[size_t(d)]);
  return V{at(loc).reshape(x, s)};
}

V Lowerer::matmul_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"a", "b"}, 2);
  V a = arg(c, "a");
  V b = arg(c, "b");
  return matmul(a, b, loc);
}

// dtype= of a creation op (zeros, ones, full): f32 by default, as PyTorch's default dtype.
DType Lowerer::creation_dtype(const Call& c, const std::string& f) {
  const Expr* d = c.get("dtype");
  if (!d) return F();
  if (d->kind == Expr::Number && c.get("shape")->kind != Expr::List)  // zeros(4, 4): PyTorch's sizes as arguments
    user_error(d->loc, "{}: the shape is one list, such as {}([2, 3]{}), and dtype= a name, such as f32", f, f,
               f == "full" ? ", 1.5" : "");
  std::string name = symbol(*d, "dtype", "f32");
  DType dt;
  if (!parse_dtype(name, dt))
    user_error(c.loc_of("dtype"), "{}: unknown dtype '{}' (expected f32, f64, bf16, f16 or i32)", f, name);
  return declared(dt);
}

V Lowerer::filled_builtin(const Expr& e) {  // f == "zeros" || f == "ones"
  const std::string& f = e.text;
  const Loc loc = e.loc;
  Call c = bind_args(e, {"shape", "dtype"}, 1);
  return V{constant(Type{creation_dtype(c, f), static_shape(c, "shape")}, f == "ones" ? 1.0 : 0.0, loc)};
}

V Lowerer::full_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"shape", "value", "dtype"}, 2);
  if (!c.get("dtype")) return V{fill(static_shape(c, "shape"), arg(c, "value"), loc)};
  // with dtype=, the value converted to it as cast converts (an i32 truncates toward zero)
  const DType dt = creation_dtype(c, "full");
  const Shape s = static_shape(c, "shape");
  V v = arg(c, "value");
  if (v.is_lit()) return V{constant(Type{dt, s}, dt == DType::I32 ? double(saturate_i32(v.num)) : v.num, loc)};
  ValueId x = tensor(v, dt, loc);
  if (g_.type(x).rank() != 0) user_error(loc, "full: the value must be a scalar, got {}", type_str(g_.type(x)));
  Attrs a;
  a.set("shape", Attr::of_ints(s));
  return op(Op::BroadcastTo, {x}, loc, a);
}

V Lowerer::iota_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"n"}, 1);
  Attrs a;
  a.set("n", Attr::of_int(static_int(*c.get("n"), "n")));
  return op(Op::Iota, {}, loc, a);
}

V Lowerer::random_builtin(const Expr& e) {  // f == "randn" || f == "rand"
  const std::string& f = e.text;
  const Loc loc = e.loc;
  Call c = bind_args(e, {"shape", "seed"}, 1);
  Attrs a;
  a.set("shape", Attr::of_ints(static_shape(c, "shape")));
  V seed = c.get("seed") ? arg(c, "seed") : V::integer(0);
  if (dtype(seed) != DType::I32) user_error(c.loc_of("seed"), "{}: seed must be an i32 scalar", f);
  V r = op(f == "randn" ? Op::Randn : Op::Rand, {tensor(seed, c.loc_of("seed"))}, loc, a);
  return V{tensor(r, F(), loc)};  // f32 values, widened when the program is lowered in f64
}

V Lowerer::take_builtin(const Expr& e) {
  const Loc loc = e.loc;
  Call c = bind_args(e, {"x", "indices", "axis"}, 2);
  ValueId x = targ(c, "x");
  V ix = arg(c, "indices");
  if (dtype(ix) != DType::I32)
    user_error(c.loc_of("indices"), "take: indices must be i32, got {}", ix.is_lit() ? "a float" : type_str(type(ix)));
  Attrs a;
  a.set("axis", Attr::of_int(c.get("axis") ? static_int(*c.get("axis"), "axis") : 0));
  return op(Op::Take, {x, tensor(ix, c.loc_of("indices"))}, loc, a);
}

V Lowerer::activation_builtin(const Expr& e) {  // gelu, silu, softplus, log_sigmoid
  const std::string& f = e.text;
  Call c = bind_args(e,
                     f == "gelu"       ? std::vector<std::string>{"x", "approximate"}
                     : f == "softplus" ? std::vector<std::string>{"x", "beta", "threshold"}
                                       : std::vector<std::string>{"x"},
                     1);
  ValueId x = float_tensor(arg(c, "x"), e.loc);
  if (f == "softplus") {
    const double beta = static_number(c, "beta", 1), threshold = static_number(c, "threshold", 20);
    if (beta == 0) user_error(c.loc_of("beta"), "softplus: beta must not be 0");
    At b = at(e.loc);
    return V{b(composite::softplus(b[x], beta, threshold))};
  }
  At b = at(e.loc);
  if (f == "silu") return V{b(composite::silu(b[x]))};
  if (f == "log_sigmoid") return V{b(composite::log_sigmoid(b[x]))};
  std::string form = c.get("approximate") ? symbol(*c.get("approximate"), "approximate", "tanh") : "none";
  if (form != "none" && form != "tanh")
    user_error(c.loc_of("approximate"), "gelu: unknown approximate={} (expected none or tanh)", form);
  return V{b(composite::gelu(b[x], form == "tanh"))};
}

V Lowerer::dropout_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "p", "seed"}, 2);
  ValueId x = float_tensor(arg(c, "x"), e.loc);
  V p = arg(c, "p");
  if (!p.is_lit() || !(p.num >= 0 && p.num < 1))
    user_error(c.loc_of("p"), "dropout: p must be a constant with 0 <= p < 1");
  V seed = c.get("seed") ? arg(c, "seed") : V::integer(0);
  if (dtype(seed) != DType::I32) user_error(c.loc_of("seed"), "dropout: seed must be an i32 scalar");
  const ValueId sv = tensor(seed, c.loc_of("seed"));
  At b = at(e.loc);
  return V{composite::dropout(b, x, p.num, sv)};
}

V Lowerer::norm_builtin(const Expr& e) {  // layer_norm, rms_norm (no affine part, as PyTorch's functional forms)
  const std::string& f = e.text;
  Call c = bind_args(e, {"x", "axis", "eps"}, 1);
  ValueId x = float_tensor(arg(c, "x"), e.loc);
  const Type t = g_.type(x);
  const std::vector<int64_t> axes = c.get("axis") ? axes_of(c, t) : std::vector<int64_t>{norm_axis(e.loc, f, -1, t)};
  double eps = f == "layer_norm" ? 1e-5 : 1e-6;
  if (const Expr* ee = c.get("eps")) {
    V ev = expr(*ee);
    if (!ev.is_lit() || ev.num < 0) user_error(ee->loc, "{}: eps must be a constant, not negative", f);
    eps = ev.num;
  }
  At b = at(e.loc);
  return V{f == "layer_norm" ? composite::layer_norm(b, x, axes, eps) : composite::rms_norm(b, x, axes, eps)};
}

V Lowerer::logaddexp_builtin(const Expr& e) {  // log(exp(a) + exp(b)), as PyTorch's
  Call c = bind_args(e, {"a", "b"}, 2);
  V a = arg(c, "a");
  V bv = arg(c, "b");
  const DType dt = flt(common(a, bv));
  const ValueId x = tensor(a, dt, c.loc_of("a")), y = tensor(bv, dt, c.loc_of("b"));
  At b = at(e.loc);
  return V{b(composite::logaddexp(b[x], b[y]))};
}

// PyTorch's binary_cross_entropy_with_logits(x, target): the mean; target has x's shape.
V Lowerer::bce_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "target"}, 2);
  V xv = arg(c, "x");
  V tv = arg(c, "target");
  const DType dt = flt(common(xv, tv));
  const ValueId x = tensor(xv, dt, c.loc_of("x")), t = tensor(tv, dt, c.loc_of("target"));
  if (g_.type(t).shape != g_.type(x).shape)
    user_error(c.loc_of("target"),
               "binary_cross_entropy_with_logits: the target is {}, but x is {}: they have one shape, as "
               "PyTorch's (broadcast_to(t, shape(x)) if you mean it)",
               type_str(g_.type(t)), type_str(g_.type(x)));
  At b = at(e.loc);
  return V{composite::bce_with_logits(b, x, t)};
}

// PyTorch's scaled_dot_product_attention(query, key, value, attn_mask=, is_causal=,
// scale=), without dropout: an i32 mask is PyTorch's bool one (0: masked), a float
// mask is added to the scores.
V Lowerer::attention_builtin(const Expr& e) {
  const char* f = "scaled_dot_product_attention";
  Call c = bind_args(e, {"query", "key", "value", "attn_mask", "is_causal", "scale"}, 3);
  V qv = arg(c, "query"), kv = arg(c, "key"), vv = arg(c, "value");
  const DType dt = flt(promote(common(qv, kv), dtype(vv)));
  const ValueId q = tensor(qv, dt, c.loc_of("query")), k = tensor(kv, dt, c.loc_of("key")),
                v = tensor(vv, dt, c.loc_of("value"));
  const Shape qs = g_.type(q).shape, ks = g_.type(k).shape, vs = g_.type(v).shape;
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2)
    user_error(e.loc, "{}: query, key and value are [..., L, E], [..., S, E] and [..., S, Ev], got {}, {} and {}", f,
               type_str(g_.type(q)), type_str(g_.type(k)), type_str(g_.type(v)));
  if (qs.back() != ks.back() || ks[ks.size() - 2] != vs[vs.size() - 2])
    user_error(e.loc,
               "{}: the query's and key's last axes (E) and the key's and value's next to last (S) must agree: "
               "query {}, key {}, value {}",
               f, type_str(g_.type(q)), type_str(g_.type(k)), type_str(g_.type(v)));
  const int64_t L = qs[qs.size() - 2], S = ks[ks.size() - 2];
  const bool causal = c.get("is_causal") && static_int(*c.get("is_causal"), "is_causal") != 0;
  double scale = 1 / std::sqrt(double(qs.back()));
  if (const Expr* se = c.get("scale")) {
    V sv = expr(*se);
    if (!sv.is_lit()) user_error(se->loc, "{}: scale must be a constant", f);
    scale = sv.num;
  }
  At b = at(e.loc);
  ValueId bias = -1;
  if (const Expr* me = c.get("attn_mask")) {
    if (causal) user_error(me->loc, "{}: give attn_mask or is_causal=true, not both (as PyTorch)", f);
    V mv = arg(c, "attn_mask");
    ValueId m = tensor(mv, c.loc_of("attn_mask"));
    Shape scores = qs;
    scores.back() = S;
    if (!broadcasts_to(g_.type(m).shape, Shape{L, S}) && !broadcasts_to(g_.type(m).shape, scores))
      user_error(me->loc, "{}: attn_mask {} does not broadcast to the scores' [..., L, S] = {}", f,
                 type_str(g_.type(m)), shape_str(scores));
    bias = g_.type(m).dtype == DType::I32
               ? b(where(ne(b[m], Ex(0.0)), b[b.scalar(0, dt)], -std::numeric_limits<double>::infinity()))
               : m;
    if (g_.type(bias).dtype != dt) bias = b.cast(bias, dt);
  }
  if (causal) bias = composite::causal_bias(b, L, S, dt);
  return V{composite::attention(b, q, k, v, bias, scale)};
}

// min(max(x, min), max) as PyTorch's clamp (max wins where min > max), as wheres: the
// derivative is 1 on the closed interval and flows to a tensor bound where it is taken.
V Lowerer::clamp_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "min", "max"}, 1);
  if (!c.get("min") && !c.get("max")) user_error(e.loc, "clamp: give min=, max= or both");
  V xv = arg(c, "x");
  std::optional<V> lo, hi;
  if (c.get("min")) lo = arg(c, "min");
  if (c.get("max")) hi = arg(c, "max");
  DType dt = dtype(xv);
  for (const auto& bound : {lo, hi})
    if (bound) dt = promote(dt, common(xv, *bound));
  At b = at(e.loc);
  Ex r = b[tensor(xv, dt, c.loc_of("x"))];
  // where x or a bound is NaN, neither comparison holds: NaN, with no derivative (PyTorch's)
  if (lo) {
    const Ex m = b[tensor(*lo, dt, c.loc_of("min"))];
    r = where(r >= m, r, where(r < m, m, stop_gradient(r + m)));
  }
  if (hi) {
    const Ex m = b[tensor(*hi, dt, c.loc_of("max"))];
    r = where(r <= m, r, where(r > m, m, stop_gradient(r + m)));
  }
  return V{b(r)};
}

V Lowerer::shape_builtin(const Expr& e) {  // shape(x) where a tensor is wanted
  shape_of(e);                             // its own mistakes first
  user_error(e.loc,
             "shape(x) is a list of static integers: use it where a shape goes (zeros(shape(x)), "
             "reshape(y, shape(x))), or take one, shape(x)[0]");
}

V Lowerer::masked_fill_builtin(const Expr& e) {  // where(mask, value, x): x's shape and dtype
  Call c = bind_args(e, {"x", "mask", "value"}, 3);
  const ValueId x = targ(c, "x");
  const ValueId mask = targ(c, "mask");
  const Type t = g_.type(x);
  if (!broadcasts_to(g_.type(mask).shape, t.shape))
    user_error(c.loc_of("mask"), "masked_fill: the mask {} does not broadcast to x {}", type_str(g_.type(mask)),
               type_str(t));
  const ValueId v = tensor(arg(c, "value"), t.dtype, c.loc_of("value"));
  if (g_.type(v).rank() != 0)
    user_error(c.loc_of("value"), "masked_fill: value must be a scalar, got {}", type_str(g_.type(v)));
  return op(Op::Where, {mask, v, x}, e.loc);
}

V Lowerer::triangle_builtin(const Expr& e) {  // tril, triu
  Call c = bind_args(e, {"x", "k"}, 1);
  const ValueId x = targ(c, "x");
  if (g_.type(x).rank() < 2) user_error(e.loc, "{}: needs 2 axes or more, got {}", e.text, type_str(g_.type(x)));
  const int64_t k = c.get("k") ? static_int(*c.get("k"), "k") : 0;
  At b = at(e.loc);
  return V{composite::triangle(b, x, k, e.text == "triu")};
}

// var(x, axis, correction=1, keepdims): sum((x - mean)^2) / max(0, n - correction), as
// PyTorch's; std is its square root, whose derivative is taken as 0 where it is 0 (as
// PyTorch's std_backward), not 0 * inf.
V Lowerer::variance_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "axis", "correction", "keepdims"}, 1);
  const ValueId x = float_tensor(arg(c, "x"), e.loc);
  const Type t = g_.type(x);
  const std::vector<int64_t> axes = axes_of(c, t);
  const double correction = static_number(c, "correction", 1);
  double n = 1;
  for (int64_t a : axes) n *= double(t.shape[size_t(a)]);
  At b = at(e.loc);
  const Ex d = b[x] - reshape(b[composite::mean(b, x, axes, false)], composite::keep_shape(t.shape, axes));
  Ex v = reduce_sum(d * d, axes) / std::max(0.0, n - correction);
  if (e.text == "std") v = where(v > 0.0, sqrt(where(v > 0.0, v, 1.0)), v);
  return V{composite::finish_reduce(b, b(v), t.shape, axes, keepdims(c))};
}

V Lowerer::cumsum_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "axis"}, 2);
  const ValueId x = targ(c, "x");
  if (g_.type(x).rank() == 0) user_error(e.loc, "cumsum: needs an axis, got a scalar");
  const int axis = axis1(c, "axis", g_.type(x), 0);
  At b = at(e.loc);
  return V{composite::cumsum(b, x, axis)};
}

ValueId Lowerer::checked_indices(const Call& c, const char* param, int64_t n) {
  V ix = arg(c, param);
  if (dtype(ix) != DType::I32)
    user_error(c.loc_of(param), "{}: {} must be i32, got {}", c.name, param,
               ix.is_lit() ? "a float" : type_str(type(ix)));
  Attrs a;
  a.set("n", Attr::of_int(n));
  a.set("what", Attr::of_sym(c.name));
  return op(Op::CheckLabels, {tensor(ix, c.loc_of(param))}, c.loc_of(param), a).id;
}

namespace {
// Whether a and b have the same shape except along `axis`.
bool same_but(const Shape& a, const Shape& b, int axis) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d)
    if (int(d) != axis && a[d] != b[d]) return false;
  return true;
}
}  // namespace

V Lowerer::take_along_axis_builtin(const Expr& e) {  // PyTorch's gather(x, axis, indices)
  Call c = bind_args(e, {"x", "indices", "axis"}, 3);
  const ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "take_along_axis: cannot take from a scalar");
  const int axis = axis1(c, "axis", t, 0);
  const ValueId ix = checked_indices(c, "indices", t.shape[size_t(axis)]);
  if (!same_but(g_.type(ix).shape, t.shape, axis))
    user_error(c.loc_of("indices"), "take_along_axis: indices {} must have x's shape {} except along axis {}",
               type_str(g_.type(ix)), type_str(t), axis);
  At b = at(e.loc);
  return V{composite::take_along_axis(b, x, ix, axis)};
}

// scatter_add(x, axis, indices, src): indices has src's shape; index_add(x, axis, index,
// src): index is i32[k], src is x's shape with k along the axis. Both: src's shape is x's
// except along the axis, and repeated indices accumulate.
V Lowerer::scatter_builtin(const Expr& e) {
  const bool scatter = e.text == "scatter_add";
  const char* ix_name = scatter ? "indices" : "index";
  Call c = bind_args(e, {"x", "axis", ix_name, "src"}, 4);
  const ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "{}: cannot add into a scalar", e.text);
  const int axis = axis1(c, "axis", t, 0);
  const ValueId src = tensor(arg(c, "src"), t.dtype, c.loc_of("src"));
  const Type st = g_.type(src);
  if (!same_but(st.shape, t.shape, axis))
    user_error(c.loc_of("src"), "{}: src {} must have x's shape {} except along axis {}", e.text, type_str(st),
               type_str(t), axis);
  const ValueId ix = checked_indices(c, ix_name, t.shape[size_t(axis)]);
  const Shape want = scatter ? st.shape : Shape{st.shape[size_t(axis)]};
  if (g_.type(ix).shape != want)
    user_error(c.loc_of(ix_name), "{}: {} must be i32{}, {}, got {}", e.text, ix_name, shape_str(want),
               scatter ? "src's shape" : "one per slice of src along the axis", type_str(g_.type(ix)));
  At b = at(e.loc);
  return V{scatter ? composite::scatter_add(b, x, ix, src, axis) : composite::index_add(b, x, ix, src, axis)};
}

// sort(x, axis=-1, descending=false): values and i32 indices, stable; topk(x, k, axis=-1,
// largest=true): the k greatest (least) and their indices, ties to the lower index. The
// axis is moved last and back.
std::vector<V> Lowerer::sort_builtin(const Expr& e) {
  const bool topk = e.text == "topk";
  Call c = topk ? bind_args(e, {"x", "k", "axis", "largest"}, 2) : bind_args(e, {"x", "axis", "descending"}, 1);
  const ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "{}: needs an axis, got a scalar", e.text);
  const int axis = axis1(c, "axis", t, -1);
  const int64_t n = t.shape[size_t(axis)];
  int64_t m = n;
  if (topk) {
    m = static_int(*c.get("k"), "k");
    if (m < 0 || m > n) user_error(c.loc_of("k"), "topk: k={} is out of range 0..{} (the axis' size)", m, n);
  }
  const char* flag = topk ? "largest" : "descending";
  const bool descending = c.get(flag) ? static_int(*c.get(flag), flag) != 0 : topk;
  At b = at(e.loc);
  std::vector<int64_t> perm;
  for (int d = 0; d < t.rank(); ++d)
    if (d != axis) perm.push_back(d);
  perm.push_back(axis);
  std::vector<int64_t> back(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) back[size_t(perm[d])] = int64_t(d);
  if (axis == t.rank() - 1) {  // already last
    auto [values, indices] = composite::sort_last(b, x, m, descending);
    return {V{values}, V{indices}};
  }
  auto [values, indices] = composite::sort_last(b, b.transpose(x, perm), m, descending);
  return {V{b.transpose(values, back)}, V{b.transpose(indices, back)}};
}

// PyTorch's chunk(x, chunks, axis=0): pieces of ceil(n / chunks) along the axis, the
// last smaller, so fewer than `chunks` of them where they run out (7 in 4: 2, 2, 2, 1;
// 6 in 4: 2, 2, 2); an empty axis gives `chunks` empty pieces. split(x, sizes, axis=0):
// pieces of the sizes in a list, which add up to the axis, or of one size, the last
// smaller (PyTorch's; NumPy's and JAX's split take a number of pieces or split points).
std::vector<V> Lowerer::split_builtin(const Expr& e) {
  const bool chunk = e.text == "chunk";
  const char* what = chunk ? "chunks" : "sizes";
  Call c = bind_args(e, {"x", what, "axis"}, 2);
  const ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "{}: needs an axis, got a scalar", e.text);
  const int axis = axis1(c, "axis", t, 0);
  const int64_t n = t.shape[size_t(axis)];
  const Expr& arg = *c.get(what);
  std::vector<int64_t> sizes;
  if (!chunk && arg.kind == Expr::List) {
    sizes = static_ints(arg, "sizes");
    int64_t total = 0;
    for (int64_t k : sizes) {
      if (k < 0) user_error(arg.loc, "split: a size is negative ({})", k);
      total += k;
    }
    if (sizes.empty() || total != n)
      user_error(arg.loc,
                 "split: the sizes {} add up to {}, not axis {}'s {} (the sizes of the pieces, as PyTorch's "
                 "split; NumPy's takes the points to split at)",
                 fmt::format("[{}]", fmt::join(sizes, ", ")), total, axis, n);
  } else {
    const int64_t k = static_int(arg, what);
    if (k < 1) user_error(arg.loc, "{}: {}={} must be at least 1", e.text, chunk ? "chunks" : "the size", k);
    const int64_t piece = chunk ? (n + k - 1) / k : k;
    if (n == 0) sizes.assign(size_t(chunk ? k : 1), 0);
    for (int64_t at = 0; at < n; at += piece) sizes.push_back(std::min(piece, n - at));
  }
  std::vector<V> out;
  std::vector<int64_t> starts(size_t(t.rank()), 0), ends(t.shape.begin(), t.shape.end());
  At b = at(e.loc);
  for (const int64_t k : sizes) {
    ends[size_t(axis)] = starts[size_t(axis)] + k;
    out.push_back(V{b.slice(x, starts, ends)});
    starts[size_t(axis)] = ends[size_t(axis)];
  }
  return out;
}

// stack(xs, axis=0): concat of the values, each with a new axis of 1 there (same shapes)
V Lowerer::stack_builtin(const Expr& e) {
  Call c = bind_args(e, {"xs", "axis"}, 1);
  std::vector<ValueId> ids = value_list(c);
  const Shape s = g_.type(ids[0]).shape;
  for (size_t i = 1; i < ids.size(); ++i)
    if (g_.type(ids[i]).shape != s)
      user_error(c.get("xs")->args[i]->loc, "stack: every value must have the first one's shape {}, got {}",
                 shape_str(s), shape_str(g_.type(ids[i]).shape));
  const Type grown{g_.type(ids[0]).dtype, Shape(s.size() + 1, 1)};
  const int axis = c.get("axis") ? norm_axis(c.loc_of("axis"), "stack", static_int(*c.get("axis"), "axis"), grown) : 0;
  Shape one = s;
  one.insert(one.begin() + axis, 1);
  At b = at(e.loc);
  for (ValueId& id : ids) id = b.reshape(id, one);
  if (ids.size() == 1) return V{ids[0]};
  Attrs a;
  a.set("axis", Attr::of_int(axis));
  return op(Op::Concat, ids, e.loc, a);
}

// repeat_interleave(x, repeats, axis): each element `repeats` times in a row along the
// axis (PyTorch's, with an int and an axis): [a, b] -> [a, a, b, b]
V Lowerer::repeat_interleave_builtin(const Expr& e) {
  Call c = bind_args(e, {"x", "repeats", "axis"}, 3);
  const ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  if (t.rank() == 0) user_error(e.loc, "repeat_interleave: needs an axis, got a scalar");
  const int axis = axis1(c, "axis", t, 0);
  const int64_t k = static_int(*c.get("repeats"), "repeats");
  if (k < 0) user_error(c.loc_of("repeats"), "repeat_interleave: repeats={} is negative", k);
  Shape one = t.shape, many = t.shape, out = t.shape;
  one.insert(one.begin() + axis + 1, 1);
  many.insert(many.begin() + axis + 1, k);
  out[size_t(axis)] *= k;
  At b = at(e.loc);
  return V{b.reshape(b.broadcast(b.reshape(x, one), many), out)};
}

V Lowerer::argsort_builtin(const Expr& e) {
  return sort_builtin(e)[1];  // its indices
}

V Lowerer::einsum_builtin(const Expr& e) {
  if (e.args.empty() || e.args[0]->kind != Expr::String)
    user_error(e.loc, "einsum: the first argument is the equation, a string such as \"bqd,bkd->bqk\"");
  if (!e.kwargs.empty()) user_error(e.kwargs[0].loc, "einsum: takes no named arguments");
  if (e.args.size() < 2) user_error(e.loc, "einsum: needs an operand after the equation");
  std::vector<V> vs;  // the operands meet in their promoted dtype, as matmul's
  for (size_t i = 1; i < e.args.size(); ++i) vs.push_back(expr(*e.args[i]));
  DType dt = dtype(vs[0]);
  for (const V& v : vs) dt = promote(dt, dtype(v));
  std::vector<ValueId> xs;
  for (size_t i = 0; i < vs.size(); ++i) xs.push_back(tensor(vs[i], dt, e.args[i + 1]->loc));
  return V{einsum(e.args[0]->text, xs, e.args[0]->loc)};
}

// einsum as transposes, reshapes, sums and (batched) matmuls, operands contracted left
// to right (as torch.einsum without opt_einsum). In one contraction the letters of both
// operands and its result are the batch, those of both and not the result are
// contracted, the others are one operand's own (summed first when the result has none).
ValueId Lowerer::einsum(const std::string& eq, const std::vector<ValueId>& xs, Loc loc) {
  std::string spec;
  for (char ch : eq)
    if (ch != ' ') spec += ch;
  const size_t arrow = spec.find("->");
  std::vector<std::string> ins;
  const std::string lhs = spec.substr(0, arrow);
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    ins.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (ins.size() != xs.size())
    user_error(loc, "einsum: \"{}\" names {} operand{}, but {} {} given", eq, ins.size(), ins.size() == 1 ? "" : "s",
               xs.size(), xs.size() == 1 ? "is" : "are");
  std::map<char, int64_t> size;
  std::map<char, int> uses;
  for (size_t i = 0; i < ins.size(); ++i) {
    const Type& t = g_.type(xs[i]);
    if (t.dtype != g_.type(xs[0]).dtype)
      user_error(loc, "einsum: the operands' dtypes differ ({} and {})", dtype_name(g_.type(xs[0]).dtype),
                 dtype_name(t.dtype));
    for (char ch : ins[i]) {
      if (ch == '.') user_error(loc, "einsum: \"...\" is not supported; name every axis with a letter");
      if (!std::isalpha(static_cast<unsigned char>(ch)))
        user_error(loc, "einsum: '{}' in \"{}\" is not a letter", ch, eq);
      if (std::count(ins[i].begin(), ins[i].end(), ch) > 1)
        user_error(loc, "einsum: '{}' is repeated in operand {} (\"{}\"): diagonals are not supported", ch, i + 1,
                   ins[i]);
    }
    if (int(ins[i].size()) != t.rank())
      user_error(loc, "einsum: operand {} is {}, but \"{}\" names {} axes", i + 1, type_str(t), ins[i], ins[i].size());
    for (size_t d = 0; d < ins[i].size(); ++d) {
      const char ch = ins[i][d];
      auto [it, fresh] = size.emplace(ch, t.shape[d]);
      if (!fresh && it->second != t.shape[d])
        user_error(loc, "einsum: '{}' is {} in one operand and {} in another", ch, it->second, t.shape[d]);
      ++uses[ch];
    }
  }
  std::string out;
  if (arrow == std::string::npos) {  // NumPy's implicit output: the letters used once, in order
    for (const auto& [ch, k] : uses)
      if (k == 1) out += ch;
  } else {
    out = spec.substr(arrow + 2);
    for (char ch : out) {
      if (!size.count(ch)) user_error(loc, "einsum: the output's '{}' is in no operand", ch);
      if (std::count(out.begin(), out.end(), ch) > 1) user_error(loc, "einsum: the output names '{}' twice", ch);
    }
  }
  At b = at(loc);
  auto has = [](const std::string& s, char ch) { return s.find(ch) != std::string::npos; };
  auto dims = [&](const std::string& letters) {
    Shape s;
    for (char ch : letters) s.push_back(size[ch]);
    return s;
  };
  auto permute = [&](ValueId x, const std::string& have, const std::string& want) {
    if (have == want) return x;  // no copy: a matmul reads its operands where they are
    std::vector<int64_t> perm;
    for (char ch : want) perm.push_back(int64_t(have.find(ch)));
    return b.transpose(x, perm);
  };
  // x (letters `have`) with the letters not in `keep` summed out
  auto sum_out = [&](ValueId x, std::string& have, const std::string& keep) {
    std::vector<int64_t> axes;
    std::string kept;
    for (size_t d = 0; d < have.size(); ++d) {
      if (has(keep, have[d]))
        kept += have[d];
      else
        axes.push_back(int64_t(d));
    }
    have = kept;
    return axes.empty() ? x : b.reduce_sum(x, axes);
  };
  auto count = [&](const std::string& letters) { return num_elements(dims(letters)); };
  // x (letters `have`) as a [batch, rows, cols] matrix ([rows, cols] without batch
  // letters): a view where `have` is in that order or has rows and cols swapped (the
  // matmul folds a transpose of its last two axes into the BLAS call), else a copy.
  auto matrix = [&](ValueId x, const std::string& have, const std::string& batch, const std::string& rows,
                    const std::string& cols) {
    auto shape = [&](const std::string& r, const std::string& c) {
      Shape s = {count(r), count(c)};
      if (!batch.empty()) s.insert(s.begin(), count(batch));
      return s;
    };
    if (have != batch + rows + cols && have == batch + cols + rows) {
      std::vector<int64_t> perm;
      for (size_t d = 0; d < shape(rows, cols).size(); ++d) perm.push_back(int64_t(d));
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      return b.transpose(b.reshape(x, shape(cols, rows)), perm);
    }
    return b.reshape(permute(x, have, batch + rows + cols), shape(rows, cols));
  };
  // a (letters la) and c (lc) contracted to the letters `res`
  auto contract = [&](ValueId a, std::string la, ValueId c, std::string lc, const std::string& res) {
    a = sum_out(a, la, res + lc);
    c = sum_out(c, lc, res + la);
    std::string batch, left, right, inner;
    for (char ch : res) (has(la, ch) && has(lc, ch) ? batch : has(la, ch) ? left : right) += ch;
    if (res != batch + left + right && res == batch + right + left) {  // c a, whose result is in order
      std::swap(a, c);
      std::swap(la, lc);
      std::swap(left, right);
    }
    for (char ch : la)
      if (!has(res, ch)) inner += ch;
    const ValueId r = b.emit(Op::Matmul, {matrix(a, la, batch, left, inner), matrix(c, lc, batch, inner, right)});
    return permute(b.reshape(r, dims(batch + left + right)), batch + left + right, res);
  };
  std::string have = ins[0];
  ValueId cur = xs[0];
  if (xs.size() == 1) {
    cur = sum_out(cur, have, out);
    return permute(cur, have, out);
  }
  for (size_t i = 1; i < xs.size(); ++i) {
    std::string res = out;  // what the later operands or the output still need, in order of appearance
    if (i + 1 < xs.size()) {
      res.clear();
      for (char ch : have + ins[i]) {
        bool later = has(out, ch);
        for (size_t j = i + 1; j < xs.size(); ++j) later = later || has(ins[j], ch);
        if (later && !has(res, ch)) res += ch;
      }
    }
    cur = contract(cur, have, xs[i], ins[i], res);
    have = res;
  }
  return cur;
}

// rank(A): this rank's index along axis A (i32, varying along A only); size(A): A's size, a static integer.
V Lowerer::mesh_builtin(const Expr& e) {
  const std::string& f = e.text;
  if (e.args.size() != 1 || !e.kwargs.empty() || e.args[0]->kind != Expr::Name)
    user_error(e.loc, "{}: takes one axis name, such as {}(dp) (the mesh's axes: {}){}", f, f, axes_list(g_),
               f == "rank" ? "; the flat rank is rank" : "");
  const Expr& a = *e.args[0];
  const Attr over = axes_attr({{a.text, a.loc}}, f.c_str());
  if (f == "size") return V::integer(axis_size(g_, axis_index(g_, a.text)));
  Attrs attrs;
  attrs.set("over", over);
  return op(Op::Rank, {}, e.loc, attrs);
}

V Lowerer::collective_builtin(const Expr& e) {  // every collective, by its op's name
  const std::string& f = e.text;
  const Loc loc = e.loc;
  if (in_default_) user_error(loc, "{}: an input's default value cannot use collectives", f);
  // PyTorch's torch.gather(x, dim, index) and x.scatter_add(dim, index, src) are local
  // ops, gradc's gather and scatter collectives: a tensor where the collective has its
  // axis, or PyTorch's names, say which op is which
  if (f == "gather" || f == "scatter") {
    const bool torch_names = std::any_of(e.kwargs.begin(), e.kwargs.end(), [](const ast::KwArg& k) {
      return k.name == "dim" || k.name == "index" || k.name == "src";
    });
    if (torch_names || (e.args.size() >= 3 && !expr(*e.args[2]).is_int_lit()))  // (a literal: no nodes)
      user_error(loc, "{}",
                 f == "gather" ? "gather: gradc's gather is the collective (every rank's x gathered on the root: "
                                 "gather(x, root, axis)); PyTorch's torch.gather(x, dim, index) is "
                                 "take_along_axis(x, index, axis=dim)"
                               : "scatter: gradc's scatter is the collective (the root's x split among the ranks: "
                                 "scatter(x, root, axis)); PyTorch's x.scatter_add(dim, index, src) is "
                                 "scatter_add(x, dim, index, src)");
  }
  const Op o = *op_by_name(f);
  std::vector<std::string> params = {"x"};  // then its own (ir/collectives.h), then over
  for (const std::string& p : collective_rules()[o].params) params.push_back(p);
  params.push_back("over");
  const bool reducing = has_param(o, "op");
  if (reducing) params.push_back("accum");
  Call c = bind_args(e, params, 1);
  ValueId x = targ(c, "x");
  const Type t = g_.type(x);
  Attrs a;
  int group = g_.world;  // the ranks of each group
  if (const Expr* v = c.get("over")) {
    a.set("over", over_attr(*v, f.c_str()));
    Node probe;
    probe.op = o;
    probe.attrs = a;
    group = group_size(g_, probe);
  }
  for (const std::string& p : params) {
    if (p == "x" || p == "over") continue;
    const Expr* v = c.get(p);
    if (p == "accum") {  // how a reduction of bf16 or f16 values sums (docs/language.md, Low precision)
      const std::string how = v ? symbol(*v, "accum", "f32") : "f32";
      if (how != "f32" && how != "same") user_error(c.loc_of(p), "{}: accum={} (expected f32 or same)", f, how);
      if (v && !is_low_precision(t.dtype) && !f64_)  // verify's widened program: the f64 sum
        user_error(c.loc_of(p), "{}: accum= chooses how bf16 and f16 values are summed, and x is {}", f, type_str(t));
      if (is_low_precision(t.dtype)) a.set("accum", Attr::of_sym(how));
      continue;
    }
    if (p == "op") {
      std::string r = v ? symbol(*v, "op", "sum") : "sum";
      if (!reduction_by_name(r))
        user_error(c.loc_of(p), "{}: unknown reduction op={} (expected sum, avg, prod, max or min)", f, r);
      a.set("op", Attr::of_sym(r));
    } else if (p == "root") {
      a.set("root", Attr::of_int(v ? static_int(*v, "root") : 0));
    } else if (is_axis_param(p)) {
      a.set(p, Attr::of_int(axis1(c, p.c_str(), t, 0)));
    }
  }
  if (has_param(o, "pairs")) {  // pairs=, or shift= (1 by default) as the pairs it makes
    if (c.get("shift") && c.get("pairs")) user_error(loc, "{}: give shift or pairs, not both", f);
    std::vector<std::vector<int64_t>> pairs;
    if (const Expr* pe = c.get("pairs")) {
      if (pe->kind != Expr::List) user_error(pe->loc, "{}: pairs must be a list such as [[0, 1], [1, 0]]", f);
      for (const auto& p : pe->args) {
        if (p->kind != Expr::List || p->args.size() != 2) user_error(p->loc, "{}: each pair must be [src, dst]", f);
        pairs.push_back(static_ints(*p, "a rank"));
      }
    } else {
      int64_t shift = c.get("shift") ? static_int(*c.get("shift"), "shift") : 1;
      pairs = shift_pairs(shift, group);
    }
    a.set("pairs", pairs_attr(pairs));
  }
  return op(o, {x}, loc, a);
}

void Lowerer::unknown_function(const Expr& e) {
  const std::string& f = e.text;
  if (auto a = kAliases.find(f); a != kAliases.end())
    user_error(e.loc, "unknown function '{}': gradc writes it as {}", f, a->second);
  // The nearest known names: within a third of the name's length in edits. A collective
  // only for a typo of its name (two edits): scatter_add is no misspelt scatter, and
  // a collective offered for a local op would move data between ranks.
  // the builtins with several values, and builtins()
  std::vector<std::string> known = {"grad", "sort", "topk", "chunk", "split"};
  for (const auto& [k, fn] : builtins()) {
    const std::optional<Op> op = op_by_name(k);
    if (!op || !is_collective(*op) || edit_distance(f, k) <= 2) known.push_back(k);
  }
  for (const auto& [k, fn] : prog_.funcs) known.push_back(k);
  size_t best = std::max<size_t>(1, f.size() / 3) + 1;
  std::vector<std::string> near;
  for (const std::string& k : known) {
    size_t d = edit_distance(f, k);
    if (d < best) {
      best = d;
      near.clear();
    }
    if (d == best) near.push_back(k);
  }
  std::sort(near.begin(), near.end());
  if (near.empty()) user_error(e.loc, "unknown function '{}'", f);
  std::vector<std::string> quoted;
  for (const std::string& n : near) quoted.push_back("'" + n + "'");
  user_error(e.loc, "unknown function '{}'; did you mean {}?", f, fmt::join(quoted, " or "));
}

}  // namespace

std::string method_advice(const std::string& attr) {
  if (attr == "sort" || attr == "topk") return fmt::format("call a function instead, such as {}(x)", attr);
  // size is the mesh's (size(tp)); a tensor's sizes are shape(x)
  if (attr == "size" || attr == "dim" || attr == "ndim")
    return "write shape(x), a list of static integers, or shape(x)[0] for one axis";
  if (auto a = kAliases.find(attr); a != kAliases.end()) return "call gradc's " + a->second + " instead";
  const bool known = builtins().count(attr) || attr == "grad";
  if (known) return fmt::format("call a function instead, such as {}(x)", attr);
  return fmt::format("and gradc has no function '{}'", attr);
}

int declared_world(const ast::Program& p) {
  int world = 0;
  for (const ast::Stmt& s : p.stmts) {
    if (s.kind != ast::Stmt::World) continue;
    if (world) user_error(s.loc, "world is declared twice");
    const Expr& e = *s.value;
    if (e.kind != Expr::Number || !e.is_int) user_error(e.loc, "world must be a positive integer literal");
    if (e.ival < 1 || e.ival > kMaxWorld)
      user_error(e.loc, "world must be between 1 and {}, got {}", kMaxWorld, e.ival);
    world = int(e.ival);
  }
  return world;
}

Mesh declared_mesh(const ast::Program& p) {
  Mesh m;
  const ast::Stmt* decl = nullptr;
  for (const ast::Stmt& s : p.stmts) {
    if (s.kind == ast::Stmt::World && decl) user_error(s.loc, "a program declares a world or a mesh, not both");
    if (s.kind != ast::Stmt::Mesh) continue;
    if (decl) user_error(s.loc, "{} is declared twice", decl->kind == ast::Stmt::Mesh ? "the mesh" : "world");
    decl = &s;
    int64_t world = 1;
    for (size_t i = 0; i < s.names.size(); ++i) {
      const ast::Name& a = s.names[i];
      const Expr& e = *s.sizes[i];
      if (a.text == "world" || a.text == "rank") user_error(a.loc, "'{}' is built in and cannot name an axis", a.text);
      for (const std::string& seen : m.axes)
        if (seen == a.text) user_error(a.loc, "axis '{}' is declared twice", a.text);
      if (e.kind != Expr::Number || !e.is_int)
        user_error(e.loc, "axis {}: its size must be an integer literal", a.text);
      if (e.ival < 1) user_error(e.loc, "axis {}: its size must be at least 1, got {}", a.text, e.ival);
      if (int(m.axes.size()) == kMaxAxes) user_error(a.loc, "a mesh has at most {} axes", kMaxAxes);
      // world * size > kMaxWorld, without the product (which a size near 2^63 overflows)
      if (e.ival > kMaxWorld / world) user_error(e.loc, "a mesh has at most {} ranks", kMaxWorld);
      world *= e.ival;
      m.axes.push_back(a.text);
      m.sizes.push_back(int(e.ival));
    }
  }
  for (const ast::Stmt& s : p.stmts)
    if (decl && s.kind == ast::Stmt::World) user_error(s.loc, "a program declares a world or a mesh, not both");
  return m;
}

Graph lower_program(const ast::Program& p, const LowerOptions& opt) {
  const std::vector<std::string> sizes = declared_sizes(p);
  for (const auto& [name, value] : opt.sizes) {
    if (std::find(sizes.begin(), sizes.end(), name) == sizes.end())
      throw UserError(Loc{}, sizes.empty()
                                 ? fmt::format("--size {}: this program declares no size", name)
                                 : fmt::format("--size {}: this program's sizes are {}", name, fmt::join(sizes, ", ")));
    if (value < 1 || value > kMaxSize)
      throw UserError(Loc{}, fmt::format("--size {}: must be from 1 to {}, got {}", name, kMaxSize, value));
  }
  Mesh mesh = declared_mesh(p);
  if (!mesh.axes.empty()) {
    if (opt.ranks > 0)
      throw UserError(
          Loc{}, fmt::format("--ranks: this program declares a mesh; set its sizes with --mesh={}", mesh_option(mesh)));
    if (!opt.mesh.empty()) {
      std::vector<std::string> names;
      for (const auto& [name, size] : opt.mesh) names.push_back(name);
      if (names != mesh.axes)
        throw UserError(Loc{}, fmt::format("--mesh names the axes {}, but the program declares {} (in that order)",
                                           fmt::join(names, ", "), fmt::join(mesh.axes, ", ")));
      int64_t world = 1;
      for (size_t k = 0; k < opt.mesh.size(); ++k) {
        mesh.sizes[k] = opt.mesh[k].second;
        world *= mesh.sizes[k];
      }
      if (world > kMaxWorld) throw UserError(Loc{}, fmt::format("--mesh: at most {} ranks", kMaxWorld));
    }
    int world = 1;
    for (int n : mesh.sizes) world *= n;
    return Lowerer(p, world, mesh, opt).run();
  }
  if (!opt.mesh.empty())
    throw UserError(Loc{}, "--mesh: this program declares no mesh (use --ranks, or declare `mesh dp=2, tp=2`)");
  int world = declared_world(p);
  if (opt.ranks > 0) world = opt.ranks;
  if (world == 0) world = 1;
  return Lowerer(p, world, mesh, opt).run();
}

std::vector<std::string> declared_sizes(const ast::Program& p) {
  std::vector<std::string> names;
  for (const ast::Stmt& s : p.stmts)
    if (s.kind == ast::Stmt::Size) names.push_back(s.names[0].text);
  return names;
}

}  // namespace gradc
