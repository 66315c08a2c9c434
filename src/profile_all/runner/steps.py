"""The steps of a pass: when each came, and the end of the pass's window of steps.

Every pass records its steps, whatever its backends: the per-step times that a pass's
overhead over the clean pass is measured with, and the step count that says whether two
passes did the same work. A step is a `pa.step()`; in a script that calls none, an
`optimizer.step()` of any torch optimizer (a global hook). One `perf_counter` call a step.

A pass with `max_steps` ends its target at that step: the step raises StepLimit (a
BaseException, so the target's `except Exception` lets it through), which unwinds the
target's frames (its regions close, its `finally` blocks run) and ends the pass as `ok`.
"""

from __future__ import annotations

import sys
from array import array
from time import perf_counter
from typing import Any

from profile_all.backends.base import kept_samples


class StepLimit(BaseException):
    """The pass's window of steps is over."""


class StepClock:
    def __init__(self, max_steps: int | None = None) -> None:
        self.marks = array("d")
        self.optimizer_marks = array("d")
        self.max_steps = max_steps
        #: the target was ended at `max_steps`
        self.limited = False
        self._hook: Any = None

    def _limit(self, steps: int, source: str) -> None:
        if self.max_steps is not None and steps >= self.max_steps:
            self.limited = True
            raise StepLimit(f"the pass's window of {self.max_steps} steps ({source}) is over: "
                            "its target was ended there")

    def step(self) -> None:
        self.marks.append(perf_counter())
        self._limit(len(self.marks), "pa.step()")

    def _optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.optimizer_marks.append(perf_counter())
        if not self.marks:  # a script that marks its own steps is windowed by those
            self._limit(len(self.optimizer_marks), "optimizer.step()")

    def start(self) -> None:
        optim = sys.modules.get("torch.optim.optimizer")  # when the pass imported torch
        if optim is not None:
            self._hook = optim.register_optimizer_step_post_hook(self._optimizer_step)

    def stop(self) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def facts(self) -> dict[str, Any]:
        """Steps seen, what marked them, the time of each step after the first (the first
        has no start), and the window the pass was ended at (None: it ran whole)."""
        if self.marks:
            marks, source = self.marks, "pa.step()"
        elif self.optimizer_marks:
            marks, source = self.optimizer_marks, "optimizer.step()"
        else:
            marks, source = array("d"), ""
        durations = [marks[i] - marks[i - 1] for i in range(1, len(marks))]
        return {"steps": len(marks), "step_source": source,
                "step_times": kept_samples(durations),
                "window": self.max_steps if self.limited else None}
