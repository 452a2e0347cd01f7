// The IR: a graph of single-result nodes in topological order (SSA: a value
// is the id of the node that defines it). One generic node shape serves every
// op: operands, named attributes, a static result type, a source location.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/op.h"
#include "ir/types.h"
#include "support/diag.h"
#include "support/intern.h"

namespace gradc {

inline constexpr int kMaxWorld = 4096;  // the most ranks a program may have

using ValueId = int32_t;

// An attribute value: an integer, a float, a string, a bare symbol (op=sum) or a list.
struct Attr {
  enum Kind : uint8_t { Int, Float, Str, Sym, List } kind = Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<Attr> list;

  static Attr of_int(int64_t v) {
    Attr a;
    a.kind = Int;
    a.i = v;
    return a;
  }
  static Attr of_float(double v) {
    Attr a;
    a.kind = Float;
    a.f = v;
    return a;
  }
  static Attr of_str(std::string v) {
    Attr a;
    a.kind = Str;
    a.s = std::move(v);
    return a;
  }
  static Attr of_sym(std::string v) {
    Attr a;
    a.kind = Sym;
    a.s = std::move(v);
    return a;
  }
  static Attr of_ints(const std::vector<int64_t>& v);
  bool operator==(const Attr&) const = default;
  double number() const { return kind == Float ? f : double(i); }
};

// Attributes sorted by key, so printing and comparing are deterministic.
struct Attrs {
  std::vector<std::pair<std::string, Attr>> items;
  void set(const std::string& key, Attr v);
  const Attr* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  bool operator==(const Attrs&) const = default;
};

// A node's attributes: a handle to an interned set (support/intern.h), so copying a
// node copies a pointer, and two nodes' attributes are equal as printed (floats
// bit for bit: -0.0 is not 0.0, a NaN equals the same NaN) exactly when their
// handles are. Most sets recur (axes=[0], op=sum, a constant used on every
// line): a 100k-statement program holds a few hundred.
struct AttrsTraits {
  static uint64_t hash(const Attrs& a);
  static bool same(const Attrs& a, const Attrs& b);
  static bool none(const Attrs& a) { return a.items.empty(); }
};
class AttrsRef : public Interned<Attrs, AttrsTraits> {
 public:
  using Interned::Interned;
  const Attr* find(std::string_view key) const { return (*this)->find(key); }
  bool has(std::string_view key) const { return find(key) != nullptr; }
  void set(const std::string& key, Attr v);  // interns the set with key = v
};

// A value's readable name hint: a handle to an interned string (support/intern.h),
// so a node holds a pointer instead of a string of its own.
struct NameTraits {
  static uint64_t hash(const std::string& s) { return std::hash<std::string>()(s); }
  static bool same(const std::string& a, const std::string& b) { return a == b; }
  static bool none(const std::string& s) { return s.empty(); }
};
class Name : public Interned<std::string, NameTraits> {
 public:
  using Interned::Interned;
  Name(std::string_view s) : Interned(std::string(s)) {}  // NOLINT: implicit, as the string it stands for
  Name(const char* s) : Interned(std::string(s)) {}       // NOLINT
  const std::string& str() const { return *this; }
  bool empty() const { return str().empty(); }
  void clear() { *this = Name(); }
};

// 64 bytes, one cache line: the passes stream the node array, and at 100k
// statements it does not fit in the caches.
struct Node {
  Op op{};
  Rep rep = Rep::Unknown;  // set by the replication analysis
  bool backward = false;   // made by the autodiff pass
  Op fwd_op{};             // for a backward node: the forward op whose gradient it computes
  ValueId grad_of = -1;    // for a gradient value: the forward value it is the gradient of
  std::vector<ValueId> args;
  AttrsRef attrs;
  TypeRef type;
  Loc loc;
  Name name;  // a readable name hint (the source name), may be empty

  // Typed attribute access; a missing or ill-typed attribute (possible only in
  // textual IR) is a UserError at the node's location.
  int64_t attr_int(std::string_view key) const;
  double attr_num(std::string_view key) const;
  const std::string& attr_sym(std::string_view key) const;
  std::vector<int64_t> attr_ints(std::string_view key) const;
  std::vector<std::vector<int64_t>> attr_int_lists(std::string_view key) const;
};
static_assert(sizeof(Node) == 64 || sizeof(void*) != 8);
// A reduction's kind: a collective's `op` attribute (op=sum, ...), a closed set.
enum class Reduction : uint8_t { Sum, Avg, Prod, Max, Min };
const char* reduction_name(Reduction r);  // "sum"
std::optional<Reduction> reduction_by_name(std::string_view s);
Reduction reduction_of(const Node& n);  // its `op` attribute; sum where it has none

// What a grad differentiates (docs/language.md section 6): its `mode` attribute.
enum class GradMode : uint8_t { Sum, Mean, Global };
const char* grad_mode_name(GradMode m);  // "sum"
std::optional<GradMode> grad_mode_by_name(std::string_view s);
GradMode grad_mode_of(const Node& n);  // an unknown mode is a UserError at the node

// The op as a run-time error names it: "log", or "in the gradient of log: mul".
std::string checked_op_name(const Node& n);

// A program's mesh (docs/language.md section 8): named axes whose sizes multiply to the
// world; ranks numbered row-major over them. Empty: no mesh, one axis "world".
struct Mesh {
  std::vector<std::string> axes;
  std::vector<int> sizes;
  bool operator==(const Mesh&) const = default;
};
inline constexpr int kMaxAxes = 7;  // Rep's bits

struct Graph {
  int world = 1;  // the number of ranks this graph is specialised for, 1 to kMaxWorld
  Mesh mesh;      // its axes (ir/mesh.h reads them)
  // The program's size parameters (`size B = 8`), in order, with the values this
  // graph is specialised for.
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::vector<Node> nodes;
  std::vector<std::pair<std::string, ValueId>> outputs;

  const Node& operator[](ValueId v) const { return nodes[size_t(v)]; }
  Node& operator[](ValueId v) { return nodes[size_t(v)]; }
  const Type& type(ValueId v) const { return nodes[size_t(v)].type; }
  ValueId append(Node n) {
    nodes.push_back(std::move(n));
    return ValueId(nodes.size() - 1);
  }
  int size() const { return int(nodes.size()); }
};
// Checks that operands are defined before use, that every node's declared type
// is what its shape rule gives, and that outputs name existing values.
void verify(const Graph& g);

// A constant node holding `value` in every element of `t` (an integer attribute for i32).
Node const_node(const Type& t, double value, Loc loc);

// Adds a node and computes its result type with the op's shape rule (which
// throws UserError at `loc` when the operands do not fit).
ValueId emit(Graph& g, Op op, std::vector<ValueId> args, Attrs attrs, Loc loc, Name name = {});

}  // namespace gradc
