"""Which backends run together, and in which order.

Profilers distort what they measure, and some collide, so timers share one clean pass
(the reference every other pass's overhead is measured against) and every other backend
runs alone in a pass of its own. A pass runs in a process of its own, or, where its
backends can start and stop at a step's end, in a window of steps inside the clean timing
pass's process (runner/inside/windows.py): the script is run once.

With `repeat` > 1 the clean timing pass runs that many times, spread over the run: first,
last, and evenly between the other passes (T P P T P T), so that its repeats sample the
machine over the whole run: the spread between them is the run-to-run noise that
overheads and comparisons are judged by.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profile_all.backends import Backend
from profile_all.runner.spec import result_path


@dataclass
class Pass:
    index: int  # 1-based, as shown to the user, in the order the passes run
    backends: list[str]
    timing: bool = False  # only timers: the clean reference pass
    repeat: int = 0  # which repeat of the timing pass (1-based), 0 for the others
    #: the pass whose process runs this one's backends in a window of steps, if it gets
    #: there (None: a process of its own)
    host: int | None = None

    @property
    def label(self) -> str:
        return "+".join(self.backends) or "benchmark"


def plan_passes(backends: list[type[Backend]], *, timing_pass: bool = False,
                repeat: int = 1, windows: bool = False,
                options: dict[str, dict[str, Any]] | None = None,
                ranks: bool = False) -> list[Pass]:
    """`timing_pass`: plan the clean timing pass even without timers (a model's benchmark).
    `repeat`: how many times the timing pass runs (at least 1). `windows`: the passes
    whose backends can start and stop at a step (`Backend.windowed`) are hosted by the
    first timing pass, each in a window of steps inside its process, and those that run
    beside the timers with their `options` (`Backend.beside_with`) join them. `ranks`:
    the run has several ranks (torchrun), whose windows begin and end at the same step on
    each: a sampler's, which lasts until it has its samples (a time, not a step count),
    is not hosted."""
    options = options or {}
    timers = [b.name for b in backends
              if b.kind == "timer" or (windows and b.beside_with(options.get(b.name, {})))]
    others = [[b.name] for b in _in_window_order(backends, windows) if b.name not in timers]
    repeats = max(1, repeat) if timers or timing_pass else 0
    planned = [Pass(index, names, timing=number > 0, repeat=number)
               for index, (names, number) in enumerate(_order(timers, others, repeats),
                                                       start=1)]
    if windows:
        _host_windows(planned, _windowed(backends, ranks))
    return planned


def _windowed(backends: list[type[Backend]], ranks: bool) -> set[str]:
    """The backends a window may hold: with several ranks, no sampler's."""
    return {b.name for b in backends if b.windowed and not (ranks and b.kind == "sampler")}


def _order(timers: list[str], others: list[list[str]], repeats: int
           ) -> list[tuple[list[str], int]]:
    """(backends, repeat number) of each pass in turn: the timing pass's first repeat
    before every other pass, the last after them, the rest evenly between."""
    before = Counter(round(k * len(others) / (repeats - 1)) if repeats > 1 else 0
                     for k in range(repeats))
    order: list[tuple[list[str], int]] = []
    done = 0
    for position in range(len(others) + 1):
        for _ in range(before[position]):
            done += 1
            order.append((timers, done))
        if position < len(others):
            order.append((others[position], 0))
    return order


def _in_window_order(backends: list[type[Backend]], windows: bool) -> list[type[Backend]]:
    """In windows, the samplers' last: theirs last a least time (enough samples), which on
    a script of short steps may take the rest of it."""
    return sorted(backends, key=lambda b: b.kind == "sampler") if windows else backends


def _host_windows(planned: list[Pass], windowed: set[str]) -> None:
    """The first timing pass hosts every other pass whose backends can run in a window."""
    if planned and planned[0].timing:
        for other in planned[1:]:
            if not other.timing and set(other.backends) <= windowed:
                other.host = planned[0].index


def hosted_windows(passes: list[Pass], host: Pass, steps: int, fewest: int,
                   scratch: Path) -> list[dict[str, Any]]:
    """The passes `host` hosts in windows of `steps` steps (at least `fewest` where steps
    are long), as its spec lists them (their results written in `scratch`)."""
    return [{"number": hosted.index, "backends": hosted.backends, "steps": steps,
             "fewest": fewest, "result_path": result_path(scratch, hosted.index)}
            for hosted in passes if hosted.host == host.index]
