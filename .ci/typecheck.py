"""The type checker's gate: mypy over the package, held against a stated baseline that may only shrink.

    python .ci/typecheck.py            fails (exit 1) if any file has more errors of a kind than the baseline
    python .ci/typecheck.py --update   rewrites the baseline from today's errors (after fixing some)

The baseline (.ci/mypy-baseline.txt) counts errors per (file, error code), without line numbers, so that
moving code does not trip it and a new error of a kind that a file already had still does. mypy has no
baseline of its own; a counter is twenty lines, a dependency for it is not worth it."""

import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".ci" / "mypy-baseline.txt"
ERROR = re.compile(r"^(?P<file>[^:]+):\d+: error: .*\[(?P<code>[a-z-]+)\]$")


def errors() -> tuple[collections.Counter, str]:
    run = subprocess.run([sys.executable, "-m", "mypy", "icl_race"], cwd=ROOT, capture_output=True, text=True)
    found = collections.Counter(
        (m["file"], m["code"]) for line in run.stdout.splitlines() if (m := ERROR.match(line.strip()))
    )
    if run.returncode not in (0, 1) or (run.returncode == 1 and not found):
        sys.exit(f"mypy did not run: {run.stdout[-2000:]}{run.stderr[-2000:]}")
    return found, run.stdout


def read_baseline() -> collections.Counter:
    rows = [line.split() for line in BASELINE.read_text().splitlines() if line and not line.startswith("#")]
    return collections.Counter({(f, c): int(n) for f, c, n in rows})


def main() -> int:
    found, report = errors()
    if "--update" in sys.argv:
        lines = [f"{f} {c} {n}" for (f, c), n in sorted(found.items())]
        head = "# mypy errors per file and code that CI tolerates (.ci/typecheck.py); may only shrink\n"
        BASELINE.write_text(head + "\n".join(lines) + "\n")
        print(f"baseline: {sum(found.values())} errors in {len({f for f, _ in found})} files")
        return 0
    allowed = read_baseline()
    grown = {k: (n, allowed.get(k, 0)) for k, n in found.items() if n > allowed.get(k, 0)}
    if grown:
        print(report)
        for (f, c), (n, a) in sorted(grown.items()):
            print(f"{f}: {n} [{c}] errors, baseline {a}")
        return 1
    fixed = sum(allowed.values()) - sum(found.values())
    note = f"; {fixed} fewer than the baseline: run python .ci/typecheck.py --update" if fixed > 0 else ""
    print(f"mypy: {sum(found.values())} errors, none beyond the baseline (.ci/mypy-baseline.txt){note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
