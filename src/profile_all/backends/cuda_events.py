"""cuda-events (timer): device time of every region, step and the run, by CUDA events.

GPU work is asynchronous: a host clock read without a synchronisation times the launches,
not the work. Here each region records a `torch.cuda.Event(enable_timing=True)` on the
current stream when it opens and another when it closes; the pair's `elapsed_time` is
the device's time between them. No region synchronises: at each `pa.step()` the pairs
whose end has completed (`Event.query()`) are read, and the rest after one
`torch.cuda.synchronize()` when the target ends.

`warmup_steps=N` (CLI `--warmup-steps`) leaves the first N steps out: no events are
recorded in them, and the report says how many were excluded.

Work on other streams than the current one is not between the events of a region unless
the streams are synchronised with it; the numbers are the current stream's.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from profile_all import validate
from profile_all.backends.base import Backend, Collected, Option, PassContext, kept_samples
from profile_all.rows import Facts, row
from profile_all.stats import summarize

STEP = ("step", None)
_MS = 1e-3  # elapsed_time is in milliseconds


def _torch_cuda_build() -> str | None:
    """The CUDA version torch was built for, read from its version file without importing
    it (seconds, and it must not touch the device in profile-all's process); None for a
    CPU build."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version = Path(spec.submodule_search_locations[0]) / "version.py"
    try:
        match = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", version.read_text(),
                          re.MULTILINE)
    except OSError:
        return None
    return match.group(1) if match else None


def _gpus() -> int:
    """How many GPUs NVML sees (no CUDA context is made), 0 without a driver; and none
    when CUDA_VISIBLE_DEVICES hides them all."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "x").strip() in ("", "-1"):
        return 0
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return 0
    count = ctypes.c_uint(0)
    if nvml.nvmlInit_v2() != 0:
        return 0
    try:
        return count.value if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0 else 0
    finally:
        nvml.nvmlShutdown()


class CudaEvents(Backend):
    name = "cuda-events"
    facts = Facts(region_timer="gpu_time")
    kind = "timer"
    measures = "device time of the run, of each region and step (CUDA events, no sync per region)"
    imports = ("torch",)
    requires = (("torch", "torch"),)
    offered_options = (Option("warmup_steps", "--warmup-steps", (int,), 0,
                              "cuda-events: leave the first N steps out (said so in the "
                              "report)", "N"),)

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> None:
        validate.whole("--warmup-steps", options.get("warmup_steps", 0), 0)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, reason = super().available()
        if not ok:
            return ok, reason
        built = _torch_cuda_build()
        if built is None:
            return False, "CUDA not available (torch is a CPU build)"
        if not _gpus():
            return False, (f"CUDA not available (torch is built for CUDA {built}, but NVML "
                           "sees no GPU: no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them)")
        return True, ""

    def start(self, ctx: PassContext) -> None:
        import torch

        self._event = lambda: torch.cuda.Event(enable_timing=True)
        self._synchronize = torch.cuda.synchronize
        self._warmup_steps = int(self.options.get("warmup_steps", 0))
        self._steps_seen = 0
        self._pending: list[tuple[tuple[str, Any], Any, Any]] = []
        self._samples: dict[tuple[str, Any], list[float]] = {}
        self._step_start: Any = None
        self._run_start = self._record() if self._warmup_steps == 0 else None
        self._run_end: Any = None

    def _record(self) -> Any:
        event = self._event()
        event.record()
        return event

    @property
    def _warming_up(self) -> bool:
        return self._steps_seen < self._warmup_steps

    def enter(self, name: str, parent: str) -> Any:
        if self._warming_up:
            return None
        event = self._record()
        if self._step_start is None:
            self._step_start = event
        return event

    def exit(self, name: str, parent: str, token: Any) -> None:
        if token is not None:
            self._pending.append(((name, parent), token, self._record()))

    def step(self) -> None:
        self._steps_seen += 1
        if self._warming_up:
            return
        boundary = self._record()
        if self._run_start is None:  # the first step after the warm-up
            self._run_start = boundary
        elif self._step_start is not None:
            self._pending.append((STEP, self._step_start, boundary))
        self._step_start = boundary
        self._resolve(only_completed=True)

    def _resolve(self, *, only_completed: bool) -> None:
        waiting = []
        for key, start, end in self._pending:
            if only_completed and not end.query():
                waiting.append((key, start, end))
                continue
            self._samples.setdefault(key, []).append(start.elapsed_time(end) * _MS)
        self._pending = waiting

    def stop(self, ctx: PassContext) -> None:
        self._run_end = self._record() if self._run_start is not None else None
        self._synchronize()
        self._resolve(only_completed=False)

    def collect(self, ctx: PassContext) -> Collected:
        rows = [row("run", "run", "warmup_steps_excluded", min(self._steps_seen,
                                                                self._warmup_steps),
                    unit="count")]
        if self._run_start is not None and self._run_end is not None:
            rows.append(row("run", "run", "gpu_time",
                            self._run_start.elapsed_time(self._run_end) * _MS))
        kept = []
        for (name, parent), samples in self._samples.items():
            scope = "step" if parent is None else "region"
            parent = parent or ""
            kept.append((scope, name, parent, "gpu_time", kept_samples(samples)))
            rows.append(row(scope, name, "calls", len(samples), parent=parent))
            rows += [row(scope, name, "gpu_time", value, stat=stat, parent=parent)
                     for stat, value in summarize(samples).items()]
        return Collected(rows, samples=kept)
