"""The `icl-race` command's entry (also `python -m icl_race`): a stop signal is one line and exit 130 /
143 from the first instant, not only once a run has installed its own handling. The commands import
jax, numpy and matplotlib lazily, and a SIGTERM during those imports would otherwise end the process
with no word; this module imports nothing heavy before the handler is in place."""

import signal
import sys


class _Stopped(BaseException):
    """SIGTERM outside a run's chunks (a run turns it into `signals.Interrupted` at a chunk boundary)."""


def _stop(signum, frame):
    raise _Stopped(signum)


def main(argv: list[str] | None = None) -> int:
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        from icl_race.cli import main as cli_main

        return cli_main(argv)
    except _Stopped:
        print("icl-race: stopped by SIGTERM; finished work is kept, rerun the command to go on", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:  # while importing the command line itself (cli.main handles it after)
        print("icl-race: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
