"""Opening a run's native files in their viewers. SnakeViz listens on 127.0.0.1 only."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from profile_all import validate
from profile_all.errors import UsageError
from profile_all.runs.store import load


def _rank_of(path: str) -> int:
    """The rank a native file belongs to: `cprofile.rank2.prof` -> 2; 0 with one rank."""
    found = re.search(r"\.rank(\d+)\.", Path(path).name)
    return int(found.group(1)) if found else 0


def profile_file(run_dir: Path, rank: int = 0) -> Path:
    """The run's cProfile file of `rank` (each rank of a torchrun run has its own): one of
    the folder's own files (an ingest keeps a copy of each pstats file it read), never a
    path that meta.json names elsewhere."""
    report = load(run_dir)
    profiles = {_rank_of(a.path): report.run_dir / a.path
                for a in report.meta.artifacts if a.path.endswith(".prof")}
    ingested = report.meta.target.get("kind") == "ingest"
    if not profiles:
        raise UsageError(f"{run_dir} has no cProfile file: " + (
            "none of the files it was ingested from is a pstats file (or it was ingested "
            "before profile-all kept a copy: ingest them again)"
            if ingested else "run with -b cprofile"))
    if rank not in profiles:
        raise UsageError(f"{run_dir} has no cProfile file of rank {rank}: its ranks are "
                         f"{', '.join(map(str, sorted(profiles)))}")
    if not profiles[rank].is_file():
        raise UsageError(f"{profiles[rank]} is missing")
    return profiles[rank]


def snakeviz_command(profile: Path, port: int, open_browser: bool) -> list[str]:
    command = [sys.executable, "-m", "snakeviz", "-H", "127.0.0.1", "-p", str(port)]
    if not open_browser:
        command.append("--server")
    return [*command, str(profile)]


def serve_snakeviz(run_dir: Path, port: int, open_browser: bool, rank: int = 0) -> None:
    """Become SnakeViz (exec): Ctrl-C and kill reach the server itself, no orphan is left."""
    validate.whole("port", port, 1)
    validate.whole("rank", rank, 0)
    if port > 65535:
        raise validate.ArgumentValueError(f"port must be 1 to 65535, got {port}")
    command = snakeviz_command(profile_file(run_dir, rank), port, open_browser)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
