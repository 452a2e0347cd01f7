// gradc's runtime for generated code: what both targets share (errors in a step's
// data, reductions over ranks in rank order, a collective's blocks, the checks of
// run()). gradc emit writes it out beside the code, with the target's files:
//   cpu: gradc_cpu.h (loops, BLAS, the communicator interface), gradc_threads.h
//        (ranks as threads), gradc_mpi.h (ranks as MPI processes)
//   cuda: gradc_cuda.h (kernels, cuBLAS, memory), gradc_nccl.h (NCCL)
// gradc_runtime.h includes the ones the compiler targets. The kernel bodies are the
// generated functors' operator(), compiled by both nvcc and the host compiler.
#pragma once
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <array>
#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gradc_dtype.h"
#include "gradc_plan.h"
#include "gradc_scalar.h"

// A kernel's functor is inlined wherever the runtime's loops call it. A large one
// (randn's 10 rounds of Philox, a chain of 256 ops) clang 19 otherwise leaves a
// call inside the loop, which then stays scalar.
#if defined(__CUDACC__)
#define GRADC_FUNCTOR __host__ __device__ __forceinline__
#else
#define GRADC_FUNCTOR __attribute__((always_inline)) inline
#endif
// A part of a large program's run(), a function of its own (codegen/cpp.cpp, parts()):
// clang's passes then see functions of a bounded size.
#define GRADC_PART __attribute__((noinline))

namespace gradc {

enum class ROp { Sum, Avg, Prod, Max, Min };

// A failed library call names the call, the library's message and the source
// location of the op, and ends the process at once with status 1: every rank in
// it stops (under a launcher, the others then fail in their next collective).
[[noreturn]] inline void fail(const char* call, const std::string& why, const char* where) {
#if defined(GRADC_FAIL_THROWS)  // the torch target: the op raises RuntimeError
  throw std::runtime_error(std::string(call) + " failed: " + why + " (" + where + ")");
#else
  fprintf(stderr, "gradc: error: %s failed: %s (%s)\n", call, why.c_str(), where);
  fflush(stderr);
  _Exit(1);
#endif
}

// ---- errors in the program's data, found while a step runs ------------------
// `where` is the op's file:line:col, `dims` the shape of the value whose element
// (row-major `element`) is at fault. On the host the rank throws (its thread, or
// its process, then stops every rank, as a failed collective does); in a CUDA
// kernel the message is printed and the kernel traps, which the next checked
// CUDA call reports.
// A value's shape, for the messages below: gradc::Dims{2, 3}; gradc::Dims{} for a scalar.
struct Dims {
  int rank;
  int64_t d[16];
  template <class... T>
  GRADC_HD constexpr Dims(T... v) : rank(int(sizeof...(T))), d{int64_t(v)...} {}
};
// Integers in a fixed buffer, ", " between them, in brackets where `brackets`: the same
// text on the host and in a CUDA kernel's printf.
struct ElementText {
  char s[16 * 22 + 3];  // up to 16 dimensions of up to 20 digits, ", " between them
};
GRADC_HD inline ElementText list_text(const int64_t* v, int n, bool brackets) {
  ElementText t;
  int k = 0;
  if (brackets) t.s[k++] = '[';
  for (int d = 0; d < n; ++d) {
    if (d) t.s[k++] = ',', t.s[k++] = ' ';
    char digits[20];
    int m = 0;
    for (int64_t x = v[d]; m == 0 || x; x /= 10) digits[m++] = char('0' + x % 10);
    while (m) t.s[k++] = digits[--m];
  }
  if (brackets) t.s[k++] = ']';
  t.s[k] = 0;
  return t;
}
// The shape as text: "2, 3".
GRADC_HD inline ElementText dims_text(const Dims& dims) { return list_text(dims.d, dims.rank, false); }
// The row-major `element` of a value of shape `dims` as an index: "[1, 1]".
GRADC_HD inline ElementText element_text(int64_t element, const Dims& dims) {
  int64_t idx[16];
  for (int d = dims.rank; d-- > 0;) {
    idx[d] = dims.d[d] ? element % dims.d[d] : 0;
    element = dims.d[d] ? element / dims.d[d] : 0;
  }
  return list_text(idx, dims.rank, true);
}
inline std::string element_str(int64_t element, const Dims& dims) { return element_text(element, dims).s; }
GRADC_HD inline void division_error(const char* where, const char* op, int rank, int64_t element, const Dims& dims) {
#if defined(__CUDA_ARCH__)
  printf("%s: error: %s: division by zero on rank %d, at element %s of i32[%s]\n", where, op, rank,
         element_text(element, dims).s, dims_text(dims).s);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": " + op + ": division by zero on rank " + std::to_string(rank) +
                           ", at element " + element_str(element, dims) + " of i32[" + dims_text(dims).s + "]");
#endif
}
// An index of `op` (take, take_along_axis, scatter_add, ...) outside 0..n-1.
GRADC_HD inline void index_error(const char* where, const char* op, int rank, int64_t index, int64_t n, int64_t element,
                                 const Dims& dims) {
#if defined(__CUDA_ARCH__)
  printf("%s: error: %s: index %lld is out of range 0..%lld on rank %d, at element %s of the indices\n", where, op,
         (long long)index, (long long)(n - 1), rank, element_text(element, dims).s);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": " + op + ": index " + std::to_string(index) +
                           " is out of range 0.." + std::to_string(n - 1) + " on rank " + std::to_string(rank) +
                           ", at element " + element_str(element, dims) + " of the indices");
#endif
}

// What a loop kernel (scatter_add) calls for an index out of range: nothing, where the
// indices were checked where they were made (the index is then skipped); else the
// generated functor of the check it makes, which raises index_error.
struct NoCheck {
  GRADC_FUNCTOR void operator()(int64_t, int64_t) const {}
};

GRADC_HD inline void label_error(const char* where, int rank, int64_t label, int64_t n, int64_t ignore, int64_t element,
                                 const Dims& dims) {
#if defined(__CUDA_ARCH__)
  printf(
      "%s: error: cross_entropy: label %lld is out of range 0..%lld on rank %d, at element %s of the labels "
      "(ignore_index is %lld)\n",
      where, (long long)label, (long long)(n - 1), rank, element_text(element, dims).s, (long long)ignore);
  __trap();
#else
  throw std::runtime_error(std::string(where) + ": cross_entropy: label " + std::to_string(label) +
                           " is out of range 0.." + std::to_string(n - 1) + " on rank " + std::to_string(rank) +
                           ", at element " + element_str(element, dims) + " of the labels (ignore_index is " +
                           std::to_string(ignore) + ")");
#endif
}

// ---- reductions over ranks, in rank order (as the interpreter combines them) ---
// Sums and products in T (f32, f64 or i32): op::add and op::mul, an i32 wrapping
// around on overflow (gradc_scalar.h); max and min by max_step and min_step, so that a
// NaN on any rank gives NaN, as a max over an axis does.
template <class T>
GRADC_HD inline T combine(ROp op, T a, T b) {
  switch (op) {
    case ROp::Prod: return op::mul(a, b);
    case ROp::Max: return max_step(a, b);
    case ROp::Min: return min_step(a, b);
    default: return op::add(a, b);
  }
}

// Float max and min over ranks on a transport whose own drop a NaN or keep it by its
// place (NCCL's is fmaxf; MPI's and gloo's are a > b ? a : b, which keeps a NaN only on
// one side): each value as an integer of its width in the same order, NaN above +inf
// for a max and below -inf for a min, then the transport's integer max or min, then
// back. A NaN on any rank gives NaN, as combine does; -0 is below +0 (combine keeps the
// first rank's: which zero a max of zeros gives is not fixed, as over an axis).
template <class F>  // the integer of F's width
using OrderKey = std::conditional_t<sizeof(F) == 8, int64_t, int32_t>;
// Element i of the values of F at `from`, as its key (to_keys) or back, into `to` (the
// same buffer, or another). Through bytes, so that a key whose bits are a NaN's keeps them.
template <class F>
GRADC_HD inline void order_key_at(const void* from, void* to, int64_t i, bool max, bool to_keys) {
  using K = OrderKey<F>;
  const K top = K(~K(0) ^ (K(1) << (8 * sizeof(K) - 1)));  // 0x7f...f
  K k;
  memcpy(&k, static_cast<const char*>(from) + i * int64_t(sizeof k), sizeof k);
  F x;
  memcpy(&x, &k, sizeof x);
  if (to_keys && x != x)
    k = max ? top : K(~top);  // NaN above +inf for a max, below -inf for a min
  else if (k < 0)
    k = K(k ^ top);  // the negative floats' order reversed, -0 just below +0; its own inverse
  memcpy(static_cast<char*>(to) + i * int64_t(sizeof k), &k, sizeof k);
}
// Whether a collective of op on t goes by order keys: a max or min of floats.
inline bool by_order_keys(ROp op, DType t) {
  return (op == ROp::Max || op == ROp::Min) && (t == DType::F32 || t == DType::F64);
}
// n values of t at p to their keys (to_keys) or back, in place (the host's loop).
inline void order_keys(void* p, int64_t n, DType t, ROp op, bool to_keys) {
  const bool max = op == ROp::Max;
  if (t == DType::F32)
    for (int64_t i = 0; i < n; ++i) order_key_at<float>(p, p, i, max, to_keys);
  else
    for (int64_t i = 0; i < n; ++i) order_key_at<double>(p, p, i, max, to_keys);
}

// Reductions over axes accumulate in double (int64 for i32), as the interpreter does:
// a sum from 0, a max or min from -inf or +inf (the i32 limits) by max_step and min_step
// (gradc_scalar.h: a NaN element makes the result NaN).
template <class T>
struct Acc {
  using type = double;
};
template <>
struct Acc<int32_t> {
  using type = int64_t;
};
template <>
struct Acc<int64_t> {
  using type = int64_t;
};  // the GPU's partial results of an i32 reduction
template <class A>
GRADC_HD inline A reduce_init(ROp op) {
  return op == ROp::Sum ? A(0) : op == ROp::Max ? max_start<A>() : min_start<A>();
}
template <class A>
GRADC_HD inline A reduce_step(ROp op, A acc, A x) {
  return op == ROp::Max ? max_step(acc, x) : op == ROp::Min ? min_step(acc, x) : A(acc + x);
}

// A map kernel's functor gives the value of element i, f(i) (in a row group, of
// element j of row r, f(r, j)); a reduction's, the element r of output o, f(o, r).
// The runtime stores the results. A group of tiles (tiles(n, len) rows of len elements
// of a map's n) may end in a shorter row: its members are given `end`, the n elements
// they write in all, where the rows of other groups are whole.
inline constexpr int64_t kWholeRows = INT64_MAX;
constexpr int64_t tiles(int64_t n, int64_t len) { return (n + len - 1) / len; }
GRADC_HD inline int64_t row_count(int64_t r, int64_t len, int64_t end) {
  return end - r * len < len ? end - r * len : len;
}
template <class T, class F>
struct MapRow;
template <class T, class F>
struct ReduceRow;
template <class T, class F>
MapRow<T, F> map_row(int64_t len, const F& f, T* out, int64_t end = kWholeRows) {
  return MapRow<T, F>{len, f, out, len, end};
}
// A map member whose result no later member of its group reads, `rows` rows of it in
// all: the CPU streams a large one out, as it does a map kernel's.
template <class T, class F>
struct StreamRow;
template <class T, class F>
StreamRow<T, F> stream_row(int64_t rows, int64_t len, const F& f, T* out, int64_t end = kWholeRows) {
  return StreamRow<T, F>{rows, len, f, out, end};
}
template <class T, class F>
ReduceRow<T, F> reduce_row(ROp op, int64_t len, const F& f, T* out) {
  return ReduceRow<T, F>{op, len, f, out};
}

// A collective's operand and result as blocks: [outer, dim, inner] elements,
// the block axis in the middle (outer = 1, inner = 1 for a whole buffer).
struct Blocks {
  int64_t outer = 1, dim = 1, inner = 1;
  int64_t count() const { return outer * dim * inner; }
};

// A program built for one world size, started in another.
[[noreturn]] inline void wrong_world(const char* name, int world, int size) {
  fprintf(stderr,
          "gradc: error: %s was generated for %d ranks, but the communicator has %d; run gradc again with --ranks=%d\n",
          name, world, size, size);
  abort();
}
[[noreturn]] inline void wrong_group(const char* name, const char* axes, int size, int got) {
  fprintf(stderr, "gradc: error: %s: the communicator for over=[%s] has %d ranks, but its groups have %d\n", name, axes,
          got, size);
  abort();
}
// A class for any size (gradc emit --size B=any) given a size it does not take: the
// sizes are a multiple of `multiple` where the code needs it to be, and at least
// `least`, where the program stops being the one the class computes (at smaller sizes
// a slice such as x[1:2] comes out shorter, an index out of range).
inline bool size_taken(int64_t value, int64_t multiple, int64_t least) {
  return value >= least && value % multiple == 0;
}
inline void check_size(const char* name, const char* size, int64_t value, int64_t multiple, int64_t least) {
  if (size_taken(value, multiple, least)) return;
  const std::string m = std::to_string(multiple), at_least = std::to_string(least);
  throw std::invalid_argument(std::string(name) + ": size " + size + " = " + std::to_string(value) + ": it must be " +
                              (multiple == 1      ? "at least " + at_least
                               : least > multiple ? "a multiple of " + m + ", at least " + at_least
                                                  : "a positive multiple of " + m));
}
[[noreturn]] inline void missing_input(const char* name, const char* input) {
  fprintf(stderr, "gradc: error: %s::run(): input '%s' has no default and was not set (set_%s)\n", name, input, input);
  abort();
}

// A step writes its outputs while it still reads its inputs (and the outputs it wrote
// before), so memory given with set_<name>_out must not overlap an input's or another
// output's: run() checks the pointers it was given (a few comparisons) and stops.
struct Span {
  const void* p;  // null: not set
  int64_t bytes;
  const char* what;  // "input 'x'", "output 'y'"
  bool output;
};
template <size_t N>
inline void check_disjoint(const char* name, const Span (&spans)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (!spans[i].output || !spans[i].p) continue;
    const char* a = static_cast<const char*>(spans[i].p);
    for (size_t j = 0; j < N; ++j) {
      const char* b = static_cast<const char*>(spans[j].p);
      if (j == i || !b || a >= b + spans[j].bytes || b >= a + spans[i].bytes) continue;
      fprintf(stderr,
              "gradc: error: %s::run(): the memory of %s overlaps that of %s: an output needs memory of its own\n",
              name, spans[i].what, spans[j].what);
      abort();
    }
  }
}

// A shared input (docs/language.md section 3) must hold the same bytes on every rank of
// its group. The check (check_shared, in the target's file) costs one small collective
// for all the inputs a step checks at once: each rank hashes each input's bytes
// (hash_bytes: 64 bits) into its group's slot of one message, and one all_reduce(max)
// over the world takes, per slot, the maximum of the hash and of its complement, equal
// on every rank of the group exactly when the hashes are (ranks of other groups fill the
// slot with INT32_MIN). On the CPU that message's all_reduce follows only where a first
// one, of two sums of the hashes, finds a difference (gradc_cpu.h, quick_sums). Only
// for an input whose hashes differ are the data compared
// element by element with the group's first rank's (compare_shared), and every rank stops
// with the same words, the interpreter's (report_shared). A class checks every step
// unless built with GRADC_CHECK_SHARED=0 or told otherwise (check_shared_inputs(steps));
// executables and gradc run check their first step.
GRADC_HD inline uint64_t hash_word(uint64_t word, int64_t i) {
  uint64_t v = (word ^ (uint64_t(i) * 0x9E3779B97F4A7C15ull)) * 0xFF51AFD7ED558CCDull;
  return v ^ (v >> 32);
}
// The bytes' hash: a wrapping sum over their 8-byte words, each mixed with its index
// (so a GPU sums it in any order, and a value moved to another place changes it).
inline uint64_t hash_bytes(const void* data, int64_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  const int64_t words = bytes / 8;
  uint64_t h = uint64_t(bytes);
  for (int64_t i = 0; i < words; ++i) {
    uint64_t w;
    memcpy(&w, p + 8 * i, 8);
    h += hash_word(w, i);
  }
  if (bytes % 8) {
    uint64_t w = 0;
    memcpy(&w, p + 8 * words, size_t(bytes % 8));
    h += hash_word(w, words);
  }
  return h;
}

// One shared input to check: `group` is this rank's communicator along the axes it is
// shared along (the world's for `shared`), `slot` this rank's group among the `slots`
// groups; `what` is "shared input 'w'", `note` "" or " (it is shared along dp)", `dims`
// the shape, `where` the input's source location.
template <class Comm>
struct SharedInput {
  Comm* group;
  const void* data;
  int64_t count;
  DType t;
  int slot, slots;
  const char *what, *where, *note;
  Dims dims;
};

// The sizes a class for any size runs this step at (its Sizes, in declared order),
// checked with its shared inputs: every rank must run at the same sizes, or the step's
// collectives would exchange blocks of other lengths (a rank reading past another's
// buffer, a transport's abort or a wait that never ends) instead of stopping.
struct StepSizes {
  const int64_t* values = nullptr;
  int n = 0;                           // 0: a class for one size, nothing to check
  const char* const* names = nullptr;  // "B", ...
  const char* where = "";              // the program's file
};
// Every rank stops with its own sizes when they differ between ranks.
[[noreturn]] inline void sizes_differ(const StepSizes& s) {
  std::string mine;
  for (int k = 0; k < s.n; ++k) mine += std::string(k ? ", " : "") + s.names[k] + " = " + std::to_string(s.values[k]);
  throw std::runtime_error(std::string(s.where) + ": the sizes differ between ranks (this rank's: " + mine +
                           "): every rank must run a step at the same sizes");
}

// The all_reduce(max) message of the inputs' hashes: four i32 per slot, and a last slot
// for the sizes' hash where a class for any size checks them (empty until made for the
// inputs: a step that does not check allocates nothing).
struct HashMessage {
  std::vector<int32_t> m;
  std::vector<size_t> at;    // each input's first slot
  double quick[2] = {0, 0};  // the CPU's first message (gradc_cpu.h, quick_sums)
  HashMessage() = default;
  template <class In>
  HashMessage(const In* in, int n, const StepSizes& sizes = {}) : at(size_t(n) + 1) {
    for (int k = 0; k < n; ++k) at[size_t(k) + 1] = at[size_t(k)] + size_t(in[k].slots);
    m.assign(4 * (at[size_t(n)] + (sizes.n > 0)), INT32_MIN);
    if (sizes.n > 0) put_at(at[size_t(n)], hash_bytes(sizes.values, 8 * int64_t(sizes.n)));
  }
  void put(int k, int slot, uint64_t h) { put_at(at[size_t(k)] + size_t(slot), h); }
  // after the all_reduce: whether input k's hashes differ in some group
  bool differs(int k) const {
    for (size_t s = at[size_t(k)]; s < at[size_t(k) + 1]; ++s)
      if (differs_at(s)) return true;
    return false;
  }
  // after the all_reduce: whether the sizes differ between ranks (false where unchecked)
  bool sizes_differ() const { return 4 * (at.back() + 1) == m.size() && differs_at(at.back()); }

 private:
  void put_at(size_t slot, uint64_t h) {
    int32_t* s = &m[4 * slot];
    s[0] = int32_t(uint32_t(h)), s[1] = int32_t(uint32_t(h >> 32));
    s[2] = ~s[0], s[3] = ~s[1];
  }
  bool differs_at(size_t s) const { return m[4 * s] != ~m[4 * s + 2] || m[4 * s + 1] != ~m[4 * s + 3]; }
};

// The first element (of `size` bytes each) where `a` and `b` differ, or -1.
inline int64_t first_difference(const void* a, const void* b, int64_t count, int64_t size) {
  const char *x = static_cast<const char*>(a), *y = static_cast<const char*>(b);
  for (int64_t i = 0; i < count; ++i)
    if (memcmp(x + i * size, y + i * size, size_t(size)) != 0) return i;
  return -1;
}
// Rank r's row of the world's all_gather after the element-wise comparison:
// {differs, its group's first world rank, r, element (high, low)}.
constexpr int kSharedRow = 5;
inline void shared_row(int64_t element, int32_t first, int32_t world_rank, int32_t row[kSharedRow]) {
  row[0] = element >= 0, row[1] = first, row[2] = world_rank;
  row[3] = int32_t(uint32_t(uint64_t(element) >> 32)), row[4] = int32_t(uint32_t(uint64_t(element)));
}
// Every rank stops with the words of the first world rank whose data differ from its
// group's first rank's ("<what> differs between ranks A and B at element [i]<note>").
template <class In>
void report_shared(const std::vector<int32_t>& rows, const In& in) {
  for (size_t r = 0; kSharedRow * (r + 1) <= rows.size(); ++r) {
    const int32_t* row = &rows[kSharedRow * r];
    if (!row[0]) continue;
    const int64_t element = int64_t(uint64_t(uint32_t(row[3])) << 32 | uint32_t(row[4]));
    throw std::runtime_error(std::string(in.where) + ": " + in.what + " differs between ranks " +
                             std::to_string(row[1]) + " and " + std::to_string(row[2]) +
                             (in.dims.rank ? " at element " + element_str(element, in.dims) : std::string()) + in.note);
  }
  throw std::runtime_error(std::string(in.where) + ": " + in.what + " differs between ranks" + in.note);
}
#if !defined(GRADC_CHECK_SHARED)
#define GRADC_CHECK_SHARED -1  // every step; 0: never (check_shared_inputs overrides either)
#endif

// gradc run --check-finite: the first NaN or infinity of an op's result (on the host)
// stops the rank (check_finite, in the target's file, brings the result there).
inline float finite_value(float v) { return v; }
inline double finite_value(double v) { return v; }
inline float finite_value(bfloat16 v) { return to_float(v); }
inline float finite_value(float16 v) { return to_float(v); }
template <class T>
void check_finite_values(const T* data, int64_t n, int rank, const char* where, const char* what, const char* dtype,
                         const Dims& dims) {
  for (int64_t i = 0; i < n; ++i) {
    const auto v = finite_value(data[i]);
    if (v - v == v - v) continue;  // finite
    const char* what_value = v != v ? "NaN" : v > 0 ? "inf" : "-inf";
    throw std::runtime_error(std::string(where) + ": " + what + ": the result holds " + what_value + " on rank " +
                             std::to_string(rank) + ", at element " + element_str(i, dims) + " of " + dtype + "[" +
                             dims_text(dims).s + "]" + " (--check-finite)");
  }
}

// For a function with a C interface (the torch target's ops, called through ctypes):
// runs f, and returns 0, or 1 with the message of what it threw in error[0..size).
template <class F>
int c_call(char* error, int64_t size, F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    snprintf(error, size_t(size), "%s", e.what());
  } catch (...) {
    snprintf(error, size_t(size), "gradc: an unknown exception");
  }
  return 1;
}

// A torch op's class, held by one call until it ends (torch_program, torch_cuda_program).
template <class Program>
struct Held {
  Program& program;
  std::unique_lock<std::mutex> running;
};

}  // namespace gradc
