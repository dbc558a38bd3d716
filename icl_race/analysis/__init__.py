"""Statistics: pure functions on numpy arrays (numpy/scipy and diptest; no files, no figures, no jax).

survival      Kaplan-Meier curves and medians, the censoring rule, never-acquired fractions, censored tail fits
bimodality    dip test, bimodality coefficient, 1- vs 2-Gaussian mixture BIC, dequantization
threshold     acquisition curves vs log10 K, K* with bootstrap CIs, K*(N) slope, median t_ICL vs N
regression    linear-attention transition times, dwells, the escaping heads against Eq. 21
memorization  the MLP-only memorization kinetics (c1 tail, I_K(T), nu) and the minimal model's t_ICL
race          the transformer-side claims: loss relation, transience under L2, independence of the sub-circuits
regime        is ICL acquired abruptly: rise fraction, plateau, first passages over the ICL levels
outcome       each seed's class: persistent, recovered, falling, transient, censored, diverged
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
