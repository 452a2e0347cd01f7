"""bf16 against f32 on the CPU, and against PyTorch's CPU bf16 (eager and torch.compile).

usage: python3 bench/bf16_cpu.py [GRADC] [--steps=K]   (default: build/gradc, K = 15)

For a memory-bound step (axpy), the elementwise chain, the contrastive loss and the
tensor-parallel MLP of bench/programs (2 ranks, every gradient an output):
- gradc: `gradc run P.dg --iters=K --quiet` (the native backend, ranks as threads) for
  P and its `_bf16` twin, taking turns, twice; each figure the median step of one run;
- PyTorch (PyPI's, in build/torch-venv): bench/torch_programs.py's same step in f32 and
  in bf16 (dtype=torch.bfloat16: bf16 leaves, the f32 loss where the .dg program casts
  to f32), eager and torch.compile, on 2 gloo processes with 1 thread each; the four
  variants take turns step by step (bench/torch_programs.py's median_steps_ms), so the
  machine's other load falls on all of them alike; torch.compile's warm-up step
  compiles, with TORCHINDUCTOR_COMPILE_THREADS=1.
Prints a Markdown table for bench/README.md.
"""
import os
import platform
import statistics
import sys

from native import STEPS, blas_kernels, gradc_step, in_venv_one_thread  # noqa: E402  (bench/native.py)

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["axpy", "elementwise", "contrastive", "tp_mlp"]


def rank_main(rank, name, port, out):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    import torch_programs

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    variants = []
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        loss, leaves, reduced = torch_programs.PROGRAMS[name](rank, 2, "cpu", dtype=dtype)
        compiled = torch.compile(loss)
        variants += [(f"eager {tag}", lambda a=(loss, leaves, reduced): torch_programs.step(*a, 2)),
                     (f"compile {tag}", lambda a=(compiled, leaves, reduced): torch_programs.step(*a, 2))]
    ms = torch_programs.median_steps_ms(variants, STEPS)
    if rank == 0:
        with open(out, "w") as f:
            f.write(repr(ms))
    dist.destroy_process_group()


def torch_figures(name, port):
    import tempfile
    import torch.multiprocessing as mp
    out = os.path.join(tempfile.mkdtemp(prefix="gradc-bf16-"), "ms.txt")
    mp.spawn(rank_main, args=(name, port, out), nprocs=2)
    return eval(open(out).read())


def main():
    in_venv_one_thread(__file__)
    import torch
    flags = open("/proc/cpuinfo").read()
    cpu = next((l.split(":", 1)[1].strip() for l in flags.splitlines() if l.startswith("model name")), "?")
    print(f"{cpu} ({'AVX512-BF16' if 'avx512_bf16' in flags else 'no AVX512-BF16'}), {os.cpu_count()} cores, "
          f"{platform.system()} {platform.release()}; {blas_kernels()}; PyTorch {torch.__version__}; "
          f"medians of {STEPS} steps, ms\n")
    print("| program (2 ranks) | gradc f32 | gradc bf16 | gradc f32 / bf16 | eager f32 | eager bf16 | "
          "compile f32 | compile bf16 | compile bf16 / gradc bf16 |")
    print("|---|---|---|---|---|---|---|---|---|")
    port = 29700
    for name in PROGRAMS:
        runs = {"f32": [], "bf16": []}
        for _ in range(2):
            for tag, suffix in (("f32", ""), ("bf16", "_bf16")):
                runs[tag].append(gradc_step(os.path.join(HERE, "programs", name + suffix + ".dg"), "native"))
        ms = torch_figures(name, port)
        port += 1
        f32, bf16 = statistics.median(runs["f32"]), statistics.median(runs["bf16"])
        both = lambda t: ", ".join(f"{v:.1f}" for v in runs[t])
        print(f"| {name} | {both('f32')} | {both('bf16')} | {f32 / bf16:.2f}x | {ms['eager f32']:.1f} | "
              f"{ms['eager bf16']:.1f} | {ms['compile f32']:.1f} | {ms['compile bf16']:.1f} | "
              f"{ms['compile bf16'] / bf16:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
