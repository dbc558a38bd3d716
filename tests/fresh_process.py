"""Python run in a fresh interpreter, for the tests that a command or a load imports nothing it need not
(jax, a study, a program): this process has imported them all already, so only a new one can tell."""

import json
import subprocess
import sys
from collections.abc import Iterable


def imported_by(code: str, watched: Iterable[str]) -> list[str]:
    """The modules among `watched` that running `code` in a fresh interpreter imported; `code` must exit
    cleanly (the child's stderr is the failure's message)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(watched)!r} if m in sys.modules]))\n"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])
