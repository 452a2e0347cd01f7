// The lowered program: what a backend runs, as `gradc ir --stage=lowered` prints
// it and the code generators (codegen/) read it. The graph after grad and
// simplification is cut into kernels:
//   map     a fused chain of elementwise ops, with broadcasts, casts, where,
//           comparisons, iota/rank/rand and the views (reshape, transpose, slice,
//           pad, concat) as index arithmetic: one loop over the output
//   reduce  a reduction over some axes of a fused expression (the expression is
//           never materialised)
//   gemm    matmul as one BLAS call, transposes folded into its flags, a product
//           with a scalar constant into its alpha, batched as a strided-batched call
//   comm    a collective on buffers (in place where the semantics allow)
//   loop    a runtime call down each column of one axis, on buffers (cumsum,
//           scatter_add; in place of its first operand where nothing else reads it)
// Consecutive map and reduce kernels that each work on whole rows of one [rows,
// len] layout (a reduction over trailing axes, the elementwise ops around it)
// form a row group, run as one kernel: per row, each member in turn (softmax,
// log_softmax, logsumexp, normalize, cross_entropy and their gradients). Every
// member reads what earlier members wrote only in its own row. A member may write
// in place of a buffer only the group's earlier members read, each in its own row
// (the backward of cross_entropy over its logits).
// Values that are kernel results, inputs, outputs, array constants or used by
// several kernels live in buffers; every other value is computed where it is
// used. A buffer plan places the work buffers in one workspace, reusing memory
// after a buffer's last use. Kernels run on two streams, compute and comm, in
// this order; `waits` lists the kernels of the other stream each must wait for.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace gradc {

struct LBuffer {
  enum Kind : uint8_t { Input, Const, Work, Alias } kind = Work;
  std::string name;  // from the program's value
  TypeRef type;
  ValueId value = -1;  // the value it holds
  int alias_of = -1;   // Alias: the buffer whose memory it is (a reshape of it)
  int64_t offset = 0;  // Work: bytes into the workspace
  bool output = false;
  // A row group's result read only by the group's later members: the CPU keeps one
  // row of it, the row being computed, in the first row of its place (a GPU
  // computes rows at once, and uses all of it).
  bool row_local = false;
  int64_t bytes() const { return type->size() * dtype_size(type->dtype); }
};

// A gemm kernel's BLAS call: C[b] = alpha op(A[b]) op(B[b]); A and B are buffers,
// op a transpose when trans_*.
struct LGemm {
  int a = -1, b = -1;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1, stride_a = 0, stride_b = 0;
  double alpha = 1;  // a scalar multiple folded in (x / c: alpha = 1 / c)
};

// Kept small (the passes over the kernels stream them): what only some kernels
// need sits beside them (a gemm's call in Lowered::gemms).
struct LKernel {
  enum Kind : uint8_t { Map, Reduce, Gemm, Comm, Loop } kind = Map;
  enum Stream : uint8_t { Compute, Communication } stream = Compute;
  bool tiles = false;  // a member of a group of tiles (group_tiles): elementwise, or a reduction to one element
  int out = -1;        // the buffer it writes (the kernel is named by it)
  ValueId root = -1;   // the value it computes (the reduce, matmul, collective or loop node for those)
  int guard = -1;      // an input buffer: the kernel computes its default, only when it is not given
  int gemm = -1;       // gemm: its call, Lowered::gemms[gemm]
  // A row group's members: the index of its first kernel, and the layout. A map
  // member computes `row_len` elements a row (or one, for a per-row value), a
  // reduce member reduces `row_len` elements to one a row.
  int group = -1;
  int64_t rows = 0, row_len = 0;
  std::vector<ValueId> fused;  // map, reduce: the values computed inside it, in order, root last;
                               // loop: the check of its indices it makes (check_labels), if any
  std::vector<int> reads;      // buffers it reads
  std::vector<int> waits;      // kernels on the other stream this one waits for
  std::vector<int> lines;      // the source lines it covers
};

struct Lowered {
  Graph graph;  // the program the kernels compute (after grad and simplification)
  std::vector<LBuffer> buffers;
  std::vector<LKernel> kernels;
  std::vector<LGemm> gemms;         // the gemm kernels' calls
  std::vector<int> buffer_of;       // per value: its buffer, or -1 when it is computed where used
  int64_t workspace_bytes = 0;      // the work buffers' peak: one allocation
  std::vector<int32_t> plan_steps;  // how the buffer plan placed them (runtime/plan.h)
  std::vector<std::pair<std::string, int>> inputs, outputs;  // by name, in program order
  bool check_finite = false;  // each float kernel result checked for NaN and infinity (unfused)
  bool tables16 = true;       // the CPU's code may look functions of one 16-bit value up (Table16)
};

// The buffer whose memory buffer b is: b itself, or the end of its aliases' chain.
int base_buffer(const Lowered& l, int b);
// The elements a member of a group of tiles works on: a map's result's, or the operand's of
// a reduction to one element; 0 for any other kernel.
int64_t tile_size(const Lowered& l, const LKernel& k);
// A member of a group of tiles whose last tile is short: that tile's length; else 0.
int64_t last_row_len(const Lowered& l, const LKernel& k);

// Bytes a rank holds for the program: the workspace, the inputs (and where their
// defaults are computed) and the constants. `gradc cost` reports it.
int64_t plan_bytes(const Lowered& l);

// The ops a map or reduce kernel fuses, in order, the first 24 of a long list.
std::string fused_ops(const Lowered& l, const LKernel& k);

void print_lowered(const Lowered& l, std::FILE* to);  // text, written as it is made
std::string print_lowered_dot(const Lowered& l);
std::string print_lowered_json(const Lowered& l);

}  // namespace gradc
