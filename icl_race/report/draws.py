"""The report's random draws: one SeedSequence (the report's --seed), one child per named section.

A statistic asks for its generator by the section's name and the cells it resamples
(`draws.rng("acquisition", *cells)`: run directory names, which do not change when other cells are
added); the child's spawn key is a hash of that name, so a bootstrap does not depend on which other
sections exist or in what order they are computed: adding, removing or reordering a section changes no
other number."""

from __future__ import annotations

import dataclasses
import zlib

import numpy as np


@dataclasses.dataclass(frozen=True)
class Draws:
    seed: int
    n_boot: int

    def rng(self, *name) -> np.random.Generator:
        key = zlib.crc32("/".join(map(str, name)).encode())
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(key,)))
