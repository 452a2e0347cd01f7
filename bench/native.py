"""gradc run's two backends against PyTorch's CPU eager mode, side by side.

usage: python3 bench/native.py [GRADC] [--steps=K]   (default: build/gradc, K = 15)

For each program in bench/programs (2 ranks, every gradient an output): the median
step of `gradc run --backend=interp` and `--backend=native` (gradc's own --iters:
inputs loaded and defaults evaluated before the timed steps) and of the same
program in PyTorch (torch.distributed.nn's autograd collectives, gloo, 2 processes
with 1 thread each, a barrier before and after each step). For the tensor-parallel
MLP also the BLAS floor: its six matmuls per rank through OpenBLAS alone (NumPy,
1 thread, both ranks' processes at once). For y = x + 1 on 10^7 f32 (1 rank): the
bandwidth it reaches against this machine's measured copy bandwidth. And attention's
contractions written with einsum (bench/programs/einsum_attention.dg) against the same
with matmul and transpose and against their six batched matmuls in OpenBLAS alone.

PyTorch comes from Debian (python3-torch, run with /usr/bin/python3), installed by
`scripts/deps.sh python3-torch python3-numpy`. Prints a Markdown table for bench/README.md.
"""
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
GRADC = ARGS[0] if ARGS else os.path.join(HERE, "..", "build", "gradc")
STEPS = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--steps=")), 15)
TORCH_PYTHON = "/usr/bin/python3"
PROGRAMS = ["elementwise", "contrastive", "syncbn", "tp_mlp"]

# The same programs in PyTorch, one process per rank: bench/torch_programs.py.
TORCH = os.path.join(HERE, "torch_programs.py")

# Six matmuls per rank: h = x w1, y = h w2 and the backward's four.
BLAS_FLOOR = r'''
import statistics, sys, time
import numpy as np
x = np.random.rand(512, 1024).astype(np.float32)
w1 = np.random.rand(1024, 512).astype(np.float32)
w2 = np.random.rand(512, 1024).astype(np.float32)
h = x @ w1
dy = h @ w2
times = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    h = x @ w1; y = h @ w2
    dw2 = h.T @ dy; dh = dy @ w2.T; dw1 = x.T @ dh; dx = dh @ w1.T
    times.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(times))
'''

# bench/programs/einsum_attention.dg's six batched matmuls (4 x 8 heads of 256 x 64: the
# scores, their product with v, and the backward's four), a loop over the heads.
EINSUM_FLOOR = r'''
import statistics, sys, time
import numpy as np
r = np.random.default_rng(0)
q, k, v, g = (r.standard_normal((32, 256, 64)).astype(np.float32) for _ in range(4))
times = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    for h in range(32):
        s = q[h] @ k[h].T; o = s @ v[h]
        ds = g[h] @ v[h].T; dv = s.T @ g[h]; dq = ds @ k[h]; dk = ds.T @ q[h]
    times.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(times))
'''

COPY = r'''
import statistics, time
import numpy as np
src = np.random.rand(10_000_000).astype(np.float32)
dst = np.empty_like(src)
times = []
for _ in range(21):
    t0 = time.perf_counter()
    np.copyto(dst, src)
    times.append(time.perf_counter() - t0)
print(2 * src.nbytes / statistics.median(times) / 1e9)
'''


def gradc_step(prog, backend, env=None):
    out = subprocess.run([GRADC, "run", prog, f"--backend={backend}", f"--iters={STEPS}"], check=True, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    return float(out.split("median step: ")[1].split(" ms")[0])


def gradc_kernels():
    """gradc's line on the OpenBLAS kernels its matmuls run on here (`gradc --version`:
    OpenBLAS's choice, OPENBLAS_CORETYPE's, or the wider ones gradc chose where
    OpenBLAS's are older than the CPU), and their name."""
    out = subprocess.run([GRADC, "--version"], capture_output=True, text=True).stdout
    line = next(l for l in out.splitlines() if l.startswith("OpenBLAS's kernels here: "))
    return line.split(": ", 1)[1], line.split(": ", 1)[1].split(" ")[0]


def peer_env(**threads):
    """The environment of a peer's process (NumPy, Debian's PyTorch): the system's OpenBLAS
    on the kernels gradc's matmuls run on, so that both sides multiply alike."""
    return dict(os.environ, OPENBLAS_CORETYPE=gradc_kernels()[1], **threads)


def torch_step(name, port):
    env = peer_env(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = [subprocess.Popen([TORCH_PYTHON, TORCH, str(r), name, str(STEPS), str(port)], env=env,
                              stdout=subprocess.PIPE, text=True) for r in range(2)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit(f"PyTorch's {name} failed")
    return float(outs[0].strip())


def python_figure(code, *args, ranks=1):
    env = peer_env(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = [subprocess.Popen([TORCH_PYTHON, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(ranks)]
    return max(float(p.communicate()[0].strip()) for p in procs)


VENV_PYTHON = os.path.join(HERE, "..", "build", "torch-venv", "bin", "python")


def in_venv_one_thread(script):
    """Runs `script` again under PyPI's PyTorch (build/torch-venv) unless this is that
    Python already; then one thread per process (OMP, MKL and OpenBLAS), and no pool of
    inductor's compile workers, which otherwise stay busy beside the timed steps (the
    op of bench/torch_op.py took 100 ms instead of 55 with them)."""
    if not os.path.exists(VENV_PYTHON):
        sys.exit(f"no {VENV_PYTHON}: run scripts/torch_venv.sh first")
    if sys.executable != os.path.abspath(VENV_PYTHON) and "GRADC_BENCH_CHILD" not in os.environ:
        env = dict(os.environ, GRADC_BENCH_CHILD="1")
        sys.exit(subprocess.run([VENV_PYTHON, script] + sys.argv[1:], env=env).returncode)
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                      TORCHINDUCTOR_COMPILE_THREADS="1")


def blas_kernels():
    """The OpenBLAS kernels gradc's matmuls run on (and NumPy's and Debian's PyTorch's here,
    peer_env), as `gradc --version` says."""
    return f"OpenBLAS {gradc_kernels()[0]} kernels"


def machine():
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    torch_version = subprocess.run([TORCH_PYTHON, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    return (f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; {blas_kernels()}; "
            f"PyTorch {torch_version}")


def main():
    print(f"machine: {machine()}; medians of {STEPS} steps\n")
    print("| program (2 ranks) | interp ms | native ms | PyTorch ms | native / PyTorch | PyTorch / native |")
    print("|---|---|---|---|---|---|")
    port = 29600
    for name in PROGRAMS:
        prog = os.path.join(HERE, "programs", name + ".dg")
        interp, native = gradc_step(prog, "interp"), gradc_step(prog, "native")
        torch = torch_step(name, port)
        port += 1
        print(f"| {name} | {interp:.2f} | {native:.2f} | {torch:.2f} | {native / torch:.2f} | {torch / native:.2f} |")
    floor = python_figure(BLAS_FLOOR, str(STEPS), ranks=2)
    native = gradc_step(os.path.join(HERE, "programs", "tp_mlp.dg"), "native")
    print(f"\ntp_mlp: BLAS floor (its six matmuls per rank, OpenBLAS alone, 1 thread per rank) {floor:.2f} ms; "
          f"native {native:.2f} ms = {native / floor:.2f}x the floor")
    copy = python_figure(COPY)
    step = gradc_step(os.path.join(HERE, "programs", "add_one.dg"), "native")
    bw = 2 * 4e7 / (step / 1e3) / 1e9
    print(f"y = x + 1 on 10^7 f32 (1 rank): native {step:.2f} ms = {bw:.1f} GB/s; copy bandwidth {copy:.1f} GB/s "
          f"(NumPy copyto); {100 * bw / copy:.0f}% of it")
    einsum_figures()


def einsum_figures():
    """Attention's contractions written with einsum against the same with matmul and
    transpose, and against their six batched matmuls in OpenBLAS alone (1 rank, 1 thread)."""
    one = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    e, m = (gradc_step(os.path.join(HERE, "programs", p + ".dg"), "native", one)
            for p in ("einsum_attention", "einsum_attention_matmul"))
    floor = python_figure(EINSUM_FLOOR, str(STEPS))
    print(f"einsum attention (1 rank, 1 thread): einsum {e:.2f} ms, matmul and transpose {m:.2f} ms, "
          f"its six batched matmuls in OpenBLAS alone {floor:.2f} ms; einsum {e / floor:.2f}x the floor")


if __name__ == "__main__":
    main()
