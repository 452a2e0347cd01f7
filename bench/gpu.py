"""gradc's CUDA executables on a GPU: their outputs against the interpreter's, the
device-side error path, the four programs of bench/programs against PyTorch eager
and torch.compile, and the elementwise kernels' bandwidth against the GPU's
device-to-device copy. Figures and findings go into bench/README.md.

The executables are built where gradc is (no GPU needed), then carried to the GPU
machine with the interpreter's outputs:

  python3 bench/gpu.py prepare DIR [GRADC [PATTERN]]
      builds DIR/exe/*, DIR/ref/*, DIR/manifest.json (with PATTERN, a regular
      expression, only the programs whose names it finds: "error_|large_")
  python3 bench/gpu.py run DIR [OUT [SECTIONS]]
      on the GPU machine (python3 with PyTorch and NumPy; NCCL and cuBLAS where
      PyTorch's wheels or /usr/local/cuda have them). SECTIONS, comma-separated:
      outputs, errors, bench, bandwidth, sanitizer, bf16 (default: all). Writes
      OUT/gpu.log.

One GPU: every program is built for 1 rank (`--ranks=1`); programs that need more
ranks are left out. The executables are built without MPI (one process drives the
GPU), so that they need no MPI library on the GPU machine.

The bf16 section: bench/programs/gpu's elementwise chain (10^8), contrastive loss
(8192x1024 a rank) and TP MLP (4096x4096), each in f32 and in bf16, against PyTorch
eager and torch.compile in bf16 and against their matmuls alone in PyTorch (cuBLAS).
"""
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCH = ["elementwise", "contrastive", "syncbn", "tp_mlp"]
STEPS = 200
SECTIONS = ["outputs", "errors", "bench", "bandwidth", "sanitizer", "bf16"]
LARGE = ["elementwise", "contrastive", "tp_mlp"]  # bench/programs/gpu/NAME_{f32,bf16}.dg
STEPS_LARGE = 50


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---- here, where gradc is built ------------------------------------------------

def programs():
    """(name, path, kind): kind is "compare" (outputs against the interpreter's),
    "error" (a run-time error in a kernel), "bench" or "bandwidth"."""
    out = []
    for group, pattern in (("examples", "examples/*.dg"), ("codegen", "tests/codegen/*.dg")):
        out += [(f"{group}_{os.path.basename(p)[:-3]}", p, "compare") for p in sorted(glob.glob(os.path.join(ROOT, pattern)))]
    out += [(f"error_{n}", os.path.join(ROOT, f"tests/error/device_{n}.dg"), "error") for n in ("take_range", "division_zero", "scatter_add_range")]
    out += [(f"bench_{n}", os.path.join(HERE, "programs", n + ".dg"), "bench") for n in BENCH]
    out += [(f"bandwidth_{n}", os.path.join(HERE, "programs", "gpu", n + ".dg"), "bandwidth") for n in ("add_one", "elementwise")]
    for n in LARGE:
        for t in ("f32", "bf16"):
            src = f"{n}_{t}.dg" if (n, t) != ("elementwise", "f32") else "elementwise.dg"
            out.append((f"large_{n}_{t}", os.path.join(HERE, "programs", "gpu", src), "large"))
    return out


def prepare(work, gradc, pattern=""):
    for sub in ("exe", "ref"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    # A `mpicxx` that fails, first on PATH: gradc then builds without MPI.
    nompi = tempfile.mkdtemp()
    with open(os.path.join(nompi, "mpicxx"), "w") as f:
        f.write("#!/bin/sh\nexit 1\n")
    os.chmod(os.path.join(nompi, "mpicxx"), 0o755)
    env = dict(os.environ, PATH=nompi + os.pathsep + os.environ["PATH"])
    manifest = []
    jobs = []
    for name, path, kind in programs():
        if not re.search(pattern, name):
            continue
        if sh([gradc, "check", path, "--ranks=1"]).returncode != 0:
            print(f"{name}: needs more than 1 rank, left out")
            continue
        entry = {"name": name, "source": os.path.relpath(path, ROOT), "kind": kind}
        if kind in ("compare", "bench"):
            ref = os.path.join(work, "ref", name)
            p = sh([gradc, "run", path, "--ranks=1", "--backend=interp", "--quiet", f"--outputs={ref}"])
            if p.returncode != 0:
                sys.exit(f"{name}: the interpreter failed\n{p.stderr}")
        if kind == "error":
            p = sh([gradc, "run", path, "--ranks=1", "--backend=interp"])
            assert p.returncode == 1, (name, p.returncode)
            entry["message"] = p.stderr.splitlines()[0].split(".dg:", 1)[1]  # "8:5: error: take: ..."
        manifest.append(entry)
        jobs.append(subprocess.Popen([gradc, "build", path, "--target=cuda", "--ranks=1", "-o",
                                      os.path.join(work, "exe", name)], env=env, stderr=subprocess.PIPE, text=True))
        if len(jobs) == os.cpu_count():
            wait(jobs)
    wait(jobs)
    shutil.rmtree(nompi)
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(manifest)} CUDA executables in {work}/exe")


def wait(jobs):
    for j in jobs:
        err = j.communicate()[1]
        if j.returncode != 0:
            sys.exit(f"gradc build failed: {' '.join(j.args)}\n{err}")
    jobs.clear()


# ---- there, on the GPU machine ------------------------------------------------

def library_path():
    """The folders of libnccl.so.2 and libcublas.so.13 (PyTorch's wheels carry them)."""
    import site
    want = {"libnccl.so.2", "libcublas.so.13", "libcublasLt.so.13"}
    found = {}
    roots = ["/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu"] + site.getsitepackages() + [sys.prefix]
    for root in roots:
        for d, _, files in os.walk(root):
            for f in want & set(files):
                found.setdefault(f, d)
    missing = want - found.keys()
    if missing:
        sys.exit(f"not found: {', '.join(sorted(missing))}")
    return os.pathsep.join(sorted(set(found.values())))


class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, *lines):
        for line in lines:
            print(line, flush=True)
            self.f.write(line + "\n")
        self.f.flush()


def compare_outputs(ref, got):
    """Worst errors over every output: the norm-relative error |a-b| / |b|, and the
    largest |a-b| / (rtol |b| + rtol/10 (1 + max|b|)) over the elements, rtol 1e-4 (2^-6
    for bf16, 2^-9 for f16, a few of their ulps) (at most 1 passes: kernels that sum in
    another order and CUDA's exp, tanh, ... round differently)."""
    import numpy as np
    sys.path.insert(0, os.path.join(HERE, "..", "tests"))
    from npy16 import rtol as rtol_of, widened
    worst_norm, worst_elem, rows = 0.0, 0.0, []
    for path in sorted(glob.glob(os.path.join(ref, "rank0", "*.npy"))):
        name = os.path.basename(path)[:-4]
        want = np.load(path)
        other = os.path.join(got, "rank0", name + ".npy")
        if not os.path.exists(other):
            return float("inf"), float("inf"), [f"{name}: not written"]
        have = np.load(other)
        if have.shape != want.shape or have.dtype != want.dtype:
            return float("inf"), float("inf"), [f"{name}: {have.dtype}{list(have.shape)}, want {want.dtype}{list(want.shape)}"]
        w, h = widened(want), widened(have)
        rtol = rtol_of(want.dtype)
        if np.isnan(w).any() or np.isnan(h).any():
            if not np.array_equal(np.isnan(w), np.isnan(h)):
                return float("inf"), float("inf"), [f"{name}: NaN where the interpreter has none, or the reverse"]
            w, h = np.nan_to_num(w), np.nan_to_num(h)
        norm = float(np.linalg.norm(h - w) / max(np.linalg.norm(w), 1e-30))
        scale = float(np.abs(w).max()) if w.size else 0.0
        elem = float((np.abs(h - w) / (rtol * np.abs(w) + rtol / 10 * (1 + scale))).max()) if w.size else 0.0
        worst_norm, worst_elem = max(worst_norm, norm), max(worst_elem, elem)
        rows.append(f"{name} {want.dtype}{list(want.shape)}: norm {norm:.1e}, element {elem:.1e}")
    return worst_norm, worst_elem, rows


def median_step(exe, env, iters):
    p = sh([exe, f"--iters={iters}"], env=env, timeout=300)
    if p.returncode != 0:
        return None, p.stderr
    m = re.search(r"median step: ([0-9.]+) ms", p.stderr)
    return (float(m.group(1)), "") if m else (None, "no 'median step' in its output:\n" + p.stderr)


def torch_median(fn, steps):
    import torch
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(10):
        fn()
    times = []
    for _ in range(steps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def run(work, out, sections):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, HERE)
    import torch_programs
    os.makedirs(out, exist_ok=True)
    log = Log(os.path.join(out, "gpu.log"))
    env = dict(os.environ, LD_LIBRARY_PATH=library_path() + os.pathsep + os.environ.get("LD_LIBRARY_PATH", ""))
    smi = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"]).stdout.strip()
    log(f"GPU: {smi}; PyTorch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}")
    log(f"libraries for the executables: {env['LD_LIBRARY_PATH']}")
    manifest = json.load(open(os.path.join(work, "manifest.json")))
    exe = lambda name: os.path.join(work, "exe", name)
    failed = []
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29611", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))

    if "outputs" in sections:
        log("", "## Outputs against the interpreter (1 rank)")
        for m in manifest:
            if m["kind"] not in ("compare", "bench"):
                continue
            got = os.path.join(tempfile.mkdtemp(), m["name"])
            try:
                p = sh([exe(m["name"]), f"--outputs={got}"], env=env, timeout=120)
            except subprocess.TimeoutExpired:
                failed.append(m["name"])
                log(f"{m['name']}: TIMEOUT (120 s)")
                continue
            if p.returncode != 0:
                failed.append(m["name"])
                log(f"{m['name']}: FAILED ({p.returncode})", p.stdout[-2000:], p.stderr[-2000:])
                continue
            norm, elem, rows = compare_outputs(os.path.join(work, "ref", m["name"]), got)
            ok = elem <= 1
            if not ok:
                failed.append(m["name"])
            log(f"{m['name']}: {'ok' if ok else 'DIFFERS'}: worst norm-relative error {norm:.1e}, element {elem:.1e}")
            for r in rows:
                log("    " + r)

    if "errors" in sections:
        log("", "## The error path: a kernel that meets bad data")
        for m in manifest:
            if m["kind"] != "error":
                continue
            p = sh([exe(m["name"])], env=env, timeout=60)
            said = p.stdout + p.stderr
            ok = p.returncode == 1 and m["message"] in said
            if not ok:
                failed.append(m["name"])
            log(f"{m['name']}: {'ok' if ok else 'WRONG'}: exit {p.returncode}; wanted '{m['message']}'", "    " + said.strip().replace("\n", "\n    "))

    if "bench" in sections:
        log("", "## The four programs at N=1: gradc's CUDA executable against PyTorch (median ms of a step)")
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 matmuls, as cuBLAS's default in gradc
        # Each figure twice (two runs of the executable; two timings after one warm-up
        # and compilation), so that the spread between runs shows.
        log("| program | gradc ms | eager ms | torch.compile ms | gradc / eager | gradc / compile |", "|---|---|---|---|---|---|")
        for name in BENCH:
            ours = [median_step(exe("bench_" + name), env, STEPS) for _ in range(2)]
            if any(t is None for t, _ in ours):
                log(f"| {name} | FAILED: {' '.join(e for _, e in ours).strip()[:300]} |")
                failed.append("bench_" + name)
                continue
            ours = [t for t, _ in ours]
            loss, leaves, reduced = torch_programs.PROGRAMS[name](0, 1, "cuda")
            eager = [torch_median(lambda: torch_programs.step(loss, leaves, reduced, 1), STEPS) for _ in range(2)]
            try:
                compiled = torch.compile(loss)
                comp = [torch_median(lambda: torch_programs.step(compiled, leaves, reduced, 1), STEPS) for _ in range(2)]
            except Exception as e:  # noqa: BLE001 (report and go on)
                log(f"torch.compile failed on {name}: {e}")
                comp = [float("nan")] * 2
            pair = lambda v: f"{v[0]:.4f}, {v[1]:.4f}"
            log(f"| {name} | {pair(ours)} | {pair(eager)} | {pair(comp)} | {max(ours) / min(eager):.2f} | "
                f"{max(ours) / min(comp):.2f} |")

    if "bandwidth" in sections:
        log("", "## Bandwidth: elementwise kernels against device-to-device copy (10^8 f32)")
        n = 100_000_000
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        copy = torch_median(lambda: dst.copy_(src), 50)
        copy_bw = 2 * 4 * n / (copy / 1e3) / 1e9
        log(f"device-to-device copy (torch copy_): {copy:.4f} ms = {copy_bw:.0f} GB/s read + written")
        step, err = median_step(exe("bandwidth_add_one"), env, 50)
        if step is None:
            log(f"y = x + 1: FAILED {err}")
        else:
            bw = 2 * 4 * n / (step / 1e3) / 1e9
            log(f"y = x + 1 (gradc step): {step:.4f} ms = {bw:.0f} GB/s = {100 * bw / copy_bw:.0f}% of copy")
        ncu = shutil.which("ncu") or next(iter(glob.glob("/opt/nvidia/nsight-compute/*/ncu")), None)
        if ncu:
            for prog in sorted(f for f in os.listdir(os.path.join(work, "exe")) if f.startswith("bandwidth_")):
                p = sh([ncu, "--clock-control", "none", "--csv", "--metrics",
                        "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum", exe(prog)],
                       env=env, timeout=300)
                with open(os.path.join(out, prog + ".ncu.csv"), "w") as f:
                    f.write(p.stdout + p.stderr)
                for kernel, ms, gb in ncu_kernels(p.stdout):
                    bw = gb / (ms / 1e3)
                    log(f"{prog}: {kernel[:70]}: {ms:.4f} ms, {gb:.3f} GB read + written = {bw:.0f} GB/s = "
                        f"{100 * bw / copy_bw:.0f}% of copy")
        else:
            log("ncu not found: no per-kernel figures")

    if "bf16" in sections:
        log("", "## bf16 at realistic sizes (1 GPU): median ms of a step")
        # PyTorch's side: the same step in bf16 (eager, torch.compile), and the step's
        # matmuls alone in bf16 (cuBLAS's floor for gradc's bf16 step)
        large = {"elementwise": dict(n=100_000_000), "contrastive": dict(n=8192, d=1024, k=256),
                 "tp_mlp": dict(n=4096, d=4096, h=4096)}
        gemms = {"elementwise": [], "contrastive": [(8192, 1024, 256), (8192, 256, 8192), (8192, 8192, 256),
                                                    (8192, 8192, 256), (8192, 256, 1024), (1024, 8192, 256)],
                 "tp_mlp": [(4096, 4096, 4096)] * 6}
        log("| program | gradc f32 | gradc bf16 | eager bf16 | torch.compile bf16 | matmuls alone bf16 | "
            "gradc bf16 / f32 | gradc bf16 / eager | gradc bf16 / compile |", "|---|---|---|---|---|---|---|---|---|")
        for name in LARGE:
            ours = {}
            for t in ("f32", "bf16"):
                runs = [median_step(exe(f"large_{name}_{t}"), env, STEPS_LARGE) for _ in range(2)]
                if any(v is None for v, _ in runs):
                    log(f"{name} {t}: FAILED {' '.join(e for _, e in runs).strip()[:300]}")
                    failed.append(f"large_{name}_{t}")
                ours[t] = [v if v is not None else float("nan") for v, _ in runs]
            loss, leaves, reduced = torch_programs.PROGRAMS[name](0, 1, "cuda", dtype=torch.bfloat16, **large[name])
            eager = [torch_median(lambda: torch_programs.step(loss, leaves, reduced, 1), STEPS_LARGE) for _ in range(2)]
            try:
                compiled = torch.compile(loss)
                comp = [torch_median(lambda: torch_programs.step(compiled, leaves, reduced, 1), STEPS_LARGE)
                        for _ in range(2)]
            except Exception as e:  # noqa: BLE001 (report and go on)
                log(f"torch.compile failed on {name}: {e}")
                comp = [float("nan")] * 2
            floor = float("nan")
            if gemms[name]:
                ab = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                       torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for m, k, n in gemms[name]]
                floor = torch_median(lambda: [a @ b for a, b in ab], STEPS_LARGE)
            pair = lambda v: f"{v[0]:.3f}, {v[1]:.3f}"
            log(f"| {name} | {pair(ours['f32'])} | {pair(ours['bf16'])} | {pair(eager)} | {pair(comp)} | {floor:.3f} | "
                f"{min(ours['f32']) / max(ours['bf16']):.2f}x faster | {max(ours['bf16']) / min(eager):.2f} | "
                f"{max(ours['bf16']) / min(comp):.2f} |")
        del loss, leaves, reduced
        torch.cuda.empty_cache()

    if "sanitizer" in sections:
        log("", "## compute-sanitizer: memcheck on every compared program, racecheck on the row kernels and reductions")
        sanitizer = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
        checks = [(m["name"], "memcheck") for m in manifest if m["kind"] in ("compare", "bench")]
        checks += [("codegen_rows", "racecheck"), ("bench_syncbn", "racecheck"), ("bench_elementwise", "racecheck")]
        for name, tool in checks:
            try:
                # NCCL asks the driver for kernels of other GPUs at start-up: not the program's errors.
                p = sh([sanitizer, "--tool", tool, "--report-api-errors", "no", "--error-exitcode", "3", exe(name)],
                       env=env, timeout=120)
            except subprocess.TimeoutExpired:
                log(f"{name} {tool}: timed out (120 s)")
                continue
            summary = [l for l in p.stdout.splitlines() if l.startswith("========")]
            ok = p.returncode == 0
            if not ok:
                failed.append(f"{name} ({tool})")
            log(f"{name} {tool}: {'ok' if ok else 'ERRORS'}: exit {p.returncode}; " + (summary[-1] if summary else ""))
            if not ok:
                log(*["    " + l for l in summary[:30]])

    dist.destroy_process_group()
    log("", f"failed: {', '.join(failed) if failed else 'none'}")
    return 1 if failed else 0


def ncu_kernels(csv_text):
    """(kernel, ms, GB read + written) per kernel launch from ncu's --csv output."""
    import csv
    rows = [r for r in csv.reader(line for line in csv_text.splitlines() if line.startswith('"'))]
    if not rows:
        return []
    head = rows[0]
    col = {k: head.index(k) for k in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")}
    kernels = {}
    unit = {"byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1, "ns": 1e-6, "usecond": 1e-3, "msecond": 1,
            "nsecond": 1e-6, "us": 1e-3, "ms": 1}
    for r in rows[1:]:
        k = kernels.setdefault(r[col["ID"]], [r[col["Kernel Name"]], 0.0, 0.0])
        v = float(r[col["Metric Value"]].replace(",", "")) * unit.get(r[col["Metric Unit"]], float("nan"))
        if r[col["Metric Name"]] == "gpu__time_duration.sum":
            k[1] = v
        else:
            k[2] += v
    return [tuple(k) for k in kernels.values() if k[1] > 0]


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("prepare", "run"):
        sys.exit(__doc__)
    if sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else os.path.join(ROOT, "build", "gradc"),
                sys.argv[4] if len(sys.argv) > 4 else "")
    else:
        sys.exit(run(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else os.environ.get("OUT", "/tmp/gpu-out"),
                     sys.argv[4].split(",") if len(sys.argv) > 4 else SECTIONS))
