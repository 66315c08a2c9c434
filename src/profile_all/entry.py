"""The `profile-all` command's entry point: Ctrl-C at any moment is one line and exit code
130, never a traceback and never silence, also while the command's own modules are still
being imported (the CLI imports Typer, Rich and pandas: a Ctrl-C in the first half second
once printed a 17-line KeyboardInterrupt traceback, and a little later Typer turned it into
a silent exit 130). While a run is on, the run's own stop handling has Ctrl-C instead."""

import signal
import sys

_interrupted = False


def _on_ctrl_c(signum: int, frame: object) -> None:
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def _say_interrupted() -> None:
    print("profile-all: interrupted (Ctrl-C)", file=sys.stderr)


def main() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background job keeps it
        signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        from profile_all.cli import main as command

        command()
    except KeyboardInterrupt:
        _say_interrupted()
        sys.exit(130)
    except SystemExit as ended:
        if _interrupted and ended.code == 130:  # Typer's silent exit for a KeyboardInterrupt
            _say_interrupted()
        raise
