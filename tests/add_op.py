"""Adds an op the way docs/internals.md's checklist says, in a copy of the source tree,
and shows that every backend picks it up: one row in ir/ops.def, one scalar function
in ir/scalar.h, one block in ops/elementwise.cpp, and nothing else.

usage: add_op.py SOURCE_DIR WORK_DIR  (prints what it checked; exit 1 on a failure)
The new op is cube(x) = x^3, with d/dx = 3 x^2.
"""
import json
import os
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
edit("ops/elementwise.cpp", "unary(Op::Square, vjp_square);", "  unary(Op::Cube, vjp_cube);")

run(["cmake", "-S", tree, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
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


def check(what, outs):
    for r in (0, 1):
        got = {k: v["data"] for k, v in outs[r]["outputs"].items()}
        if got != want[r]:
            sys.exit(f"{what}: rank {r} gave {got}, expected {want[r]}")
    print(f"{what}: exact")


for backend in ("interp", "native"):
    check(f"gradc run --backend={backend}",
          json.loads(run([gradc, "run", prog, f"--backend={backend}", "--format=json"]))["ranks"])
exe = os.path.join(work, "cube_exe")
run([gradc, "build", prog, "--target=cpu", "-o", exe])
check("the cpu executable", json.loads(run([exe, "--format=json"]))["ranks"])
run([gradc, "emit", prog, "--target=cuda", "-o", os.path.join(work, "cuda")])
cu = open(os.path.join(work, "cuda", "cube.cu")).read()
if "gradc::op::cube(" not in cu:
    sys.exit("the cuda code does not call gradc::op::cube")
print("the cuda code calls gradc::op::cube")
v = subprocess.run([gradc, "verify", prog], capture_output=True, text=True)
if v.returncode != 0:
    sys.exit(f"gradc verify failed:\n{v.stdout}{v.stderr}")
print("gradc verify: ok")
open(prog, "w").write("x = [1.0, 2.0]\ny = cueb(x)\noutput y\n")
r = subprocess.run([gradc, "check", prog], capture_output=True, text=True)
if r.returncode != 1 or "did you mean 'cube'?" not in r.stderr:
    sys.exit(f"no suggestion of cube:\n{r.stderr}")
print("a misspelling suggests cube")
