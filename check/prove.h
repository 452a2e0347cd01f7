// `gradc prove`: evidence that every collective's derived adjoint is right.
//
// For each collective (and reduction op) the prover reads the one description
// of its data movement that the autodiff pass derives adjoints from (routing in
// ir/collectives.h) and shows, two ways, that the adjoint is the transpose:
//  - for every N and every shape: the transposed routing term equals the
//    routing of the adjoint collective, as statements over symbolic ranks k, r,
//    root and axes (the symbolic proof);
//  - for N = 1..K on small shapes, exactly (integer values, no rounding): the
//    forward kernel's matrix A equals the matrix of the routing description, the
//    adjoint's matrix (from the backward graph the autodiff pass built) equals
//    A^T entry by entry, and <A x, y> = <x, A^T y> for random integer vectors.
// For avg, prod, max and min the derivative the autodiff pass derives is
// compared exactly with the definition at integer and dyadic rational points,
// zeros and ties included. For sum, avg and prod on bf16 and f16 values, the
// low-precision pass's lowering (exchanges of the 16-bit values and a sum in rank
// order, accum=f32 and accum=same) is checked against the collective on the
// interpreter, bit for bit, for the same N and meshes.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/collectives.h"
#include "ir/rules.h"
#include "passes/ad.h"

namespace gradc {

// What an adjoint claims for a collective node in a world of N ranks: the
// collectives whose sum, applied to the cotangent, is the cotangent of x (the
// linear, op=sum part). An empty list claims the identity.
using AdjointClaim = std::function<std::vector<CollectiveCall>(const Node& fwd, int world)>;

struct ProofCase {
  Op op;
  std::optional<Reduction> reduction;  // for the reducing collectives
  std::string reduction_str() const { return reduction ? reduction_name(*reduction) : ""; }
};
// Every collective, and every reduction op of the reducing ones.
std::vector<ProofCase> all_proof_cases();

struct ProofRow {
  ProofCase c;
  std::string forward, adjoint;  // in readable math
  bool proved = false;           // for all N
  std::string proof_note;        // why not, when not proved
  bool checked = false;          // for N = 1..K
  std::string counterexample;    // the first failure, when not checked
  std::string derivation;        // step by step, for --op
};

struct ProveOptions {
  int max_ranks = 8;
  AdjointClaim claim;    // null: what the autodiff pass derives
  VjpFn rule = nullptr;  // null: the op's own derivative rule (for the nonlinear reductions)
};

ProofRow prove(const ProofCase& c, const ProveOptions& opt);
std::string proof_table(const std::vector<ProofRow>& rows, int max_ranks);
std::string proof_json(const std::vector<ProofRow>& rows, int max_ranks);  // the same rows, for scripts

}  // namespace gradc
