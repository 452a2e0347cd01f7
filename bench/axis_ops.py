"""The ops along an axis (cumsum, scatter_add, index_add, take_along_axis) against
memory bandwidth and PyTorch's CPU eager mode, side by side.

usage: python3 bench/axis_ops.py [GRADC] [--steps=K]   (default: build/gradc, K = 15)

Each program in bench/programs/axis_*.dg works on 10^7 f32 (1 rank, forward only; the
embedding lookup, axis_take_rows, writes 8192 rows of 1024). For
each: the median step of `gradc run --backend=native` (inputs' defaults evaluated
before the timed steps), the bytes it must move at least (every operand read once and
the result written once) per second, and the median of the same op in PyTorch (Debian's
python3-torch, 1 thread, the same shapes and index pattern). The bandwidth to compare
with: y = x + 1 on 10^7 f32 (bench/programs/add_one.dg) in gradc, and NumPy's copy.
Prints a Markdown table for bench/README.md.
"""
import os
import subprocess
import sys

from native import COPY, gradc_step, machine, python_figure  # noqa: E402  (bench/native.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
STEPS = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--steps=")), 15)
N = 10_000_000

# program, bytes it moves at least (in units of 4 n), PyTorch's statement (x, src, ix, index, w, ids
# made below), the elements of its result n
PROGRAMS = [
    ("axis_cumsum_rows", 2, "torch.cumsum(x, 1)"),
    ("axis_cumsum_cols", 2, "torch.cumsum(xc, 0)"),
    ("axis_scatter_add", 4, "x.scatter_add(1, ix, src)"),
    ("axis_index_add", 3, "x.index_add(0, index, src)"),
    ("axis_take_along", 3, "torch.gather(x, 1, ix)"),
    ("axis_take_rows", 2, "w[ids]", 8192 * 1024),
]

TORCH = r'''
import statistics, sys, time
import torch
torch.set_num_threads(1)
g = torch.Generator().manual_seed(0)
x = torch.randn(10000, 1000, generator=g)
xc = torch.randn(156250, 64, generator=g)
src = torch.randn(10000, 1000, generator=g)
ix = torch.randint(0, 1000, (10000, 1000), generator=g)
index = torch.randint(0, 10000, (10000,), generator=g)
w = torch.randn(32768, 1024, generator=g)
ids = torch.randint(0, 32768, (8192,), generator=g)
times = []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter()
    y = STATEMENT
    times.append((time.perf_counter() - t0) * 1e3)
print(statistics.median(times))
'''


def main():
    print(f"machine: {machine()}; medians of {STEPS} steps\n")
    copy = python_figure(COPY)
    add = gradc_step(os.path.join(HERE, "programs", "add_one.dg"), "native")
    print(f"NumPy copy: {copy:.1f} GB/s; gradc y = x + 1 on 10^7 f32: {add:.2f} ms = {2 * 4 * N / add / 1e6:.1f} GB/s\n")
    print("| program | gradc native ms | GB/s (least bytes) | PyTorch eager ms | PyTorch / gradc |")
    print("|---|---|---|---|---|")
    for name, words, statement, *n in PROGRAMS:
        step = gradc_step(os.path.join(HERE, "programs", name + ".dg"), "native")
        torch = python_figure(TORCH.replace("STATEMENT", statement), str(STEPS))
        print(f"| {name} | {step:.2f} | {words * 4 * (n or [N])[0] / step / 1e6:.1f} | {torch:.2f} | {torch / step:.2f} |")


if __name__ == "__main__":
    main()
