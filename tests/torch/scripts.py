#!/usr/bin/env python3
"""The torch target as PyTorch users call it (docs/torch.md): 4 gloo processes, each pair
(0, 1) and (2, 3) running the 2-rank programs on its own process group (group=):

    scripts.py GRADC WORKDIR [--device=cuda] [--prepare-only]

(--prepare-only emits the packages into WORKDIR/pkg and stops; GRADC "-" then runs
from them, where no gradc is: scripts/gpu_check.sh.)

- seed 001: y = x + 2, z = y * y in PyTorch, then the GatherLayer program; y.grad is
  docs/language.md section 1's 12 / 18 (each rank calls backward on its own loss);
- seed 003: xx = (rank + 2) * x, the all_reduce sum and prod program, yy = s * s (or
  p * p) after it: x.grad is section 6's 40 / 60 for sum and 144 / 144 for prod;
- torch.compile(fullgraph=True) of a function that calls the op: no graph break, the
  same values and gradients as eager; an eager call skips torch.library's dispatch, a
  call under a dispatch mode takes it, with the same values and gradients;
- torch.autocast(bfloat16) around the op, eager and compiled: the values and gradients
  without it (the op keeps its program's dtypes); a bfloat16 tensor from autocast for
  an f32 input: the ValueError of a wrong dtype, saying how to pass it;
- a wrong dtype or shape, a mesh= on a program without one, an i32 input out of range:
  ValueError naming the input (and, for a shape, the size B the package is emitted for);
  a float input of another dtype is never converted;
- an index out of range inside the op: RuntimeError with the source location;
- double backward: RuntimeError saying it is not supported.
- the default group, of 4 ranks, for a 2-rank program: ValueError.
- the other convention (docs/torch.md, "The gradient convention"): seeds 001 and 003
  emitted with --data-parallel=none (seeds_one_loss.dg), each rank's copy of the
  replicated loss being the one loss: y.grad is 6 / 9 and x.grad 20 / 30 and 72 / 72,
  the mode=global values of docs/language.md section 6; cotangents that differ between
  the ranks are a RuntimeError naming the output;
- Megatron: megatron.dg (tensor parallelism over tp inside data parallelism over dp,
  --data-parallel=dp) on a 2 x 2 DeviceMesh of the 4 ranks, a Module under
  DistributedDataParallel over dp, trained for 3 SGD steps with loss.backward() on every
  rank: the parameters equal float64 single-process training of the whole model on the
  whole batch;
  and torch.compile of a step that calls it with mesh=: eager's loss and gradients;
- the shared-input check: a shared input that differs is a RuntimeError naming it and
  the element, and check_shared(False) turns the check off.
- inputs as views (transposed, strided, expanded to stride 0): the same loss and
  gradients, bit for bit, as for contiguous copies;
- torch.func.grad, grad_and_value and vjp (also of the Megatron block on the mesh): the
  gradients loss.backward() gives, bit for bit; vmap, jacrev, jvp and grad of grad: a
  RuntimeError saying they are not supported;
- any number of arguments: a program of 200 inputs and 201 outputs (PyTorch's schemas
  take at most 64 arguments; the ops take lists) imports, runs and differentiates;
- threads: four Python threads calling the op (local.dg, no collective) at once, each
  its own values and gradients, as called one at a time.
Every check raises on failure, which ends every rank and this script with status 1.

--device=cuda: the same on NCCL with CUDA tensors, each rank on its own GPU (rank r on
cuda:r), on 4 GPUs, or on 2 (one pair; no default group of 4 then). The error inside the
op is left out there: a CUDA kernel that finds it traps, which ends the GPU's context.
"""
import os
import subprocess
import sys
import threading

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))


def expect_raises(kind, words, fn):
    try:
        fn()
    except kind as e:
        for w in words:
            assert w in str(e), f"{kind.__name__} without '{w}': {e}"
        return
    raise AssertionError(f"no {kind.__name__} ({words})")


DEVICE = torch.device("cpu")  # rank_main: this rank's GPU with --device=cuda


def seed_001(gather_layer, rank, g):
    x = (torch.ones(2, 2) if rank == 0 else torch.zeros(2, 2)).to(DEVICE).requires_grad_()
    y = x + 2
    y.retain_grad()
    z = y * y
    out = gather_layer.gather_layer(z, group=g)
    out.backward()
    want = 12.0 if rank == 0 else 18.0
    assert torch.equal(y.grad.cpu(), torch.full((2, 2), want)), f"seed 001: y.grad {y.grad.tolist()}, want {want}"
    assert float(out) == 0.25 * 4 * 36.0, f"seed 001: out {float(out)}"  # r = z_0 * z_1 = 9 * 4


def seed_003(all_reduce_seed, rank, g):
    for which, want in (("sum", (40.0, 60.0)), ("prod", (144.0, 144.0))):
        x = torch.ones(1, device=DEVICE).requires_grad_()
        xx = (rank + 2) * x
        s, p = all_reduce_seed.all_reduce_seed(xx, group=g)
        v = s if which == "sum" else p
        yy = v * v
        yy.backward()
        assert float(x.grad) == want[rank], f"seed 003 {which}: x.grad {float(x.grad)}, want {want[rank]}"


def one_loss(seeds_one_loss, rank, g):
    """Seeds 001 and 003 with every rank's copy of the replicated loss the one loss."""
    x = (torch.ones(2, 2) if rank == 0 else torch.zeros(2, 2)).to(DEVICE).requires_grad_()
    y = x + 2
    y.retain_grad()
    out, _, _ = seeds_one_loss.seeds_one_loss(y * y, torch.ones(1, device=DEVICE), group=g)
    out.backward()
    want = 6.0 if rank == 0 else 9.0
    assert torch.equal(y.grad.cpu(), torch.full((2, 2), want)), f"one loss, seed 001: y.grad {y.grad.tolist()}"
    for which, want in (("sum", (20.0, 30.0)), ("prod", (72.0, 72.0))):
        x = torch.ones(1, device=DEVICE).requires_grad_()
        _, s, p = seeds_one_loss.seeds_one_loss(torch.zeros(2, 2, device=DEVICE), (rank + 2) * x, group=g)
        v = s if which == "sum" else p
        (v * v).backward()
        assert float(x.grad) == want[rank], f"one loss, seed 003 {which}: x.grad {float(x.grad)}, want {want[rank]}"
    # a cotangent that differs between the ranks: the output is one loss, so it is an error
    out, _, _ = seeds_one_loss.seeds_one_loss(torch.ones(2, 2, device=DEVICE, requires_grad=True),
                                              torch.ones(1, device=DEVICE), group=g)
    expect_raises(RuntimeError, ["gradient of output 'out'", "differs between ranks 0 and 1", "along world",
                                 "one loss", "--data-parallel"], lambda: (out * (rank + 1)).backward())


def shared_check(megatron, rank, mesh):
    """A shared input that differs between its ranks, and the switch that turns the check off."""
    args = [torch.ones(4, 6, dtype=torch.float64) for _ in range(2)] + [
        torch.ones(6, 4, dtype=torch.float64), torch.ones(4, dtype=torch.float64),
        torch.ones(4, 6, dtype=torch.float64), torch.ones(6, dtype=torch.float64)]
    args[5] = args[5].clone()
    args[5][3] += rank  # g is shared: rank 1's differs at element [3]
    expect_raises(RuntimeError, ["shared input 'g' differs between ranks 0 and 1 at element [3]", "megatron.dg:12:"],
                  lambda: megatron.megatron(*args, mesh=mesh))
    was = megatron.check_shared(False)
    megatron.megatron(*args, mesh=mesh)  # not checked
    assert megatron.check_shared(was) is False


def megatron_training(megatron, rank, mesh):
    """3 SGD steps of the Megatron block as a Module under DistributedDataParallel over dp
    (which averages the gradients over dp), loss.backward() on every rank, against float64
    single-process training of the whole model on the whole batch (the mean of the dp
    batches' losses)."""
    gen = torch.Generator().manual_seed(5)
    W1, B1, W2 = torch.randn(6, 8, generator=gen, dtype=torch.float64) / 2, torch.randn(8, generator=gen,
                                                                                    dtype=torch.float64) / 2, \
        torch.randn(8, 6, generator=gen, dtype=torch.float64) / 2
    G = 1 + torch.randn(6, generator=gen, dtype=torch.float64) / 4
    d, t = rank // 2, rank % 2
    cols = slice(4 * t, 4 * t + 4)

    class Block(torch.nn.Module):  # this tp rank's columns of w1 and b1 and rows of w2
        def __init__(self):
            super().__init__()
            self.w1, self.b1 = torch.nn.Parameter(W1[:, cols].clone()), torch.nn.Parameter(B1[cols].clone())
            self.w2, self.g = torch.nn.Parameter(W2[cols, :].clone()), torch.nn.Parameter(G.clone())

        def forward(self, x, target):
            return megatron.megatron(x, target, self.w1, self.b1, self.w2, self.g, mesh=mesh)

    model = Block()
    ddp = torch.nn.parallel.DistributedDataParallel(model, process_group=mesh.get_group("dp"))
    lr = 0.1
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    params = [model.w1, model.b1, model.w2, model.g]
    whole = [p.clone().requires_grad_() for p in (W1, B1, W2, G)]

    def block(x, w1, b1, w2, gain):
        y = torch.nn.functional.gelu(x @ w1 + b1) @ w2
        z = y - y.mean(dim=1, keepdim=True)
        return z / torch.sqrt((z * z).mean(dim=1, keepdim=True) + 1e-5) * gain

    for step in range(3):
        data = torch.Generator().manual_seed(100 + step)
        xs, ts = torch.randn(2, 4, 6, generator=data, dtype=torch.float64), torch.randn(2, 4, 6, generator=data,
                                                                                       dtype=torch.float64)
        ddp(xs[d], ts[d]).backward()
        opt.step()
        opt.zero_grad()
        ref = sum(((block(xs[k], *whole) - ts[k]) ** 2).mean() for k in range(2)) / 2
        ref.backward()
        with torch.no_grad():
            for p in whole:
                p -= lr * p.grad
                p.grad = None
    want = [whole[0][:, cols], whole[1][cols], whole[2][cols, :], whole[3]]
    for name, got, w in zip(("w1", "b1", "w2", "g"), params, want):
        err = float((got - w).abs().max())
        assert err < 1e-12, f"Megatron training, rank {rank}: {name} differs from one process's by {err}"


def layouts(gather_layer, megatron, rank, g, mesh):
    """Inputs as PyTorch hands them over: a transposed view, a strided slice, an expanded
    (stride 0) tensor. The op reads their values, not their storage in order: the loss
    and every gradient are the same bits as for contiguous copies."""
    base = torch.arange(4.0, device=DEVICE).reshape(2, 2) + rank

    def gather(z):
        out = gather_layer.gather_layer(z, group=g)
        out.backward()
        return out.detach()

    want_z = base.t().contiguous().requires_grad_()
    want = gather(want_z)
    view_base = base.clone().requires_grad_()
    got = gather(view_base.t())  # z = base^T, not contiguous
    assert torch.equal(got, want), f"a transposed input: {got} against {want}"
    assert torch.equal(view_base.grad.t(), want_z.grad), "a transposed input's gradient"
    if mesh is None:
        return
    gen = torch.Generator().manual_seed(11)  # the same on every rank: x is shared along tp, the weights along dp
    x, t = torch.randn(4, 12, generator=gen, dtype=torch.float64), torch.randn(4, 6, generator=gen, dtype=torch.float64)
    w1t, b1 = torch.randn(4, 6, generator=gen, dtype=torch.float64), torch.randn(4, generator=gen, dtype=torch.float64)
    w2, gain = torch.randn(4, 6, generator=gen, dtype=torch.float64), torch.tensor([1.25], dtype=torch.float64)
    for v in (x, t, w1t, b1, w2, gain):
        v.requires_grad_()
    views = [x[:, ::2], t, w1t.t(), b1, w2, gain.expand(6)]  # strided, transposed, expanded to stride 0
    copies = [v.detach().contiguous().requires_grad_() for v in views]
    got, want = megatron.megatron(*views, mesh=mesh), megatron.megatron(*copies, mesh=mesh)
    got.backward()
    want.backward()
    assert torch.equal(got, want), f"Megatron on views: loss {float(got)} against {float(want)}"
    for name, grad, wanted in (("x", x.grad[:, ::2], copies[0].grad), ("target", t.grad, copies[1].grad),
                               ("w1", w1t.grad.t(), copies[2].grad), ("b1", b1.grad, copies[3].grad),
                               ("w2", w2.grad, copies[4].grad)):
        assert torch.equal(grad, wanted), f"Megatron on views: the gradient of {name}"
    assert not x.grad[:, 1::2].any(), "Megatron on views: x's elements the view skips"
    total = copies[5].grad.sum()  # the expanded gain's gradient: the sum over its 6 places
    assert abs(float(gain.grad) - float(total)) <= 1e-15 * abs(float(total)), "Megatron on views: the gradient of g"


MANY = 200


def many_inputs_program():
    """200 inputs w<i> : f32[2]; outputs loss = all_reduce(sum_i sum(w_i * w_i)) and y<i> = 3 w<i>."""
    lines = ["world 2"] + [f"input w{i} : f32[2]" for i in range(MANY)]
    lines.append("loss = all_reduce(" + " + ".join(f"sum(w{i} * w{i})" for i in range(MANY)) + ")")
    lines += [f"y{i} = w{i} * 3" for i in range(MANY)]
    lines.append("output loss, " + ", ".join(f"y{i}" for i in range(MANY)))
    return "\n".join(lines) + "\n"


def many_inputs(many, rank, g):
    ws = [torch.tensor([i + 1.0, rank - i], device=DEVICE).requires_grad_() for i in range(MANY)]
    loss, *ys = many.many(*ws, group=g)
    assert len(ys) == MANY and torch.equal(ys[7].detach(), 3 * ws[7].detach())
    (loss + sum(y.sum() for y in ys)).backward()
    for w in ws:  # the loss is replicated: each of the 2 ranks' copies counts (DDP's convention)
        assert torch.equal(w.grad, 4 * w.detach() + 3), f"many inputs: {w.grad} for {w.detach()}"


def threads(local, single):
    """Python threads calling the op at once (ctypes lets go of Python's lock) each get
    their own values and gradients: a call holds the class until it ends (without that,
    the calls share its inputs and workspace: about one in three is wrong). `local` has
    no collective (so that the order in which the threads' calls run on each rank cannot
    pair one rank's call with another's), on a process group of this rank alone."""
    xs = [torch.randn(256, 256, generator=torch.Generator().manual_seed(k)).to(DEVICE) for k in range(4)]
    w = (torch.randn(256, 256, generator=torch.Generator().manual_seed(9)) / 16).to(DEVICE)
    def step(x):
        x = x.clone().requires_grad_()
        y = local.local(x, w, group=single)
        (y * y).sum().backward()
        return y.detach(), x.grad
    want = [step(x) for x in xs]
    wrong = []
    def work(k):
        for _ in range(25):
            y, dx = step(xs[k])
            if not (torch.equal(y, want[k][0]) and torch.equal(dx, want[k][1])):
                wrong.append(k)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not wrong, f"threads: {len(wrong)} of 100 calls made at once gave another call's values"


def autocast(gather_layer, rank, g):
    """Under torch.autocast the op computes in the dtypes its program declares (autocast
    changes PyTorch's own ops, not a custom op), eagerly and compiled: the values and
    gradients without autocast, bit for bit; a bfloat16 tensor that autocast made for an
    f32 input is the ValueError of a wrong dtype, saying how to pass it."""
    def step(x):
        return gather_layer.gather_layer(x * x, group=g) * 3

    x0 = torch.arange(4.0, device=DEVICE).reshape(2, 2) + rank
    xe = x0.clone().requires_grad_()
    want = step(xe)
    want.sum().backward()
    for how, fn in (("eager", step), ("compiled", torch.compile(step, fullgraph=True, backend="aot_eager"))):
        x = x0.clone().requires_grad_()
        with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
            got = fn(x)
            got.sum().backward()
        assert got.dtype == torch.float32 and torch.equal(got, want), f"autocast ({how}): {got} against {want}"
        assert torch.equal(x.grad, xe.grad), f"autocast ({how}): grad {x.grad} against {xe.grad}"
    with torch.autocast(DEVICE.type, dtype=torch.bfloat16):
        product = x0 @ torch.eye(2, device=DEVICE)  # bfloat16: autocast's matmul
        expect_raises(ValueError, ["input 'z' is declared f32[2, 2], but was given bfloat16[2, 2]", "torch.autocast",
                                   "z.to(torch.float32)", "bf16[2, 2]"],
                      lambda: gather_layer.gather_layer(product, group=g))


def compiled(gather_layer, rank, g):
    def step(x):
        z = (x + 2) * (x + 2)
        return gather_layer.gather_layer(z, group=g) * 3

    x0 = torch.arange(4.0, device=DEVICE).reshape(2, 2) + rank
    xe = x0.clone().requires_grad_()
    eager = step(xe)
    eager.backward()
    xc = x0.clone().requires_grad_()
    fn = torch.compile(step, fullgraph=True)
    got = fn(xc)
    got.backward()
    assert torch.equal(got, eager), f"compile: {got} against eager {eager}"
    assert torch.equal(xc.grad, xe.grad), f"compile: grad {xc.grad} against eager {xe.grad}"


def paths(gather_layer, rank, g):
    """An eager call goes straight to the compiled class (an autograd Function where an
    input needs a gradient); under a dispatch mode (as fake tensors, make_fx and
    FlopCounterMode trace) it goes through torch.library's op: the same values and
    gradients, bit for bit. (torch.compile's path: compiled() above.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Seen.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    x0 = torch.arange(4.0, device=DEVICE).reshape(2, 2) * (rank + 1)
    xe = x0.clone().requires_grad_()
    eager = gather_layer.gather_layer(xe * 2, group=g)
    assert type(eager.grad_fn).__name__ == "_EagerBackward", f"an eager call's node: {eager.grad_fn}"
    eager.backward()
    xm = x0.clone().requires_grad_()
    with Seen():
        traced = gather_layer.gather_layer(xm * 2, group=g)
        traced.backward()
    assert "gradc_gather_layer.forward.default" in Seen.ops and "gradc_gather_layer.pullback.default" in Seen.ops, \
        f"under a dispatch mode: {Seen.ops}"
    assert torch.equal(traced, eager) and torch.equal(xm.grad, xe.grad), "the op's two paths differ"
    with torch.no_grad():
        assert torch.equal(gather_layer.gather_layer(x0 * 2, group=g), eager.detach()), "a call without autograd"


def megatron_args():
    """This rank's batch and target (shared along tp) and parameters w1, b1, w2 (shared
    along dp) and g of megatron.dg on the 2 x 2 mesh, float64."""
    d, t = dist.get_rank() // 2, dist.get_rank() % 2
    gen = torch.Generator().manual_seed(7 + d)
    x, target = (torch.randn(4, 6, generator=gen, dtype=torch.float64) for _ in range(2))
    gen.manual_seed(9 + t)
    params = [torch.randn(6, 4, generator=gen, dtype=torch.float64), torch.randn(4, generator=gen, dtype=torch.float64),
              torch.randn(4, 6, generator=gen, dtype=torch.float64), torch.linspace(0.5, 1.5, 6, dtype=torch.float64)]
    return x, target, params


def compiled_mesh(megatron, mesh):
    """torch.compile(fullgraph=True) of a step that calls the op with mesh= (a DeviceMesh):
    eager's loss and gradients, bit for bit (aot_eager: dynamo's trace and autograd's,
    without inductor's code generation, which compiled() above runs)."""
    x, target, params = megatron_args()

    def step(*ps):
        return megatron.megatron(x, target, *ps, mesh=mesh) * 2

    eager, leaves = [p.clone().requires_grad_() for p in params], [p.clone().requires_grad_() for p in params]
    want = step(*eager)
    want.backward()
    got = torch.compile(step, fullgraph=True, backend="aot_eager")(*leaves)
    got.backward()
    assert torch.equal(got, want), f"compile with mesh=: {got} against eager {want}"
    for name, a, b in zip(("w1", "b1", "w2", "g"), leaves, eager):
        assert torch.equal(a.grad, b.grad), f"compile with mesh=: the gradient of {name} differs from eager's"


def transforms(gather_layer, megatron, rank, g, mesh):
    """torch.func.grad, grad_and_value and vjp of a function that calls the op give the
    gradients loss.backward() gives, bit for bit (torch.library's autograd wrapper has no
    setup_context, which the transforms need: the op takes an autograd Function with
    one under a transform); vmap (so jacrev), jvp and grad of grad are RuntimeErrors
    saying they are not supported."""
    def f(x):
        return gather_layer.gather_layer((x + 2) * (x + 2), group=g)

    x0 = torch.arange(4.0, device=DEVICE).reshape(2, 2) - rank
    xe = x0.clone().requires_grad_()
    f(xe).backward()
    grad, (gv, value) = torch.func.grad(f)(x0), torch.func.grad_and_value(f)(x0)
    (vjp,) = torch.func.vjp(f, x0)[1](torch.tensor(1.0, device=DEVICE))
    for name, got in (("grad", grad), ("grad_and_value", gv), ("vjp", vjp)):
        assert torch.equal(got, xe.grad), f"torch.func.{name}: {got.tolist()} against backward's {xe.grad.tolist()}"
    assert torch.equal(value, f(x0)), f"torch.func.grad_and_value's value {value}"
    expect_raises(RuntimeError, ["torch.func.vmap", "not supported"], lambda: torch.func.jacrev(f)(x0))
    batched = torch.func.vmap(lambda z: gather_layer.gather_layer(z, group=g))
    expect_raises(RuntimeError, ["torch.func.vmap", "not supported"], lambda: batched(torch.ones(3, 2, 2, device=DEVICE)))
    expect_raises(RuntimeError, ["forward-mode", "not supported"], lambda: torch.func.jvp(f, (x0,), (x0,)))
    expect_raises(RuntimeError, ["double backward is not supported"],
                  lambda: torch.func.grad(lambda z: torch.func.grad(f)(z).sum())(x0))
    if mesh is None:
        return
    x, target, params = megatron_args()
    leaves = [p.clone().requires_grad_() for p in params]
    megatron.megatron(x, target, *leaves, mesh=mesh).backward()
    got = torch.func.grad(lambda *ps: megatron.megatron(x, target, *ps, mesh=mesh), argnums=(0, 1, 2, 3))(*params)
    for name, a, b in zip(("w1", "b1", "w2", "g"), got, leaves):
        assert torch.equal(a, b.grad), f"torch.func.grad of the Megatron block: {name} differs from backward's"


def errors(gather_layer, collectives, rank, g, world):
    expect_raises(ValueError, ["input 'z'", "f32[2, 2]", "float64[2, 2]"],
                  lambda: gather_layer.gather_layer(torch.zeros(2, 2, dtype=torch.float64, device=DEVICE), group=g))
    expect_raises(ValueError, ["input 'z'", "f32[2, 2]", "float32[3, 2]", "emitted for B = 2", "gradc emit --size"],
                  lambda: gather_layer.gather_layer(torch.zeros(3, 2, device=DEVICE), group=g))
    expect_raises(ValueError, ["input 'z'", "list"], lambda: gather_layer.gather_layer([[1.0, 2.0], [3.0, 4.0]], group=g))
    expect_raises(TypeError, ["missing input 'z'"], lambda: gather_layer.gather_layer(group=g))
    expect_raises(ValueError, ["no mesh"], lambda: gather_layer.gather_layer(torch.zeros(2, 2), mesh=object()))
    if world == 4:
        expect_raises(ValueError, ["generated for 2 ranks, but the process group has 4", "--ranks=4"],
                      lambda: gather_layer.gather_layer(torch.zeros(2, 2, device=DEVICE)))
    x = torch.zeros(4, 4, device=DEVICE)
    w = torch.ones(4, 4, device=DEVICE)
    # int64 labels are taken; one that does not fit i32 is an error naming the input
    labels = torch.tensor([0, 1, 1, 0], dtype=torch.int64, device=DEVICE)
    out = collectives.collectives(x, w, labels, group=g)
    assert len(out) == 22 and all(y.device == DEVICE for y in out)
    expect_raises(ValueError, ["input 'labels'", "does not fit"],
                  lambda: collectives.collectives(x, w, torch.tensor([0, 1, 2**40, 0], device=DEVICE), group=g))
    if DEVICE.type == "cpu":  # an index out of range inside the op, on every rank: gradc run's message
        expect_raises(RuntimeError, ["collectives.dg:31:", "take: index 7 is out of range 0..3"],
                      lambda: collectives.collectives(x, w, labels, idx=torch.tensor([7, 0]), group=g))
        # the failed call's shared-input check (its all_reduce started before the kernels)
        # is finished by the next call, which gives the first call's values
        again = collectives.collectives(x, w, labels, group=g)
        assert all(torch.equal(a, b) for a, b in zip(again, out)), "a call after a failed one"
    # double backward
    z = torch.ones(2, 2, device=DEVICE, requires_grad=True)
    out = gather_layer.gather_layer(z * z, group=g)
    (g,) = torch.autograd.grad(out, z, create_graph=True)
    expect_raises(RuntimeError, ["double backward is not supported"], lambda: g.sum().backward())


def rendezvous(workdir):
    return os.path.join(os.path.abspath(workdir), "rendezvous")


def rank_main(rank, workdir, device, world):
    global DEVICE
    if device == "cuda":
        DEVICE = torch.device("cuda", rank)
        torch.cuda.set_device(DEVICE)
    # a file in the work folder, not a TCP port: runs side by side never collide
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method="file://" + rendezvous(workdir),
                            rank=rank, world_size=world)
    pairs = [dist.new_group([0, 1]), dist.new_group([2, 3])] if world == 4 else [dist.group.WORLD]
    g, rank = pairs[rank // 2], rank % 2
    sys.path.insert(0, os.path.join(workdir, "pkg"))
    import all_reduce_seed
    import collectives
    import gather_layer
    import local
    import many
    import megatron
    import seeds_one_loss

    seed_001(gather_layer, rank, g)
    seed_003(all_reduce_seed, rank, g)
    one_loss(seeds_one_loss, rank, g)
    compiled(gather_layer, rank, g)
    autocast(gather_layer, rank, g)
    paths(gather_layer, rank, g)
    errors(gather_layer, collectives, rank, g, world)
    many_inputs(many, rank, g)
    singles = [dist.new_group([r]) for r in range(world)]  # every rank makes every group
    threads(local, singles[dist.get_rank()])
    if world == 4 and DEVICE.type == "cpu":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        megatron_training(megatron, dist.get_rank(), mesh)
        shared_check(megatron, dist.get_rank(), mesh)
        compiled_mesh(megatron, mesh)
        layouts(gather_layer, megatron, rank, g, mesh)
        transforms(gather_layer, megatron, rank, g, mesh)
    else:
        layouts(gather_layer, megatron, rank, g, None)
        transforms(gather_layer, megatron, rank, g, None)
    dist.barrier()
    dist.destroy_process_group()


def main():
    device = "cuda" if "--device=cuda" in sys.argv else "cpu"
    args = [a for a in sys.argv[1:] if a not in ("--device=cuda", "--prepare-only")]
    gradc, workdir = args[0], args[1]
    world = 4 if device == "cpu" or torch.cuda.device_count() >= 4 else 2
    if gradc != "-":  # "-": WORKDIR/pkg holds the packages already (scripts/gpu_check.sh)
        for program, flags in (("gather_layer", []), ("all_reduce_seed", []), ("collectives", []),
                               ("seeds_one_loss", ["--data-parallel=none"]), ("megatron", ["--data-parallel=dp"]),
                               ("local", [])):
            subprocess.run([gradc, "emit", os.path.join(HERE, program + ".dg"), "--target=torch", "-o",
                            os.path.join(workdir, "pkg")] + flags, check=True)
        with open(os.path.join(workdir, "many.dg"), "w") as f:
            f.write(many_inputs_program())
        subprocess.run([gradc, "emit", os.path.join(workdir, "many.dg"), "--target=torch", "-o",
                        os.path.join(workdir, "pkg")], check=True)
        if "--prepare-only" in sys.argv:
            return
    if os.path.exists(rendezvous(workdir)):
        os.remove(rendezvous(workdir))  # a store left by an earlier run would be joined
    mp.spawn(rank_main, args=(workdir, device, world), nprocs=world)
    if device == "cpu":
        print("seeds 001 and 003 under both conventions, torch.compile, input errors, an error inside the op and "
              "double backward, views as inputs, 200 inputs, torch.func transforms, torch.autocast, threads calling "
              "the op at once: as expected on "
              "two process groups of 2 gloo ranks; Megatron TP x DP training under DDP equal to one process's, and "
              "the shared-input check, and torch.compile with mesh=, on a 2 x 2 DeviceMesh")
    else:
        groups = "two process groups" if world == 4 else "one process group"
        print("seeds 001 and 003, torch.compile, input errors, double backward, a view as input, torch.func "
              f"transforms, torch.autocast and threads: as expected on CUDA tensors, {groups} of 2 nccl ranks")


if __name__ == "__main__":
    main()
