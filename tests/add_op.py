"""Adds an op and a collective the way docs/internals.md's checklists say, in a copy of
the source tree, and shows that every backend picks them up: for the op, one row in
ir/ops.def, one scalar function in ir/scalar.h, one block in ops/elementwise.cpp; for
the collective, one row in ir/ops.def and one block in ops/collective.cpp; nothing else.

usage: add_op.py SOURCE_DIR WORK_DIR  (prints what it checked; exit 1 on a failure)
The new op is cube(x) = x^3, with d/dx = 3 x^2. The new collective is psum_scatter(x,
axis), JAX's name for reduce_scatter(x, axis, op=sum): its derivative, derived from its
routing, is an all_gather.
"""
import json
import os
import re
import subprocess
import sys

src, work = sys.argv[1], sys.argv[2]
tree = os.path.join(work, "src")
build = os.path.join(work, "build")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def edit(path, anchor, text):
    """Inserts text after the line holding anchor (which must be there: the checklist's places)."""
    p = os.path.join(tree, path)
    lines = open(p).read().split("\n")
    at = [i for i, l in enumerate(lines) if anchor in l]
    if len(at) != 1:
        sys.exit(f"{path}: expected one line with {anchor!r}, found {len(at)}")
    lines.insert(at[0] + 1, text)
    open(p, "w").write("\n".join(lines))


# The tracked sources, copied (the build folders and caches are not).
files = run(["git", "-C", src, "ls-files", "-z"]).split("\0")
for f in files:
    if not f:
        continue
    os.makedirs(os.path.dirname(os.path.join(tree, f)) or tree, exist_ok=True)
    with open(os.path.join(src, f), "rb") as a, open(os.path.join(tree, f), "wb") as b:
        b.write(a.read())

# 1. the row
edit("ir/ops.def", "UNARY(Square,", "UNARY(Cube,         cube,           DIFF)")
# 2. its value per element
edit("ir/scalar.h", "GRADC_HD T square(T x) {",
     "  return T(x * x);\n}\ntemplate <class T>\nGRADC_HD T cube(T x) {\n  return T(x * x * x);")
# 3. its block: the derivative rule and its registration
edit("ops/elementwise.cpp", "void vjp_square(",
     "// d/dx x^3 = 3 x^2\n"
     "void vjp_cube(Ad& ad, ValueId, ValueId g, std::vector<ValueId>& ct) {\n"
     "  const Ex X = ad[ad.arg(0)];\n  ct[0] = ad(ad[g] * (X * X) * 3.0);\n}")
edit("ops/elementwise.cpp", "unary(Op::Square, vjp_square, Cheap);", "  unary(Op::Cube, vjp_cube);")

# The collective: its row, and its block (parameters, shape rule, replication, kernel,
# routing, bytes on the wire, runtime call)
edit("ir/ops.def", 'OP(Permute,', 'OP(PsumScatter, "psum_scatter", 1, COLL | DIFF)')
edit("ops/collective.cpp", '.call = {"permute", {{A::Count}, {A::DType}, {A::Pairs}}}});',
     "  // psum_scatter(x, axis): JAX's name for reduce_scatter(x, axis, op=sum).\n"
     "  collective({.op = Op::PsumScatter,\n"
     "              .params = {\"axis\"},\n"
     "              .infer = infer_reduce_scatter,\n"
     "              .rep = rep_differs,\n"
     "              .run = run_reduce_scatter,\n"
     "              .routing = [](const Node& n) { return term(block(axis_attr(n, \"axis\")), whole()); },\n"
     "              .sent = [](const Node&, double in, double, int N) { return ring(N) * in; },\n"
     "              .call = {\"reduce_scatter\", {{A::GroupBlocks, \"axis\"}, {A::DType}, {A::Reduction}}}});")

# unoptimised: it compiles in about 60% of a release build's time, and runs only small programs
run(["cmake", "-S", tree, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_FLAGS_DEBUG=-O0"])
run(["cmake", "--build", build, "--target", "gradc"])
gradc = os.path.join(build, "gradc")

prog = os.path.join(work, "cube.dg")
open(prog, "w").write(
    "world 2\n"
    "input x : f32[3] = [-2.0, 0.5, 3.0] + cast(rank, f32)\n"
    "input n : i32[2] = [2, -3]\n"
    "y = cube(x)\n"
    "k = cube(n)\n"
    "dx = grad(sum(y), x)\n"
    "output y, k, dx\n")
want = {0: {"y": [-8.0, 0.125, 27.0], "k": [8, -27], "dx": [12.0, 0.75, 27.0]},
        1: {"y": [-1.0, 3.375, 64.0], "k": [8, -27], "dx": [3.0, 6.75, 48.0]}}


def check(what, outs, want):
    for r, w in want.items():
        got = {k: v["data"] for k, v in outs[r]["outputs"].items()}
        if got != w:
            sys.exit(f"{what}: rank {r} gave {got}, expected {w}")
    print(f"{what}: exact")


def every_backend(prog, want, label, ranks, cuda_call):
    """The interpreter, the native backend and the cpu executable (as threads), each exact;
    the cuda code's call; gradc verify."""
    for backend in ("interp", "native"):
        check(f"{label}gradc run --backend={backend}",
              json.loads(run([gradc, "run", prog, f"--backend={backend}", "--format=json"]))["ranks"], want)
    stem = os.path.splitext(prog)[0]
    run([gradc, "build", prog, "--target=cpu", "-o", stem + "_exe"])
    check(f"{label}the cpu executable", json.loads(run([stem + "_exe"] + ranks + ["--format=json"]))["ranks"], want)
    run([gradc, "emit", prog, "--target=cuda", "-o", stem + "_cuda"])
    if cuda_call + "(" not in open(os.path.join(stem + "_cuda", os.path.basename(stem) + ".cu")).read():
        sys.exit(f"{label}the cuda code does not call {cuda_call}")
    print(f"{label}the cuda code calls {cuda_call}")
    v = subprocess.run([gradc, "verify", prog], capture_output=True, text=True)
    if v.returncode != 0:
        sys.exit(f"{label}gradc verify failed:\n{v.stdout}{v.stderr}")
    print(f"{label}gradc verify: ok")


every_backend(prog, want, "", [], "gradc::op::cube")
open(prog, "w").write("x = [1.0, 2.0]\ny = cueb(x)\noutput y\n")
r = subprocess.run([gradc, "check", prog], capture_output=True, text=True)
if r.returncode != 1 or "did you mean 'cube'?" not in r.stderr:
    sys.exit(f"no suggestion of cube:\n{r.stderr}")
print("a misspelling suggests cube")

# The collective, on a 2 x 2 mesh over tp: y = block t (rows) of the sum over tp of x,
# and for L = sum over ranks of sum(y * y), dx on (d, t) is 2 y of each tp rank of d,
# gathered: the all_gather that the routing's transpose gives.
coll = os.path.join(work, "psum.dg")
open(coll, "w").write(
    "mesh dp=2, tp=2\n"
    "input x : f32[4, 3] = reshape(iota(12), [4, 3]) + 100.0 * rank\n"
    "y = psum_scatter(x, axis=0, over=tp)\n"
    "dx = grad(sum(y * y), x)\n"
    "output y, dx\n")
xs = [[[float(3 * i + j + 100 * r) for j in range(3)] for i in range(4)] for r in range(4)]
cwant = {}
for d in (0, 1):
    total = [[xs[2 * d][i][j] + xs[2 * d + 1][i][j] for j in range(3)] for i in range(4)]
    dx = [2 * v for row in total for v in row]
    for t in (0, 1):
        cwant[2 * d + t] = {"y": [v for row in total[2 * t:2 * t + 2] for v in row], "dx": dx}


every_backend(coll, cwant, "psum_scatter: ", ["--ranks=4"], "gradc::reduce_scatter")
ir = run([gradc, "ir", coll, "--stage=grad"])
if not re.search(r"all_gather\(.*axis=0", ir):
    sys.exit(f"psum_scatter: the derived backward has no all_gather:\n{ir}")
print("psum_scatter: its derivative is an all_gather")
# f32[4, 3] is 48 bytes; a ring over tp's 2 ranks sends half of them
cost = run([gradc, "cost", coll])
if not re.search(r"psum_scatter\(axis=0, over=\[tp\]\)\s+f32\[4, 3\]\s+24 B\s+24 B", cost):
    sys.exit(f"psum_scatter: gradc cost does not count 24 B:\n{cost}")
print("psum_scatter: gradc cost: 24 B")
p = run([gradc, "prove", "--max-ranks=4"])
row = [line for line in p.splitlines() if line.startswith("psum_scatter")]
if len(row) != 1 or "all_gather(axis=a)" not in row[0] or not re.search(r"proved\s+checked", row[0]):
    sys.exit(f"psum_scatter: gradc prove has no proved row:\n{p}")
print("psum_scatter: gradc prove: proved and checked")
