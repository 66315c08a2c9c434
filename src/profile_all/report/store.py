"""Saving a Report to a run directory and loading it back (no pickle anywhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow

from profile_all.errors import UsageError
from profile_all.fileio import atomic_path, write_atomic
from profile_all.report import markdown
from profile_all.report.report import FORMAT_VERSION, Report
from profile_all.report.schema import COLUMNS


def save(report: Report, run_dir: Path) -> None:
    """report.parquet, report.csv, summary.md and meta.json, each written whole or not at all."""
    with atomic_path(run_dir / "report.parquet") as tmp:
        report.frame.to_parquet(tmp, index=False)
    with atomic_path(run_dir / "report.csv") as tmp:
        report.frame.to_csv(tmp, index=False)
    write_atomic(run_dir / "summary.md", markdown.render(report))
    write_atomic(run_dir / "meta.json", json.dumps(report.meta, indent=2, default=str))


def load(run_dir: str | Path) -> Report:
    """The Report of a run directory; UsageError with one line when it cannot be read."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"not a run directory: {run_dir} (no such folder)")
    try:
        meta = json.loads((run_dir / "meta.json").read_text())
    except FileNotFoundError:
        raise UsageError(f"not a run directory: {run_dir} (no meta.json)") from None
    except (OSError, ValueError) as error:
        raise UsageError(f"{run_dir}/meta.json cannot be read: {error}") from None
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
    return Report(frame, meta, run_dir)
