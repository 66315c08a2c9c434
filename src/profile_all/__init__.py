"""profile-all: profile PyTorch scripts with every profiler you already use, in one report.

    import profile_all as pa
    report = pa.run("train.py", args=["--epochs", "1"])
    report.frame        # one tidy DataFrame, a row per measured value
    report.summary()    # a row per region

    with pa.region("forward"): ...     # heard by every active backend
    pa.step()                          # marks the end of an iteration
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from profile_all.errors import ProfileAllError, UsageError
from profile_all.regions import region, step

__all__ = ["ProfileAllError", "Report", "UsageError", "load", "region", "run", "step"]


def __getattr__(name: str) -> Any:
    """Report and load import pandas: only when asked, never in the target's process."""
    if name == "Report":
        from profile_all.report.report import Report

        return Report
    if name == "load":
        from profile_all.report.store import load

        return load
    raise AttributeError(f"module 'profile_all' has no attribute {name!r}")


def run(script: str | Path, args: Sequence[str] = (), *, backends: Sequence[str] | None = None,
        out: str | Path | None = None, timeout: float | None = None, isolate: bool = True,
        options: dict[str, dict[str, Any]] | None = None) -> Any:
    """Run `script` with `args` under each pass of backends; write and return its Report.

    backends: names as `profile-all backends` lists them (default: wallclock and cprofile).
    out: the run directory (default `reports/<timestamp>-<script>/`).
    timeout: seconds each pass may run before it is stopped (exit code 124).
    isolate: False runs the passes in this process (no timeout then).
    options: per-backend options, e.g. {"wallclock": {"cpu_time": False}}.
    """
    from profile_all import orchestrator
    from profile_all.targets import ScriptTarget

    return orchestrator.run(ScriptTarget(str(script), [str(a) for a in args]),
                            backend_names=backends, out=Path(out) if out else None,
                            timeout=timeout, isolate=isolate, options=options)
