"""Where a number was computed: package versions, the git commit and the devices. One helper, so that a
run's meta.json and `icl-race bench`'s header say it the same way."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path


def provenance() -> dict:
    """{"versions", "git_commit", "device", "cpu"}: the keys meta.json and bench's header carry. The CPU
    model matters beside the device: a seed's trajectory is bit-identical on one machine only."""
    return {"versions": versions(), "git_commit": git_commit(), "device": device_description(), "cpu": cpu_model()}


def cpu_model() -> str:
    """The host CPU's model and core count ("AMD EPYC, 2 cores"): Linux's /proc/cpuinfo, else the platform's."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def icl_race_version() -> str:
    """This package's version as installed (pyproject.toml's): what every output file records. Read here,
    not from `icl_race.__version__`, so that nothing inside the package imports its top (the notebook API
    there imports the runner)."""
    try:
        return metadata.version("icl-race")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("icl-race", "jax", "jaxlib", "flax", "numpy", "scipy", "matplotlib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def git_commit() -> str | None:
    try:
        r = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5
        )
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def device_description() -> str:
    import jax

    devs = jax.devices()
    return f"{len(devs)} x {devs[0].platform}:{devs[0].device_kind}"


def platform_of(device: object) -> str:
    """The platform of a `device_description` ("1 x cpu:cpu" -> "cpu"); "" for anything else."""
    return device.split(" x ", 1)[-1].split(":", 1)[0] if isinstance(device, str) and device else ""
