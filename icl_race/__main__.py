"""The `icl-race` command's entry (also `python -m icl_race`): a stop signal is one line and exit 130 /
143 from the first instant, not only once a run has installed its own handling. The commands import
jax, numpy and matplotlib lazily, and a SIGTERM during those imports would otherwise end the process
with no word; this module imports nothing heavy before the handler is in place.

As the process's entry (`argv` None: the console script, `python -m icl_race`), a command that a signal
stopped ends with `os._exit` once its streams are flushed: everything it keeps is on disk by then (a
run's checkpoint at the stop is waited for and closed), and the interpreter's teardown of JAX's backends
and of orbax's threads took longer than the stop itself (1.7 s of 2.8 s after a chunk boundary on a CPU).
"""

import os
import signal
import sys


class _Stopped(BaseException):
    """SIGTERM outside a run's chunks (a run turns it into `signals.Interrupted` at a chunk boundary)."""


def _stop(signum, frame):
    raise _Stopped(signum)


STOPPED = (128 + signal.SIGINT, 128 + signal.SIGTERM)


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    if argv is None and code in STOPPED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
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
