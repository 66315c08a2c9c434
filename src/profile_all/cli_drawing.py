"""The report drawn on the terminal as its files are written, and shown once they are.

The API calls `meanwhile(report)` while a child process writes the report's pages, so
drawing the tables costs the command no time. What is drawn is held until the run folder
is in place: a disk that fills as the report is written is then one line, and no headline
has claimed a report that was never written (`complete, exit code 0` was printed, then
two tracebacks). The last line names the folder the report is in (NAME-2 when NAME was
taken as it was written), escaped.
"""

from __future__ import annotations

import io
import sys
from typing import Any

from rich.console import Console

from profile_all.safe_text import visible


class Drawing:
    """The API's `meanwhile` for a command that prints its report on `console`; `quiet`:
    one line instead, with the status and the folder."""

    def __init__(self, console: Console, quiet: bool = False) -> None:
        self.console, self.quiet = console, quiet
        self._drawn = ""

    def __call__(self, report: Any) -> None:
        """(As the files are written.) The report's headline, tables and problems, drawn
        as `console` would show them, held."""
        if self.quiet:
            return
        from profile_all.render import terminal

        held = io.StringIO()
        terminal.render_body(report, Console(
            file=held, width=self.console.width, color_system=self.console.color_system,
            force_terminal=self.console.is_terminal, legacy_windows=False))
        self._drawn = held.getvalue()

    def show(self, report: Any) -> None:
        """(Once the report is in its folder.) What was drawn, then where the report is."""
        if self.quiet:
            print(f"profile-all: {report.meta.status}, exit code {report.exit_code}: "
                  f"{visible(str(report.run_dir))}", file=sys.stderr)
            return
        from profile_all.render import terminal

        sys.stderr.write(self._drawn)
        sys.stderr.flush()
        terminal.render_where(report, self.console)


def finish(report: Any, drawing: Drawing, as_json: bool) -> None:
    """The report shown once it is in its folder, the JSON on stdout when asked; exit
    with the run's exit code."""
    import typer

    from profile_all.render import output_formats

    drawing.show(report)
    if as_json:
        sys.stdout.write(output_formats.findings_json(report) + "\n")
    raise typer.Exit(report.exit_code)
