"""The commands that read what exists: ingest and merge files into a run folder, show a
run, compare two, open one in SnakeViz, list the backends. Registered on the app by
profile_all.cli, which makes bad input one line."""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from profile_all import backends as backend_registry
from profile_all.cli_drawing import Drawing
from profile_all.safe_text import visible

ERR_CONSOLE = Console(stderr=True)


def ingest(
    files: Annotated[list[Path], typer.Argument(
        metavar="FILE|DIR...",
        help="torch.profiler/Kineto chrome traces (.json, .json.gz) or a directory of them, "
        "pstats files (.prof), Nsight Systems files: .nsys-rep (exported with nsys where it "
        "is installed), sqlite exports, `nsys stats --format csv` reports (.csv, .csv.gz); "
        "each file's kind is told by its content")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="the run directory [default: reports/<timestamp>-ingest]")] = None,
    max_unpacked: Annotated[str | None, typer.Option(
        "--max-unpacked", metavar="SIZE",
        help="refuse a file that unpacks to more (4G, 512M) [default: 4G]")] = None,
    max_field: Annotated[str | None, typer.Option(
        "--max-field", metavar="SIZE",
        help="refuse a file with a name or field longer (characters) [default: 1M]")] = None,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="no progress and no tables: one line with the status and the "
        "run directory")] = False,
) -> None:
    """Build a report from profiler files that already exist, a rank column per trace."""
    import profile_all as pa

    drawing = Drawing(ERR_CONSOLE, quiet)
    drawing.show(pa.ingest(files, out, command=sys.argv, max_unpacked=max_unpacked,
                           max_field=max_field, meanwhile=drawing,
                           progress=None if quiet else _Reading()))


class _Reading:
    """A long ingest says how far it is, every HEARTBEAT_SECONDS (10,000 small rank files
    took minutes without a line)."""

    def __init__(self) -> None:
        from profile_all.runner.watching.heartbeat import HEARTBEAT_SECONDS

        self.every = HEARTBEAT_SECONDS
        self.started = self.said = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.said >= self.every and done < total:
            self.said = now
            ERR_CONSOLE.print(f"reading {done:,} of {total:,} files, "
                              f"{now - self.started:.0f} s so far", highlight=False)


def merge(
    run_dirs: Annotated[list[Path], typer.Argument(
        metavar="NODE_DIR...", help="the run directories of each node")],
    out: Annotated[Path | None, typer.Option(
        "--out", "-o", metavar="DIR",
        help="the merged run directory [default: reports/<timestamp>-merge]")]
    = None,
    force: Annotated[bool, typer.Option(
        "--force", help="merge directories that are not from the same run")] = False,
) -> None:
    """Merge the run directories of several nodes into one report, a rank column per row."""
    import profile_all as pa

    drawing = Drawing(ERR_CONSOLE)
    drawing.show(pa.merge(run_dirs, out, force=force, command=sys.argv, meanwhile=drawing))


def list_backends(
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="what each measures and the file it leaves")] = False,
) -> None:
    """List every registered backend, and whether it can run here."""
    table = Table("backend", "kind", "available", *(("measures", "native file") if verbose
                                                     else ()))
    for name in backend_registry.known_names():
        cls = backend_registry.load(name)
        ok, reason = cls.available()
        table.add_row(name, cls.kind, "yes" if ok else f"no: {reason}",
                      *((cls.measures, cls.native_file) if verbose else ()))
    Console().print(table)
    if not verbose:
        print("what each measures, and the file it leaves: profile-all backends -v")


class Format(str, Enum):
    table = "table"
    md = "md"
    csv = "csv"
    json = "json"


def show(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="a run directory")],
    format: Annotated[Format, typer.Option(
        "--format", "-f", metavar="table|md|csv|json",
        help="table (terminal), md (markdown), csv or json (every row)")]
    = Format.table,
    top: Annotated[int, typer.Option(min=1, metavar="N", help="rows of each long table shown")]
    = 10,
    html: Annotated[bool, typer.Option(
        "--html", help="(re)write RUN/report.html and print its path")] = False,
) -> None:
    """Print a run's report: its tables, or every row as CSV or JSON."""
    import profile_all as pa
    from profile_all.render.output_formats import render_to
    from profile_all.runs.store import write_html

    report = pa.load(run_dir)
    if html:
        print(write_html(report))
        return
    render_to(report, format.value, top, sys.stdout)


def compare(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="the run before the change")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="the run after it")],
    fail_above: Annotated[float | None, typer.Option(
        metavar="PCT", help="exit 1 when a region got slower, beyond the run-to-run noise, "
        "by more than PCT percent (for CI; both runs need --repeat 2 or more); exit 3 when "
        "one slower by more than that as measured is inconclusive")] = None,
    pass_undecided: Annotated[bool, typer.Option(
        "--pass-undecided", help="with --fail-above: exit 0, not 3, where the gate cannot "
        "decide")] = False,
    format: Annotated[Format, typer.Option(
        "--format", "-f", metavar="table|md|csv|json")] = Format.table,
    top: Annotated[int, typer.Option(min=1, metavar="N", help="rows of the table shown (csv "
                                     "and json hold every one)")] = 100,
    html: Annotated[Path | None, typer.Option(
        metavar="FILE", help="also write a page with the table and the two runs' operator "
        "trees side by side (TensorBoard's diff view)")] = None,
) -> None:
    """Compare two runs: each region's change in time, with its 95% interval and verdict."""
    import profile_all as pa
    from profile_all.render.output_formats import render_compare

    table = pa.compare(run_a, run_b, fail_above=fail_above, html=html)
    for note in table.attrs.get("notes", []):  # first: what makes the runs unlike
        print(f"profile-all: note: {visible(note)}", file=sys.stderr)
    render_compare(table, format.value, sys.stdout, [f"A: {run_a}", f"B: {run_b}"], top)
    if html is not None:
        print(f"profile-all: the comparison's page: {visible(str(html))}", file=sys.stderr)
    slower, unsure = table.attrs.get("slower"), table.attrs.get("undecided")
    if slower is not None and not slower.empty:
        print(f"profile-all: slower by more than {fail_above:g}% beyond the run-to-run noise: "
              f"{_changes(slower)}", file=sys.stderr)
        raise typer.Exit(1)
    if unsure is not None and not unsure.empty:
        print(f"profile-all: undecided: slower by more than {fail_above:g}% as measured, but "
              f"within the run-to-run noise: {_changes(unsure)}; more repeats (--repeat) "
              "decide" + (" (passed: --pass-undecided)" if pass_undecided else ""),
              file=sys.stderr)
        raise typer.Exit(0 if pass_undecided else 3)
    if slower is not None:
        print(f"profile-all: passed: nothing slower by more than {fail_above:g}% "
              f"({len(table):,} compared)", file=sys.stderr)


def _changes(rows: Any) -> str:
    return ", ".join(f"{visible(name)} ({change:+.1%})" for name, change
                     in zip(rows["name"], rows["change"], strict=True))


def view(
    run_dir: Annotated[Path, typer.Argument(
        metavar="RUN_DIR", help="a run directory with a cProfile file")],
    port: Annotated[int, typer.Option(
        metavar="PORT", help="port on 127.0.0.1 (the next free one if taken)")] = 8080,
    browser: Annotated[bool, typer.Option(help="open a web browser")] = True,
    rank: Annotated[int, typer.Option(
        metavar="N", help="the rank whose file to open (several ranks)")] = 0,
) -> None:
    """Open the run's cProfile file in SnakeViz, served on 127.0.0.1."""
    from profile_all.view import serve_snakeviz

    serve_snakeviz(run_dir, port, browser, rank)
