"""PyTorch re-creations of the two reference pipelines, for `benchmarks/run.py` (benchmark-only; runs in a
separate Python 3.11 venv with torch 2.13 CPU). Written from the spec (classification-task.md §3, §10.16;
linear-attention.md §2.3, §3), not from the reference code. Prints one JSON object on stdout.

  cls   the in-context classification step of arXiv 2412.00104: one seed, sequences sampled per item on the
        host in a Dataset and collated by a DataLoader that is rebuilt every step, each item carrying the
        label map (so the batch holds a (128, K) int64 tensor) and an unused 63 x 63 matrix; the one-layer
        model with a fused qkv Linear(65 -> 195), full causal N x N attention, readout on the query; SGD.
  mlp   the MLP-only memorization model (63 -> 512 -> 512 -> 1) fed by a shuffled DataLoader over item
        positions, batch 128, SGD.
  la    one full-batch GD step of token-level ATTN_S (no 1/N, scores over all N+1 tokens, no mask) on P
        sequences, float32, as the linear-attention reference computes it.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

# ---- classification --------------------------------------------------------------------------------


class SeqDataset(Dataset):
    """Per-item host sampling as the reference does: ids below K, target forced into the context."""

    def __init__(self, items, labels, n_seq, N, rng):
        self.items, self.labels, self.n, self.N, self.rng = items, labels, n_seq, N, rng

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        K, N = len(self.labels), self.N
        ids = self.rng.integers(0, K, N)
        if not np.any(ids[:-1] == ids[-1]):
            ids[-1] = ids[self.rng.integers(0, N - 1)]
        lab = self.labels[ids]
        x = np.zeros((N, self.items.shape[1] + 2), np.float32)
        x[:, :-2] = self.items[ids]
        x[np.arange(N - 1), self.items.shape[1] + lab[:-1]] = 1.0
        y = np.float32(2 * lab[-1] - 1)
        # What the reference also collates each step: the whole label map and an unused D x D matrix.
        return torch.from_numpy(x), torch.tensor(y), torch.from_numpy(self.labels.astype(np.int64)), torch.zeros(63, 63)


class OneLayer(nn.Module):
    def __init__(self, E=65, W=512):
        super().__init__()
        self.ln = nn.LayerNorm(E)
        self.qkv = nn.Linear(E, 3 * E, bias=False)
        self.mlp = nn.Sequential(nn.Linear(E, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(), nn.Linear(W, 1))

    def forward(self, x):
        h = self.ln(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        n = x.shape[1]
        s = q @ k.transpose(1, 2)
        s = s.masked_fill(~torch.tril(torch.ones(n, n, dtype=torch.bool)), float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        return self.mlp(h[:, -1] + o[:, -1])[:, 0]


def steps_per_s(step, warmup, steps) -> float:
    """Calls of `step` per second after `warmup` untimed calls."""
    for _ in range(warmup):
        step()
    tic = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - tic)


def bench_cls(K, N, steps, warmup, model_only_steps):
    rng = np.random.default_rng(0)
    items = (rng.standard_normal((K, 63)) / np.sqrt(63)).astype(np.float32)
    labels = np.zeros(K, np.int8)
    labels[rng.permutation(K)[: K // 2]] = 1
    model = OneLayer()
    opt = torch.optim.SGD(
        [
            {"params": list(model.ln.parameters()) + list(model.qkv.parameters()), "weight_decay": 1e-10},
            {"params": model.mlp.parameters(), "weight_decay": 1e-10},
        ],
        lr=0.01,
    )

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.softplus(-y * model(x)).mean()
        loss.backward()
        opt.step()
        return loss

    def one_step():
        loader = DataLoader(SeqDataset(items, labels, 128, N, rng), batch_size=128, shuffle=False, num_workers=0)
        for x, y, _labelmap, _unused in loader:
            train_step(x, y)

    e2e = steps_per_s(one_step, warmup, steps)
    # Model step alone on a pre-built batch.
    x, y, _, _ = next(iter(DataLoader(SeqDataset(items, labels, 128, N, rng), batch_size=128)))
    alone = steps_per_s(lambda: train_step(x, y), warmup, model_only_steps)
    return {"K": K, "N": N, "end_to_end_steps_per_s": round(e2e, 2), "model_only_steps_per_s": round(alone, 2)}


# ---- MLP-only memorization model --------------------------------------------------------------------


class ItemDataset(Dataset):
    def __init__(self, items, labels, length):
        self.items, self.labels, self.length = items, labels, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        k = i % len(self.labels)  # the reference's dataset position -> item (position mod K)
        return torch.from_numpy(self.items[k]), torch.tensor(2.0 * self.labels[k] - 1.0)


def bench_mlp(K, steps, warmup):
    rng = np.random.default_rng(0)
    items = (rng.standard_normal((K, 63)) / np.sqrt(63)).astype(np.float32)
    labels = np.zeros(K, np.int8)
    labels[rng.permutation(K)[: K // 2]] = 1
    model = nn.Sequential(nn.Linear(63, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-10)
    loader = DataLoader(ItemDataset(items, labels, 60000), batch_size=128, shuffle=True, num_workers=0)
    it = iter(loader)

    def one_step():
        nonlocal it
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.softplus(-y.float() * model(x)[:, 0]).mean()
        loss.backward()
        opt.step()

    return {"K": K, "end_to_end_steps_per_s": round(steps_per_s(one_step, warmup, steps), 2)}


# ---- linear attention (token level) ----------------------------------------------------------------


class AttnS(nn.Module):
    """Token-level ATTN_S as in the reference: key/query Linear(D+1 -> H R), value Linear(D+1 -> H (D+1)),
    scores over all N+1 tokens, no 1/N, no mask, heads summed; prediction = y entry of the query output."""

    def __init__(self, D, H, R=1, init=1e-2):
        super().__init__()
        E = D + 1
        self.H, self.R, self.E = H, R, E
        self.key = nn.Linear(E, H * R, bias=False)
        self.query = nn.Linear(E, H * R, bias=False)
        self.value = nn.Linear(E, H * E, bias=False)
        for m in (self.key, self.query, self.value):
            nn.init.normal_(m.weight, std=init)

    def forward(self, X):  # X: (P, T, E)
        P, T, E = X.shape
        k = self.key(X).view(P, T, self.H, self.R).transpose(1, 2)  # P H T R
        q = self.query(X).view(P, T, self.H, self.R).transpose(1, 2)
        v = self.value(X).view(P, T, self.H, E).transpose(1, 2)  # P H T E
        s = k @ q.transpose(2, 3)  # P H T(m) T(n)
        out = (s.transpose(2, 3) @ v).sum(1)  # P T E
        return out[:, -1, -1]


def bench_la(P, D, H, N, steps, warmup):
    rng = np.random.default_rng(0)
    T = N + 1
    X = torch.from_numpy(rng.standard_normal((P, T, D + 1)).astype(np.float32))
    X[:, -1, -1] = 0.0
    y = torch.from_numpy(rng.standard_normal(P).astype(np.float32))
    model = AttnS(D, H)
    opt = torch.optim.SGD(model.parameters(), lr=0.02)

    def one_step():
        opt.zero_grad(set_to_none=True)
        loss = ((y - model(X)) ** 2).mean()
        loss.backward()
        opt.step()

    sec = 1 / steps_per_s(one_step, warmup, steps)
    return {"P": P, "D": D, "H": H, "N": N, "s_per_step": round(sec, 4), "steps_per_s": round(1 / sec, 4)}


# ---- torch.func ensemble (issue 42 item 7) ---------------------------------------------------------------


class QueryOneLayer(nn.Module):
    """icl-race's one-layer model: LayerNorm on every token, the query-only attention (the causal mask's
    last row: the query sees every token), bias-free E x E q/k/v, scale 1, MLP 65 -> 512 -> 512 -> 1."""

    def __init__(self, E=65, W=512):
        super().__init__()
        self.ln = nn.LayerNorm(E)
        self.q, self.k, self.v = (nn.Linear(E, E, bias=False) for _ in range(3))
        self.mlp = nn.Sequential(nn.Linear(E, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(), nn.Linear(W, 1))

    def forward(self, x):
        h = self.ln(x)
        hq = h[:, -1]
        s = torch.einsum("bne,be->bn", self.k(h), self.q(hq))
        o = self.v(torch.einsum("bn,bne->be", torch.softmax(s, dim=-1), h))
        return self.mlp(hq + o)[:, 0]


def bench_func(seeds, K=10_000, N=100, B=128, steps=5, warmup=1, lr=0.01):
    """The peer a PyTorch user would write for a seed ensemble: S models' parameters stacked
    (torch.func.stack_module_state), the loss's gradient vmapped over them (functional_call + grad), SGD
    as one stacked update; each step's batch for every seed sampled on the device in batched tensor ops
    (ids below K, the target forced into its context, one gather of token rows, label slots set)."""
    from torch.func import functional_call, grad, stack_module_state, vmap

    rng = np.random.default_rng(0)
    table = torch.zeros(K, 65)
    table[:, :63] = torch.from_numpy((rng.standard_normal((K, 63)) / np.sqrt(63)).astype(np.float32))
    labels = torch.from_numpy(rng.permutation(K) < K // 2).long()
    out = []
    for S in seeds:
        models = [QueryOneLayer() for _ in range(S)]
        params, buffers = stack_module_state(models)
        base = QueryOneLayer().to("meta")

        def loss(p, b, x, y):
            return nn.functional.softplus(-y * functional_call(base, (p, b), (x,))).mean()

        grads = vmap(grad(loss), in_dims=(0, 0, 0, 0))

        def batch():
            ids = torch.randint(0, K, (S, B, N))
            present = (ids[..., :-1] == ids[..., -1:]).any(-1)
            pos = torch.randint(0, N - 1, (S, B, 1))
            ids[..., -1] = torch.where(present, ids[..., -1], ids.gather(-1, pos)[..., 0])
            lab = labels[ids]
            x = table[ids]
            x[..., :-1, 63:] = nn.functional.one_hot(lab[..., :-1], 2).float()
            return x, 2.0 * lab[..., -1].float() - 1.0

        def one_step():
            nonlocal params
            x, y = batch()
            g = grads(params, buffers, x, y)
            params = {k: p - lr * g[k] for k, p in params.items()}

        rate = steps_per_s(one_step, warmup, steps)
        out.append({"seeds": S, "seed_steps_per_s": round(S * rate, 2), "steps": steps})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--parts", default="cls,mlp,la")
    ap.add_argument("--func-seeds", default="1,8,64", help="ensemble sizes of the torch.func part")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    parts = a.parts.split(",")
    out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    q = a.quick
    if "cls" in parts:
        out["cls"] = [bench_cls(K, 100, 10 if q else 30, 2, 10 if q else 30) for K in (10_000, 100_000)]
    if "mlp" in parts:
        out["mlp"] = [bench_mlp(K, 100 if q else 400, 10) for K in (10_000, 100_000)]
    if "la" in parts:
        grid = [(5000, 4, 5), (5000, 8, 9)] + ([] if q else [(80000, 4, 5), (80000, 8, 9)])
        # Several timed steps: with 3 at P = 5000, two runs an hour apart measured 0.16 and 0.46 s.
        out["la"] = [bench_la(P, D, H, 31, 10 if P <= 5000 else 3, 1) for P, D, H in grid]
    if "func" in parts:
        out["func"] = bench_func([int(v) for v in a.func_seeds.split(",")], steps=3 if q else 5)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
