"""The torch op's cost per call: a program small enough that the call is all there is.

usage: build/torch-venv/bin/python bench/torch_call.py [GRADC] [--rounds=R]   (default: build/gradc, R = 21)

Two programs of 2 ranks, emitted with `gradc emit --target=torch` into a temporary
folder and called on 2 gloo processes of 1 thread each:
- local: `sum(tanh(x @ w))`, x f32[4, 3], w f32[3, 4] (no collective): what a call costs;
- all_reduce: the same, all_reduced, w `shared` (the op's shared-input check on and off).
Against the same computation in PyTorch eager (torch.distributed.nn's all_reduce for the
second). Each variant: forward and backward (x and w require grad), and forward alone
under torch.no_grad(); R rounds of 100 calls, the variants taking turns round by round;
the median round, microseconds a call, on rank 0. Prints Markdown for bench/README.md.
"""
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = {
    "local": "world 2\ninput x : f32[4, 3]\ninput w : f32[3, 4]\ny = sum(tanh(x @ w))\noutput y\n",
    "all_reduce": "world 2\ninput x : f32[4, 3]\ninput w : f32[3, 4] shared\ny = all_reduce(sum(tanh(x @ w)))\n"
                  "output y\n",
}
CALLS = 100


def rank_main(rank, pkg, port, rounds, out):
    import torch
    import torch.distributed as dist
    import torch.distributed.nn as dnn

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    sys.path.insert(0, pkg)
    import all_reduce
    import local

    torch.manual_seed(0)  # the same w on both ranks (it is shared)
    w = torch.randn(3, 4, requires_grad=True)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(rank)).requires_grad_()
    xd, wd = x.detach(), w.detach()

    def checked(on, f):
        def run():
            all_reduce.check_shared(on)
            f()
        return run

    with torch.no_grad():
        assert abs(float(local.local(xd, wd)) - float(torch.tanh(xd @ wd).sum())) < 1e-4, "the op's value"
    variants = {
        "local: op": lambda: local.local(x, w).backward(),
        "local: PyTorch eager": lambda: torch.tanh(x @ w).sum().backward(),
        "local, no_grad: op": lambda: local.local(xd, wd),
        "local, no_grad: PyTorch eager": lambda: torch.tanh(xd @ wd).sum(),
        "all_reduce: op": checked(True, lambda: all_reduce.all_reduce(x, w).backward()),
        "all_reduce: op, no check": checked(False, lambda: all_reduce.all_reduce(x, w).backward()),
        "all_reduce: PyTorch eager": lambda: dnn.all_reduce(torch.tanh(x @ w).sum()).backward(),
    }
    times = {k: [] for k in variants}
    for f in variants.values():
        for _ in range(20):
            f()
    for _ in range(rounds):
        for name, f in variants.items():
            dist.barrier()
            t0 = time.perf_counter()
            with torch.no_grad() if "no_grad" in name else torch.enable_grad():
                for _ in range(CALLS):
                    f()
            times[name].append((time.perf_counter() - t0) / CALLS * 1e6)
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr({k: statistics.median(v) for k, v in times.items()}))
    dist.destroy_process_group()


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rounds = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--rounds=")), 21)
    gradc = os.path.abspath(args[0] if args else os.path.join(HERE, "..", "build", "gradc"))
    import torch
    import torch.multiprocessing as mp

    work = tempfile.mkdtemp(prefix="gradc-call-")
    for name, text in PROGRAMS.items():
        with open(os.path.join(work, name + ".dg"), "w") as f:
            f.write(text)
        subprocess.run([gradc, "emit", os.path.join(work, name + ".dg"), "--target=torch", "-o",
                        os.path.join(work, "pkg")], check=True)
    out = os.path.join(work, "us.txt")
    mp.spawn(rank_main, args=(os.path.join(work, "pkg"), 29750, rounds, out), nprocs=2)
    us = eval(open(out).read())
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; PyTorch {torch.__version__}; "
          f"medians of {rounds} rounds of {CALLS} calls, microseconds a call\n")
    print("| variant | us |\n|---|---|")
    for name, v in us.items():
        print(f"| {name} | {v:.1f} |")


if __name__ == "__main__":
    main()
