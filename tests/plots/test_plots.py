"""plots/: each figure function checked by the data it drew (the lines', bars' and images' arrays read back
from the Figure), against its input arrays, never by eye."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

from icl_race import plots
from icl_race.analysis.race import LossFit
from icl_race.analysis.survival import kaplan_meier
from icl_race.plots import cells, classification, compare, race, scale

# Ten first passages, three never reached (-1), censored at a budget of 1,000 steps.
T_S = np.array([120, 150, 150, 200, 260, 310, 400, -1, -1, -1])
BUDGET = 1000
STEPS_T = np.arange(1, 6) * 100
ACC_SxT = np.array(
    [
        [0.5, 0.6, 0.9, 0.95, 0.97],
        [0.5, 0.5, 0.6, 0.9, 0.40],
        [0.5, 0.5, 0.5, 0.5, 0.50],
        [0.4, 0.7, 0.9, 0.99, np.nan],  # retired: its NaN tail
    ]
)
CLASSES_S = np.array(["persistent", "transient", "censored", "persistent"])


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _km():
    t = np.where(T_S >= 0, T_S, BUDGET).astype(float)
    return kaplan_meier(t, T_S >= 0).to_json()


def _bars(ax):
    """(left, right, height) of each histogram bar (not of a translucent span such as a CI band)."""
    return np.array(
        [(p.get_x(), p.get_x() + p.get_width(), p.get_height()) for p in ax.patches if p.get_alpha() is None]
    )


def _vlines_x(ax):
    """The x of every vertical line across the axes (axvline: the same x at both ends)."""
    return [ln.get_xdata()[0] for ln in ax.lines if len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]]


def test_the_censored_histogram_counts_each_reached_seed_once_and_the_rest_in_the_never_bar():
    fig = plots.histogram(T_S, BUDGET, median=260.0, median_ci=[150.0, None])
    ax, never_ax = fig.axes
    bars = _bars(ax)
    hit = T_S[T_S >= 0]
    np.testing.assert_allclose(bars[:, 0], plots.log_edges(hit.astype(float))[:-1])  # the log-spaced bins
    assert bars[:, 2].sum() == hit.size
    expected, _ = np.histogram(hit, plots.log_edges(hit.astype(float)))
    np.testing.assert_array_equal(bars[:, 2], expected)
    assert [p.get_height() for p in never_ax.patches] == [3]
    assert _vlines_x(ax) == [BUDGET, 260.0]  # the censoring time, then the KM median
    spans = [p for p in ax.patches if p.get_alpha() == 0.1]
    assert len(spans) == 1  # the median's CI band, open above: drawn up to the censoring time
    assert spans[0].get_x() == pytest.approx(150.0) and spans[0].get_x() + spans[0].get_width() == pytest.approx(BUDGET)


def test_the_t_icl_histogram_is_the_censored_histogram_titled():
    fig = classification.t_icl_histogram(T_S, BUDGET)
    assert _bars(fig.axes[0])[:, 2].sum() == 7 and fig.axes[1].patches[0].get_height() == 3
    assert fig._suptitle.get_text() == "t_ICL over 10 seeds"


def test_a_km_step_starts_at_one_before_the_first_time_and_follows_the_survival():
    km = _km()
    _, ax = plt.subplots()
    x, s = plots.km_step(ax, km, "tab:blue", "KM")
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0], np.r_[km["t"][0] * 0.8, km["t"]])
    np.testing.assert_allclose(xy[:, 1], np.r_[1.0, km["survival"]])
    np.testing.assert_array_equal(xy, np.c_[x, s])
    assert km["survival"][-1] == pytest.approx(0.3)  # 3 of 10 never reached


def test_the_survival_curve_ticks_each_censored_time_at_the_survival_there():
    km = _km()
    fig = classification.survival_curve(km)
    ax = fig.axes[0]
    step, ticks = ax.lines[0].get_xydata(), ax.lines[1].get_xydata()
    np.testing.assert_allclose(ticks[:, 0], km["censored_t"])
    np.testing.assert_allclose(ticks[:, 1], [step[step[:, 0] <= t][-1, 1] for t in km["censored_t"]])
    assert [t.get_text() for t in ax.texts][:1] == ["10"]  # the numbers at risk: all 10 at the first time


def test_trajectories_draw_every_seed_and_each_outcomes_median():
    fig = classification.trajectories(STEPS_T, ACC_SxT, 1 - ACC_SxT, threshold=0.9, classes=CLASSES_S)
    icl_ax, iwl_ax = fig.axes
    drawn = [ln.get_xydata() for ln in icl_ax.lines if ln.get_label().startswith("_")]  # the unlabelled seeds
    order = [0, 3, 1, 2]  # persistent, then transient, then censored: OUTCOME_COLORS' order
    seeds = [d for d in drawn if len(d) == len(STEPS_T)][: len(order)]
    for d, s in zip(seeds, order):
        np.testing.assert_array_equal(d[:, 0], STEPS_T)
        np.testing.assert_array_equal(d[:, 1], ACC_SxT[s])
    medians = {ln.get_label().split(":")[0]: ln.get_ydata() for ln in icl_ax.lines if "median" in ln.get_label()}
    np.testing.assert_allclose(medians["persistent"], np.nanmedian(ACC_SxT[[0, 3]], 0))
    np.testing.assert_allclose(medians["transient"], ACC_SxT[1])
    np.testing.assert_allclose(medians["censored"], ACC_SxT[2])
    iwl = {ln.get_label().split(":")[0]: ln.get_ydata() for ln in iwl_ax.lines if "median" in ln.get_label()}
    np.testing.assert_allclose(iwl["transient"], 1 - ACC_SxT[1])
    assert 0.9 in _ys_of_hlines(icl_ax) and 0.9 not in _ys_of_hlines(iwl_ax)  # the threshold on ICL only


def _ys_of_hlines(ax):
    return [ln.get_ydata()[0] for ln in ax.lines if len(ln.get_ydata()) == 2 and ln.get_ydata()[0] == ln.get_ydata()[1]]


def test_recorded_curves_draw_each_curves_median_and_quartile_band():
    curves = {"icl_loss": ACC_SxT, "iwl_loss": 2 * ACC_SxT}
    fig = classification.recorded_curves(STEPS_T, curves)
    for ax, (name, v) in zip(fig.axes, curves.items()):
        q1, med, q3 = np.nanpercentile(v, [25, 50, 75], axis=0)
        np.testing.assert_allclose(ax.lines[0].get_xydata(), np.c_[STEPS_T, med])
        band = ax.collections[0].get_paths()[0].vertices
        for q in (q1, q3):  # the band's outline passes through both quartiles at every step
            for x, y in zip(STEPS_T, q):
                assert np.any(np.isclose(band[:, 0], x) & np.isclose(band[:, 1], y)), (name, x, y)
        assert ax.get_ylabel() == name


def test_the_acquisition_heatmap_shows_the_fractions_with_empty_cells_blank():
    frac = np.array([[0.0, 0.5, np.nan], [0.25, 1.0, 0.75]])
    fig = classification.acquisition_heatmap([100, 1000, 10000], [8, 16], frac)
    img = fig.axes[0].images[0].get_array()
    np.testing.assert_array_equal(img.mask, np.isnan(frac))
    np.testing.assert_array_equal(img.filled(-1), np.where(np.isnan(frac), -1, frac))
    assert sorted(t.get_text() for t in fig.axes[0].texts) == ["0.00", "0.25", "0.50", "0.75", "1.00"]


def test_the_compare_overlay_draws_each_groups_km_and_where_its_observation_ended():
    km_a = _km()
    km_b = kaplan_meier(np.array([300.0, 500, 700, 800]), np.array([True, True, True, False])).to_json()
    fig = compare.km_overlay([km_a, km_b], ["A", "B: lr=0.05"], [BUDGET, 800], "icl")
    ax = fig.axes[0]
    steps = [ln for ln in ax.lines if "(n=" in ln.get_label()]
    assert [ln.get_label() for ln in steps] == ["A (n=10)", "B: lr=0.05 (n=4)"]
    for ln, km in zip(steps, (km_a, km_b)):
        np.testing.assert_allclose(ln.get_ydata(), np.r_[1.0, km["survival"]])
        np.testing.assert_allclose(ln.get_xdata()[1:], km["t"])
    assert _vlines_x(ax) == [BUDGET, 800]
    assert _ys_of_hlines(ax) == [0.5]


def test_the_cells_small_multiples_draw_one_panel_per_cell_from_its_own_data():
    fig = cells.curves([("K=100", STEPS_T, ACC_SxT), ("K=200", STEPS_T, ACC_SxT[:2])], "icl_acc", "curves")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["K=100", "K=200"]
    np.testing.assert_allclose(visible[1].lines[0].get_ydata(), np.nanmedian(ACC_SxT[:2], 0))
    fig = cells.accuracies([("K=100", STEPS_T, ACC_SxT, CLASSES_S, 0.9)], "ICL accuracy", "acc")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), ACC_SxT[0])  # the first persistent seed
    assert 0.9 in _ys_of_hlines(ax)
    fig = cells.small_histograms([("K=100", T_S, BUDGET), ("K=200", T_S[:5], BUDGET)])
    hists = fig.axes[0::2]
    assert [_bars(a)[:, 2].sum() for a in hists] == [7, 5]
    assert [a.patches[0].get_height() for a in fig.axes[1::2]] == [3, 0]
    assert hists[0].get_title() == "K=100\n7 acquired, 3 censored"


def test_the_fall_survival_panels_are_each_cells_km():
    km = {**_km(), "acquired": 7}
    fig = cells.fall_survival([("K=100", km)], "falls")
    (ax,) = [a for a in fig.axes if a.get_visible()]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), np.r_[1.0, km["survival"]])
    assert ax.get_title() == "K=100\n7 of 10 acquired fell"


def test_the_loss_relation_plots_the_points_the_fit_and_the_theory_line():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 3.0, 40)
    y = 0.1 + 0.9 * x + rng.normal(0, 0.05, 40)
    fit = LossFit(4, 40, 0.95, x.tolist(), y.tolist(), slope=0.9, intercept=0.1)
    fig = race.loss_relation(fit)
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.collections[0].get_offsets(), np.c_[x, y])
    line, theory = ax.lines
    np.testing.assert_allclose(line.get_xdata(), np.linspace(x.min(), x.max(), 50))
    np.testing.assert_allclose(line.get_ydata(), 0.1 + 0.9 * line.get_xdata())
    np.testing.assert_array_equal(theory.get_ydata(), theory.get_xdata())


def test_the_exponent_against_width_puts_each_learning_rates_points_at_their_widths():
    width, lr = [64, 128, 64, 128], [0.1, 0.1, 0.05, 0.05]
    e, lo, hi = [0.9, 1.0, 1.1, 1.2], [0.8, 0.9, 1.0, 1.1], [1.0, 1.1, 1.2, 1.3]
    fig = scale.exponent_vs_width(width, lr, e, lo, hi, extra={"stored": (256, 1.05, 0.95, 1.15)})
    ax = fig.axes[0]
    points = {c.get_label(): c.lines[0].get_xydata() for c in ax.containers}  # each errorbar's data line
    np.testing.assert_array_equal(points["lr 0.1"], [[64, 0.9], [128, 1.0]])
    np.testing.assert_array_equal(points["lr 0.05"], [[64, 1.1], [128, 1.2]])
    np.testing.assert_array_equal(points["stored"], [[256, 1.05]])
    (bars,) = [c for c in ax.containers if c.get_label() == "lr 0.1"]
    segments = bars.lines[2][0].get_segments()  # the vertical error bars: from lo to hi at each width
    np.testing.assert_allclose([s[:, 1] for s in segments], [[0.8, 1.0], [0.9, 1.1]])
    assert _ys_of_hlines(ax) == [1.0]  # the theory's exponent


def test_png_bytes_is_a_png_and_closes_the_figure():
    fig = plots.histogram(T_S, BUDGET)
    data = plots.png_bytes(fig, dpi=30)
    assert data[:4] == b"\x89PNG" and not plt.fignum_exists(fig.number)
