"""Figures: data in, matplotlib Figure out (Agg backend; nothing is shown or saved here).

common          what every figure shares: the Agg backend, colours, a panel's labels and legend, PNG bytes
censored        the censored histogram (one, used by the run's histogram, the reports and their panels),
                one Kaplan-Meier step with its band
classification  the classification reports' figures (survival, bimodality, K*, t_ICL vs N, ...)
cells           a sweep's per-cell figures as small multiples (a panel per cell: fall times, trajectories,
                recorded curves, the histograms nearest K*)
regression      the linear-regression reports' figures (loss staircases, transition times, Eq. 21 heads)
race            the race analyses' figures (transience, loss relation, independence ablation)
compare         `icl-race compare`'s overlaid Kaplan-Meier curves

The shared helpers are also here, as `icl_race.plots.NAME`.
"""

import matplotlib

# The one setting of the package, before any of its modules imports pyplot: figures are drawn off screen.
matplotlib.use("Agg")

from icl_race.plots.censored import censored_histogram, histogram, histogram_axes, km_step, log_edges
from icl_race.plots.common import CENSORED, colors, label_panel, png_bytes, slope_ci_text
