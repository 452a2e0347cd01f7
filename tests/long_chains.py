"""Writes programs with long chains (well past where recursion used to overflow
the stack) into a folder: gradc must compile, differentiate and run each."""
import os
import sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
os.makedirs(out, exist_ok=True)
progs = {
    # 100k unary minuses: an even count, so y = x
    "neg": "input x : f32 = 3\ny = " + "-" * n + "x\ndx = grad(y, x)\noutput y, dx\n",
    # right-associative powers: 1 ** 1 ** ... = 1
    "pow": "input x : f32 = 1\ny = x" + " ** x" * (n // 5) + "\noutput y\n",
    # a long sum: y = (n + 1) x, dy/dx = n + 1
    "sum": "input x : f32 = 1\ny = x" + " + x" * n + "\ndx = grad(y, x)\noutput y, dx\n",
    # chained slices
    "slice": "input x : f32[4] = iota(4)\ny = x" + "[0:4]" * (n // 5) + "\ndx = grad(sum(y), x)\noutput y, dx\n",
    # nested (non-recursive) function calls: f0 calls f1 ... each adds 1
    "defs": "".join("def f%d(a) { return f%d(a) + 1 }\n" % (i, i + 1) for i in range(n // 5))
    + "def f%d(a) { return a }\ninput x : f32 = 1\ny = f0(x)\noutput y\n" % (n // 5),
}
for name, text in progs.items():
    with open(os.path.join(out, name + ".dg"), "w") as f:
        f.write(text)
