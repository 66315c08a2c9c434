"""Saving a Report to a run directory and loading it back (no pickle anywhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow

from profile_all import validate
from profile_all.errors import UsageError
from profile_all.fileio import atomic_path, write_atomic
from profile_all.report import checked, markdown
from profile_all.report.report import FORMAT_VERSION, Report
from profile_all.rows import COLUMNS, SAMPLE_COLUMNS


def save(report: Report, run_dir: Path) -> None:
    """report.parquet, report.csv, summary.md, report.html and meta.json, each written whole
    or not at all, into `run_dir`: the run directory, or the folder it is built in before
    it is renamed to `report.run_dir`."""
    from profile_all.report import html  # matplotlib: only where a report is saved

    with atomic_path(run_dir / "report.parquet") as tmp:
        report.frame.to_parquet(tmp, index=False)
    with atomic_path(run_dir / "samples.parquet") as tmp:
        report.samples.to_parquet(tmp, index=False)
    with atomic_path(run_dir / "report.csv") as tmp:
        report.frame.to_csv(tmp, index=False)
    write_atomic(run_dir / "summary.md", markdown.render(report))
    write_atomic(run_dir / "report.html", html.render(report, files_at=run_dir))
    write_atomic(run_dir / "meta.json", json.dumps(report.meta, indent=2, default=str))


def write_html(report: Report) -> Path:
    """(Re)write report.html in the report's run directory; its path."""
    from profile_all.report import html

    path = report.run_dir / "report.html"
    try:
        write_atomic(path, html.render(report))
    except OSError as error:
        raise UsageError(f"cannot write {path}: {error.strerror or error}") from None
    return path


def load(run_dir: str | Path) -> Report:
    """The Report of a run directory; UsageError with one line when it cannot be read."""
    run_dir = validate.path("run_dir", run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"not a run directory: {run_dir} (no such folder)")
    for name in ("meta.json", "report.parquet", "samples.parquet"):
        if not (run_dir / name).resolve().is_relative_to(run_dir.resolve()):
            raise UsageError(f"{run_dir}/{name} is a link out of the run folder: refused")
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except FileNotFoundError:
        raise UsageError(f"not a run directory: {run_dir} (no meta.json)") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{run_dir}/meta.json cannot be read: {error}") from None
    except RecursionError:
        raise UsageError(f"{run_dir}/meta.json is not profile-all run metadata (nested "
                         "deeper than Python's JSON reader goes)") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("format"), int):
        raise UsageError(f"{run_dir}/meta.json is not profile-all run metadata")
    if meta["format"] > FORMAT_VERSION:
        raise UsageError(f"{run_dir} was written by a newer profile-all (format "
                         f"{meta['format']}, this one reads up to {FORMAT_VERSION}); upgrade")
    try:
        frame = pd.read_parquet(run_dir / "report.parquet")
    except FileNotFoundError:
        raise UsageError(f"{run_dir}/report.parquet is missing") from None
    except (OSError, ValueError, pyarrow.ArrowException) as error:
        raise UsageError(f"{run_dir}/report.parquet cannot be read: {error}") from None
    if list(frame.columns) != COLUMNS:
        raise UsageError(f"{run_dir}/report.parquet does not have the report's columns")
    checked.check_meta(meta, run_dir)
    frame = checked.check_frame(frame, run_dir, "report.parquet", ["value"], ["pass", "rank"])
    return Report(frame, meta, run_dir, _samples(run_dir))


def _samples(run_dir: Path) -> pd.DataFrame | None:
    """The per-call samples; None (an empty table) for a run saved without them."""
    try:
        samples = pd.read_parquet(run_dir / "samples.parquet")
    except FileNotFoundError:
        return None
    except (OSError, ValueError, pyarrow.ArrowException) as error:
        raise UsageError(f"{run_dir}/samples.parquet cannot be read: {error}") from None
    if list(samples.columns) != SAMPLE_COLUMNS:
        raise UsageError(f"{run_dir}/samples.parquet does not have the samples' columns")
    return checked.check_frame(samples, run_dir, "samples.parquet", ["value"], ["pass", "rank"])
