"""Opening a run's native files in their viewers. SnakeViz listens on 127.0.0.1 only."""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
import webbrowser
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
    kind = report.meta.target.get("kind")
    if not profiles:
        raise UsageError(f"{run_dir} has no cProfile file: " + {
            "ingest": "none of the files it was ingested from is a pstats file (or it was "
                      "ingested before profile-all kept a copy: ingest them again)",
            "process": "attach samples a running process with py-spy, which writes no "
                       "cProfile file: its artifacts/py_spy.speedscope.json opens at "
                       "https://www.speedscope.app"}.get(kind, "run with -b cprofile"))
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


def browser_here() -> str:
    """'' where a web browser can show SnakeViz's page here; else why not. On Linux without a
    display (an SSH session, a container) only text browsers could start, and SnakeViz's
    page needs JavaScript: SnakeViz found none, printed its usage and stopped (exit 2)."""
    graphical = sys.platform != "linux" or os.environ.get("DISPLAY") or os.environ.get(
        "WAYLAND_DISPLAY")
    if not graphical:
        return "no display (DISPLAY and WAYLAND_DISPLAY are unset)"
    try:
        webbrowser.get()
    except webbrowser.Error:
        return "no web browser found"
    return ""


def _reach_hint(port: int, why: str) -> str:
    """What to do where no browser opens: the URL SnakeViz prints, and the SSH tunnel."""
    return (f"profile-all: {why}: serving only; open the URL below in a browser (from "
            f"another machine: ssh -N -L {port}:127.0.0.1:{port} {getpass.getuser()}@"
            f"{socket.gethostname()}, then the same URL there; the URL's port where {port} "
            "was taken)")


def serve_snakeviz(run_dir: Path, port: int, open_browser: bool, rank: int = 0) -> None:
    """Become SnakeViz (exec): Ctrl-C and kill reach the server itself, no orphan is left.
    Where no browser can open, it serves all the same and says how to reach it."""
    validate.whole("port", port, 1)
    validate.whole("rank", rank, 0)
    if port > 65535:
        raise validate.ArgumentValueError(f"port must be 1 to 65535, got {port}")
    profile = profile_file(run_dir, rank)
    why = browser_here() if open_browser else ""
    if why:
        print(_reach_hint(port, why), file=sys.stderr)
    command = snakeviz_command(profile, port, open_browser and not why)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
