"""Every op and composite at the edges of its domain, against PyTorch in float64: one
row per case, the value and the gradient from gradc's interpreter and from its native
backend, each equal to PyTorch's (NaN where PyTorch has NaN, the same infinities,
finite values within 1e-9 relative). A NaN where PyTorch is finite fails its row.

usage: edges.py GRADC WORKDIR
Needs PyTorch (Debian's python3-torch) and NumPy.
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
INF = math.inf
NAN = math.nan

# name, the .dg expression of `y` from `x` (and `b`), x, b (or None), the same in PyTorch.
# The loss is sum(y * c) with c = 1, 2, 3, ... so that every element's cotangent differs.
ROWS = [
    ("normalize of a zero row", "normalize(x)", [[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], None, lambda x, b: F.normalize(x, dim=-1)),
    ("normalize of a row with NaN", "normalize(x)", [[NAN, 1.0], [0.0, 0.0], [INF, 1.0]], None,
     lambda x, b: F.normalize(x, dim=-1)),
    ("normalize eps=0.5", "normalize(x, eps=0.5)", [[0.1, 0.2, 0.0], [3.0, 4.0, 0.0]], None,
     lambda x, b: F.normalize(x, dim=-1, eps=0.5)),
    ("sqrt at 0", "sqrt(x)", [0.0, 1.0, 4.0], None, lambda x, b: torch.sqrt(x)),
    ("rsqrt at 0", "rsqrt(x)", [0.0, 1.0, 4.0], None, lambda x, b: torch.rsqrt(x)),
    ("log at 0", "log(x)", [0.0, 1.0, 2.0], None, lambda x, b: torch.log(x)),
    ("reciprocal at 0", "reciprocal(x)", [0.0, 2.0], None, lambda x, b: torch.reciprocal(x)),
    ("pow at base 0", "pow(x, b)", [0.0, 0.0, 2.0], [2.0, 0.5, 3.0], lambda x, b: torch.pow(x, b)),
    ("pow at base 0, a negative exponent", "pow(x, b)", [0.0, 0.0, -2.0, -2.0], [-1.0, -0.5, 2.0, 0.5], lambda x, b: torch.pow(x, b)),
    ("pow at exponent 0", "pow(x, b)", [0.0, 3.0], [0.0, 0.0], lambda x, b: torch.pow(x, b)),
    ("softplus far out", "softplus(x)", [-100.0, 0.0, 100.0, 800.0], None, lambda x, b: F.softplus(x)),
    ("logsumexp of large values", "logsumexp(x, axis=-1)", [[1000.0, 1000.0, -1000.0]], None,
     lambda x, b: torch.logsumexp(x, -1)),
    ("logsumexp with -inf", "logsumexp(x, axis=-1)", [[-INF, 0.0, 1.0]], None, lambda x, b: torch.logsumexp(x, -1)),
    ("logsumexp of all -inf and of +inf", "logsumexp(x, axis=-1)", [[-INF, -INF], [INF, 1.0], [-INF, 2.0]], None,
     lambda x, b: torch.logsumexp(x, -1)),
    ("log_softmax and softmax with inf", "log_softmax(x) + 2 * softmax(x)", [[INF, 1.0, 0.0], [-INF, -INF, -INF], [-INF, 0.0, 1.0]],
     None, lambda x, b: F.log_softmax(x, -1) + 2 * F.softmax(x, -1)),
    ("log_softmax of large values", "log_softmax(x)", [[1000.0, -1000.0, 0.0]], None, lambda x, b: F.log_softmax(x, -1)),
    ("softmax of large values", "softmax(x)", [[1000.0, -1000.0, 999.0]], None, lambda x, b: F.softmax(x, -1)),
    ("cross_entropy with a -inf logit", "cross_entropy(x, [2, 0])", [[0.0, -INF, 1.0], [2.0, 1.0, -INF]], None,
     lambda x, b: F.cross_entropy(x, torch.tensor([2, 0]))),
    ("cross_entropy with ignore_index", "cross_entropy(x, [2, -100, 1])", [[0.0, 1.0, 1.0], [2.0, 1.0, 0.0], [1.0, 3.0, 0.5]],
     None, lambda x, b: F.cross_entropy(x, torch.tensor([2, -100, 1]))),
    ("cross_entropy ignore_index=1", "cross_entropy(x, [2, 1, 1], ignore_index=1)", [[0.0, 1.0, 1.0], [2.0, 1.0, 0.0], [1.0, 3.0, 0.5]],
     None, lambda x, b: F.cross_entropy(x, torch.tensor([2, 1, 1]), ignore_index=1)),
    ("cross_entropy label_smoothing=0.1, a row ignored", "cross_entropy(x, [2, -100, 1], label_smoothing=0.1)",
     [[0.0, 1.0, 1.0], [2.0, 1.0, 0.0], [1.0, 3.0, 0.5]], None,
     lambda x, b: F.cross_entropy(x, torch.tensor([2, -100, 1]), label_smoothing=0.1)),
    ("cross_entropy label_smoothing=1", "cross_entropy(x, [2, 0], label_smoothing=1)", [[0.0, 1.0, 1.0], [2.0, 1.0, 0.0]],
     None, lambda x, b: F.cross_entropy(x, torch.tensor([2, 0]), label_smoothing=1.0)),
    ("cross_entropy label_smoothing with a -inf logit", "cross_entropy(x, [2, 0], label_smoothing=0.2)",
     [[0.0, -INF, 1.0], [2.0, 1.0, 0.5]], None,
     lambda x, b: F.cross_entropy(x, torch.tensor([2, 0]), label_smoothing=0.2)),
    ("cross_entropy label_smoothing, -inf in an ignored row", "cross_entropy(x, [2, -100], label_smoothing=0.2)",
     [[0.0, 1.0, 1.0], [2.0, -INF, 0.5]], None,
     lambda x, b: F.cross_entropy(x, torch.tensor([2, -100]), label_smoothing=0.2)),
    ("layer_norm of a constant row", "layer_norm(x)", [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], None,
     lambda x, b: F.layer_norm(x, x.shape[-1:])),
    ("rms_norm of a zero row", "rms_norm(x)", [[0.0, 0.0, 0.0], [1.0, 2.0, 4.0]], None,
     lambda x, b: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)),
    ("gelu far out", "gelu(x)", [-40.0, -6.0, 0.0, 6.0, 40.0], None, lambda x, b: F.gelu(x)),
    ("gelu tanh far out", "gelu(x, approximate=tanh)", [-40.0, -6.0, 0.0, 6.0, 40.0], None,
     lambda x, b: F.gelu(x, approximate="tanh")),
    ("erf far out", "erf(x)", [-10.0, -3.0, 0.0, 3.0, 10.0], None, lambda x, b: torch.erf(x)),
    ("sigmoid far out", "sigmoid(x)", [-800.0, 0.0, 800.0], None, lambda x, b: torch.sigmoid(x)),
    ("tanh far out", "tanh(x)", [-400.0, 0.0, 400.0], None, lambda x, b: torch.tanh(x)),
    ("silu far out", "silu(x)", [-800.0, 0.0, 800.0], None, lambda x, b: F.silu(x)),
    ("exp overflow", "exp(x)", [800.0, 0.0], None, lambda x, b: torch.exp(x)),
    ("relu and abs at 0", "relu(x) + abs(x)", [0.0, -1.0, 1.0], None, lambda x, b: torch.relu(x) + torch.abs(x)),
    ("relu and abs at NaN", "relu(x) + 2 * abs(x)", [NAN, -1.0, 0.0, 2.0], None, lambda x, b: torch.relu(x) + 2 * torch.abs(x)),
    ("maximum and minimum with NaN", "maximum(x, b) + 2 * minimum(x, b)", [1.0, NAN, 3.0, NAN], [NAN, 2.0, 1.0, NAN],
     lambda x, b: torch.maximum(x, b) + 2 * torch.minimum(x, b)),
    ("maximum and minimum under an infinite cotangent", "(maximum(x, b) + 2 * minimum(x, b)) * (1.0 / 0.0)",
     [1.0, 3.0, 2.0, -1.0], [2.0, 1.0, 2.0, INF], lambda x, b: (torch.maximum(x, b) + 2 * torch.minimum(x, b)) * INF),
    ("binary_cross_entropy_with_logits under an infinite cotangent",
     "binary_cross_entropy_with_logits(x, b) * (1.0 / 0.0)", [-800.0, -3.0, 0.0, 0.0, 2.0, 800.0],
     [0.0, 1.0, 0.5, 0.25, 0.0, 1.0], lambda x, b: F.binary_cross_entropy_with_logits(x, b) * INF),
    ("clamp of NaN", "clamp(x, min=1, max=3) + 2 * clamp(x, max=0)", [NAN, 2.0, -1.0], None,
     lambda x, b: torch.clamp(x, 1, 3) + 2 * torch.clamp(x, max=0)),
    ("clamp by a NaN bound", "clamp(x, min=b) + 2 * clamp(x, max=b) + 3 * clamp(x, min=b, max=b + 1)",
     [NAN, 2.0, 1.0, 3.0, 0.5], [1.0, NAN, 1.0, NAN, 2.0],
     lambda x, b: torch.clamp(x, min=b) + 2 * torch.clamp(x, max=b) + 3 * torch.clamp(x, min=b, max=b + 1)),
    ("max, min, argmax and topk with NaN", "v_, i_ = topk(x, 2); max(x, axis=-1) + 2 * min(x, axis=-1) + "
     "3 * cast(argmax(x, axis=-1), f64) + 5 * sum(v_ + 1000 * cast(i_, f64), axis=-1)",
     [[1.0, NAN, 3.0, 2.0], [2.0, 2.0, 1.0, 0.0]], None,
     lambda x, b: torch.amax(x, -1) + 2 * torch.amin(x, -1) + 3 * torch.argmax(x, -1)
     + 5 * (lambda r: (r.values + 1000 * r.indices).sum(-1))(torch.topk(x, 2))),
    ("maximum and minimum at a tie", "maximum(x, b) + 2 * minimum(x, b)", [1.0, 2.0], [1.0, 3.0],
     lambda x, b: torch.maximum(x, b) + 2 * torch.minimum(x, b)),
    ("max over a tie", "max(x, axis=-1)", [[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], None, lambda x, b: torch.amax(x, -1)),
    ("min over a tie", "min(x, axis=-1)", [[1.0, 1.0, 3.0], [2.0, 2.0, 2.0]], None, lambda x, b: torch.amin(x, -1)),
    ("mean of a variance 0", "mean(square(x - mean(x)))", [5.0, 5.0, 5.0], None, lambda x, b: torch.square(x - x.mean()).mean()),
    ("log1p near 0 and at -1", "log1p(x)", [1e-10, -0.5, 0.0, 3.0, -1.0], None, lambda x, b: torch.log1p(x)),
    ("expm1 near 0 and far out", "expm1(x)", [1e-10, -50.0, 0.0, 2.0, 800.0], None, lambda x, b: torch.expm1(x)),
    ("logaddexp far out and at ties", "logaddexp(x, b)", [1.0, INF, 0.0, -INF, 1000.0, 2.0], [2.0, 1.0, 0.0, 3.0, -1000.0, 2.0],
     lambda x, b: torch.logaddexp(x, b)),
    ("log_sigmoid far out and at 0", "log_sigmoid(x)", [-INF, -1000.0, -3.0, 0.0, 3.0, 800.0, INF], None,
     lambda x, b: F.logsigmoid(x)),
    ("binary_cross_entropy_with_logits far out", "binary_cross_entropy_with_logits(x, b)",
     [-1000.0, -3.0, 0.0, 0.5, 1000.0, 2.0], [0.0, 1.0, 1.0, 0.25, 1.0, 0.0],
     lambda x, b: F.binary_cross_entropy_with_logits(x, b)),
    ("softplus beta and threshold", "softplus(x, beta=2, threshold=5)", [-100.0, -20.0, 0.0, 2.4, 2.6, 100.0], None,
     lambda x, b: F.softplus(x, beta=2, threshold=5)),
    ("clamp at its bounds", "clamp(x, min=1, max=3)", [0.5, 1.0, 2.0, 3.0, 3.5], None, lambda x, b: torch.clamp(x, 1, 3)),
    ("clamp by a tensor, min > max", "clamp(x, min=b) + clamp(x, min=3, max=1)", [0.5, 1.0, 2.0, 3.0, 3.5],
     [1.0, 1.0, 2.5, 3.0, 3.0], lambda x, b: torch.clamp(x, min=b) + torch.clamp(x, 3, 1)),
    ("var and std of constant rows", "var(x, axis=-1) + std(x, axis=-1) + std(x, axis=-1, correction=0)",
     [[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]], None,
     lambda x, b: torch.var(x, -1) + torch.std(x, -1) + torch.std(x, -1, unbiased=False)),
    ("var of one element", "var(x, axis=-1, keepdims=true)", [[3.0], [1.0]], None, lambda x, b: torch.var(x, -1, keepdim=True)),
    ("masked_fill with -inf", "exp(masked_fill(x, x > 1.5, -inf))", [1.0, 2.0, 3.0, -1.0], None,
     lambda x, b: torch.exp(x.masked_fill(x > 1.5, -INF))),
    ("tril and triu", "tril(x, k=-1) + 2 * triu(x, k=1) + 3 * tril(x)", [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 2.0, 3.0]],
     None, lambda x, b: torch.tril(x, -1) + 2 * torch.triu(x, 1) + 3 * torch.tril(x)),
    ("causal softmax (a -inf mask)", "softmax(where(tril(ones([3, 3])) > 0, x, -inf))",
     [[1.0, 2.0, 3.0], [4.0, 1.0, 0.5], [2.0, 2.0, 9.0]], None,
     lambda x, b: F.softmax(x.masked_fill(~torch.tril(torch.ones(3, 3)).bool(), -INF), -1)),
    ("cumsum along each axis", "cumsum(x, axis=1) + 10 * cumsum(x, axis=0)", [[1.0, 2.0, 3.0], [4.0, -INF, 6.0]], None,
     lambda x, b: torch.cumsum(x, 1) + 10 * torch.cumsum(x, 0)),
    ("cumsum of 150, in blocks", "cumsum(x, axis=0)", [math.sin(i) * 3 for i in range(150)], None,
     lambda x, b: torch.cumsum(x, 0)),
    ("cumsum of 70 rows, in blocks", "cumsum(x, axis=0) + cumsum(x, axis=1)",
     [[math.cos(i * j + 1) for j in range(3)] for i in range(70)], None, lambda x, b: torch.cumsum(x, 0) + torch.cumsum(x, 1)),
    ("take_along_axis, repeated indices", "take_along_axis(x, [[2, 0, 2], [1, 1, 0]], axis=1)",
     [[1.0, 2.0, 3.0], [4.0, INF, 6.0]], None, lambda x, b: torch.gather(x, 1, torch.tensor([[2, 0, 2], [1, 1, 0]]))),
    ("scatter_add, repeated indices", "scatter_add(b, 1, [[0, 2, 2], [1, 1, 1]], x)", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
     [[0.5, 0.25, 0.0], [1.0, 2.0, 3.0]], lambda x, b: b.scatter_add(1, torch.tensor([[0, 2, 2], [1, 1, 1]]), x)),
    ("index_add, repeated index", "index_add(b, 0, [2, 0, 2], x)", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]],
     [[0.5, 0.25], [0.0, 1.0], [2.0, 3.0]], lambda x, b: b.index_add(0, torch.tensor([2, 0, 2]), x)),
    # pieces put back in another order, each scaled by its own number: a piece out of place shows
    ("chunk, 7 in 4 (2, 2, 2, 1)", "a_, b_, c_, d_ = chunk(x, 4, axis=1); concat([d_ * 4, c_ * 3, b_ * 2, a_], axis=1)",
     [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0]], None,
     lambda x, b: (lambda a, b_, c, d: torch.cat([d * 4, c * 3, b_ * 2, a], 1))(*x.chunk(4, 1))),
    ("split by sizes and by a size", "a_, b_, c_ = split(x, [1, 3, 1]); d_, e_, f_ = split(x, 2, axis=-1); "
     "concat([c_ * 3, a_, b_ * 2], axis=0) + concat([f_, e_ * 5, d_ * 7], axis=1)",
     [[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0], [1.5, 2.5, 3.5, 4.5, 5.5], [0.0, -1.0, -2.0, -3.0, -4.0],
      [7.0, 8.0, 9.0, 10.0, 11.0]], None,
     lambda x, b: (lambda a, b_, c: torch.cat([c * 3, a, b_ * 2], 0))(*x.split([1, 3, 1]))
     + (lambda d, e, f: torch.cat([f, e * 5, d * 7], 1))(*x.split(2, -1))),
    ("stack along a middle axis", "stack([x, x * x, 2 * x], axis=1)", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], None,
     lambda x, b: torch.stack([x, x * x, 2 * x], 1)),
    ("repeat_interleave (GQA's heads)", "repeat_interleave(x, 3, axis=0) * reshape(cast(iota(12), f64), [6, 2])",
     [[1.0, 2.0], [3.0, 4.0]], None,
     lambda x, b: x.repeat_interleave(3, 0) * torch.arange(12.0).reshape(6, 2)),
    # indices join the values as 1000 * index, so that a wrong index shows in y
    ("sort with ties, NaN and -inf", "v_, i_ = sort(x); v_ + 1000 * cast(i_, f64)", [3.0, NAN, 1.0, 3.0, -INF, 0.0], None,
     lambda x, b: (lambda r: r.values + 1000 * r.indices)(torch.sort(x, stable=True))),
    ("sort descending along axis 0", "v_, i_ = sort(x, axis=0, descending=true); v_ + 1000 * cast(i_, f64)",
     [[3.0, 1.0], [NAN, 2.0], [3.0, 2.0]], None,
     lambda x, b: (lambda r: r.values + 1000 * r.indices)(torch.sort(x, dim=0, descending=True, stable=True))),
    ("argsort", "x * cast(argsort(x), f64)", [2.0, -1.0, 5.0, 0.0], None, lambda x, b: x * torch.argsort(x)),
    ("topk, largest and least", "v_, i_ = topk(x, 2); w_, j_ = topk(x, 2, largest=false); "
     "v_ + 1000 * cast(i_, f64) + 3 * w_ + 100 * cast(j_, f64)", [[1.0, 5.0, 3.0, 2.0], [-1.0, 7.0, 8.0, 0.5]], None,
     lambda x, b: (lambda r, q: r.values + 1000 * r.indices + 3 * q.values + 100 * q.indices)(
         torch.topk(x, 2), torch.topk(x, 2, largest=False))),
    ("einsum of attention", 'einsum("bhqd,bhkd->bhqk", x, b)', [[[[1.0, 2.0], [3.0, -1.0]]]], [[[[0.5, 1.0], [2.0, 0.0], [1.0, 1.0]]]],
     lambda x, b: torch.einsum("bhqd,bhkd->bhqk", x, b)),
    ("einsum: outer, sums, implicit", 'einsum("i,j->ij", x, b) + einsum("ij->j", einsum("i,j", x, b)) + einsum("j", b)',
     [1.0, 2.0, 3.0], [4.0, 5.0],
     lambda x, b: torch.einsum("i,j->ij", x, b) + torch.einsum("ij->j", torch.einsum("i,j", x, b)) + torch.einsum("j", b)),
    ("einsum with a batch axis inside", 'einsum("tec,tm->ecm", x, b)', [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]],
     [[0.5, -1.0, 2.0], [1.5, 0.0, 1.0]], lambda x, b: torch.einsum("tec,tm->ecm", x, b)),
]

# Every elementwise op, binary op and reduction at NaN, +-inf and +-0 (and finite values
# beside them), generated: where PyTorch has NaN or an infinity, so must gradc. Left
# out: logaddexp of two equal infinities (gradc's derivative is 1/2, its limit; PyTorch's
# NaN: docs/language.md) and var's derivative beside an infinite element (gradc's NaN,
# PyTorch's +-inf: the value is NaN either way).
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.5, 3.0]
UNARY = {"neg": lambda x: -x, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
         "abs": torch.abs, "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "sin": torch.sin,
         "cos": torch.cos, "square": torch.square, "reciprocal": torch.reciprocal, "erf": torch.erf, "silu": F.silu,
         "softplus": F.softplus, "gelu": F.gelu, "log1p": torch.log1p, "expm1": torch.expm1, "log_sigmoid": F.logsigmoid}
ROWS += [(f"special values: {k}", f"{k}(x)", SPECIAL, None, lambda x, b, f=f: f(x)) for k, f in UNARY.items()]
ROWS += [("special values: gelu tanh", "gelu(x, approximate=tanh)", SPECIAL, None, lambda x, b: F.gelu(x, approximate="tanh")),
         ("special values: clamp", "clamp(x, min=-1, max=2)", SPECIAL, None, lambda x, b: torch.clamp(x, -1, 2))]
# A composite's derivative is one factor, g * f'(x), as PyTorch's backward kernels: under
# an infinite cotangent (a loss that overflowed) an infinity, not the NaN of a sum of its
# ops' terms (inf - inf).
FAR = [-800.0, -30.0, -3.0, -1.0, -0.0, 0.0, 0.5, 2.0, 2.6, 30.0, 800.0]
COMPOSITES = {"silu": ("silu(x)", F.silu), "gelu": ("gelu(x)", F.gelu),
              "gelu tanh": ("gelu(x, approximate=tanh)", lambda x: F.gelu(x, approximate="tanh")),
              "softplus": ("softplus(x)", F.softplus),
              "softplus beta=2": ("softplus(x, beta=2, threshold=5)", lambda x: F.softplus(x, beta=2, threshold=5)),
              "log_sigmoid": ("log_sigmoid(x)", F.logsigmoid)}
ROWS += [(f"infinite cotangent: {k}", f"{e} * (1.0 / 0.0)", FAR + SPECIAL, None, lambda x, b, f=f: f(x) * INF)
         for k, (e, f) in COMPOSITES.items()]
ROWS.append(("infinite cotangent: logaddexp", "logaddexp(x, b) * (1.0 / 0.0)", FAR + [INF, NAN, 1.0],
             [1.0, -30.0, 0.0, 2.0, 0.0, -1.0, 0.5, 1000.0, -1000.0, 4.0, 1.0, 1.0, 1.0, NAN],
             lambda x, b: torch.logaddexp(x, b) * INF))
PAIRS = [(a, c) for a in SPECIAL for c in SPECIAL]
BINARY = {"add": ("x + b", torch.add), "sub": ("x - b", torch.sub), "mul": ("x * b", torch.mul), "div": ("x / b", torch.div),
          "pow": ("pow(x, b)", torch.pow), "maximum": ("maximum(x, b)", torch.maximum),
          "minimum": ("minimum(x, b)", torch.minimum), "logaddexp": ("logaddexp(x, b)", torch.logaddexp),
          "where": ("where(x > b, x, b)", lambda x, b: torch.where(x > b, x, b)),
          "clamp by a tensor": ("clamp(x, min=b)", lambda x, b: torch.clamp(x, min=b))}
for k, (e, f) in BINARY.items():
    pairs = [(a, c) for a, c in PAIRS if not (k == "logaddexp" and math.isinf(a) and a == c)]
    ROWS.append((f"special values: {k}", e, [a for a, _ in pairs], [c for _, c in pairs], lambda x, b, f=f: f(x, b)))
SPECIAL_ROWS = [[NAN, 1.0, 2.0], [INF, 1.0, 2.0], [-INF, 1.0, 2.0], [INF, -INF, 0.0], [-INF, -INF, -INF], [INF, INF, 1.0],
                [0.0, -0.0, 0.0], [1.0, 3.0, 3.0]]
LABELS = [0, 1, 2, 0, 1, 2, 0, 1]
REDUCTIONS = {
    "sum": ("sum(x, axis=-1)", lambda x: x.sum(-1)), "mean": ("mean(x, axis=-1)", lambda x: x.mean(-1)),
    "max": ("max(x, axis=-1)", lambda x: x.amax(-1)), "min": ("min(x, axis=-1)", lambda x: x.amin(-1)),
    "logsumexp": ("logsumexp(x, axis=-1)", lambda x: torch.logsumexp(x, -1)),
    "softmax": ("softmax(x)", lambda x: F.softmax(x, -1)), "log_softmax": ("log_softmax(x)", lambda x: F.log_softmax(x, -1)),
    "std": ("std(x, axis=-1)", lambda x: torch.std(x, -1)),
    "normalize": ("normalize(x)", lambda x: F.normalize(x, dim=-1)),
    "layer_norm": ("layer_norm(x)", lambda x: F.layer_norm(x, (3,))),
    "rms_norm": ("rms_norm(x)", lambda x: x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6)),
    "cumsum": ("cumsum(x, axis=1)", lambda x: torch.cumsum(x, 1)),
    "sort": ("v_, i_ = sort(x); v_ + 1000 * cast(i_, f64)",
             lambda x: (lambda r: r.values + 1000 * r.indices)(torch.sort(x, stable=True))),
    "topk": ("v_, i_ = topk(x, 2); v_ + 1000 * cast(i_, f64)", lambda x: (lambda r: r.values + 1000 * r.indices)(torch.topk(x, 2))),
    "argmax": ("x * cast(expand_dims(argmax(x, axis=-1), 1), f64)", lambda x: x * torch.argmax(x, -1, keepdim=True)),
    "cross_entropy": (f"cross_entropy(x, {LABELS})", lambda x: F.cross_entropy(x, torch.tensor(LABELS))),
    "binary_cross_entropy_with_logits": ("binary_cross_entropy_with_logits(x, full([8, 3], 0.25, dtype=f64))",
                                         lambda x: F.binary_cross_entropy_with_logits(x, torch.full_like(x, 0.25))),
}
ROWS += [(f"special values: {k}", e, SPECIAL_ROWS, None, lambda x, b, f=f: f(x)) for k, (e, f) in REDUCTIONS.items()]
ROWS.append(("special values: var", "var(x, axis=-1)", [r for r in SPECIAL_ROWS if not any(map(math.isinf, r))], None,
             lambda x, b: torch.var(x, -1)))



def dg_literal(v):
    if isinstance(v, list):
        return "[" + ", ".join(dg_literal(e) for e in v) + "]"
    if v == INF:
        return "1.0 / 0.0"
    if v == -INF:
        return "-1.0 / 0.0"
    if v != v:
        return "0.0 / 0.0"
    return repr(float(v))


def shape(v):
    s = []
    while isinstance(v, list):
        s.append(len(v))
        v = v[0]
    return s


def same(a, b):
    if math.isnan(b):
        return math.isnan(a)
    if math.isinf(b):
        return a == b
    return math.isfinite(a) and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def main():
    gradc, work = sys.argv[1], sys.argv[2]
    shutil.rmtree(work, ignore_errors=True)  # a scratch folder: an earlier run's files would be inputs
    os.makedirs(work, exist_ok=True)
    import numpy as np
    failed = 0
    print(f"{'case':<36} {'backend':<8} {'value':<8} {'gradient':<8}")
    # Every case is one part of one program (its names numbered: x3, y3, dx3), so each
    # backend compiles and runs it once.
    os.makedirs(work, exist_ok=True)
    src, outs, wants = ["world 1"], [], []
    for k, (name, expr, x, b, fn) in enumerate(ROWS):
        xt = torch.tensor(x, requires_grad=True)
        bt = torch.tensor(b, requires_grad=True) if b is not None else None
        y = fn(xt, bt)
        c = torch.arange(1, y.numel() + 1, dtype=torch.float64).reshape(y.shape)
        (y * c).sum().backward()
        want = {f"y{k}": y.detach().numpy().ravel(), f"dx{k}": xt.grad.numpy().ravel()}
        if bt is not None:
            want[f"db{k}"] = bt.grad.numpy().ravel()
        wants.append(want)
        np.save(os.path.join(work, f"x{k}.npy"), np.array(x, dtype=np.float64))
        src.append(f"input x{k} : f64[{', '.join(map(str, shape(x)))}]")
        if b is not None:
            np.save(os.path.join(work, f"b{k}.npy"), np.array(b, dtype=np.float64))
            src.append(f"input b{k} : f64[{', '.join(map(str, shape(b)))}]")
        ys = list(y.shape)
        # x is x3 in case 3, and so are its own names (v_ is v_3); a case may bind names
        # first, with statements before a `;`
        named = re.sub(r"\b([xb]|[a-z]+_)(?![\w\"])", lambda m: m.group(1) + str(k), expr).split("; ")
        src += named[:-1]
        src.append(f"y{k} = {named[-1]}")
        src.append(f"c{k} = reshape(cast(iota({max(1, y.numel())}) + 1, f64), [{', '.join(map(str, ys))}])")
        src.append(f"dx{k}{f', db{k}' if b is not None else ''} = grad(sum(y{k} * c{k}), x{k}{f', b{k}' if b is not None else ''})")
        outs += list(want)
    src.append(f"output {', '.join(outs)}")
    path = os.path.join(work, "edges.dg")
    with open(path, "w") as f:
        f.write("\n".join(src) + "\n")
    for backend in ("interp", "native"):
        p = subprocess.run([gradc, "run", path, f"--inputs={work}", "--format=json", f"--backend={backend}"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{path} {backend:<8} FAILED: {p.stderr.strip()}")
            failed += len(ROWS)
            continue
        got = json.loads(p.stdout)["ranks"][0]["outputs"]
        for (name, *_), want in zip(ROWS, wants):
            verdict = {}
            for k, w in want.items():
                g = [float(v) for v in got[k]["data"]]
                bad = [i for i, (a, e) in enumerate(zip(g, w)) if not same(a, float(e))]
                verdict[k.rstrip("0123456789")] = "ok" if not bad and len(g) == len(w) else \
                    f"element {bad[0] if bad else '?'}: {g} against {list(w)}"
            ok = all(v == "ok" for v in verdict.values())
            failed += not ok
            grads = "ok" if all(verdict[k] == "ok" for k in verdict if k != "y") else "; ".join(
                f"{k} {v}" for k, v in verdict.items() if k != "y" and v != "ok")
            print(f"{name:<36} {backend:<8} {verdict['y'] if verdict['y'] == 'ok' else 'y ' + verdict['y']:<8} {grads}")
    print(f"{len(ROWS)} cases on 2 backends: {'all equal PyTorch' if not failed else f'{failed} differ from PyTorch'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
