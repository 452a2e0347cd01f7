// gradc prove: every collective's adjoint proved and checked, and the prover
// shown to fail, with a counterexample, on deliberately wrong adjoints.
#include "check/prove.h"
#include "passes/ad.h"
#include "util.h"

namespace gradc::test {
namespace {

// One case, checked for 1..4 ranks and the meshes of 4 (2 x 2): the cases below need no
// more, and the test after this function checks every case for 1..8.
ProofRow prove_one(Op op, const std::string& reduction, ProveOptions opt = {}) {
  opt.max_ranks = 4;
  return prove(ProofCase{op, reduction.empty() ? std::nullopt : reduction_by_name(reduction)}, opt);
}

// Under AddressSanitizer (scripts/sanitize.sh) for 1..5 ranks: the same code on smaller
// matrices, 3% of the time (the checks for 8 take 90 s there); 1..8 in every other build.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GRADC_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GRADC_TEST_SANITIZED 1
#endif
#ifdef GRADC_TEST_SANITIZED
constexpr int kMaxRanks = 5;
#else
constexpr int kMaxRanks = 8;
#endif

TEST_CASE("every collective and reduction op is proved for all N and checked for N=1..8") {
  ProveOptions opt;
  opt.max_ranks = kMaxRanks;
  std::vector<ProofCase> cases = all_proof_cases();
  CHECK(cases.size() == 21);  // 3 reducing collectives x 5 ops, and 6 more
  for (const ProofCase& c : cases) {
    ProofRow r = prove(c, opt);
    CAPTURE(r.derivation);
    CHECK(r.proved);
    CHECK(r.checked);
  }
}

TEST_CASE("the derived adjoints are the transposes named in docs/semantics.md") {
  auto adjoint = [](Op op, const std::string& red = "") { return prove_one(op, red).adjoint; };
  CHECK(adjoint(Op::AllReduce, "sum") == "all_reduce(op=sum)");
  CHECK(adjoint(Op::AllGather) == "reduce_scatter(axis=a, op=sum)");
  CHECK(adjoint(Op::ReduceScatter, "sum") == "all_gather(axis=a)");
  CHECK(adjoint(Op::Broadcast) == "reduce(op=sum, root=root)");
  CHECK(adjoint(Op::Reduce, "sum") == "broadcast(root=root)");
  CHECK(adjoint(Op::Gather) == "scatter(axis=a, root=root)");
  CHECK(adjoint(Op::Scatter) == "gather(axis=a, root=root)");
  CHECK(adjoint(Op::AllToAll) == "all_to_all(concat_axis=a, split_axis=b)");
  CHECK(adjoint(Op::Permute) == "permute(pairs=[[p, q], [q, p], [t, s], [u, u]])");
}

AdjointClaim claim(std::vector<CollectiveCall> calls) {
  return [calls](const Node&, int) { return calls; };
}

TEST_CASE("the prover rejects all_gather paired with all_reduce") {
  Attrs sum;
  sum.set("op", Attr::of_sym("sum"));
  ProveOptions opt;
  opt.claim = claim({{Op::AllReduce, sum}});
  ProofRow r = prove_one(Op::AllGather, "", opt);
  CHECK(!r.proved);
  CHECK(r.proof_note ==
        "all_reduce(op=sum) routes xbar[r] += ybar[k]  for all ranks k, r, but A^T is "
        "xbar[r] += ybar[k].block(axis a, r)  for all ranks k, r");
  CHECK(!r.checked);
  CHECK(r.counterexample == "N=2, axis=0: the adjoint maps f64[4, 2] to f64[4, 2], but x is f64[2, 2]");
}

TEST_CASE("the prover rejects all_reduce's adjoint without the sum over ranks") {
  ProveOptions opt;
  opt.claim = claim({});  // the identity: each rank keeps its own cotangent
  ProofRow r = prove_one(Op::AllReduce, "sum", opt);
  CHECK(!r.proved);
  CHECK(r.proof_note == "it claims the identity, which moves no data between ranks");
  CHECK(!r.checked);
  // With 2 ranks, x on rank 1 reaches y on rank 0, so A^T has a 1 that the identity lacks.
  CHECK(r.counterexample == "N=2: entry (rank 0 [0, 0] <- rank 1 [0, 0]): A^T has 1, the adjoint has 0");
}

TEST_CASE("the prover rejects permute paired with itself instead of its inverse") {
  ProveOptions opt;
  opt.claim = [](const Node& fwd, int) { return std::vector<CollectiveCall>{{Op::Permute, fwd.attrs}}; };
  ProofRow r = prove_one(Op::Permute, "", opt);
  CHECK(!r.proved);
  CHECK(r.proof_note.find("permute(pairs=[[p, q], [q, p], [s, t], [u, u]]) routes") == 0);
  CHECK(!r.checked);
  // A shift by one is its own inverse on 2 ranks, but a single message 0 -> 1 is not:
  // its transpose sends from 1 to 0.
  CHECK(r.counterexample ==
        "N=2, pairs=[[0, 1]]: entry (rank 0 [0, 0] <- rank 1 [0, 0]): A^T has 1, the adjoint has 0");
}

// prod's derivative as hand-written rules often have it: y / x_k, which divides by zero.
void dividing_prod_rule(Ad& ad, ValueId y, ValueId g, std::vector<ValueId>& ct) {
  Attrs sum;
  sum.set("op", Attr::of_sym("sum"));
  ValueId total = ad.collective(Op::AllReduce, g, sum);
  ct[0] = ad.mul(total, ad.div(y, ad.arg(0)));
}

TEST_CASE("the prover rejects prod's rule that divides by the input") {
  ProveOptions opt;
  opt.rule = dividing_prod_rule;
  ProofRow r = prove_one(Op::AllReduce, "prod", opt);
  CHECK(r.proved);  // the routing is right; the partial is what is wrong
  CHECK(!r.checked);
  CHECK(r.counterexample.find("at integers x = ") != std::string::npos);
  CHECK(r.counterexample.find("the definition has") != std::string::npos);
  // The real rule (zeros counted) passes the same checks.
  ProofRow honest = prove_one(Op::AllReduce, "prod");
  CHECK(honest.checked);
}

// avg's derivative scaled by the world's size instead of the group's: right without a
// mesh (the group is the world), wrong over a part of a mesh's axes.
void world_scaled_avg_rule(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {
  Attrs sum;
  sum.set("op", Attr::of_sym("sum"));
  ct[0] = ad.mul(ad.collective(Op::AllReduce, g, sum), 1.0 / ad.graph().world);
}

TEST_CASE("the prover rejects an avg rule scaled by the world's size, on a mesh's groups") {
  ProveOptions opt;
  opt.rule = world_scaled_avg_rule;
  ProofRow r = prove_one(Op::AllReduce, "avg", opt);
  CAPTURE(r.derivation);
  CHECK(!r.checked);
  CHECK(r.counterexample.find("mesh a=2,b=2, over=[a]") == 0);
  CHECK(r.derivation.find("N=4: 1 variant") != std::string::npos);  // every 1-D check passed
}

}  // namespace
}  // namespace gradc::test
