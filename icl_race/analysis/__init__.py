"""Statistics: pure functions on numpy arrays (numpy/scipy and diptest; no files, no figures, no jax).

survival      Kaplan-Meier curves and medians, the censoring rule, never-acquired fractions, censored tail fits
bimodality    dip test, bimodality coefficient, 1- vs 2-Gaussian mixture BIC, dequantization
threshold     acquisition curves vs log10 K, K* with bootstrap CIs, K*(N) slope, median t_ICL vs N
regression    linear-attention transition times, dwells, the escaping heads against Eq. 21
memorization  the MLP-only memorization kinetics (c1 tail, I_K(T), nu) and the minimal model's t_ICL
memorization_summary  those sweeps summarised per K and per (N, beta0), and the race's predicted K*(N)
race          the transformer-side claims per seed of a cell: loss relation, transience under L2, settling
race_summary  the race study's summaries of sweeps, and the independence ablation of the sub-circuits
levers        the levers on the race: beta0, transience, K* against settings, paired cells
scale         the scale bridge: which lr stands in for the paper's at a width; t_ICL(N) along the width axis
single_head   the pre-registered single-active-head test of linear attention's staircase
regime        is ICL acquired abruptly: rise fraction, plateau, first passages over the ICL levels
outcome       each seed's class: persistent, recovered, falling, transient, censored, diverged
events        the events a system records on the device, named and bounded once (no numpy or scipy)
design        adaptive designs: the K* posterior and its proposals, the median rule, when to stop
design_sim    the designs replayed on known truths (coverage, bias, cost against fixed grids)
design_replay the K* design replayed on a finished grid's seeds
compare       runs against a reference: KM median ratio with a seed-bootstrap CI, log-rank; the package's
              one median ratio (`median_ratio`, `ratio_of_boots`), which race's paired ratios use too, and
              the one verdict on two groups (`decide`: sooner only where the CI and log-rank agree)
draws         the one convention for random draws: `generator(root, *names)`; a command's `Draws` (--seed, --boot)
record        how a result record is written as JSON; a fit's estimates or `NotFitted(reason)`
runs          `FinishedRun`: what the summaries of the studies read of a `rundir.Run` (not imported)

Convention everywhere: a first-passage time < 0 means "not reached while the run observed it", i.e.
right-censored at the censoring time (`survival.censor_time`); such seeds are kept, never dropped.
The inputs are arrays read by `icl_race.rundir` (or its `Run`s, through `runs.FinishedRun`); the figures of these statistics are in `icl_race.plots`.
"""
