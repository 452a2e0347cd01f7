// Collectives (LANGUAGE.md section 5): shape rules and kernels. The exchange
// itself is runtime/comm.cpp, the in-process communicator.
#include "ir/rules.h"
#include "runtime/comm.h"

namespace gradc {
namespace {

void check_root(const Graph& g, const Node& n) {
  int64_t root = n.attr_int("root");
  if (root < 0 || root >= g.world)
    user_error(n.loc, "{}: root {} is outside 0..{}", op_name(n.op), root, g.world - 1);
}

void check_reduction(const Node& n, const Type& x) {
  const std::string& op = n.attr_sym("op");
  if (!is_reduction_name(op))
    user_error(n.loc, "{}: unknown reduction op={} (expected sum, avg, prod, max or min)",
               op_name(n.op), op);
  if (op == "avg" && !is_float(x.dtype))
    user_error(n.loc, "{}: op=avg needs a float operand, got {}", op_name(n.op), type_str(x));
}

int divisible_axis(const Graph& g, const Node& n, const char* key, const Type& x) {
  int axis = norm_axis(n, n.attr_int(key), x);
  if (x.shape[size_t(axis)] % g.world != 0)
    user_error(n.loc, "{}: axis {} has size {}, which does not divide by {} ranks", op_name(n.op),
               axis, x.shape[size_t(axis)], g.world);
  return axis;
}

Type infer_all_reduce(const Graph& g, const Node& n) {
  const Type& x = arg_type(g, n, 0);
  check_reduction(n, x);
  return x;
}
Type infer_all_gather(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  y.shape[size_t(norm_axis(n, n.attr_int("axis"), y))] *= g.world;
  return y;
}
Type infer_reduce_scatter(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  check_reduction(n, y);
  y.shape[size_t(divisible_axis(g, n, "axis", y))] /= g.world;
  return y;
}
Type infer_broadcast(const Graph& g, const Node& n) {
  check_root(g, n);
  return arg_type(g, n, 0);
}
Type infer_reduce(const Graph& g, const Node& n) {
  check_root(g, n);
  return infer_all_reduce(g, n);
}
Type infer_gather(const Graph& g, const Node& n) {
  check_root(g, n);
  return infer_all_gather(g, n);
}
Type infer_scatter(const Graph& g, const Node& n) {
  check_root(g, n);
  Type y = arg_type(g, n, 0);
  y.shape[size_t(divisible_axis(g, n, "axis", y))] /= g.world;
  return y;
}
Type infer_all_to_all(const Graph& g, const Node& n) {
  Type y = arg_type(g, n, 0);
  int split = divisible_axis(g, n, "split_axis", y);
  int cat = norm_axis(n, n.attr_int("concat_axis"), y);
  y.shape[size_t(split)] /= g.world;
  y.shape[size_t(cat)] *= g.world;
  return y;
}
Type infer_permute(const Graph& g, const Node& n) {
  std::vector<bool> received(size_t(g.world), false);
  for (const auto& p : n.attr_int_lists("pairs")) {
    if (p.size() != 2) user_error(n.loc, "permute: each pair must be [src, dst]");
    for (int64_t r : p)
      if (r < 0 || r >= g.world)
        user_error(n.loc, "permute: pair [{}, {}] names rank {}, outside 0..{}", p[0], p[1], r,
                   g.world - 1);
    if (received[size_t(p[1])])
      user_error(n.loc, "permute: rank {} is the destination of more than one pair", p[1]);
    received[size_t(p[1])] = true;
  }
  return arg_type(g, n, 0);
}

int axis_of(const Node& n, const char* key, const Tensor& x) { return norm_axis(n, n.attr_int(key), x.type); }
int root_of(const Node& n) { return int(n.attr_int("root")); }
comm::ReduceOp rop(const Node& n) { return comm::reduce_op(n.attr_sym("op")); }

std::vector<Tensor> run_all_reduce(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_reduce(x, rop(n));
}
std::vector<Tensor> run_all_gather(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_gather(x, axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_reduce_scatter(const Node& n, const std::vector<Tensor>& x) {
  return comm::reduce_scatter(x, axis_of(n, "axis", x[0]), rop(n));
}
std::vector<Tensor> run_broadcast(const Node& n, const std::vector<Tensor>& x) {
  return comm::broadcast(x, root_of(n));
}
std::vector<Tensor> run_reduce(const Node& n, const std::vector<Tensor>& x) {
  return comm::reduce(x, root_of(n), rop(n));
}
std::vector<Tensor> run_gather(const Node& n, const std::vector<Tensor>& x) {
  return comm::gather(x, root_of(n), axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_scatter(const Node& n, const std::vector<Tensor>& x) {
  return comm::scatter(x, root_of(n), axis_of(n, "axis", x[0]));
}
std::vector<Tensor> run_all_to_all(const Node& n, const std::vector<Tensor>& x) {
  return comm::all_to_all(x, axis_of(n, "split_axis", x[0]), axis_of(n, "concat_axis", x[0]));
}
std::vector<Tensor> run_permute(const Node& n, const std::vector<Tensor>& x) {
  return comm::permute(x, n.attr_int_lists("pairs"));
}

}  // namespace

void register_collective_ops(RuleTable& t) {
  t[Op::AllReduce] = {infer_all_reduce, nullptr, run_all_reduce};
  t[Op::AllGather] = {infer_all_gather, nullptr, run_all_gather};
  t[Op::ReduceScatter] = {infer_reduce_scatter, nullptr, run_reduce_scatter};
  t[Op::Broadcast] = {infer_broadcast, nullptr, run_broadcast};
  t[Op::Reduce] = {infer_reduce, nullptr, run_reduce};
  t[Op::Gather] = {infer_gather, nullptr, run_gather};
  t[Op::Scatter] = {infer_scatter, nullptr, run_scatter};
  t[Op::AllToAll] = {infer_all_to_all, nullptr, run_all_to_all};
  t[Op::Permute] = {infer_permute, nullptr, run_permute};
}

}  // namespace gradc
