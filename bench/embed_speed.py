"""The four programs' step as gradc run (native backend), as the executable of gradc build
(threads, and under mpirun) and as the class gradc emit writes, embedded in an application
built with CMake's defaults (bench/embed_harness), side by side: medians of each's own
median step over ROUNDS rounds, the five run in turns within a round, each round starting
one further on. The fifth is the embedded class with its shared-input check turned off
(the class checks every step; the executables and gradc run check their first): the
check's cost.

usage: embed_speed.py GRADC [ITERS] [ROUNDS]
Targets: the executable and the embedded class within 10% of gradc run; the class's
shared-input check within 3% of its step.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["elementwise", "contrastive", "syncbn", "tp_mlp"]


def median_step(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"median step: ([0-9.]+) ms", p.stdout + p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return float(m.group(1))


def main():
    gradc = os.path.abspath(sys.argv[1])
    iters = sys.argv[2] if len(sys.argv) > 2 else "50"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    work = tempfile.mkdtemp(prefix="embed_speed-")
    gradc_dir = os.path.dirname(gradc)
    print(f"{'program':<13} {'gradc run':>10} {'exe':>10} {'mpirun':>10} {'embedded':>10} {'no check':>10}   "
          "(ms, median step)")
    for name in PROGRAMS:
        prog = os.path.join(HERE, "programs", name + ".dg")
        world = re.search(r"^world (\d+)", open(prog).read(), re.M).group(1)
        exe = os.path.join(work, name)
        subprocess.run([gradc, "build", prog, "--target=cpu", "-o", exe], check=True)
        build = os.path.join(work, name + "-embed")
        subprocess.run(["cmake", "-S", os.path.join(HERE, "embed_harness"), "-B", build, f"-Dgradc_DIR={gradc_dir}",
                        f"-DPROGRAM={prog}"], check=True, capture_output=True)
        subprocess.run(["cmake", "--build", build], check=True, capture_output=True)
        embedded = os.path.join(build, "embed_speed")
        cmds = {"run": [gradc, "run", prog, "--quiet", f"--iters={iters}"],
                "exe": [exe, "--quiet", f"--iters={iters}"],
                "mpirun": ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", world, exe, "--quiet",
                           f"--iters={iters}"],
                "embedded": [embedded, iters],
                "nocheck": [embedded, iters, "nocheck"]}
        runs = {k: [] for k in cmds}
        keys = list(cmds)
        for r in range(rounds):  # each round starts one variant further on: none always follows another
            for k in keys[r % len(keys):] + keys[:r % len(keys)]:
                runs[k].append(median_step(cmds[k]))
        m = {k: statistics.median(v) for k, v in runs.items()}
        check = statistics.median(a / b for a, b in zip(runs["embedded"], runs["nocheck"]))  # per round
        print(f"{name:<13} {m['run']:>10.3f} {m['exe']:>10.3f} {m['mpirun']:>10.3f} {m['embedded']:>10.3f} "
              f"{m['nocheck']:>10.3f}   exe {m['exe'] / m['run']:.2f}x, mpirun {m['mpirun'] / m['run']:.2f}x, "
              f"embedded {m['embedded'] / m['run']:.2f}x, the check {100 * (check - 1):+.1f}%")


if __name__ == "__main__":
    main()
