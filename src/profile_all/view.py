"""Opening a run's native files in their viewers. SnakeViz listens on 127.0.0.1 only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from profile_all import validate
from profile_all.errors import UsageError
from profile_all.report.store import load


def profile_file(run_dir: Path) -> Path:
    report = load(run_dir)
    profiles = [report.run_dir / a["path"] for a in report.meta.get("artifacts", [])
                if a["path"].endswith(".prof")]
    if not profiles:
        raise UsageError(f"{run_dir} has no cProfile file: run with -b cprofile")
    if not profiles[0].is_file():
        raise UsageError(f"{profiles[0]} is missing")
    return profiles[0]


def snakeviz_command(profile: Path, port: int, open_browser: bool) -> list[str]:
    command = [sys.executable, "-m", "snakeviz", "-H", "127.0.0.1", "-p", str(port)]
    if not open_browser:
        command.append("--server")
    return [*command, str(profile)]


def serve_snakeviz(run_dir: Path, port: int, open_browser: bool) -> None:
    """Become SnakeViz (exec): Ctrl-C and kill reach the server itself, no orphan is left."""
    validate.whole("port", port, 1)
    if port > 65535:
        raise validate.ArgumentValueError(f"port must be 1 to 65535, got {port}")
    command = snakeviz_command(profile_file(run_dir), port, open_browser)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
