"""The executable for any batch size (gradc build --size B=any) against the one built
for the batch size it runs at: the step of each of four programs, as medians of each's
own median step over ROUNDS rounds, the two run in turns within a round.

usage: any_size.py GRADC [ITERS] [ROUNDS]
Each program is bench/programs/NAME.dg with its batch N a size (`size B = N`, every N
written B), run at B = N from its defaults. Target: the executable for any B within
10% of the one for B = N.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

from embed_speed import median_step  # a command's "median step: X ms"

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = {"elementwise": 1000000, "contrastive": 1024, "syncbn": 4096, "tp_mlp": 512}
if os.environ.get("ANY_SIZE_ONLY"):
    PROGRAMS = {k: v for k, v in PROGRAMS.items() if k in os.environ["ANY_SIZE_ONLY"].split(",")}


def main():
    gradc = os.path.abspath(sys.argv[1])
    iters = sys.argv[2] if len(sys.argv) > 2 else "50"
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    work = tempfile.mkdtemp(prefix="any_size-")
    print(f"{'program':<13} {'B':>8} {'for B':>10} {'for any B':>10}   (ms, median step)")
    for name, n in PROGRAMS.items():
        text = open(os.path.join(HERE, "programs", name + ".dg")).read()
        body = re.sub(rf"\b{n}\b", "B", text)
        body = re.sub(r"^(world \d+\n)", rf"\1size B = {n}\n", body, count=1, flags=re.M)
        prog = os.path.join(work, name + ".dg")
        with open(prog, "w") as f:
            f.write(body)
        fixed, anyb = os.path.join(work, name), os.path.join(work, name + "-any")
        subprocess.run([gradc, "build", prog, "--target=cpu", "-o", fixed], check=True)
        subprocess.run([gradc, "build", prog, "--target=cpu", "-o", anyb, "--size=B=any"], check=True)
        runs = {"fixed": [], "any": []}
        for r in range(rounds):
            order = [("fixed", fixed), ("any", anyb)]
            for key, exe in order if r % 2 == 0 else order[::-1]:
                runs[key].append(median_step([exe, "--quiet", f"--iters={iters}"]))
        m = {k: statistics.median(v) for k, v in runs.items()}
        print(f"{name:<13} {n:>8} {m['fixed']:>10.3f} {m['any']:>10.3f}   any B {m['any'] / m['fixed']:.2f}x")


if __name__ == "__main__":
    main()
