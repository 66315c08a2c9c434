"""Which backends run together.

Profilers distort what they measure, and some collide, so timers share one clean pass
(the reference every other pass's overhead is measured against) and every other backend
runs alone in a pass of its own. Each pass is a fresh process.
"""

from __future__ import annotations

from dataclasses import dataclass

from profile_all.backends import Backend


@dataclass
class Pass:
    index: int  # 1-based, as shown to the user
    backends: list[str]
    timing: bool = False  # only timers: the clean reference pass

    @property
    def label(self) -> str:
        return "+".join(self.backends) or "benchmark"


def plan_passes(backends: list[type[Backend]], *, timing_pass: bool = False) -> list[Pass]:
    """`timing_pass`: plan the clean timing pass even without timers (a model's benchmark)."""
    timers = [b.name for b in backends if b.kind == "timer"]
    groups = [(timers, True)] if timers or timing_pass else []
    groups += [([b.name], False) for b in backends if b.kind != "timer"]
    return [Pass(index, names, timing) for index, (names, timing) in enumerate(groups, start=1)]
