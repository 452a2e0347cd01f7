"""scaled_dot_product_attention against PyTorch's (F.scaled_dot_product_attention, in
float64): a bool mask (gradc's i32) with a row where every key is masked (PyTorch
gives that row 0 and no gradient, not NaN), is_causal with more keys than queries, a
float mask with scale=, and a mask and batch axes that broadcast; values and the
gradients of q, k and v, on the interpreter and the native backend.

usage: attention.py GRADC WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

PROGRAM = """
input q : f64[2, 3, 4] = randn([2, 3, 4], seed=1)
input k : f64[2, 5, 4] = randn([2, 5, 4], seed=2)
input v : f64[2, 5, 6] = randn([2, 5, 6], seed=3)
input kb : f64[1, 5, 4] = randn([1, 5, 4], seed=4)
input m : i32[3, 5] = [[1, 1, 0, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]]
o1 = scaled_dot_product_attention(q, k, v, attn_mask=m)
o2 = scaled_dot_product_attention(q, k, v, is_causal=true)
o3 = scaled_dot_product_attention(q, k, v, attn_mask=cast(m, f64) * 0.5 - 1, scale=0.3)
o4 = scaled_dot_product_attention(q, kb, v, attn_mask=m[0])
loss = sum(o1 * o1) + sum(o2 * v[:, 0:3]) + sum(o3) + sum(o4 * o4)
dq, dk, dv, dkb = grad(loss, q, k, v, kb)
output q, k, v, kb, o1, o2, o3, o4, dq, dk, dv, dkb
"""


def main():
    gradc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "attention.dg")
    with open(path, "w") as f:
        f.write(PROGRAM)
    m = torch.tensor([[1, 1, 0, 1, 1], [0, 0, 0, 0, 0], [1, 0, 1, 1, 1]])
    worst = 0.0
    for backend in ("interp", "native"):
        out = os.path.join(work, backend)
        subprocess.run([gradc, "run", path, f"--backend={backend}", f"--outputs={out}", "--quiet"], check=True)
        got = {n[:-4]: torch.tensor(np.load(os.path.join(out, "rank0", n))) for n in os.listdir(os.path.join(out, "rank0"))}
        q, k, v, kb = (got[n].clone().requires_grad_() for n in ("q", "k", "v", "kb"))
        want = {
            "o1": F.scaled_dot_product_attention(q, k, v, attn_mask=m.bool()),
            "o2": F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "o3": F.scaled_dot_product_attention(q, k, v, attn_mask=m.double() * 0.5 - 1, scale=0.3),
            "o4": F.scaled_dot_product_attention(q, kb, v, attn_mask=m[0].bool()),
        }
        loss = (want["o1"] ** 2).sum() + (want["o2"] * v[:, 0:3]).sum() + want["o3"].sum() + (want["o4"] ** 2).sum()
        want.update(zip(("dq", "dk", "dv", "dkb"), torch.autograd.grad(loss, [q, k, v, kb])))
        for name, w in want.items():
            g = got[name]
            if g.shape != w.shape or not torch.allclose(g, w.detach(), rtol=1e-12, atol=1e-13) or g.isnan().any():
                sys.exit(f"{backend}: {name} differs from PyTorch's: {g} against {w}")
            worst = max(worst, float((g - w).abs().max()))
    print(f"scaled_dot_product_attention: 4 calls, values and 4 gradients on 2 backends equal PyTorch {torch.__version__.split('+')[0]}'s "
          f"(largest difference {worst:.1e})")


if __name__ == "__main__":
    main()
