"""A sweep's swept lever as an axis: K* and the K = infinity median t_ICL side by side across the
groups of cells that differ in a field other than K and N (task.zipf_alpha, train.optimizer,
model.qk_init_scale, ...), so that K* per lever value reads like K* per N."""

from __future__ import annotations

import json

from icl_race.analysis.compare import pair_stats
from icl_race.analysis.draws import Draws
from icl_race.analysis.record import NotFitted
from icl_race.analysis.threshold import Logistic, Sigmoid
from icl_race.report import verdict as V
from icl_race.report.format import ci_text, num, order, p_value
from icl_race.report.sweep_sections import Scaling, Threshold


def _kstars(a: Logistic | NotFitted, s: Sigmoid | NotFitted) -> dict:
    """One N's K* by both estimators, for the lever table (None where not fitted)."""
    fa, fs = (a if isinstance(a, Logistic) else None), (s if isinstance(s, Sigmoid) else None)
    values = (fa and fa.kstar, fa and fa.kstar_ci, fa and fa.bracketed, fs and fs.kstar, fs and fs.kstar_ci)
    return dict(zip(("kstar", "kstar_ci", "bracketed", "paper_sigmoid_kstar", "paper_sigmoid_kstar_ci"), values))


def by_lever(
    thresholds: list[Threshold], scalings: list[Scaling], times: dict | None = None, draws: Draws | None = None
) -> dict:
    """K* and the K = infinity median t_ICL side by side across the groups of a sweep, keyed by the
    fields that tell the groups apart (a swept lever: task.zipf_alpha, train.optimizer, ...), so one
    table reads K* per lever value the way K* per N is read. Empty unless two or more groups differ.
    `times` maps (the group as sorted JSON, N) to that cell's censored (times, observed): each t_ICL row
    then carries its comparison with the first row of its N (the lever's first value): the median ratio
    (bootstrap from `draws`), the log-rank test and their verdict (`analysis.compare.pair_stats`)."""

    def rows(entries, Ns, value):
        fields = sorted(
            {k for e in entries for k in e.group if len({json.dumps(x.group.get(k), default=str) for x in entries}) > 1}
        )
        out = [{"lever": {k: e.group.get(k) for k in fields}, "N": N, **value(e, N)} for e in entries for N in Ns(e)]
        return {"fields": fields, "rows": sorted(out, key=lambda r: (r["N"], [order(r["lever"][k]) for k in fields]))}

    out = {}
    if len(thresholds) > 1:
        out["kstar"] = rows(
            thresholds,
            lambda t: t.N,
            lambda t, N: _kstars(t.acquisition[N].fit, t.paper_sigmoid[N]),
        )
    if len(scalings) > 1:

        def median(sc, N):
            p = next(p for p in sc.median_vs_N.per_N if p.N == N)
            return {
                "median_t_icl": p.median,
                "median_t_icl_ci": p.median_ci,
                "acquired": p.acquired,
                "n": p.n,
            }

        out["t_icl_kinf"] = rows(scalings, lambda sc: [p.N for p in sc.median_vs_N.per_N], median)
        if times is not None and draws is not None:
            _against_first(out["t_icl_kinf"]["rows"], scalings, times, draws)
    return out


def _against_first(rows: list[dict], scalings: list[Scaling], times: dict, draws: Draws) -> None:
    """Each row's t_ICL against the first row of the same N (None for that first row): `pair_stats`, each
    side's seeds resampled from its own generator, named by its group and N."""
    group = (
        {
            json.dumps({k: sc.group.get(k) for k in rows[0]["lever"]}, sort_keys=True, default=str): json.dumps(
                sc.group, sort_keys=True, default=str
            )
            for sc in scalings
        }
        if rows
        else {}
    )
    first: dict = {}
    for r in rows:
        key = (group[json.dumps(r["lever"], sort_keys=True, default=str)], r["N"])
        ref = first.setdefault(r["N"], key)
        boots = (draws.bootstrap("by_lever", *ref), draws.bootstrap("by_lever", *key))
        r["vs_first"] = None if ref == key else pair_stats(times[ref], times[key], boots)


def _table(title: str, table: dict, columns: list[str], cells) -> list[str]:
    """One lever table: N, the lever fields, then `columns` filled by `cells(row)`."""
    fields = table["fields"]
    return (
        [
            f"## {title} per {', '.join(fields)}",
            "",
            "| " + " | ".join(["N", *fields, *columns]) + " |",
            "|---|" + "---|" * (len(fields) + len(columns)),
        ]
        + [
            "| " + " | ".join([str(r["N"]), *(str(r["lever"][f]) for f in fields), *cells(r)]) + " |"
            for r in table["rows"]
        ]
        + [""]
    )


def markdown(lever: dict) -> list[str]:
    md = []
    if "kstar" in lever:
        # An unbracketed K* (no cell on one side of half the seeds acquiring) is an extrapolation of the fit.
        boot = "95% CI (bootstrap percentile)"
        md += _table(
            "K*",
            lever["kstar"],
            ["K* (logistic midpoint)", boot, "paper's sigmoid K*", boot, "bracketed"],
            lambda r: [
                num(r["kstar"]),
                ci_text(r["kstar_ci"]),
                num(r["paper_sigmoid_kstar"]),
                ci_text(r["paper_sigmoid_kstar_ci"]),
                str(r.get("bracketed", "n/a")),
            ],
        )
    if "t_icl_kinf" in lever:
        md += _table(
            "t_ICL at K = infinity",
            lever["t_icl_kinf"],
            [
                "seeds",
                "acquired",
                "KM median t_ICL",
                "95% CI (bootstrap percentile)",
                "median ratio to the first row of its N (95% CI)",
                "log-rank p",
                "verdict",
            ],
            lambda r: (
                [str(r["n"]), str(r["acquired"]), num(r["median_t_icl"]), ci_text(r["median_t_icl_ci"])]
                + _versus(r.get("vs_first"))
            ),
        )
        md += [V.RULE, ""]
    return md


def _versus(p) -> list[str]:
    """A row's ratio, log-rank p and verdict against the first row of its N ('-' for that row)."""
    if p is None:
        return ["-", "-", "-"]
    ratio = "not defined" if p.ratio.ratio is None else f"{num(p.ratio.ratio, '{:.3g}')} {V.ci(p.ratio)}"
    return [ratio, p_value(p.logrank.p), V.cell(p.verdict, "this row", "the first row")]
