"""The memory backend's CUDA figures: peak allocated and reserved device memory per region
(the peak counter reset as a region opens, folded into its parent's as it closes), and the
memory allocated at each step's end."""

from __future__ import annotations

from typing import Any


class CudaPeaks:
    """Peak allocated and reserved device memory per region, reset as regions open."""

    def __init__(self, torch: Any) -> None:
        self._cuda = torch.cuda
        self._stack: list[list[float]] = []
        self.run_peak = [0.0, 0.0]
        self.regions: dict[tuple[str, str], list[float]] = {}
        #: (seconds since the target started, bytes allocated) at each step's end
        self.at_steps: list[tuple[float, float]] = []

    def _current(self) -> list[float]:
        return [self._cuda.max_memory_allocated(), self._cuda.max_memory_reserved()]

    def _fold(self, peak: list[float]) -> None:
        into = self._stack[-1] if self._stack else self.run_peak
        into[0], into[1] = max(into[0], peak[0]), max(into[1], peak[1])

    def enter(self) -> bool:
        if not self._cuda.is_initialized():
            return False
        self._fold(self._current())
        self._cuda.reset_peak_memory_stats()
        self._stack.append([0.0, 0.0])
        return True

    def exit(self, key: tuple[str, str]) -> None:
        own = self._stack.pop()
        current = self._current()
        peak = [max(own[0], current[0]), max(own[1], current[1])]
        self._fold(peak)
        seen = self.regions.setdefault(key, [0.0, 0.0])
        seen[0], seen[1] = max(seen[0], peak[0]), max(seen[1], peak[1])

    def finish(self) -> None:
        if self._cuda.is_initialized():
            self._fold(self._current())

    def step_ended(self, seconds: float) -> None:
        """The memory allocated now, as a step ends: the timeline's `cuda` series."""
        if self._cuda.is_initialized():
            self.at_steps.append((seconds, float(self._cuda.memory_allocated())))
