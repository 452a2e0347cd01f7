"""dgsmith: a differential tester for gradc, in the manner of Csmith, YARPGen and NNSmith.

It generates random well-typed .dg programs (elementwise ops, reductions, views, take
(its indices constants, functions of the rank, or argmax/argmin of a value), matmuls
with transposes, composites, rand, randn and dropout (their numbers drawn in the
simulation as gradc draws them), every collective, defaults, loops, defs, grads of
several orders and modes, 1 to 4 ranks; with --mesh-every, programs over 2-D and 3-D
meshes, axes of size 1 included: collectives over one axis, several in any order and
all, shared(A) inputs, grad over= in every mode, rank(A) and size(A) in values, shapes
and defaults), and for each one checks:
  * the interpreter against PyTorch's autograd on a float64 simulation of every rank
    (the program's inputs are f64, so both compute in double precision), each
    collective run in each of its groups, and the replication of every value tracked
    per mesh axis by docs/language.md's rules (it decides what a gradient is);
  * the native backend (`gradc run`'s default) against the interpreter;
  * with --exe, the executable of `gradc build --target=cpu` against the interpreter,
    as threads and under mpirun;
  * with --low-every, every K-th program with its float inputs in bf16 or f16 instead:
    the interpreter against PyTorch eager computing it in the same dtypes (no less
    accurate against the exact float64 values: low_against_torch), and every backend
    against the interpreter, bit for bit in those types (with --exe the executable for
    any B, with --torch the op, as for f32 programs);
  * with --torch, the op of `gradc emit --target=torch` under multi-process PyTorch
    (on a DeviceMesh for a mesh program) against the interpreter (tests/torch/check_ops.py, its inputs and cotangents random,
    about half the ops emitted with --grad naming some of its float inputs;
    `shared` is dropped from the program for this check, since that check declares
    every input per rank);
  * with --cuda-every, every K-th program's CUDA executable (gradc build --target=cuda),
    with --exe its executable for any B, and with --torch (where that program is checked
    as an op) the op's CUDA ops, compiled and linked with nvcc (not run: no GPU here;
    scripts/gpu_check.sh runs the CUDA code where one is);
  * with --special-every, every K-th program's float input files hold NaN, infinities
    and signed zeros in some elements: every check above, NaN where PyTorch has NaN;
  * with --wide-every, every K-th program's inputs have a last axis of 16 to 24 (times
    a mesh's sizes): its maps that read along rows then run in rows on the CPU
    (map_rows, whose functors check what depends on the row once a row: check_row);
  * with --long-every, every K-th program's inputs have a last axis of 257 to 300: past
    the integers bf16 holds exactly (a sort's places were counted in bf16 and rounded);
  * that gradc accepts the program at all (the generator writes only valid ones).
A disagreement is shrunk to a small program (outputs dropped, statements bypassed and
removed while the same kind of disagreement remains) and written to WORKDIR.

usage: dgsmith.py GRADC WORKDIR [--seed S] [--count N | --seconds T] [--mesh-every K] [--low-every K] [--exe] [--torch]
                  [--cuda-every K] [--special-every K] [--wide-every K] [--long-every K]
                  [--keep-going]
Needs PyTorch (Debian's python3-torch is enough) and NumPy; --torch also the venv of
scripts/torch_venv.sh (PyPI's PyTorch). Run by PyTorch 1.13, f16 programs that need a
CPU kernel it lacks are not checked against it (the last lines say how many); the venv's
Python checks them all. Deterministic for a seed.
Exit 0 when every program agreed; 1 after the first disagreement (or, with
--keep-going, after all of them), each shrunk program named on stdout.
"""
import argparse
import collections
import functools
import json
import math
import operator
import os
import random
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
VENV_PYTHON = os.path.join(HERE, "..", "..", "build", "torch-venv", "bin", "python")
sys.path.insert(0, os.path.join(HERE, ".."))
from npy16 import widened  # noqa: E402 (tests/npy16.py)

torch.set_default_dtype(torch.float64)

# ---------------------------------------------------------------------------------
# Values and statements. A program is a list of statements, each binding one name;
# every statement knows its .dg text and how to compute itself on every rank in torch.


# The mesh of the program being generated or simulated: (axis, size) in declared order. A
# program without a mesh has one axis, "world" (docs/meshes.md).
AXES = [("world", 1)]


def set_mesh(axes):
    global AXES
    AXES = list(axes)


def live():
    """The axes ranks can differ along: those of size above 1 (gradc never varies along another)."""
    return frozenset(a for a, n in AXES if n > 1)


def world_size():
    return math.prod(n for _, n in AXES)


def coord(r, axis):
    """Rank r's index along `axis`: row-major over the axes, the last fastest."""
    names = [a for a, _ in AXES]
    k = names.index(axis)
    return r // math.prod(n for _, n in AXES[k + 1:]) % AXES[k][1]


def groups_over(over):
    """The groups of a collective over the axes `over` (in the order written): the ranks that
    agree on every other axis, each in in-group order (row-major over `over` as written)."""
    groups = {}
    sizes = dict(AXES)
    for r in range(world_size()):
        key = tuple(coord(r, a) for a, _ in AXES if a not in over)
        pos = 0
        for a in over:
            pos = pos * sizes[a] + coord(r, a)
        groups.setdefault(key, {})[pos] = r
    return [[g[i] for i in range(len(g))] for g in groups.values()]


def in_groups(ranks, over, fn):
    """A collective over `over` on per-rank tensors: fn maps the members' tensors (in
    in-group order) to their results, in each group on its own."""
    out = [None] * len(ranks)
    for grp in groups_over(over):
        for r, t in zip(grp, fn([ranks[r] for r in grp])):
            out[r] = t
    return out


# The simulation of an f64 program computes every float value in float64. That of a bf16
# or f16 program (low_against_torch) keeps each value's own dtype, as PyTorch eager would.
KEEP_DTYPES = False


def sim_float(t):
    """The dtype a float value's tensor takes in the simulation."""
    return t.dtype if KEEP_DTYPES and t.is_floating_point() else torch.float64


def not_finite(t):
    """How many of a tensor's elements are NaN or infinite (none of an integer one)."""
    return int((~torch.isfinite(t.detach())).sum()) if t.is_floating_point() else 0


class Val:
    """A value in the simulation: per-rank tensors, its dtype, and the mesh axes along which
    gradc's replication analysis (docs/language.md sections 5, 6 and 8) says it varies
    (an empty set: identical on every rank). Every float value is a variable autograd can
    differentiate with respect to: one that depends on nothing differentiable (a constant,
    sign(x)) becomes a leaf of its own."""

    def __init__(self, ranks, dtype, vary):
        if dtype != "i32":
            ranks = [t if t.requires_grad else t.detach().to(sim_float(t)).requires_grad_(True) for t in ranks]
        self.ranks = ranks  # list of torch tensors, one per rank
        self.dtype = dtype  # "f64", "f32" or "i32"
        self.vary = frozenset(vary) & live()

    @property
    def rep(self):
        return not self.vary

    @property
    def shape(self):
        return tuple(self.ranks[0].shape)


def philox(seed, n, normal=False):
    """rand([n], seed=seed) (or randn) as gradc computes it (docs/language.md, "Random
    numbers"): Philox4x32-10 with counter i and key (seed, 0x6772646D); rand takes the top
    24 bits of the first word, randn Box-Muller on the first two in float64."""
    m = np.uint64(0xFFFFFFFF)
    i = np.arange(n, dtype=np.uint64)
    c = [i & m, i >> np.uint64(32), np.zeros(n, np.uint64), np.zeros(n, np.uint64)]
    k0, k1 = seed & 0xFFFFFFFF, 0x6772646D
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
        p0, p1 = np.uint64(0xD2511F53) * c[0], np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & m, (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & m]
    top = (c[0] >> np.uint64(8)).astype(np.float64)
    if not normal:
        return (top * 2.0 ** -24).astype(np.float32)
    u1, u2 = (top + 1) * 2.0 ** -24, (c[1] >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    return (np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * 3.14159265358979323846 * u2)).astype(np.float32)


def union(*vals):
    return frozenset().union(*[v.vary for v in vals])


class Stmt:
    """name = text; `sim(env, world)` gives its Val from the values it reads (`args`)."""

    def __init__(self, name, text, args, sim, kind="let", prologue=""):
        self.name, self.text, self.args, self.sim, self.kind = name, text, list(args), sim, kind
        self.prologue = prologue  # a def the statement calls, written before the program's statements

    def source(self):
        return self.text if "\n" in self.text or self.kind == "raw" else f"{self.name} = {self.text}"


class Input:
    """`shared`: False (one value per rank), True (shared: one everywhere) or a list of axes
    (shared(dp): one along them)."""

    def __init__(self, name, shape, dtype, shared, data, default=None, default_sim=None, shape_text=None):
        self.name, self.shape, self.dtype, self.shared = name, tuple(shape), dtype, shared
        self.data = data  # per-rank numpy arrays written as files, or None (the default is used)
        self.default, self.default_sim = default, default_sim
        self.shape_text = shape_text or [str(d) for d in shape]  # a dimension may be written `2 * size(tp)`

    def vary(self):
        if self.shared is True:
            return frozenset()
        return live() - frozenset(self.shared or [])

    def shared_text(self):
        if self.shared is True:
            return " shared"
        if not self.shared:
            return ""
        return f" shared({self.shared[0]})" if len(self.shared) == 1 else f" shared([{', '.join(self.shared)}])"


class Program:
    def __init__(self, world, mesh=None):
        self.world = world
        self.mesh = mesh  # [(axis, size)] for a program with a mesh, else None
        self.inputs = []
        self.stmts = []
        self.outputs = []

    def axes(self):
        return self.mesh or [("world", self.world)]

    def mesh_flag(self):
        return ",".join(f"{a}={n}" for a, n in self.mesh)

    def text(self):
        lines = [f"mesh {', '.join(f'{a}={n}' for a, n in self.mesh)}" if self.mesh else f"world {self.world}"]
        for i in self.inputs:
            t = f"{i.dtype}[{', '.join(i.shape_text)}]"
            lines.append(f"input {i.name} : {t}{i.shared_text()}" + (f" = {i.default}" if i.data is None else ""))
        for s in self.stmts:
            if s.prologue:
                lines.append(s.prologue)
        lines += [s.source() for s in self.stmts]
        lines.append("output " + ", ".join(self.outputs))
        return "\n".join(lines) + "\n"

    def write(self, folder):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "p.dg"), "w") as f:
            f.write(self.text())
        ins = os.path.join(folder, "in")
        shutil.rmtree(ins, ignore_errors=True)
        os.makedirs(ins)
        for i in self.inputs:
            if i.data is None:
                continue
            if i.shared is True:
                np.save(os.path.join(ins, i.name + ".npy"), i.data[0])
            else:  # per rank (shared(A): the same along A, as the data check requires)
                for r in range(self.world):
                    os.makedirs(os.path.join(ins, f"rank{r}"), exist_ok=True)
                    np.save(os.path.join(ins, f"rank{r}", i.name + ".npy"), i.data[r])
        return os.path.join(folder, "p.dg"), ins


def bf16_array(a):
    """a (any float array) rounded to bfloat16, round-to-nearest-even through f32, as the
    2-byte void array gradc reads as bf16 (what ml_dtypes.bfloat16 saves)."""
    u = np.ascontiguousarray(np.asarray(a, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r.view("V2")


def low_precision(prog, dtype):
    """prog with its float inputs declared `dtype` (bf16 or f16) and their data rounded to
    it: every value computed from them is then bf16 or f16 (PyTorch's promotion), where a
    creation op's f32 value does not meet them first."""
    q = Program(prog.world, prog.mesh)
    q.stmts, q.outputs = prog.stmts, prog.outputs
    for i in prog.inputs:
        if i.dtype == "i32":
            q.inputs.append(i)
            continue
        data = default = None
        if i.data is not None:
            data = [npy_data(d, dtype) for d in i.data]
        else:
            default = f"cast({i.default}, {dtype})"
        q.inputs.append(Input(i.name, i.shape, dtype, i.shared, data, default, i.default_sim, i.shape_text))
    return q


NP = {"f64": np.float64, "f32": np.float32, "i32": np.int32}


def npy_data(a, dtype):
    """a as the .npy data of an input of `dtype` (bf16: bf16_array's 2-byte values)."""
    return bf16_array(a) if dtype == "bf16" else np.asarray(a, dtype={**NP, "f16": np.float16}[dtype])


def promote(a, b):
    """gradc's promotion of two dtypes (docs/language.md): the wider wins, an i32 value
    widens no float one, and bf16 with f16 is f32."""
    if {a, b} == {"bf16", "f16"}:
        return "f32"
    rank = {"i32": 0, "bf16": 1, "f16": 1, "f32": 2, "f64": 3}
    return max(a, b, key=rank.get)


def float_of(d):
    return "f32" if d == "i32" else d


# the float dtypes, as PyTorch's (the simulation computes i32 in int64)
FLOAT_TORCH = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
FLOAT_NAME = {t: name for name, t in FLOAT_TORCH.items()}


def simulate(prog, types=None):
    """Every output on every rank, as the .dg semantics define them, computed by PyTorch:
    in float64, or with `types` (gradc's dtype of each named value, gradc_types), in each
    value's own dtype, as PyTorch eager computes a bf16 or f16 program."""
    global KEEP_DTYPES
    set_mesh(prog.axes())
    KEEP_DTYPES = types is not None
    try:
        env = {}
        for i in prog.inputs:
            if i.data is not None:
                ranks = [torch.tensor(widened(i.data[r]) if i.dtype != "i32" else i.data[r].astype(np.int64))
                         for r in range(prog.world)]
            else:
                ranks = i.default_sim(prog.world)
            if i.dtype in ("bf16", "f16"):  # a default is computed in f32, then converted
                low = FLOAT_TORCH[i.dtype]
                ranks = [t.to(torch.float32).to(low).to(low if KEEP_DTYPES else torch.float64) for t in ranks]
            if i.dtype != "i32":
                ranks = [t.detach().clone().requires_grad_(True) for t in ranks]
            env[i.name] = Val(ranks, i.dtype, i.vary())

        def bind(name, v):
            if types is not None and types.get(name) in FLOAT_TORCH:
                # where PyTorch's promotion differs from gradc's (a 0-d f32 tensor does not
                # widen a bf16 one in PyTorch), the value takes gradc's dtype
                v.ranks = [t.to(FLOAT_TORCH[types[name]]) for t in v.ranks]
            env[name] = v
        for s in prog.stmts:
            if hasattr(s, "names"):  # a grad binds several names
                for n, v in zip(s.names, s.multi(env, prog.world)):
                    bind(n, v)
            else:
                bind(s.name, s.sim(env, prog.world))
        return {o: [t.detach() for t in env[o].ranks] for o in prog.outputs}, env
    finally:
        KEEP_DTYPES = False


# ---- simulation helpers ------------------------------------------------------------


def promoted(ts):
    """Float operands in the dtype gradc's promotion gives them (docs/language.md): the
    widest, and bf16 with f16 is f32. PyTorch's differs for 0-d tensors (they do not widen
    a tensor of more dimensions), and its matmul takes no mixed operands."""
    fl = [FLOAT_NAME[t.dtype] for t in ts if t.is_floating_point()]
    if not KEEP_DTYPES or len(set(fl)) < 2:
        return ts
    to = FLOAT_TORCH[functools.reduce(promote, fl)]
    return [t.to(to) if t.is_floating_point() else t for t in ts]


def local(fn, dtype, *vals):
    """An op applied on each rank; varying if any operand varies."""
    world = len(vals[0].ranks)
    return Val([fn(*promoted([v.ranks[r] for v in vals])) for r in range(world)], dtype, union(*vals))


def clones(t, world):
    return [t.clone() for _ in range(world)]  # one variable per rank, as gradc's ranks hold


class _Dropped(torch.autograd.Function):
    """`out` in the forward; in the backward a zero cotangent for each of `dropped`, the
    operands a collective moves nowhere (a broadcast's and a scatter's on ranks other than
    the root): gradc's adjoint sends them a zero, as torch.distributed.nn's do, which the
    ops before then carry (0 times an infinity is NaN), where autograd would send nothing."""

    @staticmethod
    def forward(ctx, out, *dropped):
        ctx.shapes = [(d.shape, d.dtype) for d in dropped]
        return out.clone()

    @staticmethod
    def backward(ctx, g):
        return (g, *[torch.zeros(shape, dtype=dtype) for shape, dtype in ctx.shapes])


def dropping(out, xs, kept):
    """out, with a zero cotangent for every xs[i] whose i is not in kept."""
    dropped = [x for i, x in enumerate(xs) if i not in kept and x.requires_grad]
    return _Dropped.apply(out, *dropped) if dropped else out.clone()  # a value of its own, as gradc's


# The composites whose PyTorch kernels save their result for the backward are
# simulated by docs/language.md's expansions, as gradc computes them: a gradient that is
# differentiated again with respect to their output then has the paths gradc's rules
# give it (docs/semantics.md, "A gradient's gradient with respect to an intermediate").
# torch.prod, torch.softmax, torch.log_softmax and torch.logsumexp would add a path
# through their saved output.
def logsumexp_ref(t, dims, keep, finite_shift=True):
    # an infinite maximum shifts by 0 (PyTorch's logsumexp: a row of -inf gives -inf, a row
    # with +inf +inf); log_softmax's does not (NaN there, as PyTorch's)
    m = t.amax(dim=dims, keepdim=True).detach()
    if finite_shift:
        m = torch.where(m.isfinite(), m, torch.zeros_like(m))
    r = torch.log(torch.exp(t - m).sum(dim=dims, keepdim=True)) + m
    return r if keep else r.reshape([n for i, n in enumerate(t.shape) if i not in [d % t.dim() for d in dims]])


def logaddexp_ref(a, b):
    """torch.logaddexp, but where a and b are the same infinity: there gradc's derivative
    is 1/2 to each (its limit along a = b; docs/language.md), PyTorch's NaN."""
    tie = (a == b) & a.isinf()
    return torch.where(tie, (a + b) / 2, torch.logaddexp(torch.where(tie, 0, a), torch.where(tie, 0, b)))


def softmax_ref(t, ax):
    e = torch.exp(t - t.amax(dim=ax, keepdim=True))
    return e / e.sum(dim=ax, keepdim=True)


def log_softmax_ref(t, ax):
    return t - logsumexp_ref(t, [ax], True, finite_shift=False)


def layer_norm_ref(t):
    # docs/language.md's formula, rounded as gradc rounds it: a one-element row is exactly 0
    # (F.layer_norm's kernel gives 1e-15 there, which decides a tie in a later minimum)
    d = t - t.sum(dim=-1, keepdim=True) / t.shape[-1]
    return d * torch.rsqrt((d * d).sum(dim=-1, keepdim=True) / t.shape[-1] + 1e-5)


def reduce_stack(ts, op):
    s = torch.stack(ts)
    if op == "sum":
        return s.sum(0)
    if op == "avg":
        return s.sum(0) / len(ts)
    if op == "prod":  # a value of its own, not the one rank's operand itself (grad with respect to it)
        return functools.reduce(operator.mul, ts[1:], ts[0].clone())
    if op == "max":
        return s.amax(0)  # ties share the derivative evenly, as gradc's spec says
    return s.amin(0)


def grad_sim(loss, ws, mode, over, create_graph=True):
    """grad(loss, w..., mode, over=): docs/language.md sections 6 and 8. The ranks that share
    their coordinates on `over` (None: every axis) form a group whose loss is one value,
    replicated along the other axes: L = c * (sum over groups of sum(loss_g)), c = 1 for sum
    and 1/|groups| for mean (global: over=[]). Each rank's copy of its group's loss counts
    1/M, M the copies. A value replicated along axes R is one variable for the ranks that
    differ only along R: its gradient is the total over them, the same on each."""
    names = [a for a, _ in AXES]
    over = set(names if over is None else over)
    world = world_size()
    copies = math.prod(n for a, n in AXES if a not in over)
    L = sum(t.sum() for t in loss.ranks) / copies
    if mode == "mean":
        L = L / math.prod(n for a, n in AXES if a in over)
    flat = [t for w in ws for t in w.ranks]
    need = [t.requires_grad for t in flat]
    inputs = [t for t, n in zip(flat, need) if n]
    got = torch.autograd.grad(L, inputs, create_graph=create_graph, allow_unused=True) if inputs and L.requires_grad else [None] * len(inputs)
    it = iter(got)
    per = [next(it) if n else None for n in need]
    per = [g if g is not None else torch.zeros_like(t) for g, t in zip(per, flat)]
    out = []
    for k, w in enumerate(ws):
        mine = per[k * world:(k + 1) * world]
        # the replication analysis of the backward graph: a gradient is replicated where every
        # cotangent reaching it is; the simulation keeps the variable's own axes
        out.append(Val(in_groups(mine, [a for a in names if a not in w.vary], lambda gs: clones(sum(gs), len(gs))),
                       w.dtype, w.vary))
    return out


# ---------------------------------------------------------------------------------
# The generator.

COMPARE = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne}
UNARY = ["neg", "exp", "log", "sqrt", "rsqrt", "abs", "relu", "sigmoid", "tanh", "sin", "cos", "square",
         "reciprocal", "erf", "silu", "softplus", "gelu", "gelu_tanh", "sign", "log1p", "expm1", "log_sigmoid"]


# the ops whose value the native backend computes with libmvec's vector functions in a
# loop's body and glibc's scalar ones in its tail (or from them: randn's Box-Muller):
# f64 exp, log, sin, cos and pow, f32 sin, cos and pow (f32 exp, log, log1p, expm1, tanh
# and erf are gradc's own, the same bits everywhere); the others are kept for the sums
# inside them, which the native code adds in another order
VECTOR_MATH = re.compile(r"\b(exp|log|log1p|expm1|sin|cos|tanh|sigmoid|softplus|silu|gelu|erf|pow|logsumexp|log_sigmoid|"
                         r"softmax|log_softmax|cross_entropy|scaled_dot_product_attention|binary_cross_entropy_with_logits|randn|rand)\(|\*\*")


def torch_unary(name):
    F = torch.nn.functional
    return {
        "neg": lambda x: -x, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
        "abs": torch.abs, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "sin": torch.sin,
        "cos": torch.cos, "square": torch.square, "reciprocal": torch.reciprocal, "erf": torch.erf,
        "silu": F.silu, "softplus": F.softplus, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "sign": lambda x: torch.sign(x).detach(), "log1p": torch.log1p, "expm1": torch.expm1,
        "log_sigmoid": F.logsigmoid,
    }[name]


def self_attention(t, causal):
    """PyTorch's scaled_dot_product_attention(t, t, t, is_causal=causal); written out
    where PyTorch has none (Debian's 1.13): no row is wholly masked in self-attention."""
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    if sdpa:
        return sdpa(t, t, t, is_causal=causal)
    s = t @ t.transpose(-2, -1) / math.sqrt(t.shape[-1])
    if causal:
        n = t.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1) @ t


# what --special-every puts into some elements of a program's float input files
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0]


class Gen:
    def __init__(self, rng, world, mesh=None, special=False):
        self.rng = rng
        self.special = special
        self.p = Program(world, mesh)
        set_mesh(self.p.axes())
        self.n = 0
        self.env = {}
        self.grads = []  # names of gradient results
        self.deps = {}  # name: the names it is computed from, itself included
        self.pool = list(RISKY_NAMES)
        rng.shuffle(self.pool)

    # -- helpers --
    def fresh(self, prefix="v"):
        self.n += 1
        if prefix != "f" and self.pool and self.rng.random() < 0.25:
            return self.pool.pop()  # a name the generated C++ might trip over
        return f"{prefix}{self.n}"

    def dims(self):
        return self.rng.choice([1, 2, 3, 4])

    def pick(self, pred=lambda v: True, floats=True):
        names = [n for n, v in self.env.items() if pred(v) and (not floats or v.dtype != "i32")]
        return self.rng.choice(names) if names else None

    def add(self, text, args, sim, kind="let", prologue="", prefix="v"):
        name = self.fresh(prefix)
        st = Stmt(name, text, args, sim, kind, prologue)
        try:
            v = sim(self.env, self.p.world)
        except (RuntimeError, ValueError, IndexError) as e:  # a generator mistake: skip this candidate
            raise Skip(str(e))
        if v.dtype != "i32":
            # a NaN or an infinity only where an operand brings one (--special-every's
            # inputs), not one the op makes of finite values (log of a negative value)
            finite = all(not_finite(t) == 0 for t in v.ranks)
            carried = any(not_finite(t) for a in args if a in self.env for t in self.env[a].ranks)
            big = max(float(t.detach().abs().nan_to_num(0, 0, 0).max()) if t.numel() else 0 for t in v.ranks)
            if (not finite and not carried) or big > 1e4:
                raise Skip("out of range")
        st.text = text.replace("@@", name)
        self.p.stmts.append(st)
        self.env[name] = v
        self.deps[name] = set().union(*[self.deps[a] for a in args]) | {name}
        return name

    def axis_names(self):
        return [a for a, _ in self.p.axes()]

    def mult(self):
        """A factor for a dimension: 1, the world, or (with a mesh) the size of one axis or of
        two, so that collectives over them divide it; with its text (`size(tp)`)."""
        if not self.p.mesh:
            return (self.p.world, "world") if self.rng.random() < 0.4 else (1, "")
        axes = self.axis_names()
        k = self.rng.random()
        if k < 0.3:
            return 1, ""
        if k < 0.45:
            return self.p.world, "world"
        pick = self.rng.sample(axes, self.rng.choice([1, 1, 2]))
        sizes = dict(self.p.mesh)
        return math.prod(sizes[a] for a in pick), " * ".join(f"size({a})" for a in pick)

    def input(self, shape, shared=None, dtype="f64", shape_text=None):
        name = self.fresh("in")
        world = self.p.world
        rng = self.rng
        if shared is None:
            shared = rng.random() < 0.3
            if self.p.mesh and rng.random() < 0.5:  # shared along some axes (shared(dp)), in any order
                shared = rng.sample(self.axis_names(), rng.randrange(1, len(self.p.mesh)))
        use_default = rng.random() < 0.25
        vary = live() - frozenset(self.axis_names() if shared is True else shared or [])
        if use_default:
            # a default is computed as written: its literals are f32 (docs/language.md section 2),
            # and the result is converted to the declared dtype
            c = round(rng.uniform(-1.5, 1.5), 3)
            f32 = lambda v: torch.tensor(v, dtype=torch.float32)
            # an index the default may vary with: rank, or rank(A) along an axis it is not shared along
            if self.p.mesh:
                free = [a for a in self.axis_names() if not (shared is True or a in (shared or []))]
                along = rng.choice(free) if free else None
            else:
                along = None if shared else "rank"
            if along is None:
                # a lone literal takes the declared dtype, as any literal does from its context
                default, fn = f"{c}", (lambda w, c=c, s=shape: [torch.full(s, c) for _ in range(w)])
            else:
                k = round(rng.uniform(-1, 1), 3)
                idx = "rank" if along == "rank" else f"rank({along})"
                at = (lambda r: r) if along == "rank" else (lambda r, a=along: coord(r, a))
                default = f"{c} + {k} * {idx}"
                fn = lambda w, c=c, k=k, s=shape, at=at: [(f32(c) + f32(k) * at(r)).double().expand(s).clone() for r in range(w)]
            inp = Input(name, shape, dtype, shared, None, default, fn, shape_text)
        else:
            # one array per distinct value: per rank, or per coordinate on the axes it varies along
            keyed = {}
            data = []
            special = self.special and dtype != "i32" and rng.random() < 0.6  # this input's files hold some
            for r in range(world):
                key = tuple(coord(r, a) for a in sorted(vary)) if shared is not False else r
                if key not in keyed:
                    values = [rng.uniform(-2, 2) for _ in range(int(np.prod(shape)))]
                    if special:  # NaN, infinities and signed zeros in some elements
                        values = [rng.choice(SPECIAL) if rng.random() < 0.1 else v for v in values]
                    keyed[key] = np.array(values).reshape(shape)
                data.append(keyed[key])
            inp = Input(name, shape, dtype, shared, [d.astype(NP[dtype]) for d in data], shape_text=shape_text)
        self.p.inputs.append(inp)
        if inp.data is not None:
            ranks = [torch.tensor(d.astype(np.float64)) for d in inp.data]
        else:
            ranks = inp.default_sim(world)
        self.env[name] = Val([t.clone().requires_grad_(True) for t in ranks], dtype, vary)
        self.deps[name] = {name}
        return name

    # -- statement kinds: each returns the new name or raises Skip --
    def unary(self):
        x = self.pick()
        op = self.rng.choice(UNARY)
        v = self.env[x]
        lo = min(float(t.detach().min()) for t in v.ranks) if v.ranks[0].numel() else 1
        hi = max(float(t.detach().max()) for t in v.ranks) if v.ranks[0].numel() else 1
        fn = torch_unary(op)
        inner, pre = x, lambda t: t
        if op in ("log", "sqrt", "rsqrt", "log1p") and lo <= 0.05:
            inner, pre = f"abs({x}) + 0.5", lambda t: t.abs() + 0.5
        if op == "reciprocal" and (lo <= 0.05 and hi >= -0.05):
            inner, pre = f"square({x}) + 0.5", lambda t: t * t + 0.5
        if op in ("exp", "expm1") and hi > 5:
            raise Skip("exp of large")
        name = {"gelu": "gelu", "gelu_tanh": "gelu"}.get(op, op)
        extra = ", approximate=tanh" if op == "gelu_tanh" else ""
        dt = v.dtype
        return self.add(f"{name}({inner}{extra})", [x], lambda env, w: local(lambda t: fn(pre(t)), dt, env[x]))

    def no_near_tie(self, a, b, bsim, dt):
        """A comparison of two values (cmp, where's condition): not where an element pair ties
        to within rounding, unless both are exactly 0. Which side of the tie each backend
        lands on depends on how it rounds: `x @ transpose(w)` and `einsum("ij,kj->ik", x, w)`
        are one value in gradc and differ by an ulp in PyTorch's float64, so `(e <= v) * e`
        was 0 there and e here."""
        tol = {"f64": 1e-12, "f32": 1e-5}.get(dt, 3e-2)
        for r in range(len(self.env[a].ranks)):
            x, y = torch.broadcast_tensors(self.env[a].ranks[r].detach().double(), bsim(self.env, r).detach().double())
            scale = 1 + torch.maximum(x.abs(), y.abs())
            if bool((((x - y).abs() <= tol * scale) & ((x != 0) | (y != 0))).any()):
                raise Skip("a near tie in a comparison")

    def no_vector_math_tie(self, x, axes):
        """A max or min over axes of x: not where two of the elements it picks from tie to
        within rounding while x is computed with a math function (exp, log, sin, ...): the
        native backend's loops call libmvec's vector functions in their vector body and
        glibc's scalar ones in their tail, which may differ by an ulp (docs/native.md), so
        values that tie in the interpreter may not there, and the derivative split among
        the tied ones (docs/language.md) goes to one of them."""
        texts = [st.text for st in self.p.stmts if st.name in self.deps[x]]
        if not any(VECTOR_MATH.search(t) for t in texts):
            return
        v = self.env[x]
        tol = {"f64": 1e-12, "f32": 1e-5}.get(v.dtype, 3e-2)
        for t in v.ranks:
            t = t.detach().double()
            kept = [d for d in range(t.dim()) if d not in axes]
            rows = t.permute(kept + list(axes)).reshape(-1, math.prod(t.shape[d] for d in axes))
            if rows.shape[1] < 2 or rows.shape[0] == 0:
                continue
            for largest in (True, False):
                top = rows.topk(2, dim=1, largest=largest).values
                if bool(((top[:, 0] - top[:, 1]).abs() <= tol * (1 + top[:, 0].abs())).any()):
                    raise Skip("a tie among values of a vector math function")

    def binary(self):
        a = self.pick()
        sa = self.env[a].shape
        # an operand of the same shape, a broadcastable one, a scalar or a literal
        cands = [n for n, v in self.env.items() if v.dtype != "i32" and broadcastable(v.shape, sa)]
        b = self.rng.choice(cands) if cands and self.rng.random() < 0.8 else None
        op = self.rng.choice(["+", "-", "*", "/", "maximum", "minimum", "pow", "where", "cmp"])
        lit = round(self.rng.uniform(0.5, 2), 2)
        bt, bexpr = (b, b) if b else (None, f"{lit}")
        da = self.env[a].dtype
        dt = promote(da, self.env[b].dtype) if b else da
        bsim = (lambda env, r: env[b].ranks[r]) if b else (lambda env, r: torch.tensor(lit))
        args = [a] + ([b] if b else [])

        def run(fn, dtype=dt):
            def sim(env, w):
                ranks = [fn(env[a].ranks[r], bsim(env, r)) for r in range(w)]
                return Val(ranks, dtype, union(*[env[x] for x in args]))
            return sim
        if op in "+-*":
            f = {"+": torch.add, "-": torch.sub, "*": torch.mul}[op]
            return self.add(f"{a} {op} {bexpr}", args, run(f))
        if op == "/":
            if not b:
                return self.add(f"{a} / {lit + 0.5}", args, run(lambda x, y: x / (lit + 0.5)))
            return self.add(f"{a} / (abs({b}) + 0.5)", args, run(lambda x, y: x / (y.abs() + 0.5)))
        if op in ("maximum", "minimum"):
            f = torch.maximum if op == "maximum" else torch.minimum
            return self.add(f"{op}({a}, {bexpr})", args, run(lambda x, y: f(x, y.broadcast_to(torch.broadcast_shapes(x.shape, y.shape)) if y.dim() == 0 else y)))
        if op == "pow":
            return self.add(f"pow(abs({a}) + 0.5, {bexpr})", args, run(lambda x, y: torch.pow(x.abs() + 0.5, y)))
        if op in ("where", "cmp") and b and b != a:
            self.no_near_tie(a, b, bsim, dt)
        if op == "where":
            if not b:
                raise Skip("where needs two values")
            return self.add(f"where({a} > {b}, {a}, {b} * 0.5)", args,
                            run(lambda x, y: torch.where(x > y, x, y * 0.5)))
        cmp = self.rng.choice(["<", "<=", ">", ">=", "==", "!="])
        f = COMPARE[cmp]
        return self.add(f"({a} {cmp} {bexpr}) * {a}", args, run(lambda x, y: f(x, y).to(x.dtype).detach() * x))

    def literal_op(self):
        """A named literal bound to an op on literals and static integers (every unary and
        binary op), then used with a value: gradc computes it when it compiles, by the op's
        own scalar function in the operands' promoted dtype (docs/language.md), exactly as
        the op runs on tensors; ** + - * // % between integers is static (exact) arithmetic."""
        rng = self.rng
        x = self.pick()
        w = self.p.world
        ints = [("world", w), ("(world - 1)", w - 1), ("2", 2), ("(-3)", -3), ("(7 // 2)", 3), ("((-7) % 3)", 2)]
        floats = [("0.5", 0.5), ("(-1.5)", -1.5), ("2.25", 2.25), ("0.0", 0.0), ("3.0", 3.0), ("(-0.25)", -0.25)]
        f32 = lambda v: torch.tensor(v, dtype=torch.float32)

        def operand():
            return rng.choice(ints if rng.random() < 0.4 else floats)
        op = rng.choice([u for u in UNARY if u != "gelu_tanh"] + ["+", "-", "*", "/", "pow", "maximum", "minimum", "**", "//", "%",
                                     "<", "<=", ">", ">=", "==", "!="])
        inexact = False
        if op in UNARY:  # a float op on an f32 constant: an f32 value
            (ta, a) = rng.choice(floats)
            text, value = f"{op}({ta})", torch_unary(op)(f32(a)).double()
            # PyTorch's f32 silu, gelu, erf... may differ from gradc's in the last bit: the
            # program's f64 values are then compared as f32 computations (check)
            inexact = op not in ("neg", "abs", "relu", "sqrt", "square", "reciprocal", "sign")
        else:
            (ta, a), (tb, b) = operand(), operand()
            both_int = all(isinstance(v, int) for v in (a, b))
            if op in ("//", "%", "**") and not both_int:
                (ta, a), (tb, b) = rng.choice(ints), rng.choice(ints)
                both_int = True
            if op in ("/", "//", "%") and b == 0:
                raise Skip("division by zero")
            if op in ("**", "pow") and (b < 0 or (a == 0 and b == 0)):
                raise Skip("a negative or 0 ** 0 exponent")
            if op == "pow" and a < 0 and not float(b).is_integer():
                raise Skip("pow of a negative base")
            text = f"{op}({ta}, {tb})" if op in ("pow", "maximum", "minimum") else f"{ta} {op} {tb}"
            if both_int and op in ("+", "-", "*", "//", "%", "**"):  # static integers, exact
                value = torch.tensor(float({"+": operator.add, "-": operator.sub, "*": operator.mul,
                                            "//": operator.floordiv, "%": operator.mod, "**": operator.pow}[op](a, b)))
            elif both_int and op in ("maximum", "minimum"):  # i32
                value = torch.tensor(float(max(a, b) if op == "maximum" else min(a, b)))
            else:  # in f32, as the op runs on f32 values (comparisons: 1 or 0)
                fa, fb = f32(a), f32(b)
                f = COMPARE.get(op) or {"+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div, "pow": torch.pow,
                                    "maximum": torch.maximum, "minimum": torch.minimum}[op]
                value = f(fa, fb).to(torch.float32).double()
        if not math.isfinite(float(value)):
            raise Skip("not finite")
        c = self.fresh("c")
        dt = self.env[x].dtype
        name = self.add(f"{c} = {text}\n@@ = {x} * {c}", [x],
                        lambda env, w: local(lambda t: t * value, dt, env[x]), kind="raw")
        self.p.stmts[-1].inexact = inexact
        return name

    def reduction(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            raise Skip("no tensor")
        v = self.env[x]
        r = len(v.shape)
        op = self.rng.choice(["sum", "mean", "max", "min", "logsumexp"])
        kind = self.rng.random()
        if kind < 0.3:
            axes, atext = list(range(r)), ""
        elif kind < 0.7 or r == 1:
            ax = self.rng.randrange(-r, r)
            axes, atext = [ax % r], f", axis={ax}"
        else:
            axes = sorted(self.rng.sample(range(r), 2))
            atext = f", axis=[{axes[0]}, {axes[1]}]"
        keep = self.rng.random() < 0.3
        ktext = ", keepdims=true" if keep else ""
        if op in ("max", "min"):
            self.no_vector_math_tie(x, axes)

        def f(t):
            if op == "sum":
                return t.sum(dim=axes, keepdim=keep) if axes else t
            if op == "mean":
                return t.mean(dim=axes, keepdim=keep)
            if op == "max":
                return t.amax(dim=axes, keepdim=keep)
            if op == "min":
                return t.amin(dim=axes, keepdim=keep)
            return logsumexp_ref(t, axes, keep)
        return self.add(f"{op}({x}{atext}{ktext})", [x], lambda env, w: local(f, env[x].dtype, env[x]))

    def matmul(self):
        x = self.pick(lambda v: len(v.shape) == 2)
        if x is None:
            raise Skip("no matrix")
        m, k = self.env[x].shape
        ta = self.rng.random() < 0.4
        if ta:
            m, k = k, m
        tb = self.rng.random() < 0.4
        cands = [n for n, v in self.env.items() if v.dtype != "i32" and len(v.shape) == 2 and (v.shape[1] if tb else v.shape[0]) == k]
        if not cands:
            raise Skip("no operand")
        y = self.rng.choice(cands)
        tr = self.rng.random() < 0.3
        ax = f"transpose({x})" if ta else x
        by = f"transpose({y})" if tb else y
        text = f"{ax} @ {by}"
        if tr:
            text = f"transpose({text})"

        def f(a, b):
            a = a.T if ta else a
            b = b.T if tb else b
            c = a @ b
            return c.T if tr else c
        dt = promote(self.env[x].dtype, self.env[y].dtype)
        return self.add(text, [x, y], lambda env, w: local(f, dt, env[x], env[y]))

    def batched_matmul(self):
        x = self.pick(lambda v: len(v.shape) == 3)
        if x is None:
            raise Skip("no batch")
        b, m, k = self.env[x].shape
        cands = [n for n, v in self.env.items() if v.dtype != "i32" and len(v.shape) == 3 and v.shape[0] == b and v.shape[2] == k]
        if not cands:
            raise Skip("no operand")
        y = self.rng.choice(cands)
        dt = promote(self.env[x].dtype, self.env[y].dtype)
        return self.add(f"{x} @ transpose({y}, [0, 2, 1])", [x, y],
                        lambda env, w: local(lambda a, c: a @ c.transpose(1, 2), dt, env[x], env[y]))

    def view(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            raise Skip("no tensor")
        s = self.env[x].shape
        r = len(s)
        kind = self.rng.choice(["reshape", "transpose", "slice", "index", "expand", "squeeze", "broadcast", "concat",
                                "pieces", "stack", "repeat"])
        dt = self.env[x].dtype
        if kind == "reshape":
            n = int(np.prod(s))
            divs = [d for d in range(1, n + 1) if n % d == 0]
            d0 = self.rng.choice(divs)
            new = [d0, n // d0]
            return self.add(f"reshape({x}, [{new[0]}, {new[1]}])", [x], lambda env, w: local(lambda t: t.reshape(new), dt, env[x]))
        if kind == "transpose":
            perm = list(range(r))
            self.rng.shuffle(perm)
            return self.add(f"transpose({x}, [{', '.join(map(str, perm))}])", [x],
                            lambda env, w: local(lambda t: t.permute(perm), dt, env[x]))
        if kind == "slice":
            ax = self.rng.randrange(r)
            if s[ax] < 2:
                raise Skip("short axis")
            a = self.rng.randrange(s[ax] - 1)
            b = self.rng.randrange(a + 1, s[ax] + 1)
            return self.add(f"slice({x}, axis={ax}, start={a}, end={b})", [x],
                            lambda env, w: local(lambda t: t.narrow(ax, a, b - a), dt, env[x]))
        if kind == "index":
            i = self.rng.randrange(s[0])
            if self.rng.random() < 0.5 or s[0] < 2:
                return self.add(f"{x}[{i}]", [x], lambda env, w: local(lambda t: t[i], dt, env[x]))
            return self.add(f"{x}[{i}:{s[0]}]", [x], lambda env, w: local(lambda t: t[i:], dt, env[x]))
        if kind == "expand":
            ax = self.rng.randrange(r + 1)
            return self.add(f"expand_dims({x}, axis={ax})", [x], lambda env, w: local(lambda t: t.unsqueeze(ax), dt, env[x]))
        if kind == "squeeze":
            ones = [d for d in range(r) if s[d] == 1]
            if not ones:
                raise Skip("nothing to squeeze")
            ax = self.rng.choice(ones)
            return self.add(f"squeeze({x}, axis={ax})", [x], lambda env, w: local(lambda t: t.squeeze(ax), dt, env[x]))
        if kind == "broadcast":
            new = [self.dims()] + list(s)
            return self.add(f"broadcast_to({x}, [{', '.join(map(str, new))}])", [x],
                            lambda env, w: local(lambda t: t.broadcast_to(new), dt, env[x]))
        if kind == "pieces":  # chunk or split, the pieces put back in another order, each scaled by its place
            ax = self.rng.randrange(r)
            if s[ax] < 2:
                raise Skip("short axis")
            if self.rng.random() < 0.5:
                c = self.rng.randrange(2, min(s[ax], 4) + 1)
                call, cut = f"chunk(t, {c}, axis={ax})", lambda t: t.chunk(c, ax)
            else:
                k = self.rng.randrange(1, s[ax])
                sizes = [k, s[ax] - k] if self.rng.random() < 0.5 else None
                call = f"split(t, {sizes if sizes else k}, axis={ax})"
                cut = lambda t: t.split(sizes if sizes else k, ax)
            count = len(cut(torch.zeros(s)))
            order = list(range(count))
            self.rng.shuffle(order)
            names = [f"p{i}_" for i in range(count)]
            fname = self.fresh("f")
            back = ", ".join(f"{names[i]} * {i + 1}" for i in order)
            prologue = f"def {fname}(t) {{\n  {', '.join(names)} = {call}\n  return concat([{back}], axis={ax})\n}}"
            return self.add(f"{fname}({x})", [x], lambda env, w: local(
                lambda t: torch.cat([cut(t)[i] * (i + 1) for i in order], ax), dt, env[x]), prologue=prologue)
        if kind == "repeat":
            ax, k = self.rng.randrange(r), self.rng.randrange(1, 4)
            return self.add(f"repeat_interleave({x}, {k}, axis={ax})", [x],
                            lambda env, w: local(lambda t: t.repeat_interleave(k, ax), dt, env[x]))
        if kind == "stack":
            ax = self.rng.randrange(r + 1)
            cands = [n for n, v in self.env.items() if v.dtype == dt and list(v.shape) == list(s)]
            y = self.rng.choice(cands)
            return self.add(f"stack([{x}, {y}], axis={ax})", [x, y],
                            lambda env, w: local(lambda a, b: torch.stack([a, b], ax), dt, env[x], env[y]))
        ax = self.rng.randrange(r)
        cands = [n for n, v in self.env.items() if v.dtype == dt and len(v.shape) == r and
                 all(v.shape[d] == s[d] for d in range(r) if d != ax)]
        y = self.rng.choice(cands)
        return self.add(f"concat([{x}, {y}], axis={ax})", [x, y],
                        lambda env, w: local(lambda a, b: torch.cat([a, b], ax), dt, env[x], env[y]))

    def take(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            raise Skip("no tensor")
        s = self.env[x].shape
        ax = self.rng.randrange(len(s))
        n = s[ax]
        m = self.rng.choice([1, 2, 3, 4])
        a, b = self.rng.randrange(1, 4), self.rng.randrange(0, 3)
        idx_vary = frozenset()
        # indices that are data: argmax or argmin of a float value along an axis no longer than n
        y = self.pick(lambda v: len(v.shape) >= 1 and 1 <= min(v.shape) <= n) if self.rng.random() < 0.3 else None
        if y is not None:
            ys = self.env[y].shape
            k = self.rng.choice([i for i, d in enumerate(ys) if 1 <= d <= n])
            op = self.rng.choice(["argmax", "argmin"])
            for t in self.env[y].ranks:
                # a near tie (apart in float64, perhaps not in gradc's f32) picks another index
                top = t.detach().double().movedim(k, -1).reshape(-1, ys[k])
                if ys[k] > 1 and top.numel():
                    top = top.topk(2, dim=1, largest=op == "argmax").values
                    gap = (top[:, 0] - top[:, 1]).abs()
                    if bool(((gap > 0) & (gap <= 1e-6 * (1 + top[:, 0].abs()))).any()):
                        raise Skip("a near tie")
            pick = torch.argmax if op == "argmax" else torch.argmin  # the first index among ties, as gradc's
            dt = self.env[x].dtype

            def sim_data(env, w):
                v, iv = env[x], env[y]
                out = []
                for r in range(w):
                    i = pick(iv.ranks[r].detach(), dim=k)
                    out.append(v.ranks[r].index_select(ax, i.reshape(-1)).reshape(s[:ax] + tuple(i.shape) + s[ax + 1:]))
                return Val(out, dt, v.vary | iv.vary)
            return self.add(f"take({x}, {op}({y}, axis={k}), axis={ax})", [x, y], sim_data)
        if self.rng.random() < 0.5:
            # indices that differ by rank, or with a mesh by the rank along one axis (rank(tp))
            along = self.rng.choice(self.axis_names()) if self.p.mesh and self.rng.random() < 0.6 else None
            at = (lambda r: r) if along is None else (lambda r: coord(r, along))
            idx = f"(iota({m}) * {a} + {b} + {'rank' if along is None else f'rank({along})'}) % {n}"
            ix = lambda r: (torch.arange(m) * a + b + at(r)) % n
            idx_vary = live() if along is None else frozenset([along])
        else:
            vals = [self.rng.randrange(n) for _ in range(m)]
            idx = f"[{', '.join(map(str, vals))}]" if m > 1 else f"iota(1) + {vals[0]}"
            ix = lambda r: torch.tensor(vals)
        dt = self.env[x].dtype

        def sim(env, w):
            v = env[x]
            return Val([v.ranks[r].index_select(ax, ix(r)) for r in range(w)], dt, v.vary | idx_vary)
        return self.add(f"take({x}, {idx}, axis={ax})", [x], sim)

    def composite(self):
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            raise Skip("no tensor")
        s = self.env[x].shape
        dt = self.env[x].dtype
        F = torch.nn.functional
        kind = self.rng.choice(["softmax", "log_softmax", "normalize", "layer_norm", "rms_norm", "cross_entropy", "one_hot"])
        if kind in ("softmax", "log_softmax"):
            ax = self.rng.randrange(-len(s), len(s))
            f = (lambda t: softmax_ref(t, ax)) if kind == "softmax" else (lambda t: log_softmax_ref(t, ax))
            return self.add(f"{kind}({x}, axis={ax})", [x], lambda env, w: local(f, dt, env[x]))
        if kind == "normalize":
            return self.add(f"normalize({x})", [x], lambda env, w: local(lambda t: F.normalize(t, dim=-1), dt, env[x]))
        if kind == "layer_norm":
            return self.add(f"layer_norm({x})", [x], lambda env, w: local(layer_norm_ref, dt, env[x]))
        if kind == "rms_norm":
            return self.add(f"rms_norm({x})", [x],
                            lambda env, w: local(lambda t: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + 1e-6), dt, env[x]))
        if kind == "one_hot":
            n = self.rng.choice([2, 3, 4])
            m = self.rng.choice([1, 2, 3])
            return self.add(f"one_hot((iota({m}) + rank) % {n}, {n})", [],
                            lambda env, w: Val([F.one_hot((torch.arange(m) + r) % n, n).to(torch.float32) for r in range(w)], "f32", live()))
        if len(s) != 2:
            raise Skip("cross_entropy of a matrix")
        rows, c = s
        a = self.rng.randrange(1, 4)
        lab = lambda r: (torch.arange(rows) * a + r) % c
        eps = self.rng.choice([0.0, 0.0, 0.1, 0.25])
        smooth = f", label_smoothing={eps}" if eps else ""
        return self.add(f"cross_entropy({x}, (iota({rows}) * {a} + rank) % {c}{smooth})", [x],
                        lambda env, w: Val([F.cross_entropy(env[x].ranks[r], lab(r), label_smoothing=eps)
                                            for r in range(w)], dt, live()))

    def random_op(self):
        """dropout of a value, or rand or randn of a value's shape: a seed of its own or one
        that differs by rank, and PyTorch's dropout mask made from gradc's generator
        (philox), so that the simulation draws the same numbers."""
        x = self.pick(lambda v: len(v.shape) >= 1)
        if x is None:
            raise Skip("no tensor")
        s, dt = self.env[x].shape, self.env[x].dtype
        seed, by_rank = self.rng.randrange(-5, 50), self.rng.random() < 0.4
        seed_text = f"{seed} + rank" if by_rank else str(seed)
        vary = live() if by_rank else frozenset()
        n = math.prod(s)
        kind = self.rng.choice(["dropout", "rand", "randn"])
        if kind == "dropout":
            p = self.rng.choice([0.125, 0.25, 0.5])
            if seed % 3 == 0:  # (no draw of its own: a seed's other programs stay as they were)
                # rand's f32 values against p in f32, whatever x's dtype (docs/language.md): these are
                # not f32 values, and 0.7 rounds down onto one of rand's
                p = {0.125: 0.1, 0.25: 0.3, 0.5: 0.7}[p]

            def sim(env, w):
                v = env[x]
                keep = [torch.from_numpy(philox(seed + r * by_rank, n) >= np.float32(p)).reshape(s) for r in range(w)]
                return Val([torch.where(k, t / (1 - p), torch.zeros((), dtype=t.dtype)) for k, t in zip(keep, v.ranks)],
                           dt, v.vary | vary)
            return self.add(f"dropout({x}, {p}, seed={seed_text})", [x], sim)
        by_shape = self.rng.random() < 0.3  # rand(shape(x)): PyTorch's rand_like
        dims = f"shape({x})" if by_shape else "[" + ", ".join(map(str, s)) + "]"
        return self.add(f"{kind}({dims}, seed={seed_text})", [x] if by_shape else [],
                        lambda env, w: Val([torch.from_numpy(philox(seed + r * by_rank, n, kind == "randn")).float()
                                            .reshape(s) for r in range(w)], "f32", vary))

    def model_op(self):
        """The ops of MoE routers and attention: cumsum, tril/triu, clamp, var/std, logaddexp,
        softplus(beta, threshold), masked_fill, einsum (one, two or three operands),
        scaled_dot_product_attention, binary_cross_entropy_with_logits; and on an input (whose values are the
        same bits in PyTorch, so that near ties cannot reorder) sort, topk, argsort with
        take_along_axis, scatter_add, index_add."""
        inputs = {i.name for i in self.p.inputs}
        kind = self.rng.choice(["cumsum", "tril", "clamp", "var", "logaddexp", "softplus", "masked_fill", "einsum",
                                "sort", "topk", "take_along_axis", "scatter_add", "index_add", "attention", "bce"])
        ordered = kind in ("sort", "topk", "take_along_axis", "scatter_add")
        x = self.pick(lambda v: len(v.shape) >= (2 if kind in ("tril", "einsum", "attention") else 1))
        if ordered:
            x = self.rng.choice(sorted(n for n in inputs if self.env[n].dtype != "i32"))
        if x is None:
            raise Skip("no tensor")
        v = self.env[x]
        s, dt, r = v.shape, v.dtype, len(v.shape)
        ax = self.rng.randrange(-r, r)
        F = torch.nn.functional
        one = lambda text, fn: self.add(text, [x], lambda env, w: local(fn, dt, env[x]))
        if kind == "cumsum":
            return one(f"cumsum({x}, axis={ax})", lambda t: torch.cumsum(t, ax))
        if kind == "tril":
            k = self.rng.randrange(-1, 2)
            up = self.rng.random() < 0.5
            return one(f"{'triu' if up else 'tril'}({x}, k={k})", lambda t: torch.triu(t, k) if up else torch.tril(t, k))
        if kind == "clamp":
            lo, hi = self.rng.choice([(-0.5, 0.5), (0.0, 1.0), (-1.0, 0.25)])
            return one(f"clamp({x}, min={lo}, max={hi})", lambda t: torch.clamp(t, lo, hi))
        if kind == "var":
            if s[ax] < 2:
                raise Skip("one element")
            f = self.rng.choice(["var", "std"])
            fn = torch.var if f == "var" else torch.std
            return one(f"{f}({x}, axis={ax})", lambda t: fn(t, ax))
        if kind == "logaddexp":
            return one(f"logaddexp({x}, {x} * 0.5 + 0.25)", lambda t: logaddexp_ref(t, t * 0.5 + 0.25))
        if kind == "softplus":
            return one(f"softplus({x}, beta=2, threshold=1)", lambda t: F.softplus(t, beta=2, threshold=1))
        if kind == "attention":  # self-attention of x's rows, causal or not
            causal = self.rng.random() < 0.5
            return one(f"scaled_dot_product_attention({x}, {x}, {x}{', is_causal=true' if causal else ''})",
                       lambda t: self_attention(t, causal))
        if kind == "bce":
            return one(f"binary_cross_entropy_with_logits({x}, sigmoid({x} * 0.5))",
                       lambda t: F.binary_cross_entropy_with_logits(t, torch.sigmoid(t * 0.5)))
        if kind == "masked_fill":
            return one(f"masked_fill({x}, {x} > 0.5, 0.125)", lambda t: t.masked_fill(t > 0.5, 0.125))
        if kind == "einsum":
            if r != 2:
                return one(f'einsum("{"abcd"[:r]}->{"abcd"[:r][::-1]}", {x})', lambda t: t.permute(*reversed(range(r))))
            cands = [n for n, u in self.env.items() if u.dtype == dt and len(u.shape) == 2 and u.shape[1] == s[1]]
            y = self.rng.choice(cands)
            zs = [n for n, u in self.env.items()
                  if u.dtype == dt and len(u.shape) == 2 and u.shape[0] == self.env[y].shape[0]]
            if self.rng.random() < 0.3:  # three operands, contracted left to right as gradc's docs say
                z = self.rng.choice(zs)
                three = lambda a, b, c: torch.einsum("ik,kl->il", torch.einsum("ij,kj->ik", a, b), c)
                return self.add(f'einsum("ij,kj,kl->il", {x}, {y}, {z})', [x, y, z],
                                lambda env, w: local(three, dt, env[x], env[y], env[z]))
            return self.add(f'einsum("ij,kj->ik", {x}, {y})', [x, y],
                            lambda env, w: local(lambda a, b: torch.einsum("ij,kj->ik", a, b), dt, env[x], env[y]))
        if kind == "index_add":
            n = s[0]
            idx = [self.rng.randrange(n) for _ in range(n)]
            return one(f"index_add({x} * 0.5, 0, [{', '.join(map(str, idx))}], {x})",
                       lambda t: (t * 0.5).index_add(0, torch.tensor(idx), t))
        sort = lambda t, desc=False: torch.sort(t, dim=ax, descending=desc, stable=True)
        if kind == "sort":
            desc = self.rng.random() < 0.5
            return self.add(f"sv@@, si@@ = sort({x}, axis={ax}, descending={str(desc).lower()})\n"
                            f"@@ = sv@@ + cast(si@@, {dt})", [x],
                            lambda env, w: local(lambda t: (lambda q: q.values + q.indices.to(t.dtype))(sort(t, desc)),
                                                 dt, env[x]), kind="raw")
        if kind == "topk":
            k = self.rng.randrange(1, s[ax] + 1)
            big = self.rng.random() < 0.7
            pick = lambda t: (lambda q: q.values.narrow(ax, 0, k) + q.indices.narrow(ax, 0, k).to(t.dtype))(sort(t, big))
            return self.add(f"tv@@, ti@@ = topk({x}, {k}, axis={ax}, largest={str(big).lower()})\n"
                            f"@@ = tv@@ + cast(ti@@, {dt})", [x], lambda env, w: local(pick, dt, env[x]), kind="raw")
        if kind == "take_along_axis":
            return one(f"take_along_axis({x}, argsort({x}, axis={ax}), axis={ax})",
                       lambda t: torch.gather(t, ax, sort(t).indices))
        return one(f"scatter_add({x}, {ax}, argsort({x}, axis={ax}), {x} * {x})",
                   lambda t: t.scatter_add(ax, sort(t).indices, t * t))

    def over(self):
        """The axes a collective runs over, and its `over=` text: without a mesh every rank;
        with one, one axis, several in any order, or (without over=) every axis."""
        axes = self.axis_names()
        if not self.p.mesh:
            return axes, ""
        k = self.rng.random()
        if k < 0.2:
            return axes, ""
        pick = self.rng.sample(axes, 1 if k < 0.65 else self.rng.randrange(2, len(axes) + 1))
        return pick, f", over={pick[0]}" if len(pick) == 1 else f", over=[{', '.join(pick)}]"

    def collective(self):
        kind = self.rng.choice(["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "gather",
                                "scatter", "all_to_all", "permute", "permute_pairs"])
        x = self.pick(lambda v: len(v.shape) >= 1 or kind in ("all_reduce", "broadcast", "reduce", "permute", "permute_pairs"))
        if x is None:
            raise Skip("no operand")
        S, over = self.over()
        n = math.prod(dict(self.p.axes())[a] for a in S)  # the group's size
        v = self.env[x]
        s = v.shape
        dt = v.dtype
        rng = self.rng
        # a collective gives every rank of a group the same value (replicated along its axes), or not
        same = lambda env: env[x].vary - frozenset(S)
        differs = lambda env: env[x].vary | frozenset(S)

        def add(text, fn, vary):
            return self.add(text + over + ")", [x], lambda env, w: Val(in_groups(env[x].ranks, S, fn), dt, vary(env)))

        def no_near_tie(op):
            """A max or min over ranks of a value that varies along them: not where two ranks'
            values tie to within rounding, since which of them tie (and share the derivative)
            then depends on how each backend rounds (cross_entropy of equal logits is log 2
            on every rank, give or take an ulp)."""
            if op not in ("max", "min") or not v.vary & frozenset(S):
                return
            for grp in groups_over(S):
                t = torch.stack([v.ranks[r].detach().double() for r in grp]).reshape(len(grp), -1)
                if t.shape[1] == 0 or len(grp) < 2:
                    continue
                top = t.topk(2, dim=0, largest=op == "max").values
                if bool(((top[0] - top[1]).abs() <= 1e-9 * (1 + top[0].abs())).any()):
                    raise Skip("a near tie over ranks")
        if kind in ("all_reduce", "reduce"):
            op = rng.choice(["sum", "avg", "prod", "max", "min"])
            no_near_tie(op)
            root = rng.randrange(n)
            if kind == "all_reduce":
                return add(f"all_reduce({x}, op={op}", lambda xs: clones(reduce_stack(xs, op), n), same)
            return add(f"reduce({x}, root={root}, op={op}",
                       lambda xs: [reduce_stack(xs, op) if i == root else torch.zeros(s, dtype=xs[0].dtype) for i in range(n)], differs)
        if kind in ("all_gather", "gather"):
            ax = rng.randrange(len(s))
            root = rng.randrange(n)
            if kind == "all_gather":
                return add(f"all_gather({x}, axis={ax}", lambda xs: clones(torch.cat(xs, ax), n), same)
            return add(f"gather({x}, root={root}, axis={ax}",
                       lambda xs: [torch.cat(xs, ax) if i == root else torch.zeros(torch.cat(xs, ax).shape, dtype=xs[0].dtype)
                                   for i in range(n)], differs)
        if kind in ("reduce_scatter", "scatter", "all_to_all"):
            axes = [d for d in range(len(s)) if s[d] % n == 0]
            if not axes:
                raise Skip("no axis divides")
            ax = rng.choice(axes)
            if kind == "reduce_scatter":
                op = rng.choice(["sum", "avg", "prod", "max", "min"])
                no_near_tie(op)
                return add(f"reduce_scatter({x}, axis={ax}, op={op}",
                           lambda xs: list(reduce_stack(xs, op).chunk(n, ax)), differs)
            if kind == "scatter":
                root = rng.randrange(n)
                return add(f"scatter({x}, root={root}, axis={ax}",
                           lambda xs: [dropping(c, xs, {root}) for c in xs[root].chunk(n, ax)], differs)
            cat = rng.randrange(len(s))
            return add(f"all_to_all({x}, split_axis={ax}, concat_axis={cat}",
                       lambda xs: [torch.cat([xs[k].chunk(n, ax)[i] for k in range(n)], cat) for i in range(n)],
                       differs)
        if kind == "broadcast":
            root = rng.randrange(n)
            return add(f"broadcast({x}, root={root}", lambda xs: [dropping(xs[root], xs, {root}) for _ in range(n)], same)
        if kind == "permute":
            shift = rng.randrange(-n, 2 * n)
            # clones: the result is a value of its own (a gradient with respect to it is not
            # one with respect to x), as in gradc, even where it moves nothing. Of a value
            # replicated along the group's axes, every rank receives the same: replicated.
            return add(f"permute({x}, shift={shift}", lambda xs: [xs[(i - shift) % n].clone() for i in range(n)],
                       lambda env: env[x].vary if not env[x].vary & frozenset(S) else differs(env))
        dsts = list(range(n))
        rng.shuffle(dsts)
        pairs = [[src, d] for src, d in zip(range(n), dsts) if rng.random() < 0.7]
        if not pairs:
            raise Skip("no pairs")
        ptext = "[" + ", ".join(f"[{a}, {b}]" for a, b in pairs) + "]"
        src_of = {b: a for a, b in pairs}
        return add(f"permute({x}, pairs={ptext}",
                   lambda xs: [dropping(xs[src_of[i]], xs, set(src_of.values())) if i in src_of
                               else torch.zeros(s, dtype=xs[0].dtype) for i in range(n)],
                   lambda env: env[x].vary if not env[x].vary & frozenset(S) and len(pairs) == n else differs(env))

    def mesh_index(self):
        """rank(A) in values, size(A) in values and shapes (a program with a mesh)."""
        if not self.p.mesh:
            raise Skip("no mesh")
        x = self.pick()
        A = self.rng.choice(self.axis_names())
        n = dict(self.p.mesh)[A]
        dt = self.env[x].dtype
        k = self.rng.random()
        if k < 0.4:  # rank(A) + 1.0 is an f32 value, which widens a bf16 or f16 x (docs/language.md)
            wide = promote(dt, "f32")
            return self.add(f"{x} * (rank({A}) + 1.0)", [x], lambda env, w: Val(
                [env[x].ranks[r].to(FLOAT_TORCH[wide]) * (coord(r, A) + 1) for r in range(w)], wide,
                env[x].vary | {A}))
        if k < 0.7:
            return self.add(f"{x} * size({A}) - rank({A})", [x], lambda env, w: Val(
                [env[x].ranks[r] * n - coord(r, A) for r in range(w)], dt, env[x].vary | {A}))
        m = int(np.prod(self.env[x].shape))
        if m % n:
            raise Skip("size does not divide")
        return self.add(f"reshape({x}, [size({A}), {m} // size({A})])", [x],
                        lambda env, w: local(lambda t: t.reshape(n, m // n), dt, env[x]))

    def loop(self):
        x = self.pick()
        y = self.pick(lambda v: broadcastable(v.shape, self.env[x].shape))
        k = self.rng.randrange(0, 4)
        c = round(self.rng.uniform(0.3, 0.9), 2)
        dt = promote(self.env[x].dtype, self.env[y].dtype)
        if dt != self.env[x].dtype:  # the body would widen the loop-carried value: an error, as written
            raise Skip("a loop-carried value keeps its type")

        def sim(env, w):
            acc = env[x]
            for i in range(k):
                acc = Val([acc.ranks[r] * c + torch.tanh(env[y].ranks[r]) * i for r in range(w)], dt, union(acc, env[y]))
            if k == 0:  # `acc = x * 1.0` alone: a new value equal to x
                acc = Val([t * 1.0 for t in acc.ranks], dt, acc.vary)
            return acc
        it = f"it{self.n}"  # the loop variable: no value's name
        return self.add(f"@@ = {x} * 1.0\nfor {it} in range({k}) {{\n  @@ = @@ * {c} + tanh({y}) * {it}\n}}", [x, y], sim,
                        kind="raw")

    def call(self):
        x = self.pick()
        y = self.pick(lambda v: broadcastable(v.shape, self.env[x].shape))
        fname = self.fresh("f")
        u = self.rng.choice(["tanh", "sigmoid", "square", "sin"])
        fn = torch_unary(u)
        dt = promote(self.env[x].dtype, self.env[y].dtype)
        prologue = f"def {fname}(p, q) {{\n  t = {u}(p) * q\n  return t + p\n}}"

        def op(f, a, b):  # gradc's promotion at each op, not once for the statement's operands
            return f(*promoted([a, b]))

        def body(p, q):
            return op(operator.add, op(operator.mul, fn(p), q), p)

        def sim(env, w):
            pairs = zip(env[x].ranks, env[y].ranks)
            return Val([op(operator.sub, body(a, b), body(b, a)) for a, b in pairs], dt, union(env[x], env[y]))
        return self.add(f"{fname}({x}, {y}) - {fname}({y}, {x})", [x, y], sim, prologue=prologue)

    def grad(self):
        # a loss from a value, then gradients with respect to some inputs and intermediates
        loss = self.pick(lambda v: True)
        mode = self.rng.choice(["sum", "mean", "global"])
        lv = self.env[loss]
        if mode == "global" and not lv.rep:
            mode = "mean"
        over, otext = None, ""
        if self.p.mesh and mode != "global":
            # over= the axes whose ranks hold different samples: at least those the loss varies
            # along (it must be replicated along the others), in any order; sometimes none
            # (over=[]) or every axis without over=
            axes = self.axis_names()
            must = [a for a in axes if a in lv.vary]
            rest = [a for a in axes if a not in lv.vary]
            over = must + self.rng.sample(rest, self.rng.randrange(0, len(rest) + 1))
            self.rng.shuffle(over)
            if len(over) == len(axes) and self.rng.random() < 0.3:
                over = None
            else:
                otext = f", over={over[0]}" if len(over) == 1 else f", over=[{', '.join(over)}]"
        # mostly what the loss is computed from; sometimes anything (a zero gradient)
        pool = self.deps[loss] if self.rng.random() < 0.85 else self.env
        # nothing computed from a gradient: gradc's analysis may find it replicated (the
        # gradient of a per-rank input by a replicated seed is the same on every rank, one
        # variable), where the simulation keeps the variable's axes (grad_sim)
        cands = sorted(n for n in pool if self.env[n].dtype != "i32" and not self.deps[n] & set(self.grads))
        if not cands:
            raise Skip("nothing to differentiate")
        ws = self.rng.sample(cands, min(len(cands), self.rng.randrange(1, 3)))
        names = [self.fresh("d") for _ in ws]
        text = f"{', '.join(names)} = grad({loss}, {', '.join(ws)}, mode={mode}{otext})"

        def sim(env, w, loss=loss, ws=ws, mode=mode, over=over):
            return grad_sim(env[loss], [env[n] for n in ws], mode, [] if mode == "global" else over)
        # one statement binding several names: the first holds the tuple, the others index it
        try:
            vals = sim(self.env, self.p.world)
        except RuntimeError as e:
            raise Skip(str(e))
        st = Stmt(names[0], text, [loss] + ws, lambda env, w: sim(env, w)[0], kind="raw")
        st.names, st.multi = names, sim
        self.p.stmts.append(st)
        for n, v in zip(names, vals):
            self.env[n] = v
            self.grads.append(n)
            self.deps[n] = set().union(*[self.deps[a] for a in [loss] + ws]) | {n}
        return names[0]


# Names that generated code could trip over: its functors' parameters and index
# variables, its own members, run()'s locals and its helpers, the functors' own names,
# C++ keywords and macros, standard names.
RISKY_NAMES = ["o", "r", "i", "j", "a0", "b0", "q0", "i0", "r0_", "b_x", "v1_x", "rank_", "int", "class",
               "new", "delete", "default", "template", "this", "register", "std", "gradc", "main", "NAN", "INFINITY",
               "assert", "errno", "int32_t", "size_t", "run", "keep_defaults", "check_shared_inputs", "ws", "ws_",
               "stream", "comm", "blas", "events", "partials", "workspace_bytes", "set_x", "x_type", "k0_x", "t12",
               "program", "in_x", "out_x", "default_x", "spans", "hashes", "checking", "check_shared", "size_values",
               "size_names", "k1_x", "k0_x_type"]


def broadcastable(a, b):
    """a broadcasts to b (NumPy)."""
    if len(a) > len(b):
        return False
    return all(x == 1 or x == y for x, y in zip(a[::-1], b[::-1]))


class Skip(Exception):
    pass


MESHES = [[("dp", 2), ("tp", 2)], [("dp", 2), ("tp", 3)], [("ep", 3), ("sp", 2)], [("dp", 1), ("tp", 2)],
          [("dp", 2), ("pp", 1)], [("dp", 2), ("tp", 2), ("sp", 2)], [("pp", 2), ("dp", 1), ("tp", 2)],
          [("a", 1), ("b", 2), ("c", 2)]]


def generate(seed, mesh=False, special=False, wide=False, long=False):
    """A random program: over `world N` (1 to 4 ranks), or with `mesh` over a 2-D or 3-D
    mesh (axes of size 1 included); with `special`, NaN, infinities and signed zeros in
    some elements of its float input files; with `wide`, its inputs' last axis 16 to 24
    (times a mesh's sizes) long, so that its maps along rows run in rows on the CPU; with
    `long`, 257 to 300, past the integers bf16 holds exactly (a count, a place in a row)."""
    rng = random.Random(seed)
    axes = rng.choice(MESHES) if mesh else None
    world = math.prod(n for _, n in axes) if mesh else rng.choice([1, 2, 2, 3, 4])
    g = Gen(rng, world, axes, special)
    dense = rng.random() < 0.5  # square matrices of one size: chains of matmuls and transposes (linear layers)
    k, ktext = g.mult() if rng.random() < 0.3 else (1, "")
    lengths = [257, 280, 300] if long else [16, 20, 24] if wide else None
    d = rng.choice(lengths or [2, 3, 4])
    # long: no square matrices, and no factor of the mesh's sizes in a dimension, so that a
    # sort's n^2 comparisons a row, or a product of two long axes, stay small
    dense = dense and not long
    for _ in range(rng.randrange(1, 4)):
        if dense:
            dim = (d * k, f"{d} * {ktext}" if ktext else str(d))
            shape = [dim, dim]
        else:
            shape = []
            rank = rng.randrange(1, 3)
            for a in range(rank):
                m, mtext = g.mult()
                c = rng.choice(lengths if lengths and a == rank - 1 else [1, 2, 3, 4])
                if long:
                    m, mtext = 1, ""
                shape.append((c * m, f"{c} * {mtext}" if mtext else str(c)))
        # a dimension is written with the sizes it is made of (`2 * size(tp)`) in a mesh program
        g.input(tuple(n for n, _ in shape), shape_text=[t if mesh else str(n) for n, t in shape])
    kinds = [g.unary] * 4 + [g.binary] * 4 + [g.reduction] * 2 + [g.matmul] * 3 + [g.view] * 3 + [g.take] * 2 + \
            [g.composite] * 2 + [g.collective] * 4 + [g.loop, g.call, g.batched_matmul, g.literal_op, g.model_op,
                                                      g.random_op]
    if dense:
        kinds += [g.matmul] * 8 + [g.take] * 2
    if mesh:
        kinds += [g.collective] * 4 + [g.mesh_index] * 2
    target = rng.randrange(3, 13)
    tries = 0
    while len(g.p.stmts) < target and tries < 200:
        tries += 1
        try:
            rng.choice(kinds)()
        except Skip:
            pass
    grads = rng.choice([1, 1, 2])
    for k in range(grads):
        for _ in range(20):
            try:
                if k > 0 and rng.random() < 0.7:
                    # second order: a loss made from the first gradient
                    g.unary() if rng.random() < 0.5 else None
                g.grad()
                break
            except Skip:
                pass
    outs = [s for s in g.env if s not in [i.name for i in g.p.inputs]]
    g.p.outputs = rng.sample(outs, min(len(outs), 4))
    for d in g.grads:
        if d not in g.p.outputs:
            g.p.outputs.append(d)
    return g.p


# ---------------------------------------------------------------------------------
# Running gradc and comparing.


def run_gradc(gradc, path, ins, extra, timeout=300):
    cmd = [gradc, "run", path, f"--inputs={ins}", "--format=json"] + extra
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timeout"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()[-2000:]}"
    return json.loads(p.stdout), None


def as_ranks(doc):
    return {o: [np.array(r["outputs"][o]["data"], dtype=np.float64).reshape(r["outputs"][o]["shape"]) for r in doc["ranks"]]
            for o in doc["ranks"][0]["outputs"]}, {o: doc["ranks"][0]["outputs"][o]["dtype"] for o in doc["ranks"][0]["outputs"]}


def differ(a, b, dtype, rtol, atol=0.0):
    """The first element where a (got) and b (want) differ by more than rtol (|b| + the
    largest |b|, at least 1) + atol (the largest |b|, at least 1), or None. NaNs must match."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return f"shape {a.shape} against {b.shape}"
    scale = max(1.0, float(np.max(np.abs(b[np.isfinite(b)]))) if np.isfinite(b).any() else 1.0)
    tol = {"f64": 1e-9, "f32": 1e-4, "i32": 0}[dtype] if rtol is None else rtol
    for i, (x, y) in enumerate(zip(a.ravel(), b.ravel())):
        if math.isnan(y) and math.isnan(x):
            continue
        if x == y:
            continue
        if not (abs(x - y) <= tol * (abs(y) + scale) + atol * scale):
            return f"element {i}: {x!r} against {y!r}"
    return None


# A unit of roundoff of each 16-bit type
LOW_UNIT = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}


def compare(got, want, dtypes, what, rtol=None, low_units=0):
    for o, ranks in want.items():
        for r, w in enumerate(ranks):
            # bf16 and f16 values bit for bit, but for those within 1e-6 of the largest
            # magnitude: an f32 op's last-bit difference (glibc's scalar and vector expf)
            # changes a bf16 value where it sits on a tie, or where f32 terms cancel (the
            # gradient of a softmax's sum is such a residue, 1e-9 where the exact is 0);
            # with low_units, within that many units of roundoff of the largest magnitude
            low = dtypes[o] in ("bf16", "f16")
            atol = max(1e-6, low_units * LOW_UNIT[dtypes[o]]) if low else 0.0
            d = differ(got[o][r], w, dtypes[o], 0 if low else rtol, atol)
            if d:
                return f"{what}: output {o} on rank {r}: {d}"
    return None


def gradc_types(gradc, path):
    """The dtype gradc gives each named value of a program (`gradc ir`)."""
    p = subprocess.run([gradc, "ir", path], capture_output=True, text=True)
    return dict(re.findall(r"^%(\w+) = .* : (\w+)\[", p.stdout, re.M))


# bf16 and f16 programs checked against PyTorch eager, and those it could not run (with why)
LOW_TORCH_RUNS = {"checked": 0, "skipped": collections.Counter()}


def low_against_torch(gradc, prog, path, got, dtypes, low):
    """The interpreter's outputs of a bf16 or f16 program against PyTorch eager computing it
    in the same dtypes (simulate with gradc_types), both against the exact values (the
    program in float64 from the same rounded inputs). The interpreter must be no less
    accurate than 4 times PyTorch's error plus 4 units of roundoff of the low type, as a
    fraction of the output's largest magnitude, or within 1e-6 of it (at least 1): the two
    round as often but not in the same places (gradc rounds a composite once, PyTorch after
    each of its ops; orders of sums differ), and a wrong derivative or op is off by far
    more. A NaN or infinity where PyTorch and the exact values are finite is a
    disagreement. A program with a max, min, relu or abs, whose derivative steps at a tie
    or a kink, or an argmax or argmin, whose index jumps at one, is skipped where it
    differs so (counted). None, or the message."""
    try:
        exact, _ = simulate(prog)
        eager, _ = simulate(prog, gradc_types(gradc, path))
    except RuntimeError as e:  # Debian's PyTorch 1.13 lacks many f16 CPU kernels
        LOW_TORCH_RUNS["skipped"][re.sub(r"'\w+'|\s+", " ", str(e).split("\n")[0])[:70].strip()] += 1
        return None
    LOW_TORCH_RUNS["checked"] += 1
    u = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}[low]
    # a derivative at a tie or a kink is a step: one ulp more or less there (a rounded
    # operand of a min that now ties with another: each gets half) moves it by a whole
    kinks = re.search(r"\b(max|min|maximum|minimum|clamp|relu|abs|argmax|argmin)\(|op=(max|min)\b", prog.text()) is not None
    for o in prog.outputs:
        if dtypes[o] == "i32":
            continue  # an index of a tie may differ with the rounding
        for r, (g, t, e) in enumerate(zip(got[o], eager[o], exact[o])):
            t, e = t.double().numpy().ravel(), e.double().numpy().ravel()
            g = np.asarray(g, dtype=np.float64).ravel()
            # where PyTorch eager and the exact values are the same NaN or infinity (a NaN or
            # an infinity of the inputs carried through), the interpreter's is that too;
            # where only one of them is finite (f16's overflow, PyTorch's gelu of an
            # infinity), the element says nothing
            both = ~np.isfinite(e) & ~np.isfinite(t) & ((e == t) | (np.isnan(e) & np.isnan(t)))
            same = (g == e) | (np.isnan(g) & np.isnan(e))
            if (both & ~same).any():
                i = int(np.argmax(both & ~same))
                return (f"output {o} on rank {r}: element {i} is {g[i]!r} where PyTorch eager and the exact "
                        f"values are {e[i]!r}")
            finite = np.isfinite(e) & np.isfinite(t)
            g, t, e = g[finite], t[finite], e[finite]
            if e.size == 0:
                continue
            if not np.isfinite(g).all():
                return f"output {o} on rank {r}: not finite where PyTorch and the exact values are"
            # compare's absolute rule first: where f32 terms cancel (the gradient of a
            # softmax's or a normalize's sum), a residue of 1e-8 rounded to bf16, or one f16
            # subnormal (6e-8), is no error where the exact value is 0
            scale = max(np.abs(e).max(), np.abs(t).max(), np.abs(g).max())
            if np.abs(g - e).max() <= 1e-6 * max(scale, 1.0):
                continue
            eg, et = np.abs(g - e).max() / scale, np.abs(t - e).max() / scale
            if eg > 4 * et + 4 * u:
                if kinks:  # which values tie (and share a max's derivative) depends on how each rounds
                    LOW_TORCH_RUNS["skipped"]["a tie or kink (max, min, relu, abs) that 16-bit roundings make or break"] += 1
                    return None
                i = int(np.argmax(np.abs(g - e)))
                return (f"output {o} on rank {r}: the interpreter's error {eg:.3g} against PyTorch eager's {et:.3g} "
                        f"(of the largest magnitude; element {int(np.flatnonzero(finite)[i])}: {g[i]!r}, PyTorch "
                        f"{t[i]!r}, exact {e[i]!r})")
    return None


def data_parallel(prog):
    """The torch op's gradient convention for the program (emit --data-parallel): a mesh
    program's data-parallel axes are a subset of its axes chosen from its text (so a
    run repeats), each convention as likely; a program without a mesh keeps DDP's."""
    if not prog.mesh:
        return "world"
    rng = random.Random(sum(map(ord, prog.text())))
    return ",".join(a for a, _ in prog.mesh if rng.random() < 0.5) or "none"


def torch_op_command(gradc, text, prog, folder, stem, kind, emit_flags=(), check_flags=()):
    """The program `text` as the torch target's op, for tests/torch/check_ops.py: written
    without `shared` as folder/STEM.dg (each rank's inputs are its own along the
    data-parallel axes), emitted by the convention chosen for it (data_parallel) with
    emit_flags. Returns (check_ops.py's command with check_flags, None), or (None, the
    failure of kind `kind`, or None where the op rejects the program with a diagnostic:
    without `shared` a grad of mode=global may lose its replicated loss, and there is
    nothing to check)."""
    path = os.path.join(folder, stem + ".dg")
    with open(path, "w") as f:
        f.write(re.sub(r"\s+shared(\([^)]*\))?", "", text))
    convention = f"--data-parallel={data_parallel(prog)}"
    p = subprocess.run([gradc, "emit", path, "--target=torch", "-o", os.path.join(folder, stem + "_probe"), convention,
                        *emit_flags], capture_output=True, text=True)
    if p.returncode != 0:
        return None, ((kind, p.stderr[-2000:]) if "internal error" in p.stderr or p.returncode != 1 else None)
    return [VENV_PYTHON, os.path.join(HERE, "..", "torch", "check_ops.py"), gradc, path,
            os.path.join(folder, stem + "_torch"), f"--mesh={prog.mesh_flag()}" if prog.mesh else f"--ranks={prog.world}",
            convention, *check_flags], None


def check_torch(gradc, prog, folder, cuda=False):
    """The torch target's op against the interpreter (tests/torch/check_ops.py), by a
    convention chosen per program (data_parallel); with `cuda`, its CUDA ops compiled."""
    # about half the ops differentiate some of their float inputs only (emit --grad)
    floats = re.findall(r"^input\s+(\w+)\s*:\s*(?:f32|f64|bf16|f16)\[", prog.text(), re.M)
    rng = random.Random(sum(map(ord, prog.text())) + 1)
    some = [x for x in floats if rng.random() < 0.5]
    grad = [f"--grad={','.join(some)}"] if rng.random() < 0.5 and 0 < len(some) < len(floats) else []
    cmd, failed = torch_op_command(gradc, prog.text(), prog, folder, "op", "torch", grad, grad)
    if cmd is None:
        return failed
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 and "connectFullMesh failed" in p.stdout + p.stderr:
        # gloo's processes on a loaded machine, before the op runs: seen once in ~300
        # torch checks (a DeviceMesh of 6 processes), passing in 8 runs after; run again
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return ("torch", (p.stdout + p.stderr)[-2000:])
    if cuda:  # the same package's CUDA ops, which compile on first use: compiled for sm_90 here
        pkg = os.path.join(folder, "op_torch", "pkg")
        name = next(d for d in os.listdir(pkg) if os.path.isdir(os.path.join(pkg, d)))
        p = subprocess.run([VENV_PYTHON, "-c", f"import sys; sys.path.insert(0, {pkg!r}); import {name}; {name}._cuda_ext()"],
                           capture_output=True, text=True, timeout=900, env=dict(os.environ, TORCH_CUDA_ARCH_LIST="9.0"))
        if p.returncode != 0:
            return ("torch-cuda-build", (p.stdout + p.stderr)[-3000:])
        CUDA_BUILDS["torch"] += 1
    return None


def rounded_f32(stmt, env):
    """Whether the statement computes an f32 value from float values: gradc rounds it to
    f32, where the float64 simulation keeps every bit. So does a statement that binds an
    f32 value, and one that reads one: its ops on that value compute in f32 before a
    promotion meets an f64 value (`in1 / (abs(p) + 0.5)` with rand's p and an f64 in1;
    `sin(p) * q` in a def called with an f32 p)."""
    names = getattr(stmt, "names", None) or [stmt.name]
    floats = any(a in env and env[a].dtype != "i32" for a in stmt.args)
    reads_f32 = any(a in env and env[a].dtype == "f32" for a in stmt.args)
    return floats and (any(n in env and env[n].dtype == "f32" for n in names) or reads_f32)


def check(gradc, prog, folder, exe=False, torch_op=False, low=None, cuda=False):
    """None if every backend agrees, else (kind, message). With `low` (bf16 or f16), the
    program with its float inputs in that dtype (low_precision): the interpreter against
    PyTorch eager in those dtypes (low_against_torch), and every backend against the
    interpreter (its bf16 and f16 values bit for bit, but where a matmul's sums go in
    another order: docs/language.md, "Low precision").
    With `cuda`, its CUDA executable (with `exe` the one for any B too, with `torch_op` the
    op's CUDA ops) must compile and link with nvcc: no GPU runs them here."""
    if low:
        prog = low_precision(prog, low)
    path, ins = prog.write(folder)
    if low:
        interp, err = run_gradc(gradc, path, ins, ["--backend=interp"])
        if err and "is loop-carried and must keep its type" in err:
            return None  # an f32 value met a loop's bf16 one, which promotion makes f32: as written, an error
        if err:
            return ("reject", f"the interpreter: {err}")
        got, dtypes = as_ranks(interp)
        d = low_against_torch(gradc, prog, path, got, dtypes, low)
        if d:
            return ("torch-low", f"interpreter against PyTorch eager ({low}): {d}")
    else:
        try:
            want_sim, env = simulate(prog)
        except RuntimeError as e:
            return None  # the simulation cannot run this (shrinking produced it): not gradc's fault
        interp, err = run_gradc(gradc, path, ins, ["--backend=interp"])
        if err:
            return ("reject", f"the interpreter: {err}")
        got, dtypes = as_ranks(interp)
        sim = {o: [t.numpy() for t in v] for o, v in want_sim.items()}
        # f32 outputs (creation ops make f32) are compared as f32 computations, and so is
        # every output where an f32 constant is a function PyTorch computes in its own way,
        # or where an f32 value computed from floats (rounded to f32 by gradc, not by the
        # float64 simulation: erf(one_hot(...))) meets f64 ones
        inexact = any(getattr(s, "inexact", False) or rounded_f32(s, env) for s in prog.stmts)
        d = compare(got, sim, {o: "f32" if inexact and t == "f64" else t for o, t in dtypes.items()},
                    "interpreter against PyTorch (float64)")
        if d:
            return ("interp", d)
    rtol = 1e-6
    # A 16-bit program with a matmul: its f32 sums go in the order of the BLAS call each
    # backend makes (docs/language.md, "Low precision": within the f32 summation-order
    # tolerance, not bit for bit), and a sum next to a tie between two 16-bit values
    # rounds to either, which later ops carry on: within 4 units of roundoff of the type
    # of the output's largest magnitude (a wrong op is off by far more)
    units = 4 if low and "gemm(" in subprocess.run([gradc, "ir", "--stage=lowered", path], capture_output=True,
                                                   text=True).stdout else 0
    native, err = run_gradc(gradc, path, ins, ["--backend=native", "--iters=1"])  # the second step's outputs
    if err:
        return ("native-fail", f"the native backend: {err}")
    d = compare(as_ranks(native)[0], got, dtypes, "native against the interpreter", rtol=rtol, low_units=units)
    if d:
        return ("native", d)
    if exe:
        binary = os.path.join(folder, "p.exe")
        p = subprocess.run([gradc, "build", path, "--target=cpu", "-o", binary], capture_output=True, text=True)
        if p.returncode != 0:
            return ("exe-build", p.stderr[-2000:])
        w = str(prog.world)
        # the threads' outputs are the third step's (--iters=2): a step must not read what
        # an earlier one left in the class (the embedded class and the torch op run many)
        for how, cmd in [("threads", [binary, f"--ranks={w}", "--iters=2"]),
                         ("mpirun", ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", w, binary])]:
            p = subprocess.run(cmd + [f"--inputs={ins}", "--format=json"], capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                return (f"exe-{how}", p.stderr[-2000:])
            d = compare(as_ranks(json.loads(p.stdout))[0], got, dtypes, f"executable ({how}) against the interpreter", rtol=1e-6,
                        low_units=units)
            if d:
                return (f"exe-{how}", d)
        r = check_any_size(gradc, path, ins, folder, prog, torch_op, cuda, units)
        if r:
            return r
    if cuda:
        r = cuda_build(gradc, path, [], os.path.join(folder, "p.cuda"))
        if r:
            return r
    if torch_op:
        return check_torch(gradc, prog, folder, cuda)
    return None


ANY_RUNS = collections.Counter()  # check_any_size: programs built for any B, skipped, sizes compared
CUDA_BUILDS = collections.Counter()  # cuda_build: executables compiled for the cuda target, for one B and any


def cuda_build(gradc, path, flags, binary):
    """The program's CUDA executable (gradc build --target=cuda: nvcc, cuBLAS, NCCL) compiled
    and linked, or ("cuda-build", nvcc's or gradc's message)."""
    p = subprocess.run([gradc, "build", path, "--target=cuda", "-o", binary] + flags, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        return ("cuda-build", f"gradc build --target=cuda {' '.join(flags)}: {(p.stdout + p.stderr)[-3000:]}")
    CUDA_BUILDS["any" if flags else "one"] += 1
    return None


def check_any_size(gradc, path, ins, folder, prog, torch_op=False, cuda=False, low_units=0):
    """The program with a size B for the first dimension n of its first float input, and
    of every float input whose first dimension is n: the executable for any B (gradc
    build --size B=any) against the interpreter at B = n, 1 and n + 3 (where the program
    is one at that B), the float inputs with B as files of that shape. A program whose
    code has another form at other B is none for any size (emit says so): skipped.
    With torch_op, also the torch op for any B (check_ops.py --any-size), which calls it
    at those sizes in turn in one process, largest first: what a size leaves behind in
    the class (an array computed at the first call only) shows there, not in an
    executable, which runs one size."""
    world = prog.world
    text = open(path).read()
    decl = r"^(input\s+(\w+)\s*:\s*(?:f32|f64|bf16|f16))\[(\d+)((?:,[^\]]*)?)\]"
    first = re.search(decl, text, re.M)
    if not first:
        return None
    n = int(first.group(3))
    sized = {}  # input -> (shape after B, shared)
    def with_b(m):
        if int(m.group(3)) != n:
            return m.group(0)
        line = text[m.start():text.find("\n", m.start())]
        if not all(d.strip().isdigit() for d in m.group(4).split(",") if d.strip()):
            return m.group(0)  # other dimensions that are expressions: left as they are
        rest = [int(d) for d in m.group(4).split(",") if d.strip()]
        sized[m.group(2)] = (rest, re.search(r"\]\s+shared\b", line) is not None)
        return f"{m.group(1)}[B{m.group(4)}]"
    new = re.sub(decl, with_b, text, flags=re.M)
    if not sized:
        return None
    lines = new.split("\n")
    at = max(i for i, l in enumerate(lines) if re.match(r"(world|mesh)\b", l)) + 1 if any(
        re.match(r"(world|mesh)\b", l) for l in lines) else 0
    lines.insert(at, f"size B = {n}")
    any_path = os.path.join(folder, "any.dg")
    with open(any_path, "w") as f:
        f.write("\n".join(lines))
    binary = os.path.join(folder, "any.exe")
    p = subprocess.run([gradc, "build", any_path, "--target=cpu", "-o", binary, "--size=B=any"], capture_output=True,
                       text=True)
    if p.returncode == 1 and "no one set of sources fits every size" in p.stderr:
        ANY_RUNS["skipped"] += 1
        return None
    if p.returncode != 0:
        return ("any-build", p.stderr[-2000:])
    ANY_RUNS["built"] += 1
    if cuda:
        r = cuda_build(gradc, any_path, ["--size=B=any"], os.path.join(folder, "any.cuda"))
        if r:
            return r
    sizes = sorted({n, 1, n + 3})  # and the least B the class takes, where it refuses one
    checked = []
    for v in sizes:
        if subprocess.run([gradc, "check", any_path, f"--size=B={v}"], capture_output=True).returncode != 0:
            continue  # the program is none at this B
        d = os.path.join(folder, f"in_B{v}")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(ins, d)
        for name, (rest, shared) in sized.items():
            dtype = re.search(rf"^input\s+{name}\s*:\s*(\w+)", new, re.M).group(1)
            for r in [None] if shared else range(world):
                a = np.sin(np.arange(v * int(np.prod(rest, dtype=np.int64))) * 0.7 + (r or 0)).reshape([v] + rest)
                where = d if r is None else os.path.join(d, f"rank{r}")
                os.makedirs(where, exist_ok=True)
                np.save(os.path.join(where, name + ".npy"), npy_data(a, dtype))
        want, err = run_gradc(gradc, any_path, d, ["--backend=interp"])
        if err:
            continue  # bad data at this B (an index the new values put out of range)
        want, dtypes = as_ranks(want)
        p = subprocess.run([binary, f"--ranks={world}", f"--inputs={d}", "--format=json", "--iters=1"], capture_output=True,
                           text=True, timeout=300)
        # below the least B the class takes: "at least L", "a multiple of M, at least L" or
        # "a positive multiple of M" (L = M)
        least = re.search(rf"size B = {v}: it must be (?:at least|a multiple of \d+, at least|a positive multiple of) (\d+)",
                          p.stderr)
        if p.returncode == 1 and least:
            ANY_RUNS["refused"] += 1  # below the least B the class takes (a slice shorter there): try that B
            if int(least.group(1)) not in sizes:
                sizes.append(int(least.group(1)))
            continue
        if p.returncode != 0:
            return ("any-run", f"at B = {v}: {p.stderr[-2000:]}")
        diff = compare(as_ranks(json.loads(p.stdout))[0], want, dtypes,
                       f"executable for any B at B = {v} against the interpreter", rtol=1e-6, low_units=low_units)
        if diff:
            return ("any", diff)
        ANY_RUNS["sizes"] += 1
        checked.append(v)
    if torch_op and len(checked) > 1:
        order = sorted(checked, reverse=True)
        order = order[:1] + order[2:] + order[1:2]  # down, then up again
        cmd, failed = torch_op_command(gradc, open(any_path).read(), prog, folder, "any_op", "any-torch", ["--size=B=any"],
                               ["--any-size=B=" + ",".join(map(str, order))])
        if cmd is None:
            return failed
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        # the package's forward and pullback may take fewer B than the class (a multiple,
        # a least B), as it says: then at such B, where the program is one
        takes = re.search(r"the package takes B (?:a positive multiple of (\d+)|at least (\d+)|"
                          r"a multiple of (\d+), at least (\d+))", p.stdout + p.stderr)
        if p.returncode != 0 and takes:
            m = int(takes.group(1) or takes.group(3) or 1)
            least = int(takes.group(2) or takes.group(4) or m)
            first = -(-least // m) * m
            order = [v for v in (first + 2 * m, first, first + m)
                     if subprocess.run([gradc, "check", any_path, f"--size=B={v}"], capture_output=True).returncode == 0]
            if len(order) < 2:
                return None
            cmd[-1] = "--any-size=B=" + ",".join(map(str, order))
            ANY_RUNS["torch_refused"] += 1
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            return ("any-torch", (p.stdout + p.stderr)[-2000:])
        ANY_RUNS["torch"] += 1
    return None


# ---- shrinking -----------------------------------------------------------------------


def used_by(prog):
    need = set(prog.outputs)
    keep = []
    for s in reversed(prog.stmts):
        names = getattr(s, "names", [s.name])
        if any(n in need for n in names):
            keep.append(s)
            need.update(s.args)
    keep.reverse()
    return keep


def shrink(gradc, prog, folder, kind, exe, torch_op, low=None, cuda=False):
    def same(p):
        try:
            r = check(gradc, p, folder, exe, torch_op, low, cuda)
        except Exception:  # noqa: BLE001 - a shrunk program the simulation cannot take
            return False
        return r is not None and r[0] == kind

    def copy(p, stmts=None, outputs=None):
        q = Program(p.world, p.mesh)
        q.inputs = list(p.inputs)
        q.stmts = list(p.stmts if stmts is None else stmts)
        q.outputs = list(p.outputs if outputs is None else outputs)
        q.stmts = used_by(q)
        used = set(a for s in q.stmts for a in s.args) | set(q.outputs)
        q.inputs = [i for i in q.inputs if i.name in used]
        return q

    best = copy(prog)
    changed = True
    while changed:
        changed = False
        for o in list(best.outputs):
            if len(best.outputs) > 1:
                cand = copy(best, outputs=[x for x in best.outputs if x != o])
                if same(cand):
                    best, changed = cand, True
        for i, s in enumerate(list(best.stmts)):
            if s.kind == "raw" and hasattr(s, "names"):
                continue  # grads stay (what they differentiate is shrunk instead)
            for a in s.args:
                if s.text == a:
                    continue  # bypassed already
                bypass = Stmt(s.name, a, [a], (lambda env, w, a=a: env[a]))
                stmts = best.stmts[:i] + [bypass] + best.stmts[i + 1:]
                cand = copy(best, stmts=stmts)
                try:
                    ok = same(cand)
                except Exception:  # noqa: BLE001
                    ok = False
                if ok:
                    best, changed = cand, True
                    break
            if changed:
                break
    return best


# ---------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gradc")
    ap.add_argument("work")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=0)
    ap.add_argument("--exe", action="store_true", help="also build executables and run them (threads and mpirun)")
    ap.add_argument("--exe-every", type=int, default=1, help="with --exe, build every K-th program only")
    ap.add_argument("--torch", action="store_true", help="also check the torch target's op (check_ops.py)")
    ap.add_argument("--torch-every", type=int, default=1, help="with --torch, check every K-th program only")
    ap.add_argument("--mesh-every", type=int, default=0,
                    help="every K-th program over a 2-D or 3-D mesh (0: none; 1: every one)")
    ap.add_argument("--low-every", type=int, default=0,
                    help="every K-th program with its float inputs in bf16 or f16 (in turn): the interpreter against "
                         "PyTorch eager in those dtypes, the backends against the interpreter bit for bit (0: none)")
    ap.add_argument("--cuda-every", type=int, default=0,
                    help="every K-th program's CUDA executable compiled and linked with nvcc, and with --exe its "
                         "executable for any B (0: none; slow: about 30 s each)")
    ap.add_argument("--special-every", type=int, default=0,
                    help="every K-th program with NaN, infinities and signed zeros in some elements of its float "
                         "input files (bf16 and f16 programs too)")
    ap.add_argument("--wide-every", type=int, default=0,
                    help="every K-th program with its inputs' last axis 16 to 24 long (times a mesh's sizes): its maps "
                         "along rows run in rows on the CPU (map_rows)")
    ap.add_argument("--long-every", type=int, default=0,
                    help="every K-th program with its inputs' last axis 257 to 300 long (no mesh factor in a dimension, "
                         "no square matrices): past the integers bf16 holds exactly (sort's places, counts); before "
                         "--wide-every")
    ap.add_argument("--keep-going", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="a line per program")
    args = ap.parse_args()
    if not args.count and not args.seconds:
        args.count = 50
    if args.cuda_every and "cuda: yes" not in subprocess.run([args.gradc, "--version"], capture_output=True,
                                                              text=True).stdout:
        sys.exit(f"dgsmith: --cuda-every: {args.gradc} cannot compile the cuda target here (gradc --version)")
    os.makedirs(args.work, exist_ok=True)
    start = time.time()
    n = failures = 0
    while (args.count and n < args.count) or (args.seconds and time.time() - start < args.seconds):
        seed = args.seed * 1000003 + n
        special = bool(args.special_every) and n % args.special_every == 0
        prog = generate(seed, mesh=bool(args.mesh_every) and n % args.mesh_every == 0, special=special,
                        wide=bool(args.wide_every) and n % args.wide_every == 0,
                        long=bool(args.long_every) and n % args.long_every == 0)
        folder = os.path.join(args.work, "current")
        exe = args.exe and n % args.exe_every == 0
        torch_op = args.torch and n % args.torch_every == 0
        cuda = bool(args.cuda_every) and n % args.cuda_every == 0
        low = None
        if args.low_every and n % args.low_every == 0:
            low = "bf16" if (n // args.low_every) % 2 == 0 else "f16"
        t0 = time.time()
        r = check(args.gradc, prog, folder, exe, torch_op, low, cuda)
        if args.verbose:
            print(f"seed {seed}: {'mesh ' + prog.mesh_flag() if prog.mesh else f'world {prog.world}'}, {len(prog.stmts)} statements"
                  f"{', ' + low if low else ''}{', special values' if special else ''}, "
                  f"{'agrees' if r is None else r[0]} ({time.time() - t0:.1f} s)", flush=True)
        n += 1
        if r is None:
            continue
        failures += 1
        kind, msg = r
        counts = (LOW_TORCH_RUNS["checked"], collections.Counter(LOW_TORCH_RUNS["skipped"]))
        small = shrink(args.gradc, prog, folder, kind, exe, torch_op, low, cuda)
        keep = os.path.join(args.work, f"failure-{seed}")
        final = check(args.gradc, small, keep, exe, torch_op, low, cuda) or r  # writes it there
        LOW_TORCH_RUNS["checked"], LOW_TORCH_RUNS["skipped"] = counts  # the programs generated, not the shrunk
        print(f"DISAGREEMENT (seed {seed}, {kind}{', ' + low if low else ''}{', special values' if special else ''}): {msg}\n  shrunk program: {keep}/p.dg, "
              f"inputs {keep}/in\n  on it: {final[1]}\n{(low_precision(small, low) if low else small).text()}", flush=True)
        if not args.keep_going:
            break
    if args.low_every:
        skipped = LOW_TORCH_RUNS["skipped"]
        print(f"dgsmith: {LOW_TORCH_RUNS['checked']} bf16/f16 programs checked against PyTorch {torch.__version__} eager"
              + "".join(f"; {k} not, PyTorch: {why}" for why, k in skipped.most_common()))
    if args.exe:
        print(f"dgsmith: {ANY_RUNS['built']} programs built for any B and checked at {ANY_RUNS['sizes']} sizes in "
              f"all ({ANY_RUNS['refused']} below the least B the class takes, as it said); "
              f"{ANY_RUNS['skipped']} whose code takes another form at other B"
              + (f"; {ANY_RUNS['torch']} of them as torch ops at those sizes in turn ({ANY_RUNS['torch_refused']} at "
                 "the sizes the package took, fewer than the class)" if args.torch else ""))
    if args.cuda_every:
        print(f"dgsmith: {CUDA_BUILDS['one']} CUDA executables compiled and linked (not run: no GPU here)"
              + (f", and {CUDA_BUILDS['any']} for any B" if args.exe else "")
              + (f"; the CUDA ops of {CUDA_BUILDS['torch']} torch packages" if args.torch else ""))
    print(f"dgsmith: {n} programs, {failures} disagreements (seed {args.seed})")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
