#!/usr/bin/env python3
"""A few steps of SimCLR-style training with DDP on 2 gloo processes, the NT-Xent loss
over all_gather'ed embeddings being the gradc op of simclr.dg; then the same training on
one process with the whole batch, in plain PyTorch. The parameters after the steps must
be equal (to f32 rounding): DDP averages each rank's gradients, and the op's gradient
with respect to a rank's embeddings holds every rank's loss's part (docs/torch.md).

    python examples/torch/train.py [GRADC]      (a PyTorch with torch.library.custom_op)
"""
import os
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD, B, STEPS, TAU, LR = 2, 4, 5, 0.5, 0.5


def encoder():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def views(step):
    """The step's whole batch, two augmented views of it: [WORLD * B, 16] each."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(WORLD * B, 16, generator=g)
    return x + 0.1 * torch.randn(x.shape, generator=g), x + 0.1 * torch.randn(x.shape, generator=g)


def nt_xent(z1, z2):
    """The same loss on one process: every row against the other view's rows."""
    n1, n2 = F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)
    labels = torch.arange(z1.shape[0])
    return (F.cross_entropy(n1 @ n2.T / TAU, labels) + F.cross_entropy(n2 @ n1.T / TAU, labels)) / 2


def rank_main(rank, package_dir, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = os.environ.get("GRADC_TRAIN_PORT", "29470")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    sys.path.insert(0, package_dir)
    import simclr

    model = DDP(encoder())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        v1, v2 = views(step)
        mine = slice(rank * B, (rank + 1) * B)
        z = model(torch.cat([v1[mine], v2[mine]]))  # one forward: DDP's reducer expects one per backward
        loss = simclr.simclr(z[:B], z[B:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        torch.save(model.module.state_dict(), out)
    dist.destroy_process_group()


def main():
    gradc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "build", "gradc")
    work = tempfile.mkdtemp(prefix="gradc-train-")
    subprocess.run([gradc, "emit", os.path.join(HERE, "simclr.dg"), "--target=torch", "-o", work], check=True)
    out = os.path.join(work, "ddp.pt")
    mp.spawn(rank_main, args=(work, out), nprocs=WORLD)

    model = encoder()
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        v1, v2 = views(step)
        z = model(torch.cat([v1, v2]))
        loss = nt_xent(z[:WORLD * B], z[WORLD * B:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    ddp = torch.load(out, weights_only=True)
    worst = 0.0
    for name, p in model.state_dict().items():
        worst = max(worst, float((ddp[name] - p).abs().max()))
        if not torch.allclose(ddp[name], p, rtol=1e-5, atol=1e-6):
            print(f"{name}: DDP with the gradc op differs from one process by {float((ddp[name] - p).abs().max())}")
            sys.exit(1)
    moved = max(float((p - q).abs().max()) for p, q in zip(model.state_dict().values(), encoder().state_dict().values()))
    print(f"{STEPS} steps of DDP on {WORLD} gloo processes with the gradc NT-Xent op: the parameters equal one "
          f"process's with the whole batch (largest difference {worst:.1e}; the steps moved them by up to {moved:.2f})")


if __name__ == "__main__":
    main()
