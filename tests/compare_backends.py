"""Builds a .dg program with `gradc build --target=cpu` for each number of ranks
and checks that the executable gives what `gradc run` (the interpreter) gives:
every output of every rank within 1e-5 relative (1e-5 absolute near zero:
the examples' self-checks, such as `err`, are rounding noise whose size depends on
the order of a reduction, which MPI chooses). The outputs are read from the .npy
files that --outputs writes, and only where two runs' bytes differ are their
elements compared one by one.

usage: compare_backends.py [--mpi] GRADC FILE.dg WORKDIR SIZE...
A SIZE is a number of ranks, `own` (the program's own world or mesh), or for a
program with a mesh its axes' sizes (dp=2,tp=4; the native backend then runs too). With --mpi the executable also
runs under `mpirun -np N` (a process per rank), and both runs are compared with
the interpreter.

usage: compare_backends.py --any-size B=v,w,... GRADC FILE.dg WORKDIR [--ranks=N]
                            [--prepare-only | --exe=EXE]
Builds the executable once for any B (gradc build --size B=any) and, at each of the
values, writes the float inputs whose declared shape has B as files (a rank's own
where the input is per rank), runs the executable and `gradc run --backend=interp`
on them and compares the outputs the same way (B comes from the files; an input left
out takes its default at that B). --prepare-only writes the inputs and the
interpreter's outputs into WORKDIR and stops; --exe=EXE (GRADC `-`: those files are
there) checks EXE instead of building one: scripts/gpu_check.sh's CUDA executable.

usage: compare_backends.py --lines B GRADC FILE.dg LINES
Each line of the file LINES is one JSON object, {"B": 5, "out": [...], ...}: rank 0's
outputs at that B of a class for any B (tests/embed/any_size.cpp prints them); each is
compared with `gradc run --backend=interp --size B=5`'s, the same way.

usage: compare_backends.py --native GRADC FILE.dg...
Runs each program with `gradc run --backend=native` and `--backend=interp` at its
own world size and compares the outputs the same way; a program the interpreter
rejects (exit 1) must be rejected by the native backend with the same message.
"""
import ast
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile


def run(cmd, may_fail=False):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode == 1 and may_fail:
        return None
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
    return p.stdout


def native(gradc, progs):
    ran = rejected = 0
    for prog in progs:
        want, failed = outputs([gradc, "run", prog, "--backend=interp"], may_fail=True)
        got, got_failed = outputs([gradc, "run", prog, "--backend=native"], may_fail=True)
        if failed:
            if got_failed != failed:
                sys.exit(f"{prog}: the interpreter says {failed}\nthe native backend says {got_failed}")
            rejected += 1
            continue
        if got_failed:
            sys.exit(f"{prog}: the native backend failed {got_failed}")
        compare(prog, len(want), got, want)
        ran += 1
    print(f"native equals the interpreter on {ran} programs; {rejected} rejected by both with the same message")


def write_npy(path, descr, shape, values):
    data = b"".join(struct.pack("<" + {"f4": "f", "f8": "d", "i4": "i"}[descr], v) for v in values)
    tup = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '<%s', 'fortran_order': False, 'shape': %s, }" % (descr, tup)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)


def any_size(spec, gradc, prog, work, *flags):
    # "B=1,2,3" or "B=2,4 D=3,5": each size's values, the k-th of each together
    sizes = {name: values.split(",") for name, values in (part.split("=") for part in spec.split())}
    names = list(sizes)
    exe = next((f.split("=", 1)[1] for f in flags if f.startswith("--exe=")), None)
    prepare = "--prepare-only" in flags
    ranks = [f for f in flags if f.startswith("--ranks=")]  # gradc's, where given
    os.makedirs(work, exist_ok=True)
    if not exe and not prepare:
        exe = os.path.join(work, os.path.basename(prog) + ".any")
        run([gradc, "build", prog, "--target=cpu", "-o", exe, "--size=" + ",".join(f"{n}=any" for n in names)] + ranks)
    with open(prog) as f:  # the inputs with a size as a dimension: their files give it
        sized = {m.group(1) for m in re.finditer(r"input\s+(\w+)\s*:\s*\w+\[([^\]]*)\]", f.read())
                 if set(names) & {d.strip() for d in m.group(2).split(",")}}
    points = []
    for k in range(len(sizes[names[0]])):
        at = ",".join(f"{n}={sizes[n][k]}" for n in names)
        points.append(at)
        inputs = os.path.join(work, "inputs." + at.replace(",", "."))
        reference = os.path.join(work, "want." + at.replace(",", ".") + ".json")
        if gradc != "-":  # the inputs at this point and the interpreter's outputs on them
            os.makedirs(inputs, exist_ok=True)
            listing = run([gradc, "check", "-v", prog, f"--size={at}"] + ranks)
            world = int(re.match(r".*: (\d+) ranks?", listing).group(1))
            for m in re.finditer(r"^input +(\w+): (f32|f64)\[([^\]]*)\] (shared|per rank)", listing, re.M):
                name, dtype, dims, how = m.groups()
                if name not in sized:
                    continue
                shape = [int(d) for d in dims.split(",") if d.strip()]
                n = math.prod(shape)
                descr = "f4" if dtype == "f32" else "f8"
                for r in ([None] if how == "shared" else range(world)):
                    seed = 0 if r is None else r + 1
                    vals = [math.sin(1.7 * i + 0.3 * seed + len(name)) for i in range(n)]
                    d = inputs if r is None else os.path.join(inputs, f"rank{r}")
                    os.makedirs(d, exist_ok=True)
                    write_npy(os.path.join(d, name + ".npy"), descr, shape, vals)
            with open(reference, "w") as f:
                f.write(run([gradc, "run", prog, f"--inputs={inputs}", "--format=json", "--backend=interp"] + ranks))
        if prepare:
            continue
        with open(reference) as f:
            want = json.load(f)
        got = json.loads(run([exe, f"--inputs={inputs}", "--format=json"]))
        compare(f"{prog} at {at}", want["world"], from_json(got), from_json(want))
    if prepare:
        print(f"{os.path.basename(prog)}: the inputs and the interpreter's outputs at " + "; ".join(points))
        return
    print(f"{os.path.basename(prog)}: the executable for any {', '.join(names)} equals the interpreter at "
          + "; ".join(points))


def lines(size, gradc, prog, path):
    with open(path) as f:
        got = [json.loads(line) for line in f if line.strip()]
    for g in got:
        v = g.pop(size)
        want = json.loads(run([gradc, "run", prog, f"--size={size}={v}", "--format=json", "--backend=interp"]))
        rank0 = {"rank": 0, "outputs": {name: dict(want["ranks"][0]["outputs"][name], data=data)
                                        for name, data in g.items()}}
        compare(f"{prog} at {size} = {v}", 1, from_json({"world": want["world"], "ranks": [rank0]}), from_json(want)[:1])
    print(f"{os.path.basename(prog)}: the class for any {size} equals the interpreter at {size} = "
          + ", ".join(str(json.loads(line)[size]) for line in open(path) if line.strip()))


def main():
    args = sys.argv[1:]
    if args[0] == "--native":
        return native(args[1], args[2:])
    if args[0] == "--any-size":
        return any_size(*args[1:])
    if args[0] == "--lines":
        return lines(*args[1:5])
    mpi = args[0] == "--mpi"
    if mpi:
        args = args[1:]
    gradc, prog, work = args[:3]
    sys.argv = [sys.argv[0]] + args
    os.makedirs(work, exist_ok=True)
    checked = []
    sizes = sys.argv[4:]
    with open(prog) as f:  # a program with a mesh runs on its own mesh where a size is a number of ranks
        has_mesh = any(re.match(r"mesh\s+\w+\s*=", line) for line in f)
    if has_mesh:
        sizes = ["own"] + [s for s in sizes if "=" in s and s != "own"]
    for size in sizes:
        # A size is a number of ranks, or a mesh's axes (dp=2,tp=4) for a program with a mesh.
        if size == "own":
            world = int(re.match(r".*: (\d+) ranks?", run([gradc, "check", "-v", prog])).group(1))
            flags, n = [], str(world)
        else:
            flags = [f"--mesh={size}" if "=" in size else f"--ranks={size}"]
            n = str(math.prod(int(a.split("=")[1]) for a in size.split(","))) if "=" in size else size
        # A program may not fit every world size (g[0:2] of a gather on one rank): skip those.
        if run([gradc, "check", prog] + flags, may_fail=True) is None:
            continue
        checked.append(size if size != "own" else ("its mesh" if has_mesh else n))
        exe = os.path.join(work, f"{os.path.basename(prog)}.{size}")
        run([gradc, "build", prog, "--target=cpu", "-o", exe] + flags)
        want = outputs([gradc, "run", prog] + flags + ["--backend=interp"])[0]
        runs = [outputs([exe, f"--ranks={n}"])[0]]
        if "=" in size:  # a mesh's other sizes than the program's own (native.test runs those)
            runs.append(outputs([gradc, "run", prog] + flags + ["--backend=native"])[0])
        if mpi:
            runs.append(outputs(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", n, exe])[0])
        for got in runs:
            compare(prog, n, got, want)
    assert checked, "no world size fits the program"
    print(f"{os.path.basename(prog)}: the executable equals the interpreter on "
          f"{', '.join(checked)}{'' if has_mesh else ' ranks'}"
          + (" (threads and mpirun)" if mpi else "")
          + (", and so does the native backend" if any("=" in c for c in checked) else ""))


# An output: its dtype (gradc's name), shape, and its elements, either as a list
# (JSON) or as the .npy file's bytes, decoded only where two runs' bytes differ.
class Out:
    def __init__(self, dtype, shape, data=None, raw=b""):
        self.dtype, self.shape, self.data, self.raw = dtype, list(shape), data, raw

    def values(self, begin, end):
        if self.data is not None:
            return self.data[begin:end]
        size = NPY[self.dtype][1]
        chunk = self.raw[begin * size:end * size]
        if self.dtype == "bf16":  # the high half of an f32
            return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                    for h in struct.unpack(f"<{end - begin}H", chunk)]
        return list(struct.unpack(f"<{end - begin}{NPY[self.dtype][2]}", chunk))


# gradc's dtypes as .npy files hold them: descr, bytes an element, struct's format
NPY = {"f32": ("<f4", 4, "f"), "f64": ("<f8", 8, "d"), "f16": ("<f2", 2, "e"), "bf16": ("<V2", 2, "H"),
       "i32": ("<i4", 4, "i")}


def read_npy(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:6] == b"\x93NUMPY", path
    length, start = (struct.unpack("<H", raw[8:10])[0], 10) if raw[6] == 1 else (struct.unpack("<I", raw[8:12])[0], 12)
    header = ast.literal_eval(raw[start:start + length].decode("latin-1"))
    dtype = next(d for d, (descr, _, _) in NPY.items() if descr == header["descr"])
    out = Out(dtype, header["shape"], raw=raw[start + length:])
    assert len(out.raw) == math.prod(out.shape) * NPY[dtype][1], (path, len(out.raw), out.shape)
    return out


def outputs(cmd, may_fail=False):
    """Runs a gradc run or an executable command with --outputs into a new folder: every
    rank's outputs, read from its .npy files (as their bytes: exact, and far faster than
    JSON where outputs have millions of elements). With may_fail, an exit 1 gives
    (None, (1, stderr)) instead of exiting."""
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(cmd + [f"--outputs={d}", "--quiet"], capture_output=True, text=True)
        if p.returncode != 0:
            if may_fail and p.returncode == 1:
                return None, (p.returncode, p.stderr)
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr}")
        ranks = sorted((int(r[4:]), os.path.join(d, r)) for r in os.listdir(d))
        assert [r for r, _ in ranks] == list(range(len(ranks))), ranks
        return [{f[:-4]: read_npy(os.path.join(folder, f)) for f in os.listdir(folder)} for _, folder in ranks], None


def from_json(j):
    for r in j["ranks"]:
        for name, o in r["outputs"].items():
            assert len(o["data"]) == math.prod(o["shape"]), (name, len(o["data"]), o["shape"])
    return [{name: Out(o["dtype"], o["shape"], data=o["data"]) for name, o in r["outputs"].items()} for r in j["ranks"]]


def compare(prog, n, got, want):
    """Every output of every rank within 1e-5 relative (1e-5 absolute near zero), NaN
    where the interpreter's is NaN."""
    assert len(got) == len(want) == int(n), (len(got), len(want), n)
    for rank, (rg, rw) in enumerate(zip(got, want)):
        assert rg.keys() == rw.keys(), (rg.keys(), rw.keys())
        for name, w in rw.items():
            g = rg[name]
            assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape, w.dtype, w.shape)
            bytes_of_both = g.data is None and w.data is None  # then equal bytes need no decoding
            if bytes_of_both and g.raw == w.raw:
                continue
            count, size, step = math.prod(w.shape), NPY[w.dtype][1], 4096
            for begin in range(0, count, step):
                end = min(begin + step, count)
                if bytes_of_both and g.raw[begin * size:end * size] == w.raw[begin * size:end * size]:
                    continue
                for i, (a, b) in enumerate(zip(g.values(begin, end), w.values(begin, end)), begin):
                    same = (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-5 * abs(b) + 1e-5
                    if not same:
                        sys.exit(f"{prog} on {n} ranks: rank {rank} output {name}[{i}] = {a}, interpreter {b}")


if __name__ == "__main__":
    main()
