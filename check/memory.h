// Memory a program cannot have is an error before it runs: the peak of the
// buffer plan (passes/cost.h) for every rank in this process, against what the
// machine can give (MemAvailable, the cgroup's limit, RLIMIT_AS).
#pragma once
#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace gradc {

int64_t available_memory();                // bytes this process can still allocate; INT64_MAX when unknown
std::string readable_bytes(double bytes);  // "23.8 GiB", in gradc cost's units

// Throws a UserError, located at the largest value, when `copies` times the
// per-rank peak of `g` on all its ranks does not fit (a check holding several
// evaluations at once passes copies > 1). `what` names the job ("gradc run").
void check_memory(const Graph& g, double copies, const std::string& what);
// The same for a known peak per rank: the native backend's buffer plan, which is the
// peak `gradc cost` reports (plan_bytes in ir/lowered.h), so both say the same.
void check_memory_bytes(const Graph& g, double per_rank, const std::string& what);

}  // namespace gradc
