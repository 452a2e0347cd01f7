// ir/builder.h: an expression's nodes in its own order, once each, numbers in the
// dtype of the value beside them.
#include "ir/builder.h"
#include "ir/print.h"
#include "util.h"

namespace gradc::test {
namespace {

using namespace build;

Graph with_input(const Type& t) {
  Graph g;
  g.world = 1;
  Attrs a;
  a.set("name", Attr::of_str("x"));
  emit(g, Op::Input, {}, a, Loc{});
  g.nodes[0].type = t;
  return g;
}

std::vector<Op> ops_of(const Graph& g) {
  std::vector<Op> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op);
  return ops;
}

TEST_CASE("an expression's nodes: operands left to right, then numbers, then the op") {
  Graph g = with_input(Type{DType::F64, {3}});
  Builder b(g);
  const Ex x = b[0];
  // softplus: max(x, 0) + log(1 + exp(-|x|))
  const ValueId y = b(maximum(x, 0.0) + log(1.0 + exp(-abs(x))));
  CHECK(ops_of(g) == std::vector<Op>{Op::Input, Op::Const, Op::Maximum, Op::Abs, Op::Neg, Op::Exp, Op::Const, Op::Add,
                                     Op::Log, Op::Add});
  CHECK(y == g.size() - 1);
  CHECK(g.type(y) == Type{DType::F64, {3}});
  CHECK(g.type(1) == Type{DType::F64, {}});  // the number 0 in x's dtype, a scalar that broadcasts
  CHECK(g[1].attrs.find("value")->number() == 0);
  CHECK(g[6].attrs.find("value")->number() == 1);
}

TEST_CASE("a sub-expression used twice is added once; a reshape to its own shape adds nothing") {
  Graph g = with_input(Type{DType::F32, {2, 3}});
  Builder b(g);
  const Ex x = b[0];
  const Ex sq = x * x;
  const ValueId y = b(sq + sq);
  CHECK(ops_of(g) == std::vector<Op>{Op::Input, Op::Mul, Op::Add});
  CHECK(g[y].args == std::vector<ValueId>{1, 1});
  CHECK(b(sq) == 1);  // already added, by this builder
  CHECK(b(reshape(x, {2, 3})) == 0);
  CHECK(b(cast(x, DType::F32)) == 0);
  const ValueId r = b(reshape(x, {3, 2}));
  CHECK(r == g.size() - 1);
  CHECK(g[r].op == Op::Reshape);
}

TEST_CASE("where's numbers take the dtype of the values it chooses between, not the condition's") {
  Graph g = with_input(Type{DType::F64, {4}});
  Builder b(g);
  const Ex x = b[0];
  const ValueId hit = b(cast(x > 0.0, DType::I32));
  const ValueId y = b(where(b[hit], x, -1.0));
  CHECK(g.type(g[y].args[2]) == Type{DType::F64, {}});
  CHECK(g.type(y) == Type{DType::F64, {4}});
}

}  // namespace
}  // namespace gradc::test
