"""A verdict of `analysis.compare.decide` in words: the sentence of `icl-race compare` and the short cell of
a sweep report's tables. One wording for one rule: a group is "sooner" only where the median ratio's CI
excludes 1 and the log-rank test agrees at alpha; "no clear difference" otherwise, saying when the two
tests disagree, and always with both numbers beside it."""

from __future__ import annotations

from icl_race.analysis.compare import ALPHA, PairStats, Verdict
from icl_race.report.format import num, p_value

RULE = (
    f"Verdict: a group is called sooner only where the median ratio's 95% CI excludes 1 and the log-rank "
    f'p <= alpha = {ALPHA:g} agree; otherwise no clear difference ("tests disagree" where one test sees a '
    "difference and the other does not), and none is called without a median ratio (a median not reached)."
)


def reaches(event: str) -> str:
    """'acquires ICL' for icl, 'reaches icl60' for another event."""
    return "acquires ICL" if event == "icl" else f"reaches {event}"


def ci(ratio) -> str:
    """The median ratio's CI: '[lo, hi]', an open end 'below' / 'beyond'."""
    if ratio.n_boot < 10:
        return "(no CI: fewer than 10 replicates)"
    lo, hi = ratio.ci  # an open end: the CI reaches replicates whose median is beyond the censoring time
    return f"[{'below' if lo is None else num(lo, '{:.3g}')}, {'beyond' if hi is None else num(hi, '{:.3g}')}]"


def logrank_text(p: PairStats) -> str:
    """'log-rank p 0.216 (> alpha 0.05)': the p with the side of alpha it falls on."""
    v = p.verdict
    if p.logrank.p is None:
        return "log-rank test not defined (no event in either group)"
    side = "<=" if v.logrank_rejects else ">"
    return f"log-rank p {p_value(p.logrank.p)} ({side} alpha {v.alpha:g})"


def sentence(p: PairStats, other: str, reference: str, event: str) -> str:
    """The verdict on `other` against `reference` in one sentence with the median ratio, its CI and the
    log-rank p: who is sooner (both tests agree), or "no clear difference" and, where they disagree, so."""
    v, r = p.verdict, p.ratio
    conf = f"{r.confidence:.0%} CI"
    ratio = f"median t_{event} ratio {other}/{reference} {num(r.ratio, '{:.3g}')} {ci(r)}"
    lr = logrank_text(p)
    if v.sooner is not None:
        sooner, later = (other, reference) if v.sooner == "other" else (reference, other)
        return f"{sooner} {reaches(event)} sooner than {later}: {ratio} ({conf} excludes 1) and {lr} agree"
    if v.reason == "ci only":
        return (
            f"No clear difference between {other} and {reference}, the two tests disagree: {ratio} ({conf} "
            f"excludes 1) but {lr}"
        )
    if v.reason == "log-rank only":
        return (
            f"No clear difference between {other} and {reference}, the two tests disagree: {lr} but {ratio} "
            f"({conf} includes 1)"
        )
    if v.reason == "neither":
        return f"No clear difference between {other} and {reference}: {ratio} ({conf} includes 1), {lr}"
    if v.reason == "no ci":
        return f"No clear difference called between {other} and {reference}: {ratio}, {lr}"
    return f"No median ratio between {other} and {reference} (a median not reached): {lr}"


def cell(v: Verdict, other: str = "this row", reference: str = "the reference") -> str:
    """The verdict in a table cell: '<other> sooner', '<reference> sooner', 'no clear difference' ('(tests
    disagree)' where that is why), or 'not called' where the rule has no median ratio or CI to read."""
    if v.sooner is not None:
        return f"{other if v.sooner == 'other' else reference} sooner"
    if v.reason in ("no ratio", "no ci"):
        return f"not called (no median {'ratio' if v.reason == 'no ratio' else 'ratio CI'})"
    return "no clear difference" + (" (tests disagree)" if v.disagree else "")
