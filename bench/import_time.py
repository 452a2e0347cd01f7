"""The torch target's first import: how long `import NAME` takes to compile and load a
package that `gradc emit --target=torch` wrote, with an empty extension cache each time,
and as a later package's (another package, tests/torch/gather_layer.dg's, imported
before it in a process of its own: the runtime library that every package of one gradc
shares, gradc_torch.cpp's, is in the cache, the package's own library is not).

    build/torch-venv/bin/python bench/import_time.py [GRADC] [--repeat=N] [PROGRAM.dg[:B=any] ...]

Each run is a fresh Python process: it imports torch (timed on its own), then the
package (the compile, by torch.utils.cpp_extension, and the load). Prints the median
of N runs (default 3) of each, per program (default: tests/torch/megatron.dg and
tests/torch/all_reduce_seed.dg). A mesh program is emitted with --data-parallel set to
its first axis (the convention does not change what is compiled). PROGRAM.dg:B=any
emits the package for any B (gradc emit --size B=any).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = """
import sys, time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
__import__(sys.argv[2])
t2 = time.perf_counter()
print(f"{t1 - t0:.3f} {t2 - t1:.3f}")
"""


def main():
    args = sys.argv[1:]
    repeat = 3
    for a in list(args):
        if a.startswith("--repeat="):
            repeat = int(a.split("=", 1)[1])
            args.remove(a)
    gradc = args.pop(0) if args and not args[0].endswith(".dg") else os.path.join(ROOT, "build", "gradc")
    programs = args or [os.path.join(ROOT, "tests", "torch", p) for p in ("megatron.dg", "all_reduce_seed.dg")]
    print(f"{'program':<22} {'import torch s':>15} {'compile and load s':>19} {'a later package s':>18}"
          f"  (medians of {repeat})")
    for given in programs:
        program, _, size = given.partition(":")
        with tempfile.TemporaryDirectory() as tmp:
            pkg = os.path.join(tmp, "pkg")
            emit = [gradc, "emit", program, "--target=torch", "-o", pkg] + ([f"--size={size}"] if size else [])
            with open(program) as f:
                mesh = re.search(r"^\s*mesh\s+(\w+)", f.read(), re.M)
            if mesh:
                emit.append(f"--data-parallel={mesh.group(1)}")
            subprocess.run(emit, check=True)
            name = next(d for d in os.listdir(pkg) if os.path.isdir(os.path.join(pkg, d)))
            other = os.path.join(tmp, "other")
            subprocess.run([gradc, "emit", os.path.join(ROOT, "tests", "torch", "gather_layer.dg"), "--target=torch",
                            "-o", other], check=True)
            torch_s, build_s, later_s = [], [], []
            cache = os.path.join(tmp, "extensions")
            env = dict(os.environ, TORCH_EXTENSIONS_DIR=cache)

            def run(folder=pkg, module=name):
                out = subprocess.run([sys.executable, "-c", CHILD, folder, module], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                return float(out[0]), float(out[1])

            for _ in range(repeat):
                shutil.rmtree(cache, ignore_errors=True)
                t, b = run()
                torch_s.append(t)
                build_s.append(b)
                shutil.rmtree(cache, ignore_errors=True)
                run(other, "gather_layer")  # compiles the runtime library, then its own
                later_s.append(run()[1])
            print(f"{os.path.basename(program) + (' ' + size if size else ''):<22} {statistics.median(torch_s):>15.1f} "
                  f"{statistics.median(build_s):>19.1f} {statistics.median(later_s):>18.1f}")


if __name__ == "__main__":
    main()
