"""The per-chunk progress line: elapsed time and the time left at the rate measured after compilation."""

import io
from types import SimpleNamespace

import numpy as np

from icl_race.progress import ProgressBar


def test_progress_line_gives_elapsed_and_time_left_from_the_post_compile_rate():
    times = iter([0.0, 12.0, 14.0, 30.0])  # construction; chunk 1 ends at 12 s (compiling); then 2 s per chunk
    out = io.StringIO()
    bar = ProgressBar("icl", stream=out, every=0.0, clock=lambda: next(times))
    chunk = dict(steps=1000, seeds=4, chunk_seeds=4, chunk_steps=100, chunk_seconds=2.0)
    bar(SimpleNamespace(step=100, t_first={"icl": np.array([-1, -1, -1, -1])}, **chunk))
    bar(SimpleNamespace(step=200, t_first={"icl": np.array([100, -1, -1, -1])}, **chunk))
    bar(SimpleNamespace(step=300, t_first={"icl": np.array([100, 300, -1, -1])}, **chunk))
    first, second, third = out.getvalue().splitlines()
    assert "0h00m12s elapsed, <= 0h00m18s left" in first  # 900 steps at the chunk's own 100 steps / 2 s
    assert "0h00m14s elapsed, <= 0h00m16s left" in second  # 800 steps at 100 steps / 2 s since chunk 1
    assert "0h00m30s elapsed, <= 0h01m03s left" in third  # 700 steps at 200 steps / 18 s
    assert "ICL acquired 1/4 (25%)" in second and "200 seed-steps/s" in second
