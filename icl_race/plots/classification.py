"""The classification reports' figures: data in, matplotlib Figure out."""

from __future__ import annotations

import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from icl_race.analysis.survival import lognormal_sf, pareto_sf
from icl_race.plots.censored import histogram, km_step
from icl_race.plots.common import CENSORED, colors, label_panel, slope_ci_text


def t_icl_histogram(
    t_icl: np.ndarray, censor_at: float, median: float | None = None, median_ci: list | None = None, title: str = ""
) -> plt.Figure:
    """t_ICL on log-spaced bins, never-acquired seeds as a grey bar past the budget, the KM median
    and its CI as a line and a band."""
    return histogram(t_icl, censor_at, median, median_ci, title=title or f"t_ICL over {np.asarray(t_icl).size} seeds")


def _at_risk(km: dict, x: float) -> int:
    """Seeds still at risk just before time x (censored seeds at x are still there)."""
    t = np.asarray(km["t"], float)
    later = np.nonzero(t >= x)[0]
    return int(km["at_risk"][later[0]]) if later.size else 0


def km_panel(ax, km: dict, ms: float = 10) -> tuple[np.ndarray, np.ndarray]:
    """A Kaplan-Meier step with its band and a tick where seeds were censored (km has a time); returns
    the drawn (x, S)."""
    x, s = km_step(ax, km, "tab:blue", "Kaplan-Meier")
    ct = np.asarray(km["censored_t"], float)
    if ct.size:
        s_at = s[np.searchsorted(x, ct, side="right") - 1]
        ax.plot(ct, s_at, "|", color="black", ms=ms, mew=1.5, label=f"censored ({sum(km['censored_n'])} seeds)")
    return x, s


def survival_curve(
    km: dict,
    lognormal: dict | None = None,
    tail: dict | None = None,
    title: str = "",
    xlabel: str = "SGD steps (log scale)",
    ylabel: str = "P(ICL not yet acquired)",
) -> plt.Figure:
    """Kaplan-Meier S(t) with its 95% band, ticks where seeds were censored, the numbers at risk under the
    axis, and the fitted lognormal / power-law tail when given."""
    fig, ax = plt.subplots(figsize=(6.4, 4.3), layout="constrained")
    t = np.asarray(km["t"], float)
    if t.size:
        x, s = km_panel(ax, km)
        grid = np.geomspace(x[0], km["last_time"], 200)
        if lognormal and lognormal.get("ok"):
            ax.plot(
                grid,
                lognormal_sf(grid, lognormal["mu"], lognormal["sigma"]),
                color="tab:orange",
                ls="--",
                label=f"lognormal (mu={lognormal['mu']:.2f}, sigma={lognormal['sigma']:.2f})",
            )
        if tail and tail.get("ok"):
            g = grid[grid >= tail["xmin"]]
            s_at = float(np.interp(tail["xmin"], x, s)) if tail["xmin"] >= x[0] else 1.0
            # tail fits are conditional on t >= xmin: scale them by the KM survival there
            ax.plot(
                g,
                s_at * pareto_sf(g, tail["power_law"]["alpha"], tail["xmin"]),
                color="tab:red",
                ls="-.",
                label=f"power-law tail (alpha={tail['power_law']['alpha']:.2f}, xmin={tail['xmin']:,.0f})",
            )
    ax.axhline(0.5, color="black", lw=0.5, alpha=0.5)
    ax.set_xscale("log")
    ax.set_ylim(-0.02, 1.02)
    label_panel(ax, xlabel, ylabel, title or "Kaplan-Meier survival")
    if t.size:  # numbers at risk at five log-spaced times, as a row under the axis
        ax.xaxis.labelpad = 18
        for v in np.geomspace(t[0], km["last_time"], 5):
            ax.annotate(
                f"{_at_risk(km, v)}",
                (v, 0),
                xycoords=("data", "axes fraction"),
                xytext=(0, -30),
                textcoords="offset points",
                ha="center",
                fontsize=7,
                color="dimgray",
            )
        ax.annotate(
            "at risk",
            (0, 0),
            xycoords="axes fraction",
            xytext=(-8, -30),
            textcoords="offset points",
            ha="right",
            fontsize=7,
            color="dimgray",
        )
    return fig


# every class a kept seed can have (analysis.outcome.KEPT), in its order: a class missing here is not drawn
OUTCOME_COLORS = {
    "persistent": "tab:blue",
    "recovered": "tab:green",
    "falling": "tab:orange",
    "transient": "tab:red",
    "censored": "tab:gray",
}


def accuracy_panel(
    ax, steps: np.ndarray, acc: np.ndarray, classes: np.ndarray | None, max_lines: int = 200, lw: float = 2
) -> None:
    """A thin line per seed (at most max_lines per outcome), coloured by the seed's outcome when `classes` is
    given (analysis.outcome.KEPT; colours: OUTCOME_COLORS), and the median of each outcome."""
    acc = np.asarray(acc, float)
    classes = np.full(len(acc), "all seeds") if classes is None else np.asarray(classes)
    alpha = max(0.08, min(0.5, 8 / max(len(acc), 1)))
    for c in (*OUTCOME_COLORS, "all seeds"):
        rows = acc[classes == c]
        if not len(rows):
            continue
        color = OUTCOME_COLORS.get(c, "tab:blue")
        for row in rows[:max_lines]:
            ax.plot(steps, row, color=color, lw=lw / 4, alpha=alpha)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a retired seed's NaN tail
            ax.plot(steps, np.nanmedian(rows, 0), color=color, lw=lw, label=f"{c}: median of {len(rows)}")


def trajectories(
    eval_steps: np.ndarray,
    icl_acc: np.ndarray,
    iwl_acc: np.ndarray,
    threshold: float | None = None,
    max_lines: int = 200,
    title: str = "",
    classes: np.ndarray | None = None,
) -> plt.Figure:
    """ICL and IWL test accuracy against steps: a thin line per seed (at most max_lines), coloured by the
    seed's outcome when `classes` is given (analysis.outcome.KEPT; colours: OUTCOME_COLORS), and the
    median of each outcome."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained", sharey=True)
    steps = np.asarray(eval_steps)
    icl_acc, iwl_acc = np.asarray(icl_acc, float), np.asarray(iwl_acc, float)
    for ax, acc, name in (
        (axes[0], icl_acc, "ICL accuracy (novel items)"),
        (axes[1], iwl_acc, "IWL accuracy (training items)"),
    ):
        accuracy_panel(ax, steps, acc, classes, max_lines)
        if threshold is not None and name.startswith("ICL"):
            ax.axhline(threshold, color="black", ls=":", lw=1, label=f"threshold {threshold}")
        ax.set_title(name)
        ax.set_xlabel("SGD steps")
        ax.set_ylabel("test accuracy")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(frameon=False, fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return fig


def panel_grid(n: int, max_cols: int, panel_size: tuple[float, float], layout: str | None = "constrained"):
    """(fig, axes): n panels in rows of at most max_cols, the unused ones hidden."""
    cols = max(min(n, max_cols), 1)
    rows = max(math.ceil(n / cols), 1)
    fig, axes = plt.subplots(
        rows, cols, figsize=(panel_size[0] * cols, panel_size[1] * rows), layout=layout, squeeze=False
    )
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def quartile_panel(ax, eval_steps: np.ndarray, v: np.ndarray) -> None:
    """A [seeds, T] curve as its median over seeds and its interquartile band."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q1, med, q3 = np.nanpercentile(np.asarray(v, float), [25, 50, 75], axis=0)
    steps = np.asarray(eval_steps)
    ax.fill_between(steps, q1, q3, color="tab:blue", alpha=0.25, lw=0, label="25-75%")
    ax.plot(steps, med, color="tab:blue", lw=1.5, label=f"median of {len(v)} seeds")


def recorded_curves(eval_steps: np.ndarray, curves: dict[str, np.ndarray], title: str = "") -> plt.Figure:
    """One panel per recorded curve (losses, c-statistics): the median over seeds and the interquartile band."""
    fig, axes = panel_grid(len(curves), 3, (4.2, 3.0))
    for ax, (name, v) in zip(axes.flat, curves.items()):
        quartile_panel(ax, eval_steps, v)
        ax.set_xlabel("SGD steps")
        ax.set_ylabel(name)
        ax.set_title(name, fontsize=9)
        ax.legend(frameon=False, fontsize=7)
    if title:
        fig.suptitle(title)
    return fig


def _mixture_density(grid, mix):
    from scipy import stats

    out = {}
    if mix.get("one"):
        out["1 Gaussian"] = stats.norm.pdf(grid, mix["one"]["mean"], mix["one"]["sd"])
    if mix.get("two"):
        t = mix["two"]
        out["2 Gaussians"] = sum(w * stats.norm.pdf(grid, m, s) for w, m, s in zip(t["weights"], t["means"], t["sds"]))
    return out


def bimodality(
    log_t: np.ndarray, log_t_stats: dict, final_acc: np.ndarray, acc_stats: dict, title: str = ""
) -> plt.Figure:
    """Left: log10 t_ICL of the acquired seeds with the fitted 1- and 2-Gaussian densities. Right: final
    ICL accuracy of every seed. Each panel's title carries its dip-test p, BC and Delta BIC."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), layout="constrained")

    def label(st):
        if st.get("dip_p") is None:
            return "too few seeds"
        db = st["mixture"].get("delta_bic")
        text = f"dip p={st['dip_p']:.3g}, BC={st['bc']:.2f}, dBIC={'n/a' if db is None else f'{db:.1f}'}"
        return text + (f" (n = {st['n']}: underpowered)" if st.get("underpowered") else "")

    for ax, x, st, xl in (
        (axes[0], log_t, log_t_stats, "log10 t_ICL (acquired seeds)"),
        (axes[1], final_acc, acc_stats, "final ICL accuracy (all seeds)"),
    ):
        x = np.asarray(x, float)
        if x.size:
            ax.hist(
                x,
                bins=int(np.clip(round(2 * x.size ** (1 / 3)), 5, 30)),
                density=True,
                color="tab:blue",
                alpha=0.6,
                edgecolor="white",
            )
            if st.get("mixture") and st["mixture"].get("one"):
                grid = np.linspace(x.min() - 0.1 * np.ptp(x), x.max() + 0.1 * np.ptp(x), 300)
                for (name, dens), ls in zip(_mixture_density(grid, st["mixture"]).items(), ("--", "-")):
                    ax.plot(grid, dens, ls=ls, color="black", lw=1.2, label=name)
                ax.legend(frameon=False, fontsize=8)
        ax.set_xlabel(xl)
        ax.set_ylabel("density")
        ax.set_title(label(st), fontsize=9)
    if title:
        fig.suptitle(title)
    return fig


def acquisition_vs_K(curves: dict, title: str = "") -> plt.Figure:
    """Fraction of seeds acquiring ICL vs log10 K, one colour per N: points with Wilson CIs, the
    logistic fit and K* with its CI. `curves` maps N to threshold.acquisition_curve's result."""
    from scipy.special import expit

    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for (N, cur), color in zip(sorted(curves.items()), colors(len(curves))):
        cells = cur["cells"]
        x = np.array([c["log10_K"] for c in cells])
        f = np.array([c["fraction"] for c in cells])
        err = np.array([[c["fraction"] - c["ci"][0], c["ci"][1] - c["fraction"]] for c in cells]).T
        ax.errorbar(x, f, yerr=err, fmt="o", ms=4, color=color, capsize=2, label=f"N = {N}")
        if cur.get("ok"):
            grid = np.linspace(x.min() - 0.2, x.max() + 0.2, 200)
            ax.plot(grid, expit(cur["a"] * (grid - cur["b"])), color=color, lw=1.2)
            lo, hi = cur["log10_kstar_ci"]
            if lo is not None:
                ax.errorbar(
                    [cur["b"]],
                    [0.5],
                    xerr=[[cur["b"] - lo], [hi - cur["b"]]],
                    fmt="D",
                    color=color,
                    ms=6,
                    mec="black",
                    capsize=3,
                )
    ax.axhline(0.5, color="black", lw=0.5, alpha=0.5)
    ax.set_ylim(-0.03, 1.03)
    label_panel(
        ax,
        "log10 K (training items)",
        "fraction of seeds acquiring ICL",
        title or "Acquisition vs K (diamonds: K* with 95% CI)",
    )
    return fig


def _errorbar_ci(ax, x, y, cis, **kw):
    """Points with their CIs ([lo, hi] per point; None where an end is open, drawn without that arm)."""
    y = np.asarray(y, float)
    lo, hi = (np.array([c[i] if c[i] is not None else np.nan for c in cis], float) for i in (0, 1))
    ax.errorbar(x, y, yerr=[y - lo, hi - y], capsize=3, **kw)


def _fit_line(ax, fit: dict, x_lo: float, x_hi: float, **kw) -> np.ndarray:
    """The fitted line intercept + slope x over [x_lo, x_hi]; returns its x grid."""
    g = np.linspace(x_lo, x_hi, 50)
    ax.plot(g, fit["intercept"] + fit["slope"] * g, **kw)
    return g


def kstar_vs_N(
    N: ArrayLike, log10_kstar: ArrayLike, ci: list, fit: dict, ref_slope: float = 1 / 0.7, title: str = ""
) -> plt.Figure:
    """log10 K* against log10 N with bootstrap CIs, the fitted line and a reference line of slope 1/0.7."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    N = np.asarray(N, float)
    y = np.asarray(log10_kstar, float)
    _errorbar_ci(ax, np.log10(N), y, ci, fmt="o", color="tab:blue", label="K* (95% CI)")
    if fit.get("ok"):
        g = _fit_line(
            ax,
            fit,
            np.log10(N.min()) - 0.05,
            np.log10(N.max()) + 0.05,
            color="tab:blue",
            label=f"fit: slope {fit['slope']:.2f}{slope_ci_text(fit, '.2f')}",
        )
        mid = np.log10(N).mean()
        ax.plot(
            g,
            fit["intercept"] + fit["slope"] * mid + ref_slope * (g - mid),
            color="tab:red",
            ls="--",
            label=f"slope 1/nu = {ref_slope:.2f} (paper's prediction)",
        )
    label_panel(ax, "log10 N", "log10 K*", title or "Task-diversity threshold K*(N)")
    return fig


def t_icl_vs_N(N_seeds: list, t_seeds: list, censor_at: list, med: dict, title: str = "") -> plt.Figure:
    """Per-seed t_ICL against N (censored seeds as grey triangles at their censoring time), the KM
    median per N with its CI, and the least-squares line of the medians."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    rng = np.random.default_rng(0)
    allN = np.array(sorted(set(N_seeds)), float)
    width = 0.25 * (np.diff(allN).min() if allN.size > 1 else max(allN[0], 1) * 0.2)
    for n, t, c in zip(N_seeds, t_seeds, censor_at):
        t = np.asarray(t)
        jit = rng.uniform(-width, width, t.size)
        hit = t >= 0
        ax.scatter(n + jit[hit], t[hit], s=6, color="tab:blue", alpha=0.3, lw=0)
        if (~hit).any():
            ax.scatter(n + jit[~hit], np.full((~hit).sum(), c), s=14, marker="^", color=CENSORED, alpha=0.6, lw=0)
    pts = [p for p in med["per_N"] if p["median"] is not None]
    if pts:
        _errorbar_ci(
            ax,
            [p["N"] for p in pts],
            [p["median"] for p in pts],
            [p["median_ci"] for p in pts],
            fmt="s",
            color="black",
            ms=6,
            label="KM median (95% CI)",
        )
    lin = med.get("linear") or {}
    if lin.get("ok"):
        _fit_line(
            ax,
            lin,
            allN.min(),
            allN.max(),
            color="tab:red",
            label=f"median = {lin['intercept']:.3g} + {lin['slope']:.3g}{slope_ci_text(lin, '.3g')} N",
        )
    label_panel(
        ax,
        "N (tokens per sequence incl. query)",
        "t_ICL (SGD steps)",
        title or "t_ICL vs N at K = infinity (triangles: censored)",
    )
    return fig


def acquisition_heatmap(Ks: list, Ns: list, frac: np.ndarray, title: str = "") -> plt.Figure:
    """Fraction of seeds acquiring ICL on the (K, N) grid; empty cells are blank."""
    frac = np.asarray(frac, float)
    fig, ax = plt.subplots(
        figsize=(max(5.0, 0.45 * len(Ks) + 2.5), max(3.0, 0.45 * len(Ns) + 1.8)), layout="constrained"
    )
    im = ax.imshow(np.ma.masked_invalid(frac), origin="lower", aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(Ks)), [f"{k:,}" for k in Ks], rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(len(Ns)), [str(n) for n in Ns])
    if frac.size <= 400:
        for i in range(frac.shape[0]):
            for j in range(frac.shape[1]):
                if np.isfinite(frac[i, j]):
                    ax.text(
                        j,
                        i,
                        f"{frac[i, j]:.2f}",
                        ha="center",
                        va="center",
                        fontsize=6,
                        color="white" if frac[i, j] < 0.6 else "black",
                    )
    ax.set_xlabel("K")
    ax.set_ylabel("N")
    fig.colorbar(im, ax=ax, label="fraction acquiring ICL")
    ax.set_title(title or "Acquisition fraction over (K, N)")
    return fig


def balanced_vs_standard(rows: list[tuple[int, list, list[tuple[str, dict, dict]]]], title: str = "") -> plt.Figure:
    """One row of panels per N, one panel per metric; each panel shows the standard and the balanced
    condition against K with Wilson CIs. `rows` holds (N, Ks, panels), panels (ylabel, standard,
    balanced) with each condition {"p": [...], "lo": [...], "hi": [...]} aligned with Ks."""
    n_cols = max(len(r[2]) for r in rows)
    fig, axes = plt.subplots(
        len(rows), n_cols, figsize=(5.0 * n_cols, 3.3 * len(rows)), layout="constrained", squeeze=False
    )
    for row_axes, (N, Ks, panels) in zip(axes, rows):
        x = np.asarray(Ks, float)
        for ax, (ylabel, std, bal) in zip(row_axes, panels):
            for cond, name, color, m in ((std, "standard", "tab:blue", "o"), (bal, "balanced", "tab:orange", "s")):
                p, lo, hi = (np.asarray(cond[k], float) for k in ("p", "lo", "hi"))
                ax.errorbar(x, p, yerr=[p - lo, hi - p], fmt=m + "-", color=color, capsize=2, ms=4, label=name)
            ax.set_xscale("log")
            ax.set_xlabel("K")
            ax.set_ylabel(ylabel, fontsize=8)
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(f"N = {N}", fontsize=9)
            ax.legend(frameon=False, fontsize=8)
    fig.suptitle(title or "Balanced vs standard contexts (Fig 6E)")
    return fig
