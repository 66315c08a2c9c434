"""`profile-all ingest`: a report built from native files that already exist (chrome traces,
pstats files, nsys sqlite exports), so users who have traces get the same report."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from profile_all import environment
from profile_all.errors import UsageError
from profile_all.ingest.detect import read_any
from profile_all.report.report import FORMAT_VERSION, Report
from profile_all.report.store import save
from profile_all.rundir import RunDirectory


def ingest(paths: Sequence[str | Path], out: Path | None = None,
           command: list[str] | None = None) -> Report:
    """Read every file first (a bad one stops everything before anything is written)."""
    if not paths:
        raise UsageError("ingest needs at least one file")
    files = [read_any(path) for path in paths]
    rows = []
    for number, file in enumerate(files, start=1):  # each file is a "pass" of its own
        rows += [[file.backend, number, file.rank, *measured] for measured in file.rows]
    meta = {
        "format": FORMAT_VERSION, "status": "complete", "exit_code": 0,
        "target": {"kind": "ingest",
                   "command": shlex.join(["profile-all", "ingest", *map(str, paths)])},
        "command": command or [],
        "environment": environment.collect(),
        "sources": [{"pass": number, "path": str(file.path.resolve()), "backend": file.backend,
                     "rank": file.rank, **file.facts}
                    for number, file in enumerate(files, start=1)],
        "passes": [], "passes_not_run": [], "skipped_backends": {}, "artifacts": [],
    }
    report = Report.from_rows(rows, meta)
    run_dir = RunDirectory.create(out, "ingest")
    report.run_dir = run_dir.final
    save(report, run_dir.work)
    report.run_dir = run_dir.commit()
    return report
