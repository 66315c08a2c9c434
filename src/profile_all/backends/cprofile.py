"""cprofile (tracer): every Python function call of the target, with cProfile.

Writes `artifacts/cprofile.prof`, which `pstats.Stats`, SnakeViz (`profile-all view RUN`)
and gprof2dot open. Its rows are read back from that file, so a run and `profile-all
ingest` of the same file give the same rows.

Python has one profile hook per thread: a target that starts its own profiler
(`cProfile.Profile().enable()`, `cProfile.run`, `sys.setprofile`) silently ends ours, and
every call after that is missing. So while the target runs, `sys.setprofile` and
`cProfile.Profile.enable` are watched: the first time the target takes the hook, where and
when is noted, and the report says what was lost (the share of the run after it).
"""

from __future__ import annotations

import cProfile
import os
import sys
from collections.abc import Callable
from time import perf_counter
from typing import Any

from profile_all.backends.base import Artifact, Backend, Collected, PassContext
from profile_all.fileio import atomic_path
from profile_all.readers.pstats_reader import read_pstats

_STDLIB = os.path.dirname(os.__file__)


def _caller(depth: int = 2) -> str:
    """`file:line` of the target's code that called the watched function (past the
    standard library's `cProfile.py` and `profile.py`, which call it for the target)."""
    frame = sys._getframe(depth)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_STDLIB):
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class _HookWatch:
    """Notes the first time anything but `ours` takes the profile hook; `undo()` puts
    `sys.setprofile` and `cProfile.Profile.enable` back as they were."""

    def __init__(self, ours: cProfile.Profile, noticed: Callable[[str], None]) -> None:
        self._setprofile = sys.setprofile
        self._had_enable = "enable" in vars(cProfile.Profile)
        enable = cProfile.Profile.enable

        def setprofile(function: Any) -> None:
            noticed(_caller())
            self._setprofile(function)

        def watched_enable(profile: cProfile.Profile, *args: Any, **kwargs: Any) -> None:
            if profile is not ours:
                noticed(_caller())
            enable(profile, *args, **kwargs)

        self._enable = enable
        sys.setprofile = setprofile
        cProfile.Profile.enable = watched_enable

    def undo(self) -> None:
        sys.setprofile = self._setprofile
        if self._had_enable:
            cProfile.Profile.enable = self._enable
        else:
            del cProfile.Profile.enable


class CProfile(Backend):
    name = "cprofile"
    kind = "tracer"
    windowed = True
    measures = "calls, self and cumulative time of every Python function"
    native_file = "cprofile.prof (SnakeViz: profile-all view RUN)"

    def start(self, ctx: PassContext) -> None:
        self._profile = cProfile.Profile()
        self._cut: tuple[float, str] | None = None  # (seconds into the run, where)
        self._watch = _HookWatch(self._profile, self._taken)
        self._started = perf_counter()
        self._profile.enable()

    def _taken(self, where: str) -> None:
        if self._cut is None:
            self._cut = (perf_counter() - self._started, where)

    def stop(self, ctx: PassContext) -> None:
        ran = perf_counter() - self._started
        still_ours = sys.getprofile() is self._profile
        self._profile.disable()
        self._watch.undo()
        if self._cut is not None:
            at, where = self._cut
            self.losses.append(
                f"the target started its own profiler at {where} after {at:.3g} s of "
                f"{ran:.3g} s: Python has one profile hook, so every call in the last "
                f"{1 - at / ran if ran else 0:.0%} of the run is missing from cprofile.prof "
                "and the function rows")
        elif not still_ours:
            self.losses.append("something in the target switched cProfile off (the profile "
                               "hook was not ours at the end): calls after that are missing")

    def collect(self, ctx: PassContext) -> Collected:
        path = ctx.artifact_path("cprofile.prof")
        with atomic_path(path) as tmp:
            self._profile.dump_stats(tmp)
        artifact = Artifact(self.name, str(path.relative_to(ctx.artifacts_dir.parent)),
                            "SnakeViz", "profile-all view {run_dir}")
        return Collected(read_pstats(path), [artifact])
