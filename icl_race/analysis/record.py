"""Typed results, the frozen dataclasses analysis functions return, and how report.json writes them. A fit
returns its estimates (a `Fitted`) or `NotFitted(reason)`: a reader narrows it with isinstance."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


def key(name: str) -> dict:
    """A record field's JSON name where it is not a Python name (`"above_0.75"`): its `metadata`."""
    return {"json": name}


OMIT_NONE = {"omit_none": True}  # a field's metadata: left out of the JSON while it is None
NOT_JSON = {"json": False}  # a field's metadata: never in the JSON (a statistic's replicates, a figure's points)
INLINE = {"inline": True}  # a field's metadata: its value's keys (a record's, a mapping's) written in its place


def record_json(rec) -> dict:
    """A typed record (a frozen dataclass) as report.json writes it: its fields in their order, each under
    its JSON name (`key`; none with NOT_JSON), nested records through their own `to_json` (in its place
    with INLINE). The records' field order is report.json's key order."""
    out: dict = {}
    for f in dataclasses.fields(rec):
        v = getattr(rec, f.name)
        if f.metadata.get("json") is not False and not (f.metadata.get("omit_none") and v is None):
            out |= plain(v) if f.metadata.get("inline") else {f.metadata.get("json", f.name): plain(v)}
    return out


def plain(v):
    """A value of a record as JSON-ready Python: nested records through their `to_json`, numpy as Python."""
    if hasattr(v, "to_json") and not isinstance(v, type):
        return plain(v.to_json())
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return record_json(v)
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return plain(v.tolist())
    return v.item() if isinstance(v, np.generic) else v


class Record:
    """A typed record: report.json writes its fields in order (`record_json`)."""

    def to_json(self) -> dict:
        return record_json(self)


class Fitted(Record):
    """A fit's estimates (a frozen dataclass that derives from it): written after {"ok": true}."""

    def to_json(self) -> dict:
        return {"ok": True, **record_json(self)}


@dataclasses.dataclass(frozen=True)
class NotFitted(Record):
    """Why a fit was not done (None: not said)."""

    reason: str | None = None

    def to_json(self) -> dict:
        return {"ok": False} | ({} if self.reason is None else {"reason": self.reason})


def finite(v):
    """JSON-ready data with each NaN or infinity as None, as a file holds it: JSON has no such number, and
    Python's json writes the token NaN, which strict readers (jq, JavaScript, Go) refuse. In memory a
    record keeps its NaN: code computes with it."""
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    return None if isinstance(v, float) and not math.isfinite(v) else v
