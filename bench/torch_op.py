"""The contrastive loss as the gradc op against the same loss with torch.distributed.nn's
collectives, eager and torch.compile (docs/torch.md).

usage: python3 bench/torch_op.py [GRADC] [--steps=K]   (default: build/gradc, K = 15)

bench/programs/contrastive_op.dg (1024x256 embeddings per rank, a 256x128 projection,
all_gather, InfoNCE) emitted with --target=torch, and bench/torch_programs.py's
contrastive loss in PyTorch: forward and backward (x.grad and w.grad) per step, on 2
gloo processes with 1 thread each (OMP, MKL and OpenBLAS), a barrier before and after
each step, medians of K steps after a warm-up one (torch.compile's warm-up compiles;
TORCHINDUCTOR_COMPILE_THREADS=1, so that no compile workers run beside the steps).
All three run in the same processes, one after the other. PyTorch: PyPI's, in the
virtual environment that scripts/torch_venv.sh makes. Prints Markdown for bench/README.md.
"""
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
GRADC = ARGS[0] if ARGS else os.path.join(HERE, "..", "build", "gradc")
STEPS = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--steps=")), 15)
VENV_PYTHON = os.path.join(HERE, "..", "build", "torch-venv", "bin", "python")


def rank_main(rank, pkg, steps, out):
    import torch
    import torch.distributed as dist
    import torch.distributed.nn.functional as F
    import torch.nn.functional as NF

    sys.path.insert(0, HERE)
    from torch_programs import median_step_ms, randn

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29490")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    sys.path.insert(0, pkg)
    import contrastive_op

    x = randn([1024, 256], 100 + rank, "cpu").requires_grad_()
    w = (randn([256, 128], 1, "cpu") / 16).requires_grad_()
    labels = torch.arange(1024) + 1024 * rank

    def torch_loss(x, w):
        z = NF.normalize(torch.tanh(x @ w), dim=-1)
        all_z = torch.cat(F.all_gather(z), dim=0)
        return NF.cross_entropy(z @ all_z.t() / 0.1, labels)

    compiled = torch.compile(torch_loss)

    def step(loss):
        def one():
            x.grad = w.grad = None
            loss(x, w).backward()
        return one

    # the same values first: the op's loss and gradients against PyTorch's
    x.grad = w.grad = None
    torch_loss(x, w).backward()
    want = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    contrastive_op.contrastive_op(x, w).backward()
    assert torch.allclose(x.grad, want[0], rtol=1e-4, atol=1e-6) and torch.allclose(w.grad, want[1], rtol=1e-4,
                                                                                      atol=1e-6)
    ms = {name: median_step_ms(step(fn), steps)
          for name, fn in (("gradc op", contrastive_op.contrastive_op), ("eager", torch_loss),
                           ("torch.compile", compiled))}
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(ms))
    dist.destroy_process_group()


def main():
    if not os.path.exists(VENV_PYTHON):
        sys.exit(f"no {VENV_PYTHON}: run scripts/torch_venv.sh first")
    if sys.executable != os.path.abspath(VENV_PYTHON) and "GRADC_BENCH_CHILD" not in os.environ:
        env = dict(os.environ, GRADC_BENCH_CHILD="1")
        sys.exit(subprocess.run([VENV_PYTHON, __file__] + sys.argv[1:], env=env).returncode)
    # 1 thread each; and no pool of inductor's compile workers, which otherwise stay busy
    # beside the timed steps (the op took 100 ms instead of 55 with them).
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                      TORCHINDUCTOR_COMPILE_THREADS="1")
    import torch
    import torch.multiprocessing as mp

    work = tempfile.mkdtemp(prefix="gradc-bench-")
    subprocess.run([GRADC, "emit", os.path.join(HERE, "programs", "contrastive_op.dg"), "--target=torch", "-o", work],
                   check=True)
    out = os.path.join(work, "ms.txt")
    mp.spawn(rank_main, args=(work, STEPS, out), nprocs=2)
    ms = eval(open(out).read())
    print(f"PyTorch {torch.__version__}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"2 gloo processes, 1 thread each; medians of {STEPS} steps (forward and backward)\n")
    print("| contrastive loss, 1024x256 per rank | ms per step | against the gradc op |")
    print("|---|---|---|")
    for name in ("gradc op", "eager", "torch.compile"):
        print(f"| {name} | {ms[name]:.1f} | {ms[name] / ms['gradc op']:.2f}x |")


if __name__ == "__main__":
    main()
