"""JAX's persistent compilation cache, on by default in a per-user directory.

Compilation is most of a small cell's wall time (42 of 44 s in a sweep cell of issue 24), and every
process compiles again: a second `make demo`, each submitit cell, each rerun. With the cache, a process
loads a program that an earlier one compiled (the same executable, so the same results).

    ICL_RACE_COMPILE_CACHE unset   $XDG_CACHE_HOME/icl-race/jax-<host> (default ~/.cache/...)
    ICL_RACE_COMPILE_CACHE=off     no persistent cache (also 0, false, no, none)
    ICL_RACE_COMPILE_CACHE=PATH    PATH/jax-<host>

JAX's own JAX_COMPILATION_CACHE_DIR, when set, wins (so do the tests' settings): this module then
changes nothing.

Why the <host> part. XLA compiles a CPU program for the CPU it runs on, and JAX's cache key names the
platform, not the CPU's instruction set: a home directory shared by the nodes of a cluster could hand a
program built for one node's CPU to another node (an illegal instruction, or other rounding). So each
kind of host gets its own directory, named by a hash of the machine type and the CPU's model and flags.

GPU kernels across processes (issue 42). On a GPU, XLA picks a GEMM or fusion kernel by timing the
candidates at compile time (autotuning); timings vary between processes, so a resumed run that compiled
again could take other kernels, with other rounding, than the run it continues. Two things keep the
choice: a program loaded from this cache is the executable the first process compiled, its kernels
included; and with the cache on, JAX (>= 0.4.36, `jax_persistent_cache_enable_xla_caches`, default
"xla_gpu_per_fusion_autotune_cache_dir") stores XLA's autotuning results in the cache directory's
xla_gpu_per_fusion_autotune_cache_dir/, so a program compiled again takes the kernels chosen before.
With the cache off, pin the choice instead: XLA_FLAGS=--xla_gpu_autotune_level=0 (heuristic kernels, no
timing; possibly slower). `record()` is what a run's meta.json keeps of this ("xla"): the cache and
autotuning directories and XLA_FLAGS, so that a resume on other terms can be told apart. On the CPU
XLA does not autotune: only XLA_FLAGS matter there.

Threat model. JAX's cache is code that the process runs: whoever can write the directory can make a run
execute any program (JAX's own warning). So the directory is private: made 0700, set back to 0700 when
found wider (created by an older version, or by hand), and not used at all when another user owns it
(one line on stderr; the run compiles instead). What is NOT checked: that an entry holds the program
its name says. JAX names an entry by a hash of the program and its compile options and loads the file
of that name as it is, so an entry copied or renamed over another one (by hand, or by a sync tool) is
run under the other's name: a batch-64 program copied over a batch-128 one gives batch 64's results,
labelled batch 128 (issue 43). The directory holds nothing else and icl-race never copies entries:
do not edit it by hand; to rule it out, delete it or run with ICL_RACE_COMPILE_CACHE=off. (JAX's
jax_compilation_cache_check_contents verifies each entry against a fresh compilation, which is the
compilation the cache exists to save.)
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
from collections.abc import Mapping
from pathlib import Path

ENV = "ICL_RACE_COMPILE_CACHE"
OFF = {"off", "0", "false", "no", "none"}
# Programs that compile in less than this are compiled again rather than stored: a small program loads
# no faster than it compiles (JAX's default is 1 s).
MIN_COMPILE_SECONDS = 0.5

_state: dict[str, Path | None] = {}


def host_tag() -> str:
    """What a compiled CPU program depends on: the machine type and the CPU's model and flags."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:  # one line of each kind: every core repeats them
            cpu = "".join(
                sorted({line for line in f if line.startswith(("model name", "flags", "Features", "CPU part"))})
            )
    except OSError:
        cpu = platform.processor()
    digest = hashlib.sha256(f"{platform.machine()}\n{cpu}".encode()).hexdigest()[:12]
    return f"jax-{platform.machine()}-{digest}"


def directory(env: Mapping[str, str] | None = None) -> Path | None:
    """The cache directory this process would use, or None when it is off (or left to JAX's own setting)."""
    env = os.environ if env is None else env
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    value = env.get(ENV)
    if value is not None and value.strip().lower() in OFF | {""}:
        return None
    base = Path(value).expanduser() if value else Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "icl-race"
    return base / host_tag()


def setup() -> Path | None:
    """Turn the cache on for this process (idempotent; call before the first compilation). Returns the
    directory, or None when it is off. A directory that cannot be made leaves the cache off: a run never
    fails for want of a cache."""
    if "dir" in _state:
        return _state["dir"]
    import jax

    path = directory()
    if path is not None and not jax.config.jax_compilation_cache_dir and private(path):
        jax.config.update("jax_compilation_cache_dir", str(path))
        if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
            jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    else:
        path = None
    _state["dir"] = path
    return path


def record() -> dict:
    """What decides which kernels this process runs (module docstring): meta.json's "xla"."""
    import jax

    on = jax.config.jax_enable_compilation_cache and jax.config.jax_compilation_cache_dir
    path: str | None = jax.config.jax_compilation_cache_dir if on else None  # ours, or JAX's own setting
    caches = jax.config.jax_persistent_cache_enable_xla_caches or ""
    autotune = path is not None and (caches == "all" or "xla_gpu_per_fusion_autotune_cache_dir" in caches)
    return {
        "compile_cache": path,
        "autotune_cache": str(Path(path) / "xla_gpu_per_fusion_autotune_cache_dir") if path and autotune else None,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def private(path: Path) -> bool:
    """Make `path` a directory only this user can read or write (0700), creating it or narrowing a wider
    mode; False when that cannot be done (another user owns it, or it cannot be made or changed)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        if st.st_uid != os.getuid():
            print(f"icl-race: {path} belongs to another user: the compile cache is not used", file=sys.stderr)
            return False
        if st.st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        return False
    return True
