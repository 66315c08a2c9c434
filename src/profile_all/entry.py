"""The `profile-all` command's entry point: Ctrl-C at any moment is one line and exit code
130, never a traceback, also while the command's own modules are still being imported
(the CLI imports Typer, Rich and pandas: a Ctrl-C in the first half second once printed a
17-line KeyboardInterrupt traceback)."""

import sys


def main() -> None:
    try:
        from profile_all.cli import main as command

        command()
    except KeyboardInterrupt:
        print("profile-all: interrupted (Ctrl-C)", file=sys.stderr)
        sys.exit(130)
