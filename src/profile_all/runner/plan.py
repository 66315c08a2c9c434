"""Which backends run together, and in which order.

Profilers distort what they measure, and some collide, so timers share one clean pass
(the reference every other pass's overhead is measured against) and every other backend
runs alone in a pass of its own. Each pass is a fresh process.

With `repeat` > 1 the clean timing pass runs that many times, spread over the run: first,
last, and evenly between the other passes (T P P T P T), so that its repeats sample the
machine over the whole run: the spread between them is the run-to-run noise that
overheads and comparisons are judged by.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from profile_all.backends import Backend


@dataclass
class Pass:
    index: int  # 1-based, as shown to the user, in the order the passes run
    backends: list[str]
    timing: bool = False  # only timers: the clean reference pass
    repeat: int = 0  # which repeat of the timing pass (1-based), 0 for the others

    @property
    def label(self) -> str:
        return "+".join(self.backends) or "benchmark"


def plan_passes(backends: list[type[Backend]], *, timing_pass: bool = False,
                repeat: int = 1) -> list[Pass]:
    """`timing_pass`: plan the clean timing pass even without timers (a model's benchmark).
    `repeat`: how many times the timing pass runs (at least 1)."""
    timers = [b.name for b in backends if b.kind == "timer"]
    others = [[b.name] for b in backends if b.kind != "timer"]
    repeats = max(1, repeat) if timers or timing_pass else 0
    # the first repeat before every other pass, the last after them, the rest evenly between
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
    return [Pass(index, names, timing=number > 0, repeat=number)
            for index, (names, number) in enumerate(order, start=1)]
