"""The programs of bench/programs in PyTorch, for bench/native.py (the CPU: gloo,
2 processes with 1 thread each) and bench/gpu.py (one GPU: NCCL, 1 rank).

`PROGRAMS[name](rank, world, device)` makes the leaves and returns `(loss, leaves,
reduced)`: `loss()` runs the forward with torch.distributed.nn's autograd
collectives, and `reduced` lists the gradients gradc's `mode=` implies are
all_reduced after the backward, each with its op ("mean" over ranks for a shared
input with mode=mean, "sum" for mode=global). `step(...)` runs one whole step.

usage (the CPU figure of bench/native.py): python3 bench/torch_programs.py RANK NAME STEPS PORT
"""
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as F
import torch.nn.functional as NF


def randn(shape, seed, device, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(device, dtype)


# The sizes are bench/programs' own; bench/gpu.py's bf16 table passes larger ones and
# dtype=torch.bfloat16 (the losses of bench/programs/gpu/*_bf16.dg: a f32 loss where they
# cast to f32).
def elementwise(rank, world, device, n=1000000, dtype=torch.float32):
    x = randn([n], rank, device, dtype).requires_grad_()

    def loss():
        y = torch.tanh(x * 1.5 + 0.5) * torch.sigmoid(x) + torch.exp(-(x * x))
        return (F.all_reduce(y) * x).sum()
    return loss, [x], []


def axpy(rank, world, device, n=8000000, dtype=torch.float32):
    x = randn([n], rank, device, dtype).requires_grad_()
    w = randn([n], rank + 7, device, dtype).requires_grad_()

    def loss():
        return ((x * 1.5 + w) * x).sum()
    return loss, [x, w], []


def contrastive(rank, world, device, n=1024, d=256, k=128, dtype=torch.float32):
    x = randn([n, d], 100 + rank, device, dtype).requires_grad_()
    w = (randn([d, k], 1, device, dtype) / 16).requires_grad_()
    labels = torch.arange(n, device=device) + n * rank

    def loss():
        z = NF.normalize(torch.tanh(x @ w), dim=-1)
        all_z = torch.cat(F.all_gather(z), dim=0)
        return NF.cross_entropy((z @ all_z.t() / 0.1).float(), labels)
    return loss, [x, w], [(w, "mean")]


def syncbn(rank, world, device):
    x = randn([4096, 256], rank, device).requires_grad_()
    gamma = (torch.rand(256, generator=torch.Generator().manual_seed(3)).to(device) + 0.5).requires_grad_()
    beta = (randn([256], 4, device) / 10).requires_grad_()

    def loss():
        count = 4096 * world
        s = F.all_reduce(x.sum(0))
        ss = F.all_reduce((x * x).sum(0))
        mu = s / count
        var = ss / count - mu * mu
        y = (x - mu) * torch.rsqrt(var + 1e-5) * gamma + beta
        return (y * y).mean()
    return loss, [x, gamma, beta], [(gamma, "mean"), (beta, "mean")]


def tp_mlp(rank, world, device, n=512, d=1024, h=512, dtype=torch.float32):
    x = randn([n, d], 7, device, dtype).requires_grad_()
    w1 = (randn([d, h], 11 + rank, device, dtype) / 32).requires_grad_()
    w2 = (randn([h, d], 21 + rank, device, dtype) / 32).requires_grad_()

    def loss():
        y = F.all_reduce(torch.relu(x @ w1) @ w2).float()
        return (y * y).mean()
    return loss, [x, w1, w2], [(x, "sum")]


PROGRAMS = {"elementwise": elementwise, "contrastive": contrastive, "syncbn": syncbn, "tp_mlp": tp_mlp,
            "axpy": axpy}


def step(loss, leaves, reduced, world):
    for leaf in leaves:
        leaf.grad = None
    loss().backward()
    for leaf, op in reduced:
        dist.all_reduce(leaf.grad)
        if op == "mean":
            leaf.grad /= world


def main(rank, name, steps, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    program = PROGRAMS[name](rank, 2, "cpu")
    ms = median_step_ms(lambda: step(*program, 2), steps)
    if rank == 0:
        print(ms)
    dist.destroy_process_group()


def median_step_ms(one_step, steps):
    """The median of `steps` timed steps after a warm-up one, a barrier before and after each."""
    one_step()
    times = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        one_step()
        dist.barrier()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def steps_ms(variants, steps):
    """Each variant's (name, one_step) `steps` timed steps in ms, after a warm-up one, the
    variants taking turns step by step (so that the machine's other load, which comes and
    goes, falls on all of them alike), each round starting one variant further on (a
    step runs measurably slower or faster for the variant it follows: after
    torch.compile's step, the next one took about 3% longer in bench/torch_op.py), a
    barrier before and after each step."""
    for _, one_step in variants:
        one_step()
    times = {name: [] for name, _ in variants}
    for r in range(steps):
        for name, one_step in variants[r % len(variants):] + variants[:r % len(variants)]:
            dist.barrier()
            t0 = time.perf_counter()
            one_step()
            dist.barrier()
            times[name].append((time.perf_counter() - t0) * 1e3)
    return times


def median_steps_ms(variants, steps):
    """Each variant's median step (steps_ms)."""
    return {name: statistics.median(t) for name, t in steps_ms(variants, steps).items()}


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4])
