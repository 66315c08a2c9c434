"""Saving a Report to a run directory and loading it back (no pickle anywhere)."""

from __future__ import annotations

import json
import stat
import uuid
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow
import pyarrow.csv
import pyarrow.parquet

from profile_all import validate
from profile_all.errors import UsageError
from profile_all.fileio import atomic_path, write_atomic
from profile_all.render import markdown, output_formats, sections
from profile_all.report import checked
from profile_all.report.report import Report
from profile_all.report.run_data import timeline_frame
from profile_all.rows import COLUMNS, SAMPLE_COLUMNS, TIMELINE_COLUMNS
from profile_all.run_record import RunRecord
from profile_all.runs import forked

#: the key of report.parquet's file metadata that says which run the rows are of
PARQUET_KEY = b"profile_all"


def _with_run_metadata(report: Report) -> pyarrow.Table:
    """The frame as an Arrow table whose file metadata names the run (its id, status,
    target and command), so that the files of many runs can be told apart once stacked:
    `pyarrow.parquet.read_schema(path).metadata[b"profile_all"]`."""
    table = pyarrow.Table.from_pandas(report.frame, preserve_index=False)
    meta = report.meta
    said = {"run_id": meta.run_id, "format": meta.format, "status": meta.status,
            "target": meta.target, "command": meta.command}
    return table.replace_schema_metadata({**(table.schema.metadata or {}),
                                          PARQUET_KEY: json.dumps(said, default=str)})


def save(report: Report, run_dir: Path,
         meanwhile: Callable[[Report], object] | None = None) -> None:
    """report.parquet, report.csv, summary.md, report.html and meta.json, each written whole
    or not at all, into `run_dir`: the run directory, or the folder it is built in before
    it is renamed to `report.run_dir`. On two cores (forked.py): first a child makes the
    findings and the sections made from the views they read, while the rows' files and the
    other sections are made here; then a child writes the pages while `meanwhile(report)`
    runs here (the command line draws the report in the terminal), or they are written
    here. (An 8-rank ingest's save: 0.44 s with both sides making every view, 0.39 s with
    the findings alone made there, 0.33 s so.)"""
    if report.meta.run_id is None:
        report.meta.run_id = uuid.uuid4().hex
    report.adopt(forked.beside(
        lambda: _findings_and_theirs(report),
        lambda: (_write_rows(report, run_dir), sections.make(report, with_findings=False))))
    whole = sections.shown(report, None)
    if meanwhile is None:
        _write_pages(report, run_dir, whole)
    else:
        forked.beside(lambda: _write_pages(report, run_dir, whole), lambda: meanwhile(report))


def _findings_and_theirs(report: Report) -> dict[str, pd.DataFrame]:
    """(In the child.) Every view made for the findings and the sections made of them."""
    report.findings()
    sections.make(report, with_findings=True)
    return report.made()


def _write_rows(report: Report, run_dir: Path) -> None:
    save_rows(report, run_dir)
    with atomic_path(run_dir / "report.csv") as tmp, tmp.open("wb") as out:
        pyarrow.csv.write_csv(  # arrow's writer: 5x pandas'
            pyarrow.Table.from_pandas(output_formats.visible_text(report.frame),
                                      preserve_index=False), out,
            pyarrow.csv.WriteOptions(quoting_style="needed"))


#: what `save` writes besides the rows and meta.json, each made from them
DERIVED = ("report.csv", "summary.md", "report.html")


def save_rows(report: Report, run_dir: Path) -> None:
    """What `load` reads (the rows' three tables and meta.json), and no more: written
    first, and again alone where a full disk stopped the save."""
    # Arrow is handed open files, not paths: it takes a path as UTF-8, which a folder's
    # name need not be
    with atomic_path(run_dir / "report.parquet") as tmp, tmp.open("wb") as out:
        pyarrow.parquet.write_table(_with_run_metadata(report), out)
    with atomic_path(run_dir / "samples.parquet") as tmp, tmp.open("wb") as out:
        report.samples.to_parquet(out, index=False)
    with atomic_path(run_dir / "timeline.parquet") as tmp, tmp.open("wb") as out:
        report.timeline.to_parquet(out, index=False)
    # with the rows, before the CSV and the pages: a disk that fills at report.html (its
    # charts: megabytes) leaves a folder that `load` reads (kept as NAME.unsaved)
    write_atomic(run_dir / "meta.json", json.dumps(report.meta.to_json(), indent=2, default=str))


def _write_pages(report: Report, run_dir: Path, whole: list[sections.Shown]) -> None:
    from profile_all.render import html  # only where a report is saved

    write_atomic(run_dir / "summary.md", markdown.render(report, shown=sections.cut(
        whole, markdown.TOP)))
    write_atomic(run_dir / "report.html", html.render(report, shown=whole))


def write_html(report: Report) -> Path:
    """(Re)write report.html in the report's run directory; its path."""
    from profile_all.render import html

    path = report.run_dir / "report.html"
    try:
        write_atomic(path, html.render(report))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def write_compare_html(path: Path, table: pd.DataFrame, tree: pd.DataFrame, run_a: str,
                       run_b: str) -> None:
    """The comparison's page (render/compare_html.py) at `path`, whole or not at all."""
    from profile_all.render import compare_html

    if path.name in ("", ".", "..") or path.is_dir():
        raise UsageError(f"cannot write {path}: a folder, not a file name (--html FILE)")
    try:
        write_atomic(path, compare_html.render(table, tree, run_a, run_b))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None


#: the largest meta.json read: a run's record of 10,000 passes or ingested files is a few
#: MiB; one of 100,000 passes took a minute to show, and printed every one
MAX_META_BYTES = 64 << 20


def load(run_dir: str | Path) -> Report:
    """The Report of a run directory; UsageError with one line when it cannot be read."""
    run_dir = validate.path("run_dir", run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"not a run directory: {run_dir} (no such folder)")
    for name in ("meta.json", "report.parquet", "samples.parquet", "timeline.parquet"):
        if not (run_dir / name).resolve().is_relative_to(run_dir.resolve()):
            raise UsageError(f"{run_dir}/{name} is a link out of the run folder: refused")
    try:
        size = (run_dir / "meta.json").stat().st_size
        if size > MAX_META_BYTES:
            raise UsageError(f"{run_dir}/meta.json is {size:,} bytes, over the "
                             f"{MAX_META_BYTES >> 20} MiB a run's record holds (10,000 "
                             "passes or files take a few): a damaged or crafted run folder, "
                             "not read")
        said = json.loads(_regular(run_dir / "meta.json").read_text())
    except FileNotFoundError:
        raise UsageError(f"not a run directory: {run_dir} (no meta.json)") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{run_dir}/meta.json cannot be read: {error}") from None
    except RecursionError:
        raise UsageError(f"{run_dir}/meta.json is not profile-all run metadata (nested "
                         "deeper than Python's JSON reader goes)") from None
    meta = RunRecord.from_json(said, run_dir)
    try:
        frame = checked.read_table(_regular(run_dir / "report.parquet"))
    except FileNotFoundError:
        raise UsageError(f"{run_dir}/report.parquet is missing") from None
    except (OSError, ValueError, pyarrow.ArrowException) as error:
        raise UsageError(f"{run_dir}/report.parquet cannot be read: {error}") from None
    if list(frame.columns) != COLUMNS:
        raise UsageError(f"{run_dir}/report.parquet does not have the report's columns")
    frame = checked.check_frame(frame, run_dir, "report.parquet", ["value"], ["pass", "rank"])
    frame, said = checked.possible_values(frame, "report.parquet")
    if meta.format < 2:
        frame, timeline = _timeline_of_format_1(frame)
    else:
        timeline = _table(run_dir, "timeline.parquet", TIMELINE_COLUMNS,
                          ["start", "end", "value"])
    samples = _table(run_dir, "samples.parquet", SAMPLE_COLUMNS, ["value"])
    if samples is not None:
        samples, also = checked.possible_samples(samples, "samples.parquet")
        said += also
    if timeline is not None:
        timeline, also = checked.possible_values(timeline, "timeline.parquet")
        said += also
    meta.doubts = [*meta.doubts, *said]
    return Report(frame, meta, run_dir, samples, timeline)


def _regular(path: Path) -> Path:
    """`path`, refused in one line where it is no regular file: a FIFO there blocked `show`,
    `compare`, `merge` and `pa.load` for good. FileNotFoundError where it is not there."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise UsageError(f"{path} is not a regular file (a FIFO, a socket, a device or a "
                         "folder): a damaged or crafted run folder, not read")
    return path


def _timeline_of_format_1(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Format 1 kept the memory timeline in the frame: scope `memory`, the sample's time in
    the stat column as `t=<seconds>`. (Its region calls were in mprofile.dat only.)"""
    kept = (frame["scope"] == "memory") & frame["stat"].str.startswith("t=")
    samples = frame[kept]
    times = pd.to_numeric(samples["stat"].str.removeprefix("t="), errors="coerce")
    entries = [[b, p, r, "rss", n, t, t, v, u] for b, p, r, n, t, v, u in zip(
        samples["backend"], samples["pass"], samples["rank"], samples["name"], times,
        samples["value"], samples["unit"], strict=True)]
    return frame[~kept].reset_index(drop=True), timeline_frame(entries)


def _table(run_dir: Path, name: str, columns: list[str],
           numeric: list[str]) -> pd.DataFrame | None:
    """One of the run's extra tables (samples, timeline); None (the Report makes it empty)
    for a run saved without it."""
    try:
        table = checked.read_table(_regular(run_dir / name))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pyarrow.ArrowException) as error:
        raise UsageError(f"{run_dir}/{name} cannot be read: {error}") from None
    if list(table.columns) != columns:
        raise UsageError(f"{run_dir}/{name} does not have the {name} columns")
    return checked.check_frame(table, run_dir, name, numeric, ["pass", "rank"])
