"""Progress of a run: in a terminal, pass k of n with its backends and a live elapsed time
(Rich); piped (a CI log, `| tee`), a line as each pass starts, since nothing live shows
there; and a line as each pass ends, with its status and time."""

from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from profile_all import units as fmt
from profile_all.pass_record import PassRecord
from profile_all.runner.planning.plan import Pass


def in_notebook() -> PassProgress | None:
    """Progress lines in the cell's output when the API runs in a Jupyter kernel (a run
    takes seconds to minutes there too); None elsewhere (a script using the API prints
    nothing it did not ask for)."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
        return None
    return PassProgress(Console())


class PassProgress:
    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None

    def pass_started(self, run_pass: Pass, count: int) -> None:
        if not self.console.is_terminal:
            self.console.print(f"pass {run_pass.index}/{count} {run_pass.label}: started",
                               highlight=False)
            return
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"),
                                  TimeElapsedColumn(), console=self.console, transient=True,
                                  refresh_per_second=4,
                                  redirect_stdout=True, redirect_stderr=True)
        self._progress.start()
        self._progress.add_task(f"pass {run_pass.index}/{count}: {run_pass.label}", total=None)

    def pass_running(self, run_pass: Pass, count: int, seconds: float, doing: str) -> None:
        """Said every few seconds while a pass takes long: what it is doing now."""
        said = f"pass {run_pass.index}/{count}: {run_pass.label}, {fmt.seconds(seconds)} so far"
        said += f": {doing}" if doing else ""
        if self._progress is not None and self._progress.tasks:
            self._progress.update(self._progress.tasks[0].id, description=said)
        else:
            self.console.print(said, highlight=False)

    def pass_ended(self, run_pass: Pass, count: int, summary: PassRecord) -> None:
        if self._progress:
            self._progress.stop()
        ok = summary.status == "ok"
        line = Text(f"{'✓' if ok else '✗'} pass {run_pass.index}/{count} {run_pass.label}: "
                    f"{summary.status}", style="green" if ok else "red")
        line.append(f" in {fmt.seconds(summary.process_wall_time)}", style="default")
        if summary.error:
            line.append(f" ({summary.error})", style="default")
        self.console.print(line)
