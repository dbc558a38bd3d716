"""Statistics of the race between ICL and IWL: pure functions on numpy arrays (numpy/scipy only).

survival    Kaplan-Meier curves and medians, never-acquired fractions, censored tail fits of t_ICL
bimodality  dip test, bimodality coefficient, 1- vs 2-Gaussian mixture BIC
threshold   acquisition curves vs log10 K, K* with bootstrap CIs, K*(N) slope, median t_ICL vs N
figures     plots: data in, matplotlib Figure out

Convention everywhere: t_ICL < 0 means "not acquired within the budget", i.e. right-censored at the
time the run stopped observing it (the budget); such seeds are kept, never dropped.
"""
