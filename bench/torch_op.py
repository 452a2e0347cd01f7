"""The gradc op against the same loss in PyTorch, eager and torch.compile, with the op's
shared-input check on and off (docs/torch.md).

usage: python3 bench/torch_op.py [GRADC] [--steps=K] [--only=PROGRAM]   (default: build/gradc, K = 15)

- contrastive: bench/programs/contrastive_op.dg (1024x256 embeddings per rank, a shared
  256x128 projection, all_gather, InfoNCE) on 2 gloo processes, against
  bench/torch_programs.py's contrastive loss with torch.distributed.nn's all_gather;
- block: bench/programs/block_op.dg (a Megatron MLP block with a layer norm, TP x DP on a
  2 x 2 DeviceMesh, --data-parallel=dp) on 4 gloo processes, against the same block with
  Megatron's reduce-from-tensor-parallel function (all_reduce forward, identity backward);
  and the same block on a 1 x 2 mesh (`gradc emit --mesh=dp=1,tp=2`: the same sizes a
  rank, 2 processes), so that on a 2-core machine each process has a core of its own;
- moe: bench/programs/moe_op.dg (examples/moe_top2.dg's top-2 MoE layer, 512 tokens of
  256 per rank, 2 experts of 256x512x256 on each of 2 gloo processes, capacity factor 1)
  against the same layer with torch.topk, torch.cumsum, einsum and torch.distributed.nn's
  all_to_all_single.

Forward and backward per step (the gradients of the tensors that require grad, which the
op is emitted to give with --grad; the data, x and target, have none), 1 thread per process
(OMP, MKL and OpenBLAS), a barrier before and after each step, medians of K steps after a
warm-up one (torch.compile's warm-up compiles; TORCHINDUCTOR_COMPILE_THREADS=1, so that
no compile workers run beside the steps). The four variants run in the same processes,
taking turns step by step (so that the machine's other load falls on all of them alike),
after a check that the op's loss and gradients are PyTorch's. The check's cost is the
median over rounds of the ratio of the op's step with the check to its step without it
in the same round, with the middle half of those ratios (the steps of one variant vary
by more than the check costs on a busy machine).
PyTorch: PyPI's, in the virtual environment scripts/torch_venv.sh makes. Prints Markdown
for bench/README.md.
"""
import os
import platform
import statistics
import subprocess
import sys
import tempfile

from native import blas_kernels, in_venv_one_thread  # noqa: E402  (bench/native.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
GRADC = ARGS[0] if ARGS else os.path.join(HERE, "..", "build", "gradc")
STEPS = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--steps=")), 15)


def contrastive(rank, torch, dist, op):
    """The op's call and PyTorch's loss, and the tensors whose gradients a step makes."""
    import torch.distributed.nn.functional as F
    import torch.nn.functional as NF
    from torch_programs import randn

    x = randn([1024, 256], 100 + rank, "cpu").requires_grad_()
    w = (randn([256, 128], 1, "cpu") / 16).requires_grad_()
    labels = torch.arange(1024) + 1024 * rank

    def torch_loss():
        z = NF.normalize(torch.tanh(x @ w), dim=-1)
        all_z = torch.cat(F.all_gather(z), dim=0)
        return NF.cross_entropy(z @ all_z.t() / 0.1, labels)

    return (lambda: op(x, w)), torch_loss, [x, w]


def block(rank, torch, dist, op, mesh):
    import torch.nn.functional as NF
    from torch_mesh import ReduceFromTP  # Megatron's reduce from the tensor-parallel region
    from torch_programs import randn

    d, t = rank // 2, rank % 2  # the tp axis has 2 ranks on either mesh
    tp = mesh.get_group("tp")
    x, target = randn([256, 512], 7 + d, "cpu"), randn([256, 512], 8 + d, "cpu")
    w1 = (randn([512, 512], 11 + t, "cpu") / 16).requires_grad_()
    b1 = (randn([512], 13 + t, "cpu") / 16).requires_grad_()
    w2 = (randn([512, 512], 21 + t, "cpu") / 16).requires_grad_()
    g = (1 + randn([512], 5, "cpu") / 8).requires_grad_()

    def torch_loss():
        y = ReduceFromTP.apply(NF.gelu(x @ w1 + b1) @ w2, tp)
        z = y - y.mean(dim=1, keepdim=True)
        n = z / torch.sqrt((z * z).mean(dim=1, keepdim=True) + 1e-5) * g
        return ((n - target) ** 2).mean()

    return (lambda: op(x, target, w1, b1, w2, g, mesh=mesh)), torch_loss, [w1, b1, w2, g]


def moe(rank, torch, dist, op):
    """examples/moe_top2.dg's layer (bench/programs/moe_op.dg) as a PyTorch user writes it:
    torch.topk, torch.cumsum, einsum, and torch.distributed.nn's all_to_all_single."""
    import torch.nn.functional as NF
    from torch.distributed.nn.functional import all_to_all_single
    from torch_programs import randn

    world, EL, S, D, F = 2, 2, 512, 256, 512
    E = EL * world
    C = 2 * S // E
    x = randn([S, D], 100 + rank, "cpu").requires_grad_()
    target = randn([S, D], 200 + rank, "cpu")
    wg = (randn([D, E], 1, "cpu") / 16).requires_grad_()
    w1 = (randn([EL, D, F], 10 + rank, "cpu") / 16).requires_grad_()
    w2 = (randn([EL, F, D], 20 + rank, "cpu") / 16).requires_grad_()

    def torch_loss():
        probs = NF.softmax(x @ wg, -1)
        top, idx = torch.topk(probs, 2)
        gates = top / top.sum(1, keepdim=True)
        m1, m2 = NF.one_hot(idx[:, 0], E).float(), NF.one_hot(idx[:, 1], E).float()
        slot1 = ((torch.cumsum(m1, 0) - 1) * m1).sum(1)
        slot2 = ((torch.cumsum(m2, 0) - 1 + m1.sum(0)) * m2).sum(1)
        slots = torch.arange(C, dtype=torch.float32)
        at1 = m1[:, :, None] * (slot1[:, None] == slots).float()[:, None, :]
        at2 = m2[:, :, None] * (slot2[:, None] == slots).float()[:, None, :]
        combine = at1 * gates[:, 0, None, None] + at2 * gates[:, 1, None, None]
        xe = torch.einsum("sec,sd->ecd", at1 + at2, x).contiguous()  # block k: rank k's experts
        xin = all_to_all_single(torch.empty_like(xe), xe).reshape(world, EL, C, D).transpose(0, 1)
        out = torch.einsum("ecf,efd->ecd", NF.gelu(torch.einsum("ecd,edf->ecf", xin.reshape(EL, world * C, D), w1)), w2)
        out = out.reshape(EL, world, C, D).transpose(0, 1).contiguous()
        back = all_to_all_single(torch.empty_like(out), out).reshape(E, C, D)
        y = torch.einsum("sec,ecd->sd", combine, back)
        return ((y - target) ** 2).mean() + 0.01 * E * (probs.mean(0) * m1.mean(0)).sum()

    return (lambda: op(x, target, wg, w1, w2)), torch_loss, [x, wg, w1, w2]


def rank_main(rank, world, program, pkg, steps, out):
    import torch
    import torch.distributed as dist

    sys.path.insert(0, HERE)
    from torch_programs import steps_ms

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29490 + world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    sys.path.insert(0, pkg)
    module = __import__(program)
    op = getattr(module, program)
    if program == "block_op":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        call, torch_loss, params = block(rank, torch, dist, op, mesh)
    elif program == "moe_op":
        call, torch_loss, params = moe(rank, torch, dist, op)
    else:
        call, torch_loss, params = contrastive(rank, torch, dist, op)

    def gradients(loss):
        for p in params:
            p.grad = None
        value = loss()
        value.backward()
        return [float(value)] + [p.grad.clone() for p in params]

    # the same values first: the op's loss and gradients against PyTorch's
    got, want = gradients(call), gradients(torch_loss)
    assert abs(got[0] - want[0]) <= 1e-4 * abs(want[0]), (got[0], want[0])
    for a, b in zip(got[1:], want[1:]):
        assert torch.allclose(a, b, rtol=1e-3, atol=1e-5), float((a - b).abs().max())
    compiled = torch.compile(torch_loss)

    def step(loss, check=True):
        def one():
            module.check_shared(check)
            gradients(loss)
        return one

    variants = (("gradc op", step(call)), ("gradc op, no shared-input check", step(call, False)),
                ("PyTorch eager", step(torch_loss)), ("PyTorch torch.compile", step(compiled)))
    ms = steps_ms(variants, steps)
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(ms))
    dist.destroy_process_group()


def main():
    in_venv_one_thread(__file__)
    import torch
    import torch.multiprocessing as mp

    print(f"PyTorch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{blas_kernels()}; "
          f"gloo processes, 1 thread each; medians of {STEPS} steps (forward and backward), ms\n")
    print("| program | gradc op | gradc op, no check | PyTorch eager | PyTorch torch.compile | check's cost | "
          "torch.compile / op |")
    print("|---|---|---|---|---|---|---|")
    only = next((a.split("=")[1] for a in sys.argv[1:] if a.startswith("--only=")), None)
    # --grad: the inputs whose gradients the step uses, as PyTorch's requires_grad says
    block = ["--data-parallel=dp", "--grad=w1,b1,w2,g"]
    for program, world, flags in (("contrastive_op", 2, []),
                                  ("block_op", 4, block),
                                  ("block_op", 2, block + ["--mesh=dp=1,tp=2"]),
                                  ("moe_op", 2, ["--grad=x,wg,w1,w2"])):
        if only and program != only:
            continue
        mesh = next((f.split("=", 1)[1] for f in flags if f.startswith("--mesh=")), None)
        label = f"{program}, " + (" x ".join(a.split("=")[1] for a in mesh.split(",")) + " mesh" if mesh
                                  else f"{world} ranks")
        work = tempfile.mkdtemp(prefix="gradc-bench-")
        subprocess.run([GRADC, "emit", os.path.join(HERE, "programs", program + ".dg"), "--target=torch", "-o", work]
                       + flags, check=True)
        out = os.path.join(work, "ms.txt")
        mp.spawn(rank_main, args=(world, program, work, STEPS, out), nprocs=world)
        times = eval(open(out).read())
        ms = {name: statistics.median(t) for name, t in times.items()}
        op, bare = ms["gradc op"], ms["gradc op, no shared-input check"]
        # the check's cost from the steps with and without it of each round (adjacent in
        # time, so alike in the machine's other load): the median of their ratios, and
        # the middle half of the ratios
        ratios = sorted(a / b - 1 for a, b in zip(times["gradc op"], times["gradc op, no shared-input check"]))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        print(f"| {label} | {op:.1f} | {bare:.1f} | {ms['PyTorch eager']:.1f} | "
              f"{ms['PyTorch torch.compile']:.1f} | {100 * statistics.median(ratios):+.1f}% "
              f"({100 * q1:+.0f}% to {100 * q3:+.0f}%) | {ms['PyTorch torch.compile'] / op:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
