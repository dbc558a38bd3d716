"""What the analyses of finished runs read of one: its typed config and its kept seeds' arrays.

`icl_race.rundir.Run` is the one implementation (a study hands the analyses the `Run`s it loaded);
analysis/ names it by this protocol instead of importing it, since analysis/ reads no files. Every
accessor is over the kept (not diverged) seeds, as the statistics use them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from icl_race.configbase import Config


class FinishedRun(Protocol):
    @property
    def cfg(self) -> Config: ...  # the typed config, every field of this version present

    @property
    def times(self) -> dict[str, np.ndarray]: ...  # event -> [S] first passages of every seed (kept or not)

    @property
    def curves(self) -> dict[str, np.ndarray]: ...  # probe -> [S, T, ...] of every seed

    @property
    def eval_steps(self) -> np.ndarray: ...  # [T]

    @property
    def budget(self) -> int: ...

    @property
    def steps_run(self) -> int: ...

    @property
    def kept(self) -> np.ndarray: ...  # [S] bool: not diverged

    @property
    def seed_ids(self) -> np.ndarray: ...  # [S] every seed's id

    def t(self, event: str | None = None) -> np.ndarray: ...  # [S_kept] first passages, -1 = not reached

    def curve(self, name: str) -> np.ndarray: ...  # [S_kept, T, ...]
