"""The per-chunk progress line: elapsed time and the time left at the rate measured after compilation."""

import io
from types import SimpleNamespace

import numpy as np

from icl_race.run.progress import ProgressBar


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


def _line(bar, out, **p):
    chunk = dict(steps=1000, seeds=4, chunk_seeds=4, t_first={"icl": np.array([-1, -1, -1, -1])})
    bar(SimpleNamespace(**{**chunk, **p}))
    return out.getvalue().splitlines()[-1]


def test_the_rate_leaves_out_the_compilation_inside_a_chunk():
    times, compiled = iter([0.0, 12.0, 14.0]), iter([0.0, 10.0, 10.0])  # chunk 1 compiles for 10 of its 12 s
    out = io.StringIO()
    bar = ProgressBar("icl", stream=out, every=0.0, clock=lambda: next(times), compiled=lambda: next(compiled))
    first = _line(bar, out, step=100, chunk_steps=100, chunk_seconds=12.0)
    assert "| 200 seed-steps/s |" in first  # 4 seeds x 100 steps in the 2 s of training, not in 12 s
    assert "0h00m12s elapsed, <= 0h00m18s left" in first  # 900 steps at 2 s per 100
    second = _line(bar, out, step=200, chunk_steps=100, chunk_seconds=2.0)
    assert "| 200 seed-steps/s |" in second and "<= 0h00m16s left" in second


def test_the_time_left_counts_the_programs_still_to_compile():
    from icl_race.engine.chunks import chunk_plan

    plan = chunk_plan(1000, 100, 1, "log")  # periods 100, 200, 400, then the last 300 steps: four programs
    assert [period for _, period, _ in plan] == [100, 200, 400, 300]
    times, compiled = iter([0.0, 12.0, 26.0]), iter([0.0, 10.0, 20.0])  # each chunk compiles for 10 s
    out = io.StringIO()
    bar = ProgressBar(
        "icl", stream=out, every=0.0, clock=lambda: next(times), compiled=lambda: next(compiled), plan=plan
    )
    first = _line(bar, out, step=100, chunk_steps=100, chunk_seconds=12.0)
    assert "<= 0h00m48s left" in first  # 900 steps at 2 s per 100, and 3 programs of 10 s
    second = _line(bar, out, step=300, chunk_steps=200, chunk_seconds=14.0)
    assert "| 200 seed-steps/s |" in second
    assert "<= 0h00m34s left" in second  # 700 steps at (14 s - 10 s compiling) per 200, and 2 programs


def test_the_rate_counts_the_seeds_a_chunk_computed():
    """With retirement a chunk computes only its live seeds: the rate is the machine's throughput (2 live
    seeds x 100 steps in 2 s), not the run's 4 seeds as if all had trained."""
    out = io.StringIO()
    bar = ProgressBar("icl", stream=out, every=0.0, clock=iter([0.0, 2.0]).__next__, compiled=lambda: 0.0)
    t_first = {"icl": np.array([100, 100, -1, -1])}
    line = _line(bar, out, step=100, chunk_seeds=2, chunk_steps=100, chunk_seconds=2.0, t_first=t_first)
    assert "| 100 seed-steps/s |" in line and "ICL acquired 2/4 (50%) | 2/4 live |" in line


def test_the_line_shows_acquired_and_live_seeds_without_retirement_too():
    out = io.StringIO()
    bar = ProgressBar("icl", stream=out, every=0.0, clock=iter([0.0, 2.0]).__next__, compiled=lambda: 0.0)
    line = _line(bar, out, step=100, chunk_steps=100, chunk_seconds=2.0, t_first={"icl": np.array([100, -1, -1, -1])})
    assert "| ICL acquired 1/4 (25%) | 4/4 live |" in line
