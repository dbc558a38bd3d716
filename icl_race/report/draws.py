"""The report's random draws: one root (the report's --seed), one named child per section.

A statistic asks for its generator by the section's name and the cells it resamples
(`draws.rng("acquisition", *cells)`: run directory names, which do not change when other cells are
added): `icl_race.analysis.draws.generator(seed, section, *cells)`, the package's one convention for
random draws (documented there), so a bootstrap does not depend on which other sections exist or in
what order they are computed: adding, removing or reordering a section changes no other number."""

from __future__ import annotations

import dataclasses

import numpy as np

from icl_race.analysis.draws import generator


@dataclasses.dataclass(frozen=True)
class Draws:
    seed: int
    n_boot: int

    def rng(self, section: str, *cells: object) -> np.random.Generator:
        return generator(self.seed, section, *cells)
