"""Closed-form and reduced-ODE predictions that simulations are checked against (numpy/scipy, no jax)."""
