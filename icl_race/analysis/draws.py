"""The package's one convention for random draws (bootstraps, jitter): every generator is
`generator(root, ...)`, a numpy `SeedSequence` rooted at the command's `--seed`, with a spawn key that
names the statistic drawing from it.

    generator(root)               default_rng(root): a statistic that is the only one drawing from its
                                  root (a study's analysis, a function's own `seed=`)
    generator(root, *names)       the child named by `names` (joined by "/", its spawn key the CRC-32 of
                                  that text): a report's sections (`Draws.rng`) and the cells
                                  each resamples, so adding, removing or reordering a section, or a cell
                                  of a sweep, changes no other section's numbers
    generator(root, child=i)      the i-th child, numpy's `SeedSequence(root).spawn(n)[i]`: `icl-race
                                  compare`'s groups, so a group's resamples do not depend on the others
    generator((root, a, b))       a root of several integers, `SeedSequence([root, a, b])`: a group named
                                  by numbers (the scale study's (width, lr in units of 1e-9))

Every form is `SeedSequence(root, spawn_key=key)` for some key, so the streams of one root are
independent of each other, and each is a fixed function of the root and its name: the same root and
name give the same numbers in every process. Two statistics given the same generator form and root on
purpose share their draws: `race.km_summary`'s replicates of conditions with equal seed counts resample
the same seed positions, which pairs the race's median ratios by seed id.

A command's `Draws` are its root (--seed) and replicate count (--boot); a statistic draws from the child
named by it and the cells it resamples (`draws.rng("acquisition", *cells)`). An estimator that bootstraps
for its caller (`analysis.threshold`) takes a `Bootstrap` (`Draws.bootstrap`): count, generator, confidence,
and `Bootstrap.replicates`, the one resampling of seeds with replacement that a statistic is recomputed on.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Sequence

import numpy as np


def spawn_key(*names: object) -> tuple[int, ...]:
    """The spawn key of the child named `names`: () for none, else the CRC-32 of "/".join(names)."""
    return (zlib.crc32("/".join(map(str, names)).encode()),) if names else ()


def generator(root: int | Sequence[int], *names: object, child: int | None = None) -> np.random.Generator:
    """The generator of the statistic named `names` (or the `child`-th spawned child) under `root`."""
    if child is not None:
        if names:
            raise ValueError("generator: give names or child, not both")
        return np.random.default_rng(np.random.SeedSequence(root, spawn_key=(child,)))
    if not names:
        return np.random.default_rng(np.random.SeedSequence(root))
    return np.random.default_rng(np.random.SeedSequence(root, spawn_key=spawn_key(*names)))


@dataclasses.dataclass(frozen=True)
class Bootstrap:
    """How an estimator resamples: n replicates drawn from rng (a `generator`), intervals at confidence."""

    n: int
    rng: np.random.Generator
    confidence: float = 0.95

    def replicates(self, statistic: Callable[..., object], *samples: np.ndarray) -> np.ndarray:
        """`statistic` of each of the n replicates: the samples' items (one per seed) resampled together with
        replacement, all n draws of indices at once (the same stream as n draws of one replicate each)."""
        size = len(samples[0])
        return np.array([statistic(*(s[i] for s in samples)) for i in self.rng.integers(0, size, (self.n, size))])


@dataclasses.dataclass(frozen=True)
class Draws:
    """A command's draws: the root of its generators (--seed) and its replicates per bootstrap (--boot)."""

    seed: int
    n_boot: int

    def rng(self, *names: object) -> np.random.Generator:
        return generator(self.seed, *names)

    def bootstrap(self, *names: object, most: int | None = None) -> Bootstrap:
        """n_boot replicates (at most `most`) from the generator named `names`."""
        return Bootstrap(self.n_boot if most is None else min(self.n_boot, most), self.rng(*names))
