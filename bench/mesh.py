"""A 2 x 2 TP x DP mesh against PyTorch's DeviceMesh, and the bytes it saves.

usage: python3 bench/mesh.py [GRADC] [--steps=K]   (default: build/gradc, K = 15)

The Megatron MLP of bench/programs/tp_dp_mlp.dg (256x1024 activations per dp index,
1024x1024 weights split over tp, the weights' gradients averaged over dp): the median
step of `gradc run --backend=native --iters=K` (ranks as threads of one process), of
the same MLP written without a mesh (bench/programs/tp_dp_mlp_1d.dg: its groups
emulated with all_gather over the world and masks), and of PyTorch with a DeviceMesh
(bench/torch_mesh.py: gloo, 4 processes with 1 thread each, a barrier before and
after each step). Then each program's collectives as `gradc cost` counts them: the
bytes each rank sends per step, per collective.

PyTorch 2.2 or later (DeviceMesh): PyPI's, in the virtual environment that
`scripts/torch_venv.sh` makes (build/torch-venv); Debian's 1.13 has no DeviceMesh.
Prints Markdown for bench/README.md.
"""
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
GRADC = ARGS[0] if ARGS else os.path.join(HERE, "..", "build", "gradc")
STEPS = next((int(a.split("=")[1]) for a in sys.argv[1:] if a.startswith("--steps=")), 15)
VENV_PYTHON = os.path.join(HERE, "..", "build", "torch-venv", "bin", "python")
MESH = os.path.join(HERE, "programs", "tp_dp_mlp.dg")
FLAT = os.path.join(HERE, "programs", "tp_dp_mlp_1d.dg")


def gradc_step(prog):
    out = subprocess.run([GRADC, "run", prog, "--backend=native", f"--iters={STEPS}"], check=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True).stderr
    return float(out.split("median step: ")[1].split(" ms")[0])


def torch_step(port):
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = [subprocess.Popen([VENV_PYTHON, os.path.join(HERE, "torch_mesh.py"), str(r), str(STEPS), str(port)],
                              env=env, stdout=subprocess.PIPE, text=True) for r in range(4)]
    outs = [p.communicate()[0] for p in procs]
    if any(p.returncode for p in procs):
        sys.exit("PyTorch's DeviceMesh MLP failed")
    return float(outs[0].strip())


def collectives(prog):
    cost = json.loads(subprocess.run([GRADC, "cost", prog, "--format=json"], check=True, capture_output=True,
                                     text=True).stdout)
    return cost["collectives"]


def main():
    if not os.path.exists(VENV_PYTHON):
        sys.exit(f"no {VENV_PYTHON}: run scripts/torch_venv.sh first")
    runs = 3
    mesh = statistics.median(gradc_step(MESH) for _ in range(runs))
    flat = statistics.median(gradc_step(FLAT) for _ in range(runs))
    torch = statistics.median(torch_step(29650 + i) for i in range(runs))
    version = subprocess.run([VENV_PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores; PyTorch {version}; medians of {runs} runs "
          f"of {STEPS} steps each\n")
    print("| program (4 ranks, 2 x 2) | ms per step |")
    print("|---|---|")
    print(f"| gradc native, `mesh dp=2, tp=2` | {mesh:.1f} |")
    print(f"| gradc native, the same MLP emulated on a 1-D world | {flat:.1f} |")
    print(f"| PyTorch {version}, DeviceMesh (gloo, 4 processes) | {torch:.1f} |")
    print(f"\nPyTorch / gradc (mesh): **{torch / mesh:.2f}x**; 1-D emulation / mesh: {flat / mesh:.2f}x\n")
    for name, prog in (("mesh", MESH), ("1-D emulation", FLAT)):
        cs = collectives(prog)
        total = sum(float(c["sent_bytes"]) for c in cs)
        print(f"{name}: {len(cs)} collectives, {total / 2**20:.2f} MiB sent per rank per step")
        for c in cs:
            group = f" over {', '.join(c['axes'])} ({c['group']} ranks)" if "axes" in c else " over the world (4 ranks)"
            print(f"  {c['phase']:<9} {c['call']:<44} {c['operand']:<18}{group}: "
                  f"{float(c['sent_bytes']) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
