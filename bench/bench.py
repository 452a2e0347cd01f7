"""gradc benchmarks: the interpreter's throughput and the compiler's speed
(bench/native.py compares the backends with PyTorch).

usage: python3 bench/bench.py [GRADC]   (default: build/gradc)
Prints the median of several runs for each figure; see bench/README.md.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

GRADC = sys.argv[1] if len(sys.argv) > 1 else "build/gradc"
RUNS = 5


def median_wall(cmd):
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def interpreter(tmp):
    # 4 ranks, 10^6 f32 elements per rank per op: elementwise, reductions and every collective.
    n = 1_000_000
    ops = [
        "a = x * 2.0 + 1.0",
        "b = exp(-(a * a))",
        "c = where(b > 0.5, b, a)",
        "s = all_reduce(c)",
        "g = all_gather(c[0:250000], axis=0)",
        "r = reduce_scatter(s, axis=0)",
        "t = all_to_all(reshape(c, [1000, 1000]), split_axis=0, concat_axis=1)",
        "p = permute(c, shift=1)",
        "m = all_reduce(c, op=max)",
        "q = sum(p * m + g) + sum(r) + sum(t)",
    ]
    src = "world 4\ninput x : f32[%d] = randn([%d], seed=rank)\n%s\noutput q\n" % (n, n, "\n".join(ops))
    path = os.path.join(tmp, "throughput.dg")
    with open(path, "w") as f:
        f.write(src)
    out = subprocess.run([GRADC, "run", path, "--backend=interp", "--iters=%d" % RUNS], check=True,
                         capture_output=True, text=True)
    step = float(out.stderr.strip().split("median step: ")[1].split(" ms")[0])
    print(f"interpreter: 4 ranks x {len(ops)} ops x 10^6 f32 per rank per op: median step {step:.1f} ms "
          f"({step / len(ops):.1f} ms per op for all 4 ranks)")


def frontend(tmp):
    # A generated 10,000-statement program: parse, check and print.
    lines = ["world 2", "input x0 : f32[8, 8]"]
    for i in range(1, 10_000):
        op = ["x%d = x%d * 1.5 + 1", "x%d = tanh(x%d)", "x%d = x%d - mean(x%d, axis=0)"][i % 3]
        lines.append(op % ((i, i - 1) if op.count("%d") == 2 else (i, i - 1, i - 1)))
    lines.append("output x9999")
    path = os.path.join(tmp, "big.dg")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    check = median_wall([GRADC, "check", path])
    ir = median_wall([GRADC, "ir", path])
    print(f"frontend: 10,000 statements: check {check:.0f} ms, ir (parse, check, print) {ir:.0f} ms")


def scaling_program(n):
    # n statements: elementwise ops, small matmuls, a collective every 50, a loss and a grad.
    lines = ["world 2", "input x0 : f32[8, 8] = randn([8, 8], seed=rank)",
             "input w : f32[8, 8] shared = randn([8, 8], seed=7)"]
    for i in range(1, n):
        k, p = i % 50, f"x{i - 1}"
        if k == 0:
            lines.append(f"x{i} = all_reduce({p}) * 0.5")
        elif k % 7 == 0:
            lines.append(f"x{i} = matmul({p}, w) * 0.1")
        elif k % 3 == 0:
            lines.append(f"x{i} = tanh({p})")
        elif k % 3 == 1:
            lines.append(f"x{i} = {p} * 1.01 + 0.01")
        else:
            lines.append(f"x{i} = {p} - mean({p}, axis=0)")
    lines += [f"loss = sum(x{n - 1} * x{n - 1})", "g = grad(loss, w)", "output loss, g"]
    return "\n".join(lines) + "\n"


def compiler(tmp):
    # `gradc ir --stage=lowered` (parse, grad, simplify, lower) at 10k and 100k statements,
    # and a def inlined 8,000 times (one name repeated: printing must stay linear).
    # `gradc emit --target=cpu` of the same programs (the class's C++ written out), and of
    # the 10k one with its batch a size, for any B (emitted at several B and fitted).
    times, emits = {}, {}
    for n in (10_000, 100_000):
        path = os.path.join(tmp, f"scale{n}.dg")
        with open(path, "w") as f:
            f.write(scaling_program(n))
        times[n] = median_wall([GRADC, "ir", path, "--stage=lowered"])
        emits[n] = median_wall([GRADC, "emit", path, "--target=cpu", "-o", os.path.join(tmp, f"emit{n}")])
    path = os.path.join(tmp, "any10000.dg")
    with open(path, "w") as f:
        f.write(scaling_program(10_000).replace("input x0 : f32[8, 8] = randn([8, 8], seed=rank)",
                                                "size B = 8\ninput x0 : f32[B, 8] = randn([B, 8], seed=rank)"))
    any_b = median_wall([GRADC, "emit", path, "--target=cpu", "--size", "B=any", "-o", os.path.join(tmp, "any")])
    rep = ["world 1", "input x : f32[4]", "def f(a) {", "  h = a * 2 + 1", "  return tanh(h)", "}", "y0 = x"]
    rep += [f"y{i} = f(y{i - 1})" for i in range(1, 8001)] + ["output y8000"]
    path = os.path.join(tmp, "repeated.dg")
    with open(path, "w") as f:
        f.write("\n".join(rep) + "\n")
    named = median_wall([GRADC, "ir", path])
    print(f"compiler: ir --stage=lowered: 10k statements {times[10_000]:.0f} ms, 100k {times[100_000]:.0f} ms "
          f"({times[100_000] / times[10_000]:.1f}x); a def inlined 8,000 times, printed: {named:.0f} ms")
    print(f"compiler: emit --target=cpu: 10k statements {emits[10_000]:.0f} ms, 100k {emits[100_000]:.0f} ms "
          f"({emits[100_000] / emits[10_000]:.1f}x); 10k statements for any B: {any_b:.0f} ms")


with tempfile.TemporaryDirectory() as tmp:
    interpreter(tmp)
    frontend(tmp)
    compiler(tmp)
