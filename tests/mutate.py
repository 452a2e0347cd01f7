"""Mutation smoke test: damaged programs, IR and .npy files must give exit 0 or 1
with a message, never a crash or an internal error.

usage: mutate.py GRADC SOURCE_ROOT WORKDIR [COUNT]
Deterministic (fixed seeds), so a failure reproduces; the failing input is kept
in WORKDIR and named in the output.
"""
import glob
import os
import random
import subprocess
import sys

gradc, root, work = sys.argv[1], sys.argv[2], sys.argv[3]
count = int(sys.argv[4]) if len(sys.argv) > 4 else 300
os.makedirs(work, exist_ok=True)
failures = 0


def run(args, path):
    global failures
    p = subprocess.run([gradc] + args, capture_output=True, timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode not in (0, 1) or "internal error" in err or (p.returncode == 1 and not err):
        failures += 1
        keep = os.path.join(work, "failure%d%s" % (failures, os.path.splitext(path)[1]))
        os.replace(path, keep)
        print("FAILED: gradc %s exited %d: %s (input kept as %s)" % (" ".join(args), p.returncode, err[-300:], keep))


def mutate_text(rng, s, pieces):
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(s) + 1)
        r = rng.random()
        if r < 0.4:
            s = s[:i] + s[i + rng.randint(1, 8):]
        elif r < 0.8:
            s = s[:i] + rng.choice(pieces) + s[i:]
        else:
            j = rng.randrange(len(s) + 1)
            s = s[:i] + s[j:j + 10] + s[i:]
    return s


rng = random.Random(1)
programs = [open(f).read() for f in sorted(glob.glob(os.path.join(root, "examples", "*.dg")))]
pieces = list("()[]{},:;=+-*/<>.#0123456789 \nxyz_") + [
    "all_gather(", "grad(", "world", "rank", "input ", "output ", "def f(a) { return a }", "1e", "**",
    "shared", "f32[", "axis=", "op=max", "permute(x, pairs=[[0, 1]])"]
for n in range(count):
    path = os.path.join(work, "m.dg")
    open(path, "w").write(mutate_text(rng, rng.choice(programs), pieces))
    # a damaged program that still compiles runs on the interpreter, and one in four
    # compiled natively (a clang compile each: the generator's code on odd programs)
    how = rng.choice([["check"], ["run"], ["ir", "--stage=grad"], ["cost"]])[:1]
    if how == ["run"] and rng.random() < 0.75:
        how.append("--backend=interp")
    run(how + [path], path)

irs = []
for f in sorted(glob.glob(os.path.join(root, "examples", "*.dg"))):
    irs.append(subprocess.run([gradc, "ir", f, "--stage=grad"], capture_output=True, text=True).stdout)
ir_pieces = list("()[]{},:;=%.\"0123456789 \n-") + [
    "all_gather(", "%x", "{axis=", "f32[", "i32[", "world ", "output y = ", "replicated", "bwd",
    "grad_of=%x", "pairs=[[0, 1]]", "inf", "nan", "op=", "reshape"]
for n in range(count):
    path = os.path.join(work, "m.ir")
    open(path, "w").write(mutate_text(rng, rng.choice(irs), ir_pieces))
    run(["opt", path, "--pass=" + rng.choice(["infer-shapes", "fold,cse,dce", "autodiff", "replication,dce"])], path)

subprocess.run([gradc, "run", os.path.join(root, "tests", "data", "npy_maker.dg"), "--outputs=" + os.path.join(work, "gen")],
               check=True, capture_output=True)
npy = open(os.path.join(work, "gen", "rank0", "x32.npy"), "rb").read()
os.makedirs(os.path.join(work, "in"), exist_ok=True)
for n in range(count):
    b = bytearray(npy)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        r = rng.random()
        if r < 0.5:
            b[i] = rng.randrange(256)
        elif r < 0.75:
            del b[i:i + rng.randint(1, 20)]
        else:
            b[i:i] = rng.choice([b"9", b"99999999999999999999", b",", b"(", b")", b"'", b" "])
    path = os.path.join(work, "in", "x.npy")
    open(path, "wb").write(bytes(b))
    run(["run", os.path.join(root, "tests", "data", "takes_x.dg"), "--inputs=" + os.path.join(work, "in")], path)

print("%d mutated inputs, %d failures" % (3 * count, failures))
sys.exit(1 if failures else 0)
