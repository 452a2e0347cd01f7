"""examples/gpt_block.dg and examples/moe_top2.dg against PyTorch in float64: the same
inputs (written here with NumPy, one folder per rank), the whole model written as a
PyTorch user writes it in one process (torch.einsum, torch.topk, torch.cumsum,
masked_fill with -inf), its objective the mean of the ranks' losses that the programs'
grad(..., mode=mean) differentiates, and every rank's loss and gradients compared with
gradc's (its interpreter; codegen.test holds every backend to it).

usage: models_torch.py GRADC WORKDIR   (exit 1 when a value differs)
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")
RTOL = 2e-4  # the programs run in f32; the reference in f64


def run_gradc(gradc, name, folder, ranks):
    """Writes each rank's inputs (`ranks[r]`: name -> array) and runs the example on them."""
    for r, inputs in enumerate(ranks):
        os.makedirs(os.path.join(folder, f"rank{r}"), exist_ok=True)
        for k, v in inputs.items():
            np.save(os.path.join(folder, f"rank{r}", f"{k}.npy"), v)
    p = subprocess.run([gradc, "run", os.path.join(EXAMPLES, name), f"--inputs={folder}", "--format=json",
                        "--backend=interp"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{name}: gradc run failed: {p.stderr}")
    return [{k: np.array(v["data"], dtype=np.float64).reshape(v["shape"]) for k, v in rank["outputs"].items()}
            for rank in json.loads(p.stdout)["ranks"]]


def compare(name, got, want):
    """got, want: per rank, output name -> array. Returns the largest error relative to
    each value's largest magnitude."""
    worst = 0.0
    for r, (g, w) in enumerate(zip(got, want)):
        if not float(g["err"]) <= 1e-5:  # the program's own check: sharded against whole
            sys.exit(f"{name}: rank {r}: err is {float(g['err'])}")
        for k, ref in w.items():
            ref = np.asarray(ref, dtype=np.float64)
            if g[k].shape != ref.shape:
                sys.exit(f"{name}: rank {r}: {k} has shape {g[k].shape}, PyTorch's {ref.shape}")
            scale = max(1e-3, float(np.abs(ref).max()))
            err = float(np.abs(g[k] - ref).max()) / scale
            if not err <= RTOL:
                sys.exit(f"{name}: rank {r}: {k} differs from PyTorch's by {err:.3g} (relative to {scale:.3g})\n"
                         f"gradc:   {g[k].ravel()[:8]}\nPyTorch: {ref.ravel()[:8]}")
            worst = max(worst, err)
    return worst


def leaf(a):
    return torch.tensor(a, dtype=torch.float64, requires_grad=True)


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def gpt_block(gradc, work):
    dp, tp, T, D, H, F_ = 2, 2, 8, 16, 4, 32
    Dh, HL, FL, half = D // H, H // tp, F_ // tp, D // H // 2
    rng = np.random.default_rng(1)
    emb = rand(rng, 11, D, scale=0.5)
    W = {k: rand(rng, D, H, Dh, scale=0.25) for k in ("wq", "wk", "wv")}
    W["wo"] = rand(rng, H, Dh, D, scale=0.25)
    W["w1"] = rand(rng, D, F_, scale=0.25)
    W["w2"] = rand(rng, F_, D, scale=0.25)
    tokens = [rng.integers(0, 11, T).astype(np.int32) for _ in range(dp)]
    targets = [rng.integers(0, D, T).astype(np.int32) for _ in range(dp)]
    # tp rank j holds heads j*HL.., hidden units j*FL..
    shard = {"wq": lambda a, j: a[:, j * HL:(j + 1) * HL], "wk": lambda a, j: a[:, j * HL:(j + 1) * HL],
             "wv": lambda a, j: a[:, j * HL:(j + 1) * HL], "wo": lambda a, j: a[j * HL:(j + 1) * HL],
             "w1": lambda a, j: a[:, j * FL:(j + 1) * FL], "w2": lambda a, j: a[j * FL:(j + 1) * FL]}
    ranks = []
    for r in range(dp * tp):
        i, j = divmod(r, tp)
        ins = {"tokens": tokens[i], "targets": targets[i], "emb": emb}
        ins.update({k: np.ascontiguousarray(shard[k](W[k], j)) for k in W})
        ranks.append(ins)
    got = run_gradc(gradc, "gpt_block.dg", os.path.join(work, "gpt_block"), ranks)

    P = {k: leaf(v) for k, v in W.items()}
    E = leaf(emb)
    theta = torch.exp(torch.arange(half, dtype=torch.float64) * (-math.log(10000.0) / half))
    angle = torch.arange(T, dtype=torch.float64)[:, None] * theta[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], 1)[:, None, :]
    sin = torch.cat([angle.sin(), angle.sin()], 1)[:, None, :]

    def rope(x):
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    def loss_of(tok, tgt):
        x = E[torch.tensor(tok, dtype=torch.long)]
        h = F.layer_norm(x, (D,))
        q = rope(torch.einsum("td,dhe->the", h, P["wq"]))
        k = rope(torch.einsum("td,dhe->the", h, P["wk"]))
        v = torch.einsum("td,dhe->the", h, P["wv"])
        s = torch.einsum("qhe,khe->hqk", q, k) / math.sqrt(Dh)
        causal = torch.ones(T, T).tril().bool()
        p = F.softmax(s.masked_fill(~causal, -math.inf), -1)
        a = x + torch.einsum("qhe,hed->qd", torch.einsum("hqk,khe->qhe", p, v), P["wo"])
        y = a + F.gelu(F.layer_norm(a, (D,)) @ P["w1"]) @ P["w2"]
        return F.cross_entropy(y, torch.tensor(tgt, dtype=torch.long))

    losses = [loss_of(tokens[i], targets[i]) for i in range(dp)]
    (sum(losses) / dp).backward()  # mode=mean over=dp: the mean of the dp indices' losses
    want = []
    for r in range(dp * tp):
        i, j = divmod(r, tp)
        w = {"loss": losses[i].detach().numpy(), "demb": E.grad.numpy()}
        w.update({f"d{k}": shard[k](P[k].grad.numpy(), j) for k in W})
        want.append(w)
    return compare("gpt_block.dg", got, want)


def moe_top2(gradc, work):
    dp, ep, EL, S, D, F_ = 2, 2, 2, 8, 8, 16
    E, world = EL * ep, dp * ep
    C = 2 * S // E
    rng = np.random.default_rng(2)
    wg = rand(rng, D, E)
    w1, w2 = rand(rng, E, D, F_, scale=1 / 3), rand(rng, E, F_, D, scale=1 / 3)
    xs = [rand(rng, S, D) for _ in range(world)]
    targets = [rand(rng, S, D) for _ in range(world)]
    ranks = []
    for r in range(world):
        j = r % ep  # rank (dp, ep) holds experts j*EL..
        ranks.append({"x": xs[r], "target": targets[r], "wg": wg, "w1": w1[j * EL:(j + 1) * EL],
                      "w2": w2[j * EL:(j + 1) * EL]})
    got = run_gradc(gradc, "moe_top2.dg", os.path.join(work, "moe_top2"), ranks)

    Wg, W1, W2 = leaf(wg), leaf(w1), leaf(w2)
    X = [leaf(x) for x in xs]

    def layer(x, tgt):  # GShard's top-2 gating with capacity C, each expert run on its kept tokens
        probs = F.softmax(x @ Wg, -1)
        top, idx = torch.topk(probs, 2)
        gates = top / top.sum(1, keepdim=True)
        m1, m2 = F.one_hot(idx[:, 0], E).double(), F.one_hot(idx[:, 1], E).double()
        slot1 = ((torch.cumsum(m1, 0) - 1) * m1).sum(1)
        slot2 = ((torch.cumsum(m2, 0) - 1 + m1.sum(0)) * m2).sum(1)
        y = torch.zeros(S, D)
        for k, (slot, m) in enumerate(((slot1, m1), (slot2, m2))):
            keep = slot < C
            for s in range(S):
                if keep[s]:
                    e = int(idx[s, k])
                    y[s] = y[s] + gates[s, k] * (F.gelu(x[s] @ W1[e]) @ W2[e])
        aux = E * (probs.mean(0) * m1.mean(0)).sum()
        return ((y - torch.tensor(tgt)) ** 2).mean() + 0.01 * aux, 2 * S - int((slot1 < C).sum() + (slot2 < C).sum())

    results = [layer(X[r], targets[r]) for r in range(world)]
    (sum(l for l, _ in results) / world).backward()  # mode=mean: the mean of every rank's loss
    want = []
    for r in range(world):
        j = r % ep
        want.append({"loss": results[r][0].detach().numpy(), "dropped": np.array(results[r][1]),
                     "dwg": Wg.grad.numpy(), "dw1": W1.grad.numpy()[j * EL:(j + 1) * EL],
                     "dw2": W2.grad.numpy()[j * EL:(j + 1) * EL], "dx": X[r].grad.numpy()})
    dropped = sum(results[r][1] for r in range(world))
    if dropped == 0:
        sys.exit("moe_top2.dg: no token was dropped: the inputs do not test the capacity")
    return compare("moe_top2.dg", got, want), dropped


def main():
    gradc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    err = gpt_block(gradc, work)
    print(f"gpt_block.dg: loss and 7 gradients on 4 ranks equal PyTorch float64 (largest error {err:.1e} relative)")
    err, dropped = moe_top2(gradc, work)
    print(f"moe_top2.dg: loss, dropped choices ({dropped}) and 4 gradients on 4 ranks equal PyTorch float64 "
          f"(largest error {err:.1e} relative)")


if __name__ == "__main__":
    main()
