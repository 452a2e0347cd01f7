"""Every op on bf16 and f16 values, forward and gradient, as gradc's interpreter computes
them against PyTorch eager on the CPU (docs/language.md, "Low precision"): each op, and
each op's backward, computes in f32 and rounds its result once, to nearest even.

usage: low_precision.py GRADC WORKDIR

For each op and each of bf16 and f16, a program takes x (and y) of that type and a
cotangent w, computes out = OP(x, y) and the gradient of sum(out * w) with respect to
x and y; the same in PyTorch, and in f64 from the same inputs (the exact values). Each
value must be bit-equal to PyTorch's, or no less accurate: its largest error against
the exact values, in units in the last place of its type, at most PyTorch's plus half
an ulp. They differ where PyTorch rounds more than once: a backward written as several
ops in the storage type (sin's: grad * cos(x), two roundings), a composite computed as
several ops (logsumexp), or a kernel with its own approximation (rsqrt). Each program
runs on the interpreter, the reference.

Then, for each type, one program with every op and every op's gradients runs on the
interpreter, the native backend and the cpu executable (`gradc build`), which must give
the same bits.
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

# op: (the gradc expression, the PyTorch function, operands)
OPS = {
    "neg": ("-x", lambda x: -x, 1),
    "exp": ("exp(x)", torch.exp, 1),
    "log": ("log(abs(x) + 1)", lambda x: torch.log(torch.abs(x) + 1), 1),
    "sqrt": ("sqrt(abs(x) + 1)", lambda x: torch.sqrt(torch.abs(x) + 1), 1),
    "rsqrt": ("rsqrt(abs(x) + 1)", lambda x: torch.rsqrt(torch.abs(x) + 1), 1),
    "abs": ("abs(x)", torch.abs, 1),
    "relu": ("relu(x)", torch.relu, 1),
    "sigmoid": ("sigmoid(x)", torch.sigmoid, 1),
    "tanh": ("tanh(x)", torch.tanh, 1),
    "sin": ("sin(x)", torch.sin, 1),
    "cos": ("cos(x)", torch.cos, 1),
    "square": ("square(x)", torch.square, 1),
    "reciprocal": ("reciprocal(x + 4)", lambda x: torch.reciprocal(x + 4), 1),
    "erf": ("erf(x)", torch.erf, 1),
    "log1p": ("log1p(abs(x))", lambda x: torch.log1p(torch.abs(x)), 1),
    "expm1": ("expm1(x)", torch.expm1, 1),
    "scale": ("x * 0.3", lambda x: x * 0.3, 1),
    "add": ("x + y", torch.add, 2),
    "sub": ("x - y", torch.sub, 2),
    "mul": ("x * y", torch.mul, 2),
    "div": ("x / (abs(y) + 1)", lambda x, y: x / (torch.abs(y) + 1), 2),
    "pow": ("pow(abs(x) + 1, y)", lambda x, y: torch.pow(torch.abs(x) + 1, y), 2),
    "maximum": ("maximum(x, y)", torch.maximum, 2),
    "minimum": ("minimum(x, y)", torch.minimum, 2),
    "where": ("where(x > y, x, y * 2)", lambda x, y: torch.where(x > y, x, y * 2), 2),
    "sum": ("sum(x, axis=1)", lambda x: x.sum(1), 1),
    "mean": ("mean(x, axis=1)", lambda x: x.mean(1), 1),
    "max": ("max(x, axis=1)", lambda x: x.amax(1), 1),
    "logsumexp": ("logsumexp(x, axis=1)", lambda x: torch.logsumexp(x, 1), 1),
    "softmax": ("softmax(x, axis=1)", lambda x: torch.softmax(x, 1), 1),
    "log_softmax": ("log_softmax(x, axis=1)", lambda x: torch.log_softmax(x, 1), 1),
    "gelu": ("gelu(x)", torch.nn.functional.gelu, 1),
    "silu": ("silu(x)", torch.nn.functional.silu, 1),
    "softplus": ("softplus(x)", torch.nn.functional.softplus, 1),
    "layer_norm": ("layer_norm(x, axis=-1)", lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)), 1),
    "var": ("var(x, axis=1)", lambda x: torch.var(x, 1), 1),
    "std": ("std(x, axis=1)", lambda x: torch.std(x, 1), 1),
    "logaddexp": ("logaddexp(x, y)", torch.logaddexp, 2),
    "log_sigmoid": ("log_sigmoid(x)", torch.nn.functional.logsigmoid, 1),
    "scaled_dot_product_attention": ("scaled_dot_product_attention(x, y, y, is_causal=true)",
                                     lambda x, y: torch.nn.functional.scaled_dot_product_attention(x, y, y, is_causal=True), 2),
    "binary_cross_entropy_with_logits": ("expand_dims(binary_cross_entropy_with_logits(x, y), axis=0)",
                                         lambda x, y: torch.nn.functional.binary_cross_entropy_with_logits(x, y)[None], 2),
    "clamp": ("clamp(x, min=-0.5, max=0.7)", lambda x: torch.clamp(x, -0.5, 0.7), 1),
    "cumsum": ("cumsum(x, axis=1)", lambda x: torch.cumsum(x, 1), 1),
    "matmul": ("matmul(x, transpose(y))", lambda x, y: x @ y.T, 2),
    "transpose": ("transpose(x) * 1.5", lambda x: x.T * 1.5, 1),
    "cast": ("cast(cast(x, f32) * 3, DT)", lambda x: (x.float() * 3).to(x.dtype), 1),
}
def save(path, t):
    """bf16 as ml_dtypes saves it ('<V2'), f16 as '<f2'."""
    if t.dtype == torch.bfloat16:
        np.save(path, t.view(torch.int16).numpy().view(np.dtype("V2")))
    else:
        np.save(path, t.numpy())


def load(path, dtype):
    a = np.load(path)
    if dtype == torch.bfloat16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a)


def ulps(a, b):
    """The largest distance in units in the last place between two tensors of one 2-byte type."""
    def order(t):  # the bits as integers that order like the values
        i = t.view(torch.int16).to(torch.int32)
        return torch.where(i < 0, -(i & 0x7FFF), i)
    if a.shape != b.shape:
        return float("inf")
    same_nan = torch.isnan(a.float()) & torch.isnan(b.float())
    d = (order(a) - order(b)).abs()
    d = torch.where(same_nan, torch.zeros_like(d), d)
    return int(d.max()) if d.numel() else 0


def error(t, exact, dtype):
    """The largest error of t against the exact values, in units in the last place of dtype at each."""
    e = exact.abs().clamp_min(torch.finfo(dtype).tiny)
    ulp = torch.pow(2.0, torch.floor(torch.log2(e)) - (7 if dtype == torch.bfloat16 else 10))
    return float(((t.double() - exact).abs() / ulp).max())


def same_on_every_backend(gradc, d, dt, every, x, y):
    """The program of every op (`every`: its lines) on the interpreter, the native
    backend and the cpu executable: (ops, outputs, None) when all give the same bits,
    else a message."""
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    save(os.path.join(d, "in", "x.npy"), x)
    save(os.path.join(d, "in", "y.npy"), y)
    with open(os.path.join(d, "p.dg"), "w") as f:
        f.write(f"input x : {dt}[3, 5]\ninput y : {dt}[3, 5]\n" + "\n".join(every) + "\n")
    p, ins = os.path.join(d, "p.dg"), "--inputs=" + os.path.join(d, "in")
    exe = os.path.join(d, "p.exe")
    runs = {}
    for how, cmd in [("interpreter", [gradc, "run", p, ins, "--backend=interp"]),
                     ("native backend", [gradc, "run", p, ins, "--backend=native"]),
                     ("build", [gradc, "build", p, "--target=cpu", "-o", exe]),
                     ("executable", [exe, ins])]:
        r = subprocess.run(cmd + ["--format=json"] if how != "build" else cmd, capture_output=True, text=True)
        if r.returncode:
            return len(every) // 4, 0, f"{dt}: the {how} failed: {r.stderr.strip()[-2000:]}"
        runs[how] = r.stdout
    want = json.loads(runs["interpreter"])["ranks"][0]["outputs"]
    for how in ("native backend", "executable"):
        got = json.loads(runs[how])["ranks"][0]["outputs"]
        for o in want:  # JSON's shortest round-trip digits of each value: equal text, equal bits
            if json.dumps(got[o]) != json.dumps(want[o]):
                return len(every) // 4, len(want), f"{dt}: {o} of the {how} differs from the interpreter's"
    return len(every) // 4, len(want), None


def main():
    gradc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures, checked, differ, backends = [], 0, 0, []
    for dtype, dt in ((torch.bfloat16, "bf16"), (torch.float16, "f16")):
        every = []  # the ops' lines of the program with all of them
        gen = torch.Generator().manual_seed(7)
        x = (torch.randn(3, 5, generator=gen) * 1.5).to(dtype)
        y = (torch.randn(3, 5, generator=gen)).to(dtype)
        for name, (expr, fn, arity) in OPS.items():
            d = os.path.join(work, f"{name}_{dt}")
            os.makedirs(os.path.join(d, "in"), exist_ok=True)
            xs, ys = x.clone().requires_grad_(), y.clone().requires_grad_()
            out = fn(xs, ys) if arity == 2 else fn(xs)
            w = (torch.randn(out.shape, generator=gen)).to(dtype)
            (out.float() * w.float()).sum().backward()
            # the exact values for these inputs, in f64
            xd, yd = x.double().requires_grad_(), y.double().requires_grad_()
            fd = (lambda a: fn(a).to(torch.float64)) if name != "cast" else (lambda a: a * 3)
            outd = fn(xd, yd) if arity == 2 else fd(xd)
            (outd * w.double()).sum().backward()
            exact = {"out": outd.detach(), "dx": xd.grad, "dy": yd.grad if arity == 2 else None}
            save(os.path.join(d, "in", "x.npy"), x)
            save(os.path.join(d, "in", "w.npy"), w)
            lines = [f"input x : {dt}[3, 5]", f"input w : {dt}[{', '.join(map(str, out.shape))}]"]
            if arity == 2:
                save(os.path.join(d, "in", "y.npy"), y)
                lines.append(f"input y : {dt}[3, 5]")
            lines.append(f"out = {expr.replace('DT', dt)}")
            k = len(every) // 4
            shape = ", ".join(map(str, out.shape))
            every += [f"out_{name} = {expr.replace('DT', dt)}",
                      f"loss_{name} = sum(cast(out_{name}, f32) * cast(randn([{shape}], seed={k}), f32))",
                      f"dx_{name} = grad(loss_{name}, x)" if arity == 1 else f"dx_{name}, dy_{name} = grad(loss_{name}, x, y)",
                      f"output out_{name}, dx_{name}" + (f", dy_{name}" if arity == 2 else "")]
            lines.append("loss = sum(cast(out, f32) * cast(w, f32))")
            lines.append("dx = grad(loss, x)")
            outs = ["out", "dx"]
            if arity == 2:
                lines.append("dy = grad(loss, y)")
                outs.append("dy")
            lines.append("output " + ", ".join(outs))
            with open(os.path.join(d, "p.dg"), "w") as f:
                f.write("\n".join(lines) + "\n")
            r = subprocess.run([gradc, "run", os.path.join(d, "p.dg"), "--inputs", os.path.join(d, "in"),
                                "--outputs", os.path.join(d, "out"), "--quiet", "--backend=interp"],
                               capture_output=True, text=True)
            if r.returncode:
                failures.append(f"{name} {dt}: gradc failed: {r.stderr.strip()}")
                continue
            want = {"out": out.detach(), "dx": xs.grad, "dy": ys.grad if arity == 2 else None}
            for o in outs:
                got = load(os.path.join(d, "out", "rank0", o + ".npy"), dtype)
                u = ulps(got, want[o])
                checked += 1
                if u == 0:
                    continue
                eg, et = error(got, exact[o], dtype), error(want[o], exact[o], dtype)
                differ += 1
                if eg > et + 0.5:
                    failures.append(f"{name} {dt}: {o} differs from PyTorch's by {u} ulp and is less accurate: "
                                    f"{eg:.2f} ulp from the exact value, PyTorch's {et:.2f}")
        backends.append(same_on_every_backend(gradc, os.path.join(work, f"every_{dt}"), dt, every, x, y))
    for f in failures:
        print(f)
    print(f"{len(OPS)} ops in bf16 and f16, {checked} values and gradients against PyTorch eager: "
          f"{checked - differ} bit-equal; {differ} differ, none less accurate than PyTorch's by more than "
          f"half an ulp" if not failures else f"{len(failures)} less accurate than PyTorch's")
    for ops, outputs, bad in backends:
        print(f"{ops} ops, {outputs} outputs: " + (bad or "interpreter, native backend and executable bit-equal"))
    sys.exit(1 if failures or any(b[2] for b in backends) else 0)


if __name__ == "__main__":
    main()
