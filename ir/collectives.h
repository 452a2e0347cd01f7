// Collectives as linear maps: the one description of each collective that the
// autodiff pass derives its adjoints from and that `gradc prove` checks.
//
// With op=sum, every collective of docs/language.md section 5 adds whole blocks of
// some ranks' inputs into blocks of some ranks' outputs, element for element.
// Its routing is one Term: "for every source rank k and destination rank r in
// the domain, the `src` selection of rank k's input is added into the `dst`
// selection of rank r's output". A selection is the whole value, or block b of
// N equal blocks along an axis, where b is the rank on the *other* side (k for a
// destination block, r for a source block). The domain is every (k, r) pair,
// pairs with k or r fixed to the root, or an explicit list of pairs.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"

namespace gradc {

struct Side {
  int64_t root = -1;  // -1: the rank ranges over 0..N-1; else fixed to this rank
  int64_t axis = -1;  // -1: the whole value; else the block along this axis indexed by the other side's rank
  bool operator==(const Side&) const = default;
};

struct Term {
  Side src, dst;
  bool has_pairs = false;                   // the domain is `pairs` ([src, dst]) instead of all ranks
  std::vector<std::vector<int64_t>> pairs;  // sorted
  bool operator==(const Term&) const = default;
};

// A collective's facts that more than one layer reads, in its block in
// ops/collective.cpp (with its shape rule, replication, kernel, bytes and call):
struct CollectiveRule {
  // Its keyword parameters after the operand, in order (`over` follows them all): the
  // frontend binds them, `gradc prove` makes its instances from them. Each is one of
  // "op" (a reduction), "axis", "split_axis", "concat_axis" (tensor axes), "root",
  // "shift" and "pairs" (ranks in the group).
  std::vector<std::string> params;
  // Its op=sum map (as above), from its attributes; the autodiff pass transposes it,
  // `gradc verify`'s reference (passes/unroll.cpp) evaluates it with the node's reduction,
  // and `gradc prove` checks it against the interpreter's kernel.
  Term (*routing)(const Node& n) = nullptr;
};
OpTable<CollectiveRule>& collective_rules();
bool has_param(Op op, std::string_view param);
// Whether a parameter is a tensor axis (axis, split_axis, concat_axis).
bool is_axis_param(std::string_view p);
// pairs= as an attribute: a list of [src, dst].
Attr pairs_attr(const std::vector<std::vector<int64_t>>& pairs);
// A tensor axis attribute of n, a negative one counted from the end of n's type.
int64_t axis_attr(const Node& n, const char* key);

// Routings as the collectives' blocks write them: route::term(route::block(axis), route::whole()).
namespace route {
inline Side whole() { return Side{-1, -1}; }
inline Side block(int64_t axis) { return Side{-1, axis}; }
inline Side root(int64_t root, int64_t axis = -1) { return Side{root, axis}; }
inline Term term(Side src, Side dst) { return Term{src, dst, false, {}}; }
}  // namespace route

// The routing of collective node n (its op=sum version) in a world of N ranks.
Term routing(const Node& n, int world);
// The routing of the transposed map: data flows the other way.
Term transpose(const Term& t);

// The pairs ([src, dst]) of permute(shift=s) on n ranks: rank k sends to (k + s) mod n.
std::vector<std::vector<int64_t>> shift_pairs(int64_t shift, int n);

// A collective to emit: its op and attributes (axis, root, split_axis, ...).
struct CollectiveCall {
  Op op;
  Attrs attrs;
};
// The collective(s) whose routing is exactly `t` (their sum, for a permute whose
// transposed pairs send two values to one rank); empty if none has it. Found among
// the registered collectives, the first in ops.def's order whose routing, for some
// choice of its attributes from t's axes, roots or pairs (op=sum), is t.
std::vector<CollectiveCall> collectives_for(const Term& t, int world);
// The adjoint of n's op=sum map: collectives_for(transpose(routing(n))).
std::vector<CollectiveCall> transpose_of(const Node& n, int world);

// Readable forms, with each integer (rank, root, axis) written by `name`:
//   "y[r] += x[k].block(axis 0, r)  for all ranks k, r" and "reduce_scatter(axis=0, op=sum)".
using IntName = std::string (*)(int64_t);
std::string term_str(const Term& t, const char* src, const char* dst, IntName name = nullptr);
std::string call_str(const CollectiveCall& c, IntName name = nullptr);

}  // namespace gradc
