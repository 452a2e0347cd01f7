"""The TP x DP MLP of bench/programs/tp_dp_mlp.dg in PyTorch with a DeviceMesh, for
bench/mesh.py: 4 processes (gloo, 1 thread each), `init_device_mesh("cpu", (2, 2),
mesh_dim_names=("dp", "tp"))`, Megatron's tensor-parallel reduction (all_reduce over
tp forward, identity backward: the loss is the same along tp) and the data-parallel
average of the weights' gradients over dp after the backward, by hand, as DDP does.

usage: python bench/torch_mesh.py RANK STEPS PORT   (PyTorch 2.2 or later: DeviceMesh)
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from torch_programs import median_step_ms


def randn(shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class ReduceFromTP(torch.autograd.Function):  # Megatron's _ReduceFromModelParallelRegion
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


def main(rank, steps, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="4")
    dist.init_process_group("gloo", rank=rank, world_size=4)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    d, t = mesh["dp"].get_local_rank(), mesh["tp"].get_local_rank()
    tp, dp = mesh["tp"].get_group(), mesh["dp"].get_group()
    x = randn([256, 1024], 7 + d)
    w1 = (randn([1024, 512], 11 + t) / 32).requires_grad_()
    w2 = (randn([512, 1024], 21 + t) / 32).requires_grad_()

    def step():
        w1.grad = w2.grad = None
        y = ReduceFromTP.apply(torch.relu(x @ w1) @ w2, tp)
        (y * y).mean().backward()
        for w in (w1, w2):
            dist.all_reduce(w.grad, group=dp)
            w.grad /= 2

    ms = median_step_ms(step, steps)
    if rank == 0:
        print(ms)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
