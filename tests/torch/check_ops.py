#!/usr/bin/env python3
"""The torch target against gradc's interpreter (docs/torch.md), under real
multi-process PyTorch:

    check_ops.py GRADC PROGRAM.dg WORKDIR (--ranks=N | --mesh=dp=2,tp=2) [--data-parallel=AXES]
                 [--seed=S] [--device=cuda] [--prepare-only] [--any-size=B=5,3,1] [--grad=X,...]

emits PROGRAM.dg as a package, gives every rank random inputs (float: small integers,
so that zeros and ties are everywhere and sums are exact; i32: 0 or 1, as int64
tensors) and cotangents for the float outputs, and runs it on N gloo processes: each
calls the op, then backward on sum(<y, ct_y>). The reference is gradc run on the same
program with the objective of docs/torch.md written out in .dg, by the convention of
--data-parallel (every axis by default, today's DDP convention; emit's flag): with T the
other axes, each output y replicated along some of T (the package's _ONE_LOSS) gets a
cotangent that is the same there (`shared` along them) and counts once,
L = all_reduce(sum_y sum(y * ct_y) / copies_y, over=T), differentiated with
grad(L, x, mode=sum, over=[data-parallel axes]); each input is its own variable along
the data-parallel axes (its `shared` keeps only the axes of T; so a program's own grad of
a shared input, whose meaning that changes, is no program for this check). Outputs and
gradients must agree to f32 rounding. Exit 1 with the differences otherwise. Run it with
a PyTorch that has torch.library.custom_op.

--prepare-only writes the package, the inputs and the reference into WORKDIR and stops;
GRADC "-" then runs the op from them, where no gradc is (scripts/gpu_check.sh).

--any-size=B=5,3,1 emits one package for any B (gradc emit --size B=any) and checks it
at each of those values in turn, every rank calling the op at each in one process (the
package compiled once); the reference is gradc run at each. Then the even ranks call it
at the first size and the odd ones at the second: every rank's call must stop with a
RuntimeError that names its own sizes, before the program's collectives. On the CPU each rank also
calls torch.compile(op, dynamic=True, fullgraph=True) at each size: eager's outputs and
gradients bit for bit, in at most two graphs (one for every size but 1, which PyTorch
specializes).

--grad=X,... emits the op with emit's --grad: only those inputs require grad, and only
their gradients are compared.

--device=cuda runs the ranks on NCCL, each on its own GPU (rank r on cuda:r), with the
op's inputs on that GPU and the op and backward on a stream of their own, PyTorch's
current stream then: the package's CUDA ops (it needs as many GPUs as ranks).
"""
import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np


def metadata(init_py):
    """_INPUTS, _OUTPUTS and _MESH of a generated __init__.py, without importing it (the
    first two as _tables() of a package for one size returns them)."""
    values = {}
    for node in ast.parse(open(init_py).read()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("_MESH", "_WORLD", "_DATA_PARALLEL", "_ONE_LOSS", "_GRAD_IN"):
                values[node.targets[0].id] = ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef) and node.name == "_tables" and not node.args.args:
            returned = next(n for n in node.body if isinstance(n, ast.Return)).value
            values["_INPUTS"], values["_OUTPUTS"] = (ast.literal_eval(e) for e in returned.elts[:2])
    return values


def tables(init_py):
    """The _tables function of a package for any size (its shapes as functions of the
    sizes), without importing the package."""
    node = next(n for n in ast.parse(open(init_py).read()).body if isinstance(n, ast.FunctionDef) and n.name == "_tables")
    scope = {}
    exec(ast.unparse(node), scope)
    return scope["_tables"]


def shared_list(axes, mesh=True):
    return "" if not axes else f"shared([{', '.join(axes)}])" if mesh else "shared"


def reference_program(meta):
    """The program with docs/torch.md's objective written out (module docstring): inputs
    shared along the one-loss axes only, cotangent inputs, and each float input's
    gradient as an output named grad_<x>."""
    axes = [a for a, _ in meta["_MESH"]] or ["world"]
    dp = meta["_DATA_PARALLEL"]
    one = [a for a in axes if a not in dp]  # the axes whose ranks' copies are one loss

    def keep(m):  # an input's `shared` keeps the one-loss axes it names
        along = [a.strip(" []") for a in m.group(2)[1:-1].split(",")] if m.group(2) else axes
        return f"{m.group(1)} {shared_list([a for a in one if a in along], bool(meta['_MESH']))}"

    text = re.sub(r"^(input\s+\w+\s*:\s*\w+(?:\[[^\]]*\])?)\s+shared(\([^)]*\)|\b)", keep, meta["_TEXT"], flags=re.M)
    lines = [text.rstrip("\n"), "# the torch op's objective (tests/torch/check_ops.py)"]
    terms = []
    for name, dtype, shape in meta["_OUTPUTS"]:
        if dtype != "i32":
            same = meta["_ONE_LOSS"].get(name, [])
            lines.append(f"input ct_{name} : {dtype}[{', '.join(map(str, shape))}] {shared_list(same, bool(meta['_MESH']))}")
            copies = 1
            for a, size in meta["_MESH"] or [("world", meta["_WORLD"])]:
                copies *= size if a in same else 1
            terms.append(f"sum({name} * ct_{name})" + (f" / {copies}.0" if copies > 1 else ""))
    total = " + ".join(terms)
    over = f", over=[{', '.join(one)}]" if meta["_MESH"] else ""
    lines.append(f"objective_ = {f'all_reduce({total}{over})' if one else total}")
    mode = "" if not one else f", mode=sum, over=[{', '.join(dp)}]" if dp else ", mode=global"
    grads = [meta["_INPUTS"][i][0] for i in meta["_GRAD_IN"]]
    for name in grads:
        lines.append(f"grad_{name} = grad(objective_, {name}{mode})")
    lines.append(f"output {', '.join('grad_' + n for n in grads)}")
    return "\n".join(lines) + "\n"


def small_integers(rng, shape, dtype):
    """Integers in [-2, 2] as an array of `dtype`; bf16 as what ml_dtypes.bfloat16 saves
    (2-byte void: the top half of the f32, exact for these values)."""
    v = rng.integers(-2, 3, size=shape).astype(np.float32)
    if dtype == "bf16":
        return (v.view(np.uint32) >> 16).astype(np.uint16).view("V2")
    return v.astype({"f32": np.float32, "f64": np.float64, "f16": np.float16}[dtype])


def load(path):
    """A .npy file as a torch tensor (2-byte void data: bf16)."""
    import torch

    a = np.load(path)
    if a.dtype.kind == "V":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a)


def make_data(meta, world, seed, workdir):
    rng = np.random.default_rng(seed)
    data = []
    for r in range(world):
        d = {}
        for name, dtype, shape, _ in meta["_INPUTS"]:
            if dtype == "i32":
                d[name] = rng.integers(0, 2, size=shape).astype(np.int64)
            else:
                d[name] = small_integers(rng, shape, dtype)
        for name, dtype, shape in meta["_OUTPUTS"]:
            if dtype != "i32":
                d["ct_" + name] = small_integers(rng, shape, dtype)
        data.append(d)
    # a shared input has one value: rank 0's, or along its axes that of its group's first rank
    shared = {}
    for m in re.finditer(r"^input\s+(\w+)\s*:\s*\w+(?:\[[^\]]*\])?\s+shared(?:\(([^)]*)\))?", meta["_TEXT"], re.M):
        shared[m.group(1)] = [a.strip(" []") for a in m.group(2).split(",")] if m.group(2) else None
    for name, along in meta["_ONE_LOSS"].items():  # a cotangent that is one value along them
        shared["ct_" + name] = along
    axes = meta["_MESH"] or [("world", world)]
    for name, along in shared.items():
        for r in range(world):
            coords = []
            rest = r
            for _, size in reversed(axes):
                coords.append(rest % size)
                rest //= size
            coords = coords[::-1]
            for k, (a, _) in enumerate(axes):
                if along is None or a in along:
                    coords[k] = 0
            first = 0
            for k, (_, size) in enumerate(axes):
                first = first * size + coords[k]
            data[r][name] = data[first][name].copy()
    for r, d in enumerate(data):
        os.makedirs(os.path.join(workdir, "in", f"rank{r}"), exist_ok=True)
        for name, v in d.items():
            np.save(os.path.join(workdir, "in", f"rank{r}", name + ".npy"), v)
    return data


def rendezvous(workdir):
    """The ranks' store: a file in the work folder, not a TCP port, so that runs side by
    side never collide."""
    return os.path.join(os.path.abspath(workdir), "rendezvous")


def rank_main(rank, world, workdir, package, mesh_axes, device, cases):
    import contextlib

    import torch
    import torch.distributed as dist

    stream, backend = contextlib.nullcontext(), "gloo"
    torch.set_num_threads(1 + rank % 2)  # the op's BLAS calls take PyTorch's count (below)
    if device == "cuda":
        backend = "nccl"
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        stream = torch.cuda.stream(torch.cuda.Stream(device))  # not the default stream
    dist.init_process_group(backend, init_method="file://" + rendezvous(workdir), rank=rank, world_size=world)
    sys.path.insert(0, os.path.join(workdir, "pkg"))
    mod = __import__(package)
    op = getattr(mod, package)
    meta = {"inputs": mod._INPUTS, "outputs": mod._OUTPUTS, "grad_in": mod._GRAD_IN}
    kwargs = {}
    if mesh_axes:
        from torch.distributed.device_mesh import init_device_mesh

        kwargs["mesh"] = init_device_mesh(torch.device(device).type, tuple(s for _, s in mesh_axes),
                                          mesh_dim_names=tuple(a for a, _ in mesh_axes))
    def same(value, want):  # bit for bit, a NaN where the other has one
        return torch.equal(value, want) or (value.is_floating_point() and torch.equal(
            value.isnan(), want.isnan()) and torch.equal(value.nan_to_num(0.0), want.nan_to_num(0.0)))

    def step(fn, case, eager=False):
        """fn called on the case's inputs and backward on sum(<y, ct_y>): its outputs and gradients.
        `eager`: fn called again under torch.no_grad(), where the op allocates its outputs
        alone (the saved values stay in the class), gives the same outputs."""
        d = os.path.join(case, "in", f"rank{rank}")
        args = []
        for i, (name, dtype, _, _) in enumerate(meta["inputs"]):
            t = load(os.path.join(d, name + ".npy")).to(device)
            args.append(t.requires_grad_() if i in meta["grad_in"] else t)
        if backend == "nccl":  # the side stream starts after the inputs' copies to the GPU
            stream.stream.wait_stream(torch.cuda.current_stream(device))
        with stream:
            out = fn(*args, **kwargs)
            out = out if isinstance(out, tuple) else (out,)
            objective = 0
            for (name, dtype, _), y in zip(meta["outputs"], out):
                if dtype != "i32":
                    ct = load(os.path.join(d, "ct_" + name + ".npy")).to(device)
                    objective = objective + (y * ct).sum()
            objective.backward()
            result = {name: y.detach().cpu() for (name, _, _), y in zip(meta["outputs"], out)}
            if eager:
                with torch.no_grad():
                    again = fn(*[t.detach() for t in args], **kwargs)
                again = again if isinstance(again, tuple) else (again,)
                for (name, _, _), y in zip(meta["outputs"], again):
                    assert same(y.cpu(), result[name]), f"under no_grad: {name} {y} against {result[name]}"
            for i in meta["grad_in"]:
                result["grad_" + meta["inputs"][i][0]] = args[i].grad.cpu()
        return result

    # a package for any size on the CPU: torch.compile(dynamic=True) too, one graph for
    # every size but 1 (PyTorch specializes sizes 0 and 1), eager's values bit for bit
    compiled = torch.compile(op, dynamic=True, fullgraph=True) if len(cases) > 1 and backend == "gloo" else None
    for case in cases:  # each with its inputs (a package for any size: at each size in turn)
        result = step(op, case, eager=True)
        if compiled is not None:
            for name, value in step(compiled, case).items():
                assert same(value, result[name]), f"torch.compile: {name} {value} against eager {result[name]}"
        with open(os.path.join(case, f"result{rank}.json"), "w") as f:
            json.dump({name: y.tolist() for name, y in result.items()}, f)
    if len(cases) > 1 and world > 1:  # a package for any size, its ranks at two sizes: each stops with its own
        try:
            step(op, cases[rank % 2])
            message = None
        except RuntimeError as e:
            message = str(e)
        assert message and "the sizes differ between ranks (this rank's: " in message, f"ranks at two sizes: {message}"
        with open(os.path.join(workdir, f"differ{rank}.txt"), "w") as f:
            f.write(message)
    if compiled is not None:
        from torch._dynamo.utils import counters

        graphs = counters["stats"]["unique_graphs"]
        assert graphs <= 2, f"torch.compile(dynamic=True): {graphs} graphs for {len(cases)} sizes"
    if backend == "gloo" and "OPENBLAS_NUM_THREADS" not in os.environ:
        import ctypes  # the OpenBLAS the op's kernels call (not its default of one thread a core)
        blas = ctypes.CDLL("libopenblas.so.0").openblas_get_num_threads()
        assert blas == torch.get_num_threads(), f"the op's OpenBLAS runs {blas} threads, PyTorch {torch.get_num_threads()}"
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("program")
    ap.add_argument("workdir")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--mesh")
    ap.add_argument("--data-parallel", help="emit's --data-parallel (default: every axis)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--prepare-only", action="store_true",
                    help="emit the package, the inputs and the reference into WORKDIR, and stop")
    ap.add_argument("--any-size", help="B=5,3,1: a package for any B, checked at each")
    ap.add_argument("--grad", help="emit's --grad: the inputs the op differentiates (default: every float one)")
    a = ap.parse_args()
    size_flag = [f"--ranks={a.ranks}"] if a.ranks else [f"--mesh={a.mesh}"]
    data_parallel = a.data_parallel or ("world" if a.ranks else ",".join(x.split("=")[0] for x in a.mesh.split(",")))
    pkg = os.path.join(a.workdir, "pkg")
    if a.gradc != "-":  # GRADC "-": WORKDIR holds what --prepare-only wrote (scripts/gpu_check.sh)
        shutil.rmtree(a.workdir, ignore_errors=True)  # no inputs left from another program
        os.makedirs(a.workdir)
        any_flag = [f"--size={a.any_size.split('=')[0]}=any"] if a.any_size else []
        grad_flag = [f"--grad={a.grad}"] if a.grad else []
        subprocess.run([a.gradc, "emit", a.program, "--target=torch", "-o", pkg, f"--data-parallel={data_parallel}"]
                       + size_flag + any_flag + grad_flag, check=True)
    package = next(d for d in os.listdir(pkg) if os.path.isdir(os.path.join(pkg, d)))  # torch.dg: torch_
    init_py = os.path.join(a.workdir, "pkg", package, "__init__.py")
    meta = metadata(init_py)
    meta["_TEXT"] = open(a.program).read()
    world = meta["_WORLD"]
    # the cases: the workdir itself, or for a package for any size one folder per size
    cases = [(a.workdir, [])]
    if a.any_size:
        size, values = a.any_size.split("=")
        cases = [(os.path.join(a.workdir, f"{size}{v}"), [f"--size={size}={v}"]) for v in values.split(",")]
    for case, flags in cases:
        if a.gradc == "-":
            continue
        if a.any_size:  # the shapes at this case's size
            ins, outs = tables(init_py)(int(flags[0].split("=")[-1]))[:2]
            meta = dict(meta, _INPUTS=ins, _OUTPUTS=outs)
        os.makedirs(case, exist_ok=True)
        make_data(meta, world, a.seed, case)
        ref_dg = os.path.join(case, "reference.dg")
        with open(ref_dg, "w") as f:
            f.write(reference_program(meta))
        ref = subprocess.run([a.gradc, "run", ref_dg, "--inputs", os.path.join(case, "in"), "--format=json"]
                             + size_flag + flags, check=True, capture_output=True, text=True)
        with open(os.path.join(case, "reference.json"), "w") as f:
            f.write(ref.stdout)
    if a.prepare_only:
        return

    import torch.multiprocessing as mp

    if os.path.exists(rendezvous(a.workdir)):  # left by an earlier run: it would hang
        os.remove(rendezvous(a.workdir))

    mp.spawn(rank_main, args=(world, a.workdir, package, meta["_MESH"], a.device, [c for c, _ in cases]), nprocs=world)
    bad = []
    checked = 0
    for (case, _), r in ((c, r) for c in cases for r in range(world)):
        ref = json.load(open(os.path.join(case, "reference.json")))
        got = json.load(open(os.path.join(case, f"result{r}.json")))
        want = ref["ranks"][r]["outputs"]
        for name, value in got.items():
            w = np.array(want[name]["data"], dtype=np.float64)
            g = np.array(value, dtype=np.float64).reshape(-1)
            checked += 1
            # bf16 and f16: the op's pullback and the reference's grad round in other places
            tol = 2.0 ** -7 if want[name]["dtype"] in ("bf16", "f16") else 1e-5
            if w.shape != g.shape or not np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True):
                bad.append(f"{os.path.basename(case)} rank {r}: {name}: torch op {g.tolist()}, interpreter {w.tolist()}")
    for b in bad:
        print(b)
    if len(cases) > 1 and world > 1:  # the ranks called at two sizes (rank_main)
        for r in range(world):
            print(f"rank {r} at another size than rank {(r + 1) % world}: {open(os.path.join(a.workdir, f'differ{r}.txt')).read()}")
    backend = "gloo" if a.device == "cpu" else "nccl (CUDA tensors)"
    at = f" at {a.any_size.replace('=', ' = ')} (one package for any size)" if a.any_size else ""
    print(f"{os.path.basename(a.program)} on {world} {backend} ranks{at}: {checked} values (outputs and gradients) "
          f"checked against the interpreter, {len(bad)} differ")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
