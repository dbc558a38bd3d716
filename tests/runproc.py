"""`icl-race run` in a fresh process, for the tests that signal, kill or break a run from outside."""

import json
import os
import subprocess
import sys
from pathlib import Path


def set_args(raw: dict) -> list[str]:
    """A config dict as the CLI's --set arguments."""
    return [a for s, sec in raw.items() for k, v in sec.items() for a in ("--set", f"{s}.{k}={json.dumps(v)}")]


def start_run(raw: dict, out: Path, hook: str = "") -> subprocess.Popen:
    """Starts `icl-race run` of `raw` into `out` (on an empty base file beside it) through the command's
    own entry (`icl_race.__main__`); `hook` is Python run first in that process, e.g. to install a
    fault or a signal."""
    base = out.parent / "base.toml"
    base.touch()
    code = (
        f"{hook}\nimport sys\nfrom icl_race.__main__ import main\n"
        f"sys.exit(main(['run', {str(base)!r}, '--out', {str(out)!r}, '--quiet'] + {set_args(raw)!r}))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def killed_before_commit(cfg, out: Path) -> None:
    """`cfg` trained into `out` in this process and stopped just before its commit, every chunk written to
    live.npz: what a run killed before its commit leaves (its lock free, as its process is gone)."""
    import pytest

    from icl_race.run import live, runner

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(live, "EVERY_S", 0.0)  # every chunk written, however long the write took
        mp.setattr(live, "SHARE", 0)

        def killed(*args):
            raise RuntimeError("killed before the commit")

        mp.setattr(runner, "commit", killed)
        with pytest.raises(RuntimeError):
            runner.execute_run(cfg, out, progress=False)
