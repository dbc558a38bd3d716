"""The ICL accuracy ceiling under item noise epsilon (issue 14 item 4 (c); experiments/levers/README.md):
the accuracy an ideal copy rule reaches, which the 0.95 acquisition threshold must fit under.

Monte Carlo over sequences built as the task builds them at K = infinity: N - 1 distinct context items
mu ~ N(0, I/D) with i.i.d. labels, every occurrence noised as (mu + epsilon eta)/sqrt(1 + epsilon^2), the
query a noisy copy of one context item. Rules: the label of the context item nearest the query (inner
product), and a softmax attention on those inner products read out as the sign of the attended labels,
at its best inverse temperature (of BETAS).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BETAS = (5, 10, 20, 40, 80, 160)


@dataclass(frozen=True)
class CeilingRow:
    epsilon: float
    nearest: float  # accuracy of the nearest-item rule
    soft_best: float  # accuracy of softmax attention at its best beta
    soft_beta: int
    copy_found: float  # how often the query's copy is the nearest item


@dataclass(frozen=True)
class Ceiling:
    D: int
    N: int
    sequences: int
    rows: tuple[CeilingRow, ...]

    def text(self) -> str:
        return "\n".join(
            f"epsilon = {r.epsilon:g} (N = {self.N}, D = {self.D}): nearest-item rule {r.nearest:.3f} "
            f"(copy found in {r.copy_found:.3f}), softmax attention {r.soft_best:.3f} at beta {r.soft_beta}"
            for r in self.rows
        )


def copy_ceiling(epsilon=(0.0, 0.5, 1.0), D: int = 63, N: int = 32, sequences: int = 20000, seed: int = 0) -> Ceiling:
    """One row per epsilon, all drawn in turn from one generator seeded with `seed`."""
    rng = np.random.default_rng(seed)
    n, rows = sequences, []
    for eps in epsilon:
        mu_SxCxD = rng.normal(size=(n, N - 1, D)) / np.sqrt(D)

        def noisy(x):
            return (x + eps * rng.normal(size=x.shape) / np.sqrt(D)) / np.sqrt(1 + eps**2)

        ctx_SxCxD, q_SxD = noisy(mu_SxCxD), noisy(mu_SxCxD[:, 0])
        same_SxC = rng.random((n, N - 1)) < 0.5  # whether each item's label is the query's...
        same_SxC[:, 0] = True  # ...which its copy's (column 0) is
        score_SxC = np.einsum("scd,sd->sc", ctx_SxCxD, q_SxD)
        nearest = float(same_SxC[np.arange(n), score_SxC.argmax(1)].mean())
        soft = {}
        for beta in BETAS:
            w_SxC = np.exp(beta * (score_SxC - score_SxC.max(1, keepdims=True)))
            soft[beta] = float(((w_SxC * np.where(same_SxC, 1, -1)).sum(1) > 0).mean())
        best = max(soft, key=lambda b: soft[b])
        rows.append(
            CeilingRow(
                epsilon=float(eps),
                nearest=nearest,
                soft_best=soft[best],
                soft_beta=best,
                copy_found=float((score_SxC.argmax(1) == 0).mean()),
            )
        )
    return Ceiling(D=D, N=N, sequences=n, rows=tuple(rows))
